//! The state of a run between two steps, all of it serialisable (an
//! [`AgentState`](crate::AgentState) can be saved and resumed): the states of
//! the loop ([`State`]), the data the run keeps ([`RunState`]), why it must
//! stop ([`Stop`]), and each tool call as planned ([`Planned`], [`Action`])
//! and as run ([`Executed`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_content::ErrorKind;

use super::result::ToolCallRecord;
use crate::provider::FinishReason;
use crate::status::Status;
use crate::tools::{ToolOutcome, ToolSpec};
use crate::{Message, ToolCall, Usage};

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
        /// What the calls resolve against: the tools offered, or with tool
        /// search the whole catalog and `search_tools`.
        tools: Vec<ToolSpec>,
        /// Whether `read_var` is the loop's own.
        builtin: bool,
        /// Whether `search_tools` is the loop's own (tool search is on).
        #[serde(default)]
        search: bool,
        completion: RoundInfo,
    },
    /// The calls, checked, before they run (a pause of [`Agent::step`](crate::Agent::step)).
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
    /// The round this state belongs to (`None` once the run is over).
    pub(crate) fn round(&self) -> Option<u32> {
        match self {
            State::Request { round }
            | State::Execute { round, .. }
            | State::Proposed { round, .. }
            | State::Ran { round, .. }
            | State::FinalAnswer { round, .. } => Some(*round),
            State::Done { .. } => None,
        }
    }

    pub(crate) fn done(status: Status, error: impl Into<Option<String>>) -> Self {
        State::Done {
            status,
            error: error.into(),
        }
    }
}

/// What the loop keeps of a response for its round's end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RoundInfo {
    pub(crate) usage: Usage,
    pub(crate) finish_reason: FinishReason,
}

/// Why the run must stop now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Stop {
    pub(crate) status: Status,
    pub(crate) error: Option<String>,
}

impl Stop {
    pub(crate) fn into_state(self) -> State {
        State::Done {
            status: self.status,
            error: self.error,
        }
    }

    pub(crate) fn reason(&self) -> String {
        self.error
            .clone()
            .unwrap_or_else(|| self.status.to_string())
    }
}

/// How many of the latest calls a run keeps to catch cycles of calls.
pub(crate) const RECENT_CALLS: usize = 64;

/// The mutable data of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunState {
    pub(crate) messages: Vec<Message>,
    /// The text of the last assistant message of this run.
    pub(crate) text: String,
    pub(crate) history: Vec<ToolCallRecord>,
    pub(crate) usage: Usage,
    pub(crate) rounds: u32,
    /// The last call's (tool, canonical arguments), for doom-loop detection.
    pub(crate) last_call: Option<(String, String)>,
    pub(crate) repeats: u32,
    /// The latest calls' (tool, canonical arguments), oldest first, for
    /// catching cycles (A, B, A, B, …); bounded by [`RECENT_CALLS`].
    #[serde(default)]
    pub(crate) recent: std::collections::VecDeque<(String, String)>,
    /// The last request failed because the conversation no longer fits the
    /// model's context (`exchange::is_context_overflow`).
    pub(crate) overflowed: bool,
    /// Whether the history was compacted after a refusal as too long (once
    /// per run: a second refusal ends the run).
    pub(crate) compacted_after_overflow: bool,
    /// Times the history was compacted ([`Stats::compactions`](crate::Stats::compactions)).
    #[serde(default)]
    pub(crate) compactions: u32,
    /// The last request failed because the server could not parse the
    /// model's own output (`exchange::is_model_output_error`), after its retries.
    #[serde(default)]
    pub(crate) unparsable: bool,
    /// The tools found by `search_tools` or called by name while tool
    /// search is on: offered in full from the next round on.
    #[serde(default)]
    pub(crate) found: std::collections::BTreeSet<String>,
    /// Where the final answer came from.
    #[serde(default)]
    pub(crate) answer_source: super::result::AnswerSource,
    /// The model handed back the last result as a call's argument
    /// (`answer::echoes_a_result`): the run ends with that result.
    #[serde(default)]
    pub(crate) settled: bool,
    /// The read-only tools the user asked for by name that the next request
    /// must call one of (`named_tool.rs`): it is sent with `tool_choice:
    /// required`, offering only these, and then this is emptied.
    #[serde(default)]
    pub(crate) named_tools: Vec<String>,
    /// How many requests required a tool the user named: at most one after
    /// a first reply without calls and one after a repeated call
    /// ([`MAX_NAMED_ASKS`]).
    #[serde(default)]
    pub(crate) named_asks: u32,
    /// The tools the user asked for by name that are not offered (switched
    /// off by the permission layer or the session), as the system prompt
    /// names them; the host's own answer names them too.
    #[serde(default)]
    pub(crate) withheld: Vec<String>,
}

/// Most requests in a run that require a tool the user named.
pub(crate) const MAX_NAMED_ASKS: u32 = 2;

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
    /// Answered by the loop's own `search_tools` (an error when the call was
    /// malformed).
    Searched { output: String, is_error: bool },
    /// Not run: the caller of [`Agent::step`](crate::Agent::step) gave its result.
    Supplied { output: String, is_error: bool },
}

/// The result of running one planned call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Executed {
    pub(crate) outcome: ToolOutcome,
    pub(crate) for_model: String,
    pub(crate) var: Option<String>,
    pub(crate) started_at_ms: u64,
    pub(crate) ended_at_ms: u64,
    pub(crate) duration_ms: u64,
    pub(crate) stop: Option<Stop>,
    /// Replaced by the caller of [`Agent::step`](crate::Agent::step): the variable holds the
    /// replacement too, so the model cannot read the original back.
    #[serde(default)]
    pub(crate) replaced: bool,
}
