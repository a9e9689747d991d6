//! The agent loop: ask the model, run the tools it asks for, repeat.
//!
//! [`Agent::run`] is one state machine, driven by [`Agent::step`], which
//! pauses at `Proposed` and `Ran` for an embedder's decisions (see
//! [`step`](crate::step)); `run` takes every default:
//!
//! ```text
//!            +-----------------------------+
//!            v                             |
//! Request(round) --no tool calls--> Done(completed)
//!    |  tool calls                         |
//!    v                                     |
//! Execute(round): repair, parse, doom loop |
//!    v                                     |
//! Proposed (pause) -> run them -> Ran (pause) -> record
//!    |                                     |
//!    +--------------round < max_rounds-----+
//!    |  round == max_rounds
//!    v
//! FinalAnswer (tool_choice none; then no tools, history as text) --> Done(max-rounds)
//!
//! any state --abort--> Done(aborted); --deadline--> Done(timeout);
//! provider error --> Done(error);
//! repeated call refused --> FinalAnswer --> Done(doom-loop);
//! empty reply after tool results --> FinalAnswer --> Done(completed)
//! ```
//!
//! A doom loop (the same tool with the same canonical arguments
//! [`AgentOptions::doom_loop_threshold`] times in a row, across rounds) asks
//! [`AgentOptions::doom_loop_approval`]; without a callback (non-interactive
//! use), or when refused, the repeated call gets a result telling the model
//! it already has that result, the model is asked for a final answer, and
//! the run ends with the dedicated status `doom-loop` and that answer, so
//! callers can tell it apart from host faults and still get an answer.
//!
//! Every failure inside a tool call (unknown tool, malformed arguments,
//! schema violations, traps, timeouts) becomes a tool result the model reads;
//! only host-level faults end the loop, always with a [`Status`], never a panic.
//! However a run ends, every tool call in [`ToolChainResult::messages`] has a
//! tool result (calls that did not run get an error result saying why), so
//! the messages can be sent to a model again.
//!
//! ```no_run
//! # async fn demo(provider: std::sync::Arc<dyn toolhost_agent::Provider>,
//! #               runtime: std::sync::Arc<dyn toolhost_agent::ToolExecutor>) {
//! use toolhost_agent::{Agent, AgentOptions, Message, Status, event_channel};
//!
//! let (sink, mut events) = event_channel();
//! let options = AgentOptions::new("gpt-4.1-mini").max_rounds(8).events(sink);
//! let agent = Agent::new(provider, runtime).with_options(options);
//! tokio::spawn(async move {
//!     while let Some(event) = events.recv().await {
//!         println!("{event:?}");
//!     }
//! });
//! let result = agent.run(vec![Message::user("What is 2*(3+4)?")]).await;
//! assert_eq!(result.status, Status::Completed);
//! println!("{}", result.final_text());
//! # }
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolhost_hooks::ErrorKind;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, warn};

use crate::clock::{Clock, SystemClock, unix_ms};
use crate::context::{Compaction, ContextPolicy};
use crate::events::{AgentEvent, EventSink};
use crate::message::{Message, Role, ToolCall, Usage};
use crate::provider::ModelOptions;
use crate::provider::{
    BoxFuture, Completion, CompletionRequest, Delta, FinishReason, Provider, ProviderError,
    ToolChoice, ToolDefinition,
};
use crate::read_var::read_var_spec;
use crate::repair::{CallRejection, canonical_json, parse_arguments, resolve_tool_name};
use crate::request::{ParamsTransform, RequestHook, SystemTransform};
use crate::status::{Stats, Status};
use crate::step::{AgentState, StepOutcome};
use crate::tools::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec};
use crate::vars::{READ_VAR, VarStore, truncate_for_model};

/// The default base of the system prompt.
pub const DEFAULT_BASE_PROMPT: &str = "You are a helpful assistant with access to tools. \
Use a tool when it helps with the user's request, and answer directly when it does not. \
When a tool returns an error, read it and correct your call instead of repeating it.";

/// Sent (in the request only, not kept in the history) with the forced final
/// request after the round limit.
pub const FINAL_ANSWER_NOTE: &str = "[The tool-call limit for this request has been reached. \
Do not call any more tools: answer now with the information gathered so far, and say what \
is still missing.]";

/// How many times a request is sent again when the server could not parse
/// the model's own output ([`is_model_output_error`]).
const MODEL_OUTPUT_RETRIES: u32 = 2;

/// Whether `e` says the server could not parse what the model itself wrote
/// (llama.cpp's "the model produced output that does not match the expected
/// … format", in the stream or as a 5xx), rather than a fault of the
/// request or the network: the next attempt samples anew.
fn is_model_output_error(e: &ProviderError) -> bool {
    let text = match e {
        ProviderError::Status { status, body, .. } if *status >= 500 => body,
        ProviderError::InvalidResponse { message, .. } => message,
        _ => return false,
    };
    let text = text.to_ascii_lowercase();
    [
        "does not match the expected",
        "model produced output",
        "failed to parse tool call",
        "failed to parse the model",
        "error parsing tool call",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// `answer` without [`FINAL_ANSWER_NOTE`] (with or without its brackets),
/// which small models sometimes repeat.
fn without_note(answer: &str) -> String {
    let bare = FINAL_ANSWER_NOTE
        .trim_start_matches('[')
        .trim_end_matches(']');
    if !answer.contains(bare) {
        return answer.to_owned();
    }
    answer
        .replace(FINAL_ANSWER_NOTE, "")
        .replace(bare, "")
        .trim()
        .to_owned()
}

/// Whether `text` is (or holds) a tool call written as text in either
/// prompt convention (a ```` ```json ```` block with a name and arguments, a
/// `<tool_code>` block): what a small model writes when it may not call
/// tools, which is no answer.
fn shaped_like_a_call(text: &str) -> bool {
    use crate::provider::prompt::{PromptProfile, parse_tool_calls};
    [PromptProfile::Json, PromptProfile::Xml]
        .into_iter()
        .any(|p| !parse_tool_calls(p, text).1.is_empty())
}

/// Whether `e` is a server refusing a request longer than the model's
/// context (llama.cpp's `exceed_context_size_error`, OpenAI's
/// `context_length_exceeded`, Anthropic's "prompt is too long").
fn is_context_overflow(e: &ProviderError) -> bool {
    let ProviderError::Status { status, body, .. } = e else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    matches!(*status, 400 | 413)
        && (body.contains("context_length_exceeded")
            || body.contains("exceed_context_size")
            || body.contains("prompt is too long")
            || (body.contains("context") && (body.contains("exceed") || body.contains("too long"))))
}

/// Longest tool result kept when a history is rendered as text.
const TEXT_HISTORY_RESULT_CHARS: usize = 4000;

/// How [`history_as_text`] starts: a log the host wrote, so that the model
/// neither takes it for the user's words nor imitates its lines.
const TEXT_HISTORY_HEAD: &str = "[System-generated log of the conversation so far, written by \
the host for reference. It is not a message from the user; do not continue or imitate it.]\n";

/// How the log of [`history_as_text`] ends.
const TEXT_HISTORY_TAIL: &str = "\n[End of the log]\n\n";

/// `messages` as plain text in one user message, for a final answer asked
/// without tools: some models and servers cannot answer a history of tool
/// calls once tools are off. Results are cut at
/// [`TEXT_HISTORY_RESULT_CHARS`].
fn history_as_text(messages: &[Message]) -> Vec<Message> {
    let mut text = String::from(TEXT_HISTORY_HEAD);
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => text.push_str(&format!("\nUser: {}\n", m.content)),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    text.push_str(&format!("\nAssistant: {}\n", m.content));
                }
                for c in &m.tool_calls {
                    text.push_str(&format!(
                        "\nAssistant called the tool `{}` with {}\n",
                        c.name, c.arguments
                    ));
                }
            }
            Role::Tool => {
                let cut: String = m.content.chars().take(TEXT_HISTORY_RESULT_CHARS).collect();
                let more = if cut.len() < m.content.len() {
                    " …"
                } else {
                    ""
                };
                text.push_str(&format!(
                    "\nThe tool `{}` returned{}: {cut}{more}\n",
                    m.tool_name.as_deref().unwrap_or("?"),
                    if m.is_error { " an error" } else { "" }
                ));
            }
        }
    }
    text.push_str(TEXT_HISTORY_TAIL);
    text.push_str(FINAL_ANSWER_NOTE);
    vec![Message::user(text)]
}

