//! Parsing a prompt protocol: the tool calls a model wrote in its text, in
//! either convention ([`parse_tool_calls`]), as bare or fenced JSON or as
//! call tags, with the text around them kept and a result the model
//! imitated after its call cut off.

use serde_json::Value;

use super::profile::PromptProfile;
use super::render::result_markers;
use crate::message::ToolCall;

/// Where a value was found: outside an explicit call (a `tool_calls` list or
/// a call tag) a call needs both a name and arguments.
#[derive(Clone, Copy, PartialEq)]
enum Context {
    Bare,
    Fenced,
    Tag,
}

const ARG_KEYS: [&str; 4] = ["arguments", "parameters", "args", "input"];

fn one_call(v: &Value, ctx: Context) -> Option<(String, String)> {
    let obj = v.as_object()?;
    if let Some(f) = obj.get("function").filter(|f| f.is_object()) {
        return one_call(f, ctx);
    }
    let name = obj.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let args = ARG_KEYS.iter().find_map(|k| obj.get(*k));
    if args.is_none() && ctx != Context::Tag {
        return None;
    }
    let arguments = match args {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Some((name.to_owned(), arguments))
}

/// The calls `v` holds, or `None` when it is not a tool call value.
fn calls_in(v: &Value, ctx: Context) -> Option<Vec<(String, String)>> {
    match v {
        Value::Object(obj) => {
            if let Some(list) = obj.get("tool_calls").and_then(Value::as_array) {
                return Some(
                    list.iter()
                        .filter_map(|c| one_call(c, Context::Tag))
                        .collect(),
                );
            }
            if let Some(c) = obj.get("tool_call") {
                return one_call(c, Context::Tag).map(|c| vec![c]);
            }
            one_call(v, ctx).map(|c| vec![c])
        }
        Value::Array(list) if ctx != Context::Bare && !list.is_empty() => {
            let calls: Vec<_> = list.iter().filter_map(|c| one_call(c, ctx)).collect();
            (calls.len() == list.len()).then_some(calls)
        }
        _ => None,
    }
}

/// A fenced block (three backticks): its whole span and its body's span.
struct Fence {
    start: usize,
    end: usize,
    body: (usize, usize),
}

fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find("```") {
        let start = i + off;
        let after = start + 3;
        // The info string (language) runs to the end of the line. (The search
        // stops at the next fence too: scanning on to a far newline made
        // many fences on one line quadratic.)
        let rest = &text[after..];
        let body_start = match rest
            .match_indices(['\n', '`'])
            .find(|(k, m)| *m == "\n" || rest[*k..].starts_with("```"))
        {
            Some((nl, "\n")) => after + nl + 1,
            _ => after,
        };
        let (body_end, end) = match text[body_start..].find("```") {
            Some(c) => (body_start + c, body_start + c + 3),
            None => (text.len(), text.len()),
        };
        out.push(Fence {
            start,
            end,
            body: (body_start, body_end),
        });
        i = end;
    }
    out
}

/// The first JSON value at `text[pos..]` and where it ends.
fn json_at(text: &str, pos: usize) -> Option<(Value, usize)> {
    let mut it = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<Value>();
    match it.next() {
        Some(Ok(v)) => Some((v, pos + it.byte_offset())),
        _ => None,
    }
}

/// A span of the text holding calls.
type Span = (usize, usize, Vec<(String, String)>);

fn json_spans(text: &str) -> Vec<Span> {
    let fences = fences(text);
    let mut spans = Vec::new();
    for f in &fences {
        let body = text[f.body.0..f.body.1].trim();
        if let Ok(v) = serde_json::from_str::<Value>(body)
            && let Some(calls) = calls_in(&v, Context::Fenced)
        {
            spans.push((f.start, f.end, calls));
        }
    }
    // Bare objects outside fences.
    let mut i = 0;
    let mut next_fence = 0;
    while let Some(off) = text[i..].find('{') {
        let pos = i + off;
        // The fences are in order and `pos` only grows.
        while fences.get(next_fence).is_some_and(|f| f.end <= pos) {
            next_fence += 1;
        }
        if let Some(f) = fences.get(next_fence).filter(|f| f.start <= pos) {
            i = f.end;
            continue;
        }
        match json_at(text, pos) {
            Some((v, end)) => {
                if let Some(calls) = calls_in(&v, Context::Bare) {
                    spans.push((pos, end, calls));
                }
                i = end;
            }
            None => i = pos + 1,
        }
    }
    spans
}

const OPEN_TAGS: [(&str, &str); 2] = [
    ("<tool_code>", "</tool_code>"),
    ("<tool_call>", "</tool_call>"),
];

