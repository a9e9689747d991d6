//! How a `call_arguments` input becomes a call, shared by the fuzz target
//! (`fuzz/fuzz_targets/call_arguments.rs`) and the corpus replay on stable
//! (`tests/fuzz_corpus_calls.rs`), both of which include this file.

/// The tool to call and its argument text. An input is `NAME\nARGS` where
/// `NAME` is a real tool (one of `names`, which must not be empty), or `?`
/// and a name taken as given (an unknown tool), or anything else, whose first
/// byte picks a real tool (so most inputs reach one).
pub fn split<'a>(names: &'a [String], text: &'a str) -> (&'a str, &'a str) {
    let (line, args) = text.split_once('\n').unwrap_or((text, ""));
    if let Some(name) = names.iter().find(|n| *n == line) {
        (name, args)
    } else if let Some(literal) = line.strip_prefix('?') {
        (literal, args)
    } else {
        let pick = usize::from(line.bytes().next().unwrap_or(0)) % names.len();
        (&names[pick], args)
    }
}
