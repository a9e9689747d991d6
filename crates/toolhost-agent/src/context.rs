//! Keeping a conversation inside the model's context window.
//!
//! Before each request the loop estimates the request's size in tokens
//! ([`TokenCounter`]: about four characters a token, calibrated against the
//! prompt tokens the provider reports for earlier requests). When the estimate
//! passes [`ContextPolicy::trigger_percent`] of the window (less the room kept
//! for the reply), the history is compacted until it fits
//! [`ContextPolicy::target_percent`]:
//!
//! 1. **Prune** old tool outputs, oldest first: each becomes a one-line stub
//!    that names the variable holding the full result, which `read_var` can
//!    still read.
//! 2. **Summarise** the oldest turns with the model itself (one request
//!    without tools); the summary replaces them as one user message that
//!    starts with [`SUMMARY_MARK`]. When the model cannot summarise, the
//!    turns are replaced by a note that says they were removed.
//!
//! Never touched: the system prompt (it is not in the history), the last user
//! message and everything after it except old tool outputs, and the results
//! of the last round of calls, which the model has not read yet. Each
//! compaction is reported as
//! [`AgentEvent::ContextCompacted`](crate::AgentEvent::ContextCompacted).
//!
//! The window comes from [`ContextPolicy::window`], else from
//! [`known_window`] (common models), else from a server's own refusal: a
//! request refused as too long is compacted once and sent again, and a
//! window the refusal names (llama.cpp's `n_ctx`) is learned.
//!
//! ```
//! use toolhost_agent::context::{ContextPolicy, TokenCounter, known_window};
//!
//! let policy = ContextPolicy::default().window(8192);
//! assert_eq!(policy.window_for("any-model"), Some(8192));
//! assert_eq!(known_window("claude-sonnet-4-5"), Some(200_000));
//!
//! let counter = TokenCounter::default();
//! assert_eq!(counter.estimate_chars(400), 100);
//! // The provider said the 400 characters were 200 tokens: later estimates follow.
//! counter.observe(400, 200);
//! assert!(counter.estimate_chars(400) > 100);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;

use crate::tools::ToolSpec;
use crate::{Message, Role};

/// The first line of a summary that replaced earlier turns.
pub const SUMMARY_MARK: &str = "[System-generated summary of the earlier conversation, compacted to fit the model's context; not a message from the user]";

/// The first line of a note that replaced earlier turns the model could not summarise.
pub const REMOVED_MARK: &str = "[Earlier messages were removed to fit the model's context]";

/// The system prompt of a compaction request.
pub const SUMMARY_PROMPT: &str = "You summarise conversations between a user and an assistant \
that uses tools. Write a concise summary of the conversation you are given: what the user \
asked, what the assistant found out (keep exact numbers, names, file paths and variable names \
such as result_3), what it answered, and anything still open. Write only the summary.";

/// Characters per token before calibration.
const CHARS_PER_TOKEN: u32 = 4;
/// Tokens counted for each message's framing (role, separators).
const MESSAGE_OVERHEAD: u32 = 4;
/// A tool output shorter than this many characters is never pruned (its
/// stub would not be much shorter).
const MIN_PRUNE_CHARS: usize = 400;
/// Longest part of one message in a compaction request, in characters.
const SUMMARY_MESSAGE_CHARS: usize = 2_000;

/// When and how far the loop compacts the history.
#[derive(Debug, Clone)]
pub struct ContextPolicy {
    /// The model's context window in tokens. `None`: [`known_window`] for
    /// the model, else a window learned from a server's refusal, else no
    /// compaction until the server refuses a request.
    pub window: Option<u32>,
    /// Compact when a request would use more than this share of the window
    /// (less the reply's room), in percent. Default 80.
    pub trigger_percent: u8,
    /// Compact down to this share, in percent. Default 50.
    pub target_percent: u8,
    /// Summarise old turns with the model when pruning is not enough.
    /// Default on; off: old turns are removed with a note.
    pub summarize: bool,
    /// The estimates and what the provider reported; shared by every run
    /// with this policy (a chat's turns calibrate each other).
    pub counter: Arc<TokenCounter>,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        ContextPolicy {
            window: None,
            trigger_percent: 80,
            target_percent: 50,
            summarize: true,
            counter: Arc::new(TokenCounter::default()),
        }
    }
}

impl ContextPolicy {
    /// This policy with a configured window.
    pub fn window(mut self, tokens: u32) -> Self {
        self.window = Some(tokens);
        self
    }

    /// The window for `model`: configured, known, or learned.
    pub fn window_for(&self, model: &str) -> Option<u32> {
        self.window
            .or_else(|| known_window(model))
            .or_else(|| self.counter.learned_window())
    }
}

