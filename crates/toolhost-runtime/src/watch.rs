//! Hot reload: watches the plugin directories and reloads what changed.
//!
//! `notify` reports raw file events; `notify-debouncer-mini` coalesces the
//! bursts that editors and `cargo build` make (several writes, a truncate, a
//! rename) into one event per path once the path has been quiet for the
//! debounce time. The paths of a batch are mapped to the plugin files they
//! concern (`x.wasm`, or `x.toml` beside it) and reloaded together, off the
//! call path; the registry is then swapped in one step.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Weak;
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_mini::{DebounceEventResult, DebouncedEventKind, Debouncer};

use crate::catalog::{Catalog, Sources};
use crate::error::RuntimeError;

/// A running watcher; dropping it stops watching.
pub(crate) struct Watcher {
    _debouncer: Debouncer<RecommendedWatcher>,
}

/// Starts watching `sources`. Batches of changed plugin files are reloaded
/// on the current tokio runtime. The task holds the catalog weakly: dropping
/// the last `Runtime` stops the watcher and the task.
pub(crate) fn start(
    catalog: Weak<Catalog>,
    sources: Sources,
    debounce: Duration,
) -> Result<Watcher, RuntimeError> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Batch>();
    let config = notify_debouncer_mini::Config::default()
        .with_timeout(debounce)
        .with_batch_mode(true);
    let watched = sources.clone();
    let mut debouncer = notify_debouncer_mini::new_debouncer_opt::<_, RecommendedWatcher>(
        config,
        move |result: DebounceEventResult| {
            let batch = match result {
                Ok(events) => Batch::Paths(
                    events
                        .into_iter()
                        // A path still being written reports again once it is quiet.
                        .filter(|e| e.kind == DebouncedEventKind::Any)
                        .filter_map(|e| watched.plugin_file(&e.path))
                        .collect(),
                ),
                Err(e) => {
                    tracing::warn!("plugin watcher error, rescanning: {e}");
                    Batch::Rescan
                }
            };
            if !matches!(&batch, Batch::Paths(p) if p.is_empty()) {
                let _ = tx.send(batch);
            }
        },
    )
    .map_err(|source| RuntimeError::Watch { path: None, source })?;
    for root in sources.watch_roots() {
        debouncer
            .watcher()
            .watch(&root, RecursiveMode::NonRecursive)
            .map_err(|source| RuntimeError::Watch {
                path: Some(root.clone()),
                source,
            })?;
        tracing::debug!(dir = %root.display(), "watching for plugin changes");
    }
    tokio::spawn(async move {
        while let Some(batch) = rx.recv().await {
            let Some(catalog) = catalog.upgrade() else {
                break;
            };
            match batch {
                Batch::Paths(paths) => catalog.reload(paths).await,
                Batch::Rescan => catalog.rescan().await,
            };
        }
    });
    Ok(Watcher {
        _debouncer: debouncer,
    })
}

/// What one debounced batch asks for.
enum Batch {
    /// Reload these plugin files (deduplicated, sorted).
    Paths(BTreeSet<PathBuf>),
    /// The watcher lost track (queue overflow, ...): compare every file.
    Rescan,
}

/// Default quiet time before a changed file is reloaded.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(75);
