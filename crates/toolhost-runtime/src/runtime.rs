//! The front door: [`Runtime`], what an embedder holds. It lists tools and
//! plugins, runs calls (each through the steps in `call/`), and changes
//! the policy and the session toggles. Building one is `builder.rs`.
//!
//! A runtime is three owned parts: the **catalog** (what is loaded,
//! `catalog.rs`), the **gate** (policy, hooks, approver: `gate.rs`) and the
//! **pool** (engine and sandbox slots: `pool.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use toolhost_policy::{Policy, PolicyError};

use crate::builder::RuntimeBuilder;
use crate::call::{self, CallContext, ToolResult};
use crate::catalog::Catalog;
use crate::error::{CallError, LoadError};
use crate::gate::Gate;
use crate::pool::Pool;
use crate::registry::{PluginInfo, ToolInfo};
use crate::reload::PluginEvent;

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

pub(crate) struct Inner {
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) gate: Gate,
    pub(crate) pool: Pool,
    /// Numbers the calls that come without an id.
    calls: AtomicU64,
}

impl Inner {
    pub(crate) fn new(catalog: Arc<Catalog>, gate: Gate, pool: Pool) -> Inner {
        Inner {
            catalog,
            gate,
            pool,
            calls: AtomicU64::new(0),
        }
    }

    /// The caller's call id, or a new one (`call-N`).
    pub(crate) fn call_id(&self, given: Option<&str>) -> String {
        match given {
            Some(id) => id.to_owned(),
            None => format!("call-{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1),
        }
    }
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
            .field("tools", &self.inner.catalog.registry().tools.len())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Starts building a runtime.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    pub(crate) fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// Events about plugins being loaded, reloaded, unloaded or failing to
    /// load, from now on (a receiver that falls more than 256 events behind
    /// skips the oldest).
    pub fn subscribe(&self) -> tokio::sync::broadcast::Receiver<PluginEvent> {
        self.inner.catalog.subscribe()
    }

    /// Whether the plugin directories are being watched.
    pub fn is_watching(&self) -> bool {
        self.inner.catalog.is_watching()
    }

    /// What happened at the last load: failures, warnings, compile counts.
    pub fn load_report(&self) -> LoadReport {
        self.inner.catalog.load_report()
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

    /// The permission filter: the tools a model may be offered for `agent`
    /// in `session` — every tool except those the policy denies outright
    /// and those the session switched off. Call it before every request to
    /// a model; it is the one place that decides (see `gate.rs`).
    pub fn offered_tools(&self, agent: Option<&str>, session: Option<&str>) -> Vec<ToolInfo> {
        self.inner.gate.offered_tools(self.tools(), agent, session)
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
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        call::run(&self.inner, tool, args, &cx).await
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.inner.gate.policy()
    }

    /// Replaces the policy for every call from now on (e.g. after the policy
    /// file changed). The model has no way to call this.
    pub fn set_policy(&self, policy: Policy) {
        self.inner.gate.set_policy(policy);
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