/// The context windows of common models, matched on the model name
/// (case-insensitive, longest pattern first). `None` for others: configure
/// them (`[model] context-window`, `--context-window`).
pub fn known_window(model: &str) -> Option<u32> {
    const KNOWN: &[(&str, u32)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-5", 400_000),
        ("o4-mini", 200_000),
        ("o3", 200_000),
        ("claude", 200_000),
        ("gemini", 1_048_576),
        ("qwen2.5-coder", 32_768),
        ("qwen2.5", 32_768),
        ("qwen3", 32_768),
        ("llama-3.1", 131_072),
        ("llama3.1", 131_072),
        ("llama-3.2", 131_072),
        ("llama3.2", 131_072),
        ("mistral-small", 32_768),
        ("gemma-3", 131_072),
        ("gemma3", 131_072),
        ("phi-4", 16_384),
    ];
    // ASCII case-insensitive, without a lower-cased copy (asked before
    // every request).
    let model = model.as_bytes();
    let contains = |pattern: &str| {
        model
            .windows(pattern.len())
            .any(|w| w.eq_ignore_ascii_case(pattern.as_bytes()))
    };
    KNOWN
        .iter()
        .filter(|(pattern, _)| contains(pattern))
        .max_by_key(|(pattern, _)| pattern.len())
        .map(|&(_, tokens)| tokens)
}

/// Token estimates, calibrated by what the provider reports.
///
/// The estimate is characters / 4, times a ratio learned from earlier
/// requests (reported prompt tokens / estimated tokens, averaged, clamped to
/// 0.25–4 so one odd report cannot swing it far).
#[derive(Debug)]
pub struct TokenCounter {
    /// The ratio in thousandths (1000: no correction).
    ratio_milli: AtomicU32,
    /// A window a server named when it refused a request (0: none).
    learned_window: AtomicU32,
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter {
            ratio_milli: AtomicU32::new(1000),
            learned_window: AtomicU32::new(0),
        }
    }
}

impl TokenCounter {
    /// Tokens for `chars` characters of request text.
    pub fn estimate_chars(&self, chars: usize) -> u32 {
        let raw = u64::try_from(chars / CHARS_PER_TOKEN as usize).unwrap_or(u64::MAX);
        let ratio = u64::from(self.ratio_milli.load(Ordering::Relaxed));
        u32::try_from(raw.saturating_mul(ratio) / 1000).unwrap_or(u32::MAX)
    }

    /// About how many characters make `tokens` tokens (the inverse of
    /// [`estimate_chars`](Self::estimate_chars)).
    pub fn chars_for(&self, tokens: u64) -> usize {
        let ratio = u64::from(self.ratio_milli.load(Ordering::Relaxed).max(1));
        let chars = tokens
            .saturating_mul(u64::from(CHARS_PER_TOKEN))
            .saturating_mul(1000)
            / ratio;
        usize::try_from(chars).unwrap_or(usize::MAX)
    }

    /// Learns from one request: `chars` characters were reported as
    /// `reported` prompt tokens (ignored when the provider reports none).
    pub fn observe(&self, chars: usize, reported: u64) {
        let raw = u64::try_from(chars / CHARS_PER_TOKEN as usize).unwrap_or(u64::MAX);
        if reported == 0 || raw < 16 {
            return;
        }
        let seen = (reported.saturating_mul(1000) / raw).clamp(250, 4000);
        let seen = u32::try_from(seen).unwrap_or(1000);
        let _ = self
            .ratio_milli
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(old / 2 + seen / 2)
            });
    }

    /// The calibration ratio (1.0: characters / 4).
    pub fn ratio(&self) -> f64 {
        f64::from(self.ratio_milli.load(Ordering::Relaxed)) / 1000.0
    }

    /// Remembers a window a server named.
    pub fn learn_window(&self, tokens: u32) {
        self.learned_window.store(tokens, Ordering::Relaxed);
    }

    /// The window a server named, if any.
    pub fn learned_window(&self) -> Option<u32> {
        match self.learned_window.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    /// Tokens of one message.
    pub fn message(&self, m: &Message) -> u32 {
        self.estimate_chars(message_chars(m))
            .saturating_add(MESSAGE_OVERHEAD)
    }

    /// Tokens of several messages.
    pub fn messages(&self, messages: &[Message]) -> u32 {
        messages
            .iter()
            .fold(0u32, |sum, m| sum.saturating_add(self.message(m)))
    }
}

/// The characters of a message that reach the model.
pub fn message_chars(m: &Message) -> usize {
    m.tool_calls.iter().fold(m.content.len(), |sum, c| {
        sum.saturating_add(c.name.len())
            .saturating_add(c.arguments.len())
            .saturating_add(c.id.len())
    })
}

