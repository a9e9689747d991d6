//! What the agent loop needs from a tool runtime, as a small trait, so it can
//! drive sandboxed plugins (the toolhost runtime, through the adapter crate
//! `toolhost-agent-runtime`), native tools or MCP tools.

use std::sync::Arc;
use toolhost_content::ErrorKind;

use serde_json::Value;

use crate::provider::BoxFuture;

/// A tool as the loop sees it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Arc<Value>,
    /// Does not change anything: may run in parallel with other read-only calls.
    pub read_only: bool,
}

/// The outcome of running one tool call, ready for the model and the UI.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolOutcome {
    /// Text for the model (the output, or an error message it can act on).
    pub output: String,
    /// Structured data for user interfaces only.
    pub details: Option<Value>,
    /// The result as content blocks (MCP's `content`: text, images, audio,
    /// resources), when the tool sent any; empty: `output` alone. The loop
    /// gives the model `output` and, of the blocks that are not text and
    /// are meant for it (`annotations.audience`), the images and a line for
    /// each other one (`Message::attachments`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<toolhost_content::Content>,
    /// Whether this is an error.
    pub is_error: bool,
    /// A stable kind for errors (`not-found`, `invalid-arguments`, `sandbox-fault`, ...).
    pub error_kind: Option<ErrorKind>,
    /// What the permission layer and the hooks did on this call (the policy's
    /// decision, each hook's decision and time, approvals), as JSON, for
    /// events and history.
    pub steps: Vec<Value>,
    /// Whether the result came from the executor's result cache (the
    /// runtime's, for read-only and idempotent tools) instead of running the
    /// tool.
    #[serde(default)]
    pub cached: bool,
}

/// Receives a running call's progress: `(message, fraction 0..1)`.
pub type ProgressFn = Arc<dyn Fn(&str, Option<f32>) + Send + Sync>;

/// Most progress reports of one call that become events; later ones are
/// dropped (a tool cannot flood the caller).
pub const MAX_PROGRESS_REPORTS: u32 = 64;

/// Per-call information passed to the executor.
#[derive(Clone, Default)]
pub struct ToolCallInfo {
    /// The model's call id.
    pub call_id: String,
    /// The session.
    pub session_id: Option<String>,
    /// The agent profile.
    pub agent: Option<String>,
    /// The round whose assistant message asked for the call (0 outside a run).
    pub round: u32,
    /// Cancelled when the run is aborted or runs out of time: a native tool
    /// can watch it and stop early (the loop stops waiting either way, and
    /// the runtime stops a sandboxed call when it is dropped).
    pub abort: tokio_util::sync::CancellationToken,
    /// Where the tool's progress reports go, when someone listens (the loop
    /// turns them into [`AgentEvent::ToolCallProgress`](crate::AgentEvent::ToolCallProgress)).
    pub progress: Option<ProgressFn>,
    /// The run's variables, for an executor that serves `read_var` itself
    /// ([`ToolExecutor::serves_read_var`]).
    pub vars: Option<crate::vars::RunVars>,
}

impl std::fmt::Debug for ToolCallInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCallInfo")
            .field("call_id", &self.call_id)
            .field("session_id", &self.session_id)
            .field("agent", &self.agent)
            .field("round", &self.round)
            .field("progress", &self.progress.is_some())
            .field("vars", &self.vars.is_some())
            .finish_non_exhaustive()
    }
}

/// Lists and runs tools.
pub trait ToolExecutor: Send + Sync {
    /// The tools available now (recomputed before every request).
    fn tools(&self) -> Vec<ToolSpec>;

    /// The tools to offer the model for this agent and session: by default
    /// all of [`tools`](Self::tools); an executor with a permission layer
    /// applies its permission filter here (the runtime's is
    /// `Runtime::offered_tools`: everything but what its policy denies
    /// outright and what the session switched off). Called before every
    /// request.
    fn tools_for(&self, info: &ToolCallInfo) -> Vec<ToolSpec> {
        let _ = info;
        self.tools()
    }

    /// The names of the tools [`tools_for`](Self::tools_for) withholds
    /// from this agent and session (denied outright by a permission layer,
    /// switched off by the session). A user who asks for one by name is
    /// told it is not allowed here, rather than the model calling another
    /// tool in its place; no other tool is ever named. None by default (an
    /// executor without a permission layer withholds nothing); the
    /// runtime's is `Runtime::withheld_tools`. Asked once at the start of
    /// every run.
    ///
    /// ```
    /// # use toolhost_agent::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec, BoxFuture};
    /// struct NoNetwork(Vec<ToolSpec>);
    /// impl ToolExecutor for NoNetwork {
    ///     fn tools(&self) -> Vec<ToolSpec> { self.0.clone() }
    ///     fn tools_for(&self, _: &ToolCallInfo) -> Vec<ToolSpec> {
    ///         self.0.iter().filter(|t| t.name != "http_get").cloned().collect()
    ///     }
    ///     fn withheld_tools(&self, _: &ToolCallInfo) -> Vec<String> {
    ///         vec!["http_get".into()]
    ///     }
    ///     fn call<'a>(&'a self, _: &'a str, _: serde_json::Value, _: ToolCallInfo)
    ///         -> BoxFuture<'a, ToolOutcome> { unimplemented!() }
    /// }
    /// ```
    fn withheld_tools(&self, info: &ToolCallInfo) -> Vec<String> {
        let _ = info;
        Vec::new()
    }

    /// Whether the executor answers the built-in `read_var` itself, through
    /// its own permission layer (the runtime does when built with its
    /// `read_var` source: policy, session toggles, hooks and audit then see
    /// every read). The loop then never answers `read_var` on its own: it
    /// offers what [`tools_for`](Self::tools_for) offers (the executor hides
    /// `read_var` while [`ToolCallInfo::vars`] is empty) and hands the
    /// calls, with the run's variables in [`ToolCallInfo::vars`], to
    /// [`call`](Self::call). `false` by default: the loop answers
    /// `read_var` itself.
    fn serves_read_var(&self) -> bool {
        false
    }

    /// Rules for the model from the sources of the tools offered for this
    /// agent and session (a plugin's `usage`), as `(source, text)`; read at
    /// the start of every run, so a plugin loaded since the last run brings
    /// its rules and a hidden one takes them away. None by default.
    fn usage_rules(&self, info: &ToolCallInfo) -> Vec<(String, String)> {
        let _ = info;
        Vec::new()
    }

    /// Runs `name` with `args`. Never fails: every failure is a `ToolOutcome`
    /// with `is_error` set and a message the model can act on. An outcome
    /// of kind [`Aborted`](ErrorKind::Aborted) stops the run there (status
    /// `aborted`): the user denied the call and chose to stop.
    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        info: ToolCallInfo,
    ) -> BoxFuture<'a, ToolOutcome>;
}
