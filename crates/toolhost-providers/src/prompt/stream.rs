//! Streaming through a prompt protocol: the text deltas are held back from
//! the point where a tool call starts ([`DeltaFilter`]), so that a user
//! interface never shows the raw call, and given back at the end when it
//! was no call after all.

use super::profile::PromptProfile;

/// Streams `chunks` through the filter that holds back calls and flushes it,
/// as [`PromptTools`](super::PromptTools) does: the text a user interface
/// would show. For the fuzz targets and their regression tests only.
pub(crate) fn filter_deltas(profile: PromptProfile, chunks: &[&str], no_calls: bool) -> String {
    let mut filter = DeltaFilter::new(profile, true);
    let mut shown = String::new();
    for chunk in chunks {
        if let Some(out) = filter.push(chunk) {
            shown.push_str(&out);
        }
    }
    if let Some(rest) = filter.flush(no_calls) {
        shown.push_str(&rest);
    }
    shown
}

/// Holds back streamed text from the point a tool call starts, so user
/// interfaces do not show the raw call.
pub(super) struct DeltaFilter {
    profile: PromptProfile,
    active: bool,
    all: String,
    forwarded: usize,
    suppressed: bool,
}

enum Verdict {
    Call,
    NotCall,
    Undecided,
}

impl DeltaFilter {
    pub(super) fn new(profile: PromptProfile, active: bool) -> Self {
        DeltaFilter {
            profile,
            active,
            all: String::new(),
            forwarded: 0,
            suppressed: false,
        }
    }

    pub(super) fn push(&mut self, text: &str) -> Option<String> {
        if !self.active {
            return Some(text.to_owned());
        }
        self.all.push_str(text);
        if self.suppressed {
            return None;
        }
        let mut i = self.forwarded;
        let mut until = self.all.len();
        while let Some(off) = self.all[i..].find(['{', '`', '<']) {
            let pos = i + off;
            match self.verdict(pos) {
                Verdict::NotCall => i = pos + 1,
                Verdict::Call => {
                    self.suppressed = true;
                    until = pos;
                    break;
                }
                Verdict::Undecided => {
                    until = pos;
                    break;
                }
            }
        }
        let out = self.all[self.forwarded..until].to_owned();
        self.forwarded = until;
        (!out.is_empty()).then_some(out)
    }

    fn verdict(&self, pos: usize) -> Verdict {
        let rest = &self.all[pos..];
        let starts = |patterns: &[&str], s: &str| {
            if patterns.iter().any(|p| s.starts_with(p)) {
                Verdict::Call
            } else if patterns.iter().any(|p| p.starts_with(s)) {
                Verdict::Undecided
            } else {
                Verdict::NotCall
            }
        };
        match (self.profile, rest.as_bytes().first()) {
            (PromptProfile::Xml, Some(b'<')) => starts(&["<tool_code>", "<tool_call>"], rest),
            (PromptProfile::Json, Some(b'{')) => {
                let key = rest[1..].trim_start();
                if key.is_empty() {
                    Verdict::Undecided
                } else {
                    starts(&["\"tool_calls\"", "\"tool_call\"", "\"name\""], key)
                }
            }
            (PromptProfile::Json, Some(b'`')) => {
                // Only the start matters (lowercasing all the rest for every
                // backtick was quadratic in a long delta).
                let head = rest
                    .char_indices()
                    .nth(17)
                    .map_or(rest, |(k, _)| &rest[..k]);
                let lower = head.to_ascii_lowercase();
                match starts(&["```json", "```\n{", "```\r\n{"], &lower) {
                    Verdict::NotCall if lower.starts_with("```") => {
                        // A fence whose info string is not complete yet.
                        let line = lower.split('\n').next().unwrap_or_default();
                        if !lower.contains('\n') && line.len() < 16 {
                            Verdict::Undecided
                        } else {
                            Verdict::NotCall
                        }
                    }
                    v => v,
                }
            }
            _ => Verdict::NotCall,
        }
    }

    /// What was held back, once the response is complete: nothing after the
    /// start of a call, unless `no_calls` (the text held no call after all).
    pub(super) fn flush(&mut self, no_calls: bool) -> Option<String> {
        if !self.active || (self.suppressed && !no_calls) || self.forwarded >= self.all.len() {
            return None;
        }
        let out = self.all[self.forwarded..].to_owned();
        self.forwarded = self.all.len();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_filter_holds_back_calls() {
        let mut f = DeltaFilter::new(PromptProfile::Xml, true);
        let mut shown = String::new();
        for piece in [
            "Let me ",
            "look. <",
            "tool_",
            "code>{\"name\"",
            "...",
            "</tool_code>",
        ] {
            if let Some(s) = f.push(piece) {
                shown.push_str(&s);
            }
        }
        assert_eq!(shown, "Let me look. ");
        assert_eq!(f.flush(false), None);

        let mut f = DeltaFilter::new(PromptProfile::Json, true);
        let mut shown = String::new();
        for piece in ["a {b} ", "c {", "\n  \"tool", "_calls\": []}"] {
            if let Some(s) = f.push(piece) {
                shown.push_str(&s);
            }
        }
        assert_eq!(shown, "a {b} c ");

        let mut f = DeltaFilter::new(PromptProfile::Json, true);
        assert_eq!(f.push("x <y> {").as_deref(), Some("x <y> "));
        assert_eq!(f.flush(true).as_deref(), Some("{"));

        // Looked like a call but was not: everything reaches the sink at the end.
        let mut f = DeltaFilter::new(PromptProfile::Json, true);
        assert_eq!(
            f.push("Ada is {\"name\": \"Ada\"} ok").as_deref(),
            Some("Ada is ")
        );
        assert_eq!(f.flush(true).as_deref(), Some("{\"name\": \"Ada\"} ok"));
    }
}
