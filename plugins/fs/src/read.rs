//! Reading a window of lines from a text file.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use toolhost_sdk::ToolError;

use crate::errors::io_error;

/// What [`read_lines`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// The lines, each with its line ending (the last may be cut short when
    /// a single line exceeds the byte cap).
    pub text: String,
    /// Lines in the whole file.
    pub total_lines: usize,
    /// First line returned (1-based); 0 when no line is returned.
    pub first_line: usize,
    /// Last line returned; 0 when no line is returned.
    pub last_line: usize,
    /// Whether lines after `last_line` exist but were not returned (or the
    /// last line returned was cut).
    pub truncated: bool,
    /// Whether the byte cap, rather than the line limit, stopped the read.
    pub byte_capped: bool,
}

/// Reads up to `limit` lines starting at line `offset` (1-based) of the
/// UTF-8 text file at `path`, returning at most `max_bytes` bytes of text.
/// The whole file is scanned to count its lines, but memory use stays
/// bounded by `max_bytes` whatever the file.
pub fn read_lines(
    path: &Path,
    offset: u64,
    limit: usize,
    max_bytes: usize,
) -> Result<Slice, ToolError> {
    let shown = path.display();
    // The offset as asked for, for messages; past `usize` (4,294,967,295
    // lines on wasm32) it is past the end of any file anyway.
    let asked = offset;
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    if offset == 0 {
        return Err(ToolError::invalid_arguments(
            "`offset` is 1-based: the first line is line 1",
        ));
    }
    if limit == 0 {
        return Err(ToolError::invalid_arguments("`limit` must be at least 1"));
    }
    let meta = std::fs::metadata(path).map_err(|e| io_error(&e, path, "read"))?;
    if meta.is_dir() {
        return Err(ToolError::failed(format!(
            "'{shown}' is a directory, not a file (use list_dir to see what it contains)"
        )));
    }
    let file = File::open(path).map_err(|e| io_error(&e, path, "read"))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);

    let mut slice = Slice {
        text: String::new(),
        total_lines: 0,
        first_line: 0,
        last_line: 0,
        truncated: false,
        byte_capped: false,
    };
    let mut line = Vec::new();
    let last_wanted = offset.saturating_add(limit - 1);
    loop {
        let room = max_bytes.saturating_sub(slice.text.len());
        let wanted = slice.total_lines + 1 >= offset
            && slice.total_lines < last_wanted
            && !slice.byte_capped;
        // Keep at most `room + 4` bytes of a line we want (4: enough to
        // see whether a cut split a UTF-8 character), nothing of others.
        let keep = if wanted { room.saturating_add(4) } else { 0 };
        let Some(cut) = read_line_capped(&mut reader, &mut line, keep)
            .map_err(|e| io_error(&e, path, "read"))?
        else {
            break;
        };
        slice.total_lines += 1;
        let n = slice.total_lines;
        if !wanted {
            if n > last_wanted || slice.byte_capped {
                slice.truncated = true;
            }
            continue;
        }
        let valid = match std::str::from_utf8(&line) {
            Ok(s) => s,
            // A cut may split the last character; keep what came before.
            Err(e) if (cut || line.len() > room) && e.error_len().is_none() => {
                std::str::from_utf8(&line[..e.valid_up_to()]).unwrap_or_default()
            }
            Err(_) => {
                return Err(ToolError::failed(format!(
                    "'{shown}' is not a UTF-8 text file (invalid UTF-8 on line {n})"
                )));
            }
        };
        if valid.len() <= room && !cut {
            slice.text.push_str(valid);
        } else if slice.text.is_empty() {
            // A single line longer than the cap: return its beginning.
            let mut end = room.min(valid.len());
            while !valid.is_char_boundary(end) {
                end -= 1;
            }
            slice.text.push_str(&valid[..end]);
            slice.truncated = true;
            slice.byte_capped = true;
        } else {
            slice.byte_capped = true;
            slice.truncated = true;
            continue;
        }
        if slice.first_line == 0 {
            slice.first_line = n;
        }
        slice.last_line = n;
    }
    if offset > 1 && offset > slice.total_lines {
        return Err(ToolError::invalid_arguments(format!(
            "offset {asked} is past the end of '{shown}', which has {} line{}",
            slice.total_lines,
            if slice.total_lines == 1 { "" } else { "s" }
        )));
    }
    Ok(slice)
}

