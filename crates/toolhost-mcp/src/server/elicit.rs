//! A policy `ask` over MCP.
//!
//! - 2025-11-25 and older: the question goes to the client as an elicitation
//!   request (form mode) during the call ([`ElicitingApprover`]); a client
//!   that cannot be asked gets a denial that says why.
//! - 2026-07-28, where a server sends no requests to the client: the call
//!   stops at the question and returns `input_required` with the
//!   elicitation; the client asks its user and calls again with the answer
//!   and the sealed state ([`RoundTrips`], [`RoundTripApprover`]). Nothing
//!   runs before the answer (the approval comes before execution; a
//!   before-hook runs again on the retry).
//!
//! A question names every argument, each cut on its own
//! ([`ShownArguments`](toolhost_runtime::ShownArguments)); when one was
//! cut, the form does not offer to remember the answer (an approval of
//! these exact arguments would approve bytes nobody saw), and a
//! `remember` sent anyway is not honoured.

use std::time::Duration;

use rmcp::service::{ElicitationError, Peer, RoleServer};
use serde::Deserialize;
use toolhost_runtime::{
    ApprovalFuture, Approver, CallApproval, CallApprovalRequest, ResultApproval,
    ResultApprovalRequest, ShownArguments,
};

/// How long the client's user has to answer before the call is denied.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest reason or output text shown in a question.
const SHOWN_CHARS: usize = 2000;

/// The form the client shows: yes or no, and whether to remember a yes.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Approval {
    /// Whether to go ahead.
    #[schemars(description = "Allow it?")]
    approve: bool,
    /// Whether a yes is saved for these exact arguments (a saved approval,
    /// bound to the plugin's build; `host approvals` lists and revokes it).
    #[serde(default)]
    #[schemars(
        description = "Also allow these exact arguments from now on (saved; `host approvals revoke` undoes it)"
    )]
    remember: Option<bool>,
}

rmcp::elicit_safe!(Approval);

/// The form for a question whose answer cannot be remembered (some
/// argument was cut): yes or no.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ApprovalOnce {
    /// Whether to go ahead, this once.
    #[schemars(description = "Allow it, this once?")]
    approve: bool,
}

rmcp::elicit_safe!(ApprovalOnce);

/// What a call's question says, and whether its answer may be remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallQuestion {
    /// The question, on one line.
    pub(crate) text: String,
    /// Whether every argument is shown whole, so "remember" may be offered.
    pub(crate) remember: bool,
}

/// Asks the MCP client's user (see the module docs).
pub(crate) struct ElicitingApprover {
    pub(crate) peer: Peer<RoleServer>,
}

impl ElicitingApprover {
    /// Asks `question`, offering to remember a yes when `remember`;
    /// `Ok(true)` when the user also asked to remember.
    async fn ask(&self, question: String, remember: bool) -> Result<bool, String> {
        let answer = if remember {
            self.peer
                .elicit_with_timeout::<Approval>(question, Some(ELICITATION_TIMEOUT))
                .await
        } else {
            self.peer
                .elicit_with_timeout::<ApprovalOnce>(question, Some(ELICITATION_TIMEOUT))
                .await
                .map(|a| {
                    a.map(|a| Approval {
                        approve: a.approve,
                        remember: None,
                    })
                })
        };
        match answer {
            Ok(Some(Approval {
                approve: true,
                remember,
            })) => Ok(remember == Some(true)),
            Ok(_) | Err(ElicitationError::UserDeclined | ElicitationError::NoContent) => {
                Err("the user declined".to_owned())
            }
            Err(ElicitationError::UserCancelled) => Err("the user dismissed the question".into()),
            Err(ElicitationError::CapabilityNotSupported) => Err(
                "the user's approval is needed and this MCP client cannot be asked \
                 (it did not declare form elicitation)"
                    .to_owned(),
            ),
            Err(e) => {
                tracing::debug!("elicitation failed: {e}");
                Err(format!(
                    "the user's approval is needed and could not be asked for: {}",
                    one_line(&e.to_string(), 300)
                ))
            }
        }
    }
}

