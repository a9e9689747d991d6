//! Hot reload: watches the plugin directories and reloads what changed.
//!
//! `notify` reports raw file events. Only events that can change what a
//! file holds count (created, written, closed after writing, renamed,
//! removed): opening or reading a plugin file changes nothing, and a reload
//! itself opens every file it loads, so reacting to reads would feed itself
//! (issue 59: one `cat calc.toml` made a watching host reload every 75 ms
//! for ever). The paths are mapped to the plugin files they concern
//! (`x.wasm`, or `x.toml` beside it) and gathered until the directory has
//! been quiet for the debounce time — editors and `cargo build` write a file
//! several times, truncate it and rename it — and the batch is then
//! reloaded together, off the call path, skipping files whose contents are
//! what is loaded already ([`Catalog::reload_changed`]).
//!
//! The debounce is a few lines over a channel rather than
//! `notify-debouncer-mini`, which drops the kind of each event and so
//! cannot tell a read from a write, or `notify-debouncer-full`, which keeps
//! a file-id cache of each watched tree this needs none of.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Weak;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::catalog::{Catalog, Sources};
use crate::error::RuntimeError;

/// A running watcher; dropping it stops watching.
pub(crate) struct Watcher {
    _watcher: RecommendedWatcher,
}

/// What the file watcher saw: a plugin file that may have new contents, or
/// a loss of track (queue overflow, ...) after which every file is compared.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Changed(PathBuf),
    Rescan,
}

/// Starts watching `sources`. Batches of changed plugin files are reloaded
/// on the current tokio runtime. The task holds the catalog weakly: dropping
/// the last `Runtime` stops the watcher and the task.
pub(crate) fn start(
    catalog: Weak<Catalog>,
    sources: Sources,
    debounce: Duration,
) -> Result<Watcher, RuntimeError> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Seen>();
    let watched = sources.clone();
    let mut watcher = RecommendedWatcher::new(
        move |result: notify::Result<notify::Event>| {
            let seen: Vec<Seen> = match result {
                Ok(event) if event.need_rescan() => vec![Seen::Rescan],
                Ok(event) if changes_content(&event.kind) => event
                    .paths
                    .iter()
                    .filter_map(|p| watched.plugin_file(p))
                    .map(Seen::Changed)
                    .collect(),
                Ok(_) => Vec::new(),
                Err(e) => {
                    tracing::warn!("plugin watcher error, rescanning: {e}");
                    vec![Seen::Rescan]
                }
            };
            for seen in seen {
                let _ = tx.send(seen);
            }
        },
        notify::Config::default(),
    )
    .map_err(|source| RuntimeError::Watch { path: None, source })?;
    for root in sources.watch_roots() {
        watcher
            .watch(&root, RecursiveMode::NonRecursive)
            .map_err(|source| RuntimeError::Watch {
                path: Some(root.clone()),
                source,
            })?;
        tracing::debug!(dir = %root.display(), "watching for plugin changes");
    }
    tokio::spawn(reload_batches(catalog, rx, debounce));
    Ok(Watcher { _watcher: watcher })
}

/// Whether an event of `kind` can change what a file holds. Opening,
/// reading and closing a file read-only cannot, and neither can a change
/// of its permissions or times (the digests would say so anyway).
fn changes_content(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(_)) => false,
        EventKind::Create(_)
        | EventKind::Modify(_)
        | EventKind::Remove(_)
        | EventKind::Any
        | EventKind::Other => true,
    }
}

/// Gathers what the watcher sees until it has been quiet for `debounce`,
/// then reloads the batch; ends with the catalog or the watcher.
async fn reload_batches(
    catalog: Weak<Catalog>,
    mut rx: UnboundedReceiver<Seen>,
    debounce: Duration,
) {
    while let Some(first) = rx.recv().await {
        // A file written without pause still reloads, at most this late.
        let latest = tokio::time::Instant::now() + debounce.saturating_mul(MAX_QUIET_WAITS);
        let mut paths = BTreeSet::new();
        let mut rescan = false;
        let mut next = Some(first);
        while let Some(seen) = next {
            match seen {
                Seen::Changed(path) => {
                    paths.insert(path);
                }
                Seen::Rescan => rescan = true,
            }
            let quiet = (tokio::time::Instant::now() + debounce).min(latest);
            next = match tokio::time::timeout_at(quiet, rx.recv()).await {
                Ok(Some(seen)) => Some(seen),
                Ok(None) | Err(_) => None,
            };
        }
        let Some(catalog) = catalog.upgrade() else {
            break;
        };
        if rescan {
            catalog.rescan().await;
        } else {
            catalog.reload_changed(paths).await;
        }
    }
}

/// How many quiet times a batch may wait for the directory to be quiet.
const MAX_QUIET_WAITS: u32 = 20;

/// Default quiet time before a changed file is reloaded.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(75);

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange, MetadataKind, RemoveKind, RenameMode};

    #[test]
    fn reads_and_attribute_changes_change_no_content_and_writes_renames_and_removals_do() {
        let unchanged = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Modify(ModifyKind::Metadata(MetadataKind::Permissions)),
        ];
        for kind in unchanged {
            assert!(!changes_content(&kind), "{kind:?}");
        }
        let changed = [
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
        ];
        for kind in changed {
            assert!(changes_content(&kind), "{kind:?}");
        }
    }
}
