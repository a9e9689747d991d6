//! Replays the kept fuzz corpus (`fuzz/corpus/`) through the entry points the
//! fuzz targets use, on stable Rust: every input that once crashed, hung or
//! was slow, and the seeds, must still go through without a panic.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolhost_providers::fuzzing;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
}

fn replay(target: &str, run: fn(&[u8])) {
    for (path, data) in corpus(target) {
        let start = Instant::now();
        run(&data);
        // Generous (debug build, busy machine): catches the quadratic cases.
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{} took {:?}",
            path.display(),
            start.elapsed()
        );
    }
}

#[test]
fn prompt_tool_calls_corpus() {
    replay("prompt_tool_calls", fuzzing::prompt_tool_calls);
}

#[test]
fn sse_stream_corpus() {
    replay("sse_stream", fuzzing::sse_stream);
}

/// Inputs far larger than the fuzzer tries (it stops at 4 KB): the parsers
/// must stay about linear in the length of the text.
#[test]
fn large_inputs_stay_fast() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "backticks (json)",
            [b"0".as_slice(), &b"```".repeat(100_000)].concat(),
        ),
        (
            "backticks in words (json)",
            [b"0".as_slice(), &b"a `b` c ".repeat(40_000)].concat(),
        ),
        (
            "unclosed tags (xml)",
            [b"1".as_slice(), &b"<tool_call>".repeat(30_000)].concat(),
        ),
        (
            "tags closed at the end (xml)",
            [
                b"1".as_slice(),
                &b"<tool_call>".repeat(30_000),
                b"<tool_code></tool_call>",
            ]
            .concat(),
        ),
        (
            "fences then braces (json)",
            [
                b"0".as_slice(),
                &b"```a```".repeat(20_000),
                &b"{{".repeat(50_000),
            ]
            .concat(),
        ),
    ];
    for (name, data) in cases {
        let start = Instant::now();
        fuzzing::prompt_tool_calls(&data);
        let took = start.elapsed();
        eprintln!("{name}: {took:?}");
        assert!(took < Duration::from_secs(2), "{name} took {took:?}");
    }
}
