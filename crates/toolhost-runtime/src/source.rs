//! Tool sources other than plugin files: an MCP server (`toolhost-mcp`'s
//! client), or anything an embedder writes, behind one trait,
//! [`ToolSource`]. A source's tools join the registry beside the plugins'
//! and every call to one goes through the same steps (`call/`): lookup,
//! validation, policy, hooks, approval, then the source instead of a
//! sandbox (under the source's `timeout-ms`, `max-instances` and
//! `max-output-bytes`), then after-hooks and result approval.
//!
//! A source is listed as a plugin of kind `source` named after it
//! (`source_plugin.rs`), so policy rules match its tools by name (`tool =
//! "git__*"`) and by source (`plugin = "git"`, or `server = "git"` in a
//! policy file), and hooks, events and history see its calls like any
//! other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::api::types::Annotations;

/// A boxed future, as [`ToolSource`] returns them.
pub type SourceFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Receives a source's progress reports for one call: `(message, fraction)`.
pub type SourceProgress = Arc<dyn Fn(&str, Option<f32>) + Send + Sync>;

/// Tools that come from somewhere other than a plugin file.
///
/// ```
/// use std::sync::Arc;
/// use toolhost_runtime::ToolSource;
/// use toolhost_runtime::source::{
///     SourceCall, SourceError, SourceFuture, SourceOutcome, SourceState, SourceStatus, SourceTool,
/// };
///
/// /// One tool, answered in the host's own process.
/// struct Echo(tokio::sync::watch::Sender<u64>);
///
/// impl ToolSource for Echo {
///     fn name(&self) -> &str {
///         "echo"
///     }
///     fn status(&self) -> SourceStatus {
///         SourceStatus::new("native", "in process", SourceState::Ready)
///     }
///     fn tools(&self) -> Arc<[SourceTool]> {
///         Arc::new([SourceTool::new("say", "Repeats `text`.", serde_json::json!({"type": "object"}))])
///     }
///     fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
///         self.0.subscribe()
///     }
///     fn call<'a>(&'a self, call: SourceCall<'a>) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
///         Box::pin(async move { Ok(SourceOutcome::text(call.args["text"].to_string())) })
///     }
/// }
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = toolhost_runtime::Runtime::builder()
///     .source(Arc::new(Echo(tokio::sync::watch::channel(0).0)))
///     .build()
///     .await?;
/// assert_eq!(runtime.tools()[0].name, "echo__say");
/// # Ok(()) }
/// ```
pub trait ToolSource: std::any::Any + Send + Sync + 'static {
    /// Its name: the plugin name its tools are listed under. It must match
    /// `^[a-zA-Z0-9_-]{1,64}$`.
    fn name(&self) -> &str;

    /// What every tool name of this source starts with (`NAME__` by default;
    /// empty for none). A name another source already holds still goes to
    /// that source, and this one's tool is exposed as `NAME__tool`.
    fn prefix(&self) -> String {
        format!("{}__", self.name())
    }

    /// What it is and how it is doing, for `host plugins`.
    fn status(&self) -> SourceStatus;

    /// A digest of its own settings that change what answers a call (an
    /// MCP server's environment, headers and process sandbox), for the
    /// digest its saved approvals are bound to: when it changes, an
    /// approval is asked again. The kind, location, reported server and
    /// tool definitions count already. `None` by default.
    fn settings_digest(&self) -> Option<String> {
        None
    }

    /// Its tools now (none while it is not connected).
    fn tools(&self) -> Arc<[SourceTool]>;

    /// Changes each time [`tools`](Self::tools) or [`status`](Self::status)
    /// does: the runtime rebuilds the registry then.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Resolves when the runtime may list the source's tools at start-up
    /// (a source that connects at start-up resolves once it is connected or
    /// has given up, within its own time limit). At once by default.
    fn ready(&self) -> SourceFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Whether this source is built into the host (the `read_var` source):
    /// only a built-in source may hold a name reserved for one
    /// ([`RESERVED_TOOL_NAMES`](crate::contract::RESERVED_TOOL_NAMES)). `false` by
    /// default.
    fn is_builtin(&self) -> bool {
        false
    }

    /// Runs one call. The runtime bounds it by the source's `timeout-ms`;
    /// dropping the future must cancel the call. Besides its listed tools,
    /// a source that offers resources or prompts receives their reads
    /// here ([`Runtime::access`](crate::Runtime::access)), as calls of
    /// [`READ_RESOURCE`](toolhost_policy::READ_RESOURCE) (`{"uri"}`) and
    /// [`GET_PROMPT`](toolhost_policy::GET_PROMPT) (`{"name",
    /// "arguments"}`, the name as listed, with the prefix); one that offers
    /// none answers them with an error.
    fn call<'a>(
        &'a self,
        call: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>>;
}

