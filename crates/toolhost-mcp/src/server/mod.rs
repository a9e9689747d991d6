//! The MCP server: an adapter from MCP requests to [`Runtime::call`], the
//! same call pipeline as every other entry point (lookup, validation,
//! policy, hooks, approval, limits, result approval). Nothing here decides
//! anything about a call; it only translates.
//!
//! - `tools/list` lists [`Runtime::offered_tools`]: what the policy denies
//!   outright for the server's agent profile is not listed. With tool search
//!   on ([`ServerOptions::tool_search`], `search.rs`), only the pinned tools
//!   and `search_tools` are, and any allowed tool is called by name.
//! - `tools/call` runs [`Runtime::call`] with the profile, a progress sink
//!   that becomes `notifications/progress` when the client sent a progress
//!   token, and an approver that asks the client (elicitation). A client's
//!   cancellation drops the call, which stops its sandbox.
//! - A tool the operator runs as a task ([`ServerOptions::tasks`],
//!   `tasks.rs`) answers a 2026-07-28 caller that declared the Tasks
//!   extension at once with a task, which goes on through the same
//!   [`Runtime::call`]; `tasks/get`, `tasks/update` and `tasks/cancel`
//!   reach the caller's own tasks.
//! - A reload that changes the tool set sends `notifications/tools/list_changed`
//!   to every connected client (2025-11-25 and older: to the session's peer;
//!   2026-07-28: on the client's `subscriptions/listen` stream).
//!
//! Nothing a client sends is read as policy: the profile is the server's,
//! fixed when it starts.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, DiscoverResult,
    GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, SubscriptionFilter, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use serde_json::Value;
use toolhost_runtime::{CallContext, Runtime, load::PluginEvent};
use tracing::Instrument;

pub(crate) mod elicit;
mod error;
pub(crate) mod http;
mod identity;
mod metrics;
pub(crate) mod oauth;
mod parallel;
mod priming;
mod prompts;
mod resources;
mod revision;
pub(crate) mod round_trip;
mod search;
pub mod skills;
pub mod tasks;
pub(crate) mod upstream;

pub use crate::tools::{CACHED_META_KEY, DETAILS_META_KEY, ERROR_KIND_META_KEY, PLUGIN_META_KEY};
pub use elicit::ELICITATION_TIMEOUT;
pub use error::McpServeError;
pub use http::{
    ClientToken, DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_REQUEST_BYTES, HttpOptions,
    HttpServer, TokenFileError, TokenRole,
};
pub use oauth::{
    CACHE_TTL as OAUTH_CACHE_TTL, Caller, CallerRule, IntrospectionOptions, MAX_LEEWAY_SECONDS,
    MAX_TOKEN_BYTES, OAuthError, OAuthOptions,
};

use crate::tools;
use elicit::ElicitingApprover;
use identity::{ClientAsks, ClientIdentity, ClientProfile};
use metrics::Metrics;
use round_trip::{OuterCall, RoundTrips};
use search::Search;
use tasks::TaskSupport;

/// How many progress reports of one call may wait to be sent; more are
/// dropped (a plugin that floods progress cannot grow the host's memory).
const PROGRESS_QUEUE: usize = 64;

/// What an MCP server serves, and as whom.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// The policy's agent profile every call runs under (`None`: the
    /// policy's defaults). Chosen by whoever starts the server, never by
    /// the client.
    pub agent: Option<String>,
    /// The key that seals the `requestState` of a 2026-07-28 approval round
    /// trip (at least 32 bytes). Replicas behind one load balancer need the
    /// same key, since a retry may reach another replica; `None`: a random
    /// key for this process.
    pub state_key: Option<Vec<u8>>,
    /// Who answers a policy's or a hook's `ask` on a call this server runs
    /// (and a result approval): the calling client, or nobody (the call is
    /// denied). [`Asks::Client`] by default; a server reachable from other
    /// machines should use [`Asks::Deny`], or every remote caller could
    /// approve its own calls (`host serve` does on a non-loopback address).
    pub asks: Asks,
    /// The operator's approvals queue, where [`Asks::Operator`] sends a
    /// call (`None`: such a call is denied, saying no operator answers).
    /// The console (`HttpOptions::console`) shows and answers it.
    pub operator_queue: Option<toolhost_runtime::operator::OperatorQueue>,
    /// Where replicas share the console's recent failures (`None`: each
    /// console lists its own replica's).
    pub failures: Option<std::sync::Arc<dyn toolhost_runtime::failures::FailureLog>>,
    /// Tool search for clients without their own: `tools/list` lists the
    /// pinned tools and `search_tools` (see `search.rs`). `None` (the
    /// default): every tool the profile allows is listed.
    pub tool_search: Option<toolhost_search::ToolSearch>,
    /// Which tools run as tasks (the `io.modelcontextprotocol/tasks`
    /// extension, `tasks.rs`), and their bounds. None by default.
    pub tasks: tasks::TaskSettings,
    /// Where tasks are kept when replicas share them (`[state]`:
    /// `toolhost_state::PostgresTasks`); `None` (the default): in this
    /// process only. The server must be made within a Tokio runtime for
    /// it to take part (`tasks/replicas.rs`).
    pub task_store: Option<Arc<dyn toolhost_runtime::tasks::TaskStore>>,
}

