//! One tool call, step by step. Every path into a tool call (the agent
//! loop, `host call`, the interactive `/call`, a reused instance) goes
//! through these steps, in this order, one file each:
//!
//! 1. **lookup** (here, [`resolve`]): the exposed name to the plugin and tool
//!    that answer it; an unknown name is `not-found` with the closest names;
//! 2. **validate** (`validate.rs`): the arguments' size and their JSON
//!    Schema, every error with its JSON pointer;
//! 3. **admit** (`admit.rs`): for a tool with a per-call grant, its path
//!    opened once (`opened.rs`), so that every decision below is about the
//!    object the tool will be handed; the policy's decision (deny stops here), the
//!    before-hooks (block stops here; a rewrite is validated and judged by
//!    the policy again), and the
//!    user's approval when the policy or a hook asks;
//! 4. **execute** (`execute.rs`): a sandbox slot from the pool (`queue`),
//!    then the guest in a fresh sandbox under its limits (reaching only the
//!    opened path, for a per-call grant: `narrow.rs`) — or, for a tool
//!    from a tool source (`source.rs`, an MCP server), the source's call
//!    under the same time and size limits — and the checks of what it
//!    returned (sizes, JSON, output schema); a guest's time counts toward
//!    its task's turn on the worker (`fair_share.rs`). A read-only, idempotent tool's
//!    result may come from the result cache instead (`cached.rs` over
//!    `result_cache.rs`): only this step is skipped;
//! 5. **conclude** (`conclude.rs`): the after-hooks (on failures too), then
//!    the user's approval of the result when the policy asks for it.
//!
//! A plugin that the operator lets call tools (contract 0.4.0) calls them
//! through these very steps, as its caller (`nested.rs`).
//!
//! A read of a tool source's resource or a get of its prompt (`access.rs`)
//! takes the same steps; only its lookup differs.
//!
//! `explain.rs` takes a call through lookup, validation, the path and the
//! policy without running it (`Runtime::explain`), with these very steps.
//!
//! Before any step, what the caller named (the tool, its call id) is
//! bounded and made safe once (`named.rs`): only that reaches the call's
//! span, the live feed, an error or a log.
//!
//! Every decision is reported to the call's [`CallContext::on_step`], and,
//! when anyone watches the live feed (`watch.rs`,
//! [`Runtime::watch_calls`](crate::Runtime::watch_calls)), the call's
//! start, each step's time and the outcome go there.

pub(crate) mod access;
pub(crate) mod admit;
pub(crate) mod cached;
pub(crate) mod conclude;
pub(crate) mod execute;
pub(crate) mod explain;
pub(crate) mod fair_share;
pub(crate) mod named;
pub(crate) mod narrow;
pub(crate) mod nested;
pub(crate) mod opened;
pub(crate) mod trace;
pub(crate) mod validate;
pub(crate) mod watch;

use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use crate::error::CallError;
use crate::parts::Parts;
use crate::permission::CallStep;
use crate::plugin::{Plugin, Tool};
use crate::sandbox::ProgressSink;
pub(crate) use crate::tool::ToolResult;
use named::Named;

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
    /// Who is calling, for the result cache and saved approvals (`client`).
    pub(crate) client: Option<String>,
    pub(crate) progress: Option<ProgressSink>,
    pub(crate) steps: Option<StepSink>,
    /// Asks about this call instead of the runtime's approver.
    pub(crate) approver: Option<Arc<dyn crate::permission::Approver>>,
    /// What the caller attached for the tool source that serves the call.
    pub(crate) extensions: http::Extensions,
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
    /// Sets who is calling: an identity of the client (say, which bearer
    /// token an MCP request came with; never the secret itself). The
    /// result cache keeps each client's results to itself, as it does each
    /// session's and each profile's, so one client is never answered (nor
    /// told it was answered) from another's call; and an approval a client
    /// saves answers that client alone, while one saved for a call without
    /// a client (the user at the host) answers no client
    /// (`toolhost_policy::approvals::Answers`).
    ///
    /// ```
    /// let cx = toolhost_runtime::CallContext::new().client("token:3f5a9c01");
    /// # let _ = cx;
    /// ```
    pub fn client(mut self, client: impl Into<String>) -> Self {
        self.client = Some(client.into());
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
    /// Asks `approver` about this call (a policy or hook `ask`, a result
    /// under result approval) instead of the runtime's approver: an entry
    /// point that can reach the user its own way (an MCP server asks the
    /// client through elicitation) sets one per call.
    pub fn approver(mut self, approver: Arc<dyn crate::permission::Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// The approver for this call: its own, else the runtime's.
    pub(crate) fn approver_or<'a>(
        &'a self,
        gate: &'a crate::gate::Gate,
    ) -> Option<&'a Arc<dyn crate::permission::Approver>> {
        self.approver.as_ref().or(gate.approver())
    }

    /// Attaches `value` to the call, for the tool source that serves it
    /// ([`SourceCall::extensions`](crate::source::SourceCall::extensions)): the
    /// agent loop attaches the run's variables for the built-in `read_var`.
    /// Nothing in the pipeline reads it.
    ///
    /// ```
    /// #[derive(Clone)]
    /// struct Tenant(&'static str);
    /// let cx = toolhost_runtime::CallContext::new().extension(Tenant("acme"));
    /// # let _ = cx;
    /// ```
    pub fn extension<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
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

