//! The adapter for what a tool source offers besides its tools: reading
//! one of its resources or listing one of its directories, getting one of
//! its prompts (an MCP server's `resources/read`,
//! `resources/directory/read` and `prompts/get`). Each is a call through the very
//! steps of a tool call (`mod.rs`): only the lookup differs. The access is
//! aimed at an unlisted tool of the source, [`READ_RESOURCE`] or
//! [`GET_PROMPT`] (`toolhost_policy`'s `access.rs`), whose arguments hold
//! the URI or the prompt's name, so that the policy (`resource = "..."`,
//! `prompt = "..."` rules), the before- and after-hooks, approvals, the
//! source's limits, the call's span and the live feed treat it as a call
//! of that name from that source. The source's [`ToolSource::call`]
//! receives it under that name.
//!
//! [`READ_RESOURCE`]: toolhost_policy::READ_RESOURCE
//! [`GET_PROMPT`]: toolhost_policy::GET_PROMPT
//! [`ToolSource::call`]: crate::ToolSource::call

use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value, json};
use toolhost_policy::{GET_PROMPT, NAME_ARG, READ_RESOURCE, URI_ARG};

use crate::api::types::Annotations;
use crate::cache_settings::CacheRule;
use crate::plugin::Tool;

/// What a caller reads from a tool source: a resource or a prompt.
///
/// ```
/// use toolhost_runtime::Access;
/// let read = Access::Resource { uri: "test://static-text".into() };
/// assert_eq!(read.args()["uri"], "test://static-text");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// Reading the resource at `uri`.
    Resource {
        /// The resource's URI.
        uri: String,
    },
    /// Listing the directory at `uri` (an MCP server's
    /// `resources/directory/read`): judged as a read of `uri`, and aimed
    /// at the same unlisted tool with [`Access::DIRECTORY_ARG`] set.
    Directory {
        /// The directory's URI.
        uri: String,
    },
    /// Getting the prompt `name` (as the caller sees it, with the source's
    /// prefix) filled in with `arguments`.
    Prompt {
        /// The prompt's name as listed to the caller.
        name: String,
        /// The values of its arguments.
        arguments: Map<String, Value>,
    },
}

impl Access {
    /// The argument that makes a read a directory's listing (`true`).
    ///
    /// ```
    /// use toolhost_runtime::Access;
    /// let list = Access::Directory { uri: "skill://pdf/".into() };
    /// assert_eq!(list.args()[Access::DIRECTORY_ARG], true);
    /// assert_eq!(list.tool(), Access::Resource { uri: "x".into() }.tool());
    /// ```
    pub const DIRECTORY_ARG: &'static str = "directory";

    /// The name it is judged under ([`READ_RESOURCE`] or [`GET_PROMPT`]).
    pub fn tool(&self) -> &'static str {
        match self {
            Access::Resource { .. } | Access::Directory { .. } => READ_RESOURCE,
            Access::Prompt { .. } => GET_PROMPT,
        }
    }

    /// Its arguments, as the policy, the hooks and the source see them:
    /// `{"uri": ...}` or `{"name": ..., "arguments": {...}}`.
    pub fn args(&self) -> Value {
        match self {
            Access::Resource { uri } => json!({ URI_ARG: uri }),
            Access::Directory { uri } => json!({ URI_ARG: uri, Access::DIRECTORY_ARG: true }),
            Access::Prompt { name, arguments } => {
                json!({ NAME_ARG: name, "arguments": arguments })
            }
        }
    }
}

/// The unlisted tools an access is aimed at, their schemas compiled once.
static ACCESS_TOOLS: LazyLock<[Tool; 2]> = LazyLock::new(|| {
    [
        access_tool(
            READ_RESOURCE,
            "Reads one resource of the source.",
            json!({
                "type": "object",
                "properties": {
                    URI_ARG: { "type": "string" },
                    Access::DIRECTORY_ARG: { "type": "boolean" },
                },
                "required": [URI_ARG],
            }),
        ),
        access_tool(
            GET_PROMPT,
            "Gets one prompt of the source.",
            json!({
                "type": "object",
                "properties": {
                    NAME_ARG: { "type": "string" },
                    "arguments": { "type": "object", "additionalProperties": { "type": "string" } },
                },
                "required": [NAME_ARG],
            }),
        ),
    ]
});

fn access_tool(name: &str, description: &str, schema: Value) -> Tool {
    // A fixed schema of ours: it compiles.
    #[allow(clippy::expect_used)]
    let validator = jsonschema::validator_for(&schema).expect("the access schema compiles");
    Tool {
        name: name.to_owned(),
        description: description.to_owned(),
        schema: Arc::new(schema),
        validator,
        // Reads: nothing to clear from the result cache after one; never
        // cached themselves (no cache rule).
        annotations: Annotations {
            read_only: true,
            ..Annotations::default()
        },
        output_schema: None,
        output_validator: None,
        remote_name: None,
        cache: CacheRule::default(),
    }
}

/// The unlisted tool `access` is aimed at.
pub(crate) fn tool_of(access: &Access) -> &'static Tool {
    let [read, get] = &*ACCESS_TOOLS;
    match access {
        Access::Resource { .. } | Access::Directory { .. } => read,
        Access::Prompt { .. } => get,
    }
}
