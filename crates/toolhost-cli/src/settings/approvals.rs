//! Where saved approvals ("allow always" answers) are kept.

use std::path::{Path, PathBuf};

use super::{ConfigFile, lock_file, primary_plugins_dir};
use crate::shared_flags::Global;

/// Where "allow always" answers are saved: beside the lock file, named
/// after it (`toolhost.lock` → `toolhost.approvals.json`), so each lock
/// file has its own.
pub fn approvals_file(lock: &Path) -> PathBuf {
    lock.with_extension("approvals.json")
}

/// The saved-approvals stores `host approvals` reads.
#[derive(Debug)]
pub struct ApprovalStores {
    /// The files.
    pub paths: Vec<PathBuf>,
    /// The database that replicas share (`[state]`), which then holds them
    /// all instead of the files.
    pub shared: Option<std::sync::Arc<dyn toolhost_runtime::policy::approvals::Store>>,
    /// Whether they are every store found, since no plugins directory (nor
    /// `--lock`) said which one.
    pub every_store: bool,
}

impl ApprovalStores {
    /// Where they are, for a message.
    pub fn described(&self) -> String {
        if let Some(store) = &self.shared {
            return store.describe();
        }
        if self.every_store {
            let dir = self.paths.first().and_then(|p| p.parent()).map_or_else(
                || "the state directory".to_owned(),
                |d| d.display().to_string(),
            );
            format!(
                "in any plugins directory's store under {dir}; `host --plugins DIR approvals …` \
                 names one"
            )
        } else {
            self.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// The stores `host approvals` reads: the one beside the lock file when a
/// plugins directory or `--lock` says which (as the commands that call
/// tools use); with neither, every store in the state directory (approvals
/// are kept per plugins directory, and a listing that read one other file
/// would say there are none while there are), and a `./toolhost.approvals.json`
/// left from before the lock file moved.
pub fn approval_stores(global: &Global, file: &ConfigFile) -> anyhow::Result<ApprovalStores> {
    if let Some(state) = &file.state {
        return Ok(ApprovalStores {
            paths: Vec::new(),
            shared: Some(state.approvals_connected()?),
            every_store: false,
        });
    }
    if let Some(path) = &global.approvals_file {
        return Ok(ApprovalStores {
            paths: vec![path.clone()],
            shared: None,
            every_store: false,
        });
    }
    if global.lock.is_some() || primary_plugins_dir(global, file).is_some() {
        return Ok(ApprovalStores {
            paths: vec![approvals_file(&lock_file(global, file))],
            shared: None,
            every_store: false,
        });
    }
    let mut paths = Vec::new();
    if let Some(dir) = toolhost_runtime::lockfile::default_lock_file(Path::new("."))
        .as_deref()
        .and_then(Path::parent)
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        paths.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".approvals.json")),
        );
        paths.sort();
        if paths.is_empty() {
            // Named for the messages; nothing is read from it.
            paths.push(dir.join("*.approvals.json"));
        }
    }
    let old = approvals_file(Path::new("toolhost.lock"));
    if old.is_file() {
        paths.push(old);
    }
    Ok(ApprovalStores {
        paths,
        shared: None,
        every_store: true,
    })
}
