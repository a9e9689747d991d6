//! Step 3 of a call: whether it may run. A per-call grant's path is opened
//! first (`opened.rs`), so that everything below decides on the object the
//! tool will be handed. The policy decides first (a deny stops the call
//! here); then the before-hooks run (a block stops it; a
//! rewrite of the arguments is validated against the schema and judged by
//! the policy again, as if the model had sent it); then,
//! when the policy or a hook asked, the user answers through the
//! [`Approver`](crate::Approver).

use serde_json::Value;
use toolhost_hooks::{BeforeVerdict, HookCall, HookTrace, PermissionVerdict};
use toolhost_policy::approvals::{Answers, Lookup, NewApproval, Scope};
use toolhost_policy::{CallRequest, Decision};
use tracing::Instrument;

use crate::call::opened::{self, OpenedPath};
use crate::call::{Call, CallContext, narrow, validate, watch};
use crate::error::CallError;
use crate::gate::Gate;
use crate::permission::{
    ApprovalAnswer, ApprovalOf, Approver, CallApproval, CallApprovalRequest, CallStep,
};

/// A call the permission layer and the before-hooks let through.
pub(crate) struct Admitted {
    /// The arguments it runs with (possibly rewritten by a hook).
    pub args: Value,
    /// The same, as JSON text for the plugin.
    pub args_text: String,
    /// Its path argument as opened when it was decided on, for a tool with
    /// a per-call grant: what the sandbox is given (`narrow.rs`).
    pub opened: Option<OpenedPath>,
}

/// A call refused before it ran (its arguments invalid, the policy's deny,
/// a before-hook's block, an approval refused), with the arguments it was
/// refused with, for the after-hooks to see (`conclude::refused`).
pub(crate) struct Refused {
    pub error: CallError,
    pub args: Value,
}

/// Steps 2 and 3: validates `args` against the tool's schema, then
/// [`admit`]s them; a refusal keeps the arguments.
pub(crate) async fn validate_and_admit(
    gate: &Gate,
    call: &Call<'_>,
    args: Value,
) -> Result<Admitted, Refused> {
    // Arguments over `max-args-bytes` never reach a hook, not even as a
    // refusal: the after-hooks see the error (which gives the size), and
    // `null` for the arguments.
    let checked = tracing::debug_span!("validate").in_scope(|| {
        let text = validate::sized(&call.target, &args).map_err(|e| (e, true))?;
        validate::schema(&call.target, &args, text).map_err(|e| (e, false))
    });
    match checked {
        Ok(args_text) => admit(gate, call, args, args_text).await,
        Err((error, true)) => Err(Refused {
            error,
            args: Value::Null,
        }),
        Err((error, false)) => Err(Refused { error, args }),
    }
}

/// Asks the policy, runs the before-hooks and, when asked to, the user.
/// `args` were validated already; `args_text` is their JSON text.
#[tracing::instrument(name = "admit", level = "debug", skip_all)]
pub(crate) async fn admit(
    gate: &Gate,
    call: &Call<'_>,
    args: Value,
    args_text: String,
) -> Result<Admitted, Refused> {
    let (mut args, mut args_text) = (args, args_text);
    match judge(gate, call, &mut args, &mut args_text).await {
        Ok(opened) => Ok(Admitted {
            args,
            args_text,
            opened,
        }),
        Err(error) => Err(Refused { error, args }),
    }
}

/// The policy, the before-hooks and the user's approval on `args` (which
/// a hook may rewrite, `args_text` with them), and on the path they name,
/// opened once (returned, for the sandbox).
async fn judge(
    gate: &Gate,
    call: &Call<'_>,
    args: &mut Value,
    args_text: &mut String,
) -> Result<Option<OpenedPath>, CallError> {
    let (tool, plugin, cx) = (call.target.tool, &call.target.plugin, call.cx);
    let mut opened = opened::open(call, args)?;
    let mut asks: Vec<String> = check_policy(gate, call, args, opened.as_ref(), false)?
        .into_iter()
        .collect();

    let hooks = gate.hooks();
    if hooks.matches(tool, Some(&call.target.spec().name), &plugin.name) {
        let report = hooks
            .run_before(&hook_call(call, args))
            .instrument(tracing::info_span!("hooks.before"))
            .await;
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
            *args_text =
                validate::arguments(&call.target, &new).map_err(|e| CallError::Blocked {
                    tool: tool.to_owned(),
                    hook: "before-hooks".to_owned(),
                    reason: format!("a hook rewrote the arguments into invalid ones: {e}"),
                })?;
            // Rewritten arguments are judged as if the model had sent them.
            opened = opened::open(call, &new)?;
            asks.extend(check_policy(gate, call, &new, opened.as_ref(), true)?);
            *args = new;
        }
    }

    if !asks.is_empty() {
        ask(gate, call, args, opened.as_ref(), &asks).await?;
    }
    if let Some(check) = hop_check(gate, call, args) {
        let _ = call.hops.set(check);
    }
    Ok(opened)
}

