//! What counts as an answer in words, and the answer the run's own results
//! give when the model has none.
//!
//! A small model that may no longer call tools often writes the call
//! anyway: as JSON (`{"name": "calculate", "arguments": {…}}`, bare or in a
//! code block), as tags (`<tool_call>`, `<function=…>`, `<tool_code>`), or
//! it copies what the host wrote: the log of the conversation the final
//! answer is asked over, a note, the system prompt. None of that is an
//! answer a person can read ([`not_words`]). The loop then asks once more
//! without tools, and when that is no better, answers from the results
//! ([`from_results`]: "calculate(2*(3+4)) returned 14."), marked
//! [`AnswerSource::Results`](super::result::AnswerSource::Results) in the
//! run's result.
//!
//! A call whose arguments are the result the same tool just gave
//! (`calculate("14")` after `calculate("2*(3+4)")` returned 14) is a small
//! model's way of saying it is done ([`echoes_a_result`]): the run ends with
//! that result as its answer, before any doom loop.

use serde_json::Value;

use super::result::ToolCallRecord;
use crate::ToolCall;
use crate::events::SetAside;

/// Tags models use for calls, in any template.
const CALL_TAGS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "<tool_code>",
    "[TOOL_CALLS]",
    "<|tool_call|>",
    "<|python_tag|>",
    "<invoke name=",
];

/// What the host writes that a model copies: the conversation log of a
/// final answer asked without tools (`final_answer.rs`), and its notes.
const HOST_MARKERS: &[&str] = &[
    "called the tool `",
    "[System-generated log",
    "[End of the log]",
    "returned an error: not run:",
    "[This is the result of the identical",
    "The tool-call limit for this request has been reached",
    // The doom-loop note, also as a model retells it ("… and its result is
    // already above. Therefore, I cannot call it again.": the 1.5B).
    "its result is already above",
];

/// How a result line of the log begins (`final_answer.rs`): the tool's
/// name follows, then [`LOG_RESULT`] or [`LOG_ERROR`], then the result.
pub(crate) const LOG_RESULT_START: &str = "The tool `";
/// After the tool's name in a result line of the log.
pub(crate) const LOG_RESULT: &str = "` returned: ";
/// After the tool's name in an error line of the log.
pub(crate) const LOG_ERROR: &str = "` returned an error: ";

/// Whether a line of `text` is a result line of the log, as the host
/// writes it ("The tool `read_var` returned an error: `read_var` failed:
/// …", which the 0.5B gave as its answer through the json protocol).
/// Words about a result ("The tool `calculate` returned 14, so …") are
/// not in that shape.
fn copies_a_log_line(text: &str) -> bool {
    text.lines().any(|line| {
        line.trim_start()
            .strip_prefix(LOG_RESULT_START)
            .and_then(|rest| rest.split_once('`'))
            .is_some_and(|(name, rest)| {
                !name.is_empty()
                    && !name.contains(char::is_whitespace)
                    && [LOG_RESULT, LOG_ERROR]
                        .iter()
                        .any(|tail| rest.starts_with(&tail[1..]))
            })
    })
}

/// Tags chat templates wrap a tool's result in: a model that writes one
/// is imitating a result, not answering.
const RESULT_TAGS: &[&str] = &["<tool_response>", "</tool_response>", "[TOOL_RESULTS]"];

/// Whether `text` writes out a tool result: a chat template's result tag,
/// or a result as the prompt protocols render them (`<tool_result …>`, or a
/// line that starts `Tool result (`).
fn writes_a_result(text: &str) -> bool {
    use crate::provider::prompt::{PromptProfile, result_markers};
    RESULT_TAGS.iter().any(|t| text.contains(t))
        || result_markers(PromptProfile::Xml)
            .iter()
            .any(|m| text.contains(m))
        || text.lines().any(|l| {
            result_markers(PromptProfile::Json)
                .iter()
                .any(|m| l.trim_start().starts_with(m))
        })
}

