//! Entry points for the fuzz targets (`fuzz/` at the top of the repository)
//! and for the tests that replay their corpus (`tests/all/fuzz_corpus.rs`).
//!
//! For fuzzing and tests only: not part of the API, hidden from the docs, and
//! free to change. Each function takes the raw fuzz input, runs it through the
//! real parsers, and panics only when an invariant is broken.

use std::convert::Infallible;

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::StreamExt;

use crate::exchange::{WireFormat, replay};
use crate::{
    Delta, anthropic::Anthropic, openai::OpenAiCompatible, prompt, prompt::PromptProfile,
    prompt::parse_tool_calls,
};

/// Splits `text` into pieces of about `size` bytes, on character boundaries.
fn pieces(text: &str, size: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, _) in text.char_indices() {
        if i - start >= size {
            out.push(&text[start..i]);
            start = i;
        }
    }
    out.push(&text[start..]);
    out
}

/// The prompt-based tool-call parser (both profiles' conventions): the first
/// byte picks the profile and the size of the streamed pieces, the rest is
/// the model's text (invalid UTF-8 is replaced, as a lossy decoder would).
///
/// Checks that a text without calls comes back unchanged, that every call
/// has a name, and that the streaming filter shows the whole text when the
/// response turns out to hold no call.
pub fn prompt_tool_calls(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let profile = if selector & 1 == 0 {
        PromptProfile::Json
    } else {
        PromptProfile::Xml
    };
    let text = String::from_utf8_lossy(rest);
    let (remaining, calls) = parse_tool_calls(profile, &text);
    if calls.is_empty() {
        assert_eq!(
            remaining, text,
            "a text without calls must come back unchanged"
        );
    }
    for call in &calls {
        assert!(
            !call.name.trim().is_empty(),
            "a call without a name: {call:?}"
        );
    }
    let chunks = pieces(&text, usize::from(selector >> 1) % 32 + 1);
    let shown = prompt::filter_deltas(profile, &chunks, true);
    assert_eq!(
        shown, text,
        "the filter must show everything when there is no call"
    );
    let shown = prompt::filter_deltas(profile, &chunks, calls.is_empty());
    assert!(
        text.starts_with(&shown),
        "the filter shows a prefix of the text"
    );
}

/// The server-sent-events path of both providers: the first byte picks the
/// size of the network chunks, the rest is the response body. It is decoded
/// into events as the providers do, and the events go through the OpenAI and
/// the Anthropic stream assemblers; the body also goes through both
/// non-streamed response parsers. Any `Ok` or `Err` is fine.
pub fn sse_stream(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let size = usize::from(selector) % 64 + 1;
    let chunks: Vec<Result<Bytes, Infallible>> = body
        .chunks(size)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    let events = futures::executor::block_on(async {
        let mut stream = futures::stream::iter(chunks).eventsource();
        let mut events = Vec::new();
        // The providers stop at the first error (it ends the response).
        while let Some(Ok(event)) = stream.next().await {
            events.push(event);
        }
        events
    });
    let sink = |_: Delta| {};
    let _ = replay::<OpenAiCompatible>("fuzz", &events, &sink);
    let _ = replay::<Anthropic>("fuzz", &events, &sink);
    let _ = OpenAiCompatible::parse_response("fuzz", body);
    let _ = Anthropic::parse_response("fuzz", body);
}