impl From<Asks> for toolhost_runtime::policy::AskRoute {
    fn from(asks: Asks) -> toolhost_runtime::policy::AskRoute {
        use toolhost_runtime::policy::AskRoute;
        match asks {
            Asks::Client => AskRoute::Client,
            Asks::Operator => AskRoute::Operator,
            Asks::Deny => AskRoute::Deny,
        }
    }
}

impl From<toolhost_runtime::policy::AskRoute> for Asks {
    fn from(route: toolhost_runtime::policy::AskRoute) -> Asks {
        use toolhost_runtime::policy::AskRoute;
        match route {
            AskRoute::Client => Asks::Client,
            AskRoute::Operator => Asks::Operator,
            AskRoute::Deny => Asks::Deny,
        }
    }
}

/// Who answers an `ask` on a call an MCP server runs (see
/// [`ServerOptions::asks`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Asks {
    /// The client that made the call, through MCP elicitation (or the
    /// 2026-07-28 input round trip): right when the client is the user's
    /// own (stdio, loopback).
    #[default]
    Client,
    /// Nobody: an `ask` denies the call, saying so; the operator allows
    /// the tool in the policy instead.
    Deny,
    /// The operator, in the console's approvals queue
    /// ([`ServerOptions::operator_queue`]): the call waits (bounded, with a
    /// timeout that denies) and its caller is told so through progress
    /// notifications. What makes `ask` mean something for remote callers.
    Operator,
}

/// The approver of `asks` when it is not the caller's own: the
/// operator's queue, answering for `client` (its reminders to `waits`),
/// or nobody (a denial that says why). The caller's own is the request's
/// (elicitation) or the task's input, which each entry point makes.
pub(crate) fn not_the_callers(
    asks: Asks,
    queue: Option<&toolhost_runtime::operator::OperatorQueue>,
    client: &str,
    waits: Option<&tokio::sync::mpsc::Sender<(String, Option<f32>)>>,
) -> Arc<dyn toolhost_runtime::Approver> {
    match (asks, queue) {
        (Asks::Operator, Some(queue)) => {
            let mut approver = queue.approver().client(Some(client.to_owned()));
            if let Some(tx) = waits {
                let tx = tx.clone();
                approver = approver.on_wait(move |note| {
                    // Full: this reminder is dropped, the next one goes.
                    let _ = tx.try_send((note.to_owned(), None));
                });
            }
            Arc::new(approver)
        }
        (Asks::Operator, None) => Arc::new(elicit::NobodyAnswers(elicit::NO_OPERATOR)),
        (Asks::Client | Asks::Deny, _) => Arc::new(elicit::NobodyAnswers(elicit::NOBODY_ANSWERS)),
    }
}

/// Serves a [`Runtime`]'s tools to MCP clients; see the module docs. One
/// value serves any number of clients (it is cheap to clone).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use toolhost_mcp::{McpServer, ServerOptions};
///
/// let runtime = toolhost_runtime::Runtime::builder()
///     .plugin_dir("target/plugins")
///     .build()
///     .await?;
/// McpServer::new(runtime, ServerOptions::default()).serve_stdio().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct McpServer {
    runtime: Runtime,
    options: Arc<ServerOptions>,
    metrics: Arc<Metrics>,
    round_trips: Arc<RoundTrips>,
    search: Option<Arc<Search>>,
    /// The upstream MCP servers among the runtime's sources (`upstream.rs`;
    /// `gateway.rs` finds them).
    upstreams: Arc<dyn upstream::Upstreams>,
    /// What each client asked to hear from upstream servers (`upstream.rs`).
    listeners: Arc<upstream::Listeners>,
    /// Its calls in flight, and where the next one runs (`parallel.rs`).
    in_flight: parallel::InFlight,
    /// The calls that run as tasks, and whose each is (`tasks.rs`).
    tasks: Arc<tasks::Tasks>,
    /// The skills its plugins ship (`skills.rs`).
    skills: Arc<skills::Skills>,
}

