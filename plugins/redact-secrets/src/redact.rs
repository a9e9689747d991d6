//! Finding and redacting secrets in text, without regular expressions.
//!
//! Each secret is replaced with `[REDACTED:<kind>]`:
//!
//! | kind | pattern |
//! | --- | --- |
//! | `private-key` | `-----BEGIN … PRIVATE KEY-----` to `-----END … PRIVATE KEY-----` (to the end of the text when the end line is missing) |
//! | `anthropic-key` | `sk-ant-` and 20+ of `[A-Za-z0-9_-]` |
//! | `openai-key` | `sk-` and 20+ of `[A-Za-z0-9_-]` (also `sk-proj-…`) |
//! | `aws-access-key` | `AKIA` or `ASIA` and exactly 16 of `[0-9A-Z]` |
//! | `github-token` | `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_` and 36+ of `[A-Za-z0-9]`; `github_pat_` and 22+ of `[A-Za-z0-9_]` |
//! | `slack-token` | `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-` and 10+ of `[A-Za-z0-9-]` |
//! | `bearer-token` | `Bearer` (any case), blanks, and a token of 8+ of `[A-Za-z0-9._~+/=-]` that is not a plain word; the word `Bearer` is kept |
//!
//! A key must start a word (the character before it is not a letter, a
//! digit, `_` or `-`), so `task-…` or `disk-…` never match `sk-`. All the
//! patterns are ASCII, so every cut falls on a UTF-8 boundary.

/// What one pass found: the redacted text, and how many secrets of each kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    /// The text with every secret replaced.
    pub text: String,
    /// `(kind, count)` for each kind found, in the order first found.
    pub found: Vec<(&'static str, usize)>,
}

impl Redacted {
    fn note(&mut self, kind: &'static str) {
        match self.found.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => self.found.push((kind, 1)),
        }
    }

    fn merge(&mut self, other: &[(&'static str, usize)]) {
        for &(kind, n) in other {
            match self.found.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, m)) => *m += n,
                None => self.found.push((kind, n)),
            }
        }
    }
}

/// A secret at some position: where it ends, its kind, and how much of it
/// to keep (the `Bearer ` of a bearer token).
struct Hit {
    end: usize,
    kind: &'static str,
    keep: usize,
}

/// Redacts the secrets in `text`; `None` when there are none (the common
/// case, which allocates nothing).
pub fn redact(text: &str) -> Option<Redacted> {
    let bytes = text.as_bytes();
    let mut out: Option<Redacted> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let hit = if starts_word(bytes, i) {
            secret_at(bytes, i)
        } else {
            None
        };
        let Some(hit) = hit else {
            i += 1;
            continue;
        };
        let done = out.get_or_insert_with(|| Redacted {
            text: String::with_capacity(text.len()),
            found: Vec::new(),
        });
        done.text.push_str(&text[copied..i + hit.keep]);
        done.text.push_str("[REDACTED:");
        done.text.push_str(hit.kind);
        done.text.push(']');
        done.note(hit.kind);
        copied = hit.end;
        i = hit.end;
    }
    let mut done = out?;
    done.text.push_str(&text[copied..]);
    Some(done)
}

/// Redacts the secrets inside the string values (and keys) of the JSON text
/// `json`, leaving everything else byte for byte; `None` when there are
/// none. Text that is not valid JSON is scanned as far as it goes.
pub fn redact_json(json: &str) -> Option<Redacted> {
    let bytes = json.as_bytes();
    let mut out: Option<Redacted> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let Some(end) = string_end(bytes, i + 1) else {
            break; // unterminated: leave the rest as it is
        };
        let raw = &json[i + 1..end];
        if let Some(decoded) = unescape(raw)
            && let Some(redacted) = redact(&decoded)
        {
            let done = out.get_or_insert_with(|| Redacted {
                text: String::with_capacity(json.len()),
                found: Vec::new(),
            });
            done.text.push_str(&json[copied..i]);
            escape_into(&redacted.text, &mut done.text);
            done.merge(&redacted.found);
            copied = end + 1;
        }
        i = end + 1;
    }
    let mut done = out?;
    done.text.push_str(&json[copied..]);
    Some(done)
}

