//! The non-interactive commands: `tools`, `plugins`, `call`, `check`,
//! `trust`, `approvals`.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};
use toolhost_runtime::policy::{Decision, Standing};
use toolhost_runtime::{
    CallContext, CallError, Runtime, ToolInfo, ToolResult, contract::Annotations, load::PluginKind,
};

use crate::exit;
use crate::shown::printable;
use crate::stdout::outln;

/// Prints every plugin file that failed to load (and every clash) to
/// stderr, once: the runtime's own log of them is off (`lib.rs`), and
/// what is printed here is not printed again on a reload (`notices.rs`).
pub fn report_load_problems(runtime: &Runtime) {
    let report = runtime.load_report();
    for f in &report.failures {
        eprintln!(
            "warning: {} not loaded: {}",
            f.path.display(),
            printable(&f.error.to_string())
        );
    }
    for w in &report.warnings {
        eprintln!("warning: {}", printable(w));
    }
    crate::notices::shown(&report.warnings);
}

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

pub fn tools(runtime: &Runtime, agent: Option<&str>, json: bool) -> anyhow::Result<u8> {
    let tools = runtime.tools();
    let mut out = std::io::stdout().lock();
    if json {
        let listed: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut v = serde_json::to_value(t)?;
                v["policy"] = serde_json::to_value(standing(runtime, t, agent))?;
                Ok(v)
            })
            .collect::<Result<_, serde_json::Error>>()?;
        writeln!(out, "{}", serde_json::to_string_pretty(&listed)?)?;
    } else if tools.is_empty() {
        writeln!(out, "no tools loaded")?;
    } else {
        for t in &tools {
            let mut text = format_tool(t);
            if let Some(line) = policy_line(&standing(runtime, t, agent)) {
                text.push_str(&format!("    policy: {line}\n"));
            }
            writeln!(out, "{text}")?;
        }
        for p in runtime.plugins() {
            if let Some(why) = &p.selection {
                writeln!(out, "{}@{}: {why}", p.name, p.version)?;
            }
        }
    }
    Ok(exit::OK)
}

pub fn plugins(runtime: &Runtime, json: bool) -> anyhow::Result<u8> {
    let plugins = runtime.plugins();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&plugins)?)?;
        return Ok(exit::OK);
    }
    for p in &plugins {
        if let Some(source) = &p.source {
            // An external MCP server (or another tool source).
            writeln!(out, "{}  ({}: {})", p.name, source.kind, source.location)?;
            writeln!(out, "    state:     {}", source.state)?;
            if let Some(server) = &source.server {
                writeln!(out, "    server:    {server}")?;
            }
            if let Some(sign_in) = &source.sign_in {
                writeln!(out, "    sign-in:   {}", printable(sign_in))?;
            }
            writeln!(out, "    tools:     {}", p.tools.join(", "))?;
            // Only these limits apply to a source's calls.
            writeln!(
                out,
                "    limits:    timeout-ms={} max-output-bytes={} max-instances={}",
                p.limits.timeout.as_millis(),
                p.limits.max_output_bytes,
                p.limits.max_instances
            )?;
            continue;
        }
        writeln!(out, "{}@{}  ({})", p.name, p.version, p.path.display())?;
        let world = match p.kind {
            PluginKind::Tool | PluginKind::Source => "tool-plugin",
            PluginKind::Hook => "hook-plugin",
        };
        writeln!(
            out,
            "    contract:  toolhost:plugin@{} ({world})",
            p.api_version
        )?;
        if let Some(why) = &p.selection {
            writeln!(out, "    version:   {why}")?;
        }
        writeln!(out, "    tools:     {}", p.tools.join(", "))?;
        writeln!(out, "    requests:  {}", p.requested)?;
        writeln!(
            out,
            "    granted:   dirs=[{}] hosts=[{}] env=[{}]",
            p.granted.dirs.join(", "),
            p.granted.hosts.join(", "),
            p.granted.env.join(", ")
        )?;
        writeln!(out, "    limits:    {}", p.limits)?;
        if p.ready_instances.kept > 0 {
            writeln!(
                out,
                "    ready:     {} instances instantiated ahead of calls (its instantiation is costly)",
                p.ready_instances.kept
            )?;
        }
        writeln!(out, "    digest:    {}", p.digest)?;
        writeln!(out, "    grants:    {}", p.grants)?;
    }
    Ok(exit::OK)
}

/// `host trust NAME`: the lock file records the digest of the plugin now
/// loaded under `name`.
pub fn trust(runtime: &Runtime, name: &str, lock: &std::path::Path) -> anyhow::Result<u8> {
    let digest = runtime.trust(name)?;
    outln!(
        "{name}: {digest} is trusted (recorded in {}); its grants apply from its next load",
        lock.display()
    )?;
    Ok(exit::OK)
}

