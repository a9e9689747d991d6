//! The runtime: builder, plugin loading, tool listing and calls.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Engine;

use crate::api::{Linkers, PluginInstance, RawContext, RawOutcome};
use crate::cache::{CompileCache, default_cache_dir};
use crate::engine::{EngineSettings, EpochTicker, build_engine};
use crate::error::{
    ArgumentIssue, CallError, LoadError, RuntimeError, SandboxFault, ToolErrorKind,
};
use crate::grants::PluginSettings;
use crate::limits::Limits;
use crate::permission::{Approver, CallStep, Permissions};
use crate::plugin::{Loader, Plugin};
use crate::registry::{PluginInfo, Registry, ToolInfo};
use crate::reload::{DEFAULT_CACHE_GRACE, DEFAULT_DEBOUNCE, Files, PluginEvent, Sources};
use crate::sandbox::{ProgressSink, Sandbox};
use crate::watch::Watcher;
use toolhost_hooks::{HookChain, HookConfig, HookEntry};
use toolhost_policy::{Policy, PolicyError};

/// Who is calling: ids for logs and plugins, and where progress reports go.
///
/// ```
/// use toolhost_runtime::CallContext;
/// let cx = CallContext::new().call_id("call_1").session_id("s-42");
/// ```
#[derive(Clone, Default)]
pub struct CallContext {
    call_id: Option<String>,
    pub(crate) session_id: Option<String>,
    pub(crate) agent: Option<String>,
    progress: Option<ProgressSink>,
    steps: Option<StepSink>,
}

/// Receives each [`CallStep`] of a call (see [`CallContext::on_step`]).
pub type StepSink = Arc<dyn Fn(&CallStep) + Send + Sync>;

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("call_id", &self.call_id)
            .field("session_id", &self.session_id)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl CallContext {
    /// An empty context; the runtime makes up a call id.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the call id (e.g. the model's tool-call id).
    pub fn call_id(mut self, id: impl Into<String>) -> Self {
        self.call_id = Some(id.into());
        self
    }
    /// Sets the session id.
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }
    /// Sets the agent profile.
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }
    /// Receives the plugin's progress reports: `(tool, message, fraction)`.
    pub fn on_progress(
        mut self,
        sink: impl Fn(&str, &str, Option<f32>) + Send + Sync + 'static,
    ) -> Self {
        self.progress = Some(Arc::new(sink));
        self
    }
    /// Receives every step of the permission layer and the hooks on this
    /// call (the policy's decision, each hook's decision and time, approvals),
    /// for events and history.
    pub fn on_step(mut self, sink: impl Fn(&CallStep) + Send + Sync + 'static) -> Self {
        self.steps = Some(Arc::new(sink));
        self
    }
    /// Reports a step; `step` is only built when someone listens.
    pub(crate) fn step(&self, step: impl FnOnce() -> CallStep) {
        if let Some(sink) = &self.steps {
            sink(&step());
        }
    }
}

/// The result of a successful call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    /// Concise text for the model.
    pub output: String,
    /// Structured data for user interfaces and logs (never for the model).
    pub details: Option<Value>,
    /// The structured result (MCP's `structuredContent`), from plugins built
    /// against `toolhost:plugin@0.2.0` or later; it matches the tool's output
    /// schema ([`ToolInfo::output_schema`]) when the tool declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The tool's exposed name.
    pub tool: String,
    /// The plugin that ran it.
    pub plugin: String,
    /// That plugin's version.
    pub plugin_version: semver::Version,
    /// Wall-clock time of the call, including setting up the sandbox.
    #[serde(with = "duration_micros")]
    pub duration: Duration,
}

mod duration_micros {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_micros() as u64)
    }
}

