//! What a caller names, as the host keeps and shows it: the tool it asks
//! for and its call id, bounded and made safe before the call is kept or
//! shown anywhere (the live feed, an operator's console, the call's span
//! and its attributes, a not-found error, the logs).
//!
//! Both come from outside (a model, an MCP client's `tools/call` and its
//! JSON-RPC id) before lookup, so they can be a megabyte long or carry a
//! bidirectional override. [`shown_name`] is the one rule, used at the
//! entry of the pipeline (`call::run`, a reused instance's call) and by
//! any adapter that shows a name before it gets there (the MCP server's
//! request span): at most [`MAX_SHOWN_NAME_CHARS`] characters, whitespace
//! made one space, and everything `toolhost_text` escapes shown as an
//! escape. A real tool's name (at most 64 ASCII letters, digits, `_` and
//! `-`) comes through unchanged, without a copy. Lookup still uses the
//! name as given: a name that was cut or escaped finds no tool.

use std::borrow::Cow;

use crate::call::CallContext;

/// The most characters of a caller's tool name or call id kept and shown
/// (a tool's name is at most 64).
pub const MAX_SHOWN_NAME_CHARS: usize = 128;

/// `text` (a tool name or a call id a caller gave) as the host keeps and
/// shows it: itself when it is short and plain, else cut to
/// [`MAX_SHOWN_NAME_CHARS`] and made safe (see the module docs).
///
/// ```
/// use toolhost_runtime::shown::shown_name;
///
/// assert_eq!(shown_name("read_file"), "read_file");
/// assert_eq!(shown_name("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
/// assert!(shown_name(&"x".repeat(1_000_000)).chars().count() <= 129);
/// ```
#[must_use]
pub fn shown_name(text: &str) -> Cow<'_, str> {
    let plain = text.len() <= MAX_SHOWN_NAME_CHARS
        && !text
            .chars()
            .any(|c| c.is_whitespace() || toolhost_text::needs_escape(c));
    if plain {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(toolhost_text::line(text, MAX_SHOWN_NAME_CHARS))
    }
}

/// A call's names as the host keeps them, made once at the entry of the
/// pipeline.
pub(crate) struct Named<'a> {
    /// The tool, as [`shown_name`] makes it.
    pub(crate) tool: Cow<'a, str>,
    /// The call's id: the caller's, as [`shown_name`] makes it, or one the
    /// runtime made up.
    pub(crate) id: String,
}

impl<'a> Named<'a> {
    /// The names of a call of `tool` under `cx`; `new_id` makes the call's
    /// id from the caller's, when it gave one.
    pub(crate) fn of(
        tool: &'a str,
        cx: &CallContext,
        new_id: impl FnOnce(Option<&str>) -> String,
    ) -> Named<'a> {
        Named {
            tool: shown_name(tool),
            id: new_id(cx.call_id.as_deref().map(shown_name).as_deref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_name_is_kept_as_it_is_without_a_copy() {
        for name in ["calculate", "fs__read-file", &"n".repeat(64)] {
            assert!(matches!(shown_name(name), Cow::Borrowed(n) if n == name));
        }
    }

    #[test]
    fn a_long_or_hostile_name_is_cut_and_escaped() {
        let long = shown_name(&"é".repeat(1_000_000)).into_owned();
        assert_eq!(long.chars().count(), MAX_SHOWN_NAME_CHARS + 1);
        assert!(long.ends_with('…'));
        let hostile = shown_name("a\u{202e}b\u{1b}[2J\nc");
        assert!(
            !hostile.chars().any(toolhost_text::needs_escape),
            "{hostile}"
        );
        assert_eq!(hostile, "a\\u{202e}b\\u{1b}[2J c");
    }

    #[test]
    fn a_callers_id_is_bounded_and_a_missing_one_made_up() {
        let cx = CallContext::new().call_id("x".repeat(10_000));
        let named = Named::of("t", &cx, |given| given.unwrap_or("made").to_owned());
        assert!(named.id.chars().count() <= MAX_SHOWN_NAME_CHARS + 1);
        let named = Named::of("t", &CallContext::new(), |given| {
            given.unwrap_or("made").to_owned()
        });
        assert_eq!(named.id, "made");
    }
}