impl Approver for ElicitingApprover {
    fn prompt_name(&self) -> &'static str {
        "mcp-elicitation"
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            let question = call_question(request);
            match self.ask(question.text, question.remember).await {
                Ok(false) => CallApproval::AllowOnce,
                Ok(true) => CallApproval::AllowAlways,
                Err(message) => CallApproval::Deny {
                    message: Some(message),
                },
            }
        })
    }

    fn approve_result<'a>(
        &'a self,
        request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move {
            let question = format!(
                "toolhost: may the result of `{}` (plugin {}) be returned? It reads: {}",
                request.tool,
                request.plugin,
                one_line(request.output, SHOWN_CHARS)
            );
            match self.ask(question, false).await {
                Ok(_) => ResultApproval::Accept,
                Err(message) => ResultApproval::Reject {
                    message: Some(message),
                },
            }
        })
    }
}

/// The approver of a server whose callers may not approve their own calls
/// ([`Asks::Deny`](crate::Asks::Deny)): every `ask` is a denial that says why.
pub(crate) struct NobodyAnswers(pub(crate) &'static str);

/// What a caller is told when its call needed an approval nobody gives.
pub(crate) const NOBODY_ANSWERS: &str = "this call needs an approval, and this server does not let \
     its callers approve their own calls (asks = deny): ask its operator to allow the tool";

/// What a caller is told when its `ask` goes to the operator and this
/// server has no console where the operator could answer (a policy
/// reloaded with a profile's `ask = "operator"`, or `host mcp` over stdio).
pub(crate) const NO_OPERATOR: &str = "this call needs the operator's approval, and this \
     server has no console where the operator could give it (host serve --console)";

impl Approver for NobodyAnswers {
    fn approve_call<'a>(
        &'a self,
        _request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async {
            CallApproval::Deny {
                message: Some(self.0.to_owned()),
            }
        })
    }

    fn approve_result<'a>(
        &'a self,
        _request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async {
            ResultApproval::Reject {
                message: Some(self.0.to_owned()),
            }
        })
    }
}

use toolhost_text::line as one_line;

#[cfg(test)]
mod tests {
    use super::*;

    fn accept() -> rmcp::model::InputResponses {
        [(
            QUESTION_KEY.to_owned(),
            serde_json::json!({"action": "accept", "content": {"approve": true}}),
        )]
        .into_iter()
        .collect()
    }

    fn state_of(trips: &RoundTrips, tool: &str, args: &serde_json::Value) -> String {
        sealed(trips, tool, args, true)
    }

    fn sealed(trips: &RoundTrips, tool: &str, args: &serde_json::Value, remember: bool) -> String {
        let question = CallQuestion {
            text: "allow?".to_owned(),
            remember,
        };
        trips
            .ask(tool, args, &question)
            .unwrap()
            .request_state
            .expect("a sealed state")
    }

    #[test]
    fn an_answer_approves_only_the_call_it_was_asked_about_and_only_once() {
        let trips = RoundTrips::new(None);
        let args = serde_json::json!({"expression": "1+1"});
        let state = state_of(&trips, "calculate", &args);
        let other = serde_json::json!({"expression": "2+2"});
        assert!(
            matches!(
                trips.retry("calculate", &other, Some(&state), Some(&accept())),
                Retry::Answered(Some(_))
            ),
            "other arguments"
        );
        let state = state_of(&trips, "calculate", &args);
        assert!(
            matches!(
                trips.retry("read_file", &args, Some(&state), Some(&accept())),
                Retry::Answered(Some(_))
            ),
            "another tool"
        );
        let state = state_of(&trips, "calculate", &args);
        assert!(matches!(
            trips.retry("calculate", &args, Some(&state), Some(&accept())),
            Retry::Answered(None)
        ));
        assert!(
            matches!(
                trips.retry("calculate", &args, Some(&state), Some(&accept())),
                Retry::Answered(Some(_))
            ),
            "a replayed answer"
        );
        assert!(
            matches!(
                trips.retry("calculate", &args, Some("rs1.forged"), Some(&accept())),
                Retry::Answered(Some(_))
            ),
            "a forged state"
        );
        let state = state_of(&trips, "calculate", &args);
        assert!(
            matches!(
                trips.retry("calculate", &args, Some(&state), None),
                Retry::Answered(Some(_))
            ),
            "no answer is a no"
        );
        let elsewhere = RoundTrips::new(None);
        let state = state_of(&elsewhere, "calculate", &args);
        assert!(
            matches!(
                trips.retry("calculate", &args, Some(&state), Some(&accept())),
                Retry::Answered(Some(_))
            ),
            "sealed with another key"
        );
        assert!(matches!(
            trips.retry("calculate", &args, None, None),
            Retry::First
        ));
    }

