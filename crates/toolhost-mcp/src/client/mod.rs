//! The MCP client: an external MCP server as a tool source
//! ([`McpSource`], a [`ToolSource`]). Its tools join the runtime's
//! registry as `PREFIX` + their names (`git__status`), and every call to
//! one goes through the runtime's one pipeline — policy, hooks, approvals,
//! limits, events — like a plugin's.
//!
//! A source keeps one connection to its server, made by a task of its own
//! (`connect.rs` starts the process or opens the HTTP session):
//!
//! - at start-up (`start = "eager"`: building the runtime waits for it,
//!   within `connect-timeout`) or in the background (`"lazy"`: the host
//!   starts serving at once and the tools join when the server answers);
//! - a server that exits or drops the connection is reconnected, at once
//!   the first time and then with a backoff from 0.5 s doubling to 30 s,
//!   while calls to its tools fail at once with the reason (a dead server
//!   is a tool error, never a hung agent);
//! - `notifications/tools/list_changed` re-lists its tools, and the
//!   runtime's registry follows;
//! - every message it sends is bounded (`max-message-bytes`), every list
//!   it pages through too, and its calls run under the runtime's
//!   `timeout-ms` for it (a call past it is cancelled on the server).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolhost_mcp::{McpServerConfig, McpSource};
//!
//! let time = McpSource::start(McpServerConfig::stdio("time", "mcp-server-time", &[]))?;
//! let runtime = toolhost_runtime::Runtime::builder()
//!     .source(Arc::new(time))
//!     .build()
//!     .await?;
//! let now = runtime
//!     .call("time__get_current_time", serde_json::json!({"timezone": "UTC"}), Default::default())
//!     .await?;
//! println!("{}", now.output);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ServerResult,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RoleClient, ServiceError};
use rmcp::{ClientHandler, ErrorData};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use toolhost_runtime::{
    ToolSource, source::SourceCall, source::SourceError, source::SourceFuture,
    source::SourceOutcome, source::SourceProgress, source::SourceState, source::SourceStatus,
    source::SourceTool,
};
use tracing::Instrument;

use crate::tools;

mod config;
mod connect;
mod oauth;
mod offers;
mod process_sandbox;
mod requests;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_ENV, DEFAULT_MAX_MESSAGE_BYTES, HttpEndpoint, McpServerConfig,
    McpTransport, ProcessSandbox, Start, StdioServer,
};
pub use oauth::{
    MAX_SIGN_INS, OAuthGrant, OAuthSettings, SIGN_IN_TIMEOUT, SignInError, SignInPrompt, SignedIn,
    sign_in, sign_out, token_file,
};
pub use requests::{
    ANSWER_TIMEOUT, DEFAULT_MAX_SAMPLING_TOKENS, DEFAULT_REQUESTS_PER_MINUTE, MAX_FORWARDED_BYTES,
    ServerRequests,
};

use connect::{OpenError, Session};
use oauth::{Asked, Authorizer};
pub(crate) use offers::Upstream;

/// The most pages of `tools/list` read from one server.
const MAX_LIST_PAGES: usize = 100;
/// The most tools read from one server (the runtime keeps at most 1000).
const MAX_LISTED_TOOLS: usize = 2000;
/// How long a server's list must be quiet after `tools/list_changed`
/// before it is read again: a server that announces changes without end
/// rebuilds the catalog a few times a second at most.
const RELIST_DEBOUNCE: Duration = Duration::from_millis(250);
/// The first wait before reconnecting after a failed attempt, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// Why a source cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum McpClientError {
    /// The name is not a valid plugin name.
    #[error("MCP server name `{0}` must match ^[a-zA-Z0-9_-]{{1,64}}$")]
    InvalidName(String),
    /// The configuration cannot work (an empty command, a bad URL or header,
    /// a sandbox asked for where there is none).
    #[error("MCP server `{name}`: {message}")]
    Invalid {
        /// The server.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An OAuth client with a secret or a key, and no `issuer`: the
    /// authorization server it may be sent to is not known.
    #[error(
        "MCP server `{name}`: its OAuth settings keep a client secret or key, so they need `issuer`, \
         the authorization server's issuer identifier exactly as its metadata says it \
         (`issuer = \"https://login.example.com\"` in its `oauth` table): the secret and the \
         tokens' refresh go to that server only, whichever one the MCP server names"
    )]
    IssuerRequired {
        /// The server.
        name: String,
    },
}

