//! `host trust NAME`: the lock file records the digest of the plugin now
//! loaded under NAME.

use clap::Parser;

use super::HostCommand;
use crate::exit;
use crate::settings;
use crate::setup::Setup;
use crate::shared_flags::{Global, PLUGINS, Shows};
use crate::stdout::outln;

/// Accept the plugin now loaded under NAME as the code its grants are
/// given to (records its digest in the lock file).
#[derive(Debug, Parser)]
#[command(name = "trust")]
pub struct Trust {
    /// The plugin's name.
    name: String,
}

/// Loads the plugins once, asks nothing of a person but a sign-in.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: false,
    read_var: false,
    person: true,
    serves_mcp: false,
};

impl HostCommand for Trust {
    const SHOWS: Shows = Shows::Only {
        headings: &[PLUGINS],
        flags: &[],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        let lock = settings::lock_file(global, &loaded.file);
        let digest = loaded.runtime.trust(&self.name)?;
        outln!(
            "{}: {digest} is trusted (recorded in {}); its grants apply from its next load",
            self.name,
            lock.display()
        )?;
        Ok(exit::OK)
    }
}