/// One plugin file that did not load, and why.
#[derive(Debug, Clone)]
pub struct LoadFailure {
    /// The component file.
    pub path: PathBuf,
    /// Why it did not load.
    pub error: LoadError,
}

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
    max_queued_calls: usize,
    pins: BTreeMap<String, semver::VersionReq>,
    watch: bool,
    debounce: Duration,
    cache_grace: Duration,
    policy: Policy,
    approver: Option<Arc<dyn Approver>>,
    allow_asks_without_approver: bool,
    hooks: Vec<HookEntry>,
    hook_configs: Vec<HookConfig>,
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
            max_queued_calls: 1024,
            pins: BTreeMap::new(),
            watch: false,
            debounce: DEFAULT_DEBOUNCE,
            cache_grace: DEFAULT_CACHE_GRACE,
            policy: Policy::allow_all(),
            approver: None,
            allow_asks_without_approver: false,
            hooks: Vec::new(),
            hook_configs: Vec::new(),
        }
    }
}

impl RuntimeBuilder {
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
    /// How many calls may wait for a free sandbox before `call` answers [`CallError::Busy`].
    pub fn max_queued_calls(mut self, n: usize) -> Self {
        self.max_queued_calls = n;
        self
    }

    /// Uses only versions of plugin `name` that meet `requirement` (e.g.
    /// `^1.2`); by default the highest version found wins. The choice and the
    /// reason show in [`PluginInfo::selection`].
    pub fn require_version(
        mut self,
        name: impl Into<String>,
        requirement: semver::VersionReq,
    ) -> Self {
        self.pins.insert(name.into(), requirement);
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

    /// Creates the engine and loads every plugin, in parallel. A plugin that
    /// fails to load is reported in [`Runtime::load_report`]; only host-level
    /// problems (engine, unreadable plugin directory) are errors here.
    pub async fn build(self) -> Result<Runtime, RuntimeError> {
        let engine = build_engine(&self.engine)?;
        let linkers = Linkers::new(&engine).map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;
        let ticker = EpochTicker::start(&engine)?;
        let cache = Arc::new(CompileCache::new(&engine, self.cache_dir.clone()));
        let loader = Loader {
            engine: engine.clone(),
            linkers: Arc::new(linkers),
            cache,
            default_limits: self.limits.clone(),
            settings: Arc::new(self.settings.clone()),
            max_wasm_stack: self.engine.max_wasm_stack,
        };
        let sources = Sources::resolve(&self.paths)?;
        let mut hooks = HookChain::new(self.hooks);
        let mut hook_error = None;
        let permissions =
            Permissions::new(self.policy, self.approver, self.allow_asks_without_approver);
        let inner = Arc::new_cyclic(|weak: &std::sync::Weak<Inner>| {
            let from_config = HookChain::from_config(&self.hook_configs, |name| {
                Some(crate::hook_plugin::PluginHook::shared(weak.clone(), name))
            });
            match from_config {
                Ok(chain) => {
                    for entry in chain.entries() {
                        hooks.push(entry.clone());
                    }
                }
                Err(e) => hook_error = Some(e),
            }
            Inner {
                slots: Arc::new(Semaphore::new(self.engine.pool_size as usize)),
                queued: AtomicUsize::new(0),
                max_queued: self.max_queued_calls,
                registry: RwLock::new(Arc::new(Registry::default())),
                report: RwLock::new(LoadReport::default()),
                calls: AtomicU64::new(0),
                engine,
                loader,
                sources,
                pins: self.pins,
                cache_grace: self.cache_grace,
                files: tokio::sync::Mutex::new(Files::default()),
                events: tokio::sync::broadcast::channel(256).0,
                watcher: std::sync::Mutex::new(None),
                permissions,
                hooks: std::mem::take(&mut hooks),
                _ticker: ticker,
            }
        });
        if let Some(e) = hook_error {
            return Err(RuntimeError::Hooks(e.to_string()));
        }
        let runtime = Runtime { inner };
        let files = runtime.inner.sources.list().into_iter().collect();
        runtime.reload_files(files).await;
        if self.watch {
            let watcher = crate::watch::start(
                Arc::downgrade(&runtime.inner),
                runtime.inner.sources.clone(),
                self.debounce,
            )?;
            match runtime.inner.watcher.lock() {
                Ok(mut w) => *w = Some(watcher),
                Err(poisoned) => *poisoned.into_inner() = Some(watcher),
            }
        }
        Ok(runtime)
    }
}

pub(crate) struct Inner {
    engine: Engine,
    pub(crate) loader: Loader,
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
    max_queued: usize,
    registry: RwLock<Arc<Registry>>,
    report: RwLock<LoadReport>,
    calls: AtomicU64,
    /// Where plugins come from (canonical paths).
    pub(crate) sources: Sources,
    /// Version requirements by plugin name.
    pub(crate) pins: BTreeMap<String, semver::VersionReq>,
    pub(crate) cache_grace: Duration,
    /// The version loaded from each file; held while a batch loads, so loads never interleave.
    pub(crate) files: tokio::sync::Mutex<Files>,
    pub(crate) events: tokio::sync::broadcast::Sender<PluginEvent>,
    watcher: std::sync::Mutex<Option<Watcher>>,
    pub(crate) permissions: Permissions,
    pub(crate) hooks: HookChain,
    _ticker: EpochTicker,
}

/// Loads sandboxed tool plugins and runs calls into them. Cheap to clone;
/// `Send + Sync`, so one runtime serves calls from many tasks at once.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("tools", &self.registry().tools.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Starts building a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn registry(&self) -> Arc<Registry> {
        match self.inner.registry.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub(crate) fn from_inner(inner: Arc<Inner>) -> Runtime {
        Runtime { inner }
    }

