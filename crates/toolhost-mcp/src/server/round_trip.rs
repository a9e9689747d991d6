//! The `input_required` round trip of MCP 2026-07-28, for an `ask`.
//!
//! A server sends no requests to its client in that revision, so a call
//! that needs the user's approval stops at the question and returns
//! `input_required`: the question (an elicitation, form mode) and a sealed
//! `requestState`. The client asks its user and calls again with the
//! answer and the state. Nothing runs before its answer (the approval
//! comes before execution; a before-hook runs again on the retry).
//!
//! A retry runs the whole call again from the start: a program
//! (`run_code`) runs again from its first line, and each tool it calls is
//! asked about again. So the state carries every answer given to this call
//! so far, and each answer is about one call only:
//!
//! - an answer is bound to the call it was asked about: its tool, its
//!   plugin's digest and a SHA-256 of its whole arguments as canonical
//!   JSON ([`CallBinding`]), never to the outer call as a whole;
//! - a yes approves one matching call per run: the same call made twice
//!   in a run is asked about twice (each yes is a count of one);
//! - a no denies the calls it matches, and they are not asked about again;
//! - any other ask is a question of its own: the first of a run is the one
//!   sent back, and a later ask in the same run is denied (not run) without
//!   replacing it, to be asked in a later round; the question goes back
//!   even when a program caught the denial and went on (its user has not
//!   answered), and the calls before it run again in the next round;
//! - a "remember" is honoured only for the call whose question offered it
//!   (every argument shown whole), in the round it is given, and is saved
//!   for that call's own tool, arguments and digest (`call/admit.rs`);
//! - the state is sealed (HMAC-SHA256, rmcp's `RequestStateCodec`) with
//!   associated data naming the outer call (its caller, profile, tool and
//!   whole arguments), lasts [`APPROVAL_TTL`] and is accepted once per
//!   process; one that fails a check (forged, changed, expired, replayed,
//!   another call's, past the bounds) approves nothing;
//! - bounded: at most [`MAX_ANSWERS`] answers in one call's state, and a
//!   `requestState` longer than [`MAX_STATE_BYTES`] is not opened.
//!
//! The state is signed, not encrypted: it holds digests of calls, never
//! their arguments.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{
    InputRequiredResult, InputResponses, RequestStateCodec, RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use toolhost_runtime::{
    Approver, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::ResultApproval, permission::ResultApprovalRequest,
};

use super::McpServer;
use super::elicit::{CallQuestion, approval_answer, approval_request, call_question};
use crate::peer::canonical::arguments_digest;
use crate::peer::relay::{UpstreamAnswer, UpstreamAsked, UpstreamCall};

/// How long a question's state (and the answers it carries) stays valid.
pub const APPROVAL_TTL: Duration = Duration::from_secs(300);

/// Most states remembered as used (replay protection within one process).
const MAX_USED_ANSWERS: usize = 10_000;

/// The key of the one question toolhost asks in an `input_required` result.
pub(crate) const QUESTION_KEY: &str = "toolhost-approval";

/// Most answers one call's state carries, a yes counted once for each
/// call it approves, and each no: past it, the call is refused rather
/// than asked again.
pub(crate) const MAX_ANSWERS: u32 = 64;

/// The longest `requestState` opened, in bytes (a state of
/// [`MAX_ANSWERS`] answers is about 6 KiB).
pub(crate) const MAX_STATE_BYTES: usize = 16 * 1024;

/// The longest `requestState` of an upstream server carried in one of
/// ours.
const MAX_UPSTREAM_STATE_BYTES: usize = 8 * 1024;

/// What a call is told when the state of its retry fails a check.
pub(crate) const REFUSED: &str = "the approval does not match this call, has expired, or was already \
     used; call the tool again to be asked again";

/// What the call asked about is told while its question goes to the user.
const WAITING: &str = "waiting for the user's answer";

/// What a later ask of the same run is told.
const ASKED_AFTER: &str = "not run: another question of this call waits for the user's answer; \
     this one is asked after it";

/// What a call the user said no to is told.
const DECLINED: &str = "the user declined";

