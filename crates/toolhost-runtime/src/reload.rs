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
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::catalog::{Catalog, Files, Fingerprint, LoadFailure, LoadReport, PluginEvent};
use crate::error::LoadError;
use crate::lockfile::GrantState;
use crate::plugin::Plugin;
use crate::registry::Registry;

impl Catalog {
    /// Rebuilds the plugin of every tool source in `names` (or of all,
    /// when `None`) from the tools it lists now, then the registry.
    pub(crate) async fn refresh_sources(&self, names: Option<&[String]>) -> Vec<PluginEvent> {
        self.build_source_plugins(names).await;
        self.reload(BTreeSet::new()).await
    }

    /// Rebuilds the plugin of every tool source in `names` (or of all).
    pub(crate) async fn build_source_plugins(&self, names: Option<&[String]>) {
        let mut state = self.files.lock().await;
        for source in &self.sources_in_use {
            if names.is_some_and(|n| !n.iter().any(|n| n == source.name())) {
                continue;
            }
            let (plugin, warnings) = crate::source_plugin::source_plugin(
                source,
                &self.loader.default_limits,
                self.loader.settings.get(source.name()),
            );
            state
                .from_sources
                .insert(source.name().to_owned(), (Arc::new(plugin), warnings));
        }
    }

    /// See `Runtime::rescan`.
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

    /// What the watcher calls: [`Catalog::reload`] of those of `files` whose
    /// component or manifest holds other bytes than when it was last loaded
    /// (or that are gone), and nothing at all — no load, no new registry —
    /// when none does.
    pub(crate) async fn reload_changed(&self, files: BTreeSet<PathBuf>) -> Vec<PluginEvent> {
        let mut changed = BTreeSet::new();
        for path in files {
            let now = Fingerprint::of(&path).await;
            let state = self.files.lock().await;
            let known = state.seen.get(&path);
            let same = match &now {
                Some(now) => known == Some(now),
                // Gone: a change only if something was loaded or failed from it.
                None => !state.loaded.contains_key(&path) && !state.failed.contains_key(&path),
            };
            if same {
                tracing::debug!(path = %path.display(), "a plugin file's contents are unchanged");
            } else {
                changed.insert(path);
            }
        }
        if changed.is_empty() {
            return Vec::new();
        }
        self.reload(changed).await
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
                state.seen.remove(&path);
                continue;
            }
            pending.insert(path.clone());
            let loader = self.loader.clone();
            set.spawn(async move {
                // Read before the load: a write in between is seen as a
                // change by the next event, never missed.
                let fingerprint = Fingerprint::of(&path).await;
                let result = loader.load(&path).await;
                (path, result, fingerprint)
            });
        }
        while let Some(joined) = set.join_next().await {
            let (path, result, fingerprint) = match joined {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!("a plugin load task failed: {e}");
                    continue;
                }
            };
            pending.remove(&path);
            match fingerprint {
                Some(f) => state.seen.insert(path.clone(), f),
                None => state.seen.remove(&path),
            };
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
            let error = LoadError::Task("it ended unexpectedly".into());
            record(&mut state, path, Err(error), &mut events);
        }

        let swap_started = Instant::now();
        // A plain tool name stays with the plugin that held it.
        let names = crate::registry::Holders {
            owners: self.tool_owners.lock().clone(),
            renamed: self.registry().renamed(),
        };
        let from_sources = state.from_sources.values();
        let (registry, mut warnings) = Registry::build(
            state
                .loaded
                .values()
                .cloned()
                .chain(from_sources.clone().map(|(p, _)| p.clone())),
            &self.pins,
            &names,
        );
        warnings.extend(from_sources.flat_map(|(_, w)| w.iter().cloned()));
        self.remember_owners(&registry);
        // A chosen plugin loaded with grants for the first time (or rebuilt,
        // in dev mode): the lock file now binds them to its digest.
        for p in &registry.plugins {
            if p.grants == GrantState::FirstUse
                && let Err(e) = self.loader.lock.record(&p.name, &p.digest)
            {
                warnings.push(format!("{}: {e}", p.id()));
            }
        }
        let registry = Arc::new(registry);
        let old = self.swap_registry(registry.clone());
        let swap = swap_started.elapsed();
        for w in &warnings {
            tracing::warn!(target: crate::catalog::LOAD_PROBLEMS_TARGET, "{w}");
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
                PluginEvent::Failed { .. } => {
                    tracing::warn!(target: crate::catalog::LOAD_PROBLEMS_TARGET, "{event}");
                }
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
/// (unless it is the same code, manifest and descriptions); a failure keeps the old one and
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
                old.content_key == plugin.content_key
                    && old.manifest == plugin.manifest
                    // A plain component's WIT beside it changes only these.
                    && old
                        .tools
                        .iter()
                        .map(|t| &t.description)
                        .eq(plugin.tools.iter().map(|t| &t.description))
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
