//! Reasoning that a model writes into its text as `<think>…</think>` (Qwen3,
//! DeepSeek-R1 and other local models served without a reasoning parser):
//! taken out of the answer and the history, and reported as reasoning.
//!
//! ```
//! use toolhost_agent::think::split_think;
//!
//! let (answer, reasoning) = split_think("<think>2+2 is 4</think>\n\nThe answer is 4.");
//! assert_eq!(answer, "The answer is 4.");
//! assert_eq!(reasoning, "2+2 is 4");
//! ```

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// `text` without its `<think>…</think>` blocks, and what they held. A block
/// that never closes is left in the answer (nothing is lost).
pub fn split_think(text: &str) -> (String, String) {
    let mut answer = String::new();
    let mut reasoning = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else {
            break;
        };
        answer.push_str(&rest[..start]);
        if !reasoning.is_empty() {
            reasoning.push('\n');
        }
        reasoning.push_str(after[..end].trim());
        rest = &after[end + CLOSE.len()..];
    }
    answer.push_str(rest);
    if reasoning.is_empty() {
        return (text.to_owned(), reasoning);
    }
    (answer.trim().to_owned(), reasoning)
}

/// What a piece of streamed text is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Part of the answer.
    Text(String),
    /// Part of a `<think>` block.
    Reasoning(String),
}

/// Splits streamed text into answer and reasoning as it arrives; a tag cut
/// between two deltas is held back until it is complete.
#[derive(Debug, Default)]
pub struct ThinkFilter {
    inside: bool,
    held: String,
}

impl ThinkFilter {
    /// The pieces `delta` completes.
    pub fn push(&mut self, delta: &str) -> Vec<Piece> {
        self.held.push_str(delta);
        let mut out = Vec::new();
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            if let Some(at) = self.held.find(tag) {
                let before: String = self.held.drain(..at).collect();
                self.held.drain(..tag.len());
                self.emit(&mut out, before);
                self.inside = !self.inside;
                continue;
            }
            // Keep back what could be the start of the tag.
            let keep = (1..tag.len())
                .rev()
                .find(|&n| self.held.ends_with(&tag[..n]))
                .unwrap_or(0);
            let cut = self.held.len() - keep;
            let ready: String = self.held.drain(..cut).collect();
            self.emit(&mut out, ready);
            return out;
        }
    }

    /// What is still held back, when the stream ends.
    pub fn finish(&mut self) -> Vec<Piece> {
        let rest = std::mem::take(&mut self.held);
        let mut out = Vec::new();
        self.emit(&mut out, rest);
        out
    }

    fn emit(&self, out: &mut Vec<Piece>, text: String) {
        if text.is_empty() {
            return;
        }
        out.push(if self.inside {
            Piece::Reasoning(text)
        } else {
            Piece::Text(text)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_blocks_are_taken_out_and_an_unclosed_one_is_kept() {
        assert_eq!(split_think("plain"), ("plain".to_owned(), String::new()));
        let (a, r) = split_think("<think>a</think>x<think>b</think> y");
        assert_eq!((a.as_str(), r.as_str()), ("x y", "a\nb"));
        let (a, r) = split_think("<think>never closed");
        assert_eq!((a.as_str(), r.as_str()), ("<think>never closed", ""));
    }

    #[test]
    fn a_tag_cut_between_deltas_is_held_until_complete() {
        let mut f = ThinkFilter::default();
        let mut all = Vec::new();
        for d in ["<thi", "nk>reason", "ing</th", "ink>The ans", "wer <b>"] {
            all.extend(f.push(d));
        }
        all.extend(f.finish());
        let text: String = all
            .iter()
            .filter_map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                Piece::Reasoning(_) => None,
            })
            .collect();
        let reasoning: String = all
            .iter()
            .filter_map(|p| match p {
                Piece::Reasoning(t) => Some(t.as_str()),
                Piece::Text(_) => None,
            })
            .collect();
        assert_eq!(text, "The answer <b>");
        assert_eq!(reasoning, "reasoning");
    }
}