/// An external MCP server as a tool source. Dropping it stops the
/// connection (and a stdio server's process group).
pub struct McpSource {
    shared: Arc<Shared>,
    manager: tokio::task::JoinHandle<()>,
}

impl Drop for McpSource {
    fn drop(&mut self) {
        self.manager.abort();
    }
}

/// The connection as calls see it.
#[derive(Clone)]
enum Link {
    Starting,
    Up(Peer<RoleClient>),
    Down(String),
}

/// What the source and its connection task share.
pub(crate) struct Shared {
    pub(crate) config: McpServerConfig,
    link: watch::Sender<Link>,
    state: Mutex<(SourceState, Option<String>)>,
    tools: Mutex<Arc<[SourceTool]>>,
    changes: watch::Sender<u64>,
    /// Set by `notifications/tools/list_changed`.
    relist: Notify,
    /// Where each running call's progress goes, by progress token.
    progress: Mutex<HashMap<String, SourceProgress>>,
    /// The OAuth sign-in state of an HTTP server that has OAuth settings,
    /// made at the first connection.
    oauth: tokio::sync::OnceCell<Option<Arc<Authorizer>>>,
    /// Its resources, prompts and notifications (`offers.rs`).
    offers: offers::Offers,
    /// The calls in flight, for the requests the server sends back
    /// during them (`requests.rs`).
    requests: requests::InFlight,
}