/// Which secret, if any, starts at `i`.
fn secret_at(b: &[u8], i: usize) -> Option<Hit> {
    let rest = &b[i..];
    match rest.first()? {
        b'-' => private_key(b, i),
        b's' => {
            if rest.starts_with(b"sk-ant-") {
                run(b, i + 7, 20, usize::MAX, is_key_char).map(|end| hit(end, "anthropic-key"))
            } else if rest.starts_with(b"sk-") {
                run(b, i + 3, 20, usize::MAX, is_key_char).map(|end| hit(end, "openai-key"))
            } else {
                None
            }
        }
        b'A' if rest.starts_with(b"AKIA") || rest.starts_with(b"ASIA") => {
            let end = run(b, i + 4, 16, 16, |c| {
                c.is_ascii_digit() || c.is_ascii_uppercase()
            })?;
            // Exactly 16: a longer run is something else.
            if b.get(end).is_some_and(u8::is_ascii_alphanumeric) {
                return None;
            }
            Some(hit(end, "aws-access-key"))
        }
        b'g' => {
            if rest.len() > 4
                && rest.starts_with(b"gh")
                && matches!(rest[2], b'p' | b'o' | b'u' | b's' | b'r')
                && rest[3] == b'_'
            {
                run(b, i + 4, 36, usize::MAX, |c| c.is_ascii_alphanumeric())
                    .map(|end| hit(end, "github-token"))
            } else if rest.starts_with(b"github_pat_") {
                run(b, i + 11, 22, usize::MAX, |c| {
                    c.is_ascii_alphanumeric() || c == b'_'
                })
                .map(|end| hit(end, "github-token"))
            } else {
                None
            }
        }
        b'x' if rest.len() > 5
            && rest.starts_with(b"xox")
            && matches!(rest[3], b'a' | b'b' | b'p' | b'r' | b's')
            && rest[4] == b'-' =>
        {
            run(b, i + 5, 10, usize::MAX, |c| {
                c.is_ascii_alphanumeric() || c == b'-'
            })
            .map(|end| hit(end, "slack-token"))
        }
        b'B' | b'b' => bearer(b, i),
        _ => None,
    }
}

fn hit(end: usize, kind: &'static str) -> Hit {
    Hit { end, kind, keep: 0 }
}

/// Whether a secret may start at `i`: not in the middle of a word or key.
fn starts_word(b: &[u8], i: usize) -> bool {
    i == 0 || !is_key_char(b[i - 1])
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// The end of a run of at least `min` and at most `max` bytes matching
/// `ok`, from `start`.
fn run(b: &[u8], start: usize, min: usize, max: usize, ok: impl Fn(u8) -> bool) -> Option<usize> {
    let len = b
        .get(start..)?
        .iter()
        .take(max)
        .take_while(|&&c| ok(c))
        .count();
    (len >= min).then_some(start + len)
}

/// `-----BEGIN <LABEL>PRIVATE KEY-----` … `-----END <LABEL>PRIVATE KEY-----`.
fn private_key(b: &[u8], i: usize) -> Option<Hit> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    const END: &[u8] = b"-----END ";
    const TAIL: &[u8] = b"PRIVATE KEY-----";
    if !b[i..].starts_with(BEGIN) {
        return None;
    }
    let label_start = i + BEGIN.len();
    let label_len = b[label_start..]
        .iter()
        .take(40)
        .take_while(|&&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' ')
        .count();
    if !b[label_start..label_start + label_len].ends_with(b"PRIVATE KEY")
        || !b[label_start + label_len..].starts_with(b"-----")
    {
        return None;
    }
    let body = label_start + label_len + 5;
    let mut j = body;
    while let Some(offset) = find(&b[j..], END) {
        let at = j + offset + END.len();
        if let Some(tail) = find(&b[at..(at + 40 + TAIL.len()).min(b.len())], TAIL) {
            return Some(hit(at + tail + TAIL.len(), "private-key"));
        }
        j = at;
    }
    // No end line (a truncated output): everything after the header goes.
    Some(hit(b.len(), "private-key"))
}

