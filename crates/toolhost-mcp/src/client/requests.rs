//! What an upstream MCP server asks its client during a call:
//! `sampling/createMessage` (a completion from the client's model) and
//! `elicitation/create` (a question for the user).
//!
//! Each request is tied to the call it came with (the HTTP stream of that
//! call's `tools/call`; over stdio, or on the server's own stream, the one
//! call in flight: with several, it is refused), and goes to whoever
//! stands behind that call:
//!
//! - a call that came in over MCP (`host serve`, `host mcp`): to the
//!   downstream client, on that call's stream, when it declared the
//!   capability (`server/downstream.rs`);
//! - a call from the terminal (`host call`, `host run`): an elicitation
//!   goes to the person there, through the call's approver
//!   ([`Approver::answer_form`]); sampling is refused (toolhost's own model
//!   does not answer it).
//!
//! The operator decides per server ([`ServerRequests`], `sampling` and
//! `elicitation` in `[[mcp-servers]]`): `allow` forwards, `ask` asks
//! whoever answers the call's questions first, `deny` refuses (sampling
//! with an error, elicitation with `decline`). Every request is bounded:
//! its size ([`MAX_FORWARDED_BYTES`]), the rate of one server's requests
//! ([`ServerRequests::per_minute`]), a sampling's tokens (`maxTokens` cut
//! to [`ServerRequests::max_sampling_tokens`]), the wait for the answer
//! ([`ANSWER_TIMEOUT`]) and the answer's size. Each one is a span
//! (`sampling/createMessage`, `elicitation/create`) and a record on the
//! audit target (`toolhost::audit`): the server, the call, the decision
//! and the outcome, never what was asked or answered.

#![expect(
    deprecated,
    reason = "sampling is deprecated by SEP-2577, and still served"
)]

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    ElicitationAction, ListRootsResult, RequestId,
};
use rmcp::service::{InboundStreamOrigin, RequestContext, RoleClient, ServiceError};
use serde_json::Value;
use toolhost_runtime::policy::Decision;
use toolhost_runtime::{Approver, permission::FormAnswer, permission::FormRequest};
use tracing::Instrument;

use crate::peer::Downstream;

/// The default [`ServerRequests::max_sampling_tokens`].
pub const DEFAULT_MAX_SAMPLING_TOKENS: u32 = 4096;
/// The default [`ServerRequests::per_minute`].
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 20;
/// The largest request forwarded (its parameters as JSON), and the largest
/// answer taken back.
pub const MAX_FORWARDED_BYTES: usize = 1024 * 1024;
/// How long the answer to a forwarded request may take (a person reads
/// and answers it).
pub const ANSWER_TIMEOUT: Duration = crate::peer::ELICITATION_TIMEOUT;
/// How long a request waits for the call it came with to be known (its
/// `tools/call` is sent, and the server may answer before the client has
/// noted it).
const CALL_WAIT: Duration = Duration::from_secs(2);
/// Longest excerpt of a sampling request shown when asking about it.
const SHOWN_CHARS: usize = 600;

/// What an upstream server may ask of the client side during a call
/// (`[[mcp-servers]]`: `sampling`, `elicitation`,
/// `max-sampling-tokens`, `requests-per-minute`).
///
/// The defaults: elicitation `allow` (the question goes to a person, who
/// sees it and may decline it), sampling `ask` (it spends the client's
/// model and puts the server's text before it, so whoever answers the
/// call's questions says yes first, as the spec wants a person able to
/// deny it), roots `deny`, 4096 tokens, 20 requests a minute.
///
/// ```
/// use toolhost_mcp::client::ServerRequests;
/// use toolhost_runtime::policy::Decision;
///
/// let settings = ServerRequests::default();
/// assert_eq!(settings.sampling, Decision::Ask);
/// assert_eq!(settings.elicitation, Decision::Allow);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRequests {
    /// `sampling/createMessage`: forwarded (`allow`), asked about first
    /// (`ask`), refused (`deny`). Not declared to the server when denied.
    pub sampling: Decision,
    /// `elicitation/create`: forwarded (`allow`), asked about first
    /// (`ask`), declined (`deny`). Not declared to the server when denied.
    pub elicitation: Decision,
    /// `roots/list`: the calling client's roots (`allow`, or `ask`, which
    /// asks whoever answers the call's questions first), or refused
    /// (`deny`, the default: a client's roots name its user's folders).
    /// Not declared to the server when denied.
    pub roots: Decision,
    /// A sampling's `maxTokens` is cut to this.
    pub max_sampling_tokens: u32,
    /// The most requests (both kinds) taken from the server in a minute;
    /// more are refused.
    pub per_minute: u32,
}

