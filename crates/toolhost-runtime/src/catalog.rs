//! The catalog: what is loaded. The plugin files and the version loaded
//! from each, the registry of tools built from them (swapped whole on every
//! reload), the last load report, and the events subscribers receive.
//!
//! Loading and reloading live in `reload.rs` (`Catalog::reload`), watching
//! the directories in `watch.rs`, one file's loading in `plugin.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::plugin::{Loader, Plugin};
use crate::registry::Registry;
use crate::reload::{Files, PluginEvent, Sources};
use crate::runtime::LoadReport;
use crate::watch::Watcher;

/// Every loaded plugin and where it came from.
pub(crate) struct Catalog {
    pub(crate) loader: Loader,
    /// Where plugins come from (canonical paths).
    pub(crate) sources: Sources,
    /// Version requirements by plugin name.
    pub(crate) pins: BTreeMap<String, semver::VersionReq>,
    /// How long unused compile cache entries are kept.
    pub(crate) cache_grace: Duration,
    /// The version loaded from each file; held while a batch loads, so loads never interleave.
    pub(crate) files: tokio::sync::Mutex<Files>,
    /// Read on every call; replaced whole by a reload.
    registry: ArcSwap<Registry>,
    report: ArcSwap<LoadReport>,
    events: tokio::sync::broadcast::Sender<PluginEvent>,
    watcher: Mutex<Option<Watcher>>,
}

impl Catalog {
    pub(crate) fn new(
        loader: Loader,
        sources: Sources,
        pins: BTreeMap<String, semver::VersionReq>,
        cache_grace: Duration,
    ) -> Catalog {
        Catalog {
            loader,
            sources,
            pins,
            cache_grace,
            files: tokio::sync::Mutex::new(Files::default()),
            registry: ArcSwap::from_pointee(Registry::default()),
            report: ArcSwap::from_pointee(LoadReport::default()),
            events: tokio::sync::broadcast::channel(256).0,
            watcher: Mutex::new(None),
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

    /// Keeps `watcher` running for as long as the catalog lives.
    pub(crate) fn set_watcher(&self, watcher: Watcher) {
        *self.watcher.lock() = Some(watcher);
    }

    pub(crate) fn is_watching(&self) -> bool {
        self.watcher.lock().is_some()
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
