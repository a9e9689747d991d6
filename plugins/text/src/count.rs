//! Word, line and character counts.

/// What [`count`] measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Runs of non-whitespace characters.
    pub words: usize,
    /// Lines; a final line without a newline counts, a trailing newline does
    /// not start another line, and the empty text has 0 lines.
    pub lines: usize,
    /// Unicode scalar values.
    pub characters: usize,
    /// UTF-8 bytes.
    pub bytes: usize,
}

/// Counts the words, lines, characters and bytes of `text`.
pub fn count(text: &str) -> Counts {
    Counts {
        words: text.split_whitespace().count(),
        lines: text.lines().count(),
        characters: text.chars().count(),
        bytes: text.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(
            count(""),
            Counts {
                words: 0,
                lines: 0,
                characters: 0,
                bytes: 0
            }
        );
        assert_eq!(
            count("hello world\nsecond line here\n"),
            Counts {
                words: 5,
                lines: 2,
                characters: 29,
                bytes: 29
            }
        );
        let c = count("  héllo\twörld  ");
        assert_eq!((c.words, c.lines, c.characters, c.bytes), (2, 1, 15, 17));
        assert_eq!(count("a\n\nb").lines, 3);
        assert_eq!(count("a\r\nb\r\n").lines, 2);
        assert_eq!(count("\n").lines, 1);
    }
}