impl Default for ServerRequests {
    fn default() -> Self {
        ServerRequests {
            sampling: Decision::Ask,
            elicitation: Decision::Allow,
            roots: Decision::Deny,
            max_sampling_tokens: DEFAULT_MAX_SAMPLING_TOKENS,
            per_minute: DEFAULT_REQUESTS_PER_MINUTE,
        }
    }
}

/// Who answers the requests of one call's server.
#[derive(Clone)]
pub(crate) struct Asker {
    /// The tool called, by the server's name for it.
    pub(crate) tool: String,
    /// The call's id.
    pub(crate) call_id: String,
    /// The MCP client the call came from, if it came over MCP.
    pub(crate) downstream: Option<Downstream>,
    /// Who answers the call's questions.
    pub(crate) approver: Option<Arc<dyn Approver>>,
}

/// Which call a server's request belongs to.
pub(crate) enum Whose {
    /// The one its request came with (a request during a call).
    Request(RequestContext<RoleClient>),
    /// This one (an input request of an `input_required` result).
    Call(Asker),
}

impl Whose {
    async fn asker(self, in_flight: &InFlight) -> Result<Asker, String> {
        match self {
            Whose::Request(context) => in_flight.asker(&context).await,
            Whose::Call(asker) => Ok(asker),
        }
    }
}

/// One server's calls in flight, by the id of their `tools/call`, and
/// the times of its recent requests.
#[derive(Default)]
pub(crate) struct InFlight {
    calls: Mutex<HashMap<RequestId, Asker>>,
    recent: Mutex<VecDeque<Instant>>,
}

/// Takes a call out of [`InFlight`] when it ends.
pub(crate) struct CallGuard {
    in_flight: std::sync::Weak<InFlight>,
    id: RequestId,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if let Some(in_flight) = self.in_flight.upgrade() {
            in_flight.calls.lock().remove(&self.id);
        }
    }
}

