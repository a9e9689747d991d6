//! `host check FILE`: loads that one plugin file (no plugins directory,
//! no MCP servers) and says what it exports and requests.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde_json::json;
use toolhost_runtime::{Runtime, load::PluginKind};

use super::HostCommand;
use crate::exit;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::shown::printable;
use crate::stdout::outln;
use crate::tool_listing::format_tool;

/// Validate a plugin file and print what it exports and requests.
#[derive(Debug, Parser)]
#[command(name = "check")]
pub struct Check {
    /// The component file.
    file: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Loads the one file once.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: false,
    read_var: false,
    person: true,
    serves_mcp: false,
};

impl HostCommand for Check {
    const SHOWS: Shows = Shows::Only {
        headings: &[],
        flags: &["config", "cache_dir", "no_cache", "timeout_ms", "memory_mb"],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load_files(global, std::slice::from_ref(&self.file))?;
        check(&loaded.runtime, &self.file, self.json)
    }
}

fn check(runtime: &Runtime, file: &Path, json: bool) -> anyhow::Result<u8> {
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
        PluginKind::Hook => "a toolhost hook plugin (before and after calls)",
        PluginKind::Tool | PluginKind::Source => "a toolhost tool plugin",
        PluginKind::Plain => "a plain component (its own WIT world): its functions are the tools",
    };
    writeln!(out, "ok: {} is {kind}", file.display())?;
    writeln!(out, "  plugin:    {}@{}", p.name, p.version)?;
    let contract = toolhost_runtime::CONTRACT_VERSION;
    if p.kind == PluginKind::Plain {
        writeln!(out, "  contract:  none (a plain component)")?;
    } else if p.api_version < contract {
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