/// A caller's own narrowing of the tools offered to the model (e.g. only
/// read-only tools for a planning step). It is not the permission layer:
/// it runs after it, on what the executor's
/// [`tools_for`](crate::ToolExecutor::tools_for) offered, and can only
/// narrow further what the policy already let through.
pub type ToolFilter = Arc<dyn Fn(&[ToolSpec]) -> Vec<ToolSpec> + Send + Sync>;

/// Runs before every request and may rewrite the conversation (e.g. compact
/// it). Changes persist into [`ToolChainResult::messages`].
pub type BeforeRequest = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;

/// Asked when the same call repeats; `true` lets the loop go on.
pub type DoomLoopApproval = Arc<dyn Fn(DoomLoop) -> BoxFuture<'static, bool> + Send + Sync>;

/// The same tool with the same arguments, several times in a row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoomLoop {
    /// The round of the latest call.
    pub round: u32,
    /// The (repaired) tool name.
    pub tool: String,
    /// Its arguments (canonical JSON text).
    pub arguments: String,
    /// How many identical calls in a row, counting the latest.
    pub repeats: u32,
}

/// Tool usage rules added to the system prompt (typically one per plugin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRules {
    /// A heading, e.g. the plugin's name.
    pub name: String,
    /// The rules.
    pub text: String,
}

/// One tool call the model asked for: run, rejected before running (unknown
/// tool, malformed arguments: `error_kind` `not-found` / `invalid-arguments`),
/// or not run because the loop stopped (`not-run`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The model's call id.
    pub call_id: String,
    /// The repaired tool name (the model's own when nothing matched).
    pub tool: String,
    /// The name as the model wrote it.
    pub requested_name: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// The parsed arguments (`null` when they did not parse).
    pub args: Value,
    /// What the model read (truncated when long).
    pub output: String,
    /// Whether it failed.
    pub is_error: bool,
    /// A stable kind for failures: the executor's (`invalid-arguments`,
    /// `sandbox-fault`, ...) or the loop's (`not-found`, `invalid-arguments`,
    /// `timeout`, `aborted`, `not-run`).
    pub error_kind: Option<ErrorKind>,
    /// Structured data for interfaces (never sent to the model).
    pub details: Option<Value>,
    /// The variable holding the full output, readable with `read_var`.
    pub var: Option<String>,
    /// Start, milliseconds since the Unix epoch (from the agent's clock).
    pub started_at_ms: u64,
    /// End, milliseconds since the Unix epoch (from the agent's clock).
    pub ended_at_ms: u64,
    /// Measured duration in milliseconds.
    pub duration_ms: u64,
    /// The round whose response asked for it.
    pub round: u32,
    /// Tokens used by that round's request.
    pub round_usage: Usage,
    /// What the permission layer and hooks did (see [`ToolOutcome::steps`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Value>,
    /// Whether the result came from the result cache (see [`ToolOutcome::cached`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

/// Everything a run produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolChainResult {
    /// How it ended.
    pub status: Status,
    /// Why, for every status but `completed`.
    pub error: Option<String>,
    /// The final answer: the text of the last assistant message this run
    /// produced ("" when it produced none, e.g. aborted before any answer).
    pub text: String,
    /// The messages given to [`Agent::run`] followed by the whole tool chain:
    /// assistant messages with their tool calls, tool results, final answer.
    pub messages: Vec<Message>,
    /// Every tool call, in order.
    pub history: Vec<ToolCallRecord>,
    /// Total tokens.
    pub usage: Usage,
    /// Counts and time.
    pub stats: Stats,
}

impl ToolChainResult {
    /// The final answer ([`text`](Self::text)).
    pub fn final_text(&self) -> &str {
        &self.text
    }
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

/// Runs the loop for one provider and one tool executor. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: Arc<dyn ToolExecutor>,
    options: AgentOptions,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.provider.name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent with the default options (set at least the model with
    /// [`with_options`](Self::with_options)).
    pub fn new(provider: Arc<dyn Provider>, tools: Arc<dyn ToolExecutor>) -> Self {
        Agent {
            provider,
            tools,
            options: AgentOptions::default(),
        }
    }

    /// Replaces the options.
    pub fn with_options(mut self, options: AgentOptions) -> Self {
        self.options = options;
        self
    }

    /// The options.
    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    /// The options, to change between runs (e.g. a fresh abort token).
    pub fn options_mut(&mut self) -> &mut AgentOptions {
        &mut self.options
    }

    /// The system prompt a run starting now would send: the base prompt, the
    /// text of any `Role::System` messages among `messages`, the usage rules,
    /// and today's date (never the time, so the prompt stays cacheable all day).
    /// [`AgentOptions::system_transform`] and request hooks apply to it
    /// before each request, not here.
    pub fn system_prompt(&self, messages: &[Message]) -> String {
        let o = &self.options;
        let mut parts: Vec<String> = Vec::new();
        if !o.base_prompt.trim().is_empty() {
            parts.push(o.base_prompt.trim().to_owned());
        }
        for m in messages.iter().filter(|m| m.role == Role::System) {
            if !m.content.trim().is_empty() {
                parts.push(m.content.trim().to_owned());
            }
        }
        // The options' rules, then the executor's for the tools offered now
        // (a name the options already cover is not repeated).
        let info = ToolCallInfo {
            session_id: o.session_id.clone(),
            agent: o.agent.clone(),
            ..ToolCallInfo::default()
        };
        let mut all: Vec<(String, String)> = o
            .usage_rules
            .iter()
            .map(|r| (r.name.clone(), r.text.clone()))
            .collect();
        for (name, text) in self.tools.usage_rules(&info) {
            if !all.iter().any(|(n, _)| *n == name) {
                all.push((name, text));
            }
        }
        if !all.is_empty() {
            let mut rules = String::from("# Tool usage rules");
            for (name, text) in &all {
                rules.push_str(&format!("\n\n## {name}\n{}", text.trim()));
            }
            parts.push(rules);
        }
        if !o.vars.is_empty() {
            parts.push(crate::var_ref::PROMPT.to_owned());
        }
        parts.push(format!("Today's date: {}.", o.clock.today()));
        parts.join("\n\n")
    }

    /// Runs the loop on `messages` (the conversation so far, ending with the
    /// user's request) and returns the whole tool chain. Never panics on
    /// anything the model, the tools or the provider do; see [`Status`].
    ///
    /// It is [`step`](Self::step) in a loop that runs every proposed call
    /// and keeps every result.
    pub async fn run(&self, messages: Vec<Message>) -> ToolChainResult {
        let span = tracing::info_span!(
            "agent_run",
            model = %self.options.model,
            provider = self.provider.name()
        );
        async {
            let mut state = self.start(messages);
            self.advance(&mut state, false).await;
            self.result(&mut state, true)
        }
        .instrument(span)
        .await
    }

    /// A run on `messages` that has not started: drive it with
    /// [`step`](Self::step). The state can be saved (serde) between steps
    /// and resumed by an agent with the same options, in another process.
    pub fn start(&self, messages: Vec<Message>) -> AgentState {
        info!(messages = messages.len(), "agent run starts");
        AgentState {
            system: self.system_prompt(&messages),
            run: RunState {
                messages,
                text: String::new(),
                history: Vec::new(),
                usage: Usage::default(),
                rounds: 0,
                last_call: None,
                repeats: 0,
                overflowed: false,
                compacted_after_overflow: false,
                unparsable: false,
                compactions: 0,
            },
            state: State::Request { round: 1 },
            awaiting: false,
            elapsed_ms: 0,
            finished: false,
            deadline: None,
        }
    }

    /// Runs `state` on to the next point where a person or a program may
    /// decide: calls proposed ([`StepOutcome::ToolCalls`]; decide with
    /// [`AgentState::decide`], by default a call runs), results ready
    /// ([`StepOutcome::Results`]; replace with [`AgentState::set_result`],
    /// by default they are kept), or the end ([`StepOutcome::Finished`]).
    /// The next call to `step` goes on from there.
    pub async fn step(&self, state: &mut AgentState) -> StepOutcome {
        match self.advance(state, true).await {
            Some(outcome) => outcome,
            None => StepOutcome::Finished(Box::new(self.result(state, false))),
        }
    }

    /// Moves `state` on until a pause (`Some`; only when `pauses`) or the
    /// end (`None`).
    async fn advance(&self, state: &mut AgentState, pauses: bool) -> Option<StepOutcome> {
        let began = Instant::now();
        // The run's time limit counts the time spent in steps, not between them.
        let deadline = *state.deadline.get_or_insert_with(|| {
            let used = Duration::from_millis(state.elapsed_ms);
            self.options
                .timeout
                .and_then(|d| tokio::time::Instant::now().checked_add(d.saturating_sub(used)))
        });
        let ctx = Ctx {
            agent: self,
            opts: &self.options,
            system: state.system.clone(),
            deadline,
        };
        let outcome = ctx.advance(state, pauses).await;
        state.elapsed_ms = state
            .elapsed_ms
            .saturating_add(u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX));
        outcome
    }

