//! The steps every call goes through around its execution, whatever the path
//! (the agent loop, `host call`, the interactive `/call`, a reused instance):
//!
//! 1. `admit`: the policy's decision (deny stops here), the before-hooks
//!    (block stops here; a rewrite is validated against the schema again),
//!    and the user's approval when the policy or a hook asks;
//! 2. the execution, in the caller;
//! 3. `conclude`: the after-hooks (for failures too), then the user's
//!    approval of the result when the policy asks for it.
//!
//! Every decision is reported to the call's [`CallContext::on_step`].

use std::sync::Arc;

use serde_json::Value;
use toolhost_hooks::{BeforeVerdict, HookCall, HookOutcome, HookTrace};
use toolhost_policy::{CallRequest, Decision};

use crate::error::CallError;
use crate::permission::{
    CallApproval, CallApprovalRequest, CallStep, ResultApproval, ResultApprovalRequest,
};
use crate::plugin::Plugin;
use crate::runtime::{CallContext, Runtime, ToolResult, check_args};

/// A call the permission layer and the before-hooks let through.
pub(crate) struct Admitted {
    /// The arguments it runs with (possibly rewritten by a hook).
    pub args: Value,
    /// The same, as JSON text for the plugin.
    pub args_text: String,
}

impl Runtime {
    /// Validates the arguments, asks the policy, runs the before-hooks and,
    /// when asked to, the user.
    pub(crate) async fn admit(
        &self,
        plugin: &Plugin,
        index: usize,
        tool: &str,
        args: Value,
        cx: &CallContext,
        call_id: &str,
    ) -> Result<Admitted, CallError> {
        let args_text = check_args(plugin, index, tool, &args)?;
        let permissions = &self.inner.permissions;
        let policy = permissions.policy();
        let agent = cx.agent.as_deref();
        let session = cx.session_id.as_deref();
        let mut request = CallRequest::new(tool, &args).plugin(&plugin.name);
        if let Some(agent) = agent {
            request = request.agent(agent);
        }
        let evaluation = permissions.with_session(session, |s| policy.evaluate(&request, s));
        cx.step(|| CallStep::Permission {
            decision: evaluation.decision,
            decided_by: evaluation.decided_by.to_string(),
            reason: evaluation.reason.as_deref().map(str::to_owned),
        });
        let mut asks = Vec::new();
        match evaluation.decision {
            Decision::Allow => {}
            Decision::Deny => {
                return Err(CallError::Denied {
                    tool: tool.to_owned(),
                    reason: evaluation
                        .reason
                        .as_deref()
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("denied by {}", evaluation.decided_by)),
                });
            }
            Decision::Ask => asks.push(match &evaluation.reason {
                Some(r) => format!("{r} ({})", evaluation.decided_by),
                None => format!("asked by {}", evaluation.decided_by),
            }),
        }

        let (mut args, mut args_text) = (args, args_text);
        let hooks = &self.inner.hooks;
        if hooks.matches(tool, &plugin.name) {
            let call = hook_call(tool, plugin, &args, cx, call_id);
            let report = hooks.run_before(&call).await;
            report_traces(cx, report.trace);
            let rewritten = match report.decision {
                BeforeVerdict::Continue => None,
                BeforeVerdict::Rewrite(new) => Some(new),
                BeforeVerdict::Block { hook, reason } => {
                    return Err(CallError::Blocked {
                        tool: tool.to_owned(),
                        hook,
                        reason,
                    });
                }
                BeforeVerdict::Ask { reasons, args } => {
                    asks.extend(reasons);
                    args
                }
            };
            if let Some(new) = rewritten {
                args_text =
                    check_args(plugin, index, tool, &new).map_err(|e| CallError::Blocked {
                        tool: tool.to_owned(),
                        hook: "before-hooks".to_owned(),
                        reason: format!("a hook rewrote the arguments into invalid ones: {e}"),
                    })?;
                args = new;
            }
        }