    /// Puts `registry` in place for every call from now on; returns the old one.
    pub(crate) fn swap_registry(&self, registry: Arc<Registry>) -> Arc<Registry> {
        match self.inner.registry.write() {
            Ok(mut r) => std::mem::replace(&mut *r, registry),
            Err(poisoned) => std::mem::replace(&mut *poisoned.into_inner(), registry),
        }
    }

    pub(crate) fn set_report(&self, report: LoadReport) {
        match self.inner.report.write() {
            Ok(mut r) => *r = report,
            Err(poisoned) => *poisoned.into_inner() = report,
        }
    }

    /// Events about plugins being loaded, reloaded, unloaded or failing to
    /// load, from now on (a receiver that falls more than 256 events behind
    /// skips the oldest).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PluginEvent> {
        self.inner.events.subscribe()
    }

    /// Whether the plugin directories are being watched.
    pub fn is_watching(&self) -> bool {
        match self.inner.watcher.lock() {
            Ok(w) => w.is_some(),
            Err(poisoned) => poisoned.into_inner().is_some(),
        }
    }

    /// What happened at the last load: failures, warnings, compile counts.
    pub fn load_report(&self) -> LoadReport {
        match self.inner.report.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Every tool the model can call, sorted by name.
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.registry().tool_infos()
    }

    /// Every loaded plugin, with requested and granted capabilities.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.registry().plugin_infos()
    }

    /// Calls `tool` with arguments given as JSON text (as a model sends them).
    /// Text that is not valid JSON is an [`CallError::InvalidArguments`] naming
    /// the line and column.
    pub async fn call_json(
        &self,
        tool: &str,
        args: &str,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        let args: Value = serde_json::from_str(args).map_err(|e| CallError::InvalidArguments {
            tool: tool.to_owned(),
            issues: vec![ArgumentIssue {
                path: String::new(),
                message: format!("arguments are not valid JSON: {e}"),
            }],
        })?;
        self.call(tool, args, cx).await
    }

    /// Calls `tool` with `args`: looks it up, validates the arguments against
    /// its schema (every error, with its JSON pointer), runs it in a fresh
    /// sandbox under its limits, and checks what it returned.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        let (plugin, index) = self.resolve(tool)?;
        let call_id = self.call_id(&cx);
        let admitted = self
            .admit(&plugin, index, tool, args, &cx, &call_id)
            .await?;
        let result = self
            .execute(&plugin, index, tool, &admitted.args_text, &cx, &call_id)
            .await;
        self.conclude(
            (&plugin, index),
            tool,
            &admitted.args,
            result,
            &cx,
            &call_id,
        )
        .await
    }

    /// Runs a call that was admitted, in a fresh sandbox.
    async fn execute(
        &self,
        plugin: &Arc<Plugin>,
        index: usize,
        tool: &str,
        args: &str,
        cx: &CallContext,
        call_id: &str,
    ) -> Result<ToolResult, CallError> {
        let _slot = self.acquire_slot(plugin).await?;
        let mut sandbox = Sandbox::new(&self.inner.engine, &plugin.sandbox).map_err(|message| {
            CallError::Host {
                tool: tool.to_owned(),
                message,
            }
        })?;
        let call = Call {
            plugin,
            index,
            tool,
            args,
            cx,
            call_id: call_id.to_owned(),
        };
        call.run(&mut sandbox, None, self.inner.loader.max_wasm_stack)
            .await
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.permissions.policy()
    }

    /// Replaces the policy for every call from now on (e.g. after the policy
    /// file changed). The model has no way to call this.
    pub fn set_policy(&self, policy: Policy) {
        self.inner.permissions.set_policy(policy);
    }

    /// Switches the tools matching `glob` off for one session: they are
    /// denied, and hidden from the model, until switched on again.
    pub fn disable_tools(&self, session: &str, glob: &str) -> Result<(), PolicyError> {
        self.inner.permissions.toggle(session, |t| t.disable(glob))
    }

    /// Switches the tools matching `glob` back on for one session.
    pub fn enable_tools(&self, session: &str, glob: &str) -> Result<(), PolicyError> {
        self.inner.permissions.toggle(session, |t| t.enable(glob))
    }

    /// The tools the model may see for `agent` in `session`: every tool
    /// except those the policy denies outright or the session switched off.
    pub fn visible_tools(&self, agent: Option<&str>, session: Option<&str>) -> Vec<ToolInfo> {
        let policy = self.inner.permissions.policy();
        let mut tools = self.tools();
        self.inner.permissions.with_session(session, |toggles| {
            tools.retain(|t| policy.visible(&t.name, Some(&t.plugin), agent, toggles));
        });
        tools
    }

    /// An instance of `plugin` kept for many calls: no instantiation per call,
    /// but state (memory, globals) carries over from one call to the next. For
    /// plugins that opt into it, and to measure what a fresh instance costs.
    /// It holds one sandbox slot until dropped.
    pub async fn reused_instance(&self, plugin: &str) -> Result<ReusedInstance, CallError> {
        let registry = self.registry();
        let Some(p) = registry.plugins.iter().find(|p| p.name == plugin).cloned() else {
            return Err(CallError::NotFound {
                name: plugin.to_owned(),
                suggestions: crate::registry::suggest(
                    plugin,
                    registry.plugins.iter().map(|p| p.name.as_str()),
                ),
                available: registry.plugins.iter().map(|p| p.name.clone()).collect(),
            });
        };
        let slot = self.acquire_slot(&p).await?;
        Ok(ReusedInstance {
            runtime: self.clone(),
            plugin: p,
            instance: None,
            _slot: slot,
        })
    }

    fn call_id(&self, cx: &CallContext) -> String {
        match &cx.call_id {
            Some(id) => id.clone(),
            None => format!(
                "call-{}",
                self.inner.calls.fetch_add(1, Ordering::Relaxed) + 1
            ),
        }
    }

    fn resolve(&self, tool: &str) -> Result<(Arc<Plugin>, usize), CallError> {
        let registry = self.registry();
        match registry.tools.get(tool) {
            Some((plugin, index)) => Ok((plugin.clone(), *index)),
            None => Err(CallError::NotFound {
                name: tool.to_owned(),
                suggestions: registry.suggest(tool),
                available: registry.tools.keys().cloned().collect(),
            }),
        }
    }

    /// Waits until `plugin` may start another sandbox (`max-instances`) and
    /// a slot of the instance pool is free, or answers `Busy` when too many
    /// calls wait already.
    pub(crate) async fn acquire_slot(&self, plugin: &Plugin) -> Result<Slot, CallError> {
        let instance = self.wait_for(&plugin.instances, Some(plugin)).await?;
        let pool = self.wait_for(&self.inner.slots, None).await?;
        Ok(Slot {
            _instance: instance,
            _pool: pool,
        })
    }

    /// Takes a permit of `semaphore`, waiting in the shared queue; `plugin`
    /// names the per-plugin limit when that is the one that is full.
    async fn wait_for(
        &self,
        semaphore: &Arc<Semaphore>,
        plugin: Option<&Plugin>,
    ) -> Result<OwnedSemaphorePermit, CallError> {
        if let Ok(p) = semaphore.clone().try_acquire_owned() {
            return Ok(p);
        }
        let busy = |waiting| CallError::Busy {
            waiting,
            max_queued: self.inner.max_queued,
            instance_limit: plugin.map(|p| (p.id(), p.sandbox.limits.max_instances)),
        };
        let waiting = self.inner.queued.fetch_add(1, Ordering::AcqRel);
        struct Dequeue<'a>(&'a AtomicUsize);
        impl Drop for Dequeue<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _dequeue = Dequeue(&self.inner.queued);
        if waiting >= self.inner.max_queued {
            return Err(busy(waiting));
        }
        semaphore
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| busy(waiting))
    }
}