impl McpServer {
    /// A server for `runtime`'s tools, and for what the upstream servers
    /// `upstreams` finds among its sources offer besides tools (the
    /// gateway's [`McpServer::new`], in `gateway.rs`, finds the MCP
    /// client's sources).
    pub(crate) fn with_upstreams(
        runtime: Runtime,
        options: ServerOptions,
        upstreams: Arc<dyn upstream::Upstreams>,
    ) -> McpServer {
        let tasks = Arc::new(tasks::Tasks::new(
            options.tasks.clone(),
            options.task_store.clone(),
        ));
        let in_flight = parallel::InFlight::default();
        tasks::replicas::start(
            &tasks,
            tasks::replicas::Runner {
                runtime: runtime.clone(),
                in_flight: in_flight.clone(),
                operator_queue: options.operator_queue.clone(),
            },
        );
        McpServer {
            runtime,
            upstreams,
            round_trips: Arc::new(RoundTrips::new(options.state_key.as_deref())),
            tasks,
            skills: Arc::default(),
            search: options
                .tool_search
                .clone()
                .map(|s| Arc::new(Search::new(s))),
            options: Arc::new(options),
            metrics: Arc::new(Metrics::new()),
            listeners: Arc::default(),
            in_flight,
        }
    }

    /// Its metrics (served at `/metrics` over HTTP).
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The runtime it serves.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Serves one client on this process's stdin and stdout until the client
    /// closes them.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        use rmcp::ServiceExt;
        let running = self
            .serve(stdio())
            .await
            .map_err(|e| McpServeError::Start(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| McpServeError::Stopped(e.to_string()))?;
        Ok(())
    }