impl InFlight {
    /// Notes the call sent as `id` until the guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, id: RequestId, asker: Asker) -> CallGuard {
        self.calls.lock().insert(id.clone(), asker);
        CallGuard {
            in_flight: Arc::downgrade(self),
            id,
        }
    }

    /// The call a request came with.
    async fn asker(&self, context: &RequestContext<RoleClient>) -> Result<Asker, String> {
        let origin = context.extensions.get::<InboundStreamOrigin>().cloned();
        let deadline = Instant::now() + CALL_WAIT;
        loop {
            {
                let calls = self.calls.lock();
                match &origin {
                    Some(InboundStreamOrigin::OutboundRequest(id)) => {
                        if let Some(asker) = calls.get(id) {
                            return Ok(asker.clone());
                        }
                    }
                    // A transport that cannot tell (stdio), or a server that
                    // sent it on its own stream (the spec's SHOULD, which
                    // servers in use do not all follow): the one call in flight.
                    Some(InboundStreamOrigin::Unassociated) | None => {
                        let mut all = calls.values();
                        match (all.next(), all.next()) {
                            (Some(asker), None) => return Ok(asker.clone()),
                            (Some(_), Some(_)) => {
                                return Err("several calls to this server are in flight and \
                                            the request does not say which one it belongs to"
                                    .to_owned());
                            }
                            _ => {}
                        }
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err("no call to this server is in flight".to_owned());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Counts a request; `false` when the server is past its rate.
    fn admit(&self, per_minute: u32) -> bool {
        let now = Instant::now();
        let mut recent = self.recent.lock();
        while recent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(60))
        {
            recent.pop_front();
        }
        if recent.len() >= usize::try_from(per_minute).unwrap_or(usize::MAX) {
            return false;
        }
        recent.push_back(now);
        true
    }
}

/// What became of one request, for the span and the audit record.
struct Outcome {
    decision: Decision,
    outcome: &'static str,
}

fn record(span: &tracing::Span, server: &str, method: &str, asker: Option<&Asker>, o: &Outcome) {
    span.record("toolhost.decision", o.decision.as_str());
    span.record("toolhost.outcome", o.outcome);
    tracing::info!(
        target: "toolhost::audit",
        server,
        method,
        tool = asker.map(|a| toolhost_runtime::shown::shown_name(&a.tool).into_owned()),
        call_id = asker.map(|a| toolhost_runtime::shown::shown_name(&a.call_id).into_owned()),
        to = asker.map(|a| if a.downstream.is_some() { "client" } else { "terminal" }),
        decision = o.decision.as_str(),
        outcome = o.outcome,
        "a server's request during a call"
    );
}

fn span(method: &'static str, server: &str) -> tracing::Span {
    tracing::info_span!(
        "mcp_request",
        otel.name = method,
        otel.kind = "server",
        mcp.method.name = method,
        toolhost.mcp.server = server,
        toolhost.decision = tracing::field::Empty,
        toolhost.outcome = tracing::field::Empty,
    )
}

/// A refusal of a sampling request, saying why.
fn refused(why: String) -> ErrorData {
    ErrorData::new(rmcp::model::ErrorCode::INVALID_REQUEST, why, None)
}

fn too_large(params: &impl serde::Serialize) -> bool {
    serde_json::to_vec(params).map_or(true, |v| v.len() > MAX_FORWARDED_BYTES)
}

/// Answers `sampling/createMessage` from the server `server`, under its
/// `settings`, for one of its calls in `in_flight`.
pub(crate) async fn sample(
    server: &str,
    settings: &ServerRequests,
    in_flight: &InFlight,
    params: CreateMessageRequestParams,
    context: RequestContext<RoleClient>,
) -> Result<CreateMessageResult, ErrorData> {
    sample_for(server, settings, in_flight, params, Whose::Request(context)).await
}

/// [`sample`] for the call `whose` says.
pub(crate) async fn sample_for(
    server: &str,
    settings: &ServerRequests,
    in_flight: &InFlight,
    mut params: CreateMessageRequestParams,
    whose: Whose,
) -> Result<CreateMessageResult, ErrorData> {
    let server = server.to_owned();
    let span = span("sampling/createMessage", &server);
    let settings = settings.clone();
    let decision = settings.sampling;
    let done = |asker: Option<&Asker>, outcome: &'static str| {
        record(
            &tracing::Span::current(),
            &server,
            "sampling/createMessage",
            asker,
            &Outcome { decision, outcome },
        );
    };
    async {
        if decision == Decision::Deny {
            done(None, "denied");
            return Err(refused(format!(
                "sampling is off for MCP server `{server}` (sampling = \"deny\")"
            )));
        }
        if too_large(&params) {
            done(None, "too-large");
            return Err(refused(format!(
                "the sampling request is larger than {MAX_FORWARDED_BYTES} bytes"
            )));
        }
        if !in_flight.admit(settings.per_minute) {
            done(None, "rate-limited");
            return Err(refused(format!(
                "more than {} requests a minute from MCP server `{server}`",
                settings.per_minute
            )));
        }
        let asker = match whose.asker(in_flight).await {
            Ok(asker) => asker,
            Err(why) => {
                done(None, "no-caller");
                return Err(refused(format!("sampling refused: {why}")));
            }
        };
        let Some(downstream) = asker.downstream.clone().filter(Downstream::can_sample) else {
            done(Some(&asker), "unsupported");
            return Err(refused(
                "sampling refused: the call did not come from an MCP client that declared \
                 sampling, and toolhost's own model does not answer it"
                    .to_owned(),
            ));
        };
        if decision == Decision::Ask {
            let question = format!(
                "The MCP server `{server}` (during `{}`) asks to use your model (sampling, up to \
                 {} tokens). It asks: {}",
                toolhost_text::line(&asker.tool, 200),
                params.max_tokens.min(settings.max_sampling_tokens),
                excerpt(&params)
            );
            if !approved(&asker, &server, &question).await {
                done(Some(&asker), "declined");
                return Err(refused("sampling refused: the user declined".to_owned()));
            }
        }
        params.max_tokens = params.max_tokens.min(settings.max_sampling_tokens);
        match downstream.create_message(params, ANSWER_TIMEOUT).await {
            Ok(result) if too_large(&result) => {
                done(Some(&asker), "too-large");
                Err(refused(format!(
                    "the client's answer is larger than {MAX_FORWARDED_BYTES} bytes"
                )))
            }
            Ok(result) => {
                done(Some(&asker), "ok");
                Ok(result)
            }
            Err(ServiceError::McpError(e)) => {
                done(Some(&asker), "refused-by-client");
                Err(e)
            }
            Err(e) => {
                done(Some(&asker), "failed");
                Err(ErrorData::internal_error(
                    format!("the client did not answer the sampling request: {e}"),
                    None,
                ))
            }
        }
    }
    .instrument(span)
    .await
}

/// Answers `elicitation/create` from the server `server`, under its
/// `settings`, for one of its calls in `in_flight`.
pub(crate) async fn elicit(
    server: &str,
    settings: &ServerRequests,
    in_flight: &InFlight,
    params: ElicitRequestParams,
    context: RequestContext<RoleClient>,
) -> Result<ElicitResult, ErrorData> {
    elicit_for(server, settings, in_flight, params, Whose::Request(context)).await
}

/// [`elicit`] for the call `whose` says.
pub(crate) async fn elicit_for(
    server: &str,
    settings: &ServerRequests,
    in_flight: &InFlight,
    params: ElicitRequestParams,
    whose: Whose,
) -> Result<ElicitResult, ErrorData> {
    let server = server.to_owned();
    let span = span("elicitation/create", &server);
    let settings = settings.clone();
    let decision = settings.elicitation;
    let done = |asker: Option<&Asker>, outcome: &'static str| {
        record(
            &tracing::Span::current(),
            &server,
            "elicitation/create",
            asker,
            &Outcome { decision, outcome },
        );
    };
    let decline =
        || -> Result<ElicitResult, ErrorData> { Ok(ElicitResult::new(ElicitationAction::Decline)) };
    async {
        if decision == Decision::Deny {
            done(None, "denied");
            return decline();
        }
        if too_large(&params) {
            done(None, "too-large");
            return Err(refused(format!(
                "the elicitation request is larger than {MAX_FORWARDED_BYTES} bytes"
            )));
        }
        if !in_flight.admit(settings.per_minute) {
            done(None, "rate-limited");
            return decline();
        }
        let asker = match whose.asker(in_flight).await {
            Ok(asker) => asker,
            Err(why) => {
                tracing::debug!(server = %server, "elicitation declined: {why}");
                done(None, "no-caller");
                return decline();
            }
        };
        let (message, url) = match &params {
            ElicitRequestParams::FormElicitationParams { message, .. } => (message.clone(), false),
            ElicitRequestParams::UrlElicitationParams { message, .. } => (message.clone(), true),
            _ => {
                done(None, "unsupported");
                return decline();
            }
        };
        if decision == Decision::Ask {
            let question = format!(
                "The MCP server `{server}` (during `{}`) wants to ask you: {}",
                toolhost_text::line(&asker.tool, 200),
                toolhost_text::line(&message, SHOWN_CHARS)
            );
            if !approved(&asker, &server, &question).await {
                done(Some(&asker), "declined");
                return decline();
            }
        }
        let forward = asker
            .downstream
            .as_ref()
            .filter(|d| d.can_elicit(url))
            .cloned();
        let answer = if let Some(downstream) = forward {
            match downstream.elicit(params, ANSWER_TIMEOUT).await {
                Ok(result) if too_large(&result) => {
                    done(Some(&asker), "too-large");
                    return decline();
                }
                Ok(result) => result,
                Err(e) => {
                    tracing::debug!(server = %server, "the client did not answer the elicitation: {e}");
                    done(Some(&asker), "failed");
                    return Ok(ElicitResult::new(ElicitationAction::Cancel));
                }
            }
        } else if let (None, ElicitRequestParams::FormElicitationParams { requested_schema, .. }) =
            (&asker.downstream, &params)
        {
            let schema = serde_json::to_value(requested_schema).unwrap_or(Value::Null);
            form(&asker, &server, &message, &schema).await
        } else {
            // The client cannot be asked; the terminal does not open links.
            done(Some(&asker), "unsupported");
            return decline();
        };
        done(Some(&asker), action_word(&answer.action));
        Ok(answer)
    }
    .instrument(span)
    .await
}

/// Declares the tasks extension in `capabilities`, which toolhost tells
/// every server: a call a server runs as a task is followed to its end
/// (`task.rs`).
pub(crate) fn declare_tasks(capabilities: &mut rmcp::model::ClientCapabilities) {
    capabilities.extensions.get_or_insert_default().insert(
        rmcp::model::TASKS_EXTENSION_ID.to_owned(),
        Default::default(),
    );
}

/// Answers `roots/list` from the server `server`, under its `settings`,
/// for one of its calls in `in_flight`.
pub(crate) async fn roots(
    server: &str,
    settings: &ServerRequests,
    in_flight: &InFlight,
    context: RequestContext<RoleClient>,
) -> Result<ListRootsResult, ErrorData> {
    roots_for(server, settings, in_flight, Whose::Request(context)).await
}

/// [`roots`] for the call `whose` says: the calling client's roots, when
/// the operator allows it and the client declared them.
pub(crate) async fn roots_for(
    server: &str,
    settings: &ServerRequests,
    in_flight: &InFlight,
    whose: Whose,
) -> Result<ListRootsResult, ErrorData> {
    let server = server.to_owned();
    let span = span("roots/list", &server);
    let decision = settings.roots;
    let done = |asker: Option<&Asker>, outcome: &'static str| {
        record(
            &tracing::Span::current(),
            &server,
            "roots/list",
            asker,
            &Outcome { decision, outcome },
        );
    };
    async {
        if decision == Decision::Deny {
            done(None, "denied");
            return Err(refused(format!(
                "roots are not shared with MCP server `{server}` (roots = \"deny\")"
            )));
        }
        if !in_flight.admit(settings.per_minute) {
            done(None, "rate-limited");
            return Err(refused(format!(
                "more than {} requests a minute from MCP server `{server}`",
                settings.per_minute
            )));
        }
        let asker = match whose.asker(in_flight).await {
            Ok(asker) => asker,
            Err(why) => {
                done(None, "no-caller");
                return Err(refused(format!("roots refused: {why}")));
            }
        };
        let Some(downstream) = asker.downstream.clone().filter(Downstream::can_list_roots) else {
            done(Some(&asker), "unsupported");
            return Err(refused(
                "roots refused: the call did not come from an MCP client that declared roots"
                    .to_owned(),
            ));
        };
        if decision == Decision::Ask {
            let question = format!(
                "The MCP server `{server}` (during `{}`) asks for the folders you work in (roots).",
                toolhost_text::line(&asker.tool, 200),
            );
            if !approved(&asker, &server, &question).await {
                done(Some(&asker), "declined");
                return Err(refused("roots refused: the user declined".to_owned()));
            }
        }
        match downstream.list_roots(ANSWER_TIMEOUT).await {
            Ok(result) if too_large(&result) => {
                done(Some(&asker), "too-large");
                Err(refused(format!(
                    "the client's answer is larger than {MAX_FORWARDED_BYTES} bytes"
                )))
            }
            Ok(result) => {
                done(Some(&asker), "ok");
                Ok(result)
            }
            Err(e) => {
                done(Some(&asker), "failed");
                Err(ErrorData::internal_error(
                    format!("the client did not list its roots: {e}"),
                    None,
                ))
            }
        }
    }
    .instrument(span)
    .await
}