/// Checks the arguments' size and validates them against the tool's schema;
/// returns them as JSON text for the plugin.
pub(crate) fn check_args(
    plugin: &Plugin,
    index: usize,
    tool: &str,
    args: &Value,
) -> Result<String, CallError> {
    let limits = &plugin.sandbox.limits;
    let invalid = |issues| CallError::InvalidArguments {
        tool: tool.to_owned(),
        issues,
    };
    let text = args.to_string();
    if text.len() > limits.max_args_bytes {
        return Err(invalid(vec![ArgumentIssue {
            path: String::new(),
            message: format!(
                "arguments are {} bytes, over the limit of {} bytes (`max-args-bytes`)",
                text.len(),
                limits.max_args_bytes
            ),
        }]));
    }
    let validator = &plugin.tools[index].validator;
    if validator.is_valid(args) {
        return Ok(text);
    }
    let issues: Vec<ArgumentIssue> = validator
        .iter_errors(args)
        .map(|e| ArgumentIssue {
            path: e.instance_path().to_string(),
            message: e.to_string(),
        })
        .collect();
    Err(invalid(issues))
}

/// One validated call, ready to run in a sandbox.
struct Call<'a> {
    plugin: &'a Arc<Plugin>,
    index: usize,
    tool: &'a str,
    args: &'a str,
    cx: &'a CallContext,
    call_id: String,
}