    /// The run's result (and, the first time, its `Finish` event); `take`
    /// moves the conversation out of `state` rather than copying it.
    fn result(&self, state: &mut AgentState, take: bool) -> ToolChainResult {
        let (status, error) = match &state.state {
            State::Done { status, error } => (*status, error.clone()),
            _ => (Status::Error, Some("the run has not finished".to_owned())),
        };
        let run = &mut state.run;
        let stats = Stats {
            rounds: run.rounds,
            tool_calls: u32::try_from(run.history.len()).unwrap_or(u32::MAX),
            errors: u32::try_from(run.history.iter().filter(|h| h.is_error).count())
                .unwrap_or(u32::MAX),
            elapsed_ms: state.elapsed_ms,
            compactions: run.compactions,
        };
        if !state.finished {
            state.finished = true;
            match status {
                Status::Completed | Status::MaxRounds => {
                    info!(%status, rounds = stats.rounds, calls = stats.tool_calls, "agent run ends");
                }
                _ => warn!(%status, error = ?error, rounds = stats.rounds, "agent run ends early"),
            }
            if let Some(sink) = &self.options.events {
                sink(AgentEvent::Finish {
                    status,
                    error: error.clone(),
                    usage: run.usage,
                    stats,
                });
            }
        }
        let (text, messages, history) = if take {
            (
                std::mem::take(&mut run.text),
                std::mem::take(&mut run.messages),
                std::mem::take(&mut run.history),
            )
        } else {
            (run.text.clone(), run.messages.clone(), run.history.clone())
        };
        ToolChainResult {
            status,
            error,
            text,
            messages,
            history,
            usage: run.usage,
            stats,
        }
    }
}

impl Ctx<'_> {
    /// Moves `state` on until a pause (`Some`; only when `pauses`) or the
    /// end (`None`).
    async fn advance(&self, state: &mut AgentState, pauses: bool) -> Option<StepOutcome> {
        let run = &mut state.run;
        loop {
            let current = std::mem::replace(&mut state.state, State::done(Status::Error, None));
            state.state = match current {
                State::Request { round } if round > self.opts.max_rounds => State::FinalAnswer {
                    round,
                    status: Status::MaxRounds,
                    error: Some(format!(
                        "stopped after {} rounds of tool calls",
                        self.opts.max_rounds
                    )),
                },
                State::Request { round } => self.request(run, round).await,
                State::Execute {
                    round,
                    calls,
                    tools,
                    builtin,
                    completion,
                } => {
                    let (planned, stop) = self.plan(run, round, calls, &tools, builtin).await;
                    State::Proposed {
                        round,
                        planned,
                        stop,
                        completion,
                    }
                }
                State::Proposed { .. } if pauses && !state.awaiting => {
                    let view = crate::step::proposed(&current);
                    state.state = current;
                    state.awaiting = true;
                    return Some(StepOutcome::ToolCalls(view));
                }
                State::Proposed {
                    round,
                    planned,
                    stop,
                    completion,
                } => {
                    state.awaiting = false;
                    self.run_planned(round, planned, stop, completion).await
                }
                State::Ran { .. } if pauses && !state.awaiting => {
                    let view = crate::step::ready(&current);
                    state.state = current;
                    state.awaiting = true;
                    return Some(StepOutcome::Results(view));
                }
                State::Ran {
                    round,
                    done,
                    stop,
                    completion,
                } => {
                    state.awaiting = false;
                    self.record_round(run, round, done, stop, completion)
                }
                State::FinalAnswer {
                    round,
                    status,
                    error,
                } => self.final_answer(run, round, status, error).await,
                done @ State::Done { .. } => {
                    state.state = done;
                    return None;
                }
            };
        }
    }
}

/// The states of one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub(crate) enum State {
    /// Send a request with tools.
    Request { round: u32 },
    /// Check the tool calls of the response to `round`.
    Execute {
        round: u32,
        calls: Vec<ToolCall>,
        tools: Vec<ToolSpec>,
        builtin: bool,
        completion: RoundInfo,
    },
    /// The calls, checked, before they run (a pause of [`Agent::step`]).
    Proposed {
        round: u32,
        planned: Vec<Planned>,
        stop: Option<Stop>,
        completion: RoundInfo,
    },
    /// The calls ran; their results before they are recorded (a pause).
    Ran {
        round: u32,
        done: Vec<(Planned, Executed)>,
        stop: Option<Stop>,
        completion: RoundInfo,
    },
    /// One request without tools for the answer: after the round limit, a
    /// refused doom loop, or an empty reply after tool results. The run then
    /// ends with `status` and `error` (what happened), and the answer.
    FinalAnswer {
        round: u32,
        status: Status,
        error: Option<String>,
    },
    /// Over.
    Done {
        status: Status,
        error: Option<String>,
    },
}

impl State {
    fn done(status: Status, error: impl Into<Option<String>>) -> Self {
        State::Done {
            status,
            error: error.into(),
        }
    }
}

/// What the loop keeps of a response for its round's end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RoundInfo {
    usage: Usage,
    finish_reason: FinishReason,
}

/// Why the run must stop now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stop {
    status: Status,
    error: Option<String>,
}

impl Stop {
    fn into_state(self) -> State {
        State::Done {
            status: self.status,
            error: self.error,
        }
    }

    fn reason(&self) -> String {
        self.error
            .clone()
            .unwrap_or_else(|| self.status.to_string())
    }
}

