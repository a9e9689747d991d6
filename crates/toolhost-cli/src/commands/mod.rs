//! The commands of `host`, one file each, as cargo's
//! `src/bin/cargo/commands/<name>.rs`: each declares its own arguments
//! (a clap `Parser` named for the command, whose doc comment is its
//! help), which shared flags its `--help` shows ([`HostCommand::SHOWS`]),
//! what it needs from the shared setup (a [`Setup`](crate::setup::Setup)
//! of its own, when it loads plugins), and runs ([`HostCommand::exec`]).
//! Here: the list, the `clap` command made from it, and the dispatch.

mod approvals;
mod call;
mod chat;
mod check;
mod completions;
mod explain;
mod install;
mod keygen;
mod man;
mod mcp;
mod new;
mod plugins;
mod publish;
mod run;
mod serve;
mod skills;
mod tools;
mod trust;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::shared_flags::{Global, Host, Shows};

/// One command of `host`.
pub trait HostCommand: Parser {
    /// The shared flags its `--help`, usage and completions show; the
    /// others are still accepted, and change nothing for it.
    const SHOWS: Shows;

    /// Runs it with the shared flags; returns the exit code.
    fn exec(self, global: &Global) -> anyhow::Result<u8>;
}

/// A command of the list, made and run without naming its type.
struct Entry {
    cli: fn() -> clap::Command,
    shows: Shows,
    exec: fn(&clap::ArgMatches, &Global) -> anyhow::Result<u8>,
}

fn entry<C: HostCommand>() -> Entry {
    Entry {
        cli: C::command,
        shows: C::SHOWS,
        exec: |matches, global| {
            C::from_arg_matches(matches)
                .unwrap_or_else(|e| e.exit())
                .exec(global)
        },
    }
}

/// Every command, in the order `host --help` lists them.
fn all() -> [Entry; 18] {
    [
        entry::<tools::Tools>(),
        entry::<plugins::Plugins>(),
        entry::<skills::Skills>(),
        entry::<trust::Trust>(),
        entry::<approvals::Approvals>(),
        entry::<call::Call>(),
        entry::<run::Run>(),
        entry::<chat::Chat>(),
        entry::<mcp::Mcp>(),
        entry::<serve::Serve>(),
        entry::<check::Check>(),
        entry::<publish::Publish>(),
        entry::<install::Install>(),
        entry::<keygen::Keygen>(),
        entry::<new::New>(),
        entry::<explain::Explain>(),
        entry::<completions::Completions>(),
        entry::<man::Man>(),
    ]
}

/// The `clap` command of `host`: the shared flags, and each command
/// showing (in its `--help`, its usage and the shell completions) only
/// the shared flags it says it uses. The others are still accepted, and
/// change nothing for that command: each command gets a hidden copy of
/// them before clap propagates the shared flags (it skips what a command
/// has already).
pub fn cli() -> clap::Command {
    let mut cmd = Host::command();
    let shared: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    for command in all() {
        let mut sub = (command.cli)();
        for arg in shared.iter().filter(|a| !command.shows.shows(a)) {
            sub = sub.arg(arg.clone().hide(true));
        }
        cmd = cmd.subcommand(sub);
    }
    cmd
}

/// The parsed command line: the shared flags (wherever they were given)
/// and the command's own arguments.
pub struct CommandLine {
    pub global: Global,
    matches: clap::ArgMatches,
}

/// Parses the process's arguments (exits with clap's message and code on
/// an error, `--help` or `--version`).
pub fn parse() -> CommandLine {
    let matches = cli().get_matches();
    let global = Global::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    CommandLine { global, matches }
}

/// Runs the command given; `host` with none chats.
pub fn exec(line: &CommandLine) -> anyhow::Result<u8> {
    let Some((name, matches)) = line.matches.subcommand() else {
        return chat::Chat::default().exec(&line.global);
    };
    let command = all()
        .into_iter()
        .find(|c| (c.cli)().get_name() == name)
        .ok_or_else(|| anyhow::anyhow!("no command `{name}`"))?;
    (command.exec)(matches, &line.global)
}

/// The shared flags of a command line, for tests.
#[cfg(test)]
pub fn global_of(args: &[&str]) -> Global {
    let mut all = vec!["host"];
    all.extend_from_slice(args);
    let matches = cli().get_matches_from(all);
    Global::from_arg_matches(&matches).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag a command names in its `SHOWS` is a shared flag.
    #[test]
    fn shown_flags_are_shared_flags() {
        let shared: Vec<String> = Host::command()
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        for command in all() {
            if let Shows::Only { flags, .. } = command.shows {
                for flag in flags {
                    assert!(shared.iter().any(|s| s == flag), "{flag}");
                }
            }
        }
    }

    #[test]
    fn the_command_is_consistent() {
        cli().debug_assert();
    }
}