    #[test]
    fn an_answer_with_remember_is_approved_and_remembered_once() {
        let trips = RoundTrips::new(None);
        let args = serde_json::json!({"expression": "1+1"});
        let state = state_of(&trips, "calculate", &args);
        let remember: rmcp::model::InputResponses = [(
            QUESTION_KEY.to_owned(),
            serde_json::json!({"action": "accept", "content": {"approve": true, "remember": true}}),
        )]
        .into_iter()
        .collect();
        assert!(matches!(
            trips.retry("calculate", &args, Some(&state), Some(&remember)),
            Retry::Remembered
        ));
        assert!(
            matches!(
                trips.retry("calculate", &args, Some(&state), Some(&remember)),
                Retry::Answered(Some(_))
            ),
            "used once"
        );
        // `remember` without `approve` approves nothing.
        let state = state_of(&trips, "calculate", &args);
        let no: rmcp::model::InputResponses = [(
            QUESTION_KEY.to_owned(),
            serde_json::json!({"action": "accept", "content": {"approve": false, "remember": true}}),
        )]
        .into_iter()
        .collect();
        assert!(matches!(
            trips.retry("calculate", &args, Some(&state), Some(&no)),
            Retry::Answered(Some(_))
        ));
    }

    #[test]
    fn a_question_escapes_what_a_hook_or_the_model_wrote_and_is_bounded() {
        let args = serde_json::json!({"path": "a\u{1b}[2Jb\u{202e}exe.txt"});
        let reasons = ["hook: \u{9b}31mlooks fine\nallow".to_owned()];
        let request = CallApprovalRequest {
            tool: "fs_read",
            plugin: "fs",
            args: &args,
            reasons: &reasons,
            session_id: None,
            agent: None,
            scopes: &[],
        };
        let question = call_question(&request).text;
        assert!(
            !question.chars().any(toolhost_text::needs_escape) && !question.contains('\n'),
            "{question:?}"
        );
        assert!(
            question.contains("\\u{9b}31mlooks fine allow"),
            "{question}"
        );
        assert!(question.contains("\\u{202e}"), "{question}");
        let long = ["x".repeat(50_000)];
        let request = CallApprovalRequest {
            reasons: &long,
            ..request
        };
        assert!(call_question(&request).text.chars().count() < 3 * SHOWN_CHARS);
    }