/// The mutable data of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunState {
    pub(crate) messages: Vec<Message>,
    /// The text of the last assistant message of this run.
    text: String,
    history: Vec<ToolCallRecord>,
    usage: Usage,
    rounds: u32,
    /// The last call's (tool, canonical arguments), for doom-loop detection.
    last_call: Option<(String, String)>,
    repeats: u32,
    /// The last request failed because the conversation no longer fits the
    /// model's context ([`is_context_overflow`]).
    overflowed: bool,
    /// Whether the history was compacted after a refusal as too long (once
    /// per run: a second refusal ends the run).
    compacted_after_overflow: bool,
    /// Times the history was compacted ([`Stats::compactions`]).
    #[serde(default)]
    compactions: u32,
    /// The last request failed because the server could not parse the
    /// model's own output ([`is_model_output_error`]), after its retries.
    #[serde(default)]
    unparsable: bool,
}

/// The read-only context of a run.
struct Ctx<'a> {
    agent: &'a Agent,
    opts: &'a AgentOptions,
    system: String,
    deadline: Option<tokio::time::Instant>,
}

/// One tool call after repair and parsing.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Planned {
    pub(crate) call: ToolCall,
    pub(crate) tool: String,
    pub(crate) args: Value,
    pub(crate) action: Action,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub(crate) enum Action {
    /// Hand it to the executor (or the built-in `read_var`).
    Run { read_only: bool, builtin: bool },
    /// Answer with this error without running anything.
    Reject { message: String, kind: ErrorKind },
    /// Not run because the loop stops; the text says why.
    Skip { reason: String },
    /// Not run again: the same read-only call just ran; answered with its
    /// result and a note to use it (small models often ask twice).
    Repeat { output: String },
    /// Not run: the caller of [`Agent::step`] gave its result.
    Supplied { output: String, is_error: bool },
}

/// When a call started: by the agent's clock, and monotonic.
struct Timing {
    at_ms: u64,
    instant: Instant,
}

/// The result of running one planned call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Executed {
    pub(crate) outcome: ToolOutcome,
    pub(crate) for_model: String,
    pub(crate) var: Option<String>,
    started_at_ms: u64,
    ended_at_ms: u64,
    duration_ms: u64,
    stop: Option<Stop>,
    /// Replaced by the caller of [`Agent::step`]: the variable holds the
    /// replacement too, so the model cannot read the original back.
    #[serde(default)]
    pub(crate) replaced: bool,
}

