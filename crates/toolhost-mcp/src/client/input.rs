//! An upstream server that answers a call (or a `prompts/get`,
//! `prompt.rs`) with `input_required`
//! (revision 2026-07-28): it needs answers from the client (a form, a
//! completion from its model, its roots) and a call again with them and
//! the state it gave.
//!
//! - For a caller of revision 2026-07-28 (the call carries an
//!   [`InputRelay`]), the question goes on to the caller: it is recorded
//!   in the relay, the call ends without a result, and the server side
//!   sends it back in its own `input_required` result
//!   (`server/round_trip.rs`). The caller's answer comes back in its
//!   retry's state and goes to the same upstream call only (the server,
//!   the tool and its whole arguments); the upstream server is told what
//!   the caller can answer (its declared capabilities, less what the
//!   operator denies for this server).
//! - For any other caller, each input request is answered here as the
//!   request it stands for would be answered during a call
//!   (`requests.rs`: the operator's settings for this server, the calling
//!   client or the person at the terminal, the bounds and the audit), and
//!   the call is sent again.
//!
//! A server gets [`MAX_ROUNDS`] rounds in one call and
//! [`MAX_INPUT_REQUESTS`] requests in one round; past them the call fails
//! and says why.

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, RequestMetaObject,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;
use toolhost_runtime::policy::Decision;
use toolhost_runtime::{source::SourceCall, source::SourceError, source::SourceOutcome};

use super::requests::{self, Asker, ServerRequests, Whose};
use super::state::Shared;
use crate::peer::relay::{UpstreamAsked, UpstreamCall};
use crate::peer::{Downstream, InputRelay};

/// The most `input_required` rounds one call to a server may take.
pub const MAX_ROUNDS: u32 = 8;

/// The most input requests in one `input_required` result.
pub const MAX_INPUT_REQUESTS: usize = 16;

/// What the call asked about is told while its question goes to the caller.
const WAITING: &str = "waiting for the caller's answer to the MCP server's question";

/// What a later upstream call of the same run is told.
const ASKED_AFTER: &str = "not run: another question of this call waits for the caller's \
     answer; this one is asked after it";

/// The `input_required` rounds of one call.
pub(crate) struct Rounds {
    upstream: UpstreamCall,
    relay: Option<InputRelay>,
    /// The answers and the server's state for the next sending.
    next: Option<(InputResponses, Option<String>)>,
    done: u32,
}

/// What comes after a round.
pub(crate) enum Next {
    /// Send the call again, with the answers.
    Retry,
    /// The call is over.
    End(Result<SourceOutcome, SourceError>),
}

impl Rounds {
    /// The rounds of `call` to `shared`'s server: with the caller's answer
    /// to this call's question, when its retry carries one.
    pub(crate) fn of(shared: &Shared, call: &SourceCall<'_>) -> Rounds {
        let upstream = UpstreamCall::of(&shared.config.name, call.tool, call.args);
        let relay = call.extensions.get::<InputRelay>().cloned();
        let next = relay
            .as_ref()
            .and_then(|r| r.take_answer(&upstream))
            .map(|a| (a.responses, a.state));
        Rounds {
            upstream,
            relay,
            next,
            done: 0,
        }
    }

    /// Whether the caller speaks 2026-07-28 (its questions are relayed).
    pub(crate) fn relayed(&self) -> bool {
        self.relay.is_some()
    }

    /// Passes the server's `-32021` (the caller lacks a capability the
    /// tool needs) on to a 2026-07-28 caller.
    pub(crate) fn lacks(&self, error: rmcp::ErrorData) {
        if let Some(relay) = &self.relay {
            relay.lacks(error);
        }
    }

    /// Puts the last round's answers into `params`; to a 2026-07-28
    /// server, for a relayed call, says what the caller can answer.
    pub(crate) fn prepare(
        &mut self,
        peer: &Peer<RoleClient>,
        settings: &ServerRequests,
        params: &mut CallToolRequestParams,
        options: &mut PeerRequestOptions,
    ) {
        if let Some((responses, state)) = self.answers(peer, settings, options) {
            params.input_responses = Some(responses);
            params.request_state = state;
        }
    }