/// The policy applied to every HTTP request the call makes, redirect hops
/// included: for a call with URL arguments, each request's URL stands in
/// for them and the policy decides again. A deny refuses the request; an
/// ask refuses it too (nobody can be asked in the middle of a call) unless
/// it goes to a host the call's own URLs named, which was already allowed
/// or asked about. `None` when no argument is an `http(s)` URL.
fn hop_check(gate: &Gate, call: &Call<'_>, args: &Value) -> Option<crate::http::HopCheck> {
    let Value::Object(map) = args else {
        return None;
    };
    let web_host = |v: &Value| {
        let text = v.as_str()?;
        // Only text that begins `http://` or `https://` (in any case) parses
        // as an `http(s)` URI (`http`'s own scheme rule): any other string
        // argument, most of them, is passed over without a parse.
        if !is_web_url(text) {
            return None;
        }
        let uri: http::Uri = text.parse().ok()?;
        matches!(uri.scheme_str(), Some("http" | "https"))
            .then(|| uri.host().map(str::to_ascii_lowercase))
            .flatten()
    };
    let keys: Vec<String> = map
        .iter()
        .filter(|(_, v)| web_host(v).is_some())
        .map(|(k, _)| k.clone())
        .collect();
    if keys.is_empty() {
        return None;
    }
    let named: Vec<String> = map.values().filter_map(web_host).collect();
    let policy = gate.policy();
    let tool = call.target.tool.to_owned();
    let declared = call.target.spec().name.clone();
    let plugin = call.target.plugin.name.clone();
    let agent = call.cx.agent.clone();
    let args = args.clone();
    Some(std::sync::Arc::new(move |uri: &http::Uri| {
        let hop = uri.to_string();
        let mut hop_args = args.clone();
        for k in &keys {
            hop_args[k.as_str()] = Value::String(hop.clone());
        }
        let mut request = CallRequest::new(&tool, &hop_args)
            .declared(&declared)
            .plugin(&plugin);
        if let Some(agent) = agent.as_deref() {
            request = request.agent(agent);
        }
        let evaluation = policy.evaluate(&request, &toolhost_policy::SessionToggles::default());
        let host = uri.host().map(str::to_ascii_lowercase);
        match evaluation.decision {
            Decision::Allow => Ok(()),
            Decision::Ask if host.is_some_and(|h| named.contains(&h)) => Ok(()),
            Decision::Ask => Err(format!(
                "a request to {hop} would need the user's approval ({}), and nobody can be \
                 asked in the middle of a call",
                evaluation.decided_by
            )),
            Decision::Deny => Err(match evaluation.reason.as_deref() {
                Some(reason) => reason.to_owned(),
                None => format!("denied by {}", evaluation.decided_by),
            }),
        }
    }))
}

