//! `host explain TOOL [ARGS]`: what would happen to that call, and why,
//! without running it (`Runtime::explain_json`, the call's own steps).

use std::io::Write;

use toolhost_runtime::policy::Decision;
use toolhost_runtime::{CallContext, Runtime, explain::Explanation, explain::Verdict};

use clap::Parser;

use super::HostCommand;
use crate::exit;
use crate::notices::report_load_problems;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::shown::printable;

/// Say what would happen to a call, and why, without running it: the
/// plugin that answers, the arguments' check, the policy's rule (file
/// and line), the hooks, a saved approval, the grants and limits.
#[derive(Debug, Parser)]
#[command(name = "explain")]
pub struct Explain {
    /// The tool's name.
    tool: String,
    /// Arguments as a JSON object (default `{}`).
    args: Option<String>,
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

impl HostCommand for Explain {
    const SHOWS: Shows = Shows::LOADING;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        report_load_problems(&loaded.runtime);
        explain(
            &loaded.runtime,
            &self.tool,
            self.args.as_deref(),
            global.agent.as_deref(),
            self.json,
        )
    }
}

/// Prints the explanation of a call of `tool` with `args` (JSON text).
/// The exit code is the call's would-be outcome: 0 when it would run or
/// ask, the call's own code when it would be refused (8 denied, 4
/// invalid arguments, 3 no such tool).
fn explain(
    runtime: &Runtime,
    tool: &str,
    args: Option<&str>,
    agent: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let mut cx = CallContext::new();
    if let Some(agent) = agent {
        cx = cx.agent(agent);
    }
    let why = match runtime.explain_json(tool, args.unwrap_or("{}"), cx) {
        Ok(why) => why,
        Err(e) => {
            if json {
                crate::stdout::outln!(
                    "{}",
                    serde_json::to_string_pretty(&crate::call_output::error_json(&e))?
                )?;
            }
            eprintln!("error: {}", printable(&e.to_string()));
            return Ok(exit::for_call_error(&e));
        }
    };
    if json {
        crate::stdout::outln!("{}", serde_json::to_string_pretty(&why)?)?;
    } else {
        print(&why, agent)?;
    }
    Ok(match why.verdict {
        Verdict::Runs | Verdict::Asks => exit::OK,
        Verdict::Denied => exit::DENIED,
        Verdict::Invalid => exit::INVALID_ARGUMENTS,
    })
}

fn print(why: &Explanation, agent: Option<&str>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let p = &why.plugin;
    let renamed = if why.declared == why.tool {
        String::new()
    } else {
        format!(" (declared as `{}`)", why.declared)
    };
    writeln!(out, "{}{renamed}: {}", why.tool, summary(why))?;
    match &p.source {
        Some(source) => writeln!(
            out,
            "  lookup:    {} ({}: {}), {}",
            p.name, source.kind, source.location, source.state
        )?,
        None => writeln!(
            out,
            "  lookup:    {}@{} ({}), {}",
            p.name,
            p.version,
            p.path.display(),
            p.digest
        )?,
    }
    if why.invalid_arguments.is_empty() {
        writeln!(out, "  arguments: valid for its schema")?;
    } else {
        for issue in &why.invalid_arguments {
            writeln!(
                out,
                "  arguments: invalid: {}",
                printable(&issue.to_string())
            )?;
        }
    }
    if let Some(path) = &why.path {
        let line = match (&path.resolved, path.found, &path.real) {
            (None, _, _) => format!("{} names no path", path.argument),
            (Some(at), Some(kind), Some(real)) => format!(
                "{} = {} is a {kind}{} in the grant {}: the sandbox would be given that {kind} only",
                path.argument,
                at.display(),
                if real == at {
                    String::new()
                } else {
                    format!(" (really {}, links followed)", real.display())
                },
                path.grant.as_deref().unwrap_or("?")
            ),
            (Some(at), _, _) => format!(
                "{} = {} is in the grant {}, and nothing is there now",
                path.argument,
                at.display(),
                path.grant.as_deref().unwrap_or("?")
            ),
        };
        writeln!(out, "  path:      {}", printable(&line))?;
    }
    if let Some(refused) = &why.refused {
        writeln!(out, "  refused:   {}", printable(refused))?;
    }
    let profile = agent.map(|a| format!(" (profile {a})")).unwrap_or_default();
    writeln!(
        out,
        "  policy:    {}{profile}",
        printable(&why.policy.to_string())
    )?;
    if why.hooks.is_empty() {
        writeln!(out, "  hooks:     none match")?;
    }
    for hook in &why.hooks {
        writeln!(
            out,
            "  hook:      {} ({}; it is not run here)",
            printable(&hook.hook),
            hook.stages.join(", ")
        )?;
    }
    if why.policy.decision == Decision::Ask {
        match &why.saved_approval {
            Some(id) => writeln!(
                out,
                "  approval:  saved approval {id} answers it (`host approvals revoke {id}` undoes it)"
            )?,
            None => writeln!(
                out,
                "  approval:  none saved: you would be asked (with --yes, allowed; with no one to ask, denied)"
            )?,
        }
    }
    if why.approves_result {
        writeln!(
            out,
            "  result:    you approve it before the caller sees it (approve-results)"
        )?;
    }
    let g = &p.granted;
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    writeln!(
        out,
        "  grants:    dirs {}; hosts {}; env {} ({})",
        list(&g.dirs),
        list(&g.hosts),
        list(&g.env),
        p.grants
    )?;
    writeln!(out, "  limits:    {}", p.limits)?;
    Ok(())
}

/// The outcome in one sentence.
fn summary(why: &Explanation) -> String {
    match why.verdict {
        Verdict::Invalid => "would be refused: its arguments are invalid".to_owned(),
        Verdict::Denied => match &why.refused {
            Some(r) => format!("would be denied: {}", printable(r)),
            None => "would be denied by the policy".to_owned(),
        },
        Verdict::Asks => "would ask before it runs".to_owned(),
        Verdict::Runs if why.saved_approval.is_some() => {
            "would run (a saved approval answers the policy's ask)".to_owned()
        }
        Verdict::Runs => "would run".to_owned(),
    }
}
