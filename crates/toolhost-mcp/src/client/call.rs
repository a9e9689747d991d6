//! `tools/call` to the server: sent in the call's client span with its
//! trace context, its progress passed to the caller's sink, the server's
//! requests during it tied to it (`requests.rs`), cancelled on the server
//! when dropped, and sent again with a new token when the server refuses
//! it for want of one (OAuth, a few times at most).

use std::sync::{Arc, Weak};

use rmcp::ErrorData;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use toolhost_runtime::{
    source::SourceCall, source::SourceError, source::SourceOutcome, source::SourceProgress,
};
use tracing::Instrument;

use super::input;
use super::link::CancelOnDrop;
use super::oauth::Asked;
use super::requests;
use super::state::{Shared, not_set_up, token_key};
use crate::peer::Downstream;
use crate::tools;

/// Runs `call` on `shared`'s server: a client span around [`send`].
pub(crate) async fn run(
    shared: &Arc<Shared>,
    call: SourceCall<'_>,
) -> Result<SourceOutcome, SourceError> {
    let span = tracing::info_span!(
        "mcp_request",
        otel.name = format_args!("tools/call {}", call.tool),
        otel.kind = "client",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = call.tool,
    );
    send(shared, call).instrument(span).await
}

/// `tools/call` to the server, in the call's client span; its
/// `_meta.traceparent` (SEP-414) makes the server's spans its children.
/// A call the server refuses for want of a token (401) or of scope
/// (403) is sent again with a new one, a few times at most.
/// A server that answers `input_required` is answered and called again
/// (`input.rs`), a few rounds at most.
async fn send(shared: &Arc<Shared>, call: SourceCall<'_>) -> Result<SourceOutcome, SourceError> {
    let mut attempt = 0;
    let mut rounds = input::Rounds::of(shared, &call);
    loop {
        let challenge = match send_once(shared, &call, &mut rounds).await {
            Sent::Answer(answer) => return answer,
            Sent::Input(asked) => match rounds.answer(shared, &call, asked).await {
                input::Next::Retry => continue,
                input::Next::End(outcome) => return outcome,
            },
            Sent::Refused(challenge) => challenge,
        };
        let Some(oauth) = shared
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

async fn send_once(
    shared: &Arc<Shared>,
    call: &SourceCall<'_>,
    rounds: &mut input::Rounds,
) -> Sent {
    let peer = match shared.peer_for(call.tool, rounds.relayed()).await {
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
    let mut options = PeerRequestOptions::no_options();
    rounds.prepare(&peer, &shared.config.requests, &mut params, &mut options);
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = match peer.send_request_with_option(request, options).await {
        Ok(handle) => handle,
        Err(e) => {
            return Sent::Answer(Err(SourceError::Unavailable(format!(
                "cannot send the call: {e}"
            ))));
        }
    };
    // rmcp gives every request its own progress token.
    let _progress = call
        .progress
        .clone()
        .map(|sink| ProgressGuard::register(shared, token_key(&handle.progress_token), sink));
    // Where the server's requests during this call go (`requests.rs`).
    let _asker = shared.requests.register(
        handle.id.clone(),
        requests::Asker {
            tool: call.tool.to_owned(),
            call_id: call.call_id.to_owned(),
            downstream: call.extensions.get::<Downstream>().cloned(),
            approver: call.approver.clone(),
        },
    );
    let mut cancel = CancelOnDrop {
        peer: Some(peer.clone()),
        id: handle.id.clone(),
    };
    let response = handle.await_response().await;
    cancel.peer = None;
    if let Some(progress) = &_progress {
        settle_notifications(progress.heard()).await;
    }
    let result = match response {
        Ok(ServerResult::CallToolResult(result)) => result,
        Ok(ServerResult::InputRequiredResult(asked)) => return Sent::Input(asked),
        // The server runs it as a task: followed to its end (`task.rs`).
        Ok(ServerResult::CreateTaskResult(created)) => {
            return Sent::Answer(super::task::follow(shared, call, peer, created.task).await);
        }
        Ok(_) => {
            return Sent::Answer(Err(SourceError::Protocol(
                "the answer to tools/call is not a tool result".into(),
            )));
        }
        Err(ServiceError::McpError(e)) => {
            if e.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY {
                rounds.lacks(e.clone());
            }
            return Sent::Answer(Ok(call_refused(e)));
        }
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

/// How one sending of a call ended.
enum Sent {
    /// With an answer (or an error to report).
    Answer(Result<SourceOutcome, SourceError>),
    /// Refused for want of a token or scope: the `WWW-Authenticate` challenge.
    Refused(String),
    /// Stopped at a question for the client (revision 2026-07-28).
    Input(rmcp::model::InputRequiredResult),
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
