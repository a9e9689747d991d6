//! Chat-template turn markers written as text.
//!
//! A model served with a chat template it was not trained on (a small model
//! behind a llama.cpp build that falls back to ChatML) does not know the
//! template's end-of-turn token, so it writes `<|im_end|>` as text and goes
//! on to play both sides of the conversation until the server's limit: a
//! reply that never ends. What it wrote before the first marker is its
//! reply; the rest is not. The exchange stops reading a stream at the first
//! marker (closing the connection stops the generation) and cuts the text
//! there, on every route (native, and the prompt protocols, which read
//! through it).
//!
//! ```
//! use toolhost_providers::turns::reply_end;
//! let text = "It is 14.<|im_end|>\n<|im_start|>user\nWhat is 2*(3+4)?";
//! assert_eq!(reply_end(text), Some(9));
//! assert_eq!(reply_end("a <b>bold</b> answer"), None);
//! ```

/// Turn markers of the common chat templates (ChatML, Llama 3, Gemma,
/// GPT-style end of text). None of them is ordinary text.
pub const TURN_MARKERS: &[&str] = &[
    "<|im_end|>",
    "<|im_start|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<end_of_turn>",
    "<start_of_turn>",
    "<|endoftext|>",
];

/// The longest marker, in bytes (how far back a new piece of text must be
/// searched, for a marker split across pieces).
const LONGEST: usize = 19;

/// Where the reply ends in `text`: the byte offset of its first turn
/// marker, if it has one.
pub fn reply_end(text: &str) -> Option<usize> {
    reply_end_from(text, 0)
}

/// As [`reply_end`], looking only at markers that end after byte `from`
/// (the text before it was searched already).
pub(crate) fn reply_end_from(text: &str, from: usize) -> Option<usize> {
    let mut start = from.saturating_sub(LONGEST).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let tail = &text[start..];
    TURN_MARKERS
        .iter()
        .filter_map(|m| tail.find(m))
        .min()
        .map(|i| start + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_split_across_pieces_is_found_from_the_last_offset() {
        let text = "answer é<|im_";
        assert_eq!(reply_end_from(text, 0), None);
        let text = format!("{text}end|> more");
        assert_eq!(reply_end_from(&text, 15), Some("answer é".len()));
        assert_eq!(reply_end("<end_of_turn><|im_end|>"), Some(0));
        assert_eq!(reply_end_from("ééé", 200), None);
        assert_eq!(LONGEST, TURN_MARKERS.iter().map(|m| m.len()).max().unwrap());
    }
}
