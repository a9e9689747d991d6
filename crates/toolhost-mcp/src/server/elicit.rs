//! A policy `ask` over MCP.
//!
//! - 2025-11-25 and older: the question goes to the client as an elicitation
//!   request (form mode) during the call ([`ElicitingApprover`]); a client
//!   that cannot be asked gets a denial that says why.
//! - 2026-07-28, where a server sends no requests to the client: the call
//!   stops at the question and returns `input_required` with the
//!   elicitation; the client asks its user and calls again with the answer
//!   and the sealed state (`round_trip.rs`: each answer approves the one
//!   call it was asked about, once).
//!
//! A question names every argument, each cut on its own
//! ([`ShownArguments`](toolhost_runtime::shown::ShownArguments)); when one was
//! cut, the form does not offer to remember the answer (an approval of
//! these exact arguments would approve bytes nobody saw), and a
//! `remember` sent anyway is not honoured.

use rmcp::service::{ElicitationError, Peer, RoleServer};
use serde::Deserialize;
use toolhost_runtime::{
    Approver, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::ResultApproval, permission::ResultApprovalRequest,
    shown::ShownArguments,
};

pub use crate::peer::ELICITATION_TIMEOUT;

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
            match self.ask(result_question(request).text, false).await {
                Ok(_) => ResultApproval::Accept,
                Err(message) => ResultApproval::Reject {
                    message: Some(message),
                },
            }
        })
    }
}

/// The approver of a server whose callers may not approve their own calls
/// ([`Asks::Deny`](crate::server::Asks::Deny)): every `ask` is a denial that says why.
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

/// A call's question as a 2026-07-28 input request: the approval form
/// (`approve`, and `remember` when the question offers it) as an
/// `elicitation/create` in form mode. Used by the round trip's
/// `input_required` and by a task's `input_required` state alike.
pub(crate) fn approval_request(
    question: &CallQuestion,
) -> Result<rmcp::model::InputRequest, serde_json::Error> {
    let mut properties = serde_json::json!({
        "approve": { "type": "boolean", "description": "Allow it?" },
    });
    if question.remember {
        properties["remember"] = serde_json::json!({
            "type": "boolean",
            "description": "Also allow these exact arguments from now on (saved; `host approvals revoke` undoes it)",
        });
    }
    serde_json::from_value(serde_json::json!({
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
}

/// What an answer to [`approval_request`]'s form says: whether the user
/// accepted with `approve: true`, and whether it also asked to remember.
/// Anything else (a decline, a cancel, a missing or non-boolean
/// `approve`) is a no.
pub(crate) fn approval_answer(answer: &serde_json::Value) -> (bool, bool) {
    let approved = answer.get("action").and_then(serde_json::Value::as_str) == Some("accept")
        && answer
            .pointer("/content/approve")
            .and_then(serde_json::Value::as_bool)
            == Some(true);
    let remember = answer
        .pointer("/content/remember")
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    (approved, approved && remember)
}

/// The question for a result approval (never remembered).
pub(crate) fn result_question(request: &ResultApprovalRequest<'_>) -> CallQuestion {
    CallQuestion {
        text: format!(
            "toolhost: may the result of `{}` (plugin {}) be returned? It reads: {}",
            one_line(request.tool, 200),
            one_line(request.plugin, 200),
            one_line(request.output, SHOWN_CHARS)
        ),
        remember: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_escapes_what_a_hook_or_the_model_wrote_and_is_bounded() {
        let args = serde_json::json!({"path": "a\u{1b}[2Jb\u{202e}exe.txt"});
        let reasons = ["hook: \u{9b}31mlooks fine\nallow".to_owned()];
        let request = CallApprovalRequest {
            tool: "fs_read",
            plugin: "fs",
            digest: "sha256:test",
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
            digest: "sha256:test",
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
    }
}
