//! Text to search terms: identifiers split into their words
//! (`get_weather`, `getWeather`, `get-weather` and `get.weather` all give
//! `get` and `weather`), lower-cased, common English words dropped, and each
//! word reduced to its stem (`forecasts` and `forecasting` match
//! `forecast`). Queries and tools go through the same rules.

use rust_stemmers::{Algorithm, Stemmer};

/// Words that carry no meaning for finding a tool.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
    "give", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "need", "of", "on",
    "or", "please", "that", "the", "their", "then", "there", "this", "to", "tool", "tools", "use",
    "want", "was", "what", "when", "which", "who", "will", "with", "would", "you", "your",
];

/// Verbs that name the same action, by their stem, each to one stem: a
/// user "shows" what a tool "gets", "removes" what it "deletes". Applied to
/// the tools and the queries alike.
const SAME_ACTION: &[(&str, &str)] = &[
    ("show", "get"),
    ("display", "get"),
    ("view", "get"),
    ("fetch", "get"),
    ("retriev", "get"),
    ("see", "get"),
    ("remov", "delet"),
    ("eras", "delet"),
    ("destroy", "delet"),
    ("add", "creat"),
    ("make", "creat"),
    ("insert", "creat"),
    ("chang", "updat"),
    ("edit", "updat"),
    ("modifi", "updat"),
];

/// The longest text read from one field: a description of megabytes costs
/// no more than this to index.
pub(crate) const MAX_FIELD_CHARS: usize = 4096;

/// The tokenizer the BM25 index and the queries use.
pub(crate) struct Words {
    stemmer: Stemmer,
}

impl Default for Words {
    fn default() -> Self {
        Words {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

impl Words {
    /// The search terms of `text`, in order.
    pub(crate) fn terms(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for word in split(text) {
            let lower = word.to_lowercase();
            if STOP_WORDS.contains(&lower.as_str()) {
                continue;
            }
            let stem = self.stemmer.stem(&lower);
            let same = SAME_ACTION
                .iter()
                .find(|(from, _)| *from == stem.as_ref())
                .map(|(_, to)| *to);
            out.push(same.map_or_else(|| stem.into_owned(), str::to_owned));
        }
        out
    }
}

impl bm25::Tokenizer for Words {
    fn tokenize(&self, input_text: &str) -> Vec<String> {
        self.terms(input_text)
    }
}

/// The words of `text`: runs of letters or digits, split where an
/// identifier's case changes (`getHTTPStatus`: `get`, `HTTP`, `Status`).
/// At most [`MAX_FIELD_CHARS`] characters are read.
fn split(text: &str) -> Vec<&str> {
    let mut words = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().take(MAX_FIELD_CHARS).collect();
    let mut start: Option<usize> = None;
    for i in 0..chars.len() {
        let c = chars[i].1;
        if !c.is_alphanumeric() {
            if let Some(s) = start.take() {
                words.push(&text[chars[s].0..chars[i].0]);
            }
            continue;
        }
        let Some(s) = start else {
            start = Some(i);
            continue;
        };
        let prev = chars[i - 1].1;
        let next = chars.get(i + 1).map(|c| c.1);
        // `aB` starts a word at B; `ABc` starts one at B (the end of an acronym).
        let boundary = (prev.is_lowercase() && c.is_uppercase())
            || (prev.is_uppercase() && c.is_uppercase() && next.is_some_and(char::is_lowercase))
            || (prev.is_alphabetic() != c.is_alphabetic());
        if boundary {
            words.push(&text[chars[s].0..chars[i].0]);
            start = Some(i);
        }
    }
    if let Some(s) = start {
        words.push(&text[chars[s].0..byte_end(&chars)]);
    }
    words
}

/// The byte offset just after the last character read.
fn byte_end(chars: &[(usize, char)]) -> usize {
    chars.last().map_or(0, |(i, c)| i + c.len_utf8())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_their_words() {
        assert_eq!(split("get_weather"), ["get", "weather"]);
        assert_eq!(split("getWeather"), ["get", "Weather"]);
        assert_eq!(split("get-weather.v2"), ["get", "weather", "v", "2"]);
        assert_eq!(split("getHTTPStatus"), ["get", "HTTP", "Status"]);
        assert_eq!(split("  résumé écrit "), ["résumé", "écrit"]);
        assert!(split("").is_empty());
        assert!(split("__--").is_empty());
    }

    #[test]
    fn terms_are_lower_case_stems_without_stop_words() {
        let words = Words::default();
        assert_eq!(
            words.terms("What is the weather forecast for Paris?"),
            ["weather", "forecast", "pari"]
        );
        assert_eq!(words.terms("list_forecasts"), ["list", "forecast"]);
        assert_eq!(words.terms("Forecasting"), ["forecast"]);
        assert_eq!(words.terms("Show removed items"), ["get", "delet", "item"]);
    }

    #[test]
    fn a_huge_field_is_read_only_up_to_its_bound() {
        let text = "word ".repeat(MAX_FIELD_CHARS);
        let n = Words::default().terms(&text).len();
        assert!(n <= MAX_FIELD_CHARS / 5 + 1, "{n}");
    }
}