        if !asks.is_empty() {
            self.ask(plugin, tool, &args, &asks, cx).await?;
        }
        Ok(Admitted { args, args_text })
    }

    /// Asks the approver about a call; without one, the builder's setting decides.
    async fn ask(
        &self,
        plugin: &Plugin,
        tool: &str,
        args: &Value,
        reasons: &[String],
        cx: &CallContext,
    ) -> Result<(), CallError> {
        let permissions = &self.inner.permissions;
        let denied = |reason: String| CallError::Denied {
            tool: tool.to_owned(),
            reason,
        };
        let Some(approver) = &permissions.approver else {
            cx.step(|| CallStep::Approval {
                of: "call",
                answer: "no-approver",
                message: None,
            });
            if permissions.allow_asks_without_approver {
                return Ok(());
            }
            return Err(denied(format!(
                "the call needs the user's approval ({}), and nobody can be asked in this \
                 session (non-interactive)",
                reasons.join("; ")
            )));
        };
        let request = CallApprovalRequest {
            tool,
            plugin: &plugin.name,
            args,
            reasons,
            session_id: cx.session_id.as_deref(),
            agent: cx.agent.as_deref(),
        };
        let answer = approver.approve_call(&request).await;
        let (label, message) = match &answer {
            CallApproval::AllowOnce => ("allow-once", None),
            CallApproval::AllowAlways => ("allow-always", None),
            CallApproval::Deny { message } => ("deny", message.clone()),
        };
        cx.step(|| CallStep::Approval {
            of: "call",
            answer: label,
            message: message.clone(),
        });
        match answer {
            CallApproval::AllowOnce => Ok(()),
            CallApproval::AllowAlways => {
                permissions.allow_always(tool);
                Ok(())
            }
            CallApproval::Deny { message } => Err(denied(match message {
                Some(m) if !m.trim().is_empty() => format!("the user denied the call: {m}"),
                _ => "the user denied the call".to_owned(),
            })),
        }
    }

    /// Runs the after-hooks on the call's result (a failure included), then
    /// the user's approval of the result when the policy asks for it.
    /// `resolved` is the plugin and the index of the tool `tool` resolved to.
    pub(crate) async fn conclude(
        &self,
        resolved: (&Arc<Plugin>, usize),
        tool: &str,
        args: &Value,
        result: Result<ToolResult, CallError>,
        cx: &CallContext,
        call_id: &str,
    ) -> Result<ToolResult, CallError> {
        let (plugin, index) = resolved;
        let hooks = &self.inner.hooks;
        let mut result = result;
        if hooks.matches(tool, &plugin.name) {
            let call = hook_call(tool, plugin, args, cx, call_id);
            // The result's parts move into the outcome the hooks see, and
            // back into the result afterwards: nothing is copied.
            let (outcome, kept, error) = match result {
                Ok(mut r) => {
                    let outcome = HookOutcome::Ok {
                        output: std::mem::take(&mut r.output),
                        details: r.details.take(),
                        structured: r.structured.take(),
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
            let report = hooks.run_after(&call, outcome).await;
            let structured_replaced = report.structured_replaced;
            report_traces(cx, report.trace);
            result = match (report.outcome, kept, error) {
                (
                    HookOutcome::Ok {
                        output,
                        details,
                        structured,
                    },
                    kept,
                    _,
                ) => Ok(match kept {
                    Some(r) => ToolResult {
                        output,
                        details,
                        structured,
                        ..r
                    },
                    // A failure that an after-hook replaced with a result.
                    None => ToolResult {
                        output,
                        details,
                        structured,
                        tool: tool.to_owned(),
                        plugin: plugin.name.clone(),
                        plugin_version: plugin.version.clone(),
                        duration: std::time::Duration::ZERO,
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
                && let (Ok(r), Some(spec)) = (&result, plugin.tools.get(index))
                && let Some(structured) = &r.structured
                && let Err(fault) = spec.validate_structured(Some(structured))
            {
                result = Err(CallError::HookFailed {
                    tool: tool.to_owned(),
                    message: format!("the result after the after-hooks is refused: {fault}"),
                });
            }
        }

        let Ok(r) = &result else {
            return result;
        };
        let permissions = &self.inner.permissions;
        if !permissions
            .policy()
            .approve_result(tool, cx.agent.as_deref())
        {
            return result;
        }
        let Some(approver) = &permissions.approver else {
            cx.step(|| CallStep::Approval {
                of: "result",
                answer: "no-approver",
                message: None,
            });
            if permissions.allow_asks_without_approver {
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
        let request = ResultApprovalRequest {
            tool,
            plugin: &plugin.name,
            args,
            output: &r.output,
            details: r.details.as_ref(),
        };
        match approver.approve_result(&request).await {
            ResultApproval::Accept => {
                cx.step(|| CallStep::Approval {
                    of: "result",
                    answer: "accept",
                    message: None,
                });
                result
            }
            ResultApproval::Reject { message } => {
                cx.step(|| CallStep::Approval {
                    of: "result",
                    answer: "reject",
                    message: message.clone(),
                });
                Err(CallError::Rejected {
                    tool: tool.to_owned(),
                    message,
                })
            }
        }
    }
}

fn hook_call<'a>(
    tool: &'a str,
    plugin: &'a Plugin,
    args: &'a Value,
    cx: &'a CallContext,
    call_id: &'a str,
) -> HookCall<'a> {
    HookCall::new(tool, args)
        .plugin(&plugin.name, &plugin.version_text)
        .call_id(call_id)
        .session_id(cx.session_id.as_deref())
        .agent(cx.agent.as_deref())
}

fn report_traces(cx: &CallContext, traces: Vec<HookTrace>) {
    for trace in traces {
        if trace.error.is_some() {
            tracing::warn!(hook = %trace.hook, "hook failed: {}", trace.decision);
        }
        cx.step(|| CallStep::Hook(trace));
    }
}
