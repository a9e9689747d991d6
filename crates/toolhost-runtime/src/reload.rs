//! Loading and reloading: which files plugins come from, the loaded version
//! of each file, and the events a change produces.
//!
//! Every load — the first one, a batch from the watcher, a rescan — goes
//! through `Catalog::reload`: the changed files are loaded in
//! parallel (compiling on blocking threads, off the call path), a file that
//! fails keeps its previous version serving, and a new registry is built from
//! every file's current version and swapped in one step. Calls in flight keep
//! the `Arc<Plugin>` they started with, so they finish on that version.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::catalog::Catalog;
use crate::error::{LoadError, RuntimeError};
use crate::plugin::Plugin;
use crate::registry::Registry;
use crate::runtime::{LoadFailure, LoadReport, Runtime};

/// What the runtime loads plugins from: whole directories and single files.
/// Every path is absolute and canonical (symlinks resolved), so the paths the
/// watcher reports match the paths plugins were loaded from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sources {
    pub dirs: Vec<PathBuf>,
    pub files: Vec<PathBuf>,
}

impl Sources {
    /// The plugin file a changed `path` concerns, if any: a `.wasm` in a
    /// watched directory (or a watched file), or the `.wasm` beside a changed
    /// manifest.
    pub(crate) fn plugin_file(&self, path: &Path) -> Option<PathBuf> {
        let wasm = match path.extension().and_then(|e| e.to_str()) {
            Some("wasm") => path.to_owned(),
            Some("toml") => path.with_extension("wasm"),
            _ => return None,
        };
        let in_dir = wasm
            .parent()
            .is_some_and(|parent| self.dirs.iter().any(|d| d == parent));
        (in_dir || self.files.contains(&wasm)).then_some(wasm)
    }

    /// Directories to watch: every plugin directory, and the parent of every single file.
    pub(crate) fn watch_roots(&self) -> BTreeSet<PathBuf> {
        let mut roots: BTreeSet<PathBuf> = self.dirs.iter().cloned().collect();
        roots.extend(
            self.files
                .iter()
                .filter_map(|f| f.parent().map(Path::to_path_buf)),
        );
        roots
    }
}

impl Sources {
    /// Resolves the paths given to the builder: each must exist; directories
    /// and files are told apart and made canonical.
    pub(crate) fn resolve(paths: &[PathBuf]) -> Result<Sources, RuntimeError> {
        let mut sources = Sources::default();
        for path in paths {
            let canonical =
                std::fs::canonicalize(path).map_err(|source| RuntimeError::PluginDir {
                    path: path.clone(),
                    source,
                })?;
            if canonical.is_file() {
                sources.files.push(canonical);
            } else {
                sources.dirs.push(canonical);
            }
        }
        Ok(sources)
    }

    /// Every plugin file present now: the `*.wasm` files of each directory
    /// (sorted) and the single files that still exist. An unreadable
    /// directory contributes nothing (its plugins unload) and is logged.
    pub(crate) fn list(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for dir in &self.dirs {
            let entries = match std::fs::read_dir(dir) {
                Ok(entries) => entries,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), "cannot read plugin directory: {e}");
                    continue;
                }
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
                .collect();
            found.sort();
            files.extend(found);
        }
        files.extend(self.files.iter().filter(|f| f.is_file()).cloned());
        files
    }
}

/// Something that happened to the loaded plugins; see [`Runtime::subscribe`].
///
/// ```no_run
/// # async fn run(runtime: toolhost_runtime::Runtime) {
/// let mut events = runtime.subscribe();
/// while let Ok(event) = events.recv().await {
///     eprintln!("{event}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum PluginEvent {
    /// A plugin was loaded (at start, or a new file appeared).
    Loaded {
        /// Its name.
        plugin: String,
        /// Its version.
        version: semver::Version,
        /// The component file.
        path: PathBuf,
        /// The names its tools are exposed under.
        tools: Vec<String>,
    },
    /// A plugin's file changed and the new code now serves its calls.
    Reloaded {
        /// Its name.
        plugin: String,
        /// The version that served until now.
        from: semver::Version,
        /// The version that serves from now on.
        to: semver::Version,
        /// The component file.
        path: PathBuf,
        /// The names its tools are exposed under now.
        tools: Vec<String>,
    },
    /// A plugin is gone (its file was removed or renamed, or another version won).
    Unloaded {
        /// Its name.
        plugin: String,
        /// The version that was unloaded.
        version: semver::Version,
        /// The component file.
        path: PathBuf,
    },
    /// A file could not be loaded. When an earlier version of it was loaded,
    /// that version keeps serving (`kept`).
    Failed {
        /// The component file.
        path: PathBuf,
        /// Why.
        #[serde(serialize_with = "display")]
        error: LoadError,
        /// `name@version` of the version still serving, if any.
        kept: Option<String>,
    },
}

