//! Step 5 of a call: what becomes of its result. The after-hooks see every
//! result, failures included, and may keep it, replace it or turn it into an
//! error; then, when the policy asks for it, the user approves the result
//! before the model sees it.

use serde_json::Value;
use toolhost_hooks::HookOutcome;

use crate::call::admit::{Refused, hook_call, report_traces};
use crate::call::{Call, ToolResult};
use crate::error::CallError;
use crate::gate::Gate;
use crate::permission::{
    ApprovalAnswer, ApprovalOf, CallStep, ResultApproval, ResultApprovalRequest,
};

/// A call refused before it ran: the after-hooks see it (so an audit hook
/// logs every attempt, `examples/hooks/audit.sh`), with the refusal as the
/// outcome, but cannot change it: the refusal stands, whatever they answer.
#[tracing::instrument(name = "conclude", level = "debug", skip_all)]
pub(crate) async fn refused(
    gate: &Gate,
    call: &Call<'_>,
    refused: Refused,
) -> Result<ToolResult, CallError> {
    let Refused { error, args } = refused;
    let (tool, plugin) = (call.target.tool, &call.target.plugin);
    let hooks = gate.hooks();
    if hooks.matches(tool, Some(&call.target.spec().name), &plugin.name) {
        let outcome = HookOutcome::err(error.kind(), error.to_string());
        let report = hooks.run_after(&hook_call(call, &args), outcome).await;
        report_traces(call.cx, report.trace);
    }
    Err(error)
}

/// Runs the after-hooks on the call's result (a failure included), then
/// the user's approval of the result when the policy asks for it.
#[tracing::instrument(name = "conclude", level = "debug", skip_all)]
pub(crate) async fn conclude(
    gate: &Gate,
    call: &Call<'_>,
    args: &Value,
    result: Result<ToolResult, CallError>,
) -> Result<ToolResult, CallError> {
    let (tool, plugin, cx) = (call.target.tool, &call.target.plugin, call.cx);
    let hooks = gate.hooks();
    let mut result = result;
    if hooks.matches(tool, Some(&call.target.spec().name), &plugin.name) {
        // The result's parts move into the outcome the hooks see, and
        // back into the result afterwards: nothing is copied.
        let (outcome, kept, error) = match result {
            Ok(mut r) => {
                let outcome = HookOutcome::Ok {
                    output: std::mem::take(&mut r.output),
                    details: r.details.take(),
                    structured: r.structured.take(),
                    content: std::mem::take(&mut r.content),
                };
                (outcome, Some(r), None)
            }
            Err(e) => {
                let message = e.to_string();
                (
                    HookOutcome::err(e.kind(), message.clone()),
                    None,
                    Some((e, message)),
                )
            }
        };
        let report = hooks.run_after(&hook_call(call, args), outcome).await;
        let (structured_replaced, content_replaced) =
            (report.structured_replaced, report.content_replaced);
        report_traces(cx, report.trace);
        result = match (report.outcome, kept, error) {
            (
                HookOutcome::Ok {
                    output,
                    details,
                    structured,
                    content,
                },
                kept,
                _,
            ) => Ok(match kept {
                Some(r) => ToolResult {
                    output,
                    details,
                    structured,
                    content,
                    ..r
                },
                // A failure that an after-hook replaced with a result.
                None => ToolResult {
                    output,
                    details,
                    structured,
                    content,
                    meta: None,
                    tool: tool.to_owned(),
                    plugin: plugin.name.clone(),
                    plugin_version: plugin.version.clone(),
                    duration: std::time::Duration::ZERO,
                    cached: false,
                },
            }),
            // A failure every after-hook kept keeps its own kind.
            (HookOutcome::Err { kind, message }, _, Some((e, original)))
                if kind == e.kind() && message == original =>
            {
                Err(e)
            }
            (HookOutcome::Err { message, .. }, _, _) => Err(CallError::HookFailed {
                tool: tool.to_owned(),
                message,
            }),
        };
        // A structured result a hook put in must still match the tool's
        // output schema: the UI relies on it. (The plugin's own was
        // checked when the call returned. A hook may also leave none,
        // e.g. when it turns a failure into a plain answer.)
        if structured_replaced
            && let Ok(r) = &result
            && let Some(structured) = &r.structured
            && let Err(fault) = call.target.spec().validate_structured(Some(structured))
        {
            result = Err(CallError::HookFailed {
                tool: tool.to_owned(),
                message: format!("the result after the after-hooks is refused: {fault}"),
            });
        }
        // So must content a hook put in: the same limits as the tool's own.
        if content_replaced
            && let Ok(r) = &result
            && let Err(e) =
                toolhost_content::ContentLimits::within(plugin.sandbox.limits.max_output_bytes)
                    .check(&r.content)
        {
            result = Err(CallError::HookFailed {
                tool: tool.to_owned(),
                message: format!("the result after the after-hooks is refused: {e}"),
            });
        }
    }

    let Ok(r) = &result else {
        return result;
    };
    if !gate.policy().approve_result_of(
        tool,
        Some(call.target.spec().name.as_str()),
        cx.agent.as_deref(),
    ) {
        return result;
    }
    let Some(approver) = cx.approver_or(gate) else {
        cx.step(|| CallStep::Approval {
            of: ApprovalOf::Result,
            answer: ApprovalAnswer::NoApprover,
            message: None,
        });
        if gate.allow_asks_without_approver() {
            return result;
        }
        return Err(CallError::Rejected {
            tool: tool.to_owned(),
            message: Some(
                "the result needs the user's approval and nobody can be asked in this session"
                    .to_owned(),
            ),
        });
    };
    let shown = shown_for_approval(r);
    let request = ResultApprovalRequest {
        tool,
        plugin: &plugin.name,
        args,
        output: &shown,
        details: r.details.as_ref(),
    };
    match approver.approve_result(&request).await {
        ResultApproval::Accept => {
            cx.step(|| CallStep::Approval {
                of: ApprovalOf::Result,
                answer: ApprovalAnswer::Accept,
                message: None,
            });
            result
        }
        ResultApproval::Reject { message } => {
            cx.step(|| CallStep::Approval {
                of: ApprovalOf::Result,
                answer: ApprovalAnswer::Reject,
                message: message.clone(),
            });
            Err(CallError::Rejected {
                tool: tool.to_owned(),
                message,
            })
        }
    }
}

/// What the person approving `r` is shown of it: its output, then one
/// line for each content block that is not text (an image, audio, a
/// resource), so that what else reaches the model and the client is not
/// hidden from them ([`toolhost_content::stand_in`]: escaped, bounded).
fn shown_for_approval(r: &ToolResult) -> String {
    let mut shown = r.output.clone();
    for block in r.content.iter().filter(|b| b.as_text().is_none()) {
        if !shown.is_empty() {
            shown.push('\n');
        }
        shown.push_str(&toolhost_content::stand_in(block));
    }
    shown
}
