//! `host plugins`: every plugin with what it requests and what it was
//! granted.

use std::io::Write;

use clap::Parser;
use toolhost_runtime::{Runtime, load::PluginKind};

use super::HostCommand;
use crate::exit;
use crate::notices::report_load_problems;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::shown::printable;

/// List every plugin with what it requests and what it was granted.
#[derive(Debug, Parser)]
#[command(name = "plugins")]
pub struct Plugins {
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Loads the plugins once, asks nothing of a person but a sign-in.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: false,
    read_var: false,
    person: true,
    serves_mcp: false,
};

impl HostCommand for Plugins {
    const SHOWS: Shows = Shows::LOADING;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        report_load_problems(&loaded.runtime);
        list(&loaded.runtime, self.json)
    }
}

fn list(runtime: &Runtime, json: bool) -> anyhow::Result<u8> {
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
        match p.kind {
            PluginKind::Tool | PluginKind::Source | PluginKind::Hook => {
                let world = if p.kind == PluginKind::Hook {
                    "hook-plugin"
                } else {
                    "tool-plugin"
                };
                writeln!(
                    out,
                    "    contract:  toolhost:plugin@{} ({world})",
                    p.api_version
                )?;
            }
            PluginKind::Plain => {
                writeln!(
                    out,
                    "    contract:  none (a plain component: its functions are the tools)"
                )?;
            }
        }
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