/// Whether `text` begins with an `http://` or `https://` scheme, in any
/// case: the only strings whose [`http::Uri`] has the scheme `http` or
/// `https` (the crate matches these two prefixes case-insensitively, and
/// names any other scheme as written).
fn is_web_url(text: &str) -> bool {
    let starts = |prefix: &str| {
        text.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    starts("http://") || starts("https://")
}

/// The policy's decision on `call` with `args`: an error when it denies,
/// the reason to ask the user when it asks. `rewritten` says the arguments
/// are a before-hook's rewrite (checked again, so a hook cannot carry a
/// call past a rule).
#[tracing::instrument(name = "policy", level = "debug", skip_all)]
fn check_policy(
    gate: &Gate,
    call: &Call<'_>,
    args: &Value,
    opened: Option<&OpenedPath>,
    rewritten: bool,
) -> Result<Option<String>, CallError> {
    let (tool, cx) = (call.target.tool, call.cx);
    let evaluation = evaluate(gate, call, args, opened);
    crate::call::trace::decided(&call.span, &evaluation.decision, &evaluation.decided_by);
    watch::decided(call, &evaluation);
    cx.step(|| CallStep::Permission {
        decision: evaluation.decision,
        decided_by: evaluation.decided_by.to_string(),
        reason: evaluation.reason.as_deref().map(str::to_owned),
    });
    let after = if rewritten {
        " (on the arguments as a before-hook rewrote them)"
    } else {
        ""
    };
    match evaluation.decision {
        Decision::Allow => Ok(None),
        Decision::Deny => Err(CallError::Denied {
            tool: tool.to_owned(),
            reason: match evaluation.reason.as_deref() {
                Some(r) => format!("{r}{after}"),
                None => format!("denied by {}{after}", evaluation.decided_by),
            },
        }),
        Decision::Ask => Ok(Some(match &evaluation.reason {
            Some(r) => format!("{r} ({}){after}", evaluation.decided_by),
            None => format!("asked by {}{after}", evaluation.decided_by),
        })),
    }
}

/// The policy's evaluation of `call` with `args` (and the path they name,
/// as opened), under the caller's profile and session: what
/// [`check_policy`] acts on, and what `explain.rs` reports.
pub(crate) fn evaluate(
    gate: &Gate,
    call: &Call<'_>,
    args: &Value,
    opened: Option<&OpenedPath>,
) -> toolhost_policy::Evaluation {
    let cx = call.cx;
    let policy = gate.policy();
    // A plugin resolves a relative path against its first granted
    // directory (the guest sees it at the same absolute path): path rules
    // match that path too, and, for a per-call grant, what was opened.
    let mut request = CallRequest::new(call.target.tool, args)
        .declared(&call.target.spec().name)
        .plugin(&call.target.plugin.name)
        .paths(OpenedPath::context(
            opened,
            call.target.plugin.sandbox.path_base(),
        ));
    if let Some(agent) = cx.agent.as_deref() {
        request = request.agent(agent);
    }
    gate.with_session(cx.session_id.as_deref(), |s| policy.evaluate(&request, s))
}

/// The id of a saved approval that answers an ask about `call` with
/// `args` (for this build of the plugin, this profile and caller, now), if
/// one does.
pub(crate) fn saved_approval(
    gate: &Gate,
    call: &Call<'_>,
    args: &Value,
    opened: Option<&OpenedPath>,
) -> Option<String> {
    let lookup = Lookup::new(call.target.tool, &call.target.plugin.digest, args)
        .paths(OpenedPath::context(
            opened,
            call.target.plugin.sandbox.path_base(),
        ))
        .profile(call.cx.agent.as_deref())
        .client(call.cx.client.as_deref());
    gate.approvals().find(&lookup)
}

/// Asks the approver about a call; without one, the builder's setting decides.
#[tracing::instrument(name = "approval", level = "info", skip_all)]
async fn ask(
    gate: &Gate,
    call: &Call<'_>,
    args: &Value,
    opened: Option<&OpenedPath>,
    reasons: &[String],
) -> Result<(), CallError> {
    let (tool, cx) = (call.target.tool, call.cx);
    let denied = |reason: String| CallError::Denied {
        tool: tool.to_owned(),
        reason,
    };
    // The live feed's `approval` step, when someone or something answers.
    let since = watch::since(call);
    // An approval saved earlier for these arguments (or any) of this build
    // of the plugin, under this profile, for this caller, answers without
    // asking anyone.
    if let Some(id) = saved_approval(gate, call, args, opened) {
        cx.step(|| CallStep::Approval {
            of: ApprovalOf::Call,
            answer: ApprovalAnswer::Saved,
            message: Some(format!("saved approval {id}")),
        });
        watch::approval(call, since, || format!("saved approval {id}"));
        return Ok(());
    }
    // Permission hooks answer for the person when they can.
    let hooks = gate.hooks();
    if hooks.matches(
        tool,
        Some(&call.target.spec().name),
        &call.target.plugin.name,
    ) {
        let report = hooks
            .run_permission(&hook_call(call, args), reasons)
            .instrument(tracing::info_span!("hooks.permission"))
            .await;
        report_traces(cx, report.trace);
        match report.decision {
            PermissionVerdict::Pass => {}
            PermissionVerdict::Allow { hook, reason } => {
                watch::approval(call, since, || match reason {
                    Some(reason) => format!("allowed by hook {hook}: {reason}"),
                    None => format!("allowed by hook {hook}"),
                });
                return Ok(());
            }
            PermissionVerdict::Deny { hook, reason } => {
                watch::approval(call, since, || format!("denied by hook {hook}: {reason}"));
                return Err(denied(format!("denied by hook \"{hook}\": {reason}")));
            }
        }
    }
    let Some(approver) = cx.approver_or(gate) else {
        cx.step(|| CallStep::Approval {
            of: ApprovalOf::Call,
            answer: ApprovalAnswer::NoApprover,
            message: None,
        });
        if gate.allow_asks_without_approver() {
            return Ok(());
        }
        return Err(denied(format!(
            "the call needs the user's approval ({}), and nobody can be asked in this \
             session (non-interactive)",
            reasons.join("; ")
        )));
    };
    let scopes = narrow::scopes(call, args, opened);
    let request = CallApprovalRequest {
        tool,
        plugin: &call.target.plugin.name,
        digest: &call.target.plugin.digest,
        args,
        reasons,
        session_id: cx.session_id.as_deref(),
        agent: cx.agent.as_deref(),
        scopes: &scopes,
    };
    let answer = approver.approve_call(&request).await;
    let (label, message) = match &answer {
        CallApproval::AllowOnce => (ApprovalAnswer::AllowOnce, None),
        CallApproval::AllowAlways => (ApprovalAnswer::AllowAlways, None),
        CallApproval::AllowTool => (ApprovalAnswer::AllowTool, None),
        CallApproval::AllowWithin(_) => (ApprovalAnswer::AllowWithin, None),
        CallApproval::Deny { message } => (ApprovalAnswer::Deny, message.clone()),
        CallApproval::DenyAndStop { message } => (ApprovalAnswer::DenyAndStop, message.clone()),
    };
    cx.step(|| CallStep::Approval {
        of: ApprovalOf::Call,
        answer: label,
        message: message.clone(),
    });
    watch::approval(call, since, || {
        let by = approver.prompt_name();
        let how = match &answer {
            CallApproval::AllowOnce => "allowed once",
            CallApproval::AllowAlways => "allowed always (saved)",
            CallApproval::AllowTool => "allowed for the tool (saved)",
            CallApproval::AllowWithin(_) => "allowed within a scope (saved)",
            CallApproval::Deny { .. } => "denied",
            CallApproval::DenyAndStop { .. } => "denied and stopped",
        };
        match message.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => format!("{how} by {by}: {m}"),
            _ => format!("{how} by {by}"),
        }
    });
    match answer {
        CallApproval::AllowOnce => Ok(()),
        CallApproval::AllowAlways => {
            save(
                gate,
                call,
                approver.as_ref(),
                Scope::Arguments(args.clone()),
            )
            .await;
            Ok(())
        }
        CallApproval::AllowTool => {
            save(gate, call, approver.as_ref(), Scope::AnyArguments).await;
            Ok(())
        }
        CallApproval::AllowWithin(scope) => {
            if scopes.contains(&scope) {
                save(gate, call, approver.as_ref(), scope).await;
            } else {
                tracing::warn!(
                    tool,
                    "an approval for a scope the call did not offer ({scope}) is not saved"
                );
            }
            Ok(())
        }
        CallApproval::Deny { message } => Err(denied(match message {
            Some(m) if !m.trim().is_empty() => format!("the user denied the call: {m}"),
            _ => "the user denied the call".to_owned(),
        })),
        CallApproval::DenyAndStop { message } => Err(CallError::Stopped {
            tool: tool.to_owned(),
            reason: message
                .filter(|m| !m.trim().is_empty())
                .unwrap_or_else(|| "the user denied the call and stopped".to_owned()),
        }),
    }
}