impl McpSource {
    /// Checks `config` and starts connecting (in a task; within a Tokio
    /// runtime). A server that cannot be started or reached is not an
    /// error here: the source reports it in its status and keeps trying.
    pub fn start(config: McpServerConfig) -> Result<McpSource, McpClientError> {
        if !toolhost_runtime::contract::is_valid_tool_name(&config.name) {
            return Err(McpClientError::InvalidName(config.name));
        }
        if let McpTransport::Http(HttpEndpoint {
            oauth: Some(settings),
            ..
        }) = &config.transport
        {
            oauth::check(&config.name, settings)?;
        }
        connect::check(&config).map_err(|message| McpClientError::Invalid {
            name: config.name.clone(),
            message,
        })?;
        let shared = Arc::new(Shared {
            config,
            link: watch::channel(Link::Starting).0,
            state: Mutex::new((SourceState::Starting, None)),
            tools: Mutex::new(Arc::new([])),
            changes: watch::channel(0).0,
            relist: Notify::new(),
            progress: Mutex::new(HashMap::new()),
            oauth: tokio::sync::OnceCell::new(),
            offers: offers::Offers::default(),
            requests: requests::InFlight::default(),
        });
        if matches!(shared.config.transport, McpTransport::Http(_)) {
            // HTTPS through rustls with ring; a provider installed before stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let manager = tokio::spawn(manage(shared.clone()));
        Ok(McpSource { shared, manager })
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.shared.config
    }

    /// Waits until the connection is up or has failed (for tests and
    /// embedders that want to know), and returns the state.
    pub async fn connected(&self) -> SourceState {
        let mut link = self.shared.link.subscribe();
        let _ = link.wait_for(|l| !matches!(l, Link::Starting)).await;
        self.shared.state.lock().0.clone()
    }

    async fn run_call(&self, call: SourceCall<'_>) -> Result<SourceOutcome, SourceError> {
        let span = tracing::info_span!(
            "mcp_request",
            otel.name = format_args!("tools/call {}", call.tool),
            otel.kind = "client",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = call.tool,
        );
        self.send_call(call).instrument(span).await
    }

    /// `tools/call` to the server, in the call's client span; its
    /// `_meta.traceparent` (SEP-414) makes the server's spans its children.
    /// A call the server refuses for want of a token (401) or of scope
    /// (403) is sent again with a new one, a few times at most.
    async fn send_call(&self, call: SourceCall<'_>) -> Result<SourceOutcome, SourceError> {
        let mut attempt = 0;
        loop {
            let challenge = match self.send_call_once(&call).await {
                Sent::Answer(answer) => return answer,
                Sent::Refused(challenge) => challenge,
            };
            let Some(oauth) = self
                .shared
                .authorizer()
                .await
                .map_err(SourceError::Unavailable)?
            else {
                return Err(SourceError::Unavailable(not_set_up(&challenge)));
            };
            oauth
                .answer(&challenge, attempt, Asked::Call)
                .await
                .map_err(|e| SourceError::Unavailable(e.to_string()))?;
            attempt += 1;
        }
    }

    async fn send_call_once(&self, call: &SourceCall<'_>) -> Sent {
        let peer = match self.peer().await {
            Ok(peer) => peer,
            Err(e) => return Sent::Answer(Err(e)),
        };
        let arguments = match call.args {
            Value::Object(map) => Some(map.clone()),
            Value::Null => None,
            _ => {
                return Sent::Answer(Ok(SourceOutcome::InvalidArguments(
                    "MCP tools take an object of arguments".into(),
                )));
            }
        };
        let mut params = CallToolRequestParams::new(call.tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let trace = toolhost_telemetry::propagate::headers();
        if let Some(parent) = trace.get(toolhost_telemetry::propagate::TRACEPARENT) {
            let mut meta = rmcp::model::MetaObject::new();
            meta.set_traceparent(parent.clone());
            if let Some(state) = trace.get(toolhost_telemetry::propagate::TRACESTATE) {
                meta.set_tracestate(state.clone());
            }
            params.meta = Some(rmcp::model::RequestMetaObject(meta));
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(e) => {
                return Sent::Answer(Err(SourceError::Unavailable(format!(
                    "cannot send the call: {e}"
                ))));
            }
        };
        // rmcp gives every request its own progress token.
        let _progress = call.progress.clone().map(|sink| {
            ProgressGuard::register(&self.shared, token_key(&handle.progress_token), sink)
        });
        // Where the server's requests during this call go (`requests.rs`).
        let _asker = requests::InFlight::register(
            &self.shared,
            handle.id.clone(),
            requests::Asker {
                tool: call.tool.to_owned(),
                call_id: call.call_id.to_owned(),
                downstream: call
                    .extensions
                    .get::<crate::server::downstream::Downstream>()
                    .cloned(),
                approver: call.approver.clone(),
            },
        );
        let mut cancel = CancelOnDrop {
            peer: Some(peer),
            id: handle.id.clone(),
        };
        let response = handle.await_response().await;
        cancel.peer = None;
        if let Some(progress) = &_progress {
            settle_notifications(progress.heard()).await;
        }
        let result = match response {
            Ok(ServerResult::CallToolResult(result)) => result,
            Ok(_) => {
                return Sent::Answer(Err(SourceError::Protocol(
                    "the answer to tools/call is not a tool result".into(),
                )));
            }
            Err(ServiceError::McpError(e)) => return Sent::Answer(Ok(call_refused(e))),
            Err(e) if e.auth_challenge().is_some() => {
                return Sent::Refused(e.auth_challenge().unwrap_or_default().to_owned());
            }
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                return Sent::Answer(Err(SourceError::Unavailable(
                    "the server went away during the call".into(),
                )));
            }
            Err(other) => return Sent::Answer(Err(SourceError::Protocol(other.to_string()))),
        };
        Sent::Answer(Ok(tools::source_outcome(result)))
    }

    /// The connection, waiting while it is being made; an error at once
    /// when it is down.
    async fn peer(&self) -> Result<Peer<RoleClient>, SourceError> {
        let mut link = self.shared.link.subscribe();
        let link = link
            .wait_for(|l| !matches!(l, Link::Starting))
            .await
            .map_err(|_| SourceError::Unavailable("the client stopped".into()))?
            .clone();
        match link {
            Link::Up(peer) => Ok(peer),
            Link::Down(reason) => Err(SourceError::Unavailable(reason)),
            Link::Starting => Err(SourceError::Unavailable("not connected".into())),
        }
    }
}

/// How one sending of a call ended.
enum Sent {
    /// With an answer (or an error to report).
    Answer(Result<SourceOutcome, SourceError>),
    /// Refused for want of a token or scope: the `WWW-Authenticate` challenge.
    Refused(String),
}

/// Why a 401 ends a server that has no OAuth settings.
fn not_set_up(challenge: &str) -> String {
    let asks = if challenge.trim().is_empty() {
        String::new()
    } else {
        format!(" ({})", printable(challenge, 200))
    };
    format!(
        "the server answered 401: it wants a token{asks}, and neither a bearer token nor OAuth is set for it"
    )
}

/// A JSON-RPC error in answer to `tools/call`: invalid parameters are the
/// caller's to fix, anything else a failure of the tool.
fn call_refused(e: ErrorData) -> SourceOutcome {
    let message = e.message.to_string();
    if e.code == rmcp::model::ErrorCode::INVALID_PARAMS {
        SourceOutcome::InvalidArguments(message)
    } else {
        SourceOutcome::Failed(message)
    }
}

/// A progress token as the key of the progress table.
fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::String(s) => format!("s:{s}"),
        rmcp::model::NumberOrString::Number(n) => format!("n:{n}"),
    }
}