impl Call<'_> {
    /// Runs the call in `sandbox`, on `instance` when one is given (a reused
    /// instance) or on a fresh instance otherwise.
    async fn run(
        &self,
        sandbox: &mut Sandbox,
        instance: Option<&PluginInstance>,
        max_wasm_stack: usize,
    ) -> Result<ToolResult, CallError> {
        let plugin = self.plugin;
        let spec = &plugin.tools[self.index];
        let limits = &plugin.sandbox.limits;
        let started = sandbox.begin(self.tool, self.cx.progress.clone());
        let raw_cx = RawContext {
            call_id: &self.call_id,
            session_id: self.cx.session_id.as_deref(),
            agent: self.cx.agent.as_deref(),
        };
        // Boxed: wasmtime's call futures are large, and an unboxed future is
        // copied each time a caller moves it (measurable at a few µs per call).
        let outcome = Box::pin(Sandbox::run(limits.timeout, async {
            let fresh;
            let instance = match instance {
                Some(i) => i,
                None => {
                    fresh = plugin.pre.instantiate(&mut sandbox.store).await?;
                    &fresh
                }
            };
            instance
                .execute(&mut sandbox.store, raw_cx, &spec.name, self.args)
                .await
        }))
        .await;
        let duration = started.elapsed();
        let fault = |fault: SandboxFault| CallError::Sandbox {
            tool: self.tool.to_owned(),
            plugin: plugin.id(),
            fault,
        };
        let outcome = match outcome {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => {
                let f = sandbox.classify(&e, max_wasm_stack);
                sandbox.flush_logs();
                return Err(fault(f));
            }
            Err(timeout) => {
                sandbox.flush_logs();
                return Err(fault(timeout));
            }
        };
        sandbox.flush_logs();
        tracing::debug!(tool = self.tool, plugin = %plugin.id(), call_id = %self.call_id, us = duration.as_micros() as u64, "call finished");
        let tool = self.tool.to_owned();
        match outcome {
            RawOutcome::Ok {
                output,
                details,
                structured,
            } => {
                let max = limits.max_output_bytes;
                if output.len() > max {
                    return Err(fault(SandboxFault::OutputTooLarge {
                        what: "output",
                        size: output.len(),
                        limit: max,
                    }));
                }
                let details = match details {
                    None => None,
                    Some(d) if d.len() > max => {
                        return Err(fault(SandboxFault::OutputTooLarge {
                            what: "details",
                            size: d.len(),
                            limit: max,
                        }));
                    }
                    Some(d) => Some(serde_json::from_str(&d).map_err(|e| {
                        fault(SandboxFault::InvalidDetails {
                            message: e.to_string(),
                        })
                    })?),
                };
                let structured = spec.check_structured(structured, max).map_err(fault)?;
                Ok(ToolResult {
                    output,
                    details,
                    structured,
                    tool,
                    plugin: plugin.name.clone(),
                    plugin_version: plugin.version.clone(),
                    duration,
                })
            }
            RawOutcome::InvalidArguments(message) => Err(CallError::Tool {
                tool,
                kind: ToolErrorKind::InvalidArguments,
                message,
            }),
            RawOutcome::Failed(message) => Err(CallError::Tool {
                tool,
                kind: ToolErrorKind::Failed,
                message,
            }),
        }
    }
}

