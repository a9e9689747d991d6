//! `host man [COMMAND]`: the roff page of `host` (or of one command) on
//! stdout; `host man --dir DIR`: every page written into DIR. Generated
//! from the same clap definitions; loads nothing.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Parser;

use super::HostCommand;
use crate::shared_flags::{Global, Shows};
use crate::stdout::outln;
use crate::{exit, generated};

/// Print the man page of `host` (or of one command) in roff, or write
/// every page into a directory (e.g. `host man --dir ~/.local/share/man/man1`).
#[derive(Debug, Parser)]
#[command(name = "man")]
pub struct Man {
    /// The command whose page to print (`host man call`); default: `host`'s.
    command: Option<String>,
    /// Write host.1 and a page per command (host-call.1 …) into DIR.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    dir: Option<PathBuf>,
}

impl HostCommand for Man {
    const SHOWS: Shows = Shows::NONE;

    fn exec(self, _: &Global) -> anyhow::Result<u8> {
        man(self.command.as_deref(), self.dir.as_deref())
    }
}

fn man(command: Option<&str>, dir: Option<&Path>) -> anyhow::Result<u8> {
    let name = generated::bin_name();
    let cmd = generated::command();
    if let Some(dir) = dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        clap_mangen::generate_to(cmd, dir)
            .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
        outln!(
            "man pages written to {} ({name}.1 and one per command); `man {name}` reads them \
                 when that directory is on MANPATH",
            dir.display()
        )?;
        return Ok(exit::OK);
    }
    let page = match command {
        None => cmd,
        Some(sub) => {
            let Some(found) = cmd.get_subcommands().find(|c| c.get_name() == sub) else {
                let names: Vec<&str> = cmd
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .map(clap::Command::get_name)
                    .collect();
                anyhow::bail!(
                    "`{name}` has no command `{}`; its commands: {}",
                    toolhost_text::line(sub, 64),
                    names.join(", ")
                );
            };
            found.clone().name(format!("{name}-{sub}"))
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).render(&mut roff)?;
    use std::io::Write as _;
    std::io::stdout().lock().write_all(&roff)?;
    Ok(exit::OK)
}
