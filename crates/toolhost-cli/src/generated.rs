//! What is generated from the clap definitions (`commands/`), so it never
//! drifts from them: the shell completions (`host completions SHELL`,
//! clap_complete) and the man pages (`host man`, clap_mangen): both are
//! made from [`command`].

use std::path::Path;

/// The name the command was started by (`host` or `toolhost`): the
/// completions and pages are for that name.
pub fn bin_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .filter(|n| n == "host" || n == "toolhost")
        .unwrap_or_else(|| "host".to_owned())
}

/// The `clap` command of `host`, named as it was started.
pub fn command() -> clap::Command {
    let name = bin_name();
    crate::commands::cli().name(name.clone()).bin_name(name)
}
