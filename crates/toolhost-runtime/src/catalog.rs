//! The catalog: what is loaded. The plugin files and the version loaded
//! from each, the registry of tools built from them (swapped whole on every
//! reload), the last load report, and the events subscribers receive.
//!
//! Loading and reloading live in `reload.rs` (`Catalog::reload`), watching
//! the directories in `watch.rs`, one file's loading in `plugin.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Serialize;

use crate::error::{LoadError, RuntimeError};
use crate::plugin::{Loader, Plugin};
use crate::registry::Registry;
use crate::source::ToolSource;

/// Every loaded plugin and where it came from.
pub(crate) struct Catalog {
    pub(crate) loader: Loader,
    /// Where plugins come from (canonical paths).
    pub(crate) sources: Sources,
    /// Version requirements by plugin name.
    pub(crate) pins: BTreeMap<String, semver::VersionReq>,
    /// Which plugin each plain tool name belongs to: the user's
    /// `tool-owners`, then every name a plugin has held since start-up
    /// (kept while that plugin is away, so a plugin being rebuilt gets its
    /// names back). See `registry.rs` (`assign_names`).
    pub(crate) tool_owners: parking_lot::Mutex<BTreeMap<String, String>>,
    /// How long unused compile cache entries are kept.
    pub(crate) cache_grace: Duration,
    /// The tool sources (`source.rs`), each with the plugin last built from
    /// its tools and the warnings about tools it left out.
    pub(crate) sources_in_use: Vec<Arc<dyn ToolSource>>,
    /// The version loaded from each file; held while a batch loads, so loads never interleave.
    pub(crate) files: tokio::sync::Mutex<Files>,
    /// Read on every call; replaced whole by a reload.
    registry: ArcSwap<Registry>,
    report: ArcSwap<LoadReport>,
    events: tokio::sync::broadcast::Sender<PluginEvent>,
}

impl Catalog {
    pub(crate) fn new(
        loader: Loader,
        sources: Sources,
        pins: BTreeMap<String, semver::VersionReq>,
        tool_owners: BTreeMap<String, String>,
        cache_grace: Duration,
        tool_sources: Vec<Arc<dyn ToolSource>>,
    ) -> Catalog {
        Catalog {
            loader,
            sources,
            sources_in_use: tool_sources,
            pins,
            tool_owners: parking_lot::Mutex::new(tool_owners),
            cache_grace,
            files: tokio::sync::Mutex::new(Files::default()),
            registry: ArcSwap::from_pointee(Registry::default()),
            report: ArcSwap::from_pointee(LoadReport::default()),
            events: tokio::sync::broadcast::channel(256).0,
        }
    }

    /// The tools and plugins in force now.
    pub(crate) fn registry(&self) -> Arc<Registry> {
        self.registry.load_full()
    }

    /// Puts `registry` in place for every call from now on; returns the old one.
    pub(crate) fn swap_registry(&self, registry: Arc<Registry>) -> Arc<Registry> {
        self.registry.swap(registry)
    }

    /// What happened at the last load.
    pub(crate) fn load_report(&self) -> LoadReport {
        LoadReport::clone(&self.report.load())
    }

    pub(crate) fn set_report(&self, report: LoadReport) {
        self.report.store(Arc::new(report));
    }

    /// Sends `event` to subscribers (having none is not an error).
    pub(crate) fn publish(&self, event: PluginEvent) {
        let _ = self.events.send(event);
    }

    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PluginEvent> {
        self.events.subscribe()
    }

    /// Records who holds each plain tool name in `registry`, so the next
    /// reload leaves it there. Names of plugins that went away are kept (a
    /// rebuilt plugin gets its names back), up to [`MAX_REMEMBERED_OWNERS`].
    pub(crate) fn remember_owners(&self, registry: &Registry) {
        let mut owners = self.tool_owners.lock();
        owners.extend(registry.owners());
        if owners.len() > MAX_REMEMBERED_OWNERS {
            // A plugin cycling through tool names: forget the absent owners.
            let present: BTreeSet<&str> =
                registry.plugins.iter().map(|p| p.name.as_str()).collect();
            owners.retain(|_, plugin| present.contains(plugin.as_str()));
        }
    }

    /// The loaded hook plugin called `name`.
    pub(crate) fn hook_plugin(&self, name: &str) -> Option<Arc<Plugin>> {
        self.registry
            .load()
            .plugins
            .iter()
            .find(|p| p.name == name && p.is_hook())
            .cloned()
    }
}

/// How many tool names' owners a runtime remembers for plugins that are
/// away before it forgets them.
const MAX_REMEMBERED_OWNERS: usize = 10_000;

/// One plugin file that did not load, and why.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    /// The component file.
    pub path: PathBuf,
    /// Why it did not load.
    pub error: LoadError,
}

