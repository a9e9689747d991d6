//! How a run is configured: [`AgentOptions`] and its builder, with the types
//! of its callbacks (tool filter, conversation rewrite, doom-loop approval)
//! and of the usage rules it adds to the system prompt.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::Message;
use crate::clock::{Clock, SystemClock};
use crate::context::ContextPolicy;
use crate::events::{AgentEvent, EventSink};
use crate::provider::{BoxFuture, CompletionRequest, options::ModelOptions};
use crate::request::{ParamsTransform, RequestHook, SystemTransform};
use crate::tool_search::ToolSearch;
use crate::tools::ToolSpec;
use crate::vars::VarStore;

/// The default base of the system prompt.
pub const DEFAULT_BASE_PROMPT: &str = "You are a helpful assistant with access to tools. \
Use a tool when it helps with the user's request, and answer directly when it does not. \
When a tool returns an error, read it and correct your call instead of repeating it.";

/// A caller's own narrowing of the tools offered to the model (e.g. only
/// read-only tools for a planning step). It is not the permission layer:
/// it runs after it, on what the executor's
/// [`tools_for`](crate::ToolExecutor::tools_for) offered, and can only
/// narrow further what the policy already let through.
pub type ToolFilter = Arc<dyn Fn(&[ToolSpec]) -> Vec<ToolSpec> + Send + Sync>;

/// Runs before every request and may rewrite the conversation (e.g. compact
/// it). Changes persist into [`ToolChainResult::messages`](crate::ToolChainResult::messages).
pub type BeforeRequest = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;

/// Asked when the same call repeats; `true` lets the loop go on.
pub type DoomLoopApproval = Arc<dyn Fn(DoomLoop) -> BoxFuture<'static, bool> + Send + Sync>;

/// The same tool with the same arguments, several times in a row, or the
/// same short cycle of calls (A, B, A, B, A, B) repeated as often.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoomLoop {
    /// The round of the latest call.
    pub round: u32,
    /// The (repaired) tool name.
    pub tool: String,
    /// Its arguments (canonical JSON text).
    pub arguments: String,
    /// How many identical calls (or cycles) in a row, counting the latest.
    pub repeats: u32,
    /// The tools of the repeating cycle in call order: one name when the
    /// same call repeats, two or three when calls alternate.
    pub cycle: Vec<String>,
}

/// Tool usage rules added to the system prompt (typically one per plugin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRules {
    /// A heading, e.g. the plugin's name.
    pub name: String,
    /// The rules.
    pub text: String,
}