    /// The profile a request's calls run under: its bearer token's (HTTP),
    /// else the server's.
    fn agent(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        context
            .extensions
            .get::<::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ClientProfile>())
            .map(|p| p.0.clone())
            .or_else(|| self.options.agent.clone())
    }

    /// Who answers a request's `ask`s: its bearer token's setting (HTTP),
    /// else its profile's (`ask = "operator"` in the policy), else the
    /// server's.
    fn asks(&self, context: &RequestContext<RoleServer>, agent: Option<&str>) -> Asks {
        if let Some(asks) = context
            .extensions
            .get::<::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ClientAsks>())
        {
            return asks.0;
        }
        self.runtime
            .policy()
            .ask_route(agent)
            .map_or(self.options.asks, Asks::from)
    }

    /// The `instructions` a caller under profile `agent` is given: the
    /// usage rules of the plugins that offer it at least one tool. A
    /// plugin whose tools the profile's policy all denies is not named,
    /// as its tools are not listed.
    fn instructions(&self, agent: Option<&str>) -> Option<String> {
        let offered = self.runtime.offered_tools(agent, None);
        let rules: Vec<String> = self
            .runtime
            .plugins()
            .into_iter()
            .filter(|p| offered.iter().any(|t| t.plugin == p.name))
            .filter_map(|p| p.usage.map(|u| format!("{}: {u}", p.name)))
            .collect();
        (!rules.is_empty()).then(|| rules.join("\n"))
    }

    /// `info` with the instructions for the caller of `context`'s request.
    fn instructed(&self, info: ServerConfig, context: &RequestContext<RoleServer>) -> ServerConfig {
        match self.instructions(self.agent(context).as_deref()) {
            Some(instructions) => info.with_instructions(instructions),
            None => info,
        }
    }

    /// Who answers the `ask`s of a request: the client (elicitation), the
    /// operator's queue (the caller hears that it waits through `waits`,
    /// its progress reports, when it listens), or nobody.
    fn approver(
        &self,
        context: &RequestContext<RoleServer>,
        asks: Asks,
        client: &str,
        waits: Option<&tokio::sync::mpsc::Sender<(String, Option<f32>)>>,
    ) -> Arc<dyn toolhost_runtime::Approver> {
        match asks {
            Asks::Client => Arc::new(ElicitingApprover {
                peer: context.peer.clone(),
            }),
            elsewhere => not_the_callers(
                elsewhere,
                self.options.operator_queue.as_ref(),
                client,
                waits,
            ),
        }
    }

    async fn call(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mut recorded = self.metrics.call();
        let args = Value::Object(request.arguments.take().unwrap_or_default());
        if let Some(search) = &self.search
            && request.name == toolhost_search::SEARCH_TOOLS
        {
            let offered = self
                .runtime
                .offered_tools(self.agent(&context).as_deref(), None);
            if search.serves(&offered) {
                recorded.outcome("ok");
                return Ok(search.answer(&offered, &args).into());
            }
        }
        let modern = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let agent = self.agent(&context);
        let asks = self.asks(&context, agent.as_deref());
        let asks_client = asks == Asks::Client;
        // Each caller's results stay its own in the result cache, and its
        // saved approvals answer it alone: never the user at the host's
        // terminal (a call without a client), never another caller.
        let client = ClientIdentity::of_request(&context).0;
        // A tool the operator runs as a task, for a caller that can take
        // one: a 2026-07-28 caller that declared the extension (the
        // extension is of that revision; 2025-11-25's experimental tasks
        // are another wire, and an older session's declaration is ignored,
        // as clients such as the Inspector expect).
        let takes_tasks = modern
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        // A tool the caller may not see is answered as any call of it is
        // (not found), never with what its task settings say.
        let (support, idempotent) = match self.tasks.settings().support(&request.name) {
            TaskSupport::Never => (TaskSupport::Never, false),
            support => match self
                .runtime
                .offered_tools(agent.as_deref(), None)
                .into_iter()
                .find(|t| t.name == request.name)
            {
                Some(tool) => (support, tool.annotations.idempotent),
                None => (TaskSupport::Never, false),
            },
        };
        match support {
            TaskSupport::Never => {}
            _ if takes_tasks => {
                recorded.outcome("task");
                let call = tasks::TaskCall {
                    name: request.name.into_owned(),
                    args,
                    agent,
                    client,
                    asks,
                    idempotent,
                };
                return self.call_as_task(call, &context).await;
            }
            TaskSupport::Optional => {}
            TaskSupport::Required => {
                recorded.outcome("missing-capability");
                return Err(McpError::missing_required_client_capability(
                    ClientCapabilities::builder().enable_tasks().build(),
                ));
            }
        }
        // 2026-07-28: the answers this call carries, each bound to the one
        // call it was asked about, in a state sealed to this call: to
        // toolhost's own questions (when the caller answers them) and to an
        // upstream server's (`peer/relay.rs`).
        let round_trip = match modern.then(|| {
            let outer = OuterCall::of(&client, agent.as_deref(), &request.name, &args);
            self.round_trip(
                outer,
                request.request_state.as_deref(),
                request.input_responses.as_ref(),
                &context,
            )
        }) {
            Some(Err(refused)) => {
                recorded.outcome("invalid-state");
                return Err(refused);
            }
            opened => opened.and_then(Result::ok),
        };
        let relay = round_trip.as_ref().map(|(_, _, relay)| relay.clone());
        let round_trip = round_trip.map(|(outer, approver, _)| (outer, approver));
        let progress_sink = context
            .meta
            .get_progress_token()
            .map(|token| progress(context.peer.clone(), token));
        let approver: Arc<dyn toolhost_runtime::Approver> = match &round_trip {
            Some((_, a)) if asks_client => a.clone(),
            _ => self.approver(
                &context,
                asks,
                &client,
                progress_sink.as_ref().map(|p| &p.0),
            ),
        };
        let mut cx = CallContext::new()
            .call_id(format!("mcp-{}", request_id(&context)))
            .approver(approver)
            .client(client)
            .extension(crate::peer::Downstream::of(&context));
        if let Some(agent) = agent {
            cx = cx.agent(agent);
        }
        if let Some(relay) = &relay {
            cx = cx.extension(relay.clone());
        }
        let forwarder = progress_sink.map(|(tx, forwarder)| {
            cx = std::mem::take(&mut cx).on_progress(move |_tool, message, fraction| {
                // Full: the report is dropped rather than queued without bound.
                let _ = tx.try_send((message.to_owned(), fraction));
            });
            forwarder
        });
        let call = {
            let (runtime, name) = (self.runtime.clone(), request.name.clone());
            // Under this request's span, on whichever thread it runs; boxed,
            // so the futures around it (rmcp's handler task, moved into its
            // task cell) stay small: the call's own is large.
            Box::pin(async move { runtime.call(&name, args, cx).await }.in_current_span())
        };
        let outcome = self.in_flight.run(call, &context.ct).await;
        if let Some(mut f) = forwarder {
            // The call is over and its progress sink dropped: the reports
            // still queued go out before the result (within a bound, for a
            // client that does not read).
            if outcome.is_none() || tokio::time::timeout(PROGRESS_DRAIN, &mut f).await.is_err() {
                f.abort();
            }
        }
        // 2026-07-28: the call stopped at a question; send it back (also
        // when a program went on past the denial: its user has not
        // answered yet).
        // An upstream server said the caller lacks a capability: so it hears.
        if let Some(error) = relay.as_ref().and_then(crate::peer::InputRelay::lacking)
            && outcome.is_some()
        {
            recorded.outcome("missing-capability");
            return Err(error);
        }
        // And an upstream server's question, which goes on to the caller.
        let upstream = relay
            .as_ref()
            .and_then(crate::peer::InputRelay::asked)
            .filter(|_| outcome.is_some());
        let asked = round_trip.filter(|(_, a)| {
            outcome.is_some() && ((asks_client && a.asked()) || upstream.is_some())
        });
        let can_answer = upstream.is_some()
            || context
                .client_capabilities()
                .is_some_and(|c| c.elicitation.is_some());
        if let Some((outer, approver)) = asked {
            let refusal = if can_answer {
                match self.round_trips.ask(&outer, &approver, upstream) {
                    Ok(Some(input)) => {
                        recorded.outcome("input-required");
                        return Ok(CallToolResponse::InputRequired(input));
                    }
                    Ok(None) => None,
                    Err(e @ round_trip::AskError::TooManyQuestions) => Some(e.to_string()),
                    Err(e) => {
                        tracing::warn!("cannot build the input_required result: {e}");
                        None
                    }
                }
            } else {
                Some(
                    "the user's approval is needed and this MCP client cannot be asked (it did \
                     not declare form elicitation)"
                        .to_owned(),
                )
            };
            // A call that failed at the question says why it was not asked.
            if let (Some(why), Some(Err(_))) = (refusal, &outcome) {
                recorded.outcome("permission-denied");
                return Ok(tools::error_result(
                    &format!("permission denied for `{}`: {why}", request.name),
                    "permission-denied",
                )
                .into());
            }
        }
        let result = match outcome {
            Some(Ok(r)) => {
                recorded.outcome("ok");
                tools::success(r)
            }
            Some(Err(e)) => {
                recorded.outcome(metrics::kind_label(&e.kind()));
                // A protocol error where the session's revision says so.
                if let Some(error) =
                    revision::protocol_error(&e, context.protocol_version().as_ref())
                {
                    return Err(error);
                }
                tools::failure(&e)
            }
            // Dropping the call stopped its sandbox; the client is no longer
            // waiting for this answer.
            None => {
                tracing::info!(tool = %toolhost_runtime::shown::shown_name(&request.name), "the client cancelled the call: its sandbox is stopped");
                tools::error_result("the client cancelled the call", "aborted")
            }
        };
        Ok(result.into())
    }
}