/// `Some` when `text` is not an answer in words (see the module's docs);
/// `system` is the system prompt the model was given.
pub(crate) fn not_words(text: &str, system: &str, question: &str) -> Option<SetAside> {
    let trimmed = text.trim();
    // Nothing, or no letter or digit at all (a bare code fence, a lone
    // bracket: what a small model leaves when it stops mid-block).
    let words = trimmed
        .lines()
        .filter(|l| !l.trim_start().starts_with("```"))
        .any(|l| l.chars().any(char::is_alphanumeric));
    if !words {
        return Some(SetAside::Empty);
    }
    if CALL_TAGS.iter().any(|t| trimmed.contains(t))
        || starts_as_call_json(trimmed)
        || is_call_json(trimmed)
        || in_call_block(trimmed)
        || parsed_as_a_call(trimmed)
    {
        return Some(SetAside::CallAsText);
    }
    if HOST_MARKERS.iter().any(|m| trimmed.contains(m))
        || copies_a_log_line(trimmed)
        || writes_a_result(trimmed)
        || copies_the_system_prompt(trimmed, system)
    {
        return Some(SetAside::HostText);
    }
    if echoes_the_question(trimmed, question) {
        return Some(SetAside::QuestionRepeated);
    }
    None
}

/// The calls in a reply that is only a call written as text (`verdict`,
/// what [`not_words`] said of it, is [`SetAside::CallAsText`]), when every
/// call names a tool the round offered (`known`): the reply's remaining
/// text and the calls, with generated ids.
///
/// A model whose server misses its calls (llama.cpp with a chat template
/// that expects other tags than the model writes) sends them as text; they
/// are taken as the calls they are, and go through the same pipeline as any
/// call (lookup, validation, policy, hooks). `None` when the reply is words,
/// or names a tool that was not offered (then it is asked again as any
/// reply that is not words).
pub(crate) fn calls_written_as_text(
    text: &str,
    verdict: Option<SetAside>,
    known: impl Fn(&str) -> bool,
) -> Option<(String, Vec<ToolCall>)> {
    use crate::provider::prompt::{PromptProfile, parse_tool_calls};
    if verdict != Some(SetAside::CallAsText) {
        return None;
    }
    [PromptProfile::Json, PromptProfile::Xml]
        .into_iter()
        .map(|p| parse_tool_calls(p, text))
        .find(|(_, calls)| !calls.is_empty() && calls.iter().all(|c| known(&c.name)))
}

/// The user's last message in `messages` (`""` when there is none): what
/// an answer must not merely repeat.
pub(crate) fn question(messages: &[crate::Message]) -> &str {
    messages
        .iter()
        .rev()
        .find(|m| m.role == crate::Role::User)
        .map_or("", |m| m.content.as_str())
}

/// Whether `text` repeats `question`: the same letters and digits, or as
/// long (within 30%) and starting with at least half of it (a small model
/// echoing the question with a word changed). A reply that starts with the
/// question and then answers it is longer, or parts from it sooner.
fn echoes_the_question(text: &str, question: &str) -> bool {
    // The letters and digits, lowercased, walked without copying either
    // text (this runs on every reply without calls), and no further than
    // the lengths can still allow an echo: at least half of the question
    // in common (so the question is at most twice the reply) and the
    // reply at most 1.3 times the question.
    fn norm(s: &str) -> impl Iterator<Item = char> + '_ {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
    }
    // A question's normalised length is at most its bytes' count.
    let cap = question.len().saturating_mul(13) / 10;
    let t = norm(text).take(cap.saturating_add(1)).count();
    if t > cap {
        return false;
    }
    let q = norm(question)
        .take(t.saturating_mul(2).saturating_add(1))
        .count();
    if q < 12 || q > t.saturating_mul(2) || t.saturating_mul(10) > q.saturating_mul(13) {
        return false;
    }
    let common = norm(text)
        .zip(norm(question))
        .take_while(|(a, b)| a == b)
        .count();
    (t == q && common == q) || common.saturating_mul(2) >= q
}

