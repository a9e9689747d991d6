//! `host chat` (and `host` with no command): the interactive session,
//! `repl.rs`'s loop over the agent.

use clap::Parser;

use super::HostCommand;
use crate::notices::report_load_problems;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::{agent, repl, sessions};

/// Chat with the model (what `host` with no command does).
#[derive(Debug, Default, Parser)]
#[command(name = "chat")]
pub struct Chat {
    /// Load the saved session NAME (created when absent) and save it
    /// after every turn.
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

impl HostCommand for Chat {
    const SHOWS: Shows = Shows::All;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        report_load_problems(&loaded.runtime);
        let model = loaded.rt.block_on(agent::connect(
            global,
            &loaded.file,
            &loaded.runtime,
            loaded.code,
            true,
        ))?;
        let store = sessions::Store::from_flag(global.sessions_dir.as_deref());
        repl::run(
            &loaded.rt,
            &loaded.runtime,
            model,
            store,
            self.session.as_deref(),
        )
    }
}
