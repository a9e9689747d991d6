//! # toolhost-text
//!
//! One rule for text that came from outside — a plugin's output or log line,
//! an MCP server's tool names and stderr, a model's arguments, a hook's
//! reason — before toolhost shows it to a person or puts it in a prompt, a
//! log line or an elicitation question:
//!
//! - every control character (C0, DEL and C1, the terminal's escape and CSI
//!   among them) is shown as an escape (`\u{1b}`), so the text cannot move
//!   the cursor, recolour, retitle or clear a terminal;
//! - Unicode's bidirectional controls (`U+202E` and friends), the line and
//!   paragraph separators and every character Unicode says is *default
//!   ignorable* (drawn as nothing: zero-width spaces and joiners, the
//!   byte-order mark, the Hangul fillers, the variation selectors, the
//!   *tag* characters `U+E0000`… — the last two are used to smuggle
//!   invisible text to a model) are escaped too, so what a person reads is
//!   what the bytes say. An emoji's presentation selector (`U+FE0F`) shows
//!   as an escape too, as a zero-width joiner does: either can carry
//!   hidden bytes;
//! - the result is bounded: at most `max` characters of output (an escape
//!   counts for its length), then `…`.
//!
//! [`line`] makes one line of it (any run of whitespace, newlines included,
//! becomes one space); [`block`] keeps newlines and tabs. [`cause`] says
//! why something failed, in words, once (the innermost error of a chain;
//! an I/O error as the words for its kind), for a message a person reads.
//!
//! ```
//! use toolhost_text::{block, line};
//!
//! assert_eq!(line("ok\n\x1b[2Jwiped", 80), "ok \\u{1b}[2Jwiped");
//! assert_eq!(line("abc\u{202e}fdp.exe", 80), "abc\\u{202e}fdp.exe");
//! assert_eq!(block("two\nlines", 80), "two\nlines");
//! assert_eq!(line(&"x".repeat(500), 10), "xxxxxxxxxx…");
//! ```

mod cause;

pub use cause::cause;

use std::fmt::Write as _;

/// `text` on one line, safe to show: whitespace runs (newlines too) become
/// one space, leading and trailing whitespace goes, and every character
/// [`needs_escape`] says is unsafe is shown as `\u{…}`. At most `max`
/// characters, then `…`.
#[must_use]
pub fn line(text: &str, max: usize) -> String {
    let mut out = Bounded::new(max);
    let mut words = text.split_whitespace();
    if let Some(first) = words.next() {
        out.push_str(first);
        for word in words {
            out.push(' ');
            out.push_str(word);
        }
    }
    out.finish()
}

/// `text` as a block, safe to show: newlines and tabs are kept, every other
/// character [`needs_escape`] says is unsafe (a carriage return too, which
/// would let a line overwrite the one before) is shown as `\u{…}`. At most
/// `max` characters, then `…`.
#[must_use]
pub fn block(text: &str, max: usize) -> String {
    let mut out = Bounded::new(max);
    out.push_str(text);
    out.finish()
}

/// Whether `c` must not reach a terminal, a log or a prompt as it is:
/// controls (C0 but newline and tab, DEL, C1), bidirectional controls, the
/// line and paragraph separators, the interlinear annotation characters
/// and every `Default_Ignorable_Code_Point` of Unicode 16
/// (`DerivedCoreProperties.txt`): characters drawn as nothing.
///
/// ```
/// use toolhost_text::needs_escape;
///
/// assert!(needs_escape('\u{202e}')); // right-to-left override
/// assert!(needs_escape('\u{fe0f}')); // variation selector 16
/// assert!(needs_escape('\u{3164}')); // Hangul filler
/// assert!(!needs_escape('é'));
/// ```
#[must_use]
pub fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{00ad}'                       // soft hyphen
            | '\u{034f}'                     // combining grapheme joiner
            | '\u{061c}'                     // Arabic letter mark
            | '\u{115f}'..='\u{1160}'        // Hangul choseong and jungseong fillers
            | '\u{17b4}'..='\u{17b5}'        // Khmer inherent vowels
            | '\u{180b}'..='\u{180f}'        // Mongolian variation selectors, vowel separator
            | '\u{200b}'..='\u{200f}'        // zero-width space, joiners, LRM, RLM
            | '\u{2028}'..='\u{202e}'        // line/paragraph separators, embeddings, overrides
            | '\u{2060}'..='\u{206f}'        // word joiner, invisible operators, isolates
            | '\u{3164}'                     // Hangul filler
            | '\u{fe00}'..='\u{fe0f}'        // variation selectors 1-16
            | '\u{feff}'                     // byte-order mark
            | '\u{ffa0}'                     // halfwidth Hangul filler
            | '\u{fff0}'..='\u{fffb}'        // unassigned ignorables, interlinear annotation
            | '\u{1bca0}'..='\u{1bca3}'      // shorthand format controls
            | '\u{1d173}'..='\u{1d17a}'      // musical symbol format controls
            | '\u{e0000}'..='\u{e0fff}' // tags, variation selectors 17-256, unassigned ignorables
        )
}