fn display<S: serde::Serializer>(e: &LoadError, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(e)
}

impl std::fmt::Display for PluginEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginEvent::Loaded {
                plugin,
                version,
                tools,
                ..
            } => write!(f, "loaded {plugin}@{version} ({})", tools.join(", ")),
            PluginEvent::Reloaded {
                plugin, from, to, ..
            } => write!(f, "reloaded {plugin}@{from} -> {to}"),
            PluginEvent::Unloaded {
                plugin, version, ..
            } => write!(f, "unloaded {plugin}@{version}"),
            PluginEvent::Failed { path, error, kept } => {
                write!(f, "{} did not load: {error}", path.display())?;
                match kept {
                    Some(id) => write!(f, " ({id} keeps serving)"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The current version loaded from each file, and the files that fail.
#[derive(Default)]
pub(crate) struct Files {
    loaded: BTreeMap<PathBuf, Arc<Plugin>>,
    failed: BTreeMap<PathBuf, LoadError>,
}

impl Runtime {
    /// Compares every plugin file with what is loaded: loads new and changed
    /// files, unloads removed ones. The watcher does this by itself after an
    /// error; embedders that do not watch can call it when they like.
    pub async fn rescan(&self) -> Vec<PluginEvent> {
        self.catalog().rescan().await
    }
}

impl Catalog {
    /// See [`Runtime::rescan`].
    pub(crate) async fn rescan(&self) -> Vec<PluginEvent> {
        let present: BTreeSet<PathBuf> = self.sources.list().into_iter().collect();
        let mut files = present.clone();
        {
            let state = self.files.lock().await;
            files.extend(state.loaded.keys().cloned());
            files.extend(state.failed.keys().cloned());
        }
        self.reload(files).await
    }

    /// Loads (or unloads, when they no longer exist) `files`, then swaps in a
    /// registry built from every file's current version. Returns the events,
    /// which also go to subscribers.
    pub(crate) async fn reload(&self, files: BTreeSet<PathBuf>) -> Vec<PluginEvent> {
        let started = Instant::now();
        let mut state = self.files.lock().await;
        let cache = &self.loader.cache;
        let (compiled0, hits0) = (
            cache.compiled.load(Ordering::Relaxed),
            cache.cache_hits.load(Ordering::Relaxed),
        );
        let mut events = Vec::new();
        let mut set = tokio::task::JoinSet::new();
        let mut pending = BTreeSet::new();
        for path in files {
            if !path.is_file() {
                state.loaded.remove(&path);
                state.failed.remove(&path);
                continue;
            }
            pending.insert(path.clone());
            let loader = self.loader.clone();
            set.spawn(async move {
                let result = loader.load(&path).await;
                (path, result)
            });
        }
        while let Some(joined) = set.join_next().await {
            let (path, result) = match joined {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("a plugin load task failed: {e}");
                    continue;
                }
            };
            pending.remove(&path);
            if result.is_err() && !path.is_file() {
                // Removed or renamed away while it loaded: that is an unload,
                // not a failure to report.
                state.loaded.remove(&path);
                state.failed.remove(&path);
                continue;
            }
            record(&mut state, path, result.map(Arc::new), &mut events);
        }
        // A load task that panicked still leaves its file in the report.
        for path in pending {
            let error = LoadError::Io("the load task failed unexpectedly".into());
            record(&mut state, path, Err(error), &mut events);
        }

        let swap_started = Instant::now();
        let (registry, warnings) = Registry::build(state.loaded.values().cloned(), &self.pins);
        let registry = Arc::new(registry);
        let old = self.swap_registry(registry.clone());
        let swap = swap_started.elapsed();
        for w in &warnings {
            tracing::warn!("{w}");
        }
        events.extend(changes(&old, &registry));

        let report = LoadReport {
            failures: state
                .failed
                .iter()
                .map(|(path, error)| LoadFailure {
                    path: path.clone(),
                    error: error.clone(),
                })
                .collect(),
            warnings,
            compiled: cache.compiled.load(Ordering::Relaxed) - compiled0,
            cache_hits: cache.cache_hits.load(Ordering::Relaxed) - hits0,
            duration: started.elapsed(),
            swap,
        };
        let live: BTreeMap<PathBuf, String> = state
            .loaded
            .iter()
            .map(|(path, p)| (path.clone(), p.content_key.clone()))
            .collect();
        drop(state);
        tracing::info!(
            plugins = registry.plugins.len(),
            tools = registry.tools.len(),
            failed = report.failures.len(),
            compiled = report.compiled,
            cached = report.cache_hits,
            ms = u64::try_from(report.duration.as_millis()).unwrap_or(u64::MAX),
            swap_us = u64::try_from(swap.as_micros()).unwrap_or(u64::MAX),
            "loaded plugins ({} compiled, {} from cache)",
            report.compiled,
            report.cache_hits
        );
        self.set_report(report);
        for event in &events {
            match event {
                PluginEvent::Failed { .. } => tracing::warn!("{event}"),
                _ => tracing::info!("{event}"),
            }
            self.publish(event.clone());
        }
        let (cache, grace) = (cache.clone(), self.cache_grace);
        tokio::task::spawn_blocking(move || cache.prune(&live, grace));
        events
    }
}

/// Records the result of loading `path`: a new version replaces the old one
/// (unless it is the same code and manifest); a failure keeps the old one and
/// is reported once until the file changes its failure.
fn record(
    state: &mut Files,
    path: PathBuf,
    result: Result<Arc<Plugin>, LoadError>,
    events: &mut Vec<PluginEvent>,
) {
    match result {
        Ok(plugin) => {
            state.failed.remove(&path);
            let unchanged = state.loaded.get(&path).is_some_and(|old| {
                old.content_key == plugin.content_key && old.manifest == plugin.manifest
            });
            if !unchanged {
                state.loaded.insert(path, plugin);
            }
        }
        Err(error) => {
            let repeated = state
                .failed
                .get(&path)
                .is_some_and(|e| e.to_string() == error.to_string());
            if !repeated {
                events.push(PluginEvent::Failed {
                    path: path.clone(),
                    error: error.clone(),
                    kept: state.loaded.get(&path).map(|p| p.id()),
                });
            }
            state.failed.insert(path, error);
        }
    }
}

/// The events that turn registry `old` into `new`, by plugin name; a plugin
/// that moved to another file is an unload plus a load.
fn changes(old: &Registry, new: &Registry) -> Vec<PluginEvent> {
    let tools_of = |r: &Registry, p: &Arc<Plugin>| -> Vec<String> {
        r.tools
            .iter()
            .filter(|(_, (q, _))| Arc::ptr_eq(p, q))
            .map(|(n, _)| n.clone())
            .collect()
    };
    let unloaded = |p: &Plugin| PluginEvent::Unloaded {
        plugin: p.name.clone(),
        version: p.version.clone(),
        path: p.path.clone(),
    };
    let loaded = |p: &Arc<Plugin>| PluginEvent::Loaded {
        plugin: p.name.clone(),
        version: p.version.clone(),
        path: p.path.clone(),
        tools: tools_of(new, p),
    };
    let mut events = Vec::new();
    for p in &old.plugins {
        if !new.plugins.iter().any(|q| q.name == p.name) {
            events.push(unloaded(p));
        }
    }
    for p in &new.plugins {
        match old.plugins.iter().find(|q| q.name == p.name) {
            None => events.push(loaded(p)),
            Some(q) if Arc::ptr_eq(p, q) => {}
            Some(q) if q.path != p.path => {
                events.push(unloaded(q));
                events.push(loaded(p));
            }
            Some(q) => events.push(PluginEvent::Reloaded {
                plugin: p.name.clone(),
                from: q.version.clone(),
                to: p.version.clone(),
                path: p.path.clone(),
                tools: tools_of(new, p),
            }),
        }
    }
    events
}

/// How long an unneeded compile cache entry is kept after its last use.
pub const DEFAULT_CACHE_GRACE: Duration = Duration::from_secs(24 * 3600);

/// Default quiet time before a changed file is reloaded.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(75);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_paths_map_to_the_plugin_files_they_concern() {
        let sources = Sources {
            dirs: vec![PathBuf::from("/p")],
            files: vec![PathBuf::from("/q/one.wasm")],
        };
        let f = |p: &str| sources.plugin_file(Path::new(p));
        assert_eq!(f("/p/calc.wasm"), Some(PathBuf::from("/p/calc.wasm")));
        assert_eq!(f("/p/calc.toml"), Some(PathBuf::from("/p/calc.wasm")));
        assert_eq!(f("/p/.calc.wasm.swp"), None);
        assert_eq!(f("/p/sub/calc.wasm"), None, "not recursive");
        assert_eq!(f("/q/one.wasm"), Some(PathBuf::from("/q/one.wasm")));
        assert_eq!(f("/q/two.wasm"), None, "only the file given");
        let roots = sources.watch_roots();
        assert!(roots.contains(Path::new("/p")) && roots.contains(Path::new("/q")));
    }
}