/// Reads one line (up to and including `\n`) into `buf`, keeping at most
/// `keep` bytes of it and skipping the rest. Returns `None` at the end of
/// the input, otherwise whether the line was cut.
fn read_line_capped<R: BufRead>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    keep: usize,
) -> io::Result<Option<bool>> {
    buf.clear();
    let mut any = false;
    let mut cut = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(any.then_some(cut));
        }
        any = true;
        let (chunk, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let take = chunk.len().min(keep.saturating_sub(buf.len()));
        buf.extend_from_slice(&chunk[..take]);
        cut |= take < chunk.len();
        let used = chunk.len();
        reader.consume(used);
        if done {
            return Ok(Some(cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(content: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content).unwrap();
        f
    }

    #[test]
    fn reads_whole_small_file() {
        let f = file_with(b"one\ntwo\nthree");
        let s = read_lines(f.path(), 1, 2000, 1 << 20).unwrap();
        assert_eq!(s.text, "one\ntwo\nthree");
        assert_eq!((s.total_lines, s.first_line, s.last_line), (3, 1, 3));
        assert!(!s.truncated && !s.byte_capped);
    }

    #[test]
    fn window_of_lines() {
        let content: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let f = file_with(content.as_bytes());
        let s = read_lines(f.path(), 3, 4, 1 << 20).unwrap();
        assert_eq!(s.text, "line 3\nline 4\nline 5\nline 6\n");
        assert_eq!((s.total_lines, s.first_line, s.last_line), (10, 3, 6));
        assert!(s.truncated && !s.byte_capped);
        let s = read_lines(f.path(), 9, 100, 1 << 20).unwrap();
        assert_eq!(s.text, "line 9\nline 10\n");
        assert!(!s.truncated);
    }

    #[test]
    fn byte_cap_stops_at_whole_lines() {
        let f = file_with(b"aaaa\nbbbb\ncccc\n");
        let s = read_lines(f.path(), 1, 100, 12).unwrap();
        assert_eq!(s.text, "aaaa\nbbbb\n");
        assert_eq!((s.first_line, s.last_line, s.total_lines), (1, 2, 3));
        assert!(s.truncated && s.byte_capped);
    }

    #[test]
    fn one_huge_line_is_cut_at_a_char_boundary() {
        let mut content = "é".repeat(1000).into_bytes(); // 2000 bytes
        content.extend_from_slice(b"\nnext\n");
        let f = file_with(&content);
        let s = read_lines(f.path(), 1, 100, 101).unwrap();
        assert_eq!(s.text, "é".repeat(50));
        assert_eq!((s.first_line, s.last_line, s.total_lines), (1, 1, 2));
        assert!(s.truncated && s.byte_capped);
    }

    #[test]
    fn empty_file_and_offsets() {
        let f = file_with(b"");
        let s = read_lines(f.path(), 1, 10, 100).unwrap();
        assert_eq!((s.text.as_str(), s.total_lines, s.first_line), ("", 0, 0));

        let f = file_with(b"a\nb\n");
        let err = read_lines(f.path(), 5, 10, 100).unwrap_err();
        assert!(err.is_invalid_arguments());
        assert!(err.message().contains("offset 5 is past the end"), "{err}");
        assert!(err.message().contains("which has 2 lines"), "{err}");
        assert!(
            read_lines(f.path(), 0, 10, 100)
                .unwrap_err()
                .is_invalid_arguments()
        );
        assert!(
            read_lines(f.path(), 1, 0, 100)
                .unwrap_err()
                .is_invalid_arguments()
        );
    }

    #[test]
    fn non_utf8_and_directories_and_missing() {
        let f = file_with(b"ok\n\xff\xfe binary\n");
        let err = read_lines(f.path(), 1, 10, 100).unwrap_err();
        assert!(
            err.message()
                .ends_with("is not a UTF-8 text file (invalid UTF-8 on line 2)"),
            "{err}"
        );
        // Lines outside the window are not checked.
        assert_eq!(read_lines(f.path(), 1, 1, 100).unwrap().text, "ok\n");

        let dir = tempfile::tempdir().unwrap();
        let err = read_lines(dir.path(), 1, 10, 100).unwrap_err();
        assert!(err.message().contains("is a directory"), "{err}");

        let missing = dir.path().join("nope.txt");
        let err = read_lines(&missing, 1, 10, 100).unwrap_err();
        assert_eq!(
            err,
            ToolError::Failed(format!("'{}' does not exist", missing.display()))
        );
    }

    #[test]
    fn capped_line_reader() {
        let mut r = io::Cursor::new(b"abcdef\ngh\n\nlast".to_vec());
        let mut buf = Vec::new();
        assert_eq!(read_line_capped(&mut r, &mut buf, 3).unwrap(), Some(true));
        assert_eq!(buf, b"abc");
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 100).unwrap(),
            Some(false)
        );
        assert_eq!(buf, b"gh\n");
        assert_eq!(read_line_capped(&mut r, &mut buf, 0).unwrap(), Some(true));
        assert_eq!(buf, b"");
        assert_eq!(
            read_line_capped(&mut r, &mut buf, 100).unwrap(),
            Some(false)
        );
        assert_eq!(buf, b"last");
        assert_eq!(read_line_capped(&mut r, &mut buf, 100).unwrap(), None);
    }
}