/// What a call is aimed at: the tool as it was resolved when the call
/// started. The call finishes on this plugin version even if a reload
/// swaps in another meanwhile.
pub(crate) struct Target<'a> {
    /// The name the caller used (the exposed name).
    pub tool: &'a str,
    pub plugin: Arc<Plugin>,
    /// The tool's index in `plugin.tools`.
    pub index: usize,
    /// For an access (`access.rs`): the unlisted tool it is aimed at,
    /// instead of `plugin.tools[index]`.
    pub access: Option<&'static Tool>,
}

impl Target<'_> {
    /// The tool's loaded spec (schemas and validators).
    pub(crate) fn spec(&self) -> &Tool {
        match self.access {
            Some(tool) => tool,
            None => &self.plugin.tools[self.index],
        }
    }
}

/// How a call finds what answers it (step 1).
#[derive(Clone, Copy)]
pub(crate) enum Lookup<'a> {
    /// A tool by the name it is listed under.
    Tool,
    /// An access to the tool source of this name (`access.rs`).
    Access(&'a str, &'static Tool),
}

/// One call on its way through the steps.
pub(crate) struct Call<'a> {
    pub target: Target<'a>,
    pub cx: &'a CallContext,
    /// The caller's call id, or one the runtime made up.
    pub id: String,
    /// The policy's check of each HTTP request the call makes, set when it
    /// is admitted (`admit.rs`, `hop_check`).
    pub hops: std::sync::OnceLock<crate::http::HopCheck>,
    /// The call's span (`trace.rs`), where the steps record what they decide.
    pub span: tracing::Span,
    /// The call's recorder for the live feed (`watch.rs`), where the steps
    /// report their times; `None` when nobody watches.
    pub watch: Option<&'a watch::Recorder>,
    /// The runtime, for the calls a plugin that may call tools makes
    /// (`nested.rs`, which takes a weak handle on it only then).
    pub parts: &'a Parts,
}

impl<'a> Call<'a> {
    /// Step 1, lookup: the plugin and tool that answer `tool` right now.
    /// `named` is what the caller named, as the host keeps it (the call's
    /// id is its).
    pub(crate) fn resolve(
        parts: &'a Parts,
        tool: &'a str,
        named: Named<'_>,
        cx: &'a CallContext,
        watch: Option<&'a watch::Recorder>,
    ) -> Result<Self, CallError> {
        let registry = parts.catalog.registry();
        let Some((plugin, index)) = registry.tools.get(tool) else {
            // Only names the caller may see: a not-found error must not
            // reveal a tool its profile hides.
            let available =
                parts
                    .gate
                    .visible_names(&registry, cx.agent.as_deref(), cx.session_id.as_deref());
            return Err(CallError::NotFound {
                suggestions: crate::registry::suggest(
                    &named.tool,
                    available.iter().map(String::as_str),
                ),
                unavailable: source_not_up(parts, &named.tool, cx),
                name: named.tool.into_owned(),
                available,
            });
        };
        let target = Target {
            tool,
            plugin: plugin.clone(),
            index: *index,
            access: None,
        };
        Ok(Self::resolved(parts, target, named, cx, watch))
    }

    /// The call once its target is known, recorded as resolved. Lookup
    /// runs inside the call's span (`trace::call_span`), which it keeps.
    fn resolved(
        parts: &'a Parts,
        target: Target<'a>,
        named: Named<'_>,
        cx: &'a CallContext,
        watch: Option<&'a watch::Recorder>,
    ) -> Self {
        let call = Call {
            target,
            cx,
            id: named.id,
            hops: std::sync::OnceLock::new(),
            span: tracing::Span::current(),
            watch,
            parts,
        };
        trace::resolved(&call);
        watch::resolved(&call);
        call
    }

    /// Step 1 of an access (`access.rs`): the tool source named `source`,
    /// when it is loaded and the caller may see it; not-found otherwise
    /// (naming no source the caller cannot see).
    pub(crate) fn resolve_access(
        parts: &'a Parts,
        source: &str,
        spec: &'static Tool,
        named: Named<'_>,
        cx: &'a CallContext,
        watch: Option<&'a watch::Recorder>,
    ) -> Result<Self, CallError> {
        let registry = parts.catalog.registry();
        let plugin = registry
            .plugins
            .iter()
            .find(|p| p.name == source && p.source().is_some())
            .cloned();
        let Some(plugin) = plugin else {
            return Err(CallError::NotFound {
                name: format!("{}:{}", crate::shown::shown_name(source), named.tool),
                suggestions: Vec::new(),
                available: Vec::new(),
                unavailable: None,
            });
        };
        let target = Target {
            tool: &spec.name,
            plugin,
            index: 0,
            access: Some(spec),
        };
        Ok(Self::resolved(parts, target, named, cx, watch))
    }
}

