//! What is generated from the clap definitions (`args.rs`), so it never
//! drifts from them: `host completions SHELL` (clap_complete) and `host man`
//! (clap_mangen, roff pages for `man`).

use std::path::Path;

use anyhow::Context;

use crate::exit;
use crate::stdout::outln;

/// The name the command was started by (`host` or `toolhost`): the
/// completions and pages are for that name.
fn bin_name() -> String {
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

/// `host completions SHELL`: the script on stdout.
pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<u8> {
    let name = bin_name();
    let mut cmd = crate::args::command()
        .name(name.clone())
        .bin_name(name.clone());
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut script);
    use std::io::Write as _;
    std::io::stdout().lock().write_all(&script)?;
    Ok(exit::OK)
}

/// `host man [COMMAND]`: that page on stdout; `host man --dir DIR`: every
/// page written into DIR.
pub fn man(command: Option<&str>, dir: Option<&Path>) -> anyhow::Result<u8> {
    let name = bin_name();
    let cmd = crate::args::command()
        .name(name.clone())
        .bin_name(name.clone());
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