/// Tells the server a call was dropped before its answer (a timeout, or
/// the caller went away): `notifications/cancelled`.
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let id = self.id.clone();
        if let Ok(tokio) = tokio::runtime::Handle::try_current() {
            tokio.spawn(async move {
                let cancelled = CancelledNotificationParam::new(
                    Some(id),
                    Some("the host stopped waiting for the call".into()),
                );
                let _ = peer.notify_cancelled(cancelled).await;
            });
        }
    }
}

/// Takes a call's progress token out of the table when the call ends.
/// Lets the notifications that came before a response be handled before
/// the call's progress sink goes. rmcp handles each notification in a task
/// of its own, spawned before it delivers the response that followed, so a
/// server's last progress (`100/100`, then the result) could otherwise find
/// the sink gone and never reach the caller ahead of the result. Only calls
/// whose caller asked for progress wait: a few yields, and, when the server
/// has sent progress during the call (so its last may be racing the result),
/// one tick of the timer, time in which an idle worker takes the spawned
/// tasks. A server that sends no progress costs its callers no timer.
async fn settle_notifications(heard: bool) {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    if heard {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

struct ProgressGuard {
    shared: Weak<Shared>,
    token: String,
    /// Whether the server has sent progress for this call.
    heard: Arc<std::sync::atomic::AtomicBool>,
}

impl ProgressGuard {
    fn register(shared: &Arc<Shared>, token: String, sink: SourceProgress) -> Self {
        let heard = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let noted = Arc::clone(&heard);
        let sink: SourceProgress = Arc::new(move |message: &str, fraction: Option<f32>| {
            noted.store(true, std::sync::atomic::Ordering::Relaxed);
            sink(message, fraction);
        });
        shared.progress.lock().insert(token.clone(), sink);
        ProgressGuard {
            shared: Arc::downgrade(shared),
            token,
            heard,
        }
    }

    /// Whether the server has sent progress for this call so far.
    fn heard(&self) -> bool {
        self.heard.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.progress.lock().remove(&self.token);
        }
    }
}

impl ToolSource for McpSource {
    fn name(&self) -> &str {
        &self.shared.config.name
    }

    fn prefix(&self) -> String {
        match &self.shared.config.prefix {
            Some(prefix) => prefix.clone(),
            None => format!("{}__", self.shared.config.name),
        }
    }

    fn status(&self) -> SourceStatus {
        let (state, server) = self.shared.state.lock().clone();
        let kind = match self.shared.config.transport {
            McpTransport::Stdio(_) => "mcp-stdio",
            McpTransport::Http(_) => "mcp-http",
        };
        // Only once the sign-in state is made (`status` cannot wait).
        let sign_in = self
            .shared
            .oauth
            .get()
            .and_then(Option::as_ref)
            .map(|oauth| oauth.describe());
        SourceStatus {
            server,
            sign_in,
            ..SourceStatus::new(kind, self.shared.config.location(), state)
        }
    }

    fn settings_digest(&self) -> Option<String> {
        Some(self.shared.config.settings_digest())
    }

    fn tools(&self) -> Arc<[SourceTool]> {
        self.shared.tools.lock().clone()
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    fn ready(&self) -> SourceFuture<'_, ()> {
        Box::pin(async move {
            if self.shared.config.start == Start::Eager {
                // The connection task gives up within `connect_timeout`.
                let _ = self.connected().await;
            }
        })
    }

    fn call<'a>(
        &'a self,
        call: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
        Box::pin(async move {
            // A read of a resource or a get of a prompt (`offers.rs`).
            match self.access(&call).await {
                Some(answer) => answer,
                None => self.run_call(call).await,
            }
        })
    }
}