/// A tool as a source describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTool {
    /// The source's own name for it (any text; the runtime makes the name
    /// the model sees from the source's prefix and this).
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, if it declares one.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
}

impl SourceTool {
    /// A tool with no output schema and no annotations.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input: Value) -> Self {
        SourceTool {
            name: name.into(),
            description: description.into(),
            input_schema: input,
            output_schema: None,
            annotations: Annotations::default(),
        }
    }
}

/// One call, as a source receives it (its arguments validated, admitted by
/// the policy and the hooks).
#[non_exhaustive]
pub struct SourceCall<'a> {
    /// The source's own name for the tool ([`SourceTool::name`]).
    pub tool: &'a str,
    /// The arguments.
    pub args: &'a Value,
    /// The call id.
    pub call_id: &'a str,
    /// The session, if the caller named one.
    pub session_id: Option<&'a str>,
    /// Where progress reports go, when the caller listens.
    pub progress: Option<SourceProgress>,
    /// The largest result the runtime will accept, in bytes; a source may
    /// stop reading a larger one.
    pub max_output_bytes: usize,
    /// What the caller attached to the call
    /// ([`CallContext::extension`](crate::CallContext::extension)).
    pub extensions: &'a http::Extensions,
    /// Who answers this call's questions (the call's approver, else the
    /// runtime's): where a question the source's server asks the user
    /// during the call goes ([`Approver::answer_form`](crate::Approver::answer_form)).
    pub approver: Option<std::sync::Arc<dyn crate::Approver>>,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceOutcome {
    /// A result.
    Ok {
        /// Text for the model.
        output: String,
        /// Data for user interfaces and logs.
        details: Option<Value>,
        /// The structured result.
        structured: Option<Value>,
        /// The result as content blocks, as the source sent them (empty:
        /// `output` alone). When not empty, `output` should be their text
        /// ([`toolhost_content::text_of`]).
        content: Vec<toolhost_content::Content>,
        /// The result's own `_meta`, as the source sent it.
        meta: Option<toolhost_content::JsonObject>,
    },
    /// The tool refused its arguments.
    InvalidArguments(String),
    /// The tool ran and failed.
    Failed(String),
}

impl SourceOutcome {
    /// A result that is only text.
    pub fn text(output: impl Into<String>) -> Self {
        SourceOutcome::Ok {
            output: output.into(),
            details: None,
            structured: None,
            content: Vec::new(),
            meta: None,
        }
    }
}

/// Why a source could not run a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SourceError {
    /// It is not connected (not started, exited, unreachable), or it went
    /// away during the call.
    #[error("the tool source is unavailable: {0}")]
    Unavailable(String),
    /// It answered something that is not a valid reply.
    #[error("the tool source broke the protocol: {0}")]
    Protocol(String),
    /// Its reply was larger than `max-output-bytes`.
    #[error("the tool source's reply is over the limit of {limit} bytes (`max-output-bytes`)")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
}

/// What a source is and how it is doing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceStatus {
    /// What kind of source (e.g. `mcp-stdio`, `mcp-http`).
    pub kind: String,
    /// Where it is (a command line, a URL).
    pub location: String,
    /// Its state now.
    pub state: SourceState,
    /// What it says it is (e.g. an MCP server's name and version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// How it is signed in to, if it is (e.g. an MCP server's OAuth
    /// client and scopes; never a token).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sign_in: Option<String>,
}

impl SourceStatus {
    /// A status with no server description.
    pub fn new(kind: impl Into<String>, location: impl Into<String>, state: SourceState) -> Self {
        SourceStatus {
            kind: kind.into(),
            location: location.into(),
            state,
            server: None,
            sign_in: None,
        }
    }
}

/// How a source is doing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum SourceState {
    /// Not connected yet (or connecting).
    Starting,
    /// Connected; its tools are listed.
    Ready,
    /// Not connected, and why; it is retried after `retry_in` if set.
    Down {
        /// Why.
        reason: String,
        /// When the next attempt is.
        #[serde(skip_serializing_if = "Option::is_none", with = "opt_millis")]
        retry_in: Option<Duration>,
    },
}

impl std::fmt::Display for SourceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceState::Starting => f.write_str("starting"),
            SourceState::Ready => f.write_str("ready"),
            SourceState::Down {
                reason,
                retry_in: Some(wait),
            } => write!(f, "down ({reason}; retrying in {} ms)", wait.as_millis()),
            SourceState::Down { reason, .. } => write!(f, "down ({reason})"),
        }
    }
}

mod opt_millis {
    // serde's `with` passes the field by reference.
    #[allow(clippy::ref_option)]
    pub fn serialize<S: serde::Serializer>(
        d: &Option<std::time::Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }
}