/// What binds an answer to one call: a SHA-256 over its tool, its
/// plugin's digest and its whole arguments as canonical JSON (object keys
/// sorted at every level), in hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
struct CallBinding(String);

impl CallBinding {
    fn of(request: &CallApprovalRequest<'_>) -> CallBinding {
        let mut h = Sha256::new();
        h.update(b"toolhost/mcp/approval/call/v1");
        field(&mut h, request.tool.as_bytes());
        field(&mut h, request.digest.as_bytes());
        h.update(arguments_digest(request.args));
        CallBinding(hex::encode(h.finalize()))
    }
}

/// The call a client made, as its state is sealed to it (the associated
/// data): its caller, profile, tool and whole arguments.
pub(crate) struct OuterCall([u8; 32]);

impl OuterCall {
    pub(crate) fn of(client: &str, agent: Option<&str>, tool: &str, args: &Value) -> OuterCall {
        let mut h = Sha256::new();
        h.update(b"toolhost/mcp/approval/outer/v1");
        field(&mut h, client.as_bytes());
        match agent {
            Some(agent) => {
                h.update([1]);
                field(&mut h, agent.as_bytes());
            }
            None => h.update([0]),
        }
        field(&mut h, tool.as_bytes());
        h.update(arguments_digest(args));
        OuterCall(h.finalize().into())
    }
}

/// `bytes`, length first, so that no two lists of fields hash alike.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update(u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_be_bytes());
    h.update(bytes);
}

/// A state as sealed: the question it asks and the answers given before.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    /// Makes each state one of a kind, for the used-state list.
    nonce: String,
    /// The call toolhost's own question asks about, when it asked one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    asked: Option<CallBinding>,
    /// Whether the question offered to remember the answer (every
    /// argument shown whole); a `remember` is honoured only then.
    #[serde(default)]
    remember: bool,
    /// The yeses of earlier rounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    approved: Vec<Carried>,
    /// The noes of earlier rounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    declined: Vec<CallBinding>,
    /// The question an upstream server asked, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upstream: Option<UpstreamSealed>,
}

/// An upstream server's question, as a state carries it: the call it was
/// asked in, which input requests are the server's, and its own state.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpstreamSealed {
    call: UpstreamCall,
    keys: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<String>,
}

/// A yes of an earlier round: how many calls it approves in each run.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Carried {
    call: CallBinding,
    count: u32,
}

