//! What the loop reports while it runs, for user interfaces and logs.
//!
//! Events arrive in this order for each round: [`AgentEvent::RequestStart`],
//! any number of [`TextDelta`](AgentEvent::TextDelta) /
//! [`ReasoningDelta`](AgentEvent::ReasoningDelta) /
//! [`ToolCallStreamed`](AgentEvent::ToolCallStreamed), then per tool call
//! [`ToolCallPending`](AgentEvent::ToolCallPending) (all calls of the response,
//! in order), [`ToolCallRunning`](AgentEvent::ToolCallRunning), any
//! [`ToolCallProgress`](AgentEvent::ToolCallProgress), and
//! [`ToolCallCompleted`](AgentEvent::ToolCallCompleted) or
//! [`ToolCallError`](AgentEvent::ToolCallError), then
//! [`RoundEnd`](AgentEvent::RoundEnd). The last event of a run is always
//! [`Finish`](AgentEvent::Finish).
//!
//! A reply the loop does not take as it came (a call written as text, a
//! copy of the host's text, words where the user named a tool) is followed
//! by [`ReplySetAside`](AgentEvent::ReplySetAside): the text streamed for it
//! is not the answer, and a UI that showed it can mark it so.
//!
//! ```
//! use toolhost_agent::{AgentEvent, event_channel};
//!
//! let (sink, mut rx) = event_channel();
//! sink(AgentEvent::TextDelta { round: 1, text: "hi".into() });
//! assert!(matches!(rx.try_recv(), Ok(AgentEvent::TextDelta { .. })));
//! ```

use std::sync::Arc;
use toolhost_content::ErrorKind;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::Usage;
use crate::provider::FinishReason;
use crate::status::{Stats, Status};

/// Receives every event of a run, synchronously and in order. Keep it cheap
/// (forward to a channel, see [`event_channel`]).
pub type EventSink = Arc<dyn Fn(AgentEvent) + Send + Sync>;

/// An [`EventSink`] that forwards into an unbounded channel, and its receiver.
/// Events sent after the receiver is dropped are discarded.
pub fn event_channel() -> (EventSink, mpsc::UnboundedReceiver<AgentEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sink: EventSink = Arc::new(move |event| {
        let _ = tx.send(event);
    });
    (sink, rx)
}