/// Output that stops growing at `max` characters and says it was cut.
struct Bounded {
    out: String,
    left: usize,
    cut: bool,
}

impl Bounded {
    fn new(max: usize) -> Self {
        Bounded {
            out: String::new(),
            left: max,
            cut: false,
        }
    }

    fn push_str(&mut self, text: &str) {
        for c in text.chars() {
            if self.cut {
                return;
            }
            self.push(c);
        }
    }

    fn push(&mut self, c: char) {
        if self.cut {
            return;
        }
        if !needs_escape(c) {
            if self.left == 0 {
                self.cut = true;
                return;
            }
            self.left -= 1;
            self.out.push(c);
            return;
        }
        let mut escaped = String::new();
        let _ = write!(escaped, "{}", c.escape_unicode());
        let len = escaped.len(); // ASCII, so bytes are characters
        if len > self.left {
            self.cut = true;
            return;
        }
        self.left -= len;
        self.out.push_str(&escaped);
    }

    fn finish(mut self) -> String {
        if self.cut {
            self.out.push('…');
        }
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c0_controls_and_del_are_escaped_but_newline_and_tab_stay_in_a_block() {
        assert_eq!(block("a\x1b]0;title\x07b", 100), "a\\u{1b}]0;title\\u{7}b");
        assert_eq!(block("over\rwrite", 100), "over\\u{d}write");
        assert_eq!(block("x\x7fy", 100), "x\\u{7f}y");
        assert_eq!(block("a\n\tb", 100), "a\n\tb");
    }

    #[test]
    fn c1_controls_are_escaped_the_8_bit_csi_too() {
        assert_eq!(line("a\u{9b}31mred", 100), "a\\u{9b}31mred");
        assert_eq!(block("next\u{85}line", 100), "next\\u{85}line");
        // In a line, NEL is whitespace like a newline.
        assert_eq!(line("next\u{85}line", 100), "next line");
    }

    #[test]
    fn bidi_invisible_and_tag_characters_are_escaped() {
        assert_eq!(line("file\u{202e}txt.exe", 100), "file\\u{202e}txt.exe");
        assert_eq!(line("\u{2066}x\u{2069}", 100), "\\u{2066}x\\u{2069}");
        assert_eq!(line("a\u{200b}b\u{feff}", 100), "a\\u{200b}b\\u{feff}");
        // "hi" written in invisible tag characters.
        assert_eq!(line("ok\u{e0068}\u{e0069}", 100), "ok\\u{e0068}\\u{e0069}");
        assert_eq!(block("a\u{2028}b", 100), "a\\u{2028}b");
    }

    #[test]
    fn variation_selectors_and_hangul_fillers_are_escaped() {
        // Text hidden in variation selectors after a visible character
        // (each selector one byte): "hi" after "ok".
        assert_eq!(line("ok\u{e0158}\u{e0159}", 100), "ok\\u{e0158}\\u{e0159}");
        assert_eq!(line("a\u{fe00}\u{fe0f}b", 100), "a\\u{fe00}\\u{fe0f}b");
        assert_eq!(line("a\u{e0100}b\u{e01ef}", 100), "a\\u{e0100}b\\u{e01ef}");
        // Hangul fillers, drawn as nothing (a name that looks empty).
        for filler in ['\u{115f}', '\u{1160}', '\u{3164}', '\u{ffa0}'] {
            let shown = block(&format!("[{filler}]"), 100);
            assert_eq!(shown, format!("[{}]", filler.escape_unicode()));
        }
        // The rest of Unicode's default ignorables.
        for c in [
            '\u{034f}',
            '\u{17b4}',
            '\u{180b}',
            '\u{1bca0}',
            '\u{1d173}',
            '\u{e0fff}',
        ] {
            assert!(needs_escape(c), "{}", c.escape_unicode());
        }
        // Their visible neighbours are not.
        for c in [
            '\u{fdff}', '\u{fe10}', '\u{3163}', '\u{3165}', '\u{ffa1}', '\u{1161}',
        ] {
            assert!(!needs_escape(c), "{}", c.escape_unicode());
        }
    }

    #[test]
    fn a_line_folds_every_whitespace_run_into_one_space() {
        assert_eq!(line("  a\n\n  b\tc\r\n", 100), "a b c");
        assert_eq!(line("", 100), "");
        assert_eq!(line("a\u{a0}b", 100), "a b"); // no-break space is whitespace
    }

    #[test]
    fn over_long_text_is_cut_at_max_characters_escapes_counted() {
        assert_eq!(line("ééééé", 3), "ééé…");
        assert_eq!(line("abc", 3), "abc");
        assert_eq!(block(&"\x1b".repeat(1000), 20), "\\u{1b}\\u{1b}\\u{1b}…");
        let huge = "y".repeat(1 << 20);
        assert_eq!(line(&huge, 64).chars().count(), 65);
        assert_eq!(block("abc", 0), "…");
    }

    #[test]
    fn plain_text_passes_unchanged() {
        let text = "Résumé: 2*(3+4) = 14 — 東京 ✓";
        assert_eq!(line(text, 100), text);
        assert_eq!(block(text, 100), text);
    }
}