/// `host approvals list | revoke ID | clear`, on the saved-approvals
/// stores `stores` (one, beside the lock file of the plugins directory
/// given; or, when none is given, every store there is: see
/// [`approval_stores`](crate::settings::approval_stores)).
pub fn approvals(
    stores: &crate::settings::ApprovalStores,
    command: &crate::args::ApprovalsCommand,
) -> anyhow::Result<u8> {
    use crate::args::ApprovalsCommand;
    use toolhost_runtime::policy::approvals::Approvals;
    // The database replicas share (`[state]`), else the files.
    let opened: Vec<(String, Approvals)> = match &stores.shared {
        Some(store) => vec![(store.describe(), Approvals::with_store(store.clone()))],
        None => stores
            .paths
            .iter()
            .map(|p| (p.display().to_string(), Approvals::open(p.to_owned())))
            .collect(),
    };
    match command {
        ApprovalsCommand::List { json } => {
            let mut all = Vec::new();
            for (path, store) in &opened {
                all.push((path, store.list()?));
            }
            let mut out = std::io::stdout().lock();
            if *json {
                let flat: Vec<_> = all.iter().flat_map(|(_, list)| list).collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&flat)?)?;
                return Ok(exit::OK);
            }
            if all.iter().all(|(_, list)| list.is_empty()) {
                writeln!(out, "no saved approvals ({})", stores.described())?;
            }
            for (path, list) in all.iter().filter(|(_, l)| !l.is_empty()) {
                if stores.every_store {
                    writeln!(out, "{path}:")?;
                }
                for a in list {
                    let scope = printable(&a.scope.to_string());
                    writeln!(
                        out,
                        "{}  {} ({} {})  {scope}",
                        a.id,
                        printable(&a.tool),
                        printable(&a.plugin),
                        a.digest
                    )?;
                    let expires = a
                        .expires
                        .map(|t| format!(", expires {}", local_time(t)))
                        .unwrap_or_default();
                    writeln!(
                        out,
                        "    answers {}; by {} on {}, from the {} prompt{expires}",
                        printable(&a.binding()),
                        printable(&a.who),
                        local_time(a.when),
                        a.from,
                    )?;
                }
            }
            Ok(exit::OK)
        }
        ApprovalsCommand::Revoke { id } => {
            for (_, store) in &opened {
                if store.revoke(id)? {
                    outln!("approval {id} revoked: the next such call is asked again")?;
                    return Ok(exit::OK);
                }
            }
            eprintln!(
                "error: no saved approval {} ({}); `host approvals list` shows their ids",
                printable(id),
                stores.described()
            );
            Ok(exit::FAILURE)
        }
        ApprovalsCommand::Clear => {
            if stores.every_store {
                anyhow::bail!(
                    "which plugins directory's approvals? `host --plugins DIR approvals clear` \
                     (or --lock FILE) clears one directory's; `host approvals list` shows them all"
                );
            }
            let mut n = 0;
            for (_, store) in &opened {
                n += store.clear()?;
            }
            outln!("{n} saved approval(s) removed ({})", stores.described())?;
            Ok(exit::OK)
        }
    }
}

/// A time the approvals store keeps (Unix seconds) as the user's local
/// time, e.g. `2026-11-27 19:58 +01:00`.
fn local_time(unix: u64) -> String {
    i64::try_from(unix)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(
            || format!("{unix} (Unix time)"),
            |t| {
                t.with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M %:z")
                    .to_string()
            },
        )
}

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

pub async fn call(
    runtime: &Runtime,
    tool: &str,
    args: Option<&str>,
    agent: Option<&str>,
    details: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let mut cx = CallContext::new();
    if let Some(agent) = agent {
        cx = cx.agent(agent);
    }
    match runtime.call_json(tool, args.unwrap_or("{}"), cx).await {
        Ok(r) => {
            print_result(&r, details, json)?;
            Ok(exit::OK)
        }
        Err(e) => {
            if json {
                outln!("{}", serde_json::to_string_pretty(&error_json(&e))?)?;
            }
            eprintln!("error: {}", printable(&e.to_string()));
            if let Some(hint) = grant_hint(runtime, tool, &e) {
                eprintln!("hint: {hint}");
            }
            Ok(exit::for_call_error(&e))
        }
    }
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

pub fn check(runtime: &Runtime, file: &Path, json: bool) -> anyhow::Result<u8> {
    let report = runtime.load_report();
    if let Some(f) = report.failures.first() {
        if json {
            outln!(
                "{}",
                serde_json::to_string_pretty(
                    &json!({"ok": false, "file": file, "error": f.error.to_string()})
                )?
            )?;
        }
        eprintln!(
            "error: {}: {}",
            file.display(),
            printable(&f.error.to_string())
        );
        return Ok(exit::FAILURE);
    }
    let Some(p) = runtime.plugins().into_iter().next() else {
        eprintln!("error: {}: no plugin loaded", file.display());
        return Ok(exit::FAILURE);
    };
    let tools = runtime.tools();
    if json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"ok": true, "plugin": p, "tools": tools}))?
        )?;
        return Ok(exit::OK);
    }
    let mut out = std::io::stdout().lock();
    let kind = match p.kind {
        PluginKind::Hook => "hook plugin (before and after calls)",
        PluginKind::Tool | PluginKind::Source => "tool plugin",
    };
    writeln!(out, "ok: {} is a toolhost {kind}", file.display())?;
    writeln!(out, "  plugin:    {}@{}", p.name, p.version)?;
    let contract = toolhost_runtime::CONTRACT_VERSION;
    if p.api_version < contract {
        writeln!(
            out,
            "  contract:  toolhost:plugin@{} (an older one, run as it is; the newest is {contract})",
            p.api_version
        )?;
    } else {
        writeln!(
            out,
            "  contract:  toolhost:plugin@{} (the newest)",
            p.api_version
        )?;
    }
    if let Some(d) = &p.description {
        writeln!(out, "  about:     {}", printable(d))?;
    }
    writeln!(out, "  requests:  {}", p.requested)?;
    writeln!(out, "  tools:")?;
    for t in &tools {
        for line in format_tool(t).lines() {
            writeln!(out, "    {line}")?;
        }
    }
    Ok(exit::OK)
}
