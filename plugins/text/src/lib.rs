//! toolhost plugin `text`: word counts, regular-expression search and case
//! conversion. All tools are pure functions of their arguments.

mod case;
mod count;
mod find;

use toolhost_sdk::prelude::*;

/// Counts the words, lines and characters of a text.
#[derive(Deserialize, JsonSchema)]
struct WordCount {
    /// The text to count.
    text: String,
}

fn word_count(_cx: &Context, args: WordCount) -> Result<Output, ToolError> {
    let c = count::count(&args.text);
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    Ok(Output::new(format!(
        "{}, {}, {}",
        plural(c.words, "word"),
        plural(c.lines, "line"),
        plural(c.characters, "character")
    ))
    .with_details(json!({
        "words": c.words,
        "lines": c.lines,
        "characters": c.characters,
        "bytes": c.bytes,
    })))
}

/// Finds the matches of a regular expression in a text and reports where
/// they are (line, column and byte offsets). Uses Rust regex syntax (no
/// look-around or backreferences); prefix the pattern with (?i) to ignore
/// case and (?m) to make ^ and $ match at line boundaries.
#[derive(Deserialize, JsonSchema)]
struct RegexFind {
    /// The regular expression.
    pattern: String,
    /// The text to search.
    text: String,
    /// How many matches to return at most (default 100).
    #[schemars(range(min = 1, max = 10000))]
    max_matches: Option<u32>,
}

/// Longest piece of a match shown in the output text.
const SHOWN_MATCH_CHARS: usize = 200;

fn regex_find(_cx: &Context, args: RegexFind) -> Result<Output, ToolError> {
    let max = args.max_matches.unwrap_or(100).clamp(1, 10_000) as usize;
    let found = find::find(&args.pattern, &args.text, max)
        .map_err(|e| ToolError::invalid_arguments(format!("invalid regular expression: {e}")))?;

    let mut output = match found.total {
        0 => "no matches".to_string(),
        1 => "1 match:".to_string(),
        n if n > found.matches.len() => {
            format!("{n} matches (showing the first {}):", found.matches.len())
        }
        n => format!("{n} matches:"),
    };
    for m in &found.matches {
        output.push_str(&format!(
            "\nline {}, column {} (bytes {}..{}): {}",
            m.line,
            m.column,
            m.start,
            m.end,
            shown(&m.text)
        ));
    }
    let matches: Vec<Value> = found
        .matches
        .iter()
        .map(|m| {
            json!({
                "start": m.start,
                "end": m.end,
                "line": m.line,
                "column": m.column,
                "text": m.text,
                "groups": m.groups,
            })
        })
        .collect();
    Ok(Output::new(output).with_details(json!({
        "pattern": args.pattern,
        "total": found.total,
        "returned": found.matches.len(),
        "truncated": found.total > found.matches.len(),
        "group_names": found.group_names,
        "matches": matches,
    })))
}

/// A match as shown to the model: control characters escaped, long matches
/// shortened.
fn shown(text: &str) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == SHOWN_MATCH_CHARS {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// Converts a text to another case: upper, lower or title case (which keep
/// every character), or an identifier style (snake_case, kebab-case,
/// camelCase, PascalCase, CONSTANT_CASE) that splits the text into words at
/// punctuation, spaces and case changes.
#[derive(Deserialize, JsonSchema)]
struct CaseConvert {
    /// The text to convert.
    text: String,
    /// The case to convert to.
    to: case::Case,
}

fn case_convert(_cx: &Context, args: CaseConvert) -> Result<String, ToolError> {
    Ok(case::convert(&args.text, args.to))
}

toolhost_sdk::plugin! {
    tools: [
        word_count(WordCount) read_only idempotent,
        regex_find(RegexFind) read_only idempotent,
        case_convert(CaseConvert) read_only idempotent,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, args: Value) -> Result<Output, ToolError> {
        plugin().call(&Context::default(), tool, &args.to_string())
    }

    #[test]
    fn plugin_is_valid() {
        plugin().validate().unwrap();
        let names: Vec<String> = plugin().specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["word_count", "regex_find", "case_convert"]);
        for spec in plugin().specs() {
            assert!(spec.annotations.read_only && spec.annotations.idempotent);
        }
    }

    #[test]
    fn word_count_tool() {
        let out = call("word_count", json!({"text": "one two\nthree"})).unwrap();
        assert_eq!(out.output(), "3 words, 2 lines, 13 characters");
        assert_eq!(
            out.details_json(),
            Some(json!({"words": 3, "lines": 2, "characters": 13, "bytes": 13}))
        );
        let out = call("word_count", json!({"text": "x"})).unwrap();
        assert_eq!(out.output(), "1 word, 1 line, 1 character");
    }

    #[test]
    fn regex_find_tool() {
        let out = call(
            "regex_find",
            json!({"pattern": r"b\w+", "text": "foo bar\nbaz", "max_matches": 1}),
        )
        .unwrap();
        assert_eq!(
            out.output(),
            "2 matches (showing the first 1):\nline 1, column 5 (bytes 4..7): bar"
        );
        let d = out.details_json().unwrap();
        assert_eq!(d["total"], 2);
        assert_eq!(d["truncated"], true);
        assert_eq!(d["matches"][0]["start"], 4);
        assert_eq!(d["matches"][0]["end"], 7);

        let out = call("regex_find", json!({"pattern": "a\nb", "text": "a\nb"})).unwrap();
        assert_eq!(
            out.output(),
            "1 match:\nline 1, column 1 (bytes 0..3): a\\nb"
        );
        let out = call("regex_find", json!({"pattern": "q", "text": "abc"})).unwrap();
        assert_eq!(out.output(), "no matches");
    }

    #[test]
    fn regex_find_bad_pattern_is_invalid_arguments() {
        let err = call("regex_find", json!({"pattern": "(", "text": "abc"})).unwrap_err();
        assert!(err.is_invalid_arguments());
        assert!(
            err.message().starts_with("invalid regular expression: "),
            "{err}"
        );
    }

    #[test]
    fn shown_shortens_and_escapes() {
        assert_eq!(shown("a\tb\u{1}"), "a\\tb\\u{1}");
        let long = "x".repeat(500);
        assert_eq!(shown(&long).chars().count(), SHOWN_MATCH_CHARS + 1);
    }

    #[test]
    fn case_convert_tool() {
        let out = call(
            "case_convert",
            json!({"text": "Hello World", "to": "snake"}),
        )
        .unwrap();
        assert_eq!(out.output(), "hello_world");
        let err = call("case_convert", json!({"text": "x", "to": "sideways"})).unwrap_err();
        assert!(err.is_invalid_arguments());
        assert!(
            err.message().contains("unknown variant `sideways`"),
            "{err}"
        );
        let spec = plugin().specs().remove(2);
        let schema = spec.input_schema.to_string();
        for case in [
            "upper", "lower", "title", "snake", "kebab", "camel", "pascal", "constant",
        ] {
            assert!(
                schema.contains(&format!("\"{case}\"")),
                "{case} missing in {schema}"
            );
        }
    }
}