/// One step of a run. Times are milliseconds since the Unix epoch, from the
/// agent's [`Clock`](crate::Clock); durations are milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The history was compacted before a request, to fit the model's
    /// context window (see [`context`](crate::context)).
    ContextCompacted {
        /// The round whose request it was.
        round: u32,
        /// What was pruned and summarised, and the tokens before and after.
        #[serde(flatten)]
        compaction: crate::context::Compaction,
    },
    /// A request to the model is about to be sent.
    RequestStart {
        /// 1-based round; the forced final answer after the round limit has
        /// round `max_rounds + 1`.
        round: u32,
        /// Messages in the request (without the system prompt).
        messages: usize,
        /// Tools offered (0 for the forced final answer).
        tools: usize,
    },
    /// More answer text streamed.
    TextDelta {
        /// The round.
        round: u32,
        /// The new text.
        text: String,
    },
    /// More reasoning text streamed.
    ReasoningDelta {
        /// The round.
        round: u32,
        /// The new text.
        text: String,
    },
    /// The model started writing a tool call (arguments not known yet).
    ToolCallStreamed {
        /// The round.
        round: u32,
        /// The call id.
        call_id: String,
        /// The name as the model wrote it.
        name: String,
    },
    /// A tool call of the response, before anything runs.
    ToolCallPending {
        /// The round.
        round: u32,
        /// The call id.
        call_id: String,
        /// The repaired tool name (the model's own name when it matches nothing).
        tool: String,
        /// The name the model wrote.
        requested_name: String,
        /// The arguments as the model wrote them.
        arguments: String,
    },
    /// The tool call starts running.
    ToolCallRunning {
        /// The round.
        round: u32,
        /// The call id.
        call_id: String,
        /// The repaired tool name.
        tool: String,
        /// When it started.
        started_at_ms: u64,
    },
    /// A running tool reported progress (at most
    /// [`MAX_PROGRESS_REPORTS`](crate::tools::MAX_PROGRESS_REPORTS) a call).
    ToolCallProgress {
        /// The round.
        round: u32,
        /// The call id.
        call_id: String,
        /// The repaired tool name.
        tool: String,
        /// What the tool says it is doing.
        message: String,
        /// How far along, 0 to 1, when the tool knows.
        fraction: Option<f32>,
    },
    /// The tool call succeeded.
    ToolCallCompleted {
        /// The round.
        round: u32,
        /// The call id.
        call_id: String,
        /// The repaired tool name.
        tool: String,
        /// The parsed arguments.
        args: Value,
        /// The full output (before truncation for the model).
        output: String,
        /// Structured data for interfaces.
        details: Option<Value>,
        /// The variable holding the full output, if stored.
        var: Option<String>,
        /// How long it ran.
        duration_ms: u64,
        /// What the permission layer and hooks did (policy decision, each
        /// hook's decision and time, approvals).
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        steps: Vec<Value>,
        /// The result came from the result cache: the tool did not run.
        #[serde(skip_serializing_if = "std::ops::Not::not", default)]
        cached: bool,
    },
    /// The tool call failed; the model reads `output` as the error.
    ToolCallError {
        /// The round.
        round: u32,
        /// The call id.
        call_id: String,
        /// The repaired tool name (or the model's own name).
        tool: String,
        /// The parsed arguments (`null` when they did not parse).
        args: Value,
        /// The error message the model reads.
        output: String,
        /// A stable kind (`not-found`, `invalid-arguments`, `timeout`, `aborted`, ...).
        error_kind: Option<ErrorKind>,
        /// Structured data for interfaces.
        details: Option<Value>,
        /// How long it ran.
        duration_ms: u64,
        /// What the permission layer and hooks did (policy decision, each
        /// hook's decision and time, approvals).
        #[serde(skip_serializing_if = "Vec::is_empty", default)]
        steps: Vec<Value>,
    },
    /// The same call, or the same short cycle of calls, was made several
    /// times in a row.
    DoomLoopDetected {
        /// The round.
        round: u32,
        /// The tool.
        tool: String,
        /// Its canonical arguments.
        arguments: String,
        /// How many identical calls (or cycles) in a row.
        repeats: u32,
        /// The tools of the repeating cycle, in call order (one name when
        /// the same call repeats).
        #[serde(default)]
        cycle: Vec<String>,
    },
    /// The text streamed since the last [`RequestStart`](AgentEvent::RequestStart)
    /// is not the run's answer: the loop set the reply aside, and asks
    /// again or takes the calls written in it.
    ReplySetAside {
        /// The round.
        round: u32,
        /// Why.
        reason: SetAside,
    },
    /// A round is over (its tool calls, if any, ran).
    RoundEnd {
        /// The round.
        round: u32,
        /// Tokens of this round's request.
        usage: Usage,
        /// Why the model stopped.
        finish_reason: FinishReason,
        /// How many tool calls the response had.
        tool_calls: usize,
    },
    /// The run is over. Always the last event.
    Finish {
        /// How it ended.
        status: Status,
        /// The error message, for `error`, `doom-loop`, `timeout`.
        error: Option<String>,
        /// Total tokens.
        usage: Usage,
        /// Counts and time.
        stats: Stats,
    },
}

/// Why a reply was set aside ([`AgentEvent::ReplySetAside`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SetAside {
    /// Nothing in words.
    Empty,
    /// A tool call written as text: run as the call when it names an
    /// offered tool, else asked again.
    CallAsText,
    /// A copy of the host's text: the conversation log, a note, a tool
    /// result as the host writes it, the system prompt.
    HostText,
    /// The user's question, repeated.
    QuestionRepeated,
    /// Words, where the user named a read-only tool the reply did not call:
    /// asked again with a call required.
    NamedToolNotCalled,
}

impl SetAside {
    /// A few words on why, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            SetAside::Empty => "no answer",
            SetAside::CallAsText => "a tool call written as text",
            SetAside::HostText => "a copy of the host's own text",
            SetAside::QuestionRepeated => "the question repeated",
            SetAside::NamedToolNotCalled => "the tool the user named was not called",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_set_aside_is_written_as_the_docs_name_it() {
        // docs/guide/sessions.md names the event and its reasons.
        let event = AgentEvent::ReplySetAside {
            round: 2,
            reason: SetAside::NamedToolNotCalled,
        };
        assert_eq!(
            serde_json::to_value(&event).unwrap(),
            serde_json::json!({"type": "reply_set_aside", "round": 2, "reason": "named_tool_not_called"})
        );
        for (reason, name) in [
            (SetAside::Empty, "empty"),
            (SetAside::CallAsText, "call_as_text"),
            (SetAside::HostText, "host_text"),
            (SetAside::QuestionRepeated, "question_repeated"),
        ] {
            assert_eq!(serde_json::to_value(reason).unwrap(), name);
        }
    }
}
