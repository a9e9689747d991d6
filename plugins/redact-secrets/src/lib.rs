//! toolhost hook plugin `redact-secrets`: after every tool call it is
//! configured for, replaces API keys, tokens and private keys in the result
//! with `[REDACTED:<kind>]` (see [`redact`] for the patterns), so they never
//! reach the model, the user interface or the logs.
//!
//! - `before-execute`: always `proceed`.
//! - `after-execute`, on success: redacts the output, and the string values
//!   inside the details and structured JSON; `keep` when nothing was found
//!   (so a clean result costs one scan), else `replace` with the rest of the
//!   result unchanged.
//! - `after-execute`, on failure: a secret in the error message turns the
//!   result into `fail` with the redacted message (an after-hook cannot
//!   rewrite an error in place); otherwise `keep`.
//!
//! It logs what kinds it redacted and how many, never the secrets.
//!
//! ```toml
//! [[hooks]]
//! plugin-hook = "redact-secrets"
//! stages = ["after"]
//! ```

pub mod redact;

#[allow(unsafe_code, clippy::all, dead_code)]
mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "hook-plugin",
    });
}

use bindings::exports::toolhost::plugin::hooks::{
    AfterDecision, BeforeDecision, CallContext, Guest, ToolError, ToolOutput,
};
use bindings::toolhost::plugin::host;
use bindings::toolhost::plugin::types::LogLevel;

use crate::redact::{Redacted, redact, redact_json};

struct RedactSecrets;

impl Guest for RedactSecrets {
    fn before_execute(_context: CallContext, _tool: String, _args_json: String) -> BeforeDecision {
        BeforeDecision::Proceed
    }

    fn after_execute(
        _context: CallContext,
        tool: String,
        _args_json: String,
        outcome: Result<ToolOutput, ToolError>,
    ) -> AfterDecision {
        match outcome {
            Ok(result) => match redact_output(result) {
                None => AfterDecision::Keep,
                Some((result, found)) => {
                    report(&tool, &found);
                    AfterDecision::Replace(result)
                }
            },
            Err(ToolError::InvalidArguments(message) | ToolError::Failed(message)) => {
                match redact(&message) {
                    None => AfterDecision::Keep,
                    Some(r) => {
                        report(&tool, &r.found);
                        AfterDecision::Fail(r.text)
                    }
                }
            }
        }
    }
}

/// The result with its secrets redacted, and what was found; `None` when it
/// holds none.
fn redact_output(result: ToolOutput) -> Option<(ToolOutput, Vec<(&'static str, usize)>)> {
    let output = redact(&result.output);
    let details = result.details.as_deref().and_then(redact_json);
    let structured = result.structured.as_deref().and_then(redact_json);
    if output.is_none() && details.is_none() && structured.is_none() {
        return None;
    }
    let mut found = Vec::new();
    let mut take = |r: Redacted| {
        for (kind, n) in r.found {
            match found.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, m)) => *m += n,
                None => found.push((kind, n)),
            }
        }
        r.text
    };
    let result = ToolOutput {
        output: output.map_or(result.output, &mut take),
        details: details.map(&mut take).or(result.details),
        structured: structured.map(&mut take).or(result.structured),
    };
    Some((result, found))
}

fn report(tool: &str, found: &[(&'static str, usize)]) {
    let kinds: Vec<String> = found.iter().map(|(k, n)| format!("{n} {k}")).collect();
    host::log(
        LogLevel::Info,
        &format!("redacted from the result of {tool}: {}", kinds.join(", ")),
    );
}

// The ABI glue wit-bindgen generates here is `unsafe` code.
#[allow(unsafe_code)]
mod export {
    use super::*;
    bindings::export!(RedactSecrets with_types_in crate::bindings);
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz1aBcDeF";

    #[test]
    fn a_clean_result_is_kept() {
        let result = ToolOutput {
            output: "1 + 2 = 3".into(),
            details: Some(r#"{"value": 3}"#.into()),
            structured: None,
        };
        assert!(redact_output(result).is_none());
    }

    #[test]
    fn a_planted_key_in_a_read_file_result_is_redacted_everywhere() {
        let content = format!("OPENAI_API_KEY={KEY}\nDEBUG=1\n");
        let result = ToolOutput {
            output: content.clone(),
            details: Some(format!(
                r#"{{"path":".env","content":{}}}"#,
                json_string(&content)
            )),
            structured: Some(r#"{"lines":2}"#.into()),
        };
        let (redacted, found) = redact_output(result).unwrap();
        assert_eq!(
            redacted.output,
            "OPENAI_API_KEY=[REDACTED:openai-key]\nDEBUG=1\n"
        );
        assert_eq!(
            redacted.details.as_deref(),
            Some(r#"{"path":".env","content":"OPENAI_API_KEY=[REDACTED:openai-key]\nDEBUG=1\n"}"#)
        );
        assert_eq!(redacted.structured.as_deref(), Some(r#"{"lines":2}"#));
        assert_eq!(found, [("openai-key", 2)]);
    }

    #[test]
    fn a_key_only_in_the_details_replaces_only_the_details() {
        let result = ToolOutput {
            output: "done".into(),
            details: Some(format!(
                r#"{{"headers":{{"authorization":"Bearer {KEY}"}}}}"#
            )),
            structured: None,
        };
        let (redacted, found) = redact_output(result).unwrap();
        assert_eq!(redacted.output, "done");
        assert_eq!(
            redacted.details.as_deref(),
            Some(r#"{"headers":{"authorization":"Bearer [REDACTED:bearer-token]"}}"#)
        );
        assert_eq!(found, [("bearer-token", 1)]);
    }

    /// `text` as a JSON string (enough for these tests: newlines only).
    fn json_string(text: &str) -> String {
        assert!(!text.contains(['"', '\\']));
        format!("\"{}\"", text.replace('\n', "\\n"))
    }
}
