//! What the CLI shows of text it did not write (a plugin's output, a
//! hook's reason, a model's answer, an MCP server's name): one rule,
//! [`toolhost_text`]'s, so it cannot move the cursor, recolour, retitle or
//! clear the terminal, or hide text behind bidirectional controls.

use std::borrow::Cow;
use std::io::IsTerminal;

/// How much of one piece of outside text a question or a listing shows.
pub const SHOWN: usize = 2000;

/// `text` made safe for the terminal (controls, bidirectional and invisible
/// characters escaped; newlines and tabs kept) and cut at [`SHOWN`]
/// characters.
pub fn printable(text: &str) -> String {
    toolhost_text::block(text, SHOWN)
}

/// `text` as it goes to stdout: made safe, uncut, when stdout is a
/// terminal; byte for byte when it is a pipe or a file, so `host call … |
/// jq` and redirections get the tool's exact output.
pub fn on_stdout(text: &str) -> Cow<'_, str> {
    if std::io::stdout().is_terminal() && text.chars().any(toolhost_text::needs_escape) {
        Cow::Owned(toolhost_text::block(text, usize::MAX))
    } else {
        Cow::Borrowed(text)
    }
}

/// How a run that did not complete ended: its status, and the error (a
/// provider's or a server's words, so made safe); `None` when it completed.
pub fn unfinished(result: &toolhost_agent::ToolChainResult) -> Option<String> {
    if result.status == toolhost_agent::Status::Completed {
        return None;
    }
    Some(match result.error.as_deref() {
        Some(e) => format!("{}: {}", result.status, printable(e)),
        None => result.status.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_outside_cannot_drive_the_terminal() {
        let hostile =
            "ok\u{1b}[2J\u{1b}]0;pwned\u{7}\rallow? y\u{9b}31m \u{202e}txt.exe\nline two\tend";
        let shown = printable(hostile);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{shown:?}"
        );
        assert!(!shown.contains('\u{202e}'), "{shown:?}");
        assert!(
            shown.contains("\\u{1b}[2J") && shown.contains("\\u{d}allow? y"),
            "{shown}"
        );
        assert!(shown.contains("\nline two\tend"), "newlines and tabs stay");
        assert_eq!(printable("plain text"), "plain text");
    }
}
