//! A tool the user asked for by name ("Use the calculate tool", "read it
//! with `read_file`"), which the model did not call.
//!
//! A small model often answers at once, from its own guess, when the user
//! told it which tool to use, or to use one at all (Qwen2.5-Coder-0.5B
//! through the json protocol answers "What is 2*(3+4)? Use the calculate
//! tool." with "10": docs/log.md, "Eval round 4"). When the first reply of a run calls
//! nothing and the user's message names an offered tool, the loop asks once
//! more with `tool_choice: required`, offering only the tools named
//! (`exchange.rs`; every read-only tool when the user asked for "a tool"
//! without a name); whatever that reply is, the run goes on from it.
//! (Offered every read-only tool, the 0.5B answered "Convert … with the
//! case_convert tool" by calling `word_count`.)
//!
//! A call the host forces never changes anything: only a read-only tool
//! counts as named. Asking what `delete_file` does is no reason to call it.
//!
//! Only a clear mention counts ([`named_tools`]): the name in backticks, a
//! name no prose word has (with `_`, `-`, `.` or a digit), or a plain word
//! next to "tool" or "function", or after "use", "using", "call", "with" or
//! "via". A mention after a negation ("without", "not", "don't", "never",
//! "no", "avoid") is not a request.

use crate::tools::ToolSpec;

/// How far into the user's message mentions are looked for.
const SCAN_CHARS: usize = 8_000;

/// Words that, among the few words before a mention, make it no request
/// (besides any word ending in "n't": don't, can't, shouldn't, …).
const NEGATIONS: &[&str] = &[
    "not", "without", "never", "no", "dont", "avoid", "cannot", "instead",
];

/// Words just before a plain name that make it a request for the tool.
const CALL_VERBS: &[&str] = &["use", "using", "call", "calling", "with", "via", "run"];

/// Words passed over between a verb and the tool ("use the calculate
/// tool", "with a tool").
const DETERMINERS: &[&str] = &["the", "a", "an", "any", "your", "some", "these", "those"];

/// How many words before a mention are checked for a negation.
const NEGATION_REACH: usize = 4;

/// The offered read-only tools that `question` asks for by name (see the
/// module's docs), in the order offered; every read-only tool when it asks
/// for a tool without naming one ("Use a tool.", "with the tools").
pub(crate) fn named_tools<'t>(question: &str, tools: &'t [ToolSpec]) -> Vec<&'t str> {
    let text = scanned(question);
    let named = by_name(&text, tools);
    if named.is_empty() && ["tool", "tools"].into_iter().any(|w| mentioned(&text, w)) {
        return read_only(tools).collect();
    }
    named
}

/// The offered read-only tools `question` asks for by name (never "a
/// tool" without one) that no call in `history` has used: after the model
/// repeated a call, the next request must call one of them (`plan.rs`).
pub(crate) fn named_not_called(
    question: &str,
    tools: &[ToolSpec],
    history: &[crate::ToolCallRecord],
) -> Vec<String> {
    by_name(&scanned(question), tools)
        .into_iter()
        .filter(|name| !history.iter().any(|r| r.tool == *name))
        .map(str::to_owned)
        .collect()
}

fn read_only(tools: &[ToolSpec]) -> impl Iterator<Item = &str> {
    tools
        .iter()
        .filter(|t| t.read_only)
        .map(|t| t.name.as_str())
        .filter(|name| !name.is_empty())
}

/// The read-only `tools` that `text` (from [`scanned`]) names.
fn by_name<'t>(text: &str, tools: &'t [ToolSpec]) -> Vec<&'t str> {
    read_only(tools)
        .filter(|name| {
            // Most names are lower-case already: copied only when not.
            if name.bytes().any(|b| b.is_ascii_uppercase()) {
                mentioned(text, &name.to_ascii_lowercase())
            } else {
                mentioned(text, name)
            }
        })
        .collect()
}

/// The `withheld` tools (names the executor does not offer,
/// [`ToolExecutor::withheld_tools`](crate::ToolExecutor::withheld_tools))
/// that `question` asks for by name, each once, in the order given.
pub(crate) fn withheld_named(question: &str, withheld: &[String]) -> Vec<String> {
    let text = scanned(question);
    let mut named: Vec<String> = Vec::new();
    for name in withheld {
        if !name.is_empty() && !named.contains(name) && mentioned(&text, &name.to_ascii_lowercase())
        {
            named.push(name.clone());
        }
    }
    named
}

