//! A policy `ask` over MCP: the question goes to the client as an
//! elicitation (form mode), and a client that cannot be asked gets a denial
//! that says why.
//!
//! Protocol 2026-07-28 forbids server-to-client requests (its answer is an
//! `input_required` result and a retried call); this server does not
//! implement that round trip yet, so on that revision an `ask` is a denial
//! naming the reason.

use std::time::Duration;

use rmcp::model::ProtocolVersion;
use rmcp::service::{ElicitationError, Peer, RoleServer};
use serde::Deserialize;
use toolhost_runtime::{
    ApprovalFuture, Approver, CallApproval, CallApprovalRequest, ResultApproval,
    ResultApprovalRequest,
};

/// How long the client's user has to answer before the call is denied.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest argument or output text shown in a question.
const SHOWN_CHARS: usize = 2000;

/// The form the client shows: one yes/no field.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Approval {
    /// Whether to go ahead.
    #[schemars(description = "Allow it?")]
    approve: bool,
}

rmcp::elicit_safe!(Approval);

/// Asks the MCP client's user (see the module docs).
pub(crate) struct ElicitingApprover {
    pub(crate) peer: Peer<RoleServer>,
    /// The request's protocol revision, when known.
    pub(crate) protocol: Option<ProtocolVersion>,
}

impl ElicitingApprover {
    async fn ask(&self, question: String) -> Result<(), String> {
        if self.protocol.as_ref().is_some_and(|v| !v.has_initialize()) {
            return Err(format!(
                "the user's approval is needed, and on MCP {} a server cannot ask the user \
                 during a call (toolhost does not implement `input_required` yet); allow the \
                 tool in the policy, or connect with protocol 2025-11-25",
                self.protocol.as_ref().map_or("", |v| v.as_str())
            ));
        }
        match self
            .peer
            .elicit_with_timeout::<Approval>(question, Some(ELICITATION_TIMEOUT))
            .await
        {
            Ok(Some(Approval { approve: true })) => Ok(()),
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
    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            let question = format!(
                "toolhost: allow `{}` (plugin {}) to run with {}? Asked because: {}",
                request.tool,
                request.plugin,
                one_line(&request.args.to_string(), SHOWN_CHARS),
                request.reasons.join("; ")
            );
            match self.ask(question).await {
                Ok(()) => CallApproval::AllowOnce,
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
            match self.ask(question).await {
                Ok(()) => ResultApproval::Accept,
                Err(message) => ResultApproval::Reject {
                    message: Some(message),
                },
            }
        })
    }
}

/// `s` on one line, control characters dropped, at most `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max.saturating_add(1))
        .collect();
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_one_line_without_control_characters_and_bounded() {
        assert_eq!(one_line("a\nb\u{1b}[31m", 100), "a b [31m");
        let long = "x".repeat(5000);
        assert_eq!(one_line(&long, 10).chars().count(), 11);
    }
}
