//! toolhost hook plugin `redact-secrets`: after every tool call it is
//! configured for, replaces API keys, tokens and private keys in the result
//! with `[REDACTED:<kind>]` (see [`redact`] for the patterns), so they never
//! reach the model, the user interface or the logs.
//!
//! - `before-execute`: always `proceed`.
//! - `after-execute`, on success: redacts the output, the string values
//!   inside the details and structured JSON, and the text of the content
//!   blocks (text blocks and embedded text resources, contract 0.3.0);
//!   `keep` when nothing was found (so a clean result costs one scan), else
//!   `replace` with the rest of the result unchanged.
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
use bindings::toolhost::plugin::types::{Content, ContentBlock, LogLevel, ResourceBody};

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
    let blocks: Vec<Option<Redacted>> = result.content.iter().map(redact_block).collect();
    let in_blocks = blocks.iter().any(Option::is_some);
    if output.is_none() && details.is_none() && structured.is_none() && !in_blocks {
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
    let content = result
        .content
        .into_iter()
        .zip(blocks)
        .map(|(block, redacted)| match redacted {
            None => block,
            Some(r) => with_text(block, take(r)),
        })
        .collect();
    let result = ToolOutput {
        output: output.map_or(result.output, &mut take),
        details: details.map(&mut take).or(result.details),
        structured: structured.map(&mut take).or(result.structured),
        content,
    };
    Some((result, found))
}

/// The text of a content block redacted, when it has text and a secret in it.
fn redact_block(block: &ContentBlock) -> Option<Redacted> {
    match &block.content {
        Content::Text(text)
        | Content::Embedded(bindings::toolhost::plugin::types::EmbeddedResource {
            body: ResourceBody::Text(text),
            ..
        }) => redact(text),
        _ => None,
    }
}

/// `block` with `text` in place of its text.
fn with_text(mut block: ContentBlock, text: String) -> ContentBlock {
    match &mut block.content {
        Content::Text(t)
        | Content::Embedded(bindings::toolhost::plugin::types::EmbeddedResource {
            body: ResourceBody::Text(t),
            ..
        }) => *t = text,
        _ => {}
    }
    block
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
            content: Vec::new(),
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
            content: Vec::new(),
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
            content: Vec::new(),
        };
        let (redacted, found) = redact_output(result).unwrap();
        assert_eq!(redacted.output, "done");
        assert_eq!(
            redacted.details.as_deref(),
            Some(r#"{"headers":{"authorization":"Bearer [REDACTED:bearer-token]"}}"#)
        );
        assert_eq!(found, [("bearer-token", 1)]);
    }

    #[test]
    fn a_key_in_the_content_blocks_is_redacted_and_the_image_kept() {
        use bindings::toolhost::plugin::types::{EmbeddedResource, Media};
        let block = |content| ContentBlock {
            content,
            annotations: None,
            meta: None,
        };
        let image = || {
            block(Content::Image(Media {
                data: vec![0x89, b'P', b'N', b'G'],
                mime_type: "image/png".into(),
            }))
        };
        let result = ToolOutput {
            output: "see the file".into(),
            details: None,
            structured: None,
            content: vec![
                block(Content::Text(format!("key {KEY}"))),
                image(),
                block(Content::Embedded(EmbeddedResource {
                    uri: "file:///.env".into(),
                    mime_type: None,
                    body: ResourceBody::Text(format!("OPENAI_API_KEY={KEY}")),
                })),
            ],
        };
        let (redacted, found) = redact_output(result).unwrap();
        assert_eq!(redacted.output, "see the file");
        assert!(
            matches!(&redacted.content[0].content, Content::Text(t) if t == "key [REDACTED:openai-key]")
        );
        assert!(
            matches!(&redacted.content[1].content, Content::Image(m) if m.data == [0x89, b'P', b'N', b'G'])
        );
        assert!(matches!(
            &redacted.content[2].content,
            Content::Embedded(EmbeddedResource { body: ResourceBody::Text(t), .. })
                if t == "OPENAI_API_KEY=[REDACTED:openai-key]"
        ));
        assert_eq!(found, [("openai-key", 2)]);
    }

    /// `text` as a JSON string (enough for these tests: newlines only).
    fn json_string(text: &str) -> String {
        assert!(!text.contains(['"', '\\']));
        format!("\"{}\"", text.replace('\n', "\\n"))
    }
}
