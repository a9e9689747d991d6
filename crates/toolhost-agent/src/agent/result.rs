//! What a run produced: the [`ToolChainResult`] that [`Agent::run`](crate::Agent::run)
//! returns, with a [`ToolCallRecord`] for every tool call.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_content::ErrorKind;

use crate::status::{Stats, Status};
use crate::{Message, Usage};

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
    /// What the permission layer and hooks did (see [`ToolOutcome::steps`](crate::ToolOutcome::steps)).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Value>,
    /// Whether the result came from the result cache (see [`ToolOutcome::cached`](crate::ToolOutcome::cached)).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

/// Where a run's final answer came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerSource {
    /// The model's own words.
    #[default]
    Model,
    /// The host, from the run's tool results: the model gave no answer in
    /// words (only calls, protocol text or copies of the host's text).
    Results,
    /// The host, saying there is no answer and why: the model gave none in
    /// words and no call succeeded (the run's status and the calls that
    /// failed). Never for `aborted` or `error`, whose text stays empty.
    Host,
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
    /// The messages given to [`Agent::run`](crate::Agent::run) followed by the whole tool chain:
    /// assistant messages with their tool calls, tool results, final answer.
    pub messages: Vec<Message>,
    /// Every tool call, in order.
    pub history: Vec<ToolCallRecord>,
    /// Total tokens.
    pub usage: Usage,
    /// Counts and time.
    pub stats: Stats,
    /// Where [`text`](Self::text) came from: the model's words, or the host
    /// quoting the run's tool results when the model gave none (only calls,
    /// protocol text or copies of the host's text; see `agent/answer.rs`).
    pub answer_source: AnswerSource,
}

impl ToolChainResult {
    /// The final answer ([`text`](Self::text)).
    pub fn final_text(&self) -> &str {
        &self.text
    }
}