/// How long a call waits for its "allow always" to be saved before it
/// runs anyway (the save goes on, and says how it ended in the log).
pub(crate) const SAVE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Saves an "allow always" answer for `call`'s tool and plugin build,
/// bound to the call's profile and caller (or, when the approver speaks
/// for every caller, to all). A store that cannot be written, or a caller
/// past its quota, is logged: the call still runs, and the next one is
/// asked again.
///
/// The store is written on a blocking thread (a file's lock, a database's
/// answer: never on a worker of the runtime, which other calls and the
/// health probe need), and the call waits for it at most [`SAVE_WAIT`].
async fn save(gate: &Gate, call: &Call<'_>, approver: &dyn Approver, scope: Scope) {
    let from = approver.prompt_name();
    // Who answered: the approver says (the operator), else the calling
    // client, else the user running the host.
    let who = approver
        .who()
        .or_else(|| call.cx.client.clone())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "user".to_owned());
    let new = NewApproval {
        tool: call.target.tool.to_owned(),
        plugin: call.target.plugin.name.clone(),
        digest: call.target.plugin.digest.clone(),
        scope,
        profile: call.cx.agent.clone(),
        // A caller's answer covers that caller's calls only.
        answers: if approver.answers_everyone() {
            Answers::Everyone
        } else {
            Answers::caller(call.cx.client.as_deref())
        },
        who,
        from: from.to_owned(),
        expires: None,
    };
    let approvals = gate.shared_approvals();
    let tool = call.target.tool.to_owned();
    let saving = tokio::task::spawn_blocking(move || match approvals.save(new) {
        Ok(id) => tracing::info!(tool, id, "approval saved"),
        Err(e) => tracing::warn!(tool, "the approval was not saved: {e}"),
    });
    match tokio::time::timeout(SAVE_WAIT, saving).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(tool = call.target.tool, "the approval was not saved: {e}"),
        Err(_) => tracing::info!(
            tool = call.target.tool,
            "the approval is still being saved after {} s: the call runs meanwhile",
            SAVE_WAIT.as_secs()
        ),
    }
}

