//! Calls a plugin makes to other tools (contract 0.4.0's `tools`
//! import): what the operator lets a plugin call ([`CallGrant`],
//! [`CallBounds`]), and the seam through which the sandbox reaches them
//! ([`PluginCalls`]).
//!
//! The sandbox holds a `Box<dyn PluginCalls>` for a call of a plugin that
//! may call tools, and knows nothing of the call pipeline behind it:
//! `call/nested.rs` implements it, running each call through every step
//! as a call of whoever called the plugin. (The shape of wasmtime-wasi's
//! `WasiView`: declared low, implemented by the layer above.)

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use toolhost_patterns::{GlobError, NameGlob};

use crate::error::{CallError, ToolErrorKind};
use crate::tool::{ToolInfo, ToolResult};

/// Bounds of the calls one call of a plugin makes to other tools
/// (`[plugins.NAME.call-bounds]`); past any of them a call is refused
/// with `limit`. The plugin's own limits (its `timeout-ms` above all)
/// still hold around them.
///
/// ```
/// let bounds: toolhost_runtime::grants::CallBounds =
///     toml::from_str("max-calls = 10\nmax-time-ms = 5000").unwrap();
/// assert_eq!(bounds.max_calls, 10);
/// assert_eq!(bounds.max_result_bytes, 4 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct CallBounds {
    /// How many calls (default 64).
    pub max_calls: u32,
    /// Their total time, in milliseconds (default 30,000).
    pub max_time_ms: u64,
    /// The total size of their results (output, structured result,
    /// content), in bytes (default 4 MiB).
    pub max_result_bytes: u64,
}

impl Default for CallBounds {
    fn default() -> Self {
        CallBounds {
            max_calls: 64,
            max_time_ms: 30_000,
            max_result_bytes: 4 * 1024 * 1024,
        }
    }
}

impl CallBounds {
    pub(crate) fn is_default(&self) -> bool {
        *self == CallBounds::default()
    }
}

/// What a plugin may call: globs on tool names, and the bounds.
#[derive(Debug)]
pub(crate) struct CallGrant {
    globs: Vec<NameGlob>,
    pub(crate) bounds: CallBounds,
}

impl CallGrant {
    /// The grant of a plugin's settings (`call-tools`, `call-bounds`), or
    /// `None` when it names no tool.
    pub(crate) fn new(
        call_tools: &[String],
        bounds: CallBounds,
    ) -> Result<Option<CallGrant>, GlobError> {
        if call_tools.is_empty() {
            return Ok(None);
        }
        let globs = call_tools
            .iter()
            .map(|g| NameGlob::new(g))
            .collect::<Result<_, _>>()?;
        Ok(Some(CallGrant { globs, bounds }))
    }

    /// Whether it names `tool`.
    pub(crate) fn allows(&self, tool: &str) -> bool {
        self.globs.iter().any(|g| g.is_match(tool))
    }

    /// Its globs as written.
    pub(crate) fn patterns(&self) -> Vec<String> {
        self.globs.iter().map(|g| g.as_str().to_owned()).collect()
    }

    /// Its globs, for messages.
    pub(crate) fn globs(&self) -> String {
        self.patterns().join(", ")
    }
}

/// Why a call from a plugin failed; the plugin reads the message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NestedError {
    /// Not in the grant, or a tool that calls tools itself.
    #[error("{0}")]
    NotGranted(String),
    /// No tool of that name is visible to the caller.
    #[error("{0}")]
    NotFound(String),
    /// Arguments that are not JSON or do not match the schema.
    #[error("{0}")]
    InvalidArguments(String),
    /// The policy, a hook or a person refused it.
    #[error("{0}")]
    Denied(String),
    /// The tool failed or was stopped.
    #[error("{0}")]
    Failed(String),
    /// A bound of [`CallBounds`].
    #[error("{0}")]
    Limit(String),
}

impl From<CallError> for NestedError {
    fn from(e: CallError) -> Self {
        let message = e.to_string();
        match e {
            CallError::NotFound { .. } => NestedError::NotFound(message),
            CallError::InvalidArguments { .. }
            | CallError::Tool {
                kind: ToolErrorKind::InvalidArguments,
                ..
            } => NestedError::InvalidArguments(message),
            CallError::Denied { .. } | CallError::Blocked { .. } => NestedError::Denied(message),
            _ => NestedError::Failed(message),
        }
    }
}

/// What a plugin's call may call, as the sandbox's `tools` import asks
/// it: implemented by `call/nested.rs` over the call pipeline.
pub(crate) trait PluginCalls: Send {
    /// The tools the plugin may call now, in catalog order.
    fn tools(&self) -> Vec<ToolInfo>;
    /// Of [`tools`](Self::tools), the `limit` that best match `query`.
    fn search(&self, query: &str, limit: u32) -> Vec<ToolInfo>;
    /// Calls `tool` with `args` (JSON text).
    fn call<'a>(
        &'a mut self,
        tool: &'a str,
        args: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<ToolResult, NestedError>> + Send + 'a>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::PluginSettings;

    fn grant_of(settings: &PluginSettings) -> Result<Option<CallGrant>, GlobError> {
        CallGrant::new(&settings.call_tools, settings.call_bounds)
    }

    #[test]
    fn a_grant_is_read_from_the_plugins_settings_and_matches_its_globs() {
        let settings: PluginSettings = toml::from_str(
            "call-tools = [\"fs_*\", \"calculate\"]\n[call-bounds]\nmax-calls = 3\n",
        )
        .unwrap();
        let grant = grant_of(&settings).unwrap().unwrap();
        assert!(grant.allows("fs_read") && grant.allows("calculate"));
        assert!(!grant.allows("run_code") && !grant.allows("calculated"));
        assert_eq!(grant.bounds.max_calls, 3);
        assert_eq!(grant.bounds.max_time_ms, CallBounds::default().max_time_ms);
        assert!(
            grant_of(&PluginSettings::default()).unwrap().is_none(),
            "no grant by default"
        );
        let bad: PluginSettings = toml::from_str("call-tools = [\"[\"]").unwrap();
        assert!(grant_of(&bad).is_err());
        assert!(toml::from_str::<PluginSettings>("[call-bounds]\nmax-callz = 3").is_err());
    }
}