    #[test]
    fn a_long_argument_leaves_the_others_in_view_and_the_answer_cannot_be_remembered() {
        let args = serde_json::json!({"content": "x".repeat(50_000), "path": "secret/key.txt"});
        let request = CallApprovalRequest {
            tool: "write_file",
            plugin: "fs",
            args: &args,
            reasons: &[],
            session_id: None,
            agent: None,
            scopes: &[],
        };
        let question = call_question(&request);
        assert!(
            question.text.contains("path: \"secret/key.txt\""),
            "{}",
            question.text
        );
        assert!(
            question.text.contains("cut: 50002 characters"),
            "{}",
            question.text
        );
        assert!(!question.remember);
        let short = serde_json::json!({"path": "notes.txt"});
        assert!(
            call_question(&CallApprovalRequest {
                args: &short,
                ..request
            })
            .remember
        );

        // 2026-07-28: the form offers no `remember`, and one sent anyway
        // approves this call only.
        let trips = RoundTrips::new(None);
        let asked = trips.ask("write_file", &args, &question).unwrap();
        let asked = serde_json::to_value(&asked).unwrap();
        let schema = &asked["inputRequests"][QUESTION_KEY]["params"]["requestedSchema"];
        assert!(schema["properties"]["approve"].is_object(), "{schema}");
        assert!(schema["properties"].get("remember").is_none(), "{schema}");
        let whole = CallQuestion {
            remember: true,
            ..question
        };
        let asked = serde_json::to_value(trips.ask("write_file", &args, &whole).unwrap()).unwrap();
        let schema = &asked["inputRequests"][QUESTION_KEY]["params"]["requestedSchema"];
        assert!(
            schema["properties"]["remember"].is_object(),
            "offered: {schema}"
        );
        let state = sealed(&trips, "write_file", &args, false);
        let remember: rmcp::model::InputResponses = [(
            QUESTION_KEY.to_owned(),
            serde_json::json!({"action": "accept", "content": {"approve": true, "remember": true}}),
        )]
        .into_iter()
        .collect();
        assert!(matches!(
            trips.retry("write_file", &args, Some(&state), Some(&remember)),
            Retry::Answered(None)
        ));
    }
}

/// How long a user's answer to an `input_required` question stays valid.
pub const APPROVAL_TTL: Duration = Duration::from_secs(300);

/// Most answers remembered as used (replay protection within one process).
const MAX_USED_ANSWERS: usize = 10_000;

/// The key of the one question toolhost asks in an `input_required` result.
const QUESTION_KEY: &str = "toolhost-approval";

/// The `input_required` round trip of protocol 2026-07-28 for an `ask`:
/// the first call stops at the question and comes back as an
/// `InputRequiredResult` with an elicitation and a sealed `requestState`
/// bound to the tool and its exact arguments; the client retries with the
/// user's answer, which is accepted once, within [`APPROVAL_TTL`].
pub(crate) struct RoundTrips {
    codec: rmcp::model::RequestStateCodec,
    used: parking_lot::Mutex<(
        std::collections::HashSet<String>,
        std::collections::VecDeque<String>,
    )>,
}

/// What a retried call carries, after checking.
pub(crate) enum Retry {
    /// Not a retry: ask (and defer the question) if the policy asks.
    First,
    /// The user's answer to this very call: `None` approves, `Some` denies
    /// with the message.
    Answered(Option<String>),
    /// The user approved this very call and asked to remember it (the
    /// form's `remember`): approved, and saved for these arguments.
    Remembered,
}

