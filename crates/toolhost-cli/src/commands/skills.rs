//! `host skills SERVER [URI]`: the skills an MCP server offers (SEP-2640),
//! and one of them loaded, every file verified against the listing.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Parser;
use toolhost_mcp::client::skills::{self, LoadedSkill};
use toolhost_runtime::CallContext;

use super::HostCommand;
use crate::exit;
use crate::notices::report_load_problems;
use crate::setup::Setup;
use crate::shared_flags::{Global, Shows};
use crate::shown::printable;

/// List an MCP server's skills, or load one (every file verified).
///
/// Without URI: each skill the server `[[mcp-servers]]` names lists, and
/// no file of any is read. With URI (a skill's `SKILL.md`): its files are
/// read through the policy and hooks, each checked against the listing's
/// size and digest, and the `SKILL.md`'s front matter against the
/// listing's; the first that fails stops the load (exit 1) and nothing is
/// used. The `SKILL.md` is printed, or every file written under `--into`.
#[derive(Debug, Parser)]
#[command(name = "skills")]
pub struct Skills {
    /// The MCP server (its `name` in `[[mcp-servers]]`).
    server: String,
    /// The skill to load: the URI of its `SKILL.md`, as listed.
    uri: Option<String>,
    /// Write the loaded skill's files into this folder (made when missing;
    /// a file there is replaced) instead of printing its `SKILL.md`.
    #[arg(long, requires = "uri")]
    into: Option<PathBuf>,
    /// Machine-readable output (the listing, or the loaded skill's files).
    #[arg(long)]
    json: bool,
}

/// Loads the plugins and servers once; a person may sign in.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: false,
    read_var: false,
    person: true,
    serves_mcp: false,
};

impl HostCommand for Skills {
    const SHOWS: Shows = Shows::LOADING;

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        report_load_problems(&loaded.runtime);
        let runtime = &loaded.runtime;
        let Some(uri) = &self.uri else {
            let listed = loaded.rt.block_on(skills::list(runtime, &self.server))?;
            let mut out = std::io::stdout().lock();
            if self.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&listed)?)?;
            } else if listed.is_empty() {
                writeln!(out, "{} lists no skills", printable(&self.server))?;
            }
            for skill in listed.iter().filter(|_| !self.json) {
                writeln!(
                    out,
                    "{}\n    {}: {}",
                    printable(&skill.uri),
                    printable(&skill.frontmatter.name),
                    printable(&skill.frontmatter.description)
                )?;
            }
            return Ok(exit::OK);
        };
        let mut cx = CallContext::new();
        if let Some(agent) = &global.agent {
            cx = cx.agent(agent.clone());
        }
        let skill = match loaded
            .rt
            .block_on(skills::load(runtime, &self.server, uri, cx))
        {
            Ok(skill) => skill,
            Err(e) => {
                eprintln!("host: {}", printable(&e.to_string()));
                return Ok(exit::FAILURE);
            }
        };
        match &self.into {
            Some(dir) => write_into(&skill, dir)?,
            None if self.json => {
                let files: Vec<serde_json::Value> = skill
                    .files
                    .iter()
                    .map(|f| {
                        serde_json::json!({
                            "uri": f.uri,
                            "path": f.path,
                            "size": f.bytes.len(),
                            "text": std::str::from_utf8(&f.bytes).ok(),
                        })
                    })
                    .collect();
                let shown = serde_json::json!({"skill": skill.skill, "files": files});
                println!("{}", serde_json::to_string_pretty(&shown)?);
            }
            None => {
                let manifest = skill.files.first().map(|f| f.bytes.as_slice());
                let mut out = std::io::stdout().lock();
                out.write_all(manifest.unwrap_or_default())?;
                for f in skill.files.iter().skip(1) {
                    eprintln!(
                        "host: also {} ({} bytes, verified)",
                        printable(&f.path),
                        f.bytes.len()
                    );
                }
            }
        }
        Ok(exit::OK)
    }
}

/// Writes each file of `skill` under `dir`, at its path in the skill
/// (checked: never outside `dir`).
fn write_into(skill: &LoadedSkill, dir: &Path) -> anyhow::Result<()> {
    for file in &skill.files {
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("making {}", parent.display()))?;
        }
        std::fs::write(&path, &file.bytes)
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "host: wrote {} ({} bytes, verified)",
            path.display(),
            file.bytes.len()
        );
    }
    Ok(())
}
