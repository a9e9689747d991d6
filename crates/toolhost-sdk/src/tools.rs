//! Calling other tools through the host (`toolhost:plugin@0.4.0`'s `tools`
//! import), for a plugin the operator lets call them (`call-tools = [...]`
//! in its settings).
//!
//! Each call goes through the host's whole gate as a call of whoever called
//! this plugin: it reaches only what that caller could call directly, and
//! of that only what the grant names. Without a grant every call fails with
//! [`CallError::NotGranted`] and [`list`] is empty.
//!
//! ```no_run
//! use toolhost_sdk::tools;
//!
//! # fn demo() -> Result<(), tools::CallError> {
//! for tool in tools::list() {
//!     println!("{}: {}", tool.name, tool.description);
//! }
//! let result = tools::call("calculate", &serde_json::json!({"expression": "6*7"}))?;
//! assert_eq!(result.output, "42");
//! # Ok(()) }
//! ```
//!
//! Outside the host (a native build, for unit tests) there are no tools:
//! [`list`] is empty and [`call`] fails with `NotGranted`.

use serde_json::Value;

/// A tool this plugin may call, as it is listed to its caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The name to call it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, when it declares one.
    pub output_schema: Option<Value>,
    /// Whether it only reads.
    pub read_only: bool,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutput {
    /// The text a model would read.
    pub output: String,
    /// Its structured result, when it has one.
    pub structured: Option<Value>,
    /// Its details for user interfaces, when it has them.
    pub details: Option<Value>,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// This plugin may not call tools, or not this one.
    NotGranted(String),
    /// No tool of that name is visible to the caller.
    NotFound(String),
    /// The arguments do not match the tool's schema.
    InvalidArguments(String),
    /// The policy, a hook or a person refused the call.
    Denied(String),
    /// The tool failed or was stopped.
    Failed(String),
    /// The calls of this call reached one of their bounds.
    Limit(String),
}

impl CallError {
    /// Its kind, as one word: `not-granted`, `not-found`,
    /// `invalid-arguments`, `denied`, `failed` or `limit`.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::NotGranted(_) => "not-granted",
            CallError::NotFound(_) => "not-found",
            CallError::InvalidArguments(_) => "invalid-arguments",
            CallError::Denied(_) => "denied",
            CallError::Failed(_) => "failed",
            CallError::Limit(_) => "limit",
        }
    }

    /// The host's message.
    pub fn message(&self) -> &str {
        match self {
            CallError::NotGranted(m)
            | CallError::NotFound(m)
            | CallError::InvalidArguments(m)
            | CallError::Denied(m)
            | CallError::Failed(m)
            | CallError::Limit(m) => m,
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CallError {}

/// The tools this plugin may call for its current caller.
pub fn list() -> Vec<ToolInfo> {
    imp::list()
}

/// Of [`list`], the `limit` best matches of `query`, best first.
pub fn search(query: &str, limit: u32) -> Vec<ToolInfo> {
    imp::search(query, limit)
}

/// Calls `tool` with `args` (a JSON object) and waits for its result.
pub fn call(tool: &str, args: &Value) -> Result<CallOutput, CallError> {
    imp::call(tool, &args.to_string())
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::{CallError, CallOutput, ToolInfo};
    use crate::bindings::toolhost::plugin::tools as wit;
    use crate::bindings::toolhost::plugin::types::ToolSpec;

    fn info(spec: ToolSpec) -> ToolInfo {
        ToolInfo {
            input_schema: serde_json::from_str(&spec.input_schema).unwrap_or_default(),
            output_schema: spec
                .output_schema
                .and_then(|s| serde_json::from_str(&s).ok()),
            read_only: spec.annotations.read_only,
            name: spec.name,
            description: spec.description,
        }
    }

    pub(super) fn list() -> Vec<ToolInfo> {
        wit::list_tools().into_iter().map(info).collect()
    }

    pub(super) fn search(query: &str, limit: u32) -> Vec<ToolInfo> {
        wit::search_tools(query, limit)
            .into_iter()
            .map(info)
            .collect()
    }

    pub(super) fn call(tool: &str, args: &str) -> Result<CallOutput, CallError> {
        match wit::call_tool(tool, args) {
            Ok(out) => Ok(CallOutput {
                output: out.output,
                structured: out.structured.and_then(|s| serde_json::from_str(&s).ok()),
                details: out.details.and_then(|s| serde_json::from_str(&s).ok()),
            }),
            Err(e) => Err(match e {
                wit::CallError::NotGranted(m) => CallError::NotGranted(m),
                wit::CallError::NotFound(m) => CallError::NotFound(m),
                wit::CallError::InvalidArguments(m) => CallError::InvalidArguments(m),
                wit::CallError::Denied(m) => CallError::Denied(m),
                wit::CallError::Failed(m) => CallError::Failed(m),
                wit::CallError::Limit(m) => CallError::Limit(m),
            }),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::{CallError, CallOutput, ToolInfo};

    pub(super) fn list() -> Vec<ToolInfo> {
        Vec::new()
    }

    pub(super) fn search(_query: &str, _limit: u32) -> Vec<ToolInfo> {
        Vec::new()
    }

    pub(super) fn call(tool: &str, _args: &str) -> Result<CallOutput, CallError> {
        Err(CallError::NotGranted(format!(
            "`{tool}`: there are no tools to call outside the host"
        )))
    }
}