/// The characters of a request: its system prompt, its tools' names,
/// descriptions and schemas, and its messages.
pub fn request_chars<'a>(
    system: &str,
    tools: &[ToolSpec],
    messages: impl IntoIterator<Item = &'a Message>,
) -> usize {
    let tools = definitions_bytes(tools);
    messages
        .into_iter()
        .fold(system.len().saturating_add(tools), |sum, m| {
            sum.saturating_add(message_chars(m))
        })
}

/// About how many bytes `tools`' definitions take in a request (the
/// schemas' JSON estimated from their values, not written: this is asked
/// before every request).
pub fn definitions_bytes<'a>(tools: impl IntoIterator<Item = &'a ToolSpec>) -> usize {
    tools.into_iter().fold(0, |sum, t| {
        sum.saturating_add(t.name.len())
            .saturating_add(t.description.len())
            .saturating_add(json_chars(&t.input_schema))
    })
}

/// About the length of `value` as JSON text, without writing it.
pub(crate) fn json_chars(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len().saturating_add(2),
        Value::Array(a) => a.iter().fold(2, |sum, v| {
            sum.saturating_add(json_chars(v)).saturating_add(1)
        }),
        Value::Object(o) => o.iter().fold(2, |sum, (k, v)| {
            sum.saturating_add(k.len())
                .saturating_add(4)
                .saturating_add(json_chars(v))
        }),
    }
}

/// A window a server's refusal names: llama.cpp's `"n_ctx": 8192`, or
/// OpenAI's "maximum context length is 8192 tokens".
pub fn window_in_refusal(body: &str) -> Option<u32> {
    let number_after = |key: &str| -> Option<u32> {
        let at = body.find(key)? + key.len();
        let digits: String = body[at..]
            .chars()
            .skip_while(|c| !c.is_ascii_digit())
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok().filter(|&n| n > 0)
    };
    number_after("\"n_ctx\"").or_else(|| number_after("maximum context length is"))
}

/// What one compaction did, for [`AgentEvent::ContextCompacted`](crate::AgentEvent::ContextCompacted).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Compaction {
    /// Tool outputs replaced by a stub.
    pub pruned_outputs: u32,
    /// The variables holding the pruned outputs, in order.
    pub pruned_vars: Vec<String>,
    /// Messages replaced by a summary (or by a removal note).
    pub summarized_messages: u32,
    /// Whether the model wrote the summary (false: the messages were removed
    /// with a note).
    pub summarized_by_model: bool,
    /// The estimate before, in tokens.
    pub tokens_before: u32,
    /// The estimate after, in tokens.
    pub tokens_after: u32,
    /// The window compacted for.
    pub window: u32,
}

/// Where in `messages` compaction may act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Protected {
    /// The last user message (nothing from here on is summarised).
    pub last_user: usize,
    /// The last assistant message: tool outputs after it are unread and kept.
    pub unread_from: usize,
}

pub(crate) fn protected(messages: &[Message]) -> Protected {
    let last_user = messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .unwrap_or(0);
    let unread_from = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    Protected {
        last_user,
        unread_from,
    }
}

/// The indices of the tool outputs that may be pruned, oldest first.
pub(crate) fn prunable(messages: &[Message], p: Protected) -> Vec<usize> {
    messages
        .iter()
        .enumerate()
        .take(p.unread_from)
        .filter(|(_, m)| {
            m.role == Role::Tool
                && m.content.len() >= MIN_PRUNE_CHARS
                && !m.content.starts_with(PRUNED_PREFIX)
        })
        .map(|(i, _)| i)
        .collect()
}

const PRUNED_PREFIX: &str = "[output pruned";

/// The stub that replaces a pruned tool output.
pub(crate) fn pruned_stub(chars: usize, var: Option<&str>) -> String {
    match var {
        Some(var) => format!(
            "{PRUNED_PREFIX} to save context: {chars} characters; the full result is in variable \
             `{var}`, read it with read_var {{\"name\": \"{var}\"}} if you need it again]"
        ),
        None => {
            format!("{PRUNED_PREFIX} to save context: {chars} characters, no longer available]")
        }
    }
}

/// Where to cut for a summary: the first `n` messages are summarised.
/// `n` never passes the last user message, never leaves a tool output
/// without the call before it (the kept part starts with a user or an
/// assistant message), and is the smallest cut that brings the rest under
/// `target` tokens (or the largest allowed cut when none does). `None` when
/// there is nothing to summarise.
pub(crate) fn summary_cut(
    counter: &TokenCounter,
    messages: &[Message],
    p: Protected,
    fixed: u32,
    target: u32,
) -> Option<usize> {
    let mut rest = fixed.saturating_add(counter.messages(messages));
    let mut best = None;
    for (i, m) in messages.iter().enumerate().take(p.last_user + 1) {
        // A cut before message i keeps messages[i..].
        if i >= 2 && m.role != Role::Tool {
            best = Some(i);
            if rest <= target {
                break;
            }
        }
        rest = rest.saturating_sub(counter.message(m));
    }
    best
}

