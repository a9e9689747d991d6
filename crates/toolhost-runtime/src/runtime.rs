//! The front door: [`Runtime`], what an embedder holds. It lists tools and
//! plugins, runs calls (each through the steps in `call/`), and changes
//! the policy and the session toggles. Building one is `builder.rs`.
//!
//! A runtime is its parts (`parts.rs`): the catalog, the gate, the pool and
//! the result cache.

use std::sync::Arc;

use serde_json::Value;
use toolhost_policy::{Policy, PolicyError};

use crate::call::{self, CallContext};
use crate::catalog::{Catalog, LoadReport, PluginEvent};
use crate::error::CallError;
use crate::feed::CallEvent;
use crate::lockfile::LockError;
use crate::parts::Parts;
use crate::registry::PluginInfo;
use crate::result_cache::CacheStats;
use crate::tool::{ToolInfo, ToolResult};

/// Loads sandboxed tool plugins and runs calls into them. Cheap to clone;
/// `Send + Sync`, so one runtime serves calls from many tasks at once.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Parts>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("tools", &self.inner.catalog.registry().tools.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    pub(crate) fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// Events about plugins being loaded, reloaded, unloaded or failing to
    /// load, from now on (a receiver that falls more than 256 events behind
    /// skips the oldest).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PluginEvent> {
        self.inner.catalog.subscribe()
    }

    /// Every call from now on, live, for an operator's console: a
    /// [`CallPhase::Started`](crate::feed::CallPhase::Started) event when a call
    /// comes in, and a [`CallPhase::Finished`](crate::feed::CallPhase::Finished)
    /// one when it is over, with the policy's decision, each step's time
    /// and the outcome. Calls of every entry point (the agent loop, MCP,
    /// reused instances) and of every tool source are on it, refused ones
    /// included.
    ///
    /// A receiver that falls more than 1024 events behind skips the oldest
    /// (`recv` reports [`Lagged`](tokio::sync::broadcast::error::RecvError::Lagged));
    /// it never holds up a call. While nobody holds a receiver, calls make
    /// no events at all. A receiver waiting in `recv` wakes its task for
    /// every event (two per call), which on a small machine costs the
    /// calls more than the events do; a console that refreshes a page can
    /// read what came every few milliseconds with `try_recv` instead.
    ///
    /// ```no_run
    /// # async fn run(runtime: toolhost_runtime::Runtime) {
    /// use tokio::sync::broadcast::error::RecvError;
    ///
    /// let mut calls = runtime.watch_calls();
    /// loop {
    ///     match calls.recv().await {
    ///         Ok(event) => println!("{}", serde_json::to_string(&*event).unwrap_or_default()),
    ///         Err(RecvError::Lagged(skipped)) => eprintln!("{skipped} calls skipped"),
    ///         Err(RecvError::Closed) => break,
    ///     }
    /// }
    /// # }
    /// ```
    pub fn watch_calls(&self) -> tokio::sync::broadcast::Receiver<Arc<CallEvent>> {
        self.inner.feed.subscribe()
    }

    /// Whether the plugin directories are being watched.
    pub fn is_watching(&self) -> bool {
        self.inner.is_watching()
    }

    /// Compares every plugin file with what is loaded: loads new and changed
    /// files, unloads removed ones. The watcher does this by itself after an
    /// error; embedders that do not watch can call it when they like.
    pub async fn rescan(&self) -> Vec<PluginEvent> {
        self.catalog().rescan().await
    }

    /// What happened at the last load: failures, warnings, compile counts.
    pub fn load_report(&self) -> LoadReport {
        self.inner.catalog.load_report()
    }

    /// Whether a tool of that name is loaded now: one map lookup, no
    /// listing (cheap enough to ask every round).
    ///
    /// ```no_run
    /// # async fn run(runtime: toolhost_runtime::Runtime) {
    /// if runtime.has_tool("calculate") {
    ///     println!("calc is loaded");
    /// }
    /// # }
    /// ```
    pub fn has_tool(&self, name: &str) -> bool {
        self.inner.catalog.registry().tools.contains_key(name)
    }

    /// The input schema of tool `name`, if it is loaded: one map lookup,
    /// no listing (cheap enough for every call; the MCP server reads the
    /// `x-mcp-header` annotations of SEP-2243 from it).
    ///
    /// ```no_run
    /// # async fn run(runtime: toolhost_runtime::Runtime) {
    /// if let Some(schema) = runtime.tool_schema("calculate") {
    ///     println!("calculate takes {schema}");
    /// }
    /// # }
    /// ```
    pub fn tool_schema(&self, name: &str) -> Option<Arc<serde_json::Value>> {
        let registry = self.inner.catalog.registry();
        let (plugin, index) = registry.tools.get(name)?;
        plugin.tools.get(*index).map(|t| t.schema.clone())
    }

    /// Every tool loaded, sorted by name. What a model is offered is
    /// [`offered_tools`](Self::offered_tools): these, less what the policy
    /// denies outright.
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.inner.catalog.registry().tool_infos()
    }

    /// Every loaded plugin, with requested and granted capabilities.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.inner.catalog.registry().plugin_infos()
    }

    /// Accepts the code now loaded as plugin `name` as the code its grants
    /// are given to: the lock file records its digest (returned). Takes
    /// effect at the plugin's next load (a restart, or its file's next
    /// change). See [`RuntimeBuilder::lock_file`](crate::RuntimeBuilder::lock_file).
    pub fn trust(&self, name: &str) -> Result<String, LockError> {
        let registry = self.inner.catalog.registry();
        let plugin = registry
            .plugins
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| LockError::UnknownPlugin(name.to_owned()))?;
        if !plugin.has_named_file() {
            return Err(LockError::NotItsFile {
                name: plugin.name.clone(),
                path: plugin.path.clone(),
            });
        }
        self.inner
            .catalog
            .loader
            .lock
            .record(&plugin.name, &plugin.digest)?;
        Ok(plugin.digest.clone())
    }

    /// The permission filter: the tools a model may be offered for `agent`
    /// in `session` — every tool except those the policy denies outright
    /// and those the session switched off. Call it before every request to
    /// a model; it is the one place that decides (see `gate.rs`).
    pub fn offered_tools(&self, agent: Option<&str>, session: Option<&str>) -> Vec<ToolInfo> {
        self.inner.gate.offered_tools(self.tools(), agent, session)
    }

    /// The names of the tools [`offered_tools`](Self::offered_tools) leaves
    /// out for `agent` in `session` (denied outright, or switched off by
    /// the session): the agent loop tells a user who asks for one by name
    /// that it is not allowed here.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = toolhost_runtime::Runtime::builder().plugin_dir("target/plugins").build().await?;
    /// for name in runtime.withheld_tools(None, Some("session-1")) {
    ///     println!("not offered: {name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn withheld_tools(&self, agent: Option<&str>, session: Option<&str>) -> Vec<String> {
        self.inner.gate.withheld_tools(self.tools(), agent, session)
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
        let args = call::validate::parse(tool, args)?;
        self.call(tool, args, cx).await
    }

    /// Calls `tool` with `args`: looks it up, validates the arguments against
    /// its schema (every error, with its JSON pointer), asks the policy and
    /// the hooks, runs it in a fresh sandbox under its limits, checks what it
    /// returned, and runs the after-hooks. The steps are in `call/`.
    ///
    /// A guest that computes longer than a moment yields to the executor at
    /// every epoch tick ([`EPOCH_TICK`](crate::engine::EPOCH_TICK), 1 ms), and
    /// every sandboxed call spends tokio's cooperative budget by the time
    /// its guest ran (one unit per µs, `call/fair_share.rs`): a task that
    /// makes calls back to back without awaiting anything in between gives
    /// its worker back after about 128 µs of calls, so the tasks behind it
    /// get their turn (see `docs/log.md`, "Calls under load").
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        call::run(&self.inner, tool, args, &cx).await
    }

    /// Reads a resource or gets a prompt of the tool source `source` (an
    /// MCP server's `resources/read` or `prompts/get`), through the same
    /// steps as a call (`call/access.rs`): the policy judges it as a call
    /// of [`READ_RESOURCE`](toolhost_policy::READ_RESOURCE) or
    /// [`GET_PROMPT`](toolhost_policy::GET_PROMPT) from that source (its
    /// `resource = "..."` and `prompt = "..."` rules), the hooks see it,
    /// it runs under the source's limits, and it is on the call's span and
    /// the live feed. The result's `content` holds what the source read
    /// (for a resource, one embedded resource block per content) and its
    /// `structured` what else the source returned.
    ///
    /// ```no_run
    /// # async fn demo(runtime: toolhost_runtime::Runtime) -> Result<(), Box<dyn std::error::Error>> {
    /// use toolhost_runtime::{Access, CallContext};
    /// let read = Access::Resource { uri: "test://static-text".into() };
    /// let result = runtime.access("everything", &read, CallContext::new()).await?;
    /// println!("{}", result.output);
    /// # Ok(()) }
    /// ```
    pub async fn access(
        &self,
        source: &str,
        access: &call::access::Access,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        call::run_access(&self.inner, source, access, &cx).await
    }

    /// Whether `agent` in `session` may make `access` to the tool source
    /// `source`: whether the policy would not deny it. What a caller may
    /// not read is not listed to it either (an MCP server's
    /// `resources/list`, `prompts/list`).
    pub fn may_access(
        &self,
        source: &str,
        access: &call::access::Access,
        agent: Option<&str>,
        session: Option<&str>,
    ) -> bool {
        let policy = self.inner.gate.policy();
        let args = access.args();
        let tool = access.tool();
        let mut request = toolhost_policy::CallRequest::new(tool, &args)
            .declared(tool)
            .plugin(source);
        if let Some(agent) = agent {
            request = request.agent(agent);
        }
        self.inner.gate.with_session(session, |toggles| {
            policy.evaluate(&request, toggles).decision != toolhost_policy::Decision::Deny
        })
    }

    /// The tool sources in use (MCP servers, built-ins, an embedder's), in
    /// the order they were given: an MCP server serves their resources and
    /// prompts (`toolhost-mcp` finds its own among them by type, since a
    /// [`ToolSource`](crate::ToolSource) is [`Any`](std::any::Any)).
    pub fn sources(&self) -> Vec<Arc<dyn crate::ToolSource>> {
        self.inner.catalog.sources_in_use.clone()
    }

    /// What a call of `tool` with `args` (JSON text, as a model sends
    /// them) would meet, and why, without running it: the plugin that
    /// answers, the arguments' problems, a per-call grant's path, the
    /// policy's decision and the rule (file and line) that made it, the
    /// hooks that would run, a saved approval that would answer, and the
    /// plugin's grants and limits. The same steps a call takes (`call/`),
    /// stopping before anything acts: no hook runs, no one is asked, no
    /// sandbox is made. A name nothing answers, or text that is not JSON,
    /// is the error a call would get.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let runtime = toolhost_runtime::Runtime::builder().plugin_dir("target/plugins").build().await?;
    /// let why = runtime.explain_json(
    ///     "read_file",
    ///     r#"{"path":"notes.txt"}"#,
    ///     toolhost_runtime::CallContext::new(),
    /// )?;
    /// println!("{}: {}", why.verdict, why.policy);
    /// # Ok(()) }
    /// ```
    pub fn explain_json(
        &self,
        tool: &str,
        args: &str,
        cx: CallContext,
    ) -> Result<crate::explain::Explanation, CallError> {
        let args = call::validate::parse(tool, args)?;
        call::explain::explain(&self.inner, tool, &args, &cx)
    }

    /// The saved approvals ("allow always" answers): list, revoke, clear.
    /// Listing never waits; a revocation or a clear waits for the store
    /// (bounded): from an async task, run it on a blocking thread (clone
    /// the runtime into `tokio::task::spawn_blocking`), as the console does.
    pub fn approvals(&self) -> &toolhost_policy::approvals::Approvals {
        self.inner.gate.approvals()
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.gate.policy()
    }

    /// Replaces the policy for every call from now on (e.g. after the policy
    /// file changed), and clears the result cache. The model has no way to
    /// call this.
    pub fn set_policy(&self, policy: Policy) {
        self.inner.gate.set_policy(policy);
        // What was cached under the old policy (e.g. a redirect hop it
        // allowed) is not served under the new one.
        self.inner.results.clear();
    }

    /// Forgets every result in the result cache (e.g. when the embedder
    /// knows files changed under a read-only tool).
    pub fn clear_result_cache(&self) {
        self.inner.results.clear();
    }

    /// What the result cache holds and how often it answered.
    pub fn result_cache_stats(&self) -> CacheStats {
        self.inner.results.stats()
    }

    /// Switches the tools matching `glob` off for one session: they are
    /// denied, and hidden from the model, until switched on again.
    pub fn disable_tools(&self, session: &str, glob: &str) -> Result<(), PolicyError> {
        self.inner.gate.toggle(session, |t| t.disable(glob))
    }

    /// Switches the tools matching `glob` back on for one session.
    pub fn enable_tools(&self, session: &str, glob: &str) -> Result<(), PolicyError> {
        self.inner.gate.toggle(session, |t| t.enable(glob))
    }
}