/// Whether a prompt protocol's parser (json or xml) finds a call in `text`.
fn parsed_as_a_call(text: &str) -> bool {
    use crate::provider::prompt::{PromptProfile, parse_tool_calls};
    [PromptProfile::Json, PromptProfile::Xml]
        .into_iter()
        .any(|p| !parse_tool_calls(p, text).1.is_empty())
}

/// Whether `text`, without a code fence around it, is JSON of one call or
/// a list of calls (`name`/`tool`/`function` with `arguments`/`parameters`).
fn is_call_json(text: &str) -> bool {
    let inner = strip_fence(text);
    match serde_json::from_str::<Value>(inner) {
        Ok(Value::Array(items)) => !items.is_empty() && items.iter().all(looks_like_a_call),
        Ok(v) => looks_like_a_call(&v),
        Err(_) => false,
    }
}

/// How far into a reply [`starts_as_call_json`] looks.
const CALL_HEAD_CHARS: usize = 400;

/// Whether `text` (after an opening code fence) starts the way call JSON
/// does, valid or not: `{"tool_calls": …`, or an object or list of objects
/// with `name` and `arguments` near its start. A small model's protocol
/// text is often broken JSON (cut at the reply's token bound, an invalid
/// escape such as `\.` in a regular expression, a stray brace), which no
/// parser takes for a call and which is no answer either (seen with
/// Qwen2.5-Coder-0.5B through the json protocol: `docs/log.md`, "Eval
/// round 3").
fn starts_as_call_json(text: &str) -> bool {
    let body = match text.strip_prefix("```") {
        // The language tag, if any, runs to the first newline.
        Some(rest) => rest.split_once('\n').map_or("", |(_, body)| body),
        None => text,
    };
    let head: String = body
        .chars()
        .take(CALL_HEAD_CHARS)
        .filter(|c| !c.is_whitespace())
        .collect();
    let object = head.starts_with('{') || head.starts_with("[{");
    object
        && (head.starts_with("{\"tool_calls\":")
            || head.starts_with("{\"tool_call\":")
            || ((head.starts_with("{\"name\":") || head.starts_with("[{\"name\":"))
                && (head.contains("\"arguments\":") || head.contains("\"parameters\":"))))
}

/// Whether a fenced JSON block in `text` is a call and the words around it
/// are few (a sentence introducing the call is not an answer).
fn in_call_block(text: &str) -> bool {
    let Some(start) = text.find("```") else {
        return false;
    };
    let Some(len) = text[start + 3..].find("```") else {
        return false;
    };
    let block = &text[start..start + 3 + len + 3];
    let around = text.len() - block.len();
    is_call_json(block) && around < 200
}

/// `text` without a surrounding ```` ``` ```` fence (and its language tag).
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let rest = rest.trim_end();
    let Some(rest) = rest.strip_suffix("```") else {
        return text;
    };
    // The language tag, if any, runs to the first newline.
    match rest.find('\n') {
        Some(i) if !rest[..i].contains('{') && !rest[..i].contains('[') => rest[i + 1..].trim(),
        _ => rest.trim(),
    }
}

fn looks_like_a_call(v: &Value) -> bool {
    let Some(obj) = v.as_object() else {
        return false;
    };
    if let Some(f) = obj.get("function").and_then(Value::as_object) {
        return f.contains_key("name");
    }
    let named = ["name", "tool", "tool_name"]
        .iter()
        .any(|k| obj.get(*k).is_some_and(Value::is_string));
    let args = ["arguments", "parameters", "args", "input"]
        .iter()
        .any(|k| obj.contains_key(*k));
    named && args
}

/// Whether `text` holds the start of the system prompt (its first 60
/// characters, when it has that many).
fn copies_the_system_prompt(text: &str, system: &str) -> bool {
    let head: String = system.trim().chars().take(60).collect();
    head.chars().count() >= 60 && text.contains(&head)
}

