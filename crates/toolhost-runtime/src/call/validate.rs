//! Step 2 of a call: the arguments, checked before anything else looks at
//! them — their size (`max-args-bytes`) and the tool's JSON Schema,
//! precompiled when the plugin loaded. Every problem is reported with its
//! JSON pointer, so the model can fix all of them at once.

use serde_json::Value;

use crate::call::Target;
use crate::error::{ArgumentIssue, CallError};

/// Parses arguments given as JSON text (as a model sends them); text that is
/// not JSON is `invalid-arguments` naming the line and column.
pub(crate) fn parse(tool: &str, text: &str) -> Result<Value, CallError> {
    serde_json::from_str(text).map_err(|e| CallError::InvalidArguments {
        tool: tool.to_owned(),
        issues: vec![ArgumentIssue {
            path: String::new(),
            message: format!("arguments are not valid JSON: {e}"),
        }],
    })
}

/// Checks the arguments' size and validates them against the tool's schema;
/// returns them as JSON text for the plugin.
pub(crate) fn arguments(target: &Target<'_>, args: &Value) -> Result<String, CallError> {
    let text = sized(target, args)?;
    schema(target, args, text)
}

/// The arguments' JSON text, when it is within `max-args-bytes`.
pub(crate) fn sized(target: &Target<'_>, args: &Value) -> Result<String, CallError> {
    let limits = &target.plugin.sandbox.limits;
    let invalid = |message| CallError::InvalidArguments {
        tool: target.tool.to_owned(),
        issues: vec![ArgumentIssue {
            path: String::new(),
            message,
        }],
    };
    // Written straight into a byte buffer: `Value`'s `Display` (what
    // `to_string` takes) writes the same text through a formatter, piece
    // by piece. A `Value` always serializes; the error is never seen.
    let text = serde_json::to_string(args)
        .map_err(|e| invalid(format!("arguments cannot be written as JSON: {e}")))?;
    if text.len() > limits.max_args_bytes {
        return Err(invalid(format!(
            "arguments are {} bytes, over the limit of {} bytes (`max-args-bytes`)",
            text.len(),
            limits.max_args_bytes
        )));
    }
    Ok(text)
}

/// `text` back when `args` (whose JSON text it is) meet the tool's schema.
pub(crate) fn schema(target: &Target<'_>, args: &Value, text: String) -> Result<String, CallError> {
    let invalid = |issues| CallError::InvalidArguments {
        tool: target.tool.to_owned(),
        issues,
    };
    let validator = &target.spec().validator;
    // The common case first: a valid call skips the error-collecting path.
    if validator.is_valid(args) {
        return Ok(text);
    }
    let issues: Vec<ArgumentIssue> = validator
        .iter_errors(args)
        .map(|e| ArgumentIssue {
            path: e.instance_path().to_string(),
            message: e.to_string(),
        })
        .collect();
    Err(invalid(issues))
}