/// `text[from..].find(pattern)` as a position in `text`, for calls whose
/// `from` never decreases: the last answer is reused while it is still ahead,
/// so that many opening tags without (or far from) a closing one do not make
/// the search quadratic.
struct Finder<'a> {
    text: &'a str,
    pattern: &'static str,
    /// The last answer, once there is one.
    last: Option<Option<usize>>,
}

impl<'a> Finder<'a> {
    fn new(text: &'a str, pattern: &'static str) -> Self {
        Finder {
            text,
            pattern,
            last: None,
        }
    }

    fn find(&mut self, from: usize) -> Option<usize> {
        match self.last {
            Some(None) => return None,
            Some(Some(p)) if p >= from => return Some(p),
            _ => {}
        }
        let found = self.text[from..].find(self.pattern).map(|p| from + p);
        self.last = Some(found);
        found
    }
}

/// Llama 3.1's call form: `<function=NAME>{"arg": …}</function>`, the name
/// in the opening tag and the arguments as a JSON object.
fn function_tag_spans(text: &str) -> Vec<Span> {
    const OPEN: &str = "<function=";
    const CLOSE: &str = "</function>";
    // A tool name is at most 64 bytes: the `>` is looked for that far only,
    // and the closing tag's position is reused while ahead (`Finder`), so
    // many opening tags cannot make the scan quadratic.
    const NAME_MAX: usize = 64;
    let mut closes = Finder::new(text, CLOSE);
    let mut spans = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find(OPEN) {
        let start = i + off;
        let name_start = start + OPEN.len();
        i = name_start;
        let window = text.as_bytes()[name_start..]
            .iter()
            .take(NAME_MAX + 1)
            .position(|&b| b == b'>');
        let Some(name_len) = window else {
            continue;
        };
        let name = text[name_start..name_start + name_len].trim();
        let body_start = name_start + name_len + 1;
        let Some(close) = closes.find(body_start) else {
            break;
        };
        let end = close + CLOSE.len();
        let body = text[body_start..close].trim();
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if valid_name && let Ok(args @ Value::Object(_)) = serde_json::from_str::<Value>(body) {
            spans.push((start, end, vec![(name.to_owned(), args.to_string())]));
            i = end;
        }
    }
    spans
}

fn xml_spans(text: &str) -> Vec<Span> {
    let mut spans = function_tag_spans(text);
    let mut tags: Vec<_> = OPEN_TAGS
        .iter()
        .map(|(o, c)| (*o, *c, Finder::new(text, o), Finder::new(text, c)))
        .collect();
    let mut i = 0;
    loop {
        let next = tags
            .iter_mut()
            .enumerate()
            .filter_map(|(k, (_, _, opens, _))| opens.find(i).map(|p| (p, k)))
            .min();
        let Some((start, k)) = next else {
            break;
        };
        let (open, close, _, closes) = &mut tags[k];
        let body_start = start + open.len();
        let (body_end, end) = match closes.find(body_start) {
            Some(c) => (c, c + close.len()),
            None => (text.len(), text.len()),
        };
        let body = strip_fence(text[body_start..body_end].trim());
        match serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| calls_in(&v, Context::Tag))
        {
            Some(calls) => {
                spans.push((start, end, calls));
                i = end;
            }
            None => i = body_start,
        }
    }
    spans
}