/// Whether the call `(tool, args)` hands back what the same tool's last
/// successful call returned (its output, trimmed, as one argument value),
/// every other argument as that call had it (or left out): the model
/// saying it is done. A result passed on with another argument changed
/// ("Hello World" to snake case after title case) is the next step.
pub(crate) fn echoes_a_result(history: &[ToolCallRecord], tool: &str, args: &Value) -> bool {
    let Some(last) = history.iter().rev().find(|r| !r.is_error) else {
        return false;
    };
    if last.tool != tool || last.args == *args {
        return false;
    }
    let output = last.output.trim();
    if output.is_empty() || output.len() > 200 {
        return false;
    }
    let Some(obj) = args.as_object() else {
        return false;
    };
    let is_output = |v: &Value| match v {
        Value::String(s) => s.trim() == output,
        Value::Number(n) => n.to_string() == output,
        _ => false,
    };
    obj.iter().any(|(key, v)| {
        is_output(v)
            && obj
                .iter()
                .filter(|(other, _)| *other != key)
                .all(|(other, w)| last.args.get(other) == Some(w))
    })
}

/// How the host's note on a repeated read-only call begins (`plan.rs`):
/// the rest of such an output is the host's, not the tool's.
pub(crate) const REPEAT_NOTE: &str = "\n\n[This is the result of the identical";

/// Longest tool output quoted in an answer from results.
const QUOTED_OUTPUT_CHARS: usize = 1000;

/// How many results an answer from results quotes (the last ones).
const QUOTED_RESULTS: usize = 3;

/// An answer from the run's successful results, the last few, one sentence
/// each ("calculate(2*(3+4)) returned 14."); `None` when no call succeeded.
pub(crate) fn from_results(history: &[ToolCallRecord]) -> Option<String> {
    // Each result once, as the tool gave it: a repeat answered from the
    // result before it carries the host's note, which is not the tool's.
    let mut ok: Vec<(&ToolCallRecord, &str)> = Vec::new();
    for r in history.iter().filter(|r| !r.is_error) {
        let output = r
            .output
            .split_once(REPEAT_NOTE)
            .map_or(r.output.as_str(), |(before, _)| before)
            .trim();
        if !ok.iter().any(|(o, out)| o.tool == r.tool && *out == output) {
            ok.push((r, output));
        }
    }
    let last = &ok[ok.len().saturating_sub(QUOTED_RESULTS)..];
    if last.is_empty() {
        return None;
    }
    let sentences: Vec<String> = last
        .iter()
        .map(|&(r, whole)| {
            let output: String = whole.chars().take(QUOTED_OUTPUT_CHARS).collect();
            let more = if output.len() < whole.len() {
                " …"
            } else {
                ""
            };
            let sep = if output.contains('\n') { ":\n" } else { " " };
            let end = if output.ends_with(['.', '!', '?', '\n']) || !more.is_empty() {
                ""
            } else {
                "."
            };
            format!(
                "{}({}) returned{sep}{output}{more}{end}",
                r.tool,
                arguments(&r.args)
            )
        })
        .collect();
    Some(sentences.join("\n"))
}

/// Longest error quoted from a failed call in [`no_answer`].
const QUOTED_ERROR_CHARS: usize = 200;

/// The host's words when a run ends with no answer and no successful
/// result ([`AnswerSource::Host`](super::result::AnswerSource::Host)): why,
/// from the status, and the last calls that failed with their errors.
/// `unparsable`: the run ended because the server could not parse what the
/// model wrote.
pub(crate) fn no_answer(
    status: crate::status::Status,
    unparsable: bool,
    history: &[ToolCallRecord],
) -> String {
    use crate::status::Status;
    let why = match status {
        Status::Timeout => " within the run's time limit",
        Status::MaxRounds => " within the round limit",
        Status::DoomLoop => ": it repeated a call instead",
        Status::Error if unparsable => ": the server could not parse what it wrote",
        _ => "",
    };
    let mut text = format!("The model gave no answer{why}.");
    // Each failure once (a model that repeats a failing call fails alike).
    // A call the host did not run (a repeat refused, the round's cap) is
    // its note to the model, not a failure for a person to read.
    let mut failed: Vec<&ToolCallRecord> = Vec::new();
    let not_run = |r: &ToolCallRecord| r.error_kind == Some(crate::ErrorKind::NotRun);
    for r in history.iter().filter(|r| r.is_error && !not_run(r)) {
        if !failed
            .iter()
            .any(|f| f.tool == r.tool && f.arguments == r.arguments && f.output == r.output)
        {
            failed.push(r);
        }
    }
    for r in &failed[failed.len().saturating_sub(QUOTED_RESULTS)..] {
        let first = r.output.trim().lines().next().unwrap_or_default();
        let error: String = first.chars().take(QUOTED_ERROR_CHARS).collect();
        let more = if error.len() < r.output.trim().len() {
            " …"
        } else {
            ""
        };
        // An unknown tool's arguments were never parsed: as the model wrote them.
        let args = if r.args.is_null() {
            r.arguments.chars().take(QUOTED_ERROR_CHARS).collect()
        } else {
            arguments(&r.args)
        };
        text.push_str(&format!("\n{}({args}) failed: {error}{more}", r.tool));
    }
    text
}