impl Ctx<'_> {
    fn emit(&self, event: AgentEvent) {
        if let Some(sink) = &self.opts.events {
            sink(event);
        }
    }

    fn now_ms(&self) -> u64 {
        unix_ms(self.opts.clock.now())
    }

    fn start_timing(&self) -> Timing {
        Timing {
            at_ms: self.now_ms(),
            instant: Instant::now(),
        }
    }

    /// Resolves when the run must stop: abort (preferred) or deadline.
    async fn interrupted(&self) -> Stop {
        let deadline = self.deadline;
        tokio::select! {
            biased;
            _ = self.opts.abort.cancelled() => Stop {
                status: Status::Aborted,
                error: Some("aborted".to_owned()),
            },
            _ = async move {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending::<()>().await,
                }
            } => Stop {
                status: Status::Timeout,
                error: Some(format!(
                    "the run's time limit ({:?}) passed",
                    self.opts.timeout.unwrap_or_default()
                )),
            },
        }
    }

    /// `Some` when the run must stop already.
    fn stop_now(&self) -> Option<Stop> {
        if self.opts.abort.is_cancelled() {
            return Some(Stop {
                status: Status::Aborted,
                error: Some("aborted".to_owned()),
            });
        }
        if self
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d)
        {
            return Some(Stop {
                status: Status::Timeout,
                error: Some(format!(
                    "the run's time limit ({:?}) passed",
                    self.opts.timeout.unwrap_or_default()
                )),
            });
        }
        None
    }

    /// The run's variables as calls carry them to the executor.
    fn run_vars(&self) -> crate::vars::RunVars {
        crate::vars::RunVars {
            store: self.opts.vars.clone(),
            max_page: self.opts.max_output_bytes,
        }
    }

    /// The tools for the next request: the executor's plus `read_var` when
    /// the store holds something, through the filter. The flag says whether
    /// the `read_var` offered is the loop's own; an executor that serves
    /// `read_var` ([`ToolExecutor::serves_read_var`]) offers it (or not,
    /// under its policy) and answers it.
    fn current_tools(&self) -> (Vec<ToolSpec>, bool) {
        let info = ToolCallInfo {
            session_id: self.opts.session_id.clone(),
            agent: self.opts.agent.clone(),
            vars: Some(self.run_vars()),
            ..ToolCallInfo::default()
        };
        let mut all = self.agent.tools.tools_for(&info);
        let shadowed = self.agent.tools.serves_read_var() || all.iter().any(|t| t.name == READ_VAR);
        if shadowed {
            debug!("the executor's `read_var` shadows the built-in one");
        } else if !self.opts.vars.is_empty() {
            all.push(read_var_spec(self.opts.max_output_bytes));
        }
        let tools = match &self.opts.tool_filter {
            Some(filter) => filter(&all),
            None => all,
        };
        let builtin = !shadowed && tools.iter().any(|t| t.name == READ_VAR);
        (tools, builtin)
    }

    /// Compacts `run.messages` when the next request would pass the policy's
    /// trigger (see [`context`](crate::context)); `forced` after the server
    /// refused a request as too long, down to half of it at most. Returns
    /// whether anything changed.
    /// `fixed_chars`: the system prompt's and the tools' characters.
    async fn fit_context(
        &self,
        run: &mut RunState,
        round: u32,
        fixed_chars: usize,
        forced: bool,
    ) -> bool {
        use crate::context::{
            REMOVED_MARK, SUMMARY_MARK, protected, prunable, pruned_stub, summary_cut,
        };
        let policy = &self.opts.context;
        let counter = &policy.counter;
        let known = policy.window_for(&self.opts.model);
        if known.is_none() && !forced {
            return false;
        }
        let fixed = counter.estimate_chars(fixed_chars);
        let before = fixed.saturating_add(counter.messages(&run.messages));
        let window = known.unwrap_or(before);
        // Room for the reply: max_tokens, at most a quarter of the window.
        let reply = self.opts.max_tokens.unwrap_or(window / 8).min(window / 4);
        let room = u64::from(window.saturating_sub(reply));
        let share =
            |percent: u8| u32::try_from(room * u64::from(percent) / 100).unwrap_or(u32::MAX);
        let mut target = share(policy.target_percent);
        if forced {
            target = target.min(before / 2);
        } else if before <= share(policy.trigger_percent) {
            return false;
        }
        let mut c = Compaction {
            tokens_before: before,
            window,
            ..Compaction::default()
        };
        let mut now = before;
        let p = protected(&run.messages);
        // 1. Old tool outputs become stubs naming their variable.
        for i in prunable(&run.messages, p) {
            if now <= target {
                break;
            }
            let m = &run.messages[i];
            let known = m.tool_call_id.as_deref().and_then(|id| {
                run.history
                    .iter()
                    .rev()
                    .find(|h| h.call_id == id)
                    .and_then(|h| h.var.clone())
            });
            let var = known.unwrap_or_else(|| self.opts.vars.insert(m.content.clone()));
            let was = counter.message(m);
            let stub = pruned_stub(m.content.len(), Some(&var));
            let m = &mut run.messages[i];
            m.content = stub;
            now = now.saturating_sub(was).saturating_add(counter.message(m));
            c.pruned_outputs += 1;
            c.pruned_vars.push(var);
        }
        // 2. The oldest turns become a summary.
        if now > target
            && let Some(cut) = summary_cut(counter, &run.messages, p, fixed, target)
        {
            let summary = if policy.summarize {
                let (summary, usage) = self.summarize(&run.messages[..cut], room).await;
                run.usage += usage;
                summary
            } else {
                None
            };
            c.summarized_by_model = summary.is_some();
            let text = match summary {
                Some(s) => format!("{SUMMARY_MARK}\n{s}"),
                None => format!("{REMOVED_MARK} ({cut} messages)"),
            };
            run.messages.splice(..cut, [Message::user(text)]);
            c.summarized_messages = u32::try_from(cut).unwrap_or(u32::MAX);
            now = fixed.saturating_add(counter.messages(&run.messages));
        }
        if c.pruned_outputs == 0 && c.summarized_messages == 0 {
            return false;
        }
        c.tokens_after = now;
        run.compactions = run.compactions.saturating_add(1);
        info!(
            round,
            pruned = c.pruned_outputs,
            summarized = c.summarized_messages,
            before,
            after = now,
            window,
            "history compacted to fit the context window"
        );
        self.emit(AgentEvent::ContextCompacted {
            round,
            compaction: c,
        });
        true
    }

    /// Asks the model for a summary of `messages` (no tools); `None` when it
    /// fails or says nothing; and the tokens it used.
    async fn summarize(&self, messages: &[Message], room: u64) -> (Option<String>, Usage) {
        let max_tokens = u32::try_from((room / 4).min(1024)).unwrap_or(1024);
        // The transcript takes at most half the room.
        let max_chars = self.opts.context.counter.chars_for(room / 2);
        let request = CompletionRequest {
            model: self.opts.model.clone(),
            system: Some(crate::context::SUMMARY_PROMPT.to_owned()),
            messages: vec![Message::user(crate::context::as_transcript(
                messages, max_chars,
            ))],
            max_tokens: Some(max_tokens),
            ..CompletionRequest::default()
        };
        let r = tokio::select! {
            biased;
            _ = self.interrupted() => return (None, Usage::default()),
            r = self.agent.provider.complete(&request, &|_| {}, &self.opts.abort) => r,
        };
        match r {
            Ok(c) => {
                let (text, _) = crate::think::split_think(&c.message.content);
                let text = text.trim();
                ((!text.is_empty()).then(|| text.to_owned()), c.usage)
            }
            Err(e) => {
                warn!(error = %e, "the model could not summarise the history");
                (None, Usage::default())
            }
        }
    }

    /// Sends one request and streams it; `extra` messages go to this request only.
    async fn complete(
        &self,
        run: &mut RunState,
        round: u32,
        tools: &[ToolSpec],
        choice: ToolChoice,
        extra: Option<Message>,
    ) -> Result<Completion, Stop> {
        if let Some(stop) = self.stop_now() {
            return Err(stop);
        }
        if let Some(hook) = &self.opts.before_request {
            hook(&mut run.messages);
        }
        // With no window known there is nothing to estimate for (a refusal
        // as too long is handled in `request`).
        let managed = self.opts.context.window_for(&self.opts.model).is_some();
        let fixed_chars = if managed {
            let chars = crate::context::request_chars(&self.system, tools, []);
            self.fit_context(run, round, chars, false).await;
            chars
        } else {
            0
        };
        // The request takes the history and gives it back after the call, so a
        // round does not copy it. (System messages, merged into the system
        // prompt, are left out; only then is the history copied.)
        let lent = !run.messages.iter().any(|m| m.role == Role::System);
        let mut messages: Vec<Message> = if lent {
            std::mem::take(&mut run.messages)
        } else {
            run.messages
                .iter()
                .filter(|m| m.role != Role::System)
                .cloned()
                .collect()
        };
        let extras = usize::from(extra.is_some());
        let extra_sent = extra.clone();
        messages.extend(extra);
        let mut request = CompletionRequest {
            model: self.opts.model.clone(),
            system: Some(self.system.clone()),
            messages,
            tools: tools
                .iter()
                .map(|t| ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.input_schema.clone(),
                })
                .collect(),
            tool_choice: if tools.is_empty() {
                ToolChoice::None
            } else {
                choice
            },
            parallel_tool_calls: self.opts.parallel_tool_calls
                && !tools.is_empty()
                && choice != ToolChoice::None,
            max_tokens: self.opts.max_tokens,
            temperature: self.opts.temperature,
            response_schema: None,
            grammar: None,
            ..Default::default()
        };
        crate::request::prepare(self.opts, &mut request).await;
        self.emit(AgentEvent::RequestStart {
            round,
            messages: request.messages.len(),
            tools: request.tools.len(),
        });
        debug!(
            round,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "request"
        );
        run.rounds += 1;

        let partial = Mutex::new(String::new());
        // `<think>…</think>` in the text is reasoning, not answer.
        let think = Mutex::new(crate::think::ThinkFilter::default());
        let pieces = |pieces: Vec<crate::think::Piece>| {
            for piece in pieces {
                match piece {
                    crate::think::Piece::Text(text) => {
                        if let Ok(mut p) = partial.lock() {
                            p.push_str(&text);
                        }
                        self.emit(AgentEvent::TextDelta { round, text });
                    }
                    crate::think::Piece::Reasoning(text) => {
                        self.emit(AgentEvent::ReasoningDelta { round, text });
                    }
                }
            }
        };
        let on_delta = |delta: Delta| match delta {
            Delta::Text(text) => {
                let split = think.lock().map(|mut f| f.push(&text)).unwrap_or_default();
                pieces(split);
            }
            Delta::Reasoning(text) => self.emit(AgentEvent::ReasoningDelta { round, text }),
            Delta::ToolCallStarted { id, name } => self.emit(AgentEvent::ToolCallStreamed {
                round,
                call_id: id,
                name,
            }),
        };
        // A server that could not parse the model's own output (sampling
        // differs on the next attempt) is asked again, a bounded number of times.
        let mut attempts = 1;
        let result = loop {
            let r = tokio::select! {
                biased;
                stop = self.interrupted() => Err(stop),
                r = self.agent.provider.complete(&request, &on_delta, &self.opts.abort) => Ok(r),
            };
            match &r {
                Ok(Err(e)) if attempts <= MODEL_OUTPUT_RETRIES && is_model_output_error(e) => {
                    warn!(round, attempts, error = %e, "the server could not parse the model's output; asking again");
                    attempts += 1;
                    if let Ok(mut p) = partial.lock() {
                        p.clear();
                    }
                }
                _ => break r,
            }
        };
        // Still unparsable: this round goes once through a prompt protocol
        // (tools in the system prompt, calls parsed from the text), which
        // leaves the server nothing of the model's to parse.
        let native = self.agent.provider.prompt_profile().is_none();
        let mut through_prompt = false;
        let result = match result {
            Ok(Err(e)) if native && !request.tools.is_empty() && is_model_output_error(&e) => {
                warn!(round, error = %e, "the server could not parse the model's output; this round goes through the json prompt protocol");
                through_prompt = true;
                if let Ok(mut p) = partial.lock() {
                    p.clear();
                }
                tokio::select! {
                    biased;
                    stop = self.interrupted() => Err(stop),
                    r = crate::provider::prompt::complete_through_prompt(
                        self.agent.provider.as_ref(),
                        crate::provider::prompt::PromptProfile::Json,
                        &request,
                        &on_delta,
                        &self.opts.abort,
                    ) => Ok(r),
                }
            }
            other => other,
        };
        if lent {
            let mut history = std::mem::take(&mut request.messages);
            history.truncate(history.len() - extras);
            run.messages = history;
        }
        let keep_partial = |run: &mut RunState| {
            let text = partial.lock().map(|p| p.clone()).unwrap_or_default();
            if !text.is_empty() {
                run.text.clone_from(&text);
                run.messages.push(Message::assistant(text));
            }
        };
        pieces(think.lock().map(|mut f| f.finish()).unwrap_or_default());
        match result {
            Ok(Ok(mut completion)) => {
                run.usage += completion.usage;
                let sent = if managed {
                    run.messages
                        .iter()
                        .chain(extra_sent.iter())
                        .fold(fixed_chars, |sum, m| {
                            sum.saturating_add(crate::context::message_chars(m))
                        })
                } else {
                    0
                };
                self.opts
                    .context
                    .counter
                    .observe(sent, completion.usage.input_tokens);
                let (answer, _reasoning) = crate::think::split_think(&completion.message.content);
                completion.message.content = answer;
                Ok(completion)
            }
            Ok(Err(ProviderError::Cancelled)) if self.stop_now().is_some() => {
                keep_partial(run);
                Err(self.stop_now().unwrap_or(Stop {
                    status: Status::Aborted,
                    error: Some("aborted".to_owned()),
                }))
            }
            Ok(Err(e)) => {
                warn!(round, error = %e, "provider request failed");
                keep_partial(run);
                run.overflowed = is_context_overflow(&e);
                run.unparsable = is_model_output_error(&e);
                if let (true, ProviderError::Status { body, .. }) = (run.overflowed, &e)
                    && let Some(window) = crate::context::window_in_refusal(body)
                {
                    self.opts.context.counter.learn_window(window);
                }
                let error = if run.overflowed {
                    format!("the conversation no longer fits the model's context: {e}")
                } else if is_model_output_error(&e) || through_prompt {
                    let then = if through_prompt {
                        ", then once through the json prompt protocol"
                    } else {
                        ""
                    };
                    format!(
                        "the server could not parse the model's own output ({attempts} attempts{then}): {e}"
                    )
                } else {
                    format!("model request failed: {e}")
                };
                Err(Stop {
                    status: Status::Error,
                    error: Some(error),
                })
            }
            Err(stop) => {
                keep_partial(run);
                Err(stop)
            }
        }
    }

    /// State `Request`: ask the model with tools.
    async fn request(&self, run: &mut RunState, round: u32) -> State {
        let (tools, builtin) = self.current_tools();
        let completion = match self
            .complete(run, round, &tools, ToolChoice::Auto, None)
            .await
        {
            Ok(c) => c,
            // Refused as too long: compact the history (once) and ask again.
            Err(_)
                if run.overflowed
                    && !run.compacted_after_overflow
                    && self
                        .fit_context(
                            run,
                            round,
                            crate::context::request_chars(&self.system, &tools, []),
                            true,
                        )
                        .await =>
            {
                run.compacted_after_overflow = true;
                run.overflowed = false;
                return State::Request { round };
            }
            // Too long for the model: the answer comes from the history as
            // text, results cut short (`final_answer`).
            Err(stop) if run.overflowed && !run.history.is_empty() => {
                return State::FinalAnswer {
                    round: round + 1,
                    status: stop.status,
                    error: stop.error,
                };
            }
            Err(stop) => return stop.into_state(),
        };
        let Completion {
            message,
            finish_reason,
            usage,
        } = completion;
        let calls = message.tool_calls.clone();
        run.text.clone_from(&message.content);
        run.messages.push(Message {
            role: Role::Assistant,
            ..message
        });
        let info = RoundInfo {
            usage,
            finish_reason,
        };
        if calls.is_empty() {
            self.end_round(round, info, 0);
            // An empty reply after tool results (small models do this): ask
            // for the answer instead of ending with nothing.
            if run.text.trim().is_empty() && !run.history.is_empty() {
                info!(
                    round,
                    "empty reply after tool results; asking for a final answer"
                );
                return State::FinalAnswer {
                    round: round + 1,
                    status: Status::Completed,
                    error: None,
                };
            }
            return State::done(Status::Completed, None);
        }
        State::Execute {
            round,
            calls,
            tools,
            builtin,
            completion: info,
        }
    }

    fn end_round(&self, round: u32, info: RoundInfo, tool_calls: usize) {
        self.emit(AgentEvent::RoundEnd {
            round,
            usage: info.usage,
            finish_reason: info.finish_reason,
            tool_calls,
        });
    }

    /// State `FinalAnswer`: one request in which tools cannot be called.
    /// The definitions are still sent, with `tool_choice: none`: Anthropic
    /// rejects a request whose history holds tool calls but defines no tools.
    /// When the reply has no text (empty, or only tool calls), the same
    /// request goes again without tools, the tool history rendered as text;
    /// when that is empty too, the run's error says so. The run ends with
    /// `status` and `error`, which say why a final answer was asked for.
    async fn final_answer(
        &self,
        run: &mut RunState,
        round: u32,
        status: Status,
        mut error: Option<String>,
    ) -> State {
        info!(round, %status, "asking for a final answer");
        let note = Message::user(FINAL_ANSWER_NOTE);
        let (tools, _) = self.current_tools();
        let completion = match self
            .complete(run, round, &tools, ToolChoice::None, Some(note))
            .await
        {
            Ok(c) => c,
            // Too long, or a call the server could not parse although none
            // may be made (llama.cpp's HTTP 500): straight to the history as
            // text below, which holds no calls.
            Err(stop) if run.overflowed || (run.unparsable && stop.status == Status::Error) => {
                Completion {
                    message: Message::assistant(""),
                    finish_reason: FinishReason::Stop,
                    usage: Usage::default(),
                }
            }
            Err(stop) => return stop.into_state(),
        };
        if !completion.message.tool_calls.is_empty() {
            warn!(
                round,
                "the model asked for tools in the final answer; ignoring the calls"
            );
        }
        let mut completion = completion;
        // A small model may copy the note into its answer (or answer only that).
        completion.message.content = without_note(&completion.message.content);
        if completion.message.content.trim().is_empty()
            || shaped_like_a_call(&completion.message.content)
        {
            info!(
                round,
                "the final answer was empty or a tool call written as text; asking again with the history as text"
            );
            let as_text = history_as_text(&run.messages);
            let original = std::mem::replace(&mut run.messages, as_text);
            let plain = self.complete(run, round, &[], ToolChoice::None, None).await;
            run.messages = original;
            let plain = plain.map(|mut c| {
                c.message.content = without_note(&c.message.content);
                c
            });
            match plain {
                Ok(c)
                    if !c.message.content.trim().is_empty()
                        && !shaped_like_a_call(&c.message.content) =>
                {
                    completion = c;
                }
                Ok(_) | Err(_) => {
                    let note = if completion.message.content.trim().is_empty() {
                        "the model gave no final answer, with or without tools"
                    } else {
                        "the model answered with a tool call written as text, with or without tools"
                    };
                    error = Some(match error {
                        Some(e) => format!("{e}; {note}"),
                        None => note.to_owned(),
                    });
                }
            }
        }
        run.text.clone_from(&completion.message.content);
        run.messages
            .push(Message::assistant(completion.message.content));
        self.end_round(
            round,
            RoundInfo {
                usage: completion.usage,
                finish_reason: completion.finish_reason,
            },
            0,
        );
        State::done(status, error)
    }

    /// State `Proposed`, decided: runs the calls that are to run (in
    /// parallel when all are read-only), and gives every other call its
    /// result without running it.
    async fn run_planned(
        &self,
        round: u32,
        planned: Vec<Planned>,
        plan_stop: Option<Stop>,
        completion: RoundInfo,
    ) -> State {
        let runnable: Vec<usize> = planned
            .iter()
            .enumerate()
            .filter(|(_, p)| matches!(p.action, Action::Run { .. }))
            .map(|(i, _)| i)
            .collect();
        let parallel = self.opts.parallel_read_only
            && runnable.len() > 1
            && runnable.iter().all(|&i| {
                matches!(
                    planned[i].action,
                    Action::Run {
                        read_only: true,
                        ..
                    }
                )
            });
        debug!(
            round,
            calls = planned.len(),
            parallel,
            "executing tool calls"
        );

        let mut executed: Vec<Option<Executed>> = Vec::new();
        executed.resize_with(planned.len(), || None);
        let mut exec_stop: Option<Stop> = self.stop_now();
        if exec_stop.is_none() && parallel {
            let results = futures::future::join_all(
                runnable.iter().map(|&i| self.run_call(round, &planned[i])),
            )
            .await;
            for (&i, r) in runnable.iter().zip(results) {
                if exec_stop.is_none() {
                    exec_stop = r.stop.clone();
                }
                executed[i] = Some(r);
            }
        } else if exec_stop.is_none() {
            for &i in &runnable {
                if let Some(s) = self.stop_now() {
                    exec_stop = Some(s);
                    break;
                }
                let r = self.run_call(round, &planned[i]).await;
                let stop = r.stop.clone();
                executed[i] = Some(r);
                if stop.is_some() {
                    exec_stop = stop;
                    break;
                }
            }
        }
        // An abort or deadline during execution wins over a doom loop found earlier.
        let stop = exec_stop.or(plan_stop);

        let done = planned
            .into_iter()
            .zip(executed)
            .map(|(p, e)| match (&p.action, e) {
                (Action::Run { .. }, Some(e)) => (p, e),
                (action, _) => {
                    let outcome = match action {
                        Action::Reject { message, kind } => ToolOutcome {
                            details: Some(serde_json::json!({
                                "kind": kind.as_str(),
                                "message": message,
                                "arguments": p.call.arguments,
                            })),
                            ..error_outcome(message.clone(), kind.clone())
                        },
                        Action::Skip { reason } => {
                            error_outcome(format!("not run: {reason}"), ErrorKind::NotRun)
                        }
                        Action::Repeat { output } => ok_outcome(output.clone()),
                        Action::Supplied {
                            output,
                            is_error: true,
                        } => error_outcome(output.clone(), ErrorKind::ToolFailed),
                        Action::Supplied { output, .. } => ok_outcome(output.clone()),
                        Action::Run { .. } => {
                            let reason = match &stop {
                                Some(s) => s.reason(),
                                None => "the loop stopped".to_owned(),
                            };
                            error_outcome(format!("not run: {reason}"), ErrorKind::NotRun)
                        }
                    };
                    let e = self.finish(round, &p, outcome, self.start_timing(), None);
                    (p, e)
                }
            })
            .collect();
        State::Ran {
            round,
            done,
            stop,
            completion,
        }
    }

    /// State `Ran`, decided: appends the results in call order (every call
    /// gets exactly one result) and goes on.
    fn record_round(
        &self,
        run: &mut RunState,
        round: u32,
        done: Vec<(Planned, Executed)>,
        stop: Option<Stop>,
        info: RoundInfo,
    ) -> State {
        let n_calls = done.len();
        for (p, e) in done {
            if let (true, Some(var)) = (e.replaced, &e.var) {
                self.opts.vars.replace(var, e.outcome.output.clone());
            }
            self.record(run, round, info.usage, p, e);
        }
        self.end_round(round, info, n_calls);

        match stop {
            // A refused doom loop: the model has what it needs; ask for the
            // answer rather than end with nothing.
            Some(stop) if stop.status == Status::DoomLoop => State::FinalAnswer {
                round: round + 1,
                status: stop.status,
                error: stop.error,
            },
            Some(stop) => stop.into_state(),
            None => State::Request { round: round + 1 },
        }
    }

    /// Repairs names, parses arguments and checks for doom loops, in call
    /// order. Returns the plan and, when the loop must stop, why (the calls
    /// from the offending one on are then skipped).
    async fn plan(
        &self,
        run: &mut RunState,
        round: u32,
        calls: Vec<ToolCall>,
        tools: &[ToolSpec],
        builtin: bool,
    ) -> (Vec<Planned>, Option<Stop>) {
        let mut planned = Vec::with_capacity(calls.len());
        let mut stop: Option<Stop> = None;
        for call in calls {
            let resolved = resolve_tool_name(&call.name, tools.iter().map(|t| t.name.as_str()));
            let (tool, args, action) = match resolved {
                Err(rejection) => (call.name.clone(), Value::Null, Action::rejected(rejection)),
                Ok(tool) => match parse_arguments(&call.arguments).and_then(|args| {
                    crate::var_ref::substitute(args, &self.opts.vars).map_err(CallRejection::from)
                }) {
                    Err(rejection) => (tool, Value::Null, Action::rejected(rejection)),
                    Ok(args) => {
                        let read_only = tools
                            .iter()
                            .find(|t| t.name == tool)
                            .is_some_and(|t| t.read_only);
                        let action = Action::Run {
                            read_only,
                            builtin: builtin && tool == READ_VAR,
                        };
                        (tool, args, action)
                    }
                },
            };
            if tool != call.name {
                debug!(requested = %call.name, %tool, "tool name repaired");
            }
            self.emit(AgentEvent::ToolCallPending {
                round,
                call_id: call.id.clone(),
                tool: tool.clone(),
                requested_name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            if let Some(s) = &stop {
                let reason = s.error.clone().unwrap_or_else(|| s.status.to_string());
                planned.push(Planned {
                    call,
                    tool,
                    args,
                    action: Action::Skip { reason },
                });
                continue;
            }
            let action = match self.check_doom_loop(run, round, &tool, &args, &call).await {
                Ok(()) => repeated(run, &tool, action),
                Err(s) => {
                    let reason = s.error.clone().unwrap_or_else(|| s.status.to_string());
                    stop = Some(s);
                    Action::Skip { reason }
                }
            };
            planned.push(Planned {
                call,
                tool,
                args,
                action,
            });
        }
        (planned, stop)
    }

    /// Counts identical calls in a row (same tool, same canonical arguments,
    /// across rounds); at the threshold asks the approval callback. `Err` when
    /// the loop must stop.
    async fn check_doom_loop(
        &self,
        run: &mut RunState,
        round: u32,
        tool: &str,
        args: &Value,
        call: &ToolCall,
    ) -> Result<(), Stop> {
        let arguments = if args.is_null() {
            call.arguments.trim().to_owned()
        } else {
            canonical_json(args)
        };
        let key = (tool.to_owned(), arguments);
        if run.last_call.as_ref() == Some(&key) {
            run.repeats += 1;
        } else {
            run.last_call = Some(key.clone());
            run.repeats = 1;
        }
        if run.repeats < self.opts.doom_loop_threshold {
            return Ok(());
        }
        let (tool, arguments) = key;
        let repeats = run.repeats;
        warn!(%tool, repeats, "doom loop detected");
        self.emit(AgentEvent::DoomLoopDetected {
            round,
            tool: tool.clone(),
            arguments: arguments.clone(),
            repeats,
        });
        let doom = DoomLoop {
            round,
            tool: tool.clone(),
            arguments,
            repeats,
        };
        let approved = match &self.opts.doom_loop_approval {
            None => false,
            Some(ask) => tokio::select! {
                biased;
                s = self.interrupted() => return Err(s),
                ok = ask(doom) => ok,
            },
        };
        if approved {
            info!(%tool, "doom loop approved; going on");
            run.repeats = 0;
            return Ok(());
        }
        Err(Stop {
            status: Status::DoomLoop,
            error: Some(format!(
                "`{tool}` was called {repeats} times in a row with the same arguments; \
                 its result is already above: do not call it again, answer with what you have"
            )),
        })
    }

    /// Runs one call under the per-call timeout, the run's deadline and abort.
    async fn run_call(&self, round: u32, p: &Planned) -> Executed {
        let builtin = matches!(p.action, Action::Run { builtin: true, .. });
        let timing = self.start_timing();
        self.emit(AgentEvent::ToolCallRunning {
            round,
            call_id: p.call.id.clone(),
            tool: p.tool.clone(),
            started_at_ms: timing.at_ms,
        });
        let mut stop = None;
        let outcome = if builtin {
            match self
                .opts
                .vars
                .call_read_var(&p.args, self.opts.max_output_bytes)
            {
                Ok(page) => ok_outcome(page),
                Err(e) => error_outcome(e.to_string(), ErrorKind::InvalidArguments),
            }
        } else {
            // Cancelled when the run stops, and once the call is over (so a
            // native tool's own tasks end with it, timeouts included).
            let abort = self.opts.abort.child_token();
            let _cancel_when_over = abort.clone().drop_guard();
            let progress = self.opts.events.clone().map(|sink| {
                let (call_id, tool) = (p.call.id.clone(), p.tool.clone());
                let reports = std::sync::atomic::AtomicU32::new(0);
                let f: crate::tools::ProgressFn = Arc::new(move |message: &str, fraction| {
                    let n = reports.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if n < crate::tools::MAX_PROGRESS_REPORTS {
                        sink(AgentEvent::ToolCallProgress {
                            round,
                            call_id: call_id.clone(),
                            tool: tool.clone(),
                            message: message.to_owned(),
                            fraction: fraction
                                .filter(|f| f.is_finite())
                                .map(|f| f.clamp(0.0, 1.0)),
                        });
                    }
                });
                f
            });
            let info = ToolCallInfo {
                call_id: p.call.id.clone(),
                session_id: self.opts.session_id.clone(),
                agent: self.opts.agent.clone(),
                round,
                abort: abort.clone(),
                progress,
                vars: Some(self.run_vars()),
            };
            let call = self.agent.tools.call(&p.tool, p.args.clone(), info);
            let limited = async {
                match self.opts.tool_timeout {
                    Some(limit) => match tokio::time::timeout(limit, call).await {
                        Ok(outcome) => outcome,
                        Err(_) => error_outcome(
                            format!(
                                "`{}` did not finish within {} ms and was stopped",
                                p.tool,
                                limit.as_millis()
                            ),
                            ErrorKind::Timeout,
                        ),
                    },
                    None => call.await,
                }
            };
            tokio::select! {
                biased;
                s = self.interrupted() => {
                    let (text, kind) = match s.status {
                        Status::Timeout => ("stopped: the run's time limit passed", ErrorKind::Timeout),
                        _ => ("stopped: the run was aborted", ErrorKind::Aborted),
                    };
                    stop = Some(s);
                    error_outcome(text.to_owned(), kind)
                }
                outcome = limited => outcome,
            }
        };
        let mut outcome = outcome;
        // The executor stopped the run (the user denied the call and chose
        // to stop): no more calls, no more requests.
        if stop.is_none() && outcome.error_kind == Some(ErrorKind::Aborted) {
            stop = Some(Stop {
                status: Status::Aborted,
                error: Some(outcome.output.clone()),
            });
        }
        // A failed call's details say what was sent (for user interfaces).
        if outcome.is_error
            && let Some(serde_json::Value::Object(d)) = &mut outcome.details
            && !d.contains_key("arguments")
        {
            d.insert("arguments".into(), p.args.clone());
        }
        self.finish(round, p, outcome, timing, stop)
    }

    /// Stores and truncates the output of a finished call and reports it.
    fn finish(
        &self,
        round: u32,
        p: &Planned,
        outcome: ToolOutcome,
        timing: Timing,
        stop: Option<Stop>,
    ) -> Executed {
        let (call_id, tool, args) = (&p.call.id, p.tool.as_str(), &p.args);
        let duration_ms = u64::try_from(timing.instant.elapsed().as_millis()).unwrap_or(u64::MAX);
        let max = self.opts.max_output_bytes;
        // Keep every successful result (except read_var's own pages) and any
        // long one, so that the model and later turns can read it back.
        let store = (!outcome.is_error && tool != READ_VAR) || outcome.output.len() > max;
        let var = store.then(|| self.opts.vars.insert(outcome.output.clone()));
        let for_model = match &var {
            Some(v) => truncate_for_model(&outcome.output, max, v),
            None => outcome.output.clone(),
        };
        if outcome.is_error {
            debug!(%tool, kind = ?outcome.error_kind, "tool call failed");
            self.emit(AgentEvent::ToolCallError {
                round,
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                args: args.clone(),
                output: outcome.output.clone(),
                error_kind: outcome.error_kind.clone(),
                details: outcome.details.clone(),
                duration_ms,
                steps: outcome.steps.clone(),
            });
        } else {
            self.emit(AgentEvent::ToolCallCompleted {
                round,
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                args: args.clone(),
                output: outcome.output.clone(),
                details: outcome.details.clone(),
                var: var.clone(),
                duration_ms,
                steps: outcome.steps.clone(),
                cached: outcome.cached,
            });
        }
        Executed {
            outcome,
            for_model,
            var,
            started_at_ms: timing.at_ms,
            ended_at_ms: self.now_ms(),
            duration_ms,
            stop,
            replaced: false,
        }
    }

    /// Appends the result of one call to the messages and the history.
    fn record(&self, run: &mut RunState, round: u32, round_usage: Usage, p: Planned, e: Executed) {
        let Planned {
            call, tool, args, ..
        } = p;
        let is_error = e.outcome.is_error;
        run.messages
            .push(Message::tool_result(&call, e.for_model.clone(), is_error));
        run.history.push(ToolCallRecord {
            call_id: call.id,
            tool,
            requested_name: call.name,
            arguments: call.arguments,
            args,
            output: e.for_model,
            is_error,
            error_kind: e.outcome.error_kind,
            details: e.outcome.details,
            var: e.var,
            started_at_ms: e.started_at_ms,
            ended_at_ms: e.ended_at_ms,
            duration_ms: e.duration_ms,
            round,
            round_usage,
            steps: e.outcome.steps,
            cached: e.outcome.cached,
        });
    }
}

/// `action`, or [`Action::Repeat`] when it runs a read-only tool with the
/// same arguments as the call just before it (`run.repeats` counts them),
/// whose result was not an error: the model gets that result again with a
/// note, and nothing runs twice.
fn repeated(run: &RunState, tool: &str, action: Action) -> Action {
    let read_only = matches!(
        action,
        Action::Run {
            read_only: true,
            builtin: false
        }
    );
    let last = run.history.last().filter(|r| r.tool == tool && !r.is_error);
    match last {
        Some(last) if read_only && run.repeats >= 2 => Action::Repeat {
            output: format!(
                "{}\n\n[This is the result of the identical `{tool}` call just before; it was not run \
             again. Use it to answer the user now.]",
                last.output
            ),
        },
        _ => action,
    }
}

fn error_outcome(output: String, kind: ErrorKind) -> ToolOutcome {
    ToolOutcome {
        error_kind: Some(kind),
        is_error: true,
        ..ok_outcome(output)
    }
}

fn ok_outcome(output: String) -> ToolOutcome {
    ToolOutcome {
        output,
        details: None,
        is_error: false,
        error_kind: None,
        steps: Vec::new(),
        cached: false,
    }
}

impl Action {
    fn rejected(rejection: CallRejection) -> Self {
        Action::Reject {
            message: rejection.to_string(),
            kind: rejection.kind(),
        }
    }
}