/// `messages` as text for a compaction request: each message's text cut to
/// [`SUMMARY_MESSAGE_CHARS`], the whole cut to `max_chars` (the newest kept).
pub(crate) fn as_transcript(messages: &[Message], max_chars: usize) -> String {
    let cut = |s: &str| -> String {
        if s.len() <= SUMMARY_MESSAGE_CHARS {
            s.to_owned()
        } else {
            format!("{} …", &s[..s.floor_char_boundary(SUMMARY_MESSAGE_CHARS)])
        }
    };
    let mut lines: Vec<String> = Vec::new();
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => lines.push(format!("User: {}", cut(&m.content))),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    lines.push(format!("Assistant: {}", cut(&m.content)));
                }
                for c in &m.tool_calls {
                    lines.push(format!(
                        "Assistant called `{}` with {}",
                        c.name,
                        cut(&c.arguments)
                    ));
                }
            }
            Role::Tool => lines.push(format!(
                "Tool `{}` returned{}: {}",
                m.tool_name.as_deref().unwrap_or("?"),
                if m.is_error { " an error" } else { "" },
                cut(&m.content)
            )),
        }
    }
    let mut text = lines.join("\n\n");
    if text.len() > max_chars {
        let from = text.ceil_char_boundary(text.len() - max_chars);
        text = format!("…\n{}", &text[from..]);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolCall;

    fn call(id: &str) -> Message {
        Message {
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: "t".into(),
                arguments: "{}".into(),
            }],
            ..Message::assistant("")
        }
    }

    fn output(id: &str, text: &str) -> Message {
        let call = ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        Message::tool_result(&call, text, false)
    }

    #[test]
    fn the_counter_follows_what_the_provider_reports_within_bounds() {
        let c = TokenCounter::default();
        assert_eq!(c.estimate_chars(4000), 1000);
        for _ in 0..10 {
            c.observe(4000, 2000);
        }
        let e = c.estimate_chars(4000);
        assert!((1900..=2000).contains(&e), "{e}");
        // An absurd report moves it only as far as the clamp.
        for _ in 0..20 {
            c.observe(4000, u64::MAX);
        }
        let e = c.estimate_chars(4000);
        assert!(
            (3990..=4000).contains(&e),
            "at most 4× the raw estimate: {e}"
        );
        c.observe(4000, 0);
        assert_eq!(c.estimate_chars(4000), e, "no report, no change");
    }

    #[test]
    fn known_models_have_windows_and_the_longest_pattern_wins() {
        assert_eq!(known_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_window("Qwen2.5-Coder-1.5B-Instruct"), Some(32_768));
        assert_eq!(known_window("my-own-model"), None);
        let p = ContextPolicy::default();
        assert_eq!(p.window_for("my-own-model"), None);
        p.counter.learn_window(4096);
        assert_eq!(p.window_for("my-own-model"), Some(4096));
        assert_eq!(p.window_for("gpt-4o"), Some(128_000), "known beats learned");
    }

    #[test]
    fn a_refusal_names_its_window() {
        let llama = r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#;
        assert_eq!(window_in_refusal(llama), Some(8192));
        let openai = "This model's maximum context length is 16385 tokens. However, you requested 20000 tokens";
        assert_eq!(window_in_refusal(openai), Some(16385));
        assert_eq!(window_in_refusal("prompt is too long"), None);
    }

    #[test]
    fn unread_results_and_the_last_turn_are_protected() {
        let big = "x".repeat(1000);
        let messages = vec![
            Message::user("q1"),
            call("a"),
            output("a", &big),
            Message::assistant("answer 1"),
            Message::user("q2"),
            call("b"),
            output("b", &big),
            call("c"),
            output("c", &big),
        ];
        let p = protected(&messages);
        assert_eq!(p.last_user, 4);
        assert_eq!(p.unread_from, 8);
        assert_eq!(prunable(&messages, p), [2, 6], "c's output is unread");
        let c = TokenCounter::default();
        // The smallest cut that fits, never past the last user message,
        // never right before a tool output.
        let cut = summary_cut(&c, &messages, p, 0, 10_000);
        assert_eq!(cut, Some(3), "nothing needed beyond the first cut allowed");
        let cut = summary_cut(&c, &messages, p, 0, 0);
        assert_eq!(cut, Some(4), "at most up to the last user message");
    }

    #[test]
    fn a_transcript_keeps_the_newest_text_within_its_bound() {
        let messages = vec![
            Message::user("old question"),
            Message::assistant("é".repeat(3000)),
            Message::user("newest question"),
        ];
        let t = as_transcript(&messages, 500);
        assert!(t.len() <= 505, "{}", t.len());
        assert!(t.ends_with("User: newest question"));
    }
}
