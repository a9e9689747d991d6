//! Building a [`Runtime`]: the engine and its pool, the catalog of
//! plugins (loaded in parallel before `build` returns), the gate (policy,
//! hooks, approver), and the watcher.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use toolhost_hooks::{HookChain, HookConfig, HookEntry};
use toolhost_policy::Policy;

use crate::api::Linkers;
use crate::catalog::Catalog;
use crate::catalog::{DEFAULT_CACHE_GRACE, Sources};
use crate::compile_cache::{CacheKey, CompileCache, default_cache_dir};
use crate::engine::{EngineSettings, EpochTicker, build_engine};
use crate::error::RuntimeError;
use crate::gate::Gate;
use crate::grants::PluginSettings;
use crate::hook_plugin::PluginHook;
use crate::limits::Limits;
use crate::lockfile::{Lock, LockError};
use crate::parts::Parts;
use crate::permission::Approver;
use crate::plugin::Loader;
use crate::pool::Pool;
use crate::result_cache::{CacheOptions, ResultCache};
use crate::runtime::Runtime;
use crate::source::ToolSource;
use crate::watch::DEFAULT_DEBOUNCE;

impl Runtime {
    /// Starts building a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }
}

/// Builds a [`Runtime`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use toolhost_runtime::{CallContext, Runtime};
///
/// let runtime = Runtime::builder().plugin_dir("target/plugins").build().await?;
/// for f in &runtime.load_report().failures {
///     eprintln!("{}: {}", f.path.display(), f.error);
/// }
/// let result = runtime
///     .call("calculate", serde_json::json!({"expression": "2*(3+4)"}), CallContext::new())
///     .await?;
/// assert_eq!(result.output, "14");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RuntimeBuilder {
    paths: Vec<PathBuf>,
    limits: Limits,
    engine: EngineSettings,
    settings: BTreeMap<String, PluginSettings>,
    cache_dir: Option<PathBuf>,
    cache_key: Option<CacheKey>,
    max_queued_calls: usize,
    pins: BTreeMap<String, semver::VersionReq>,
    tool_owners: BTreeMap<String, String>,
    watch: bool,
    debounce: Duration,
    cache_grace: Duration,
    policy: Policy,
    approver: Option<Arc<dyn Approver>>,
    allow_asks_without_approver: bool,
    approvals_file: Option<PathBuf>,
    approvals_store: Option<std::sync::Arc<dyn toolhost_policy::approvals::Store>>,
    approvals_last: Option<std::time::Duration>,
    approvals_per_caller: Option<usize>,
    hooks: Vec<HookEntry>,
    hook_configs: Vec<HookConfig>,
    tool_sources: Vec<Arc<dyn ToolSource>>,
    lock_file: Option<PathBuf>,
    accept_new_digests: bool,
    locked: bool,
    result_cache: CacheOptions,
    ready_instances: bool,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("paths", &self.paths)
            .field("cache_dir", &self.cache_dir)
            .field("watch", &self.watch)
            .field("hooks", &(self.hooks.len() + self.hook_configs.len()))
            .finish_non_exhaustive()
    }
}

impl Default for RuntimeBuilder {
    fn default() -> Self {
        RuntimeBuilder {
            paths: Vec::new(),
            limits: Limits::default(),
            engine: EngineSettings::default(),
            settings: BTreeMap::new(),
            cache_dir: default_cache_dir(),
            cache_key: None,
            max_queued_calls: 1024,
            pins: BTreeMap::new(),
            tool_owners: BTreeMap::new(),
            watch: false,
            debounce: DEFAULT_DEBOUNCE,
            cache_grace: DEFAULT_CACHE_GRACE,
            policy: Policy::allow_all(),
            approver: None,
            allow_asks_without_approver: false,
            approvals_file: None,
            approvals_store: None,
            approvals_last: None,
            approvals_per_caller: None,
            hooks: Vec::new(),
            hook_configs: Vec::new(),
            tool_sources: Vec::new(),
            ready_instances: true,
            lock_file: None,
            accept_new_digests: false,
            locked: false,
            result_cache: CacheOptions::default(),
        }
    }
}