/// How the agent runs. `AgentOptions::new(model)` gives the defaults; the
/// builder methods set one field each.
///
/// ```
/// use std::time::Duration;
/// use toolhost_agent::AgentOptions;
///
/// let options = AgentOptions::new("claude-sonnet-4")
///     .max_rounds(5)
///     .tool_timeout(Duration::from_secs(30))
///     .tool_filter(|tools| tools.iter().filter(|t| t.read_only).cloned().collect());
/// assert_eq!(options.max_rounds, 5);
/// ```
#[derive(Clone)]
pub struct AgentOptions {
    /// The model name, as the provider knows it.
    pub model: String,
    /// Rounds with tools before the forced final answer (default 10).
    pub max_rounds: u32,
    /// Fires to stop the run (from any task); the run ends `aborted` promptly.
    /// A token stays cancelled: use a fresh one for each run.
    pub abort: CancellationToken,
    /// Deadline for the whole run; when it passes the run ends `timeout`.
    pub timeout: Option<Duration>,
    /// Limit per tool call (default 120 s); a call over it becomes an error
    /// result for the model. The runtime's own per-plugin limits apply too.
    pub tool_timeout: Option<Duration>,
    /// Run the calls of one response concurrently when all are read-only
    /// (default true). Results are always appended in call order.
    pub parallel_read_only: bool,
    /// The start of the system prompt.
    pub base_prompt: String,
    /// Usage rules appended to the system prompt.
    pub usage_rules: Vec<UsageRules>,
    /// Source of the date and of timestamps.
    pub clock: Arc<dyn Clock>,
    /// Longest tool output (in bytes) the model receives whole (default 16 KiB);
    /// also the page size of `read_var`.
    pub max_output_bytes: usize,
    /// Where full tool outputs are kept. Share one store across the runs of a
    /// chat so that `read_var` references stay valid.
    pub vars: Arc<VarStore>,
    /// Identical calls in a row that count as a doom loop (default 3).
    pub doom_loop_threshold: u32,
    /// Upper bound on output tokens per request.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Whether the model may ask for several calls per response (default true).
    pub parallel_tool_calls: bool,
    /// Passed to the tools.
    pub session_id: Option<String>,
    /// The agent profile, passed to the tools.
    pub agent: Option<String>,
    /// Receives every event.
    pub events: Option<EventSink>,
    /// Narrows the tool list before every request, after the permission
    /// filter (see [`ToolFilter`]).
    pub tool_filter: Option<ToolFilter>,
    /// Rewrites the conversation before every request.
    pub before_request: Option<BeforeRequest>,
    /// Asked on a doom loop; without one the run ends `doom-loop`.
    pub doom_loop_approval: Option<DoomLoopApproval>,
    /// Model options (the merged layers), applied to every request over
    /// [`max_tokens`](Self::max_tokens) and [`temperature`](Self::temperature)
    /// (see [`request`](crate::request)).
    pub model_options: ModelOptions,
    /// Rewrites the system prompt before every request.
    pub system_transform: Option<SystemTransform>,
    /// Run before every request, in order; may change the system prompt and
    /// the parameters (see [`RequestHook`]).
    pub request_hooks: Vec<Arc<dyn RequestHook>>,
    /// Rewrites the request last, before it is sent.
    pub params_transform: Option<ParamsTransform>,
    /// Keeping the history inside the model's context window (see
    /// [`context`](crate::context)).
    pub context: ContextPolicy,
    /// Searching a large catalog instead of offering every definition (see
    /// [`tool_search`](crate::tool_search)).
    pub tool_search: ToolSearch,
    /// How long one round may spend asking again natively when the server
    /// cannot parse the model's own output (default 30 s; at most two more
    /// attempts either way); then the round goes through the json prompt
    /// protocol, whose attempt is cut after four times this. A small model
    /// on a CPU can take a minute per attempt.
    pub model_output_retry_time: Duration,
    /// The most calls of one reply that run (default 16): the rest are
    /// answered "not run" and the loop goes on. A small model can write
    /// dozens of calls in one reply (Qwen2.5-Coder-0.5B wrote 54 `read_file`
    /// calls: `docs/log.md`, "Eval round 3"), each a sandbox to start.
    pub max_calls_per_round: usize,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            model: String::new(),
            max_rounds: 10,
            abort: CancellationToken::new(),
            timeout: None,
            tool_timeout: Some(Duration::from_secs(120)),
            parallel_read_only: true,
            base_prompt: DEFAULT_BASE_PROMPT.to_owned(),
            usage_rules: Vec::new(),
            clock: Arc::new(SystemClock),
            max_output_bytes: 16 * 1024,
            vars: Arc::new(VarStore::new()),
            doom_loop_threshold: 3,
            max_tokens: None,
            temperature: None,
            parallel_tool_calls: true,
            session_id: None,
            agent: None,
            events: None,
            tool_filter: None,
            before_request: None,
            doom_loop_approval: None,
            model_options: ModelOptions::default(),
            system_transform: None,
            request_hooks: Vec::new(),
            params_transform: None,
            context: ContextPolicy::default(),
            tool_search: ToolSearch::default(),
            model_output_retry_time: Duration::from_secs(30),
            max_calls_per_round: 16,
        }
    }
}

impl std::fmt::Debug for AgentOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentOptions")
            .field("model", &self.model)
            .field("max_rounds", &self.max_rounds)
            .field("timeout", &self.timeout)
            .field("tool_timeout", &self.tool_timeout)
            .field("parallel_read_only", &self.parallel_read_only)
            .field("max_output_bytes", &self.max_output_bytes)
            .field("doom_loop_threshold", &self.doom_loop_threshold)
            .field("session_id", &self.session_id)
            .field("agent", &self.agent)
            .field("model_options", &self.model_options)
            .field("request_hooks", &self.request_hooks.len())
            .field("tool_search", &self.tool_search)
            .finish_non_exhaustive()
    }
}

