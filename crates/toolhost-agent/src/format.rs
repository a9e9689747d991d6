//! Turning a finished tool chain into something small for a chat history.
//!
//! ```
//! use toolhost_agent::{compact_history, Message, Role, Stats, Status, ToolChainResult, Usage};
//!
//! let result = ToolChainResult {
//!     status: Status::Completed,
//!     error: None,
//!     text: "Hello!".into(),
//!     messages: vec![Message::user("hi"), Message::assistant("Hello!")],
//!     history: Vec::new(),
//!     usage: Usage::default(),
//!     stats: Stats::default(),
//!     answer_source: Default::default(),
//! };
//! let message = compact_history(&result);
//! assert_eq!(message.role, Role::Assistant);
//! assert_eq!(message.content, "Hello!");
//! ```

use crate::Message;
use crate::agent::result::ToolChainResult;
use crate::status::Status;

/// Longest argument text in the execution log, in characters.
pub const LOG_ARGS_CHARS: usize = 100;
/// Longest result excerpt in the execution log, in characters.
pub const LOG_RESULT_CHARS: usize = 200;

/// Compacts a finished tool chain into ONE assistant message for a chat
/// history, replacing the assistant/tool messages the run appended:
///
/// 1. a short hint listing the tools that ran, with the `read_var` variables
///    holding their full results (when there were tool calls);
/// 2. the assistant's final text (and a note when the run did not complete);
/// 3. a compact execution log: one line per call with its arguments (cut to
///    ~100 characters), `ok`/`error`, and the first 200 characters of its
///    result on one line.
///
/// The variables stay readable as long as the chat keeps passing the same
/// [`VarStore`](crate::VarStore) in [`AgentOptions::vars`](crate::AgentOptions).
pub fn compact_history(result: &ToolChainResult) -> Message {
    let mut parts: Vec<String> = Vec::new();
    if !result.history.is_empty() {
        let mut tools: Vec<String> = Vec::new();
        for h in &result.history {
            let entry = match &h.var {
                Some(v) => format!("{} (result in `{v}`)", h.tool),
                None => h.tool.clone(),
            };
            tools.push(entry);
        }
        let readable = result.history.iter().any(|h| h.var.is_some());
        let mut hint = format!("[Tools used: {}.", tools.join(", "));
        if readable {
            hint.push_str(" Full results can be read with read_var {\"name\": ...}.");
        }
        hint.push(']');
        parts.push(hint);
    }

    let text = result.final_text().trim();
    if !text.is_empty() {
        parts.push(text.to_owned());
    }
    if !matches!(result.status, Status::Completed) {
        let why = result
            .error
            .as_deref()
            .filter(|e| *e != result.status.as_str())
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        parts.push(format!(
            "[The run ended with status {}{why}.]",
            result.status
        ));
    }

    if !result.history.is_empty() {
        let mut log = String::from("Execution log:");
        for (i, h) in result.history.iter().enumerate() {
            let args = one_line(h.arguments.trim(), LOG_ARGS_CHARS);
            let args = if args.is_empty() {
                "{}".to_owned()
            } else {
                args
            };
            let status = if h.is_error { "error" } else { "ok" };
            let output = one_line(h.output.trim(), LOG_RESULT_CHARS);
            log.push_str(&format!(
                "\n{}. {} {args} -> {status}: {output}",
                i + 1,
                h.tool
            ));
        }
        parts.push(log);
    }
    Message::assistant(parts.join("\n\n"))
}

/// The conversation to send with the next turn of a chat: the run's
/// messages up to and including the user's request — as the run left them,
/// so a compaction of earlier turns (see [`context`](crate::context)) is
/// kept rather than redone each turn — then [`compact_history`] of the run.
///
/// ```
/// use toolhost_agent::{next_turn_history, Message, Stats, Status, ToolChainResult, Usage};
///
/// let result = ToolChainResult {
///     status: Status::Completed,
///     error: None,
///     text: "Hello!".into(),
///     messages: vec![Message::user("hi"), Message::assistant("Hello!")],
///     history: Vec::new(),
///     usage: Usage::default(),
///     stats: Stats::default(),
///     answer_source: Default::default(),
/// };
/// let next = next_turn_history(&result);
/// assert_eq!(next, [Message::user("hi"), Message::assistant("Hello!")]);
/// ```
pub fn next_turn_history(result: &ToolChainResult) -> Vec<Message> {
    let asked = result
        .messages
        .iter()
        .rposition(|m| m.role == crate::Role::User)
        .map_or(0, |i| i + 1);
    let mut next = result.messages[..asked].to_vec();
    next.push(compact_history(result));
    next
}

use toolhost_text::line as one_line;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_cuts_and_flattens() {
        assert_eq!(one_line("a\n  b", 10), "a b");
        assert_eq!(one_line("ééééé", 3), "ééé…");
    }
}