/// Asks the call's approver (the terminal's person, or the calling
/// client's user through elicitation) the form `schema`.
async fn form(asker: &Asker, server: &str, message: &str, schema: &Value) -> ElicitResult {
    let Some(approver) = &asker.approver else {
        return ElicitResult::new(ElicitationAction::Decline);
    };
    let request = FormRequest {
        tool: &asker.tool,
        plugin: server,
        message,
        schema,
    };
    match approver.answer_form(&request).await {
        FormAnswer::Accept(content) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        FormAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        FormAnswer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

/// Whether the user behind the call says yes to `question`: the calling
/// MCP client's user (through elicitation, when it declared it), else
/// whoever answers the call's questions at the terminal.
async fn approved(asker: &Asker, server: &str, question: &str) -> bool {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Allow it?"}},
        "required": ["approve"],
    });
    let answer = match &asker.downstream {
        Some(downstream) => {
            let Ok(requested_schema) = serde_json::from_value(schema) else {
                return false;
            };
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: question.to_owned(),
                requested_schema,
            };
            if !downstream.can_elicit(false) {
                return false;
            }
            match downstream.elicit(params, ANSWER_TIMEOUT).await {
                Ok(answer) => answer,
                Err(_) => return false,
            }
        }
        None => form(asker, server, question, &schema).await,
    };
    answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .and_then(|c| c.get("approve"))
            .and_then(Value::as_bool)
            == Some(true)
}

fn action_word(action: &ElicitationAction) -> &'static str {
    match action {
        ElicitationAction::Accept => "accepted",
        ElicitationAction::Decline => "declined",
        ElicitationAction::Cancel => "cancelled",
        _ => "answered",
    }
}

/// The start of what a sampling request asks, on one line.
fn excerpt(params: &CreateMessageRequestParams) -> String {
    let text = serde_json::to_string(&params.messages).unwrap_or_default();
    toolhost_text::line(&text, SHOWN_CHARS)
}
