//! A call explained, not run: the dry-run entry into the steps
//! (`Runtime::explain`). It takes the call through the same lookup,
//! validation, path opening, policy evaluation and saved-approval lookup a
//! real call does — the functions of `mod.rs`, `validate.rs`, `opened.rs`
//! and `admit.rs`, not copies — and stops before anything that acts: no
//! hook runs (they may have effects; the ones that would are listed), no
//! one is asked, no sandbox is made, nothing reaches the live feed or the
//! result cache.

use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use toolhost_hooks::Stage;
use toolhost_policy::{Decision, Evaluation};

use crate::call::named::Named;
use crate::call::opened::{Kind, OpenedPath};
use crate::call::{Call, CallContext, admit, opened, validate};
use crate::error::{ArgumentIssue, CallError};
use crate::parts::Parts;
use crate::registry::PluginInfo;

/// What would happen to one call, and why, step by step (see
/// [`Runtime::explain`](crate::Runtime::explain)).
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The tool's exposed name.
    pub tool: String,
    /// The name its plugin declared (differs after a clash renamed it).
    pub declared: String,
    /// Lookup: the plugin that answers the name (its version, file,
    /// digest, grants and limits).
    pub plugin: PluginInfo,
    /// Validation: every problem with the arguments (empty: they match
    /// the tool's schema).
    pub invalid_arguments: Vec<ArgumentIssue>,
    /// The per-call grant, for a tool whose manifest names its path
    /// argument: the path, resolved and opened as the call would.
    pub path: Option<PathGrant>,
    /// A refusal before the policy is asked (a path outside the grants).
    pub refused: Option<String>,
    /// The policy's decision, the rule (file and line) or default that
    /// made it, and the rule's reason.
    pub policy: Evaluation,
    /// The hooks whose matchers take this call, in order, with the stages
    /// they would run at.
    pub hooks: Vec<HookMatch>,
    /// The saved approval that would answer an ask about this call, if one
    /// would (only looked up when the policy asks).
    pub saved_approval: Option<String>,
    /// Whether the user approves the result before the caller sees it.
    pub approves_result: bool,
    /// In one word: `runs`, `asks`, `denied` or `invalid`.
    pub verdict: Verdict,
}

/// A per-call grant's path, as the call would be given it.
#[derive(Debug, Clone, Serialize)]
pub struct PathGrant {
    /// The argument (a JSON pointer, `/path`).
    pub argument: String,
    /// The path the plugin would see (relative paths resolved against its
    /// first granted directory); `None` when the argument names none.
    pub resolved: Option<PathBuf>,
    /// The granted directory it lies in.
    pub grant: Option<String>,
    /// What is there now: `file`, `directory`, or `None` for nothing.
    pub found: Option<&'static str>,
    /// Where that really is (links followed).
    pub real: Option<PathBuf>,
}

/// One hook that would see the call.
#[derive(Debug, Clone, Serialize)]
pub struct HookMatch {
    /// Its name.
    pub hook: String,
    /// The stages it would run at (`before`, `after`, `permission`).
    pub stages: Vec<&'static str>,
}

/// What a call would come to, before hooks and people have their say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// It would run (unless a before-hook blocks it).
    Runs,
    /// Someone would be asked first (unless a saved approval or a
    /// permission hook answers).
    Asks,
    /// It would be refused.
    Denied,
    /// Its arguments would be refused.
    Invalid,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Runs => "runs",
            Verdict::Asks => "asks",
            Verdict::Denied => "denied",
            Verdict::Invalid => "invalid",
        })
    }
}

/// Explains a call of `tool` with `args`: lookup (a name nothing answers
/// is the error a call would get), validation, the path of a per-call
/// grant, the policy, the hooks that would run, a saved approval.
pub(crate) fn explain(
    parts: &Parts,
    tool: &str,
    args: &Value,
    cx: &CallContext,
) -> Result<Explanation, CallError> {
    let named = Named::of(tool, cx, |given| parts.call_id(given));
    let call = Call::resolve(parts, tool, named, cx, None)?;
    let gate = &parts.gate;
    let spec = call.target.spec();
    let plugin = &call.target.plugin;

    let invalid_arguments = match validate::arguments(&call.target, args) {
        Ok(_) => Vec::new(),
        Err(CallError::InvalidArguments { issues, .. }) => issues,
        Err(other) => vec![ArgumentIssue {
            path: String::new(),
            message: other.to_string(),
        }],
    };
    let (opened, refused) = match opened::open(&call, args) {
        Ok(opened) => (opened, None),
        Err(e) => (None, Some(e.to_string())),
    };
    let policy = admit::evaluate(gate, &call, args, opened.as_ref());
    let hooks = gate
        .hooks()
        .entries()
        .iter()
        .filter(|e| {
            e.matcher
                .matches_declared(tool, Some(&spec.name), &plugin.name)
        })
        .map(|e| HookMatch {
            hook: e.hook.name().to_owned(),
            stages: [
                (Stage::Before, "before"),
                (Stage::Permission, "permission"),
                (Stage::After, "after"),
            ]
            .into_iter()
            .filter(|(stage, _)| e.stages.contains(*stage))
            .map(|(_, name)| name)
            .collect(),
        })
        .filter(|h| !h.stages.is_empty())
        .collect();
    let saved_approval = (policy.decision == Decision::Ask)
        .then(|| admit::saved_approval(gate, &call, args, opened.as_ref()))
        .flatten();
    let verdict = if !invalid_arguments.is_empty() {
        Verdict::Invalid
    } else if refused.is_some() || policy.decision == Decision::Deny {
        Verdict::Denied
    } else if policy.decision == Decision::Ask && saved_approval.is_none() {
        Verdict::Asks
    } else {
        Verdict::Runs
    };
    let info = parts
        .catalog
        .registry()
        .plugin_infos()
        .into_iter()
        .find(|p| p.name == plugin.name && p.digest == plugin.digest)
        .ok_or_else(|| CallError::Host {
            tool: tool.to_owned(),
            message: "its plugin was unloaded meanwhile".to_owned(),
        })?;
    Ok(Explanation {
        tool: tool.to_owned(),
        declared: spec.name.clone(),
        approves_result: gate.policy().approve_result_of(
            tool,
            Some(&spec.name),
            cx.agent.as_deref(),
        ),
        path: opened.as_ref().map(|o| path_grant(o, plugin)),
        plugin: info,
        invalid_arguments,
        refused,
        policy,
        hooks,
        saved_approval,
        verdict,
    })
}

/// The per-call grant's path as the call would be handed it.
fn path_grant(opened: &OpenedPath, plugin: &crate::plugin::Plugin) -> PathGrant {
    let at = opened.at.as_ref();
    PathGrant {
        argument: opened.pointer.clone(),
        resolved: at.map(|a| a.guest.clone()),
        grant: at
            .and_then(|a| plugin.sandbox.dirs.get(a.grant))
            .map(|d| d.host.to_string()),
        found: at.and_then(|a| a.found.as_ref()).map(|f| match f.kind {
            Kind::File => "file",
            Kind::Directory => "directory",
        }),
        real: at.and_then(|a| a.found.as_ref()).map(|f| f.real.clone()),
    }
}