/// The log target of the load problems the [`LoadReport`] and the
/// [`PluginEvent`]s also carry (a file that did not load, a version left
/// out, grants withheld). They are logged at `warn` under it, so an
/// embedder that reads neither still sees them; a host that prints the
/// report and the events itself turns this target off, and each problem
/// reaches its user once.
///
/// ```
/// let filter = format!("warn,{}=off", toolhost_runtime::load::LOAD_PROBLEMS_TARGET);
/// # let _ = filter;
/// ```
pub const LOAD_PROBLEMS_TARGET: &str = "toolhost_runtime::load_problems";

/// What happened when the runtime loaded its plugins.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Files that did not load.
    pub failures: Vec<LoadFailure>,
    /// Plugins or tools renamed or left out (name clashes, duplicate plugins).
    pub warnings: Vec<String>,
    /// Components compiled during this load.
    pub compiled: u64,
    /// Components taken from the compile cache during this load.
    pub cache_hits: u64,
    /// How long loading took.
    pub duration: Duration,
    /// How long swapping in the new set of tools took (building the registry included).
    pub swap: Duration,
}

/// How long an unneeded compile cache entry is kept after its last use.
pub const DEFAULT_CACHE_GRACE: Duration = Duration::from_secs(24 * 3600);

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
    /// manifest or WIT (a plain component's docs).
    pub(crate) fn plugin_file(&self, path: &Path) -> Option<PathBuf> {
        let wasm = match path.extension().and_then(|e| e.to_str()) {
            Some("wasm") => path.to_owned(),
            Some("toml" | "wit") => path.with_extension("wasm"),
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
                    tracing::warn!(
                        "cannot read the plugin directory {}: {}",
                        dir.display(),
                        toolhost_text::cause(&e)
                    );
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

/// The current version loaded from each file, and the files that fail;
/// the plugin built from each tool source's tools, with its warnings.
#[derive(Default)]
pub(crate) struct Files {
    pub(crate) loaded: BTreeMap<PathBuf, Arc<Plugin>>,
    pub(crate) failed: BTreeMap<PathBuf, LoadError>,
    /// What each file (with its manifest) held when it was last loaded,
    /// whether that load worked or not: a watcher event for a file whose
    /// contents are the same again reloads nothing.
    pub(crate) seen: BTreeMap<PathBuf, Fingerprint>,
    pub(crate) from_sources: BTreeMap<String, (Arc<Plugin>, Vec<String>)>,
}

/// Each source's changes, subscribed to before its tools are first read
/// (so a change in between is not missed).
pub(crate) fn subscribe(catalog: &Catalog) -> Vec<(String, tokio::sync::watch::Receiver<u64>)> {
    catalog
        .sources_in_use
        .iter()
        .map(|s| (s.name().to_owned(), s.changes()))
        .collect()
}

/// Rebuilds a source's plugin, and the registry, each time the source
/// says it changed; one task per source, which ends with the catalog.
pub(crate) fn follow(
    catalog: &Arc<Catalog>,
    subscribed: Vec<(String, tokio::sync::watch::Receiver<u64>)>,
) {
    for (name, mut changes) in subscribed {
        let name = [name];
        let catalog = Arc::downgrade(catalog);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(catalog) = catalog.upgrade() else {
                    break;
                };
                catalog.refresh_sources(Some(&name)).await;
            }
        });
    }
}

/// The sha256 of a plugin file's bytes, of its manifest's and of its WIT's
/// (or of their absence): what a load read, to compare with what the files
/// hold now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// `None` when the component cannot be read (gone, mid-rename).
    pub(crate) async fn of(component: &std::path::Path) -> Option<Fingerprint> {
        use sha2::{Digest, Sha256};
        let bytes = tokio::fs::read(component).await.ok()?;
        let manifest = tokio::fs::read(crate::manifest::Manifest::path_for(component))
            .await
            .ok();
        // A plain component's WIT (its docs) counts too.
        let wit = tokio::fs::read(component.with_extension("wit")).await.ok();
        let mut hash = Sha256::new();
        hash.update(Sha256::digest(&bytes));
        for beside in [manifest, wit] {
            match beside {
                Some(text) => hash.update(Sha256::digest(&text)),
                None => hash.update([0u8]),
            }
        }
        Some(Fingerprint(hash.finalize().into()))
    }
}

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
        assert_eq!(f("/p/units.wit"), Some(PathBuf::from("/p/units.wasm")));
        assert_eq!(f("/p/.calc.wasm.swp"), None);
        assert_eq!(f("/p/sub/calc.wasm"), None, "not recursive");
        assert_eq!(f("/q/one.wasm"), Some(PathBuf::from("/q/one.wasm")));
        assert_eq!(f("/q/two.wasm"), None, "only the file given");
        let roots = sources.watch_roots();
        assert!(roots.contains(Path::new("/p")) && roots.contains(Path::new("/q")));
    }
}