/// The call as the hooks see it (before and after).
pub(crate) fn hook_call<'a>(call: &'a Call<'a>, args: &'a Value) -> HookCall<'a> {
    let plugin = &call.target.plugin;
    HookCall::new(call.target.tool, args)
        .declared(&call.target.spec().name)
        .plugin(&plugin.name, &plugin.version_text)
        .call_id(&call.id)
        .session_id(call.cx.session_id.as_deref())
        .agent(call.cx.agent.as_deref())
        .client(call.cx.client.as_deref())
}

/// Reports each hook's decision and time to the call's steps.
pub(crate) fn report_traces(cx: &CallContext, traces: Vec<HookTrace>) {
    for trace in traces {
        if trace.error.is_some() {
            tracing::warn!(hook = %trace.hook, "hook failed: {}", trace.decision);
        }
        cx.step(|| CallStep::Hook(trace));
    }
}

#[cfg(test)]
mod tests {
    use super::is_web_url;

    /// The cheap test before the parse passes every string whose URI has
    /// an `http` or `https` scheme, and no other: skipping the parse for
    /// the rest changes no call's hop check.
    #[test]
    fn only_strings_that_parse_as_http_urls_are_parsed() {
        let web = |text: &str| {
            text.parse::<http::Uri>()
                .is_ok_and(|u| matches!(u.scheme_str(), Some("http" | "https")))
        };
        for text in [
            "http://example.com/a",
            "https://example.com",
            "HTTP://EXAMPLE.COM",
            "HtTpS://example.com:8443/x?y",
            "http://",
            "https://",
            "ftp://example.com",
            "httpx://example.com",
            "http:/example.com",
            "http:example.com",
            "example.com",
            "/etc/passwd",
            "2*(3+4)",
            "",
            "h",
            "ht\u{e9}p://x",
            "https\u{e9}://x",
            " http://example.com",
        ] {
            if web(text) {
                assert!(is_web_url(text), "{text:?} is an http(s) URL");
            }
            if !is_web_url(text) {
                assert!(!web(text), "{text:?} skipped but an http(s) URL");
            }
        }
        assert!(!is_web_url("2*(3+4)"));
        assert!(is_web_url("HTTPS://example.com"));
    }
}
