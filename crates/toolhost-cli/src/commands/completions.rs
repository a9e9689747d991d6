//! `host completions SHELL`: the shell completion script, generated from
//! the same clap definitions. Loads nothing.

use clap::Parser;

use super::HostCommand;
use crate::exit;
use crate::generated;
use crate::shared_flags::{Global, Shows};

/// Print the shell completion script for bash, zsh, fish, elvish or
/// powershell (e.g. `host completions bash > ~/.local/share/bash-completion/completions/host`).
#[derive(Debug, Parser)]
#[command(name = "completions")]
pub struct Completions {
    /// The shell.
    shell: clap_complete::Shell,
}

impl HostCommand for Completions {
    const SHOWS: Shows = Shows::NONE;

    /// The script on stdout.
    fn exec(self, _: &Global) -> anyhow::Result<u8> {
        let name = generated::bin_name();
        let mut cmd = generated::command();
        let mut script = Vec::new();
        clap_complete::generate(self.shell, &mut cmd, name, &mut script);
        use std::io::Write as _;
        std::io::stdout().lock().write_all(&script)?;
        Ok(exit::OK)
    }
}