fn strip_fence(body: &str) -> &str {
    let Some(rest) = body.strip_prefix("```") else {
        return body;
    };
    let rest = match rest.find('\n') {
        Some(nl) => &rest[nl + 1..],
        None => rest,
    };
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

/// Where a result the model wrote itself starts: the first result marker
/// after the first call, outside every call span.
fn imitated_result(profile: PromptProfile, text: &str, spans: &[Span]) -> Option<usize> {
    let first = spans.iter().find(|s| !s.2.is_empty())?.0;
    result_markers(profile)
        .iter()
        .filter_map(|m| {
            text[first..]
                .match_indices(m)
                .map(|(k, _)| first + k)
                .find(|&p| !spans.iter().any(|s| s.0 <= p && p < s.1))
        })
        .min()
}

/// Finds the tool calls in `text` written in `profile`'s convention.
///
/// Returns the text without the calls (the pieces around them, trimmed and
/// joined by blank lines; `text` unchanged when there is no call) and the
/// calls in order, with generated ids. Malformed JSON is not a call: it stays
/// in the text. Arguments are kept as JSON text (a string argument value is
/// taken as already-encoded JSON).
pub fn parse_tool_calls(profile: PromptProfile, text: &str) -> (String, Vec<ToolCall>) {
    // The answer form of a constrained reply (`{"answer": "…"}`), also
    // taken when a model writes it unasked.
    if profile == PromptProfile::Json
        && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(strip_fence(text.trim()))
        && map.len() == 1
        && let Some(Value::String(answer)) = map.get("answer")
    {
        return (answer.clone(), Vec::new());
    }
    let mut spans = match profile {
        PromptProfile::Json => json_spans(text),
        PromptProfile::Xml => xml_spans(text),
    };
    if spans.is_empty() {
        return (text.to_owned(), Vec::new());
    }
    spans.sort_by_key(|s| s.0);
    // A model that writes the result of its own call after it (imitating the
    // result messages) invented it: the reply ends where that starts, and
    // calls after it (made on the invented result) are dropped too.
    let text = match imitated_result(profile, text, &spans) {
        Some(cut) => {
            tracing::debug!(
                dropped_bytes = text.len() - cut,
                "dropped a tool result the model wrote after its own call"
            );
            spans.retain(|s| s.0 < cut);
            &text[..cut]
        }
        None => text,
    };
    let batch = fastrand::u32(..);
    let mut pieces = Vec::new();
    let mut calls = Vec::new();
    let mut at = 0;
    for (start, end, found) in spans {
        if start < at || found.is_empty() {
            // Overlaps an earlier span, or holds no valid call: it stays text.
            continue;
        }
        pieces.push(&text[at..start]);
        at = end;
        for (name, arguments) in found {
            calls.push(ToolCall {
                id: format!("call_{batch:08x}_{}", calls.len()),
                name,
                arguments,
            });
        }
    }
    if calls.is_empty() {
        // Found by fuzzing: a block shaped like calls but holding none must
        // not make the model's text disappear.
        return (text.to_owned(), Vec::new());
    }
    pieces.push(&text[at..]);
    let rest: Vec<&str> = pieces
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    (rest.join("\n\n"), calls)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::render::render_tool_calls;

    #[test]
    fn a_calls_block_without_a_valid_call_stays_in_the_text() {
        let text = r#"{"tool_calls": [{"nameunction": {"name": "calculate", "arguments": "{\"expression\":\"1\"}"}}]}"#;
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
    }

    fn names(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn llama_function_tags_are_calls_and_a_bad_name_or_body_stays_text() {
        let text = "<function=calculate>{\"expression\": \"2*(3+4)\"}</function>";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(rest, "");
        assert_eq!(names(&calls), ["calculate"]);
        assert_eq!(calls[0].arguments, r#"{"expression":"2*(3+4)"}"#);
        for bad in [
            "<function=calc ulate>{}</function>",
            "<function=>{}</function>",
            "<function=calculate>not json</function>",
            "<function=calculate>[1]</function>",
            "<function=calculate>{}",
            "<function=calculate",
            "<function=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa>{}</function>",
        ] {
            let (rest, calls) = parse_tool_calls(PromptProfile::Xml, bad);
            assert!(calls.is_empty(), "{bad}");
            assert_eq!(rest, bad);
        }
        // Many opening tags and one far closing tag: each found once.
        let many = "<function=x>".repeat(20_000) + "</function>";
        let (_, calls) = parse_tool_calls(PromptProfile::Xml, &many);
        assert!(calls.is_empty());
    }

    #[test]
    fn json_bare_object() {
        let (text, calls) = parse_tool_calls(
            PromptProfile::Json,
            r#"{"tool_calls":[{"name":"calc","arguments":{"e":"1+1"}}]}"#,
        );
        assert_eq!(text, "");
        assert_eq!(names(&calls), ["calc"]);
        assert_eq!(calls[0].arguments, r#"{"e":"1+1"}"#);
        assert!(calls[0].id.starts_with("call_"));
    }

    #[test]
    fn json_fenced_with_text_around_and_several_calls() {
        let text = "I will compute both.\n```json\n{\n  \"tool_calls\": [\n    {\"name\": \"calc\", \"arguments\": {\"e\": \"1\"}},\n    {\"name\": \"echo\", \"arguments\": {\"s\": \"x\"}}\n  ]\n}\n```\nThen I answer.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calc", "echo"]);
        assert_eq!(rest, "I will compute both.\n\nThen I answer.");
        assert_ne!(calls[0].id, calls[1].id);
    }

    #[test]
    fn json_two_separate_objects_and_single_call_shape() {
        let text = r#"First {"name": "a", "arguments": {}} and {"tool_call": {"name": "b", "arguments": {"k": 1}}} done"#;
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["a", "b"]);
        assert_eq!(calls[1].arguments, r#"{"k":1}"#);
        assert_eq!(rest, "First\n\nand\n\ndone");
    }

    #[test]
    fn json_malformed_is_kept_as_text() {
        let text = "Here: {\"tool_calls\": [{\"name\": \"calc\", \"arguments\": {\"e\": }]}";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
    }

    #[test]
    fn json_ordinary_objects_and_code_are_not_calls() {
        let text =
            "A person: {\"name\": \"Ada\"}\n```python\nprint({\"name\": 1, \"arguments\": 2})\n```";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
    }

    #[test]
    fn json_string_arguments_and_openai_shape() {
        let text = r#"{"tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"e\":\"2\"}"}}]}"#;
        let (_, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calc"]);
        assert_eq!(calls[0].arguments, r#"{"e":"2"}"#);
    }

    #[test]
    fn json_unclosed_fence() {
        let text = "```json\n{\"tool_calls\":[{\"name\":\"calc\",\"arguments\":{}}]}\n";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calc"]);
        assert_eq!(rest, "");
    }

    #[test]
    fn a_result_the_model_wrote_after_its_call_is_cut_with_what_follows() {
        // Qwen2.5-Coder 1.5B, asked "What is 2*(3+4)?" in the xml protocol.
        let text = "<tool_code>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"2*(3+4)\"}}</tool_code>\n\n<tool_result name=\"calculate\" id=\"1\">14</tool_result>\n<tool_code>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"14\"}}</tool_code>";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(names(&calls), ["calculate"]);
        assert_eq!(calls[0].arguments, r#"{"expression":"2*(3+4)"}"#);
        assert_eq!(rest, "");
        let text = "```json\n{\"tool_calls\": [{\"name\": \"calculate\", \"arguments\": {\"expression\": \"1+1\"}}]}\n```\nTool result (calculate, call 1):\n2\n\nThe answer is 2.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calculate"]);
        assert_eq!(rest, "");
        // A marker inside a call's arguments, or before any call, is no
        // imitated result.
        let text = "Results look like <tool_result>.\n<tool_code>{\"name\": \"word_count\", \"arguments\": {\"text\": \"<tool_result name=x>\"}}</tool_code>\nDone.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(names(&calls), ["word_count"]);
        assert_eq!(rest, "Results look like <tool_result>.\n\nDone.");
    }

    #[test]
    fn xml_several_blocks_and_text() {
        let text = "Checking.\n<tool_code>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_code>\n<tool_code>\n```json\n{\"name\": \"b\"}\n```\n</tool_code>\nWait.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(names(&calls), ["a", "b"]);
        assert_eq!(calls[1].arguments, "{}");
        assert_eq!(rest, "Checking.\n\nWait.");
    }

    #[test]
    fn xml_malformed_and_unclosed() {
        let bad = "<tool_code>{\"name\": \"a\", \"arguments\": {</tool_code> ok";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, bad);
        assert!(calls.is_empty());
        assert_eq!(rest, bad);
        let unclosed = "<tool_code>{\"name\": \"a\", \"arguments\": {\"x\": 2}}";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, unclosed);
        assert_eq!(names(&calls), ["a"]);
        assert_eq!(rest, "");
    }

    #[test]
    fn xml_ignores_json_convention_and_accepts_tool_call_tag() {
        let (_, calls) = parse_tool_calls(
            PromptProfile::Xml,
            r#"{"tool_calls":[{"name":"a","arguments":{}}]}"#,
        );
        assert!(calls.is_empty());
        let (_, calls) = parse_tool_calls(
            PromptProfile::Xml,
            r#"<tool_call>{"name":"a","arguments":{}}</tool_call>"#,
        );
        assert_eq!(names(&calls), ["a"]);
    }

    #[test]
    fn no_calls_returns_text_unchanged() {
        let text = "  plain answer with < and { and ``` \n";
        for p in [PromptProfile::Json, PromptProfile::Xml] {
            let (rest, calls) = parse_tool_calls(p, text);
            assert!(calls.is_empty());
            assert_eq!(rest, text);
        }
    }

    #[test]
    fn render_round_trips() {
        let calls = vec![
            ToolCall {
                id: "1".into(),
                name: "a".into(),
                arguments: r#"{"x":1}"#.into(),
            },
            ToolCall {
                id: "2".into(),
                name: "b".into(),
                arguments: "{}".into(),
            },
        ];
        for p in [PromptProfile::Json, PromptProfile::Xml] {
            let text = render_tool_calls(p, &calls);
            let (rest, parsed) = parse_tool_calls(p, &text);
            assert_eq!(rest, "");
            assert_eq!(names(&parsed), ["a", "b"]);
            assert_eq!(parsed[0].arguments, r#"{"x":1}"#);
        }
    }
}
