//! A tool as the listings show it (`host tools`, `host check`, the chat's
//! `/tools`), and where the policy stands on it.

use toolhost_runtime::policy::{Decision, Standing};
use toolhost_runtime::{Runtime, ToolInfo, contract::Annotations};

use crate::shown::printable;

fn annotation_tags(a: &Annotations) -> String {
    let mut tags = Vec::new();
    if a.read_only {
        tags.push("read-only");
    }
    if a.idempotent {
        tags.push("idempotent");
    }
    if a.destructive {
        tags.push("destructive");
    }
    if a.open_world {
        tags.push("open-world");
    }
    if tags.is_empty() {
        String::new()
    } else {
        format!(" [{}]", tags.join(", "))
    }
}

/// One tool in human-readable form.
pub fn format_tool(t: &ToolInfo) -> String {
    let mut s = format!(
        "{}  {}@{}{}\n",
        t.name,
        t.plugin,
        t.plugin_version,
        annotation_tags(&t.annotations)
    );
    for line in t.description.lines() {
        s.push_str(&format!("    {}\n", printable(line)));
    }
    s.push_str(&format!("    args: {}\n", t.input_schema));
    s
}

/// Where `tool` stands under the policy for `agent` (see
/// [`Policy::standing`](toolhost_runtime::policy::Policy::standing)).
pub fn standing(runtime: &Runtime, tool: &ToolInfo, agent: Option<&str>) -> Standing {
    runtime
        .policy()
        .standing(&tool.name, &tool.declared_name, Some(&tool.plugin), agent)
}

/// The policy's line for a tool in `host tools`, when it says more than
/// "allowed": denied outright (not offered to the model), asked about, or
/// decided by its arguments.
pub fn policy_line(s: &Standing) -> Option<String> {
    let why = match &s.reason {
        Some(r) => format!("{}: {}", s.decided_by, printable(r)),
        None => s.decided_by.to_string(),
    };
    let by_args = if s.by_arguments {
        "; some arguments are decided otherwise (`host explain TOOL ARGS` says how)"
    } else {
        ""
    };
    match s.decision {
        _ if !s.offered => Some(format!("denied, and not offered to the model ({why})")),
        Decision::Deny => Some(format!(
            "denied unless its arguments match a rule ({why}){by_args}"
        )),
        Decision::Ask => Some(format!("asks before each call ({why}){by_args}")),
        Decision::Allow if s.by_arguments => Some(format!("allowed ({why}){by_args}")),
        Decision::Allow => None,
    }
}
