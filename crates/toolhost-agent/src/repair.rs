//! Making sense of what the model wrote: tool-name repair, argument parsing and
//! the canonical form of arguments used by doom-loop detection.
//!
//! ```
//! use toolhost_agent::repair::{parse_arguments, resolve_tool_name};
//!
//! let tools = ["read_file", "calculate"];
//! assert_eq!(resolve_tool_name("Read-File", tools).unwrap(), "read_file");
//! assert!(resolve_tool_name("delete_everything", tools).is_err());
//! assert_eq!(parse_arguments("").unwrap(), serde_json::json!({}));
//! assert!(parse_arguments("{\"a\": ").is_err());
//! ```

use serde_json::Value;
use toolhost_content::ErrorKind;

/// Why a tool call could not even reach the executor. Its `Display` text is
/// what the model reads as the (error) tool result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallRejection {
    /// No tool has this name, even after repair.
    #[error("unknown tool `{name}`. Available tools: {}.", list(.available))]
    UnknownTool {
        /// The name the model wrote.
        name: String,
        /// The tools it may call instead.
        available: Vec<String>,
    },
    /// The name matches several tools once case and `-`/`_` are ignored.
    #[error("ambiguous tool name `{name}`: it could be {}. Use the exact name.", list(.candidates))]
    AmbiguousTool {
        /// The name the model wrote.
        name: String,
        /// The tools it could mean.
        candidates: Vec<String>,
    },
    /// The arguments are not valid JSON.
    #[error(
        "the arguments are not valid JSON ({message}). Send the arguments as one JSON object, e.g. {{\"name\": \"value\"}}."
    )]
    MalformedArguments {
        /// The parser's message, with line and column.
        message: String,
    },
    /// A variable reference in the arguments could not be substituted
    /// (see [`var_ref`](crate::var_ref)).
    #[error(transparent)]
    VarRef(#[from] crate::var_ref::VarRefError),
}

impl CallRejection {
    /// A stable kind, like the runtime's error kinds.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CallRejection::UnknownTool { .. } | CallRejection::AmbiguousTool { .. } => {
                ErrorKind::NotFound
            }
            CallRejection::MalformedArguments { .. } | CallRejection::VarRef(_) => {
                ErrorKind::InvalidArguments
            }
        }
    }
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}

fn normalize(name: &str) -> String {
    name.trim()
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// Maps the name the model wrote to an available tool: an exact match first,
/// else the one tool equal to it ignoring ASCII case and `-` vs `_` (and
/// surrounding whitespace). Anything else is a [`CallRejection`] listing the
/// available tools.
pub fn resolve_tool_name<'a, I>(name: &str, available: I) -> Result<String, CallRejection>
where
    I: IntoIterator<Item = &'a str>,
{
    let available: Vec<&str> = available.into_iter().collect();
    if available.contains(&name) {
        return Ok(name.to_owned());
    }
    let wanted = normalize(name);
    let candidates: Vec<String> = available
        .iter()
        .filter(|t| normalize(t) == wanted)
        .map(|t| (*t).to_owned())
        .collect();
    match candidates.len() {
        1 => Ok(candidates.into_iter().next().unwrap_or_default()),
        0 => {
            let mut names: Vec<String> = available.iter().map(|t| (*t).to_owned()).collect();
            names.sort();
            Err(CallRejection::UnknownTool {
                name: name.to_owned(),
                available: names,
            })
        }
        _ => Err(CallRejection::AmbiguousTool {
            name: name.to_owned(),
            candidates,
        }),
    }
}

/// Parses the model's argument text. Empty (or blank) text means `{}`.
pub fn parse_arguments(text: &str) -> Result<Value, CallRejection> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    serde_json::from_str(text).map_err(|e| CallRejection::MalformedArguments {
        message: e.to_string(),
    })
}

/// The canonical text of a JSON value: object keys sorted at every level, no
/// whitespace. Two argument sets that mean the same have the same text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exact_match_wins_over_normalized() {
        let tools = ["read_file", "Read_File"];
        assert_eq!(
            resolve_tool_name("Read_File", tools).as_deref(),
            Ok("Read_File")
        );
    }

    #[test]
    fn case_and_dash_are_repaired() {
        let tools = ["read_file", "calculate"];
        assert_eq!(
            resolve_tool_name("READ-FILE", tools).as_deref(),
            Ok("read_file")
        );
        assert_eq!(
            resolve_tool_name(" Calculate ", tools).as_deref(),
            Ok("calculate")
        );
    }

    #[test]
    fn unknown_lists_available_sorted() {
        let err = resolve_tool_name("nope", ["b", "a"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown tool `nope`. Available tools: a, b."
        );
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn ambiguous_is_rejected() {
        let err = resolve_tool_name("A-B", ["a_b", "A_b"]).unwrap_err();
        assert!(matches!(err, CallRejection::AmbiguousTool { .. }));
    }

    #[test]
    fn arguments_parse() {
        assert_eq!(parse_arguments("  ").unwrap(), json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#).unwrap(), json!({"a": 1}));
        let err = parse_arguments(r#"{"a":"#).unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn canonical_sorts_keys_deeply() {
        let a = json!({"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"x":null,"y":[1,{"c":3,"d":2}]},"b":1}"#
        );
    }
}
