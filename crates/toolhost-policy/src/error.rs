//! Errors: files that cannot be read or written, policy files with mistakes (with their
//! line and column), and patterns given in code that do not compile.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// Everything that can go wrong when loading, building or persisting a policy.
///
/// A mistake in a policy file is always [`PolicyError::InFile`], which displays like
/// `policy.toml:14:9: unknown decision "maybe" (expected allow, ask or deny)`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The policy file could not be read.
    #[error("{}: cannot read the policy: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The policy file could not be written.
    #[error("{}: cannot write the policy: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A mistake in a policy file: TOML syntax, an unknown key, a bad decision word, a
    /// glob or host pattern that does not compile, a rule without `tool`.
    #[error("{}:{line}:{column}: {message}", path.display())]
    InFile {
        /// The file (as given to [`Policy::load`](crate::Policy::load) or
        /// [`Policy::from_toml`](crate::Policy::from_toml)).
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column, in characters.
        column: usize,
        /// What is wrong, without the location.
        message: String,
    },
    /// A policy, rule or session toggle built in code is invalid (a glob that does not
    /// compile, a bad host pattern, an empty argument name).
    #[error("{message}")]
    Invalid {
        /// What is wrong and where.
        message: String,
    },
}

impl PolicyError {
    /// An error at byte `offset` of `text`, the contents of `path`.
    pub(crate) fn in_file(path: &Path, text: &str, offset: usize, message: String) -> Self {
        let (line, column) = line_column(text, offset);
        PolicyError::InFile {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    }

    /// An error at the start of `span` (or at the start of the file when there is none).
    pub(crate) fn in_file_span(
        path: &Path,
        text: &str,
        span: Option<Range<usize>>,
        message: String,
    ) -> Self {
        Self::in_file(path, text, span.map_or(0, |s| s.start), message)
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based_and_count_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 4), (1, 5));
        assert_eq!(line_column(text, 6), (2, 1));
        // `=` after the two-byte `é` is the fourth character of line 2.
        let eq = text.rfind('=').unwrap();
        assert_eq!(line_column(text, eq), (2, 4));
        assert_eq!(line_column(text, 10_000), (3, 1));
    }

    #[test]
    fn in_file_error_displays_path_line_column_message() {
        let e = PolicyError::in_file(
            Path::new("policy.toml"),
            "x\ny = 1",
            2,
            "unknown decision \"maybe\" (expected allow, ask or deny)".into(),
        );
        assert_eq!(
            e.to_string(),
            "policy.toml:2:1: unknown decision \"maybe\" (expected allow, ask or deny)"
        );
    }
}