/// How long the progress reports queued when a call ends may take to go out.
const PROGRESS_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// Stdin and stdout for the protocol: rmcp's [`stdio_pipes`](rmcp::transport::stdio_pipes).
/// When both are pipes (as an MCP client sets them up), they are reopened
/// through `/proc/self/fd` as descriptions of their own and read and
/// written without blocking, on the runtime's own threads
/// (`tokio::io::stdin` would hand every read to a blocking thread, a thread
/// hop on every message: about 30 µs a round trip here;
/// `docs/log.md`). Anything else (a terminal, a file, `/dev/null`
/// as stdout) gets tokio's blocking stdio for both. The process's own
/// descriptors are never made non-blocking: an earlier version set
/// `O_NONBLOCK` on stdin's shared description when stdin was a pipe and
/// stdout a file, and then read it blockingly (`EAGAIN`: `host mcp >
/// out.txt` quit at once), and the flag leaked to whoever shared the pipe.
fn stdio() -> (rmcp::transport::StdioReader, rmcp::transport::StdioWriter) {
    rmcp::transport::stdio_pipes()
}

fn request_id(context: &RequestContext<RoleServer>) -> String {
    match serde_json::to_value(&context.id) {
        Ok(Value::String(s)) => s,
        Ok(v) => v.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// Sends the call's progress reports to the client as
/// `notifications/progress` for `token`, through a bounded queue: the
/// queue's sender (for the plugin's reports and the host's own, such as a
/// wait for the operator) and the task that sends.
fn progress(
    peer: Peer<RoleServer>,
    token: ProgressToken,
) -> (
    tokio::sync::mpsc::Sender<(String, Option<f32>)>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(String, Option<f32>)>(PROGRESS_QUEUE);
    let task = tokio::spawn(async move {
        let mut last = 0.0_f64;
        let mut count = 0.0_f64;
        while let Some((message, fraction)) = rx.recv().await {
            count += 1.0;
            let (value, total) = match fraction {
                Some(f) if f.is_finite() => (f64::from(f.clamp(0.0, 1.0)) * 100.0, Some(100.0)),
                _ => (count, None),
            };
            // Progress only ever goes up, whatever the plugin reports.
            last = value.max(last);
            let mut note =
                ProgressNotificationParam::new(token.clone(), last).with_message(message);
            if let Some(total) = total {
                note = note.with_total(total);
            }
            if peer.notify_progress(note).await.is_err() {
                break;
            }
        }
    });
    (tx, task)
}

/// The span of one MCP request served (OpenTelemetry's MCP conventions:
/// `tools/call NAME`, `mcp.method.name`, `jsonrpc.request.id`), a child of
/// the client's span when its `_meta` carries a `traceparent` (SEP-414).
fn request_span(
    method: &'static str,
    tool: Option<&str>,
    context: &RequestContext<RoleServer>,
) -> tracing::Span {
    // What the client named, as the runtime keeps it: bounded and safe.
    let tool = tool.map(toolhost_runtime::shown::shown_name);
    let tool = tool.as_deref();
    let span = tracing::info_span!(
        "mcp_request",
        otel.name = format_args!("{method}{}{}", if tool.is_some() { " " } else { "" }, tool.unwrap_or("")),
        otel.kind = "server",
        mcp.method.name = method,
        gen_ai.tool.name = tool,
        jsonrpc.request.id = %toolhost_runtime::shown::shown_name(&request_id(context)),
    );
    toolhost_telemetry::propagate::adopt(
        &span,
        context.meta.get_traceparent(),
        context.meta.get_tracestate(),
    );
    span
}

/// Whether `event` changes the tool set a client sees.
fn changes_tools(event: &PluginEvent) -> bool {
    matches!(
        event,
        PluginEvent::Loaded { .. } | PluginEvent::Reloaded { .. } | PluginEvent::Unloaded { .. }
    )
}

impl rmcp::ServerHandler for McpServer {
    /// Without instructions: they depend on the caller's profile, and go
    /// out with `initialize` and `server/discover` (`instructed`).
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        // Upstream MCP servers: what they offer besides tools (`upstream.rs`).
        upstream::offered(&self.runtime, self.upstreams.as_ref(), &mut capabilities);
        if self.tasks.settings().enabled() {
            capabilities.extensions.get_or_insert_default().insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            );
        }
        // Plugins' skills (`skills.rs`): served over resources.
        if self.skills.any(&self.runtime, self.upstreams.as_ref()) {
            let mut settings = serde_json::Map::new();
            settings.insert("directoryRead".into(), Value::Bool(true));
            capabilities
                .extensions
                .get_or_insert_default()
                .insert(rmcp::model::SKILLS_EXTENSION_ID.to_owned(), settings);
            capabilities.resources.get_or_insert_default();
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolhost", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let info = self.negotiate_initialize(&request)?;
        Ok(self.instructed(info, &context))
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        Ok(DiscoverResult::from_server_info(
            rmcp::ServerHandler::supported_protocol_versions(self).into_owned(),
            self.instructed(rmcp::ServerHandler::get_info(self), &context),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let span = request_span("tools/list", None, &context);
        let _in = span.enter();
        let offered = self
            .runtime
            .offered_tools(self.agent(&context).as_deref(), None);
        let tools = match &self.search {
            Some(search) => search.listed(&offered),
            None => offered.iter().map(tools::mcp_tool).collect(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// The tool called, for rmcp's check of a 2026-07-28 call's
    /// `Mcp-Param-*` headers against its arguments (SEP-2243): only a tool
    /// whose schema annotates a parameter with `x-mcp-header` (any other
    /// has no header to check, and its schema is not copied per call).
    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let schema = self.runtime.tool_schema(name)?;
        tools::annotates_headers(&schema).then(|| tools::header_checked(name, &schema))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let span = request_span("tools/call", Some(&request.name), &context);
        self.call(request, context).instrument(span).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        let client = ClientIdentity::of_request(&context).0;
        Ok(GetTaskResult::new(
            self.tasks.get(&client, &request.task_id).await?,
        ))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let client = ClientIdentity::of_request(&context).0;
        self.tasks
            .update(&client, &request.task_id, request.input_responses)
            .await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let client = ClientIdentity::of_request(&context).0;
        self.tasks.cancel(&client, &request.task_id).await?;
        tracing::info!(
            target: "toolhost::audit",
            task = %toolhost_runtime::shown::shown_name(&request.task_id),
            client = %toolhost_runtime::shown::shown_name(&client),
            outcome = "task-cancelled",
            "a task was asked to stop"
        );
        Ok(())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, McpError> {
        let span = request_span("skills/list", None, &context);
        Ok(self.list_skills_for(&context).instrument(span).await)
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, McpError> {
        let span = request_span("skills/get", None, &context);
        self.skill_for(&request.uri, &context)
            .instrument(span)
            .await
    }

    async fn read_resource_directory(
        &self,
        request: rmcp::model::ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceDirectoryResult, McpError> {
        let span = request_span("resources/directory/read", None, &context);
        self.skill_directory(&request.uri, &context)
            .instrument(span)
            .await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        let span = request_span("resources/list", None, &context);
        self.resources(&context).instrument(span).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let span = request_span("resources/templates/list", None, &context);
        self.resource_templates(&context).instrument(span).await
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        let span = request_span("resources/read", None, &context);
        let read = self.read(&request.uri, &context).instrument(span).await?;
        Ok(read.into())
    }

    #[allow(deprecated)] // resources/subscribe: every revision before 2026-07-28
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = request_span("resources/subscribe", None, &context);
        self.subscription(&request.uri, true, &context)
            .instrument(span)
            .await
    }

    #[allow(deprecated)] // resources/unsubscribe: every revision before 2026-07-28
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = request_span("resources/unsubscribe", None, &context);
        self.subscription(&request.uri, false, &context)
            .instrument(span)
            .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        let span = request_span("prompts/list", None, &context);
        self.prompts(&context).instrument(span).await
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        let span = request_span("prompts/get", None, &context);
        self.prompt(request, &context).instrument(span).await
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        let span = request_span("completion/complete", None, &context);
        self.complete_for(request, &context).instrument(span).await
    }

    #[allow(deprecated)] // logging (SEP-2577): every revision served here has it
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let span = request_span("logging/setLevel", None, &context);
        self.log_level(request.level, &context)
            .instrument(span)
            .await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Upstream servers' notifications, as the client asks (`upstream.rs`).
        upstream::forward(
            self.runtime.clone(),
            self.upstreams.as_ref(),
            self.listeners.clone(),
            context.peer.clone(),
        );
        // A client with a session (stdio, or HTTP before 2026-07-28): tell
        // it when the tool set changes, for as long as it is connected.
        let mut events = self.runtime.subscribe();
        let peer = context.peer;
        tokio::spawn(async move {
            loop {
                // Ends with the client's connection: checked at every event
                // and at least every 30 s, so a closed session's task does
                // not wait for the next reload.
                let event = tokio::select! {
                    e = events.recv() => e,
                    () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {
                        if peer.is_transport_closed() {
                            break;
                        }
                        continue;
                    }
                };
                match event {
                    Ok(event) if !changes_tools(&event) => {}
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if peer.notify_tool_list_changed().await.is_err() {
                            break;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let _ = requested;
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        // 2026-07-28: list changes go out on the client's subscription stream.
        let mut events = self.runtime.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    Ok(event) if !changes_tools(&event) => {}
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}
