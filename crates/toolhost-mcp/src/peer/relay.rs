//! An upstream server's questions for a 2026-07-28 caller.
//!
//! In revision 2026-07-28 a server asks its client for input (a form, a
//! completion from its model, its roots) by answering a call with
//! `input_required`; the client answers and calls again. When the gateway
//! calls a tool of a 2026-07-28 upstream server for a 2026-07-28 caller,
//! the question goes on to that caller and its answer comes back the same
//! way:
//!
//! - the server side (`server/mod.rs`) attaches an [`InputRelay`] to each
//!   call of a 2026-07-28 caller, with what the caller may answer (its
//!   declared capabilities) and, on a retry, the answer its sealed state
//!   carries for an upstream call ([`UpstreamAnswer`]);
//! - the client side (`client/call.rs`) sends that answer with the call it
//!   belongs to ([`UpstreamCall`]: the server, the tool and a digest of its
//!   whole arguments), and when the upstream server asks, records the
//!   question here ([`InputRelay::ask`]) and ends the call without a result;
//! - the server side sends the question to its caller, in an
//!   `input_required` result whose state, sealed to the outer call, carries
//!   the upstream server's own state and which answers are its.
//!
//! A caller of an older revision is asked through requests during the call
//! instead (`client/call.rs` answers each input request that way), and a
//! call from the terminal through its approver.

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{ClientCapabilities, ErrorCode, InputRequests, InputResponses};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::canonical::arguments_digest;

/// One call of an upstream tool: a SHA-256 over the server's name, the
/// tool's name and its whole arguments as canonical JSON, in hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct UpstreamCall(String);

impl UpstreamCall {
    /// The call of `tool` on `server` with `args`.
    pub(crate) fn of(server: &str, tool: &str, args: &Value) -> UpstreamCall {
        let mut h = Sha256::new();
        h.update(b"toolhost/mcp/upstream-input/call/v1");
        for field in [server.as_bytes(), tool.as_bytes()] {
            h.update(u64::try_from(field.len()).unwrap_or(u64::MAX).to_be_bytes());
            h.update(field);
        }
        h.update(arguments_digest(args));
        UpstreamCall(hex::encode(h.finalize()))
    }
}

/// The caller's answer to an upstream server's question, for the call it
/// was asked in: the responses to that server's input requests (only
/// those: any other key is dropped) and the state the server gave.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamAnswer {
    /// The call it answers.
    pub call: UpstreamCall,
    /// The caller's responses, by the server's keys.
    pub responses: InputResponses,
    /// The server's own `requestState`, as it sent it.
    pub state: Option<String>,
}

/// A question an upstream server asked during a call.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamAsked {
    /// The call it was asked in.
    pub call: UpstreamCall,
    /// The server's input requests, by its keys.
    pub requests: InputRequests,
    /// The server's `requestState`.
    pub state: Option<String>,
}

/// The way between a 2026-07-28 caller and the upstream servers its call
/// reaches; see the module docs. Cloned into every upstream call of one
/// run of the outer call.
#[derive(Clone)]
pub(crate) struct InputRelay(Arc<RelayInner>);

struct RelayInner {
    /// What the caller declared it can answer.
    capabilities: ClientCapabilities,
    /// The answer this run carries, until the call it answers takes it.
    answer: Mutex<Option<UpstreamAnswer>>,
    /// The first question an upstream server asked in this run.
    asked: Mutex<Option<UpstreamAsked>>,
    /// An upstream server's refusal that is the caller's to hear: it
    /// lacks a capability the tool needs (`-32021`).
    lacking: Mutex<Option<ErrorData>>,
}

impl InputRelay {
    /// For a caller that declared `capabilities`, carrying `answer`.
    pub(crate) fn new(capabilities: ClientCapabilities, answer: Option<UpstreamAnswer>) -> Self {
        InputRelay(Arc::new(RelayInner {
            capabilities,
            answer: Mutex::new(answer),
            asked: Mutex::new(None),
            lacking: Mutex::new(None),
        }))
    }

    /// What the caller declared it can answer.
    pub(crate) fn capabilities(&self) -> &ClientCapabilities {
        &self.0.capabilities
    }

    /// The answer for `call`, once per run.
    pub(crate) fn take_answer(&self, call: &UpstreamCall) -> Option<UpstreamAnswer> {
        let mut answer = self.0.answer.lock();
        if answer.as_ref().is_some_and(|a| &a.call == call) {
            answer.take()
        } else {
            None
        }
    }

    /// Records `asked` as the question to send back; `false` when another
    /// was recorded first in this run (this one is asked in a later round,
    /// when its call comes again).
    pub(crate) fn ask(&self, asked: UpstreamAsked) -> bool {
        let mut slot = self.0.asked.lock();
        if slot.is_some() {
            return false;
        }
        *slot = Some(asked);
        true
    }

    /// Records an upstream server's `-32021` (the caller lacks a
    /// capability the tool needs), to be the caller's answer as it was
    /// sent; the first one of a run is kept.
    pub(crate) fn lacks(&self, error: ErrorData) {
        let mut slot = self.0.lacking.lock();
        if slot.is_none() && error.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY {
            *slot = Some(error);
        }
    }

    /// The `-32021` an upstream server sent in this run, if any.
    pub(crate) fn lacking(&self) -> Option<ErrorData> {
        self.0.lacking.lock().clone()
    }

    /// The question recorded in this run, if any.
    pub(crate) fn asked(&self) -> Option<UpstreamAsked> {
        self.0.asked.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn asked(call: &UpstreamCall) -> UpstreamAsked {
        UpstreamAsked {
            call: call.clone(),
            requests: InputRequests::new(),
            state: Some("s".into()),
        }
    }

    #[test]
    fn an_answer_goes_only_to_the_call_it_answers_and_only_once() {
        let mine = UpstreamCall::of("everything", "t", &json!({"a": 1}));
        let other = UpstreamCall::of("everything", "t", &json!({"a": 2}));
        assert_ne!(mine, other);
        assert_ne!(mine, UpstreamCall::of("other", "t", &json!({"a": 1})));
        let relay = InputRelay::new(
            ClientCapabilities::default(),
            Some(UpstreamAnswer {
                call: mine.clone(),
                responses: InputResponses::new(),
                state: None,
            }),
        );
        assert!(relay.take_answer(&other).is_none());
        assert!(relay.take_answer(&mine).is_some());
        assert!(relay.take_answer(&mine).is_none());
    }

    #[test]
    fn the_first_question_of_a_run_is_the_one_kept() {
        let relay = InputRelay::new(ClientCapabilities::default(), None);
        let first = UpstreamCall::of("s", "a", &json!({}));
        assert!(relay.ask(asked(&first)));
        assert!(!relay.ask(asked(&UpstreamCall::of("s", "b", &json!({})))));
        assert_eq!(relay.asked().map(|a| a.call), Some(first));
    }
}
