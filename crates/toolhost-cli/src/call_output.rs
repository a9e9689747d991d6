//! A call's result and error as `host call` and the chat's `/call` print
//! them, and the hint about a grant a failed call may lack.

use std::io::Write;

use serde_json::{Value, json};
use toolhost_runtime::{CallError, Runtime, ToolResult};

use crate::shown::printable;

/// The JSON shape of a call error (`--json`).
pub fn error_json(e: &CallError) -> Value {
    let mut v = json!({"ok": false, "error": {"kind": e.kind(), "message": e.to_string()}});
    match e {
        CallError::InvalidArguments { issues, .. } => {
            v["error"]["issues"] = json!(issues);
        }
        CallError::NotFound { suggestions, .. } => {
            v["error"]["suggestions"] = json!(suggestions);
        }
        _ => {}
    }
    v
}

/// Prints a call's result the way `call` and `/call` do.
pub fn print_result(r: &ToolResult, details: bool, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        let mut v = serde_json::to_value(r)?;
        v["ok"] = json!(true);
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(out, "{}", crate::shown::on_stdout(&r.output))?;
    // What is not text, one safe line each (`--json` has the blocks).
    for block in r.content.iter().filter(|b| b.as_text().is_none()) {
        writeln!(out, "{}", toolhost_runtime::content::stand_in(block))?;
    }
    if details && let Some(d) = &r.details {
        writeln!(out, "{}", serde_json::to_string_pretty(d)?)?;
    }
    Ok(())
}

/// What to do when a call failed or was denied and its plugin asks for
/// directories or hosts it was not granted (the usual cause: no grant, or
/// a grant to a name with a typo, which `settings::warn_unknown_grants`
/// warns about).
pub fn grant_hint(runtime: &Runtime, tool: &str, e: &CallError) -> Option<String> {
    if !matches!(e, CallError::Tool { .. } | CallError::Denied { .. }) {
        return None;
    }
    let plugin = runtime.tools().into_iter().find(|t| t.name == tool)?.plugin;
    let p = runtime.plugins().into_iter().find(|p| p.name == plugin)?;
    let no_dirs = p.requested.dirs != toolhost_runtime::manifest::DirRequest::None
        && p.granted.dirs.is_empty();
    let no_hosts = !p.requested.hosts.is_empty() && p.granted.hosts.is_empty();
    let name = &p.name;
    // Grants given and held back from this code: granting again would not help.
    match &p.grants {
        toolhost_runtime::lockfile::GrantState::Withheld { .. } if no_dirs || no_hosts => {
            return Some(format!(
                "{name}'s grants are withheld: this file is not the code they were given to \
                 (`host trust {name}` accepts it)"
            ));
        }
        toolhost_runtime::lockfile::GrantState::NotItsFile { file } if no_dirs || no_hosts => {
            return Some(format!(
                "grants for {name} go to {name}.wasm only, and this is {}.wasm",
                printable(file)
            ));
        }
        _ => {}
    }
    match (no_dirs, no_hosts) {
        (true, _) => Some(format!(
            "{name} asks for directories and has none granted: `--allow-dir {name}=DIR` grants \
             one (or `[plugins.{name}] dirs` in the config file)"
        )),
        (false, true) => Some(format!(
            "{name} asks for network hosts and has none granted: `--allow-host {name}=HOST` \
             grants one"
        )),
        (false, false) => None,
    }
}
