//! `host approvals list | revoke ID | clear`: the saved approvals ("allow
//! always" answers), in a file beside the lock file (or the database that
//! replicas share). Loads no plugins.

use std::io::Write;

use clap::{Parser, Subcommand};
use toolhost_runtime::policy::approvals::Approvals as Store;

use super::HostCommand;
use crate::exit;
use crate::settings::{self, ApprovalStores};
use crate::shared_flags::{Global, Shows};
use crate::shown::printable;
use crate::stdout::outln;

/// The saved approvals ("allow always" answers): list, revoke, clear.
#[derive(Debug, Parser)]
#[command(name = "approvals")]
pub struct Approvals {
    #[command(subcommand)]
    action: Action,
}

/// `host approvals …`.
#[derive(Debug, Subcommand)]
enum Action {
    /// Every saved approval: id, tool, plugin and digest, scope, who, when,
    /// from which prompt.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Remove one saved approval: the next such call is asked again.
    Revoke {
        /// Its id (from `host approvals list`).
        id: String,
    },
    /// Remove every saved approval.
    Clear,
}

impl HostCommand for Approvals {
    const SHOWS: Shows = Shows::Only {
        headings: &[],
        flags: &["plugins", "config", "lock", "approvals_file"],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let file = settings::config_file(global)?;
        run(&settings::approval_stores(global, &file)?, &self.action)
    }
}

/// `host approvals list | revoke ID | clear`, on the saved-approvals
/// stores `stores` (one, beside the lock file of the plugins directory
/// given; or, when none is given, every store there is: see
/// [`approval_stores`](crate::settings::approval_stores)).
fn run(stores: &ApprovalStores, command: &Action) -> anyhow::Result<u8> {
    // The database replicas share (`[state]`), else the files.
    let opened: Vec<(String, Store)> = match &stores.shared {
        Some(store) => vec![(store.describe(), Store::with_store(store.clone()))],
        None => stores
            .paths
            .iter()
            .map(|p| (p.display().to_string(), Store::open(p.to_owned())))
            .collect(),
    };
    match command {
        Action::List { json } => {
            let mut all = Vec::new();
            for (path, store) in &opened {
                all.push((path, store.list()?));
            }
            let mut out = std::io::stdout().lock();
            if *json {
                let flat: Vec<_> = all.iter().flat_map(|(_, list)| list).collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&flat)?)?;
                return Ok(exit::OK);
            }
            if all.iter().all(|(_, list)| list.is_empty()) {
                writeln!(out, "no saved approvals ({})", stores.described())?;
            }
            for (path, list) in all.iter().filter(|(_, l)| !l.is_empty()) {
                if stores.every_store {
                    writeln!(out, "{path}:")?;
                }
                for a in list {
                    let scope = printable(&a.scope.to_string());
                    writeln!(
                        out,
                        "{}  {} ({} {})  {scope}",
                        a.id,
                        printable(&a.tool),
                        printable(&a.plugin),
                        a.digest
                    )?;
                    let expires = a
                        .expires
                        .map(|t| format!(", expires {}", local_time(t)))
                        .unwrap_or_default();
                    writeln!(
                        out,
                        "    answers {}; by {} on {}, from the {} prompt{expires}",
                        printable(&a.binding()),
                        printable(&a.who),
                        local_time(a.when),
                        a.from,
                    )?;
                }
            }
            Ok(exit::OK)
        }
        Action::Revoke { id } => {
            for (_, store) in &opened {
                if store.revoke(id)? {
                    outln!("approval {id} revoked: the next such call is asked again")?;
                    return Ok(exit::OK);
                }
            }
            eprintln!(
                "error: no saved approval {} ({}); `host approvals list` shows their ids",
                printable(id),
                stores.described()
            );
            Ok(exit::FAILURE)
        }
        Action::Clear => {
            if stores.every_store {
                anyhow::bail!(
                    "which plugins directory's approvals? `host --plugins DIR approvals clear` \
                     (or --lock FILE) clears one directory's; `host approvals list` shows them all"
                );
            }
            let mut n = 0;
            for (_, store) in &opened {
                n += store.clear()?;
            }
            outln!("{n} saved approval(s) removed ({})", stores.described())?;
            Ok(exit::OK)
        }
    }
}

/// A time the approvals store keeps (Unix seconds) as the user's local
/// time, e.g. `2026-11-27 19:58 +01:00`.
fn local_time(unix: u64) -> String {
    i64::try_from(unix)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(
            || format!("{unix} (Unix time)"),
            |t| {
                t.with_timezone(&chrono::Local)
                    .format("%Y-%m-%d %H:%M %:z")
                    .to_string()
            },
        )
}
