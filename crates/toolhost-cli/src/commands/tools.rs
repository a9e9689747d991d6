//! `host tools`: every tool with its plugin@version, description,
//! argument schema and where the policy stands on it.

use std::io::Write;

use clap::Parser;
use serde_json::Value;
use toolhost_runtime::Runtime;

use super::HostCommand;
use crate::exit;
use crate::notices::report_load_problems;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::tool_listing::{format_tool, policy_line, standing};

/// List every tool with its plugin@version, description and argument schema.
#[derive(Debug, Parser)]
#[command(name = "tools")]
pub struct Tools {
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

impl HostCommand for Tools {
    const SHOWS: Shows = Shows::LOADING;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        report_load_problems(&loaded.runtime);
        list(&loaded.runtime, global.agent.as_deref(), self.json)
    }
}

fn list(runtime: &Runtime, agent: Option<&str>, json: bool) -> anyhow::Result<u8> {
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