/// `Bearer <token>`: keeps `Bearer ` and redacts the token.
fn bearer(b: &[u8], i: usize) -> Option<Hit> {
    let word = b.get(i..i + 6)?;
    if !word.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let blanks = b[i + 6..]
        .iter()
        .take_while(|&&c| c == b' ' || c == b'\t')
        .count();
    if blanks == 0 {
        return None;
    }
    let start = i + 6 + blanks;
    let end = run(b, start, 8, usize::MAX, |c| {
        c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'~' | b'+' | b'/' | b'=' | b'-')
    })?;
    // "Bearer authentication" is prose, not a token.
    if b[start..end].iter().all(u8::is_ascii_alphabetic) {
        return None;
    }
    Some(Hit {
        end,
        kind: "bearer-token",
        keep: start - i,
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The index of the quote that closes the JSON string whose content starts
/// at `start`.
fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Decodes the content of a JSON string; `None` if it is not valid.
fn unescape(raw: &str) -> Option<String> {
    if !raw.contains('\\') {
        return Some(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            '/' => out.push('/'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'u' => {
                let high = hex4(&mut chars)?;
                let code = if (0xD800..0xDC00).contains(&high) {
                    if chars.next()? != '\\' || chars.next()? != 'u' {
                        return None;
                    }
                    let low = hex4(&mut chars)?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    high
                };
                out.push(char::from_u32(code)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let mut value = 0;
    for _ in 0..4 {
        value = value * 16 + chars.next()?.to_digit(16)?;
    }
    Some(value)
}

/// Appends `text` as a JSON string literal.
fn escape_into(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let n = c as usize;
                out.push_str("\\u00");
                out.push(HEX[n >> 4] as char);
                out.push(HEX[n & 0xf] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        redact(text).map_or_else(|| text.to_owned(), |r| r.text)
    }

    const OPENAI: &str = "sk-proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz1_-aBcDeF";
    const ANTHROPIC: &str = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AA";

    #[test]
    fn text_without_secrets_is_left_alone() {
        for text in [
            "",
            "hello world",
            "a task-list-with-many-long-words-in-it and a disk-cache-directory-name",
            "sk-short",
            "AKIA123",
            "Bearer authentication is described in RFC 6750",
            "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
            "ghp_tooShort",
            "日本語のテキスト sk- ",
        ] {
            assert_eq!(redact(text), None, "{text}");
        }
    }

    #[test]
    fn a_planted_openai_key_inside_a_file_is_redacted() {
        let file = format!(
            "# config.py\nimport os\n\nOPENAI_API_KEY = \"{OPENAI}\"\nMODEL = \"gpt-4o\"\n"
        );
        let r = redact(&file).unwrap();
        assert_eq!(
            r.text,
            "# config.py\nimport os\n\nOPENAI_API_KEY = \"[REDACTED:openai-key]\"\nMODEL = \"gpt-4o\"\n"
        );
        assert_eq!(r.found, [("openai-key", 1)]);
        assert!(!r.text.contains("Ab3dEf6h"));
    }

    #[test]
    fn each_kind_of_secret_is_redacted() {
        let cases = [
            (ANTHROPIC, "[REDACTED:anthropic-key]"),
            ("sk-abcdefghijklmnopqrstuvwxyz0123", "[REDACTED:openai-key]"),
            ("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key]"),
            ("ASIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key]"),
            (
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "[REDACTED:github-token]",
            ),
            (
                "gho_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
                "[REDACTED:github-token]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                "[REDACTED:github-token]",
            ),
            ("xoxb-1234567890-abcdefghij", "[REDACTED:slack-token]"),
            ("xoxp-1234-5678-abcdef", "[REDACTED:slack-token]"),
            (
                "Bearer eyJhbGciOiJIUzI1NiJ9.e30.abc",
                "Bearer [REDACTED:bearer-token]",
            ),
            ("bearer\tabc123def456", "bearer\t[REDACTED:bearer-token]"),
        ];
        for (secret, expected) in cases {
            assert_eq!(redacted(secret), expected, "{secret}");
            assert_eq!(
                redacted(&format!("before {secret} after")),
                format!("before {expected} after"),
                "{secret}"
            );
        }
    }

    #[test]
    fn keys_must_start_a_word_and_aws_keys_have_exactly_sixteen_characters() {
        assert_eq!(redact("xsk-abcdefghijklmnopqrstuvwxyz0123"), None);
        assert_eq!(redact("AKIAIOSFODNN7EXAMPLEX"), None);
        assert_eq!(
            redacted("key=AKIAIOSFODNN7EXAMPLE;"),
            "key=[REDACTED:aws-access-key];"
        );
        assert_eq!(
            redacted("\"sk-abcdefghijklmnopqrstuvwxyz0123\","),
            "\"[REDACTED:openai-key]\","
        );
    }

    #[test]
    fn a_private_key_block_is_redacted_whole() {
        let text = "id_rsa:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc+/=\n-----END RSA PRIVATE KEY-----\ndone";
        assert_eq!(redacted(text), "id_rsa:\n[REDACTED:private-key]\ndone");
        let openssh =
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----";
        assert_eq!(redacted(openssh), "[REDACTED:private-key]");
        let plain = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----";
        assert_eq!(redacted(plain), "[REDACTED:private-key]");
    }

    #[test]
    fn a_private_key_without_its_end_line_is_redacted_to_the_end() {
        let text = "head\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEI… (truncated)";
        assert_eq!(redacted(text), "head\n[REDACTED:private-key]");
    }

    #[test]
    fn several_secrets_are_counted_by_kind() {
        let text =
            format!("{OPENAI} {ANTHROPIC} sk-abcdefghijklmnopqrstuvwxyz AKIAIOSFODNN7EXAMPLE");
        let r = redact(&text).unwrap();
        assert_eq!(
            r.text,
            "[REDACTED:openai-key] [REDACTED:anthropic-key] [REDACTED:openai-key] [REDACTED:aws-access-key]"
        );
        assert_eq!(
            r.found,
            [
                ("openai-key", 2),
                ("anthropic-key", 1),
                ("aws-access-key", 1)
            ]
        );
    }

    #[test]
    fn multibyte_text_around_secrets_survives() {
        assert_eq!(
            redacted("clé: sk-abcdefghijklmnopqrstuvwxyz — fin ✓"),
            "clé: [REDACTED:openai-key] — fin ✓"
        );
    }

    #[test]
    fn json_strings_are_redacted_and_the_rest_is_kept_byte_for_byte() {
        let json = format!(
            r#"{{"path": "config.py", "lines": 3, "content": "KEY=\"{OPENAI}\"\nX=1", "ok": true}}"#
        );
        let r = redact_json(&json).unwrap();
        assert_eq!(
            r.text,
            r#"{"path": "config.py", "lines": 3, "content": "KEY=\"[REDACTED:openai-key]\"\nX=1", "ok": true}"#
        );
        assert_eq!(redact_json(r#"{"a": [1, "two", {"b": null}]}"#), None);
    }

    #[test]
    fn json_escapes_do_not_hide_secrets() {
        // A key right after an escaped newline, and a private key whose
        // newlines are escapes.
        let json = r#"["line\nsk-abcdefghijklmnopqrstuvwxyz", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "\u0073k-abcdefghijklmnopqrstuvwxyz"]"#;
        let r = redact_json(json).unwrap();
        assert_eq!(
            r.text,
            r#"["line\n[REDACTED:openai-key]", "[REDACTED:private-key]", "[REDACTED:openai-key]"]"#
        );
        assert_eq!(r.found, [("openai-key", 2), ("private-key", 1)]);
    }

    #[test]
    fn json_redaction_keeps_other_escapes_valid() {
        let json = "{\"t\":\"tab\\there \\\"q\\\" \\u00e9 \\ud83d\\ude00 \\u0001 sk-abcdefghijklmnopqrstuvwxyz\"}";
        let r = redact_json(json).unwrap();
        assert_eq!(
            r.text,
            "{\"t\":\"tab\\there \\\"q\\\" é 😀 \\u0001 [REDACTED:openai-key]\"}"
        );
    }

    #[test]
    fn broken_json_is_scanned_as_far_as_it_goes() {
        assert_eq!(redact_json("{\"a\": \"sk-abcdefghijklmnopqrstuvwxyz"), None);
        let r = redact_json("[\"sk-abcdefghijklmnopqrstuvwxyz\", \"unterminated").unwrap();
        assert_eq!(r.text, "[\"[REDACTED:openai-key]\", \"unterminated");
    }
}