/// Why `tool` is not there when it has the prefix of a tool source that
/// is not up (an MCP server down, or waiting for a sign-in), and the
/// caller may see that source's tools: the state it reports.
fn source_not_up(parts: &Parts, tool: &str, cx: &CallContext) -> Option<String> {
    parts.catalog.sources_in_use.iter().find_map(|source| {
        let prefix = source.prefix();
        let declared = tool
            .strip_prefix(prefix.as_str())
            .filter(|_| !prefix.is_empty())?;
        let status = source.status();
        if status.state == crate::source::SourceState::Ready {
            return None;
        }
        parts
            .gate
            .may_see(
                tool,
                declared,
                source.name(),
                cx.agent.as_deref(),
                cx.session_id.as_deref(),
            )
            .then(|| format!("its source `{}` is {}", source.name(), status.state))
    })
}

/// A fresh-instance call through every step: lookup, validate and admit,
/// execute (or its result from the result cache, `result_cache.rs`),
/// conclude; all in the call's span (`trace.rs`), and on the live feed
/// when anyone watches (`watch.rs`).
pub(crate) async fn run(
    parts: &Parts,
    tool: &str,
    args: Value,
    cx: &CallContext,
) -> Result<ToolResult, CallError> {
    run_looked_up(parts, tool, Lookup::Tool, args, cx).await
}

/// An access to tool source `source` (`access.rs`) through every step,
/// as [`run`].
pub(crate) async fn run_access(
    parts: &Parts,
    source: &str,
    access: &access::Access,
    cx: &CallContext,
) -> Result<ToolResult, CallError> {
    let spec = access::tool_of(access);
    run_looked_up(
        parts,
        &spec.name,
        Lookup::Access(source, spec),
        access.args(),
        cx,
    )
    .await
}

async fn run_looked_up(
    parts: &Parts,
    tool: &str,
    lookup: Lookup<'_>,
    args: Value,
    cx: &CallContext,
) -> Result<ToolResult, CallError> {
    let named = Named::of(tool, cx, |given| parts.call_id(given));
    let span = trace::call_span(&named, cx);
    let recorder = watch::start(&parts.feed, &named, cx);
    let result = steps(parts, tool, lookup, named, args, cx, recorder.as_ref())
        .instrument(span.clone())
        .await;
    trace::finished(&span, &result);
    watch::finished(recorder, &result);
    result
}

async fn steps(
    parts: &Parts,
    tool: &str,
    lookup: Lookup<'_>,
    named: Named<'_>,
    args: Value,
    cx: &CallContext,
    recorder: Option<&watch::Recorder>,
) -> Result<ToolResult, CallError> {
    let call = match lookup {
        Lookup::Tool => Call::resolve(parts, tool, named, cx, recorder)?,
        Lookup::Access(source, spec) => {
            Call::resolve_access(parts, source, spec, named, cx, recorder)?
        }
    };
    let admitted = match timed_admit(&parts.gate, &call, args).await {
        Ok(admitted) => admitted,
        Err(refused) => return timed_refusal(&parts.gate, &call, refused).await,
    };
    let executing = watch::begin(&call, "execute");
    let result = cached::execute(
        &parts.results,
        &call,
        &admitted.args,
        &admitted.args_text,
        async || match call.target.plugin.source() {
            Some(source) => {
                execute::from_source(source.as_ref(), &parts.gate, &call, &admitted.args).await
            }
            None => execute::fresh(&parts.pool, &call, &admitted).await,
        },
    )
    .instrument(tracing::debug_span!("execute"))
    .await;
    watch::executed(&call, executing, &result);
    timed_conclude(&parts.gate, &call, &admitted.args, result).await
}

/// Steps 2 and 3, validate and admit, timed as `admit` on the live feed.
pub(crate) async fn timed_admit(
    gate: &crate::gate::Gate,
    call: &Call<'_>,
    args: Value,
) -> Result<admit::Admitted, admit::Refused> {
    let admitting = watch::begin(call, "admit");
    let admitted = admit::validate_and_admit(gate, call, args).await;
    watch::admitted(call, admitting);
    admitted
}

/// Step 5, conclude, timed on the live feed.
pub(crate) async fn timed_conclude(
    gate: &crate::gate::Gate,
    call: &Call<'_>,
    args: &Value,
    result: Result<ToolResult, CallError>,
) -> Result<ToolResult, CallError> {
    let concluding = watch::begin(call, "conclude");
    let result = conclude::conclude(gate, call, args, result).await;
    watch::end(call, concluding, || None);
    result
}

/// Step 5 of a call refused before it ran, timed as `conclude` on the
/// live feed.
pub(crate) async fn timed_refusal(
    gate: &crate::gate::Gate,
    call: &Call<'_>,
    refused: admit::Refused,
) -> Result<ToolResult, CallError> {
    let concluding = watch::begin(call, "conclude");
    let result = conclude::refused(gate, call, refused).await;
    watch::end(call, concluding, || None);
    result
}