/// A call's arguments as a person reads them: one value bare, else JSON.
/// A call's arguments as an answer from results quotes them: a lone
/// argument as its value, else the JSON; only the first line, and at most
/// [`QUOTED_ARGUMENT_CHARS`] (a small model copied the host's note on a
/// repeat into its next call's text, and the answer then quoted the note).
fn arguments(args: &Value) -> String {
    let whole = match args.as_object() {
        Some(obj) if obj.len() == 1 => match obj.values().next() {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        },
        Some(obj) if obj.is_empty() => String::new(),
        _ => args.to_string(),
    };
    let first = whole.lines().next().unwrap_or_default();
    let cut: String = first.chars().take(QUOTED_ARGUMENT_CHARS).collect();
    if cut.len() < whole.trim_end().len() {
        format!("{} …", cut.trim_end())
    } else {
        cut
    }
}

/// Longest argument text an answer from results quotes.
const QUOTED_ARGUMENT_CHARS: usize = 120;

#[cfg(test)]
pub(in crate::agent) mod tests {
    use serde_json::json;

    use super::*;
    use crate::Usage;

    pub(in crate::agent) fn record(
        tool: &str,
        args: Value,
        output: &str,
        is_error: bool,
    ) -> ToolCallRecord {
        ToolCallRecord {
            call_id: "c".into(),
            tool: tool.into(),
            requested_name: tool.into(),
            arguments: args.to_string(),
            args,
            output: output.into(),
            is_error,
            error_kind: None,
            details: None,
            var: None,
            started_at_ms: 0,
            ended_at_ms: 0,
            duration_ms: 0,
            round: 1,
            round_usage: Usage::default(),
            steps: Vec::new(),
            cached: false,
        }
    }

    const SYSTEM: &str =
        "You are a helpful assistant with access to tools. Use a tool when it helps.";

    #[test]
    fn calls_in_every_shape_are_not_words() {
        for text in [
            r#"{"name": "calculate", "arguments": {"expression": "14"}}"#,
            r#"  {"tool": "calculate", "parameters": {"expression": "14"}}  "#,
            r#"[{"name": "calculate", "arguments": {}}]"#,
            r#"{"function": {"name": "calculate", "arguments": "{}"}}"#,
            "```json\n{\"name\": \"calculate\", \"arguments\": {\"expression\": \"14\"}}\n```",
            "Let me compute it:\n```\n{\"name\": \"calculate\", \"arguments\": {}}\n```",
            "<tool_call>\n{\"name\": \"calculate\", \"arguments\": {}}\n</tool_call>",
            "<function=calculate>{\"expression\": \"14\"}</function>",
            "<tool_code>calculate(expression='14')</tool_code>",
            "[TOOL_CALLS] [{\"name\": \"calculate\"}]",
            // Broken JSON, as a 0.5B model wrote it: cut at the token
            // bound, an invalid escape, a stray brace.
            "```json\n{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\":\"w\"}, \"id\": \"call_123456789",
            "```json\n{\"tool_calls\": [{\"name\": \"regex_find\", \"arguments\": {\"pattern\": \"a+\\.b\"}}]}\n{\"tool_calls\": [",
            "{\"tool_calls\": [{\"name\": \"read_file\", \"arguments\": {\"path\":\"a\"}, \"error\": \"x\"}}]}",
            "{ \"name\": \"calculate\",\n  \"arguments\": {\"expression\": \"1+",
        ] {
            assert_eq!(
                not_words(text, SYSTEM, ""),
                Some(SetAside::CallAsText),
                "{text}"
            );
        }
    }

