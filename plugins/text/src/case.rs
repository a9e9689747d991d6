//! Case conversion.

use schemars::JsonSchema;
use serde::Deserialize;

/// The case to convert to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// UPPER CASE (every character kept).
    Upper,
    /// lower case (every character kept).
    Lower,
    /// Title Case: the first letter of every word upper-case, the rest
    /// lower-case (every character kept).
    Title,
    /// snake_case identifier (punctuation dropped).
    Snake,
    /// kebab-case identifier (punctuation dropped).
    Kebab,
    /// camelCase identifier (punctuation dropped).
    Camel,
    /// PascalCase identifier (punctuation dropped).
    Pascal,
    /// CONSTANT_CASE identifier (punctuation dropped).
    Constant,
}

/// Converts `text` to `case`.
///
/// `upper`, `lower` and `title` keep every character. The identifier cases
/// split the text into words at non-alphanumeric characters and at case
/// changes (`fooBar`, `HTTPServer` → `HTTP` `Server`) and join them.
pub fn convert(text: &str, case: Case) -> String {
    match case {
        Case::Upper => text.to_uppercase(),
        Case::Lower => text.to_lowercase(),
        Case::Title => title(text),
        Case::Snake => join(text, "_", Word::Lower, Word::Lower),
        Case::Kebab => join(text, "-", Word::Lower, Word::Lower),
        Case::Camel => join(text, "", Word::Lower, Word::Capitalized),
        Case::Pascal => join(text, "", Word::Capitalized, Word::Capitalized),
        Case::Constant => join(text, "_", Word::Upper, Word::Upper),
    }
}

#[derive(Clone, Copy)]
enum Word {
    Lower,
    Upper,
    Capitalized,
}

fn join(text: &str, separator: &str, first: Word, rest: Word) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in words(text).iter().enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        match if i == 0 { first } else { rest } {
            Word::Lower => out.push_str(&word.to_lowercase()),
            Word::Upper => out.push_str(&word.to_uppercase()),
            Word::Capitalized => capitalize_into(&mut out, word),
        }
    }
    out
}

fn capitalize_into(out: &mut String, word: &str) {
    let mut chars = word.chars();
    if let Some(c) = chars.next() {
        out.extend(c.to_uppercase());
        out.push_str(&chars.as_str().to_lowercase());
    }
}

/// Splits `text` into identifier words.
fn words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut words = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() && c.is_uppercase() {
            let prev = chars[i - 1];
            let next_is_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            // fooBar, v2Beta | HTTPServer (the S starts "Server").
            if prev.is_lowercase() || prev.is_numeric() || (prev.is_uppercase() && next_is_lower) {
                words.push(std::mem::take(&mut current));
            }
        }
        current.push(c);
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

fn title(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_word = false;
    let mut prev_alnum = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if in_word {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            in_word = true;
            prev_alnum = true;
        } else {
            // An apostrophe inside a word does not end it: "don't".
            in_word = prev_alnum && matches!(c, '\'' | '’');
            prev_alnum = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simple_cases() {
        assert_eq!(convert("Hello, Wörld!", Case::Upper), "HELLO, WÖRLD!");
        assert_eq!(convert("Hello, Wörld!", Case::Lower), "hello, wörld!");
        assert_eq!(convert("straße", Case::Upper), "STRASSE");
    }

    #[test]
    fn title_case() {
        assert_eq!(
            convert("the QUICK brown-fox's tale", Case::Title),
            "The Quick Brown-Fox's Tale"
        );
        assert_eq!(convert("'quoted' words", Case::Title), "'Quoted' Words");
        assert_eq!(convert("don't stop", Case::Title), "Don't Stop");
        assert_eq!(convert("", Case::Title), "");
    }

    #[test]
    fn identifier_cases() {
        let input = "HTTPServer error-code v2Beta  user_id";
        assert_eq!(
            convert(input, Case::Snake),
            "http_server_error_code_v2_beta_user_id"
        );
        assert_eq!(
            convert(input, Case::Kebab),
            "http-server-error-code-v2-beta-user-id"
        );
        assert_eq!(
            convert(input, Case::Camel),
            "httpServerErrorCodeV2BetaUserId"
        );
        assert_eq!(
            convert(input, Case::Pascal),
            "HttpServerErrorCodeV2BetaUserId"
        );
        assert_eq!(
            convert(input, Case::Constant),
            "HTTP_SERVER_ERROR_CODE_V2_BETA_USER_ID"
        );
        assert_eq!(convert("fooBar", Case::Snake), "foo_bar");
        assert_eq!(convert("  --  ", Case::Snake), "");
        assert_eq!(convert("ÉtéChaud", Case::Kebab), "été-chaud");
    }
}
