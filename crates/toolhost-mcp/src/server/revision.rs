//! A failed `tools/call` as the revision the session negotiated says it
//! is: a JSON-RPC error (a *protocol error*) or a result with `isError`
//! (a *tool execution error*). The revisions' "Error Handling" sections:
//!
//! | failure | 2024-11-05, 2025-03-26, 2025-06-18 | 2025-11-25, 2026-07-28 |
//! |---|---|---|
//! | unknown tool | JSON-RPC error -32602 | JSON-RPC error -32602 |
//! | invalid arguments | JSON-RPC error -32602 ("Invalid arguments") | `isError` ("Input validation errors", SEP-1303: the model can correct them) |
//! | everything else (denied, failed, timed out, …) | `isError` | `isError` |
//!
//! A session whose revision is unknown counts as 2025-03-26, the revision
//! the Streamable HTTP transport assumes for a request without an
//! `MCP-Protocol-Version` header.

use rmcp::ErrorData as McpError;
use rmcp::model::ProtocolVersion;
use serde_json::json;
use toolhost_runtime::{CallError, error::ErrorKind};

/// The first revision that reports invalid arguments as a tool execution
/// error.
const VALIDATION_IN_RESULT: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// Longest message of a protocol error.
pub(super) const MESSAGE_CHARS: usize = 2000;

/// The JSON-RPC error `e` is under `version`, or `None` when it is a tool
/// execution error there (an `isError` result).
pub(crate) fn protocol_error(e: &CallError, version: Option<&ProtocolVersion>) -> Option<McpError> {
    let older = version.is_none_or(|v| v.as_str() < VALIDATION_IN_RESULT.as_str());
    let data = |extra: serde_json::Value| {
        let mut data = json!({ crate::tools::ERROR_KIND_META_KEY: e.kind().as_str() });
        if let (Some(data), Some(extra)) = (data.as_object_mut(), extra.as_object()) {
            data.extend(extra.clone());
        }
        Some(data)
    };
    let message = toolhost_text::line(&e.to_string(), MESSAGE_CHARS);
    match e {
        CallError::NotFound { suggestions, .. } => Some(McpError::invalid_params(
            message,
            data(json!({ "suggestions": suggestions.iter().take(5).collect::<Vec<_>>() })),
        )),
        _ if older
            && matches!(
                e.kind(),
                ErrorKind::InvalidArguments | ErrorKind::ToolInvalidArguments
            ) =>
        {
            Some(McpError::invalid_params(message, data(json!({}))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_runtime::error::ArgumentIssue;

    fn invalid() -> CallError {
        CallError::InvalidArguments {
            tool: "calculate".into(),
            issues: vec![ArgumentIssue {
                path: "/expression".into(),
                message: "\"expression\" is a required property".into(),
            }],
        }
    }

    fn unknown() -> CallError {
        CallError::NotFound {
            name: "calculat".into(),
            suggestions: vec!["calculate".into()],
            available: vec!["calculate".into()],
            unavailable: None,
        }
    }

    #[test]
    fn an_unknown_tool_is_a_protocol_error_in_every_revision() {
        for v in ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .map(Some)
            .chain([None])
        {
            let e = protocol_error(&unknown(), v).expect("a JSON-RPC error");
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS, "{v:?}");
            assert!(
                e.message.contains("did you mean `calculate`"),
                "{}",
                e.message
            );
        }
    }

    #[test]
    fn invalid_arguments_are_a_protocol_error_before_2025_11_25_and_a_result_from_it() {
        for v in [
            ProtocolVersion::V_2024_11_05,
            ProtocolVersion::V_2025_03_26,
            ProtocolVersion::V_2025_06_18,
        ] {
            let e = protocol_error(&invalid(), Some(&v)).expect("a JSON-RPC error");
            assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        }
        assert!(
            protocol_error(&invalid(), None).is_some(),
            "unknown: 2025-03-26"
        );
        for v in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
            assert!(protocol_error(&invalid(), Some(&v)).is_none(), "{v}");
        }
    }
}