/// Answers the server: list changes, progress, and the notifications the
/// gateway passes on (`offers.rs`).
#[derive(Clone)]
pub(crate) struct Handler {
    shared: Weak<Shared>,
}

impl Handler {
    fn tell(&self, note: Upstream) -> std::future::Ready<()> {
        if let Some(shared) = self.shared.upgrade() {
            shared.offers.tell(note);
        }
        std::future::ready(())
    }
}

impl ClientHandler for Handler {
    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(Upstream::ResourcesChanged)
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(Upstream::PromptsChanged)
    }

    fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(Upstream::ResourceUpdated(params.uri))
    }

    #[allow(deprecated)] // logging (SEP-2577): every revision served here has it
    fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(Upstream::Log(params))
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if let Some(shared) = self.shared.upgrade() {
            shared.relist.notify_one();
        }
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let token = token_key(&params.progress_token);
        let sink = self
            .shared
            .upgrade()
            .and_then(|shared| shared.progress.lock().get(&token).cloned());
        if let Some(sink) = sink {
            #[allow(clippy::cast_possible_truncation)]
            let fraction = params
                .total
                .filter(|t| *t > 0.0)
                .map(|t| (params.progress / t).clamp(0.0, 1.0) as f32);
            let message = toolhost_text::line(&params.message.unwrap_or_default(), 200);
            sink(&message, fraction);
        }
        std::future::ready(())
    }

    #[expect(
        deprecated,
        reason = "sampling is deprecated by SEP-2577, and still served"
    )]
    fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::CreateMessageResult, ErrorData>> + Send + '_ {
        let shared = self.shared.upgrade();
        async move {
            match shared {
                Some(shared) => requests::sample(shared, params, context).await,
                None => Err(ErrorData::internal_error("the client stopped", None)),
            }
        }
    }

    fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ElicitResult, ErrorData>> + Send + '_ {
        let shared = self.shared.upgrade();
        async move {
            match shared {
                Some(shared) => requests::elicit(shared, params, context).await,
                None => Ok(rmcp::model::ElicitResult::new(
                    rmcp::model::ElicitationAction::Decline,
                )),
            }
        }
    }

    /// Declares form elicitation and sampling, unless the operator turned
    /// them off for this server (`requests.rs`).
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if let Some(shared) = self.shared.upgrade() {
            let settings = &shared.config.requests;
            if settings.elicitation != toolhost_runtime::policy::Decision::Deny {
                capabilities.elicitation = Some(
                    rmcp::model::ElicitationCapability::new()
                        .with_form(rmcp::model::FormElicitationCapability::new()),
                );
            }
            if settings.sampling != toolhost_runtime::policy::Decision::Deny {
                capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
            }
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("toolhost", env!("CARGO_PKG_VERSION")),
        )
    }
}