/// Why no `input_required` result could be made for a question.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskError {
    /// The call asked as many questions as one call's state may carry.
    #[error(
        "this call needs more approvals than one call may ask for ({MAX_ANSWERS}); \
         ask the operator to allow its tools instead"
    )]
    TooManyQuestions,
    /// The state could not be sealed.
    #[error("cannot seal the request state: {0}")]
    Seal(#[from] RequestStateError),
    /// The question could not be written as an input request.
    #[error("cannot write the question: {0}")]
    Question(#[from] serde_json::Error),
    /// An upstream server's question cannot be passed on.
    #[error("cannot pass on the MCP server's question: {0}")]
    Upstream(&'static str),
}

/// The round trips of one server: the key that seals their states, and
/// the states already used.
pub(crate) struct RoundTrips {
    codec: RequestStateCodec,
    used: Mutex<(HashSet<String>, VecDeque<String>)>,
}

impl RoundTrips {
    /// With `key` (at least 32 bytes; replicas behind one load balancer
    /// need the same key), or a random one for this process.
    pub(crate) fn new(key: Option<&[u8]>) -> RoundTrips {
        let random = || {
            let mut k = uuid::Uuid::new_v4().as_bytes().to_vec();
            k.extend_from_slice(uuid::Uuid::new_v4().as_bytes());
            k
        };
        let key = key
            .filter(|k| k.len() >= 32)
            .map_or_else(random, <[u8]>::to_vec);
        RoundTrips {
            codec: RequestStateCodec::new_unchecked(key),
            used: Mutex::new(Default::default()),
        }
    }

    /// The approver of one run of `outer`: with nothing answered yet (a
    /// first call, no `state`), or with the answers of a retry's `state`
    /// and the user's answer in `responses` to the question it asked.
    pub(crate) fn open(
        &self,
        outer: &OuterCall,
        state: Option<&str>,
        responses: Option<&InputResponses>,
    ) -> RoundTripApprover {
        let opened = match state {
            None => Some((Run::default(), None)),
            Some(state) => self.answers(outer, state, responses),
        };
        let refused = opened.is_none();
        let (run, upstream) = opened.unwrap_or_default();
        RoundTripApprover {
            refused,
            run: Mutex::new(run),
            upstream: Mutex::new(upstream),
        }
    }

    /// The answers a retry carries, or `None` when its state fails a check.
    fn answers(
        &self,
        outer: &OuterCall,
        state: &str,
        responses: Option<&InputResponses>,
    ) -> Option<(Run, Option<UpstreamAnswer>)> {
        if state.len() > MAX_STATE_BYTES {
            return None;
        }
        let sealed: Sealed = self.codec.open_json_with(state, &outer.0).ok()?;
        // One more answer must fit (ours never seal more).
        if answers(&sealed.approved, sealed.declined.len())? >= MAX_ANSWERS {
            return None;
        }
        if !self.first_use(&sealed.nonce) {
            return None;
        }
        let (approved, remember) = responses
            .and_then(|r| r.get(QUESTION_KEY))
            .map_or((false, false), approval_answer);
        let mut run = Run {
            approved: sealed
                .approved
                .into_iter()
                .map(|c| Approval {
                    call: c.call,
                    count: c.count,
                    used: 0,
                    remember: false,
                })
                .collect(),
            declined: sealed.declined,
            asked: None,
        };
        match sealed.asked {
            Some(asked) if approved => run.approve(asked, remember && sealed.remember)?,
            Some(asked) => run.declined.push(asked),
            None => {}
        }
        let upstream = sealed.upstream.map(|u| UpstreamAnswer {
            call: u.call,
            // The server's own keys only: anything else is dropped.
            responses: responses
                .into_iter()
                .flatten()
                .filter(|(key, _)| u.keys.contains(key))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
            state: u.state,
        });
        Some((run, upstream))
    }

    /// Whether `nonce`'s state is used for the first time (and notes it).
    fn first_use(&self, nonce: &str) -> bool {
        let mut used = self.used.lock();
        if !used.0.insert(nonce.to_owned()) {
            return false;
        }
        used.1.push_back(nonce.to_owned());
        while used.1.len() > MAX_USED_ANSWERS {
            if let Some(old) = used.1.pop_front() {
                used.0.remove(&old);
            }
        }
        true
    }

    /// The `input_required` result asking the question `approver`'s run
    /// stopped at, with a state that carries the run's answers; `None`
    /// when the run asked nothing.
    /// An upstream server's question (`upstream`) goes in it too, with
    /// that server's own state.
    pub(crate) fn ask(
        &self,
        outer: &OuterCall,
        approver: &RoundTripApprover,
        upstream: Option<UpstreamAsked>,
    ) -> Result<Option<InputRequiredResult>, AskError> {
        let run = approver.run.lock();
        if run.asked.is_none() && upstream.is_none() {
            return Ok(None);
        }
        if let Some(u) = &upstream {
            if u.requests.contains_key(QUESTION_KEY) {
                return Err(AskError::Upstream(
                    "its input request uses toolhost's own key",
                ));
            }
            if u.state
                .as_ref()
                .is_some_and(|s| s.len() > MAX_UPSTREAM_STATE_BYTES)
            {
                return Err(AskError::Upstream("its request state is too large"));
            }
        }
        let carried: Vec<Carried> = run
            .approved
            .iter()
            .map(|a| Carried {
                call: a.call.clone(),
                count: a.count,
            })
            .collect();
        // The answer to this question must fit too.
        if answers(&carried, run.declined.len()).is_none_or(|n| n >= MAX_ANSWERS) {
            return Err(AskError::TooManyQuestions);
        }
        let (upstream_requests, upstream) = match upstream {
            Some(u) => (
                u.requests.clone(),
                Some(UpstreamSealed {
                    call: u.call,
                    keys: u.requests.into_keys().collect(),
                    state: u.state,
                }),
            ),
            None => (Default::default(), None),
        };
        let state = self.codec.seal_json_with(
            &Sealed {
                nonce: uuid::Uuid::new_v4().to_string(),
                asked: run.asked.as_ref().map(|(asked, _)| asked.clone()),
                remember: run.asked.as_ref().is_some_and(|(_, q)| q.remember),
                approved: carried,
                declined: run.declined.clone(),
                upstream,
            },
            &SealOptions::new()
                .associated_data(&outer.0)
                .ttl(APPROVAL_TTL),
        )?;
        let mut requests = upstream_requests;
        let Some((_, question)) = &run.asked else {
            return Ok(Some(InputRequiredResult::new(Some(requests), Some(state))));
        };
        let request = approval_request(question)?;
        requests.insert(QUESTION_KEY.to_owned(), request);
        Ok(Some(InputRequiredResult::new(Some(requests), Some(state))))
    }
}

impl McpServer {
    /// 2026-07-28: the round trip of the request `outer` (a call, a
    /// prompt's get), opened with the answers and the state its retry
    /// carries, and the relay of an upstream server's questions in it;
    /// a state that fails its checks is a protocol error.
    pub(super) fn round_trip(
        &self,
        outer: OuterCall,
        state: Option<&str>,
        responses: Option<&rmcp::model::InputResponses>,
        context: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
    ) -> Result<(OuterCall, Arc<RoundTripApprover>, crate::peer::InputRelay), rmcp::ErrorData> {
        let approver = self.round_trips.open(&outer, state, responses);
        if approver.refused() {
            return Err(rmcp::ErrorData::invalid_params(REFUSED, None));
        }
        let relay = crate::peer::InputRelay::new(
            context.client_capabilities().unwrap_or_default(),
            approver.take_upstream(),
        );
        Ok((outer, Arc::new(approver), relay))
    }
}

/// The answers in `approved` (each yes as many times as it counts) and
/// `declined` noes; `None` past `u32`.
fn answers(approved: &[Carried], declined: usize) -> Option<u32> {
    approved
        .iter()
        .try_fold(u32::try_from(declined).ok()?, |n, c| n.checked_add(c.count))
}

/// The answers of one run of a call, and the question it stopped at.
#[derive(Default)]
struct Run {
    approved: Vec<Approval>,
    declined: Vec<CallBinding>,
    /// The first call of the run that no answer covers, and its question.
    asked: Option<(CallBinding, CallQuestion)>,
}

/// A yes: `count` calls of `call` may run in a run, `used` have.
struct Approval {
    call: CallBinding,
    count: u32,
    used: u32,
    /// The next call it approves is also saved (`remember`, offered and
    /// given in this round).
    remember: bool,
}

impl Run {
    /// Adds a yes for `call`; `None` past the bounds.
    fn approve(&mut self, call: CallBinding, remember: bool) -> Option<()> {
        match self.approved.iter_mut().find(|a| a.call == call) {
            Some(a) => {
                a.count = a.count.checked_add(1)?;
                a.remember |= remember;
            }
            None => self.approved.push(Approval {
                call,
                count: 1,
                used: 0,
                remember,
            }),
        }
        Some(())
    }

    /// The answer to an ask about `call` (question: `question`).
    fn answer(
        &mut self,
        call: CallBinding,
        question: impl FnOnce() -> CallQuestion,
    ) -> CallApproval {
        if let Some(a) = self
            .approved
            .iter_mut()
            .find(|a| a.call == call && a.used < a.count)
        {
            a.used += 1;
            return if std::mem::take(&mut a.remember) {
                CallApproval::AllowAlways
            } else {
                CallApproval::AllowOnce
            };
        }
        let message = if self.declined.contains(&call) {
            DECLINED
        } else if self.asked.is_none() {
            self.asked = Some((call, question()));
            WAITING
        } else {
            ASKED_AFTER
        };
        CallApproval::Deny {
            message: Some(message.to_owned()),
        }
    }
}

/// On 2026-07-28, the approver of one run of a call: answers each ask from
/// the answers its state carries, or records the question to send back as
/// `input_required` (and denies meanwhile, so nothing runs unasked); see
/// the module docs.
pub(crate) struct RoundTripApprover {
    /// The retry's state failed a check: nothing is approved or asked.
    refused: bool,
    run: Mutex<Run>,
    /// The caller's answer to an upstream server's question, until the
    /// call takes it.
    upstream: Mutex<Option<UpstreamAnswer>>,
}

impl RoundTripApprover {
    /// Whether the retry's state failed a check (forged, changed,
    /// expired, replayed, another call's, past the bounds).
    pub(crate) fn refused(&self) -> bool {
        self.refused
    }

    /// The caller's answer to an upstream server's question, once.
    pub(crate) fn take_upstream(&self) -> Option<UpstreamAnswer> {
        self.upstream.lock().take()
    }

    /// Whether the run stopped at a question.
    pub(crate) fn asked(&self) -> bool {
        self.run.lock().asked.is_some()
    }
}

impl Approver for RoundTripApprover {
    fn prompt_name(&self) -> &'static str {
        "mcp-input-required"
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            if self.refused {
                return CallApproval::Deny {
                    message: Some(REFUSED.to_owned()),
                };
            }
            let call = CallBinding::of(request);
            self.run.lock().answer(call, || call_question(request))
        })
    }

    fn approve_result<'a>(
        &'a self,
        _request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        // The tool has run: its result cannot wait for another round trip.
        Box::pin(async {
            ResultApproval::Reject {
                message: Some(
                    "this result needs the user's approval, which MCP 2026-07-28 clients \
                     cannot give after a call has run"
                        .to_owned(),
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    const DIGEST: &str = "sha256:aaaa";

    fn request<'a>(tool: &'a str, digest: &'a str, args: &'a Value) -> CallApprovalRequest<'a> {
        CallApprovalRequest {
            tool,
            plugin: "p",
            digest,
            args,
            reasons: &[],
            session_id: None,
            agent: None,
            scopes: &[],
        }
    }

    fn outer() -> OuterCall {
        OuterCall::of("stdio", None, "run_code", &json!({"code": "…"}))
    }

    fn answer(approve: bool, remember: bool) -> InputResponses {
        [(
            QUESTION_KEY.to_owned(),
            json!({"action": "accept", "content": {"approve": approve, "remember": remember}}),
        )]
        .into_iter()
        .collect()
    }

    fn yes() -> InputResponses {
        answer(true, false)
    }

    /// One run of a call: `asks` asked in order, each answered.
    async fn run(
        approver: &RoundTripApprover,
        asks: &[CallApprovalRequest<'_>],
    ) -> Vec<CallApproval> {
        let mut answers = Vec::new();
        for ask in asks {
            answers.push(approver.approve_call(ask).await);
        }
        answers
    }

    fn denied(answer: &CallApproval, why: &str) -> bool {
        matches!(answer, CallApproval::Deny { message: Some(m) } if m.contains(why))
    }

    /// The state of the question `approver`'s run stopped at.
    fn next_state(trips: &RoundTrips, approver: &RoundTripApprover) -> String {
        trips
            .ask(&outer(), approver, None)
            .unwrap()
            .expect("a question")
            .request_state
            .expect("a state")
    }

    /// The state of a first run that asked about `ask`.
    async fn asked_about(trips: &RoundTrips, ask: &CallApprovalRequest<'_>) -> String {
        let first = trips.open(&outer(), None, None);
        assert!(denied(
            &run(&first, std::slice::from_ref(ask)).await[0],
            WAITING
        ));
        next_state(trips, &first)
    }

    #[tokio::test]
    async fn an_answer_for_one_call_approves_no_other_tool_arguments_or_digest() {
        let trips = RoundTrips::new(None);
        let args = json!({"path": "notes.txt"});
        let other_args = json!({"path": "secret.txt"});
        let a = request("read_file", DIGEST, &args);
        for other in [
            request("write_file", DIGEST, &args),
            request("read_file", DIGEST, &other_args),
            request("read_file", "sha256:bbbb", &args),
        ] {
            let state = asked_about(&trips, &a).await;
            let retry = trips.open(&outer(), Some(&state), Some(&yes()));
            let answers = run(&retry, &[other.clone(), a.clone()]).await;
            assert!(
                denied(&answers[0], WAITING),
                "{:?}: {answers:?}",
                other.tool
            );
            assert_eq!(answers[1], CallApproval::AllowOnce);
            // What is asked next is the other call's own question.
            let next = trips.ask(&outer(), &retry, None).unwrap().unwrap();
            let next = serde_json::to_value(next).unwrap();
            let text = next["inputRequests"][QUESTION_KEY]["params"]["message"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(text.contains(other.tool), "{text}");
        }
        // Keys in another order are the same arguments.
        let two: Value = serde_json::from_str(r#"{"a": 1, "b": {"y": 2, "x": [3]}}"#).unwrap();
        let reordered: Value =
            serde_json::from_str(r#"{"b": {"x": [3], "y": 2}, "a": 1}"#).unwrap();
        assert_eq!(
            CallBinding::of(&request("t", DIGEST, &two)),
            CallBinding::of(&request("t", DIGEST, &reordered))
        );
        assert_ne!(
            CallBinding::of(&request("t", DIGEST, &json!({"a": "1"}))),
            CallBinding::of(&request("t", DIGEST, &json!({"a": 1})))
        );
    }

    #[tokio::test]
    async fn a_yes_approves_one_call_once_per_run_and_a_second_identical_call_is_asked() {
        let trips = RoundTrips::new(None);
        let args = json!({"expression": "1+1"});
        let a = request("calculate", DIGEST, &args);
        let state = asked_about(&trips, &a).await;

        let second = trips.open(&outer(), Some(&state), Some(&yes()));
        let answers = run(&second, &[a.clone(), a.clone()]).await;
        assert_eq!(answers[0], CallApproval::AllowOnce);
        assert!(denied(&answers[1], WAITING), "{answers:?}");

        // Its answer is a second yes: two calls now, and a third is asked.
        let third = trips.open(&outer(), Some(&next_state(&trips, &second)), Some(&yes()));
        let answers = run(&third, &[a.clone(), a.clone(), a.clone()]).await;
        assert_eq!(
            answers[..2],
            [CallApproval::AllowOnce, CallApproval::AllowOnce]
        );
        assert!(denied(&answers[2], WAITING), "{answers:?}");
    }

    #[tokio::test]
    async fn the_first_unanswered_ask_of_a_run_is_the_question_and_later_ones_wait() {
        let trips = RoundTrips::new(None);
        let (x, y) = (json!({"expression": "6*7"}), json!({"text": "one two"}));
        let (a, b) = (
            request("calculate", DIGEST, &x),
            request("word_count", DIGEST, &y),
        );
        let first = trips.open(&outer(), None, None);
        let answers = run(&first, &[a.clone(), b.clone()]).await;
        assert!(denied(&answers[0], WAITING));
        assert!(denied(&answers[1], ASKED_AFTER), "{answers:?}");
        let asked =
            serde_json::to_value(trips.ask(&outer(), &first, None).unwrap().unwrap()).unwrap();
        let text = asked["inputRequests"][QUESTION_KEY]["params"]["message"]
            .as_str()
            .unwrap();
        assert!(
            text.contains("calculate") && !text.contains("word_count"),
            "{text}"
        );

        // Yes to `calculate`: it runs, `word_count` is asked; yes to that
        // too: both run, once each.
        let state = next_state(&trips, &first);
        let second = trips.open(&outer(), Some(&state), Some(&yes()));
        let answers = run(&second, &[a.clone(), b.clone()]).await;
        assert_eq!(answers[0], CallApproval::AllowOnce);
        assert!(denied(&answers[1], WAITING));
        let third = trips.open(&outer(), Some(&next_state(&trips, &second)), Some(&yes()));
        let answers = run(&third, &[a.clone(), b.clone()]).await;
        assert_eq!(answers, [CallApproval::AllowOnce, CallApproval::AllowOnce]);
        assert!(!third.asked());
        assert!(trips.ask(&outer(), &third, None).unwrap().is_none());
    }

    #[tokio::test]
    async fn a_no_denies_its_call_without_asking_again_and_no_answer_is_a_no() {
        let trips = RoundTrips::new(None);
        let (x, y) = (json!({"expression": "6*7"}), json!({"text": "one two"}));
        let (a, b) = (
            request("calculate", DIGEST, &x),
            request("word_count", DIGEST, &y),
        );
        for responses in [Some(answer(false, true)), None] {
            let state = asked_about(&trips, &a).await;
            let second = trips.open(&outer(), Some(&state), responses.as_ref());
            let answers = run(&second, &[a.clone(), a.clone(), b.clone()]).await;
            assert!(denied(&answers[0], DECLINED), "{answers:?}");
            assert!(denied(&answers[1], DECLINED), "{answers:?}");
            assert!(denied(&answers[2], WAITING), "{answers:?}");
            // Still no in the next round.
            let third = trips.open(&outer(), Some(&next_state(&trips, &second)), Some(&yes()));
            let answers = run(&third, &[a.clone(), b.clone()]).await;
            assert!(denied(&answers[0], DECLINED), "{answers:?}");
            assert_eq!(answers[1], CallApproval::AllowOnce);
        }
    }

    /// `state` with its payload changed by `change`, its tag kept.
    fn tampered(state: &str, change: impl FnOnce(&mut Value)) -> String {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let parts: Vec<&str> = state.split('.').collect();
        assert_eq!(parts[0], "rs1", "{state}");
        let body = b64.decode(parts[1]).unwrap();
        let (expiry, payload) = body.split_at(8);
        let mut payload: Value = serde_json::from_slice(payload).unwrap();
        change(&mut payload);
        let mut body = expiry.to_vec();
        body.extend_from_slice(&serde_json::to_vec(&payload).unwrap());
        format!("rs1.{}.{}", b64.encode(body), parts[2])
    }

    #[tokio::test]
    async fn a_tampered_extended_replayed_or_misplaced_state_approves_nothing() {
        let trips = RoundTrips::new(None);
        let (x, y) = (json!({"expression": "6*7"}), json!({"text": "one two"}));
        let (a, b) = (
            request("calculate", DIGEST, &x),
            request("word_count", DIGEST, &y),
        );
        let b_call = CallBinding::of(&b).0;
        let refused = |approver: &RoundTripApprover, answers: &[CallApproval]| {
            answers.iter().all(|x| denied(x, REFUSED)) && !approver.asked()
        };

        let state = asked_about(&trips, &a).await;
        for bad in [
            // Another call's approval added, or a count raised.
            tampered(&state, |p| {
                p["approved"] = json!([{"call": b_call, "count": 1}]);
            }),
            tampered(&state, |p| p["asked"] = json!(b_call)),
            tampered(&state, |p| p["remember"] = json!(true)),
            "rs1.forged".to_owned(),
            format!("{state}x"),
            "x".repeat(MAX_STATE_BYTES + 1),
        ] {
            let retry = trips.open(&outer(), Some(&bad), Some(&yes()));
            let answers = run(&retry, &[a.clone(), b.clone()]).await;
            assert!(refused(&retry, &answers), "{bad}: {answers:?}");
        }

        // Sealed to another call, or with another key.
        let elsewhere = OuterCall::of("stdio", None, "run_code", &json!({"code": "other"}));
        let retry = trips.open(&elsewhere, Some(&state), Some(&yes()));
        assert!(refused(
            &retry,
            &run(&retry, std::slice::from_ref(&a)).await
        ));
        let other_caller = OuterCall::of("token:1", None, "run_code", &json!({"code": "…"}));
        let retry = trips.open(&other_caller, Some(&state), Some(&yes()));
        assert!(refused(
            &retry,
            &run(&retry, std::slice::from_ref(&a)).await
        ));
        let other_key = RoundTrips::new(None);
        let retry = other_key.open(&outer(), Some(&state), Some(&yes()));
        assert!(refused(
            &retry,
            &run(&retry, std::slice::from_ref(&a)).await
        ));

        // The real one works once, and is refused when replayed.
        let retry = trips.open(&outer(), Some(&state), Some(&yes()));
        assert_eq!(
            run(&retry, std::slice::from_ref(&a)).await,
            [CallApproval::AllowOnce]
        );
        let replay = trips.open(&outer(), Some(&state), Some(&yes()));
        assert!(refused(
            &replay,
            &run(&replay, std::slice::from_ref(&a)).await
        ));
    }

    #[tokio::test]
    async fn a_state_holds_at_most_max_answers_and_then_the_call_is_refused() {
        let trips = RoundTrips::new(None);
        let args: Vec<Value> = (0..=MAX_ANSWERS)
            .map(|i| json!({ "expression": format!("{i}+1") }))
            .collect();
        let asks: Vec<CallApprovalRequest<'_>> = args
            .iter()
            .map(|a| request("calculate", DIGEST, a))
            .collect();
        let mut approver = trips.open(&outer(), None, None);
        let mut rounds = 0;
        loop {
            let answers = run(&approver, &asks).await;
            let allowed = answers
                .iter()
                .filter(|a| **a == CallApproval::AllowOnce)
                .count();
            assert_eq!(allowed, rounds, "one more call each round");
            match trips.ask(&outer(), &approver, None) {
                Ok(Some(next)) => {
                    let state = next.request_state.unwrap();
                    assert!(state.len() <= MAX_STATE_BYTES, "{} bytes", state.len());
                    approver = trips.open(&outer(), Some(&state), Some(&yes()));
                    rounds += 1;
                }
                Err(AskError::TooManyQuestions) => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(rounds, MAX_ANSWERS as usize);
    }

    #[tokio::test]
    async fn remember_is_honoured_only_for_the_call_shown_whole_and_only_once() {
        let trips = RoundTrips::new(None);
        let short = json!({"path": "notes.txt"});
        let long = json!({"content": "x".repeat(50_000), "path": "notes.txt"});
        let (a, cut) = (
            request("write_file", DIGEST, &short),
            request("write_file", DIGEST, &long),
        );

        // Shown whole: the form offers it, and a yes with it is saved for
        // this call alone; the next call it approves is once only.
        let first = trips.open(&outer(), None, None);
        run(&first, std::slice::from_ref(&a)).await;
        let asked =
            serde_json::to_value(trips.ask(&outer(), &first, None).unwrap().unwrap()).unwrap();
        let schema = &asked["inputRequests"][QUESTION_KEY]["params"]["requestedSchema"];
        assert!(
            schema["properties"]["remember"].is_object(),
            "offered: {schema}"
        );
        let state = asked["requestState"].as_str().unwrap();
        let second = trips.open(&outer(), Some(state), Some(&answer(true, true)));
        let answers = run(&second, &[cut.clone(), a.clone(), a.clone()]).await;
        assert!(denied(&answers[0], WAITING), "{answers:?}");
        assert_eq!(answers[1], CallApproval::AllowAlways);
        assert!(denied(&answers[2], ASKED_AFTER), "{answers:?}");
        // In the next round that yes approves once, and `cut`'s question
        // does not offer to remember, nor honours one sent anyway.
        let asked =
            serde_json::to_value(trips.ask(&outer(), &second, None).unwrap().unwrap()).unwrap();
        let schema = &asked["inputRequests"][QUESTION_KEY]["params"]["requestedSchema"];
        assert!(schema["properties"]["approve"].is_object(), "{schema}");
        assert!(schema["properties"].get("remember").is_none(), "{schema}");
        let state = asked["requestState"].as_str().unwrap();
        let third = trips.open(&outer(), Some(state), Some(&answer(true, true)));
        let answers = run(&third, &[cut.clone(), a.clone()]).await;
        assert_eq!(answers, [CallApproval::AllowOnce, CallApproval::AllowOnce]);
    }
}
