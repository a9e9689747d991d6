//! The non-interactive commands: `tools`, `plugins`, `call`, `check`.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};
use toolhost_runtime::{
    Annotations, CallContext, CallError, PluginKind, Runtime, ToolInfo, ToolResult,
};

use crate::exit;
use crate::shown::printable;

/// Prints every plugin file that failed to load (and every clash) to stderr.
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

pub fn tools(runtime: &Runtime, json: bool) -> anyhow::Result<u8> {
    let tools = runtime.tools();
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&tools)?)?;
    } else if tools.is_empty() {
        writeln!(out, "no tools loaded")?;
    } else {
        for t in &tools {
            writeln!(out, "{}", format_tool(t))?;
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
    println!(
        "{name}: {digest} is trusted (recorded in {}); its grants apply from its next load",
        lock.display()
    );
    Ok(exit::OK)
}

/// `host approvals list | revoke ID | clear`, on the saved-approvals file
/// `path`.
pub fn approvals(
    path: &std::path::Path,
    command: &crate::args::ApprovalsCommand,
) -> anyhow::Result<u8> {
    use crate::args::ApprovalsCommand;
    use toolhost_runtime::policy::approvals::Approvals;
    let store = Approvals::open(path.to_owned());
    match command {
        ApprovalsCommand::List { json } => {
            let all = store.list()?;
            let mut out = std::io::stdout().lock();
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
                return Ok(exit::OK);
            }
            if all.is_empty() {
                writeln!(out, "no saved approvals ({})", path.display())?;
            }
            for a in &all {
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
                    .map(|t| format!(", expires at {t} (Unix time)"))
                    .unwrap_or_default();
                writeln!(
                    out,
                    "    answers {}; by {} at {} (Unix time), from the {} prompt{expires}",
                    printable(&a.binding()),
                    printable(&a.who),
                    a.when,
                    a.from,
                )?;
            }
            Ok(exit::OK)
        }
        ApprovalsCommand::Revoke { id } => {
            if store.revoke(id)? {
                println!("approval {id} revoked: the next such call is asked again");
                Ok(exit::OK)
            } else {
                eprintln!("no saved approval {id} (see `host approvals list`)");
                Ok(exit::FAILURE)
            }
        }
        ApprovalsCommand::Clear => {
            let n = store.clear()?;
            println!("{n} saved approval(s) removed");
            Ok(exit::OK)
        }
    }
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
                println!("{}", serde_json::to_string_pretty(&error_json(&e))?);
            }
            eprintln!("error: {}", printable(&e.to_string()));
            Ok(exit::for_call_error(&e))
        }
    }
}

pub fn check(runtime: &Runtime, file: &Path, json: bool) -> anyhow::Result<u8> {
    let report = runtime.load_report();
    if let Some(f) = report.failures.first() {
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(
                    &json!({"ok": false, "file": file, "error": f.error.to_string()})
                )?
            );
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
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"ok": true, "plugin": p, "tools": tools}))?
        );
        return Ok(exit::OK);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "ok: {} is a toolhost tool plugin", file.display())?;
    writeln!(out, "  plugin:    {}@{}", p.name, p.version)?;
    writeln!(out, "  contract:  toolhost:plugin@{}", p.api_version)?;
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