    /// [`Rounds::prepare`] for any request: the last round's answers and
    /// the server's state to send, and in `options` what the caller can
    /// answer.
    pub(crate) fn answers(
        &mut self,
        peer: &Peer<RoleClient>,
        settings: &ServerRequests,
        options: &mut PeerRequestOptions,
    ) -> Option<(InputResponses, Option<String>)> {
        let next = self.next.take();
        let modern = peer
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize());
        if let (Some(relay), true) = (&self.relay, modern) {
            let mut meta = RequestMetaObject::new();
            meta.set_client_capabilities(relayed(settings, relay.capabilities()));
            options.meta = Some(meta);
        }
        next
    }

    /// Handles the server's `asked`: relays it, or answers it here.
    pub(crate) async fn answer(
        &mut self,
        shared: &Shared,
        call: &SourceCall<'_>,
        asked: InputRequiredResult,
    ) -> Next {
        let server = &shared.config.name;
        let failed = |why: String| Next::End(Ok(SourceOutcome::Failed(why)));
        self.done = self.done.saturating_add(1);
        if self.done > MAX_ROUNDS {
            return failed(format!(
                "MCP server `{server}` asked for input more than {MAX_ROUNDS} times in one call"
            ));
        }
        let requests = asked.input_requests.unwrap_or_default();
        if requests.len() > MAX_INPUT_REQUESTS {
            return failed(format!(
                "MCP server `{server}` asked {} questions at once; at most {MAX_INPUT_REQUESTS} \
                 are taken",
                requests.len()
            ));
        }
        if let Some(relay) = &self.relay {
            let kept = relay.ask(UpstreamAsked {
                call: self.upstream.clone(),
                requests,
                state: asked.request_state,
            });
            tracing::info!(
                target: "toolhost::audit",
                server = %server,
                method = "input_required",
                tool = %toolhost_runtime::shown::shown_name(call.tool),
                call_id = %toolhost_runtime::shown::shown_name(call.call_id),
                to = "client",
                outcome = if kept { "relayed" } else { "asked-after" },
                "a server's request during a call"
            );
            return failed(if kept { WAITING } else { ASKED_AFTER }.to_owned());
        }
        let asker = Asker {
            tool: call.tool.to_owned(),
            call_id: call.call_id.to_owned(),
            downstream: call.extensions.get::<Downstream>().cloned(),
            approver: call.approver.clone(),
        };
        let responses = match answer_here(shared, &asker, requests).await {
            Ok(responses) => responses,
            Err(why) => return failed(why),
        };
        self.next = Some((responses, asked.request_state));
        Next::Retry
    }
}

/// Answers the server's `requests` here, each as the request it stands
/// for would be answered during the call of `asker` (`requests.rs`); why
/// not, when one is refused or of a kind this client does not know.
pub(crate) async fn answer_here(
    shared: &Shared,
    asker: &Asker,
    requests: InputRequests,
) -> Result<InputResponses, String> {
    let server = &shared.config.name;
    let settings = &shared.config.requests;
    let in_flight = &shared.requests;
    let mut responses = InputResponses::new();
    for (key, request) in requests {
        let whose = Whose::Call(asker.clone());
        let (method, answer) = match request {
            InputRequest::Elicitation(r) => (
                "elicitation/create",
                requests::elicit_for(server, settings, in_flight, r.params, whose)
                    .await
                    .map(|a| serde_json::to_value(a).unwrap_or(Value::Null)),
            ),
            InputRequest::CreateMessage(r) => (
                "sampling/createMessage",
                requests::sample_for(server, settings, in_flight, r.params, whose)
                    .await
                    .map(|a| serde_json::to_value(a).unwrap_or(Value::Null)),
            ),
            InputRequest::ListRoots(_) => (
                "roots/list",
                requests::roots_for(server, settings, in_flight, whose)
                    .await
                    .map(|a| serde_json::to_value(a).unwrap_or(Value::Null)),
            ),
            _ => {
                return Err(format!(
                    "MCP server `{server}` asked for an input this client does not know"
                ));
            }
        };
        match answer {
            Ok(value) => {
                responses.insert(key, value);
            }
            Err(e) => {
                return Err(format!(
                    "MCP server `{server}` needs `{method}` to go on, and it was refused: {}",
                    toolhost_text::line(&e.message, 300)
                ));
            }
        }
    }
    Ok(responses)
}

/// What a relayed call's caller can answer, as the upstream server is
/// told: what it declared, less what the operator denies for the server.
fn relayed(settings: &ServerRequests, caller: &ClientCapabilities) -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    if settings.elicitation != Decision::Deny {
        capabilities.elicitation = caller.elicitation.clone();
    }
    if settings.sampling != Decision::Deny {
        capabilities.sampling = caller.sampling.clone();
    }
    if settings.roots != Decision::Deny {
        capabilities.roots = caller.roots.clone();
    }
    // Tasks are toolhost's to follow, whatever the caller takes.
    requests::declare_tasks(&mut capabilities);
    capabilities
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_server_is_told_only_what_the_caller_declared_and_the_operator_allows() {
        let caller: ClientCapabilities = serde_json::from_value(serde_json::json!({
            "elicitation": {}, "roots": {}
        }))
        .unwrap();
        let allow_all = ServerRequests {
            sampling: Decision::Allow,
            roots: Decision::Allow,
            ..ServerRequests::default()
        };
        let told = serde_json::to_value(relayed(&allow_all, &caller)).unwrap();
        assert!(told.get("elicitation").is_some() && told.get("roots").is_some());
        assert!(told.get("sampling").is_none(), "{told}");
        let told = serde_json::to_value(relayed(&ServerRequests::default(), &caller)).unwrap();
        assert!(
            told.get("roots").is_none(),
            "roots are denied by default: {told}"
        );
    }
}
