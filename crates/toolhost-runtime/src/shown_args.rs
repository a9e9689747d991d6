//! A call's arguments as a person is shown them when asked about the call
//! (at the terminal, in the operator's console, in an MCP client's
//! elicitation): every argument by name, each value cut on its own, so a
//! long `content` never pushes `path` out of view; and whether anything
//! was cut.
//!
//! "Allow these arguments always" saves an approval of the exact bytes of
//! the arguments, so it may be offered only for arguments shown whole
//! ([`ShownArguments::complete`]); every prompt toolhost has withholds it
//! otherwise (the call can still be allowed once, for its directory or
//! host, or for the tool with any arguments).
//!
//! Values are shown as JSON text (a string in quotes, its newlines as
//! `\n`), made safe by `toolhost_text` (controls, bidirectional and
//! invisible characters escaped), never reflowed: what is shown is what
//! the bytes say.
//!
//! ```
//! use toolhost_runtime::shown::ShownArguments;
//!
//! let args = serde_json::json!({"content": "x".repeat(10_000), "path": "notes/todo.txt"});
//! let shown = ShownArguments::of(&args);
//! assert_eq!(shown.items[1].name, "path");
//! assert_eq!(shown.items[1].value, "\"notes/todo.txt\"");
//! assert!(shown.items[0].cut_from.is_some());
//! assert!(!shown.complete(), "so no `always` for these arguments");
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Most arguments listed; the rest are counted ([`ShownArguments::more`]).
pub const MAX_SHOWN_ARGUMENTS: usize = 32;
/// Most characters of one argument's value shown (its JSON text).
pub const MAX_SHOWN_VALUE_CHARS: usize = 2000;
/// Most characters of an argument's name shown.
const MAX_SHOWN_KEY_CHARS: usize = 200;

/// A call's arguments, as shown to a person (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownArguments {
    /// The arguments, in the order of their names.
    pub items: Vec<ShownArgument>,
    /// How many more arguments there are than listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more: usize,
}

/// One argument, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownArgument {
    /// Its name (empty when the arguments are not an object: then the one
    /// item is all of them).
    pub name: String,
    /// Its value as JSON text, made safe, at most
    /// [`MAX_SHOWN_VALUE_CHARS`] characters (then `…`).
    pub value: String,
    /// When the value (or the name) was cut: the whole value's length, in
    /// characters of JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_from: Option<usize>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl ShownArguments {
    /// `args` as shown to a person.
    pub fn of(args: &Value) -> ShownArguments {
        match args {
            Value::Object(map) => {
                let mut all: Vec<(&String, &Value)> = map.iter().collect();
                all.sort_unstable_by_key(|(name, _)| *name);
                ShownArguments {
                    items: all
                        .into_iter()
                        .take(MAX_SHOWN_ARGUMENTS)
                        .map(|(name, value)| ShownArgument::of(name, value))
                        .collect(),
                    more: map.len().saturating_sub(MAX_SHOWN_ARGUMENTS),
                }
            }
            other => ShownArguments {
                items: vec![ShownArgument::of("", other)],
                more: 0,
            },
        }
    }

    /// Whether every argument is shown whole: only then may a prompt offer
    /// to allow these arguments always.
    pub fn complete(&self) -> bool {
        self.more == 0 && self.items.iter().all(|a| a.cut_from.is_none())
    }

    /// The same arguments bounded and made safe again, as [`ShownArguments::of`]
    /// makes them: for arguments read back from elsewhere (a shared
    /// queue's database), which are outside input.
    #[must_use]
    pub fn bounded(self) -> ShownArguments {
        ShownArguments {
            items: self
                .items
                .into_iter()
                .take(MAX_SHOWN_ARGUMENTS)
                .map(|a| ShownArgument {
                    name: toolhost_text::line(&a.name, MAX_SHOWN_KEY_CHARS),
                    // (A value cut here ends in `…` already.)
                    value: toolhost_text::block(&a.value, MAX_SHOWN_VALUE_CHARS + 1),
                    cut_from: a.cut_from,
                })
                .collect(),
            more: self.more,
        }
    }

    /// One line per argument (`name: value`, with a note on a cut value),
    /// and a last one for the arguments not listed.
    ///
    /// ```
    /// let shown = toolhost_runtime::shown::ShownArguments::of(&serde_json::json!({"n": 1}));
    /// assert_eq!(shown.lines(), ["n: 1"]);
    /// ```
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .items
            .iter()
            .map(|a| {
                let name = if a.name.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", a.name)
                };
                match a.cut_from {
                    Some(whole) => format!("{name}{} (cut: {whole} characters in all)", a.value),
                    None => format!("{name}{}", a.value),
                }
            })
            .collect();
        if self.more > 0 {
            lines.push(format!("(and {} more arguments, not shown)", self.more));
        }
        lines
    }
}

impl ShownArgument {
    fn of(name: &str, value: &Value) -> ShownArgument {
        let text = value.to_string();
        let shown_name = toolhost_text::line(name, MAX_SHOWN_KEY_CHARS);
        let name_cut = name.chars().count() > MAX_SHOWN_KEY_CHARS;
        let length = text.chars().count();
        ShownArgument {
            name: shown_name,
            value: toolhost_text::block(&text, MAX_SHOWN_VALUE_CHARS),
            cut_from: (length > MAX_SHOWN_VALUE_CHARS || name_cut).then_some(length),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_long_argument_never_pushes_another_out_of_view() {
        let args = json!({"a_content": "x".repeat(100_000), "path": "secret/key.txt"});
        let shown = ShownArguments::of(&args);
        assert_eq!(shown.items.len(), 2);
        assert_eq!(shown.items[1].value, "\"secret/key.txt\"");
        assert_eq!(shown.items[1].cut_from, None);
        assert_eq!(shown.items[0].cut_from, Some(100_002));
        assert!(shown.items[0].value.chars().count() <= MAX_SHOWN_VALUE_CHARS + 1);
        assert!(!shown.complete());
        let lines = shown.lines();
        assert!(lines[0].contains("cut: 100002 characters"), "{lines:?}");
        assert_eq!(lines[1], "path: \"secret/key.txt\"");
    }

    #[test]
    fn short_arguments_are_shown_whole_and_escaped() {
        let shown = ShownArguments::of(&json!({"path": "a\u{202e}b", "n": [1, 2]}));
        assert!(shown.complete());
        assert_eq!(shown.lines(), ["n: [1,2]", "path: \"a\\u{202e}b\""]);
    }

    #[test]
    fn too_many_arguments_or_a_huge_name_are_not_complete() {
        let many: serde_json::Map<String, Value> =
            (0..100).map(|i| (format!("k{i:03}"), json!(i))).collect();
        let shown = ShownArguments::of(&Value::Object(many));
        assert_eq!(shown.items.len(), MAX_SHOWN_ARGUMENTS);
        assert_eq!(shown.more, 100 - MAX_SHOWN_ARGUMENTS);
        assert!(!shown.complete());
        assert!(shown.lines().last().unwrap().contains("68 more"));
        let named = ShownArguments::of(&json!({ "k".repeat(1000): 1 }));
        assert!(!named.complete());
    }
}