/// What the model is told when the user asks for tools it is not offered
/// ([`withheld_named`]), as a part of the system prompt.
pub(crate) fn withheld_note(names: &[String]) -> String {
    let list = quoted(names);
    format!(
        "# Tools not allowed here\n\nThe user's message asks for {list}, which this host does \
         not allow here: you cannot call it. Do not call another tool in its place; tell the \
         user you cannot use {list} here."
    )
}

/// The result of a call of a withheld tool the user asked for: refused as
/// not allowed (a permission denial), not as an unknown name.
pub(crate) fn withheld_refusal(name: &str) -> String {
    format!(
        "`{name}` is not allowed here: this host withholds it. Tell the user you cannot use it."
    )
}

/// `text`, an answer the host writes itself (from the results, or why
/// there are none), with a line on the tools the user asked for that were
/// withheld (`RunState::withheld`), if any.
pub(crate) fn and_withheld(mut text: String, withheld: &[String]) -> String {
    if !withheld.is_empty() {
        text.push_str(&format!(
            "\nThe request asks for {}, which this host does not allow here, so the model \
             cannot use it.",
            quoted(withheld)
        ));
    }
    text
}

pub(crate) fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The start of `question`, lower-cased, that mentions are looked for in.
fn scanned(question: &str) -> String {
    let end = question
        .char_indices()
        .nth(SCAN_CHARS)
        .map_or(question.len(), |(i, _)| i);
    question[..end].to_ascii_lowercase()
}