impl Shared {
    fn set_link(&self, link: Link, state: SourceState, server: Option<String>) {
        {
            let mut now = self.state.lock();
            now.0 = state;
            if server.is_some() {
                now.1 = server;
            }
        }
        self.link.send_replace(link);
    }

    fn set_tools(&self, tools: Vec<SourceTool>) {
        let changed = {
            let mut now = self.tools.lock();
            let changed = **now != *tools;
            *now = tools.into();
            changed
        };
        if changed {
            self.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The OAuth sign-in state, made at its first use; `None` for a server
    /// without OAuth settings.
    async fn authorizer(&self) -> Result<Option<Arc<Authorizer>>, String> {
        let made = self
            .oauth
            .get_or_try_init(|| async {
                let McpTransport::Http(endpoint) = &self.config.transport else {
                    return Ok(None);
                };
                let Some(settings) = &endpoint.oauth else {
                    return Ok(None);
                };
                Authorizer::new(&self.config.name, &endpoint.url, settings)
                    .await
                    .map(|a| Some(Arc::new(a)))
                    .map_err(|e| e.to_string())
            })
            .await?;
        Ok(made.clone())
    }

    pub(crate) fn handler(self: &Arc<Self>) -> Handler {
        Handler {
            shared: Arc::downgrade(self),
        }
    }
}

/// The connection task: connect (signing in when the server asks for a
/// token), list, follow list changes until the session ends, then again,
/// with backoff after failures.
async fn manage(shared: Arc<Shared>) {
    let name = shared.config.name.clone();
    let mut backoff = BACKOFF.0;
    let mut last_quick_retry: Option<Instant> = None;
    let mut sign_ins = 0;
    loop {
        if !matches!(*shared.link.borrow(), Link::Starting) {
            shared.set_link(Link::Starting, SourceState::Starting, None);
        }
        let reason = match shared.authorizer().await {
            Err(why) => why,
            Ok(oauth) => {
                let started = tokio::time::timeout(
                    shared.config.connect_timeout,
                    connect::open(&shared.config, shared.handler(), oauth.as_deref()),
                )
                .await;
                match started {
                    Err(_) => format!(
                        "did not connect within {} ms (`connect-timeout-ms`)",
                        shared.config.connect_timeout.as_millis()
                    ),
                    Ok(Err(OpenError::Failed(reason))) => reason,
                    Ok(Err(OpenError::Challenge(challenge))) => match &oauth {
                        // The sign-in's own time does not count as connecting.
                        Some(oauth) => {
                            match oauth.answer(&challenge, sign_ins, Asked::Connect).await {
                                Ok(()) => {
                                    sign_ins += 1;
                                    continue;
                                }
                                Err(e) => e.to_string(),
                            }
                        }
                        None => not_set_up(&challenge),
                    },
                    Ok(Ok(session)) => {
                        sign_ins = 0;
                        let reason = serve(&shared, session, oauth.as_deref()).await;
                        // A server that worked and went away is retried at once,
                        // once in a while; one that keeps failing waits longer.
                        let quick =
                            last_quick_retry.is_none_or(|t| t.elapsed() > Duration::from_secs(10));
                        if reason.1 && quick {
                            last_quick_retry = Some(Instant::now());
                            backoff = BACKOFF.0;
                            tracing::warn!(server = %name, "MCP server: {}; reconnecting", reason.0);
                            continue;
                        }
                        reason.0
                    }
                }
            }
        };
        sign_ins = 0;
        tracing::warn!(server = %name, "MCP server: {reason}; retrying in {} ms", backoff.as_millis());
        shared.set_link(
            Link::Down(reason.clone()),
            SourceState::Down {
                reason,
                retry_in: Some(backoff),
            },
            None,
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF.1);
    }
}

/// Runs one session: lists the tools, marks the link up, re-lists on
/// every list change, and returns why it ended and whether it had worked.
async fn serve(
    shared: &Arc<Shared>,
    session: Session<Handler>,
    oauth: Option<&Authorizer>,
) -> (String, bool) {
    let Session {
        service,
        process,
        stderr,
    } = session;
    let peer = service.peer().clone();
    let server = service
        .peer_info()
        .and_then(|info| info.server_info.clone())
        .map(|i| format!("{} {}", printable(&i.name, 64), printable(&i.version, 32)));
    // A server may let anyone initialise and ask for a token from here on.
    let mut attempt = 0;
    loop {
        match tokio::time::timeout(shared.config.connect_timeout, list_tools(&peer)).await {
            Ok(Ok(tools)) => {
                shared.set_tools(tools);
                break;
            }
            // A server that offers no tools (only resources or prompts).
            Ok(Err(ServiceError::McpError(e)))
                if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
            {
                shared.set_tools(Vec::new());
                break;
            }
            Ok(Err(e)) => {
                let Some(challenge) = e.auth_challenge() else {
                    return (format!("tools/list failed: {e}"), false);
                };
                let Some(oauth) = oauth else {
                    return (not_set_up(challenge), false);
                };
                if let Err(e) = oauth.answer(challenge, attempt, Asked::Connect).await {
                    return (format!("tools/list: {e}"), false);
                }
                attempt += 1;
            }
            Err(_) => {
                return (
                    "tools/list did not answer within `connect-timeout-ms`".into(),
                    false,
                );
            }
        }
    }
    shared.set_link(Link::Up(peer.clone()), SourceState::Ready, server);
    tracing::info!(server = %shared.config.name, tools = shared.tools.lock().len(), "MCP server connected");
    let waiting = service.waiting();
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            _ = &mut waiting => break,
            () = shared.relist.notified() => {
                // Changes announced meanwhile are read with this one.
                tokio::select! {
                    _ = &mut waiting => break,
                    () = tokio::time::sleep(RELIST_DEBOUNCE) => {}
                }
                // A notice that came during the wait is read now, not again.
                let _ = futures::FutureExt::now_or_never(shared.relist.notified());
                match tokio::time::timeout(shared.config.connect_timeout, list_tools(&peer)).await {
                    Ok(Ok(tools)) => shared.set_tools(tools),
                    Ok(Err(e)) => tracing::warn!(server = %shared.config.name, "re-listing tools failed: {e}"),
                    Err(_) => tracing::warn!(server = %shared.config.name, "re-listing tools timed out"),
                }
            }
        }
    }
    let why = match process {
        Some(mut process) => match process.exited().await {
            Some(status) => format!("the server exited ({status})"),
            None => "the server closed its output".to_owned(),
        },
        None => "the server closed the session".to_owned(),
    };
    (connect::with_stderr(why, &stderr), true)
}