impl RuntimeBuilder {
    /// Adds a tool source (an MCP server from `toolhost-mcp`, or your own):
    /// its tools are listed beside the plugins' as `PREFIX` + their names,
    /// and calls to them go through the same policy, hooks, approvals and
    /// limits (`timeout-ms`, `max-instances`, `max-output-bytes`, set per
    /// source with [`plugin_settings`](Self::plugin_settings) under its
    /// name). `build` waits for [`ToolSource::ready`]; the registry follows
    /// [`ToolSource::changes`] from then on. See [`ToolSource`] for an example.
    pub fn source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.tool_sources.push(source);
        self
    }

    /// Loads every `*.wasm` in `path` (or `path` itself if it is a file).
    pub fn plugin_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.paths.push(path.into());
        self
    }
    /// Default limits of every call (a plugin's manifest and settings override them).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
    /// Grants, limits and config for the plugin called `name`.
    pub fn plugin_settings(mut self, name: impl Into<String>, settings: PluginSettings) -> Self {
        self.settings.insert(name.into(), settings);
        self
    }
    /// Where compiled components are cached (`None`: no cache). Defaults to the
    /// user's cache directory.
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }
    /// Engine-wide settings (pool size, largest memory, stack).
    pub fn engine_settings(mut self, settings: EngineSettings) -> Self {
        self.engine = settings;
        self
    }
    /// How many calls may wait for a free sandbox before `call` answers [`CallError::Busy`](crate::CallError::Busy).
    pub fn max_queued_calls(mut self, n: usize) -> Self {
        self.max_queued_calls = n;
        self
    }

    /// Uses only versions of plugin `name` that meet `requirement` (e.g.
    /// `^1.2`); by default the highest version found wins. The choice and the
    /// reason show in [`PluginInfo::selection`](crate::PluginInfo::selection).
    pub fn require_version(
        mut self,
        name: impl Into<String>,
        requirement: semver::VersionReq,
    ) -> Self {
        self.pins.insert(name.into(), requirement);
        self
    }

    /// Gives the plain name `tool` to plugin `plugin` when several plugins
    /// declare it. Without this, a name declared by two plugins at start-up
    /// goes to neither (both are exposed as `plugin__tool`), and a name
    /// already held stays with its holder when another plugin appears.
    ///
    /// ```
    /// let builder = toolhost_runtime::Runtime::builder().tool_owner("read_file", "fs");
    /// # let _ = builder;
    /// ```
    pub fn tool_owner(mut self, tool: impl Into<String>, plugin: impl Into<String>) -> Self {
        self.tool_owners.insert(tool.into(), plugin.into());
        self
    }

    /// Watches the plugin directories and reloads plugins whose files change
    /// (off by default). See [`Runtime::subscribe`] for the events.
    pub fn watch(mut self, watch: bool) -> Self {
        self.watch = watch;
        self
    }
    /// How long a changed file must be quiet before it is reloaded (75 ms by default).
    pub fn watch_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }

    /// Seals compile cache entries with the deployment's secret, so that
    /// replicas (or users) can share a cache directory that someone else
    /// could write: an entry not sealed with `key` is never loaded. Without
    /// a key, an entry is loaded only when it and its directory belong to
    /// this process's user and nobody else may write them (Linux).
    ///
    /// ```
    /// use toolhost_runtime::{cache::CacheKey, Runtime};
    /// let key = CacheKey::new(b"0123456789abcdef0123456789abcdef".to_vec()).unwrap();
    /// let builder = Runtime::builder().cache_key(Some(key));
    /// ```
    pub fn cache_key(mut self, key: Option<CacheKey>) -> Self {
        self.cache_key = key;
        self
    }

    /// How long a compile cache entry that no plugin file needs any more is
    /// kept after its last use (a day by default), so switching back to a
    /// recent build does not compile again.
    pub fn cache_grace(mut self, grace: Duration) -> Self {
        self.cache_grace = grace;
        self
    }
    /// The permission policy (allow everything by default). See `toolhost-policy`.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// Who answers when the policy or a hook asks about a call, or a result
    /// needs approval. Without one, those calls are denied (and those results
    /// rejected) unless [`allow_asks_without_approver`](Self::allow_asks_without_approver).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }
    /// With no approver, allow what would be asked (for trusted
    /// non-interactive runs); deny is the default.
    pub fn allow_asks_without_approver(mut self, allow: bool) -> Self {
        self.allow_asks_without_approver = allow;
        self
    }
    /// Where "allow always" answers are saved (`toolhost_policy::approvals`:
    /// narrow, bound to the plugin's digest, the call's profile and caller,
    /// revocable, shared with every process that opens the same file).
    /// Without a file they last as long as the runtime.
    pub fn approvals_file(mut self, path: Option<PathBuf>) -> Self {
        self.approvals_file = path;
        self
    }
    /// Keep saved approvals in `store` instead of a file: a database that
    /// replicas of one gate share (`toolhost-state`'s PostgreSQL store), so
    /// an approval saved or revoked on one holds on all of them. It wins
    /// over [`approvals_file`](Self::approvals_file).
    pub fn approvals_store(
        mut self,
        store: std::sync::Arc<dyn toolhost_policy::approvals::Store>,
    ) -> Self {
        self.approvals_store = Some(store);
        self
    }
    /// How long a saved approval lasts at most (none: until revoked). An
    /// approval given with an earlier expiry keeps it.
    pub fn approvals_last(mut self, bound: Option<std::time::Duration>) -> Self {
        self.approvals_last = bound;
        self
    }
    /// How many saved approvals one caller may hold (the user at the host,
    /// one client, or every caller for the operator's):
    /// `toolhost_policy::approvals::DEFAULT_PER_CALLER` unless set. Past
    /// it, an "allow always" runs the call once and saves nothing.
    pub fn approvals_per_caller(mut self, max: usize) -> Self {
        self.approvals_per_caller = Some(max);
        self
    }
    /// Adds a hook (a Rust [`Hook`](toolhost_hooks::Hook) in a
    /// [`HookEntry`] with its matcher, timeout and failure policy), after the
    /// ones added before.
    pub fn hook(mut self, entry: HookEntry) -> Self {
        self.hooks.push(entry);
        self
    }
    /// Adds hooks from the config file's `[[hooks]]` entries: command hooks,
    /// and hook plugins (`plugin-hook = "NAME"`, a loaded plugin that exports
    /// the `hooks` interface), after the ones added before.
    pub fn hook_configs(mut self, configs: impl IntoIterator<Item = HookConfig>) -> Self {
        self.hook_configs.extend(configs);
        self
    }

    /// Binds grants to code: the lock file recording, for each plugin that
    /// has grants, the content digest they were given to (trust on first
    /// use; created when missing). A plugin whose digest differs loads
    /// without its grants until [`Runtime::trust`] accepts it. Without a
    /// lock file, grants go by plugin name alone.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = toolhost_runtime::Runtime::builder()
    ///     .plugin_dir("plugins")
    ///     .lock_file("toolhost.lock")
    ///     .build()
    ///     .await?;
    /// for p in runtime.plugins() {
    ///     println!("{} {} grants: {}", p.name, p.digest, p.grants);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lock_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.lock_file = Some(path.into());
        self
    }

    /// Development mode: a plugin whose digest changed (a rebuild) keeps its
    /// grants and the lock file records the new digest. Off by default.
    pub fn accept_new_digests(mut self, accept: bool) -> Self {
        self.accept_new_digests = accept;
        self
    }

    /// Production mode (`cargo --locked`'s sense): the lock file must exist
    /// ([`RuntimeBuilder::build`] fails with [`LockError::Missing`], or
    /// [`LockError::NoLockFile`] without [`lock_file`](Self::lock_file)), grants go only to the code it names, and it is never
    /// written — no trust on first use, no [`Runtime::trust`]. For replicas
    /// that ship a lock prepared ahead, read-only. Off by default; it wins
    /// over [`accept_new_digests`](Self::accept_new_digests).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let dir = tempfile::tempdir().unwrap();
    /// let built = toolhost_runtime::Runtime::builder()
    ///     .lock_file(dir.path().join("toolhost.lock"))
    ///     .locked(true)
    ///     .build()
    ///     .await;
    /// assert!(matches!(
    ///     built,
    ///     Err(toolhost_runtime::RuntimeError::Lock(toolhost_runtime::lockfile::LockError::Missing(_)))
    /// ));
    /// # })
    /// ```
    pub fn locked(mut self, locked: bool) -> Self {
        self.locked = locked;
        self
    }

    /// The result cache of read-only, idempotent tools: on by default
    /// (1,000 entries, 32 MiB, 5 minutes); [`CacheOptions::disabled`]
    /// turns it off. Per plugin and per tool, the host's settings
    /// ([`PluginSettings::cache`]) and the manifest opt out or change the
    /// TTL. See [`CacheOptions`].
    ///
    /// ```
    /// use toolhost_runtime::{cache::CacheOptions, Runtime};
    /// let builder = Runtime::builder().result_cache(CacheOptions::disabled());
    /// # let _ = builder;
    /// ```
    pub fn result_cache(mut self, options: CacheOptions) -> Self {
        self.result_cache = options;
        self
    }

    /// Whether plugins whose sandbox is costly to set up (Python, JS, Go:
    /// an interpreter compiled to wasm) get a few instances instantiated
    /// ahead of their calls, and their used sandboxes torn down after the
    /// call has answered, both off the call path (on by default; decided
    /// per plugin from what its sandbox cost at load time). Every call still
    /// runs in an instance nothing ran in before.
    ///
    /// ```
    /// let builder = toolhost_runtime::Runtime::builder().ready_instances(false);
    /// # let _ = builder;
    /// ```
    pub fn ready_instances(mut self, on: bool) -> Self {
        self.ready_instances = on;
        self
    }

    /// Creates the engine and loads every plugin, in parallel. A plugin that
    /// fails to load is reported in [`Runtime::load_report`]; only host-level
    /// problems (engine, unreadable plugin directory) are errors here.
    pub async fn build(self) -> Result<Runtime, RuntimeError> {
        let engine = build_engine(&self.engine)?;
        let linkers = Linkers::new(&engine).map_err(|e| RuntimeError::Engine(e.into()))?;
        let ticker = EpochTicker::start(&engine)?;
        let cache = Arc::new(CompileCache::new(
            &engine,
            self.cache_dir.clone(),
            self.cache_key.clone(),
        ));
        let lock = match &self.lock_file {
            Some(path) if self.locked => Lock::open_locked(path)?,
            Some(path) => Lock::open(path, self.accept_new_digests)?,
            None if self.locked => return Err(LockError::NoLockFile.into()),
            None => Lock::none(),
        };
        let loader = Loader {
            lock: Arc::new(lock),
            engine: engine.clone(),
            linkers: Arc::new(linkers),
            cache,
            default_limits: self.limits.clone(),
            settings: Arc::new(self.settings.clone()),
            max_wasm_stack: self.engine.max_wasm_stack,
            ready_instances: self.ready_instances,
        };
        let mut names = std::collections::BTreeSet::new();
        if let Some(twice) = self.tool_sources.iter().find(|s| !names.insert(s.name())) {
            return Err(RuntimeError::DuplicateSource(twice.name().to_owned()));
        }
        let catalog = Arc::new(Catalog::new(
            loader,
            Sources::resolve(&self.paths)?,
            self.pins,
            self.tool_owners,
            self.cache_grace,
            self.tool_sources,
        ));
        let pool = Pool::new(
            engine,
            self.engine.pool_size,
            self.max_queued_calls,
            self.engine.max_wasm_stack,
            ticker,
        );
        let mut hooks = HookChain::new(self.hooks);
        let mut hook_error = None;
        // Hook plugins are hooks that call back into this runtime (its
        // catalog for the plugin, its pool for a sandbox): they hold it weakly.
        let inner = Arc::new_cyclic(|weak: &Weak<Parts>| {
            let from_config = HookChain::from_config(&self.hook_configs, |name| {
                Some(PluginHook::shared(weak.clone(), name))
            });
            match from_config {
                Ok(chain) => {
                    for entry in chain.entries() {
                        hooks.push(entry.clone());
                    }
                }
                Err(e) => hook_error = Some(e),
            }
            let gate = Gate::new(
                self.policy,
                std::mem::take(&mut hooks),
                self.approver,
                self.allow_asks_without_approver,
                match (self.approvals_store, self.approvals_file) {
                    (Some(store), _) => toolhost_policy::approvals::Approvals::with_store(store),
                    (None, Some(path)) => toolhost_policy::approvals::Approvals::open(path),
                    (None, None) => toolhost_policy::approvals::Approvals::in_memory(),
                }
                .lasting(self.approvals_last)
                .per_caller(
                    self.approvals_per_caller
                        .unwrap_or(toolhost_policy::approvals::DEFAULT_PER_CALLER),
                ),
            );
            Parts::new(
                catalog.clone(),
                gate,
                pool,
                ResultCache::new(self.result_cache.clone()),
                weak.clone(),
            )
        });
        if let Some(e) = hook_error {
            return Err(RuntimeError::Hooks(e));
        }
        futures::future::join_all(catalog.sources_in_use.iter().map(|s| s.ready())).await;
        let subscribed = crate::catalog::subscribe(&catalog);
        catalog.build_source_plugins(None).await;
        let files = catalog.sources.list().into_iter().collect();
        catalog.reload(files).await;
        crate::catalog::follow(&catalog, subscribed);
        if self.watch {
            let watcher = crate::watch::start(
                Arc::downgrade(&catalog),
                catalog.sources.clone(),
                self.debounce,
            )?;
            inner.set_watcher(watcher);
        }
        Ok(Runtime { inner })
    }
}
