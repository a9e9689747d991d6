//! A tool as the model and the user see it ([`ToolInfo`]), and what a
//! call of it gives back ([`ToolResult`]): the two shapes every layer
//! shares (the registry lists the first, the call pipeline makes the
//! second, a plugin's own calls to tools see both).

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::api::types::Annotations;

/// A tool as the model and the user see it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    /// The name to call it by (the declared name, or `plugin__tool` after a clash).
    pub name: String,
    /// The name the plugin declared.
    pub declared_name: String,
    /// The plugin that provides it.
    pub plugin: String,
    /// That plugin's version.
    pub plugin_version: semver::Version,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (shared with the runtime: cheap to clone).
    pub input_schema: Arc<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
    /// JSON Schema of its structured result ([`crate::ToolResult::structured`]),
    /// when it declares one (plugins built against `toolhost:plugin@0.2.0` or later).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Arc<Value>>,
}

/// The result of a successful call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    /// Concise text for the model.
    pub output: String,
    /// Structured data for user interfaces and logs (never for the model).
    pub details: Option<Value>,
    /// The structured result (MCP's `structuredContent`), from plugins built
    /// against `toolhost:plugin@0.2.0` or later; it matches the tool's output
    /// schema ([`ToolInfo::output_schema`](crate::ToolInfo::output_schema))
    /// when the tool declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// The result as content blocks (MCP's `content`: text, images, audio,
    /// resource links, embedded resources), as the plugin (contract 0.3.0
    /// or later) or the tool source sent them. Empty: the result is
    /// `output` alone, one text block. When it is not empty, an MCP client
    /// receives these blocks, and `output` holds the text a model reads
    /// (the text of these blocks, for a tool source; what the plugin wrote,
    /// for a plugin): the agent loop gives the model `output` and, of the
    /// other blocks, the images and a stand-in line for each of the rest.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<toolhost_content::Content>,
    /// The result's own `_meta`, from a tool source (an MCP server's
    /// result, passed on as it was sent); `None` for a plugin's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta: Option<toolhost_content::JsonObject>,
    /// The tool's exposed name.
    pub tool: String,
    /// The plugin that ran it.
    pub plugin: String,
    /// That plugin's version.
    pub plugin_version: semver::Version,
    /// Wall-clock time of the call, including setting up the sandbox (for
    /// a result from the cache, the time it took to find it).
    #[serde(with = "duration_micros")]
    pub duration: Duration,
    /// Whether the result came from the result cache instead of running the
    /// tool (see [`CacheOptions`](crate::cache::CacheOptions)); the after-hooks and
    /// result approval ran on it all the same.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
}

mod duration_micros {
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}
