//! `host call TOOL [ARGS]`: one call, through the whole gate, and its
//! output.

use clap::Parser;
use toolhost_runtime::{CallContext, Runtime};

use super::HostCommand;
use crate::call_output::{error_json, grant_hint, print_result};
use crate::exit;
use crate::notices::report_load_problems;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::shown::printable;
use crate::stdout::outln;

/// Call one tool and print its output.
#[derive(Debug, Parser)]
#[command(name = "call")]
pub struct Call {
    /// The tool's name.
    tool: String,
    /// Arguments as a JSON object (default `{}`).
    args: Option<String>,
    /// Also print the details (JSON for UIs) after the output.
    #[arg(long)]
    details: bool,
    /// Print the whole result (or the error) as JSON.
    #[arg(long)]
    json: bool,
}

/// Loads the plugins once; a person may answer an ask or sign in.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: false,
    read_var: false,
    person: true,
    serves_mcp: false,
};

impl HostCommand for Call {
    const SHOWS: Shows = Shows::LOADING;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        report_load_problems(&loaded.runtime);
        loaded
            .rt
            .block_on(call(&loaded.runtime, &self, global.agent.as_deref()))
    }
}

async fn call(runtime: &Runtime, call: &Call, agent: Option<&str>) -> anyhow::Result<u8> {
    let Call {
        tool,
        args,
        details,
        json,
    } = call;
    let mut cx = CallContext::new();
    if let Some(agent) = agent {
        cx = cx.agent(agent);
    }
    match runtime
        .call_json(tool, args.as_deref().unwrap_or("{}"), cx)
        .await
    {
        Ok(r) => {
            print_result(&r, *details, *json)?;
            Ok(exit::OK)
        }
        Err(e) => {
            if *json {
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
