//! The runtime: builder, plugin loading, tool listing and calls.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

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
use crate::plugin::{Loader, Plugin};
use crate::registry::{PluginInfo, Registry, ToolInfo};
use crate::sandbox::{ProgressSink, Sandbox};

/// Who is calling: ids for logs and plugins, and where progress reports go.
///
/// ```
/// use toolhost_runtime::CallContext;
/// let cx = CallContext::new().call_id("call_1").session_id("s-42");
/// ```
#[derive(Clone, Default)]
pub struct CallContext {
    call_id: Option<String>,
    session_id: Option<String>,
    agent: Option<String>,
    progress: Option<ProgressSink>,
}

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
}

/// The result of a successful call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    /// Concise text for the model.
    pub output: String,
    /// Structured data for user interfaces and logs (never for the model).
    pub details: Option<Value>,
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
#[derive(Debug, Clone)]
pub struct RuntimeBuilder {
    paths: Vec<PathBuf>,
    limits: Limits,
    engine: EngineSettings,
    settings: BTreeMap<String, PluginSettings>,
    cache_dir: Option<PathBuf>,
    max_queued_calls: usize,
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
        let files = plugin_files(&self.paths)?;
        let inner = Arc::new(Inner {
            slots: Arc::new(Semaphore::new(self.engine.pool_size as usize)),
            queued: AtomicUsize::new(0),
            max_queued: self.max_queued_calls,
            registry: RwLock::new(Arc::new(Registry {
                tools: BTreeMap::new(),
                plugins: Vec::new(),
            })),
            report: RwLock::new(LoadReport::default()),
            calls: AtomicU64::new(0),
            engine,
            loader,
            _ticker: ticker,
        });
        let runtime = Runtime { inner };
        runtime.load(files).await;
        Ok(runtime)
    }
}

/// Every `*.wasm` file in the given directories (sorted), or the files themselves.
fn plugin_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, RuntimeError> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_file() {
            files.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|source| RuntimeError::PluginDir {
            path: path.clone(),
            source,
        })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "wasm") && p.is_file())
            .collect();
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

struct Inner {
    engine: Engine,
    loader: Loader,
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
    max_queued: usize,
    registry: RwLock<Arc<Registry>>,
    report: RwLock<LoadReport>,
    calls: AtomicU64,
    _ticker: EpochTicker,
}

/// Loads sandboxed tool plugins and runs calls into them. Cheap to clone;
/// `Send + Sync`, so one runtime serves calls from many tasks at once.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
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

    fn registry(&self) -> Arc<Registry> {
        match self.inner.registry.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    async fn load(&self, files: Vec<PathBuf>) {
        let started = Instant::now();
        let cache = &self.inner.loader.cache;
        let (compiled0, hits0) = (
            cache.compiled.load(Ordering::Relaxed),
            cache.cache_hits.load(Ordering::Relaxed),
        );
        let mut set = tokio::task::JoinSet::new();
        let all_files = files.clone();
        for (i, path) in files.into_iter().enumerate() {
            let loader = self.inner.loader.clone();
            set.spawn(async move {
                let result = loader.load(&path).await;
                (i, path, result)
            });
        }
        let mut results = Vec::new();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok(r) => results.push(r),
                Err(e) => tracing::error!("a plugin load task failed: {e}"),
            }
        }
        // A load task that panicked still leaves its file in the report.
        for (i, path) in all_files.into_iter().enumerate() {
            if !results.iter().any(|(j, _, _)| *j == i) {
                results.push((
                    i,
                    path,
                    Err(LoadError::Io("the load task failed unexpectedly".into())),
                ));
            }
        }
        results.sort_by_key(|(i, _, _)| *i);
        let mut loaded: Vec<Plugin> = Vec::new();
        let mut failures = Vec::new();
        for (_, path, result) in results {
            match result {
                Ok(p) => {
                    tracing::debug!(plugin = %p.id(), path = %path.display(), tools = p.tools.len(), "loaded plugin");
                    loaded.push(p)
                }
                Err(error) => {
                    tracing::warn!(path = %path.display(), "plugin not loaded: {error}");
                    failures.push(LoadFailure { path, error })
                }
            }
        }
        let (registry, warnings) = Registry::build(loaded);
        for w in &warnings {
            tracing::warn!("{w}");
        }
        let report = LoadReport {
            failures,
            warnings,
            compiled: cache.compiled.load(Ordering::Relaxed) - compiled0,
            cache_hits: cache.cache_hits.load(Ordering::Relaxed) - hits0,
            duration: started.elapsed(),
        };
        tracing::info!(
            plugins = registry.plugins.len(),
            tools = registry.tools.len(),
            failed = report.failures.len(),
            compiled = report.compiled,
            cached = report.cache_hits,
            ms = report.duration.as_millis() as u64,
            "loaded plugins ({} compiled, {} from cache)",
            report.compiled,
            report.cache_hits
        );
        match self.inner.registry.write() {
            Ok(mut r) => *r = Arc::new(registry),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(registry),
        }
        match self.inner.report.write() {
            Ok(mut r) => *r = report,
            Err(poisoned) => *poisoned.into_inner() = report,
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
        let args = check_args(&plugin, index, tool, &args)?;
        let _permit = self.acquire_slot().await?;
        let mut sandbox = Sandbox::new(&self.inner.engine, &plugin.sandbox).map_err(|message| {
            CallError::Host {
                tool: tool.to_owned(),
                message,
            }
        })?;
        let call = Call {
            plugin: &plugin,
            index,
            tool,
            args: &args,
            cx: &cx,
            call_id: self.call_id(&cx),
        };
        call.run(&mut sandbox, None, self.inner.loader.max_wasm_stack)
            .await
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
        let permit = self.acquire_slot().await?;
        Ok(ReusedInstance {
            runtime: self.clone(),
            plugin: p,
            instance: None,
            _permit: permit,
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

    /// Waits for a free sandbox slot, or answers `Busy` when too many calls wait already.
    async fn acquire_slot(&self) -> Result<OwnedSemaphorePermit, CallError> {
        if let Ok(p) = self.inner.slots.clone().try_acquire_owned() {
            return Ok(p);
        }
        let waiting = self.inner.queued.fetch_add(1, Ordering::AcqRel);
        struct Dequeue<'a>(&'a AtomicUsize);
        impl Drop for Dequeue<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _dequeue = Dequeue(&self.inner.queued);
        if waiting >= self.inner.max_queued {
            return Err(CallError::Busy { waiting });
        }
        self.inner
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError::Busy { waiting })
    }
}

/// Checks the arguments' size and validates them against the tool's schema;
/// returns them as JSON text for the plugin.
fn check_args(
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
                "arguments are {} bytes, over the limit of {} bytes",
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
            RawOutcome::Ok { output, details } => {
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
                Ok(ToolResult {
                    output,
                    details,
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

/// A plugin instance kept across calls; see [`Runtime::reused_instance`].
/// After a fault the instance is discarded and the next call gets a new one.
pub struct ReusedInstance {
    runtime: Runtime,
    plugin: Arc<Plugin>,
    instance: Option<(Sandbox, PluginInstance)>,
    _permit: OwnedSemaphorePermit,
}

impl ReusedInstance {
    /// Calls one of this plugin's tools (by its exposed name) on the kept instance.
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
        let args = check_args(&plugin, index, tool, &args)?;
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
            plugin: &plugin,
            index,
            tool,
            args: &args,
            cx: &cx,
            call_id: self.runtime.call_id(&cx),
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