    #[test]
    fn copies_of_the_hosts_text_are_not_words() {
        for text in [
            "The tool `calculate` returned an error: not run: the loop stopped\nAssistant called the tool `calculate` with {\"expression\": \"51\"}",
            "Assistant called the tool `calculate` with {\"expression\": \"2*(3+4)\"}",
            "[System-generated log of the conversation so far]",
            "You are a helpful assistant with access to tools. Use a tool when it helps. Sure!",
            // A tool result written out as the answer: the prompt
            // protocols' result forms and the chat templates' result tags.
            "<tool_result name=\"case_convert\" id=\"call_1\">HELLO WORLD AGAIN</tool_result>",
            "Tool result (case_convert, call_1):\nhello_world_again",
            "Tool error (calculate, call_2): unknown name 'a'",
            "<tool_response>\n14\n</tool_response>",
            "[TOOL_RESULTS] {\"content\": \"14\"}",
            // The log's result lines given as the answer (the 0.5B, json).
            "The tool `read_var` returned an error: `read_var` failed: no variable named \
             `read_var`. Stored variables: result_1, result_2.\n\nThe tool `read_var` returned \
             an error: `read_var` failed: no variable named `read_var`.",
            "The answer:\nThe tool `calculate` returned: 14",
            // The doom-loop note retold (Qwen2.5-Coder-1.5B, native).
            "The `case_convert` tool was called 3 times in a row with the same arguments, and \
             its result is already above. Therefore, I cannot call it again.",
        ] {
            assert_eq!(
                not_words(text, SYSTEM, ""),
                Some(SetAside::HostText),
                "{text}"
            );
        }
        assert_eq!(not_words("  \n", SYSTEM, ""), Some(SetAside::Empty));
        for bare in ["```\n", "```json\n```", "{}", " ... ", "[ ]"] {
            assert_eq!(
                not_words(bare, SYSTEM, ""),
                Some(SetAside::Empty),
                "{bare:?}"
            );
        }
        assert_eq!(not_words("14", SYSTEM, ""), None, "a number is an answer");
    }

    #[test]
    fn the_question_repeated_is_not_an_answer_but_one_that_quotes_it_is() {
        let q = "What is 2*(3+4)? Use the calculate tool.";
        for echo in [
            "What is 2*(3+4)? Use the calculate tool.",
            "what is 2*(3+4)?  use the calculate tool",
            "What is 2*(3+4)? Use the case_convert tool.",
        ] {
            assert_eq!(
                not_words(echo, SYSTEM, q),
                Some(SetAside::QuestionRepeated),
                "{echo}"
            );
        }
        for answer in [
            "What is 2*(3+4)? It is 14.",
            "2*(3+4) is 14.",
            "What is 2*(3+4)? Use the calculate tool. I did: it returned 14, so the answer is 14.",
        ] {
            assert_eq!(not_words(answer, SYSTEM, q), None, "{answer}");
        }
        assert_eq!(not_words("Hi", SYSTEM, "Hi"), None, "too short to judge");
    }

    #[test]
    fn answers_in_words_are_words_even_with_json_or_code_in_them() {
        for text in [
            "2*(3+4) is 14.",
            "The result is 14.",
            "The file holds {\"a\": 1} and nothing else; its name is `data.json`.",
            "Use `calculate` next time: it returned 14.",
            "The tool `calculate` returned 14, so 2*(3+4) is 14.",
            "The tool `calculate` returned an error, so I computed it myself: 14.",
            "The tool returned: 14.",
            "Here is the config:\n```json\n{\"port\": 8080, \"host\": \"localhost\"}\n```",
            // JSON that starts with a name but is no call.
            "{\"name\": \"Ada\", \"born\": 1815}",
            "```json\n[{\"name\": \"a.txt\", \"size\": 2}]\n```",
            "Tool results are in: the file has 4 lines.",
            "The tool result (14) is the answer.",
        ] {
            assert_eq!(not_words(text, SYSTEM, ""), None, "{text}");
        }
    }