/// Whether `text` (lower-cased) asks for `word` (lower-cased) anywhere.
fn mentioned(text: &str, word: &str) -> bool {
    text.match_indices(word)
        .any(|(at, _)| asks_for(text, at, word.len(), word))
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Whether the mention of `name` at `text[at..at + len]` is a request for
/// the tool.
fn asks_for(text: &str, at: usize, len: usize, name: &str) -> bool {
    let (before, after) = (&text[..at], &text[at + len..]);
    // A whole name, not part of a longer word.
    if before.chars().next_back().is_some_and(is_name_char)
        || after.chars().next().is_some_and(is_name_char)
    {
        return false;
    }
    // The last words before the mention, nearest first (only these are
    // looked at, however long the text before them).
    let mut recent: [&str; NEGATION_REACH] = [""; NEGATION_REACH];
    for (slot, word) in recent.iter_mut().zip(
        before
            .rsplit(|c: char| !(is_name_char(c) || c == '\''))
            .filter(|w| !w.is_empty()),
    ) {
        *slot = word;
    }
    let recent = recent.iter().filter(|w| !w.is_empty());
    if recent
        .clone()
        .any(|w| NEGATIONS.contains(w) || w.ends_with("n't"))
    {
        return false;
    }
    let quoted = before.ends_with('`') && after.starts_with('`');
    let unusual = name
        .chars()
        .any(|c| c == '_' || c == '-' || c == '.' || c.is_ascii_digit());
    let next_word = after
        .split(|c: char| !is_name_char(c))
        .find(|w| !w.is_empty())
        .unwrap_or("");
    let previous = recent
        .copied()
        .find(|w| !DETERMINERS.contains(w))
        .unwrap_or("");
    quoted
        || unusual
        || matches!(next_word, "tool" | "tools" | "function")
        || CALL_VERBS.contains(&previous)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn specs(names: &[&str]) -> Vec<ToolSpec> {
        names
            .iter()
            .map(|n| ToolSpec {
                name: (*n).into(),
                description: String::new(),
                input_schema: Arc::new(serde_json::json!({"type": "object"})),
                read_only: true,
            })
            .collect()
    }

    #[test]
    fn a_tool_that_changes_things_is_never_taken_as_named() {
        let mut tools = specs(&["delete_file", "read_file"]);
        tools[0].read_only = false;
        assert!(named_tools("What does `delete_file` do?", &tools).is_empty());
        assert_eq!(
            named_tools("Use delete_file, then read_file.", &tools),
            ["read_file"]
        );
    }

    #[test]
    fn a_tool_the_user_asks_for_by_name_is_found() {
        let tools = specs(&["calculate", "read_file", "word_count", "search"]);
        for (q, want) in [
            ("What is 2*(3+4)? Use the calculate tool.", "calculate"),
            ("Use calculate to add 2 and 3.", "calculate"),
            ("Read it with `search` please", "search"),
            (
                "Read only lines 3 and 4 of list.txt, using read_file",
                "read_file",
            ),
            ("Count its words with the word_count tool.", "word_count"),
            ("CALCULATE TOOL: 2+2", "calculate"),
        ] {
            assert_eq!(named_tools(q, &tools), [want], "{q}");
        }
        assert_eq!(
            named_tools(
                "Read it with read_file, then use the calculate tool.",
                &tools
            ),
            ["calculate", "read_file"],
            "every tool named, in the order offered"
        );
    }

    #[test]
    fn a_plain_word_a_negated_mention_or_part_of_a_word_is_no_request() {
        let tools = specs(&["calculate", "read_file", "search", "read"]);
        for q in [
            "Calculate the area of a circle of radius 2.",
            "I read a book; search your memory for its title.",
            "Without the calculate tool: what is 2+2?",
            "Do not use read_file; just guess.",
            "Don't call `search`, answer from memory.",
            "what does unread_files mean?",
            "Without using any tool: how many legs does a cat have?",
        ] {
            assert!(named_tools(q, &tools).is_empty(), "{q}");
        }
    }

    #[test]
    fn a_tool_asked_for_without_a_name_is_any_read_only_tool() {
        let mut tools = specs(&["calculate", "write_note", "word_count"]);
        tools[1].read_only = false;
        for q in [
            "What is 144 divided by 12? Use a tool.",
            "How many lines does poem.txt have? Use the tools.",
            "Count the characters of the word 'lighthouse' with a tool.",
            "Use any tool you like to add 2 and 3.",
        ] {
            assert_eq!(named_tools(q, &tools), ["calculate", "word_count"], "{q}");
        }
        // A named tool is all that is asked for.
        assert_eq!(
            named_tools("Use a tool: the calculate tool.", &tools),
            ["calculate"]
        );
        for q in [
            "Without using any tool: how many legs does a cat have?",
            "What is a tool?",
            "Do not use the tools.",
            "My toolbox has tools in it.",
        ] {
            assert!(named_tools(q, &tools).is_empty(), "{q}");
        }
    }

    #[test]
    fn a_withheld_tool_counts_only_when_the_user_asks_for_it() {
        let withheld = ["http_get".to_owned(), "search".to_owned()];
        assert_eq!(
            withheld_named("Fetch it with the http_get tool.", &withheld),
            ["http_get"]
        );
        for q in [
            "Fetch http://127.0.0.1:9/status.",
            "Do not use http_get.",
            "I will search for it myself.",
        ] {
            assert!(withheld_named(q, &withheld).is_empty(), "{q}");
        }
        assert_eq!(
            and_withheld("calculate(1) returned 1.".into(), &["http_get".into()]),
            "calculate(1) returned 1.\nThe request asks for `http_get`, which this host does \
             not allow here, so the model cannot use it."
        );
        assert_eq!(and_withheld("x".into(), &[]), "x");
    }

    #[test]
    fn a_named_tool_not_called_yet_is_one_no_call_has_used() {
        let tools = specs(&["read_file", "regex_find", "calculate"]);
        let q = "Read emails.txt, then use regex_find to find the e-mail addresses in it.";
        let record = |tool| crate::agent::answer::tests::record(tool, json!({}), "1", false);
        assert_eq!(named_not_called(q, &tools, &[]), ["regex_find"]);
        assert_eq!(
            named_not_called(q, &tools, &[record("read_file")]),
            ["regex_find"]
        );
        let failed = crate::agent::answer::tests::record("regex_find", json!({}), "no", true);
        assert!(named_not_called(q, &tools, &[record("read_file"), failed]).is_empty());
        // "a tool" names none: there is nothing to require after a repeat.
        assert!(named_not_called("Use a tool.", &tools, &[]).is_empty());
    }

    #[test]
    fn only_the_start_of_a_long_message_is_scanned() {
        let tools = specs(&["word_count"]);
        let long = format!("{} use word_count", "x ".repeat(SCAN_CHARS));
        assert!(named_tools(&long, &tools).is_empty());
        assert_eq!(named_tools("é use word_count", &tools), ["word_count"]);
    }
}