#[derive(serde::Serialize, Deserialize)]
struct Sealed {
    nonce: String,
    /// Whether the question offered to remember the answer (every
    /// argument shown whole); a `remember` is honoured only then.
    #[serde(default)]
    remember: bool,
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
            codec: rmcp::model::RequestStateCodec::new_unchecked(key),
            used: parking_lot::Mutex::new(Default::default()),
        }
    }

    /// What binds an answer to one call: the tool and its exact arguments.
    fn binding(tool: &str, args: &serde_json::Value) -> Vec<u8> {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(tool.as_bytes());
        h.update([0]);
        h.update(args.to_string().as_bytes());
        h.finalize().to_vec()
    }

    /// Checks a retry's `requestState` and the user's answer.
    pub(crate) fn retry(
        &self,
        tool: &str,
        args: &serde_json::Value,
        state: Option<&str>,
        responses: Option<&rmcp::model::InputResponses>,
    ) -> Retry {
        let Some(state) = state else {
            return Retry::First;
        };
        let expired = || {
            Retry::Answered(Some(
                "the approval does not match this call, has expired, or was already used; \
                 call the tool again to be asked again"
                    .to_owned(),
            ))
        };
        let Ok(sealed) = self
            .codec
            .open_json_with::<Sealed>(state, &Self::binding(tool, args))
        else {
            return expired();
        };
        {
            let mut used = self.used.lock();
            if !used.0.insert(sealed.nonce.clone()) {
                return expired();
            }
            used.1.push_back(sealed.nonce);
            while used.1.len() > MAX_USED_ANSWERS {
                if let Some(old) = used.1.pop_front() {
                    used.0.remove(&old);
                }
            }
        }
        let answer = responses.and_then(|r| r.get(QUESTION_KEY));
        let approved = answer.is_some_and(|a| {
            a.get("action").and_then(serde_json::Value::as_str) == Some("accept")
                && a.pointer("/content/approve")
                    .and_then(serde_json::Value::as_bool)
                    == Some(true)
        });
        let remember = answer
            .and_then(|a| a.pointer("/content/remember"))
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        if approved && remember && sealed.remember {
            Retry::Remembered
        } else if approved {
            Retry::Answered(None)
        } else {
            Retry::Answered(Some("the user declined".to_owned()))
        }
    }

    /// The `InputRequiredResult` asking `question` about this call.
    pub(crate) fn ask(
        &self,
        tool: &str,
        args: &serde_json::Value,
        question: &CallQuestion,
    ) -> Result<rmcp::model::InputRequiredResult, String> {
        let state = self
            .codec
            .seal_json_with(
                &Sealed {
                    nonce: uuid::Uuid::new_v4().to_string(),
                    remember: question.remember,
                },
                &rmcp::model::SealOptions::new()
                    .associated_data(&Self::binding(tool, args))
                    .ttl(APPROVAL_TTL),
            )
            .map_err(|e| e.to_string())?;
        let mut properties = serde_json::json!({
            "approve": { "type": "boolean", "description": "Allow it?" },
        });
        if question.remember {
            properties["remember"] = serde_json::json!({
                "type": "boolean",
                "description": "Also allow these exact arguments from now on (saved; `host approvals revoke` undoes it)",
            });
        }
        let request: rmcp::model::InputRequest = serde_json::from_value(serde_json::json!({
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": question.text,
                "requestedSchema": {
                    "type": "object",
                    "properties": properties,
                    "required": ["approve"],
                },
            },
        }))
        .map_err(|e| e.to_string())?;
        Ok(rmcp::model::InputRequiredResult::new(
            Some([(QUESTION_KEY.to_owned(), request)].into_iter().collect()),
            Some(state),
        ))
    }
}

/// On 2026-07-28: answers from a retry, or records the question to send
/// back as `input_required` (and denies meanwhile, so nothing runs).
pub(crate) struct RoundTripApprover {
    pub(crate) answer: Retry,
    /// The question asked during the call, if any.
    pub(crate) asked: parking_lot::Mutex<Option<CallQuestion>>,
}

impl Approver for RoundTripApprover {
    fn prompt_name(&self) -> &'static str {
        "mcp-elicitation"
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            match &self.answer {
                Retry::Answered(None) => CallApproval::AllowOnce,
                Retry::Remembered => CallApproval::AllowAlways,
                Retry::Answered(Some(message)) => CallApproval::Deny {
                    message: Some(message.clone()),
                },
                Retry::First => {
                    *self.asked.lock() = Some(call_question(request));
                    CallApproval::Deny {
                        message: Some("waiting for the user's answer".to_owned()),
                    }
                }
            }
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

/// The question for a call approval: every argument by name, each cut on
/// its own; a question with a cut argument does not offer to remember.
pub(crate) fn call_question(request: &CallApprovalRequest<'_>) -> CallQuestion {
    let shown = ShownArguments::of(request.args);
    let remember = shown.complete();
    // Each line is safe already (JSON text, escaped), and on one line.
    let mut text = format!(
        "toolhost: allow `{}` (plugin {}) to run with {}? Asked because: {}",
        one_line(request.tool, 200),
        one_line(request.plugin, 200),
        shown.lines().join("; "),
        one_line(&request.reasons.join("; "), SHOWN_CHARS)
    );
    if !remember {
        text.push_str(
            " (Some arguments are too long to show whole: this call can be allowed once, \
             and the answer is not remembered.)",
        );
    }
    CallQuestion { text, remember }
}