    #[test]
    fn a_call_that_hands_back_the_last_result_is_an_echo() {
        let history = vec![record(
            "calculate",
            json!({"expression": "2*(3+4)"}),
            "14",
            false,
        )];
        assert!(echoes_a_result(
            &history,
            "calculate",
            &json!({"expression": "14"})
        ));
        assert!(echoes_a_result(
            &history,
            "calculate",
            &json!({"expression": " 14 "})
        ));
        assert!(!echoes_a_result(
            &history,
            "calculate",
            &json!({"expression": "14*2"})
        ));
        assert!(!echoes_a_result(
            &history,
            "other",
            &json!({"expression": "14"})
        ));
        // The same call again is a repeat, not an echo.
        assert!(!echoes_a_result(
            &history,
            "calculate",
            &json!({"expression": "2*(3+4)"})
        ));
        let failed = vec![record("calculate", json!({"expression": "x"}), "14", true)];
        assert!(!echoes_a_result(
            &failed,
            "calculate",
            &json!({"expression": "14"})
        ));
        let numbers = vec![record("add", json!({"a": 2, "b": 3}), "5", false)];
        assert!(echoes_a_result(&numbers, "add", &json!({"a": 5})));
    }

    #[test]
    fn a_result_passed_on_with_other_arguments_changed_is_the_next_step_not_an_echo() {
        // "Hello World Again" to title case gave "Hello World Again"; the
        // same text to snake case is the work the user asked for.
        let history = vec![record(
            "case_convert",
            json!({"text": "Hello World Again", "to": "title"}),
            "Hello World Again",
            false,
        )];
        assert!(!echoes_a_result(
            &history,
            "case_convert",
            &json!({"text": "Hello World Again", "to": "snake"})
        ));
        // Handed back with the other arguments as they were: an echo.
        let upper = vec![record(
            "case_convert",
            json!({"text": "make it so", "to": "upper"}),
            "MAKE IT SO",
            false,
        )];
        assert!(echoes_a_result(
            &upper,
            "case_convert",
            &json!({"text": "MAKE IT SO", "to": "upper"})
        ));
        // An argument the last call did not have is a new request too.
        assert!(!echoes_a_result(
            &upper,
            "case_convert",
            &json!({"text": "MAKE IT SO", "to": "upper", "locale": "tr"})
        ));
    }

    #[test]
    fn an_answer_from_results_quotes_the_last_successful_calls() {
        let history = vec![
            record("calculate", json!({"expression": "2*(3+4)"}), "14", false),
            record("calculate", json!({"expression": "14"}), "not run", true),
        ];
        assert_eq!(
            from_results(&history).as_deref(),
            Some("calculate(2*(3+4)) returned 14.")
        );
        let many = vec![
            record("a", json!({}), "one.", false),
            record("b", json!({"x": 1, "y": 2}), "two", false),
        ];
        assert_eq!(
            from_results(&many).as_deref(),
            Some("a() returned one.\nb({\"x\":1,\"y\":2}) returned two.")
        );
        assert_eq!(from_results(&[]), None);
        let long = vec![record("read", json!({"p": "f"}), &"x".repeat(5000), false)];
        let text = from_results(&long).unwrap();
        assert!(text.len() < 1100 && text.ends_with(" …"), "{}", text.len());
    }