/// Every page of `tools/list`, bounded in pages, tools and bytes: reading
/// stops once the tools read exceed the runtime's budget for one source's
/// definitions ([`MAX_DESCRIBE_BYTES`](toolhost_runtime::contract::MAX_DESCRIBE_BYTES),
/// which then leaves the source's tools out with a warning), so at most
/// one page more than the budget is ever held.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<SourceTool>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    let mut bytes = 0usize;
    for _ in 0..MAX_LIST_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await?;
        for tool in &page.tools {
            let tool = tools::source_tool(tool);
            bytes = bytes.saturating_add(definition_bytes(&tool));
            tools.push(tool);
        }
        if tools.len() >= MAX_LISTED_TOOLS {
            tools.truncate(MAX_LISTED_TOOLS);
            break;
        }
        if bytes > toolhost_runtime::contract::MAX_DESCRIBE_BYTES {
            break;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(tools)
}

/// About how many bytes a tool's definition takes (name, description,
/// schemas as JSON text).
fn definition_bytes(tool: &SourceTool) -> usize {
    let schema = |v: &serde_json::Value| serde_json::to_vec(v).map_or(0, |t| t.len());
    tool.name.len()
        + tool.description.len()
        + schema(&tool.input_schema)
        + tool.output_schema.as_ref().map_or(0, schema)
}

pub(crate) use toolhost_text::line as printable;
