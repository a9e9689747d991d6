//! `host run PROMPT`: asks the model once, lets it call tools, prints the
//! final answer (or, with `--json`, the whole tool chain).

use clap::Parser;

use super::HostCommand;
use crate::notices::{self, report_load_problems};
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::stdout::outln;
use crate::{agent, exit, sessions, shown};

/// Ask the model once, let it call tools, print the final answer.
#[derive(Debug, Parser)]
#[command(name = "run")]
pub struct Run {
    /// The prompt.
    prompt: String,
    /// Print the whole tool chain (messages, calls, usage, status) as JSON.
    #[arg(long)]
    json: bool,
    /// Continue the saved session NAME (created when absent): its
    /// conversation and variables go into the run, and the new turn is saved.
    #[arg(long, value_name = "NAME")]
    session: Option<String>,
}

/// The agent loop (with `read_var`), for a person at this terminal;
/// plugins that change while it runs are reloaded.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: true,
    read_var: true,
    person: true,
    serves_mcp: false,
};

impl HostCommand for Run {
    const SHOWS: Shows = Shows::All;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        let (rt, runtime) = (&loaded.rt, &loaded.runtime);
        report_load_problems(runtime);
        // A bad name or an unreadable session stops the run before the
        // model is asked (and before the file could be overwritten).
        let mut saved = match &self.session {
            Some(name) => {
                let store = sessions::Store::from_flag(global.sessions_dir.as_deref())?;
                let session = store.load_or_new(name, None)?;
                Some((store, session))
            }
            None => None,
        };
        notices::print_plugin_events(rt, runtime, None);
        let Some(mut model) = rt.block_on(agent::connect(
            global,
            &loaded.file,
            runtime,
            loaded.code,
            false,
        ))?
        else {
            eprintln!("error: {}", agent::no_model_for_run());
            return Ok(exit::FAILURE);
        };
        let history = match &saved {
            Some((_, s)) => {
                let options = model.agent.options();
                options.vars.restore(s.vars_for(options.agent.as_deref()));
                s.conversation.clone()
            }
            None => Vec::new(),
        };
        let prompt = &self.prompt;
        let result = rt.block_on(agent::turn(&mut model.agent, &history, prompt, false));
        if let Some((store, s)) = &mut saved {
            s.push_turn(prompt, &result);
            s.model = Some(model.label.clone());
            let options = model.agent.options();
            s.set_vars(options.vars.snapshot(), options.agent.as_deref());
            if let Err(e) = store.save(s) {
                eprintln!("error: the session was not saved: {e}");
                return Ok(exit::FAILURE);
            }
        }
        if self.json {
            outln!("{}", serde_json::to_string_pretty(&result)?)?;
        } else if !result.final_text().is_empty() {
            outln!("{}", shown::on_stdout(result.final_text()))?;
        }
        if let Some(ended) = shown::unfinished(&result) {
            eprintln!("status: {ended}");
        }
        Ok(agent::exit_code(result.status))
    }
}