impl AgentOptions {
    /// The defaults, for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        AgentOptions {
            model: model.into(),
            ..Self::default()
        }
    }
    /// Sets [`max_calls_per_round`](Self::max_calls_per_round) (at least 1).
    pub fn max_calls_per_round(mut self, n: usize) -> Self {
        self.max_calls_per_round = n.max(1);
        self
    }
    /// Sets [`model_output_retry_time`](Self::model_output_retry_time).
    pub fn model_output_retry_time(mut self, d: Duration) -> Self {
        self.model_output_retry_time = d;
        self
    }
    /// Sets [`tool_search`](Self::tool_search).
    pub fn tool_search(mut self, search: ToolSearch) -> Self {
        self.tool_search = search;
        self
    }
    /// Sets [`max_rounds`](Self::max_rounds).
    pub fn max_rounds(mut self, n: u32) -> Self {
        self.max_rounds = n;
        self
    }
    /// Sets [`abort`](Self::abort).
    pub fn abort(mut self, token: CancellationToken) -> Self {
        self.abort = token;
        self
    }
    /// Sets [`timeout`](Self::timeout).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// Sets [`tool_timeout`](Self::tool_timeout).
    pub fn tool_timeout(mut self, d: Duration) -> Self {
        self.tool_timeout = Some(d);
        self
    }
    /// Sets [`parallel_read_only`](Self::parallel_read_only).
    pub fn parallel_read_only(mut self, on: bool) -> Self {
        self.parallel_read_only = on;
        self
    }
    /// Sets [`base_prompt`](Self::base_prompt).
    pub fn base_prompt(mut self, text: impl Into<String>) -> Self {
        self.base_prompt = text.into();
        self
    }
    /// Adds [`usage_rules`](Self::usage_rules).
    pub fn usage_rules(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.usage_rules.push(UsageRules {
            name: name.into(),
            text: text.into(),
        });
        self
    }
    /// Sets [`clock`](Self::clock).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }
    /// Sets [`max_output_bytes`](Self::max_output_bytes).
    pub fn max_output_bytes(mut self, n: usize) -> Self {
        self.max_output_bytes = n.max(1);
        self
    }
    /// Sets [`vars`](Self::vars).
    pub fn vars(mut self, vars: Arc<VarStore>) -> Self {
        self.vars = vars;
        self
    }
    /// Sets [`doom_loop_threshold`](Self::doom_loop_threshold) (at least 2).
    pub fn doom_loop_threshold(mut self, n: u32) -> Self {
        self.doom_loop_threshold = n.max(2);
        self
    }
    /// Sets [`session_id`](Self::session_id).
    pub fn session_id(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }
    /// Sets [`agent`](Self::agent): the profile the tools' policy applies.
    pub fn agent(mut self, name: impl Into<String>) -> Self {
        self.agent = Some(name.into());
        self
    }
    /// Sets [`events`](Self::events).
    pub fn events(mut self, sink: EventSink) -> Self {
        self.events = Some(sink);
        self
    }
    /// Sets [`events`](Self::events) from a closure.
    pub fn on_event(mut self, f: impl Fn(AgentEvent) + Send + Sync + 'static) -> Self {
        self.events = Some(Arc::new(f));
        self
    }
    /// Sets [`tool_filter`](Self::tool_filter).
    pub fn tool_filter(
        mut self,
        f: impl Fn(&[ToolSpec]) -> Vec<ToolSpec> + Send + Sync + 'static,
    ) -> Self {
        self.tool_filter = Some(Arc::new(f));
        self
    }
    /// Sets the model's context window in tokens (see [`context`](crate::context)).
    pub fn context_window(mut self, tokens: u32) -> Self {
        self.context.window = Some(tokens);
        self
    }
    /// Sets how the history is kept inside the context window.
    pub fn context(mut self, policy: ContextPolicy) -> Self {
        self.context = policy;
        self
    }
    /// Sets [`before_request`](Self::before_request).
    pub fn before_request(mut self, f: impl Fn(&mut Vec<Message>) + Send + Sync + 'static) -> Self {
        self.before_request = Some(Arc::new(f));
        self
    }
    /// Sets [`doom_loop_approval`](Self::doom_loop_approval).
    pub fn doom_loop_approval(
        mut self,
        f: impl Fn(DoomLoop) -> BoxFuture<'static, bool> + Send + Sync + 'static,
    ) -> Self {
        self.doom_loop_approval = Some(Arc::new(f));
        self
    }
    /// Sets [`model_options`](Self::model_options).
    pub fn model_options(mut self, options: ModelOptions) -> Self {
        self.model_options = options;
        self
    }
    /// Sets [`system_transform`](Self::system_transform).
    pub fn system_transform(mut self, f: impl Fn(&mut String) + Send + Sync + 'static) -> Self {
        self.system_transform = Some(Arc::new(f));
        self
    }
    /// Adds one of the [`request_hooks`](Self::request_hooks).
    pub fn request_hook(mut self, hook: Arc<dyn RequestHook>) -> Self {
        self.request_hooks.push(hook);
        self
    }
    /// Sets [`params_transform`](Self::params_transform).
    pub fn params_transform(
        mut self,
        f: impl Fn(&mut CompletionRequest) + Send + Sync + 'static,
    ) -> Self {
        self.params_transform = Some(Arc::new(f));
        self
    }
}
