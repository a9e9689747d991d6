//! Regular-expression search with positions.

use regex::RegexBuilder;

/// One match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Byte offset of the first byte of the match.
    pub start: usize,
    /// Byte offset just past the match.
    pub end: usize,
    /// 1-based line of the match's start.
    pub line: usize,
    /// 1-based column (in characters) of the match's start.
    pub column: usize,
    /// The matched text.
    pub text: String,
    /// Capture groups 1.. (`None` for a group that did not take part).
    pub groups: Vec<Option<String>>,
}

/// The result of [`find`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The first matches, at most `max_matches` of them.
    pub matches: Vec<Match>,
    /// How many matches there are in all.
    pub total: usize,
    /// The names of the capture groups 1.. (`None` for unnamed ones).
    pub group_names: Vec<Option<String>>,
}

/// Largest compiled program accepted, so that a huge pattern cannot exhaust
/// the plugin's memory.
const SIZE_LIMIT: usize = 4 << 20;

/// Finds the matches of `pattern` in `text` (Rust `regex` syntax, which
/// runs in linear time). Returns the first `max_matches` matches and the
/// total count. The error is the regex compiler's message.
pub fn find(pattern: &str, text: &str, max_matches: usize) -> Result<Found, String> {
    let re = RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string())?;
    let group_names = re
        .capture_names()
        .skip(1)
        .map(|n| n.map(str::to_string))
        .collect();
    let mut matches = Vec::new();
    let mut total = 0;
    // Line and column are computed incrementally: matches come in order.
    let (mut line, mut line_start, mut scanned) = (1usize, 0usize, 0usize);
    for caps in re.captures_iter(text) {
        total += 1;
        if matches.len() >= max_matches {
            continue;
        }
        let Some(m) = caps.get(0) else { continue };
        for (i, b) in text[scanned..m.start()].bytes().enumerate() {
            if b == b'\n' {
                line += 1;
                line_start = scanned + i + 1;
            }
        }
        scanned = m.start();
        matches.push(Match {
            start: m.start(),
            end: m.end(),
            line,
            column: text[line_start..m.start()].chars().count() + 1,
            text: m.as_str().to_string(),
            groups: caps
                .iter()
                .skip(1)
                .map(|g| g.map(|g| g.as_str().to_string()))
                .collect(),
        });
    }
    Ok(Found {
        matches,
        total,
        group_names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_with_offsets_lines_and_columns() {
        let text = "foo bar\nbaz foo\nqüx foo";
        let found = find("foo", text, 10).unwrap();
        assert_eq!(found.total, 3);
        let pos: Vec<_> = found
            .matches
            .iter()
            .map(|m| (m.start, m.end, m.line, m.column))
            .collect();
        assert_eq!(pos, [(0, 3, 1, 1), (12, 15, 2, 5), (21, 24, 3, 5)]);
        assert_eq!(&text[21..24], "foo");
    }

    #[test]
    fn limits_but_counts_all() {
        let found = find(r"\d", "a1b2c3d4", 2).unwrap();
        assert_eq!(found.total, 4);
        assert_eq!(found.matches.len(), 2);
        assert_eq!(found.matches[1].text, "2");
        let none = find("zzz", "abc", 5).unwrap();
        assert_eq!((none.total, none.matches.len()), (0, 0));
    }

    #[test]
    fn capture_groups() {
        let found = find(r"(?P<key>\w+)=(\d+)?", "a=1 b=", 10).unwrap();
        assert_eq!(found.group_names, [Some("key".to_string()), None]);
        assert_eq!(
            found.matches[0].groups,
            [Some("a".to_string()), Some("1".to_string())]
        );
        assert_eq!(found.matches[1].groups, [Some("b".to_string()), None]);
    }

    #[test]
    fn bad_patterns_are_errors() {
        let err = find("(unclosed", "x", 1).unwrap_err();
        assert!(err.contains("unclosed group"), "{err}");
        let err = find(r"\w{1000}{1000}", "x", 1).unwrap_err();
        assert!(err.contains("size limit"), "{err}");
    }

    #[test]
    fn empty_matches_and_unicode() {
        let found = find("", "ab", 10).unwrap();
        assert_eq!(found.total, 3);
        let found = find("é+", "caféé!", 10).unwrap();
        assert_eq!(found.matches[0].start, 3);
        assert_eq!(found.matches[0].end, 7);
        assert_eq!(found.matches[0].column, 4);
    }
}