/// A sandbox slot: a permit of the plugin's `max-instances` and one of the
/// instance pool, both returned when dropped.
pub(crate) struct Slot {
    _instance: OwnedSemaphorePermit,
    _pool: OwnedSemaphorePermit,
}

/// A plugin instance kept across calls; see [`Runtime::reused_instance`].
/// After a fault the instance is discarded and the next call gets a new one.
pub struct ReusedInstance {
    runtime: Runtime,
    plugin: Arc<Plugin>,
    instance: Option<(Sandbox, PluginInstance)>,
    _slot: Slot,
}

impl ReusedInstance {
    /// Calls one of this plugin's tools (by its exposed name) on the kept
    /// instance, through the same permission checks and hooks as every call.
    pub async fn call(
        &mut self,
        tool: &str,
        args: Value,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        let (plugin, index) = self.runtime.resolve(tool)?;
        if !Arc::ptr_eq(&plugin, &self.plugin) {
            return Err(CallError::NotFound {
                name: tool.to_owned(),
                suggestions: Vec::new(),
                available: self.plugin.tools.iter().map(|t| t.name.clone()).collect(),
            });
        }
        let call_id = self.runtime.call_id(&cx);
        let runtime = self.runtime.clone();
        let admitted = runtime
            .admit(&plugin, index, tool, args, &cx, &call_id)
            .await?;
        let result = self
            .execute(
                &plugin,
                index,
                tool,
                &admitted.args_text,
                &cx,
                call_id.clone(),
            )
            .await;
        runtime
            .conclude(
                (&plugin, index),
                tool,
                &admitted.args,
                result,
                &cx,
                &call_id,
            )
            .await
    }

    async fn execute(
        &mut self,
        plugin: &Arc<Plugin>,
        index: usize,
        tool: &str,
        args: &str,
        cx: &CallContext,
        call_id: String,
    ) -> Result<ToolResult, CallError> {
        let host_err = |message: String| CallError::Host {
            tool: tool.to_owned(),
            message,
        };
        let (mut sandbox, instance) = match self.instance.take() {
            Some(kept) => kept,
            None => {
                let mut sandbox =
                    Sandbox::new(&self.runtime.inner.engine, &plugin.sandbox).map_err(host_err)?;
                sandbox.begin(tool, None);
                let instance = Sandbox::run(
                    plugin.sandbox.limits.timeout,
                    plugin.pre.instantiate(&mut sandbox.store),
                )
                .await
                .map_err(|f| host_err(f.to_string()))?
                .map_err(|e| host_err(format!("{e:#}")))?;
                (sandbox, instance)
            }
        };
        let call = Call {
            plugin,
            index,
            tool,
            args,
            cx,
            call_id,
        };
        let result = call
            .run(
                &mut sandbox,
                Some(&instance),
                self.runtime.inner.loader.max_wasm_stack,
            )
            .await;
        if !matches!(result, Err(CallError::Sandbox { .. })) {
            self.instance = Some((sandbox, instance));
        }
        result
    }
}