    #[test]
    fn an_answer_from_results_quotes_the_first_line_of_an_argument_only() {
        // The 0.5B (xml) copied the repeat note into its next call's text.
        let text = "poem.txt\nThis is the result of the identical `word_count` call just before; \
                    it was not run again. Use it to answer the user now.";
        let history = vec![record(
            "word_count",
            json!({ "text": text }),
            "2 words",
            false,
        )];
        assert_eq!(
            from_results(&history).as_deref(),
            Some("word_count(poem.txt …) returned 2 words.")
        );
        let long = "x".repeat(500);
        let history = vec![record(
            "word_count",
            json!({ "text": long }),
            "1 word",
            false,
        )];
        let answer = from_results(&history).unwrap();
        assert!(
            answer.starts_with(&format!("word_count({} …)", "x".repeat(120))),
            "{answer}"
        );
    }

    #[test]
    fn an_answer_from_results_quotes_each_result_once_without_the_hosts_repeat_note() {
        let poem = "line one\nline two\n";
        let repeat =
            format!("{poem}{REPEAT_NOTE} `read_file` call just before; it was not run again.]");
        let history = vec![
            record(
                "read_file",
                json!({"path": "poem.txt", "limit": 2000}),
                poem,
                false,
            ),
            record("read_file", json!({"path": "poem.txt"}), poem, false),
            record("read_file", json!({"path": "poem.txt"}), &repeat, false),
        ];
        let text = from_results(&history).unwrap();
        assert_eq!(
            text,
            "read_file({\"limit\":2000,\"path\":\"poem.txt\"}) returned:\nline one\nline two."
        );
    }

    #[test]
    fn no_answer_says_why_and_names_each_failed_call_once() {
        use crate::status::Status;
        let missing = "`read_file` failed: 'flower.txt' does not exist";
        // The host's refusal of the third repeat is its note to the model,
        // not a failure a person needs to read (the eval's words check
        // found it in the answer).
        let mut refused = record(
            "read_file",
            json!({"path": "flower.txt"}),
            "not run: `read_file` was called 3 times in a row with the same arguments; \
             its result is already above: do not call it again, answer with what you have",
            true,
        );
        refused.error_kind = Some(crate::ErrorKind::NotRun);
        let history = vec![
            record("read_file", json!({"path": "flower.txt"}), missing, true),
            record("read_file", json!({"path": "flower.txt"}), missing, true),
            record("list_dir", json!({"path": "."}), "a.txt", false),
            refused,
        ];
        assert_eq!(
            no_answer(Status::DoomLoop, false, &history),
            "The model gave no answer: it repeated a call instead.\n\
             read_file(flower.txt) failed: `read_file` failed: 'flower.txt' does not exist"
        );
        assert_eq!(
            no_answer(Status::Completed, false, &[]),
            "The model gave no answer."
        );
    }

    #[test]
    fn the_echo_check_walks_no_further_than_it_must_and_says_what_the_full_comparison_says() {
        // The comparison of whole normalised texts it replaced (2026-11-28).
        fn reference(text: &str, question: &str) -> bool {
            let norm = |s: &str| -> Vec<char> {
                s.chars()
                    .filter(|c| c.is_alphanumeric())
                    .flat_map(char::to_lowercase)
                    .collect()
            };
            let (t, q) = (norm(text), norm(question));
            if q.len() < 12 {
                return false;
            }
            let common = t.iter().zip(&q).take_while(|(a, b)| a == b).count();
            t == q || (t.len() * 10 <= q.len() * 13 && common * 2 >= q.len())
        }
        let question = "What is the capital of France, and its population?";
        let texts = [
            "",
            "done",
            question,
            "what is the capital of france and its population",
            "What is the capital of Germany, and its population?",
            "What is the capital",
            "What is the capital of France?",
            "What is the capital of France, and its population? Paris, about two million people.",
            "Paris.",
            "WHAT IS THE CAPITAL OF FRANCE, AND ITS POPULATION!!",
            "İstanbul is not the capital of France, and its population is larger.",
        ];
        for text in texts {
            for q in [question, "short one", "What is 6*7?", "İİİİİİİİİİİİİİ"] {
                assert_eq!(
                    echoes_the_question(text, q),
                    reference(text, q),
                    "{text:?} against {q:?}"
                );
            }
        }
        assert!(echoes_the_question(
            "what is the capital of france and its population",
            question
        ));
        assert!(!echoes_the_question("Paris.", question));
    }
}
