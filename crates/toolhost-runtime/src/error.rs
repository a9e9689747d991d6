//! Error types of the runtime: one enum for loading, one for calling.

use std::path::PathBuf;
use std::time::Duration;

pub use toolhost_content::ErrorKind;

/// A host-level failure of the runtime itself (not of one plugin).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The wasmtime engine could not be configured (or its epoch ticker
    /// thread could not start).
    #[error("cannot configure the WebAssembly engine")]
    Engine(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A plugin directory (or a single plugin file given in its place)
    /// could not be read. The cause is the error's `source`.
    #[error("cannot read the plugin path {path}")]
    PluginDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The plugin directories (or `path`, one of them) could not be
    /// watched for changes.
    #[error("cannot watch the plugin directories{}", path.as_ref().map(|p| format!(" ({})", p.display())).unwrap_or_default())]
    Watch {
        /// The directory, when one failed.
        path: Option<PathBuf>,
        /// Why.
        #[source]
        source: notify::Error,
    },
    /// The hook configuration is invalid.
    #[error("invalid hook configuration")]
    Hooks(#[from] toolhost_hooks::ConfigError),
    /// The lock file cannot be read.
    #[error(transparent)]
    Lock(#[from] crate::lockfile::LockError),
    /// Two tool sources have one name (policy rules, grants and listings
    /// name a source by it, so neither may shadow the other).
    #[error("two tool sources are named `{0}`: give each its own name")]
    DuplicateSource(String),
}

/// Why one plugin file could not be loaded. The other plugins load regardless.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read. The cause is shared, so that a load
    /// report can be cloned with it: `source()` is the
    /// `Arc<std::io::Error>`.
    #[error("cannot read the file: {0}")]
    Io(#[source] std::sync::Arc<std::io::Error>),
    /// The task that loads the file ended without a result (it panicked or
    /// was cancelled); the other plugins load regardless.
    #[error("the load task failed: {0}")]
    Task(String),
    /// The manifest beside the component is malformed.
    #[error("invalid manifest {path}: {message}")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, with line and column where known.
        message: String,
    },
    /// The file is not a WebAssembly component (garbage, or a core module).
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    /// The component does not export a toolhost tool interface.
    #[error("not a toolhost tool plugin: {0}")]
    NotAPlugin(String),
    /// The component was built against a contract version this host has no bindings for.
    #[error(
        "built against toolhost:plugin@{found}, which this host does not support (supported: {supported})"
    )]
    UnsupportedVersion {
        /// The version the component was built against.
        found: String,
        /// The versions this host supports.
        supported: String,
    },
    /// A grant in the host's settings for this plugin cannot be applied.
    #[error("cannot apply the host's grants: {0}")]
    Grant(String),
    /// The component imports something the host does not provide.
    #[error("cannot link: {0}")]
    Link(String),
    /// `describe()` failed (trapped, timed out, ...).
    #[error("describe() failed: {0}")]
    Describe(String),
    /// A tool spec is invalid (bad name, schema that does not compile, duplicate).
    #[error("tool `{tool}`: {message}")]
    InvalidTool {
        /// The tool's name as the plugin declared it.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

/// One problem with a call's arguments, located by a JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArgumentIssue {
    /// JSON pointer to the offending value (`""` is the whole arguments object).
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for ArgumentIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        write!(f, "{path}: {}", self.message)
    }
}

fn busy_message(
    waiting: usize,
    max_queued: usize,
    instance_limit: Option<&(String, usize)>,
) -> String {
    let full = match instance_limit {
        Some((plugin, n)) => format!(
            "`{plugin}` runs its maximum of {n} instances (limit `max-instances` = {n}) and "
        ),
        None => String::new(),
    };
    format!(
        "the host is busy: {full}{waiting} calls are already waiting (limit `max-queued-calls` = {max_queued}); retry later"
    )
}

/// A sandbox fault: the plugin misbehaved or hit a limit. The host keeps running.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SandboxFault {
    /// The call ran past its wall-clock limit.
    #[error("timed out after {limit:?} (limit `timeout-ms` = {} ms)", limit.as_millis())]
    Timeout {
        /// The limit that was hit.
        limit: Duration,
    },
    /// The plugin tried to grow its memory past its limit.
    #[error("memory limit exceeded: tried to grow to {requested} bytes (limit `memory-mb` = {} MiB)", limit / (1024 * 1024))]
    MemoryLimit {
        /// The limit in bytes.
        limit: u64,
        /// The size the plugin asked for.
        requested: u64,
    },
    /// The plugin tried to grow a table past its limit (at instantiation, for
    /// a table declared larger than the limit, or with `table.grow`).
    #[error(
        "table limit exceeded: tried to grow a table to {requested} elements (limit `table-elements` = {limit})"
    )]
    TableLimit {
        /// The limit in elements.
        limit: usize,
        /// The size the plugin asked for.
        requested: usize,
    },
    /// The plugin recursed past its stack limit.
    #[error("stack overflow (wasm stack limit = {limit} bytes, the engine's `max_wasm_stack`)")]
    StackOverflow {
        /// The stack limit in bytes.
        limit: usize,
    },
    /// The plugin panicked.
    #[error("plugin panicked: {message}")]
    Panic {
        /// The panic message from the plugin's stderr.
        message: String,
    },
    /// The plugin trapped (unreachable, out-of-bounds access, ...).
    #[error("plugin trapped: {message}")]
    Trap {
        /// The trap's description.
        message: String,
    },
    /// The plugin returned more than the host accepts.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes (`max-output-bytes`)")]
    OutputTooLarge {
        /// "output", "details", "structured" or "_meta" (a tool source's).
        what: &'static str,
        /// The size returned.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The plugin returned `details` that are not valid JSON.
    #[error("plugin returned details that are not valid JSON: {message}")]
    InvalidDetails {
        /// The JSON parser's message.
        message: String,
    },
    /// The plugin returned `structured` content that is not valid JSON.
    #[error("plugin returned structured content that is not valid JSON: {message}")]
    InvalidStructured {
        /// The JSON parser's message.
        message: String,
    },
    /// The tool source (an MCP server, say) could not run the call.
    #[error("{0}")]
    Source(crate::source::SourceError),
    /// The result's content blocks are refused: too many, too large (as
    /// MCP JSON, against `max-output-bytes`), or a block that is not what
    /// it says it is.
    #[error(
        "the result's content is refused: {0} (`max-output-bytes` bounds each block and all of them)"
    )]
    Content(toolhost_content::ContentError),
    /// The plugin's structured content does not match the tool's output
    /// schema (or is missing although the tool declares one).
    #[error("plugin returned structured content that does not match its output schema at {}: {message}", pointer(.path))]
    StructuredMismatch {
        /// JSON pointer to the first offending value (`""` is the whole content).
        path: String,
        /// What is wrong with it.
        message: String,
    },
}

/// Why a tool call did not produce a result. Every case has a message a model can act on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// No tool has this name.
    #[error("{}", not_found_message(.name, .suggestions, .available, .unavailable.as_deref()))]
    NotFound {
        /// The name that was asked for.
        name: String,
        /// The closest available names, best first.
        suggestions: Vec<String>,
        /// Every available tool name.
        available: Vec<String>,
        /// Why the tool source whose prefix the name has lists no tools
        /// now (an MCP server that is down, or needs a sign-in).
        unavailable: Option<String>,
    },
    /// The arguments are not valid JSON or do not match the tool's schema.
    #[error("invalid arguments for `{tool}`: {}", join_issues(.issues))]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// Every problem, each with its JSON pointer.
        issues: Vec<ArgumentIssue>,
    },
    /// The tool ran and reported an error: it rejected its arguments
    /// (`invalid-arguments`), or it failed.
    #[error("`{tool}` {}: {message}", match .kind {
        ToolErrorKind::InvalidArguments => "rejected its arguments",
        ToolErrorKind::Failed => "failed",
    })]
    Tool {
        /// The tool.
        tool: String,
        /// `invalid-arguments` (the model should change them) or `failed`.
        kind: ToolErrorKind,
        /// The tool's message.
        message: String,
    },
    /// The plugin faulted or hit a limit.
    #[error("`{tool}` ({plugin}) was stopped: {fault}")]
    Sandbox {
        /// The tool.
        tool: String,
        /// `name@version` of the plugin.
        plugin: String,
        /// What happened.
        fault: SandboxFault,
    },
    /// Too many calls are waiting for a sandbox slot.
    #[error("{}", busy_message(*.waiting, *.max_queued, .instance_limit.as_ref()))]
    Busy {
        /// How many calls were waiting.
        waiting: usize,
        /// The queue limit (`max-queued-calls`).
        max_queued: usize,
        /// When the plugin's own limit was the one that was full: its
        /// `name@version` and its `max-instances`.
        instance_limit: Option<(String, usize)>,
    },
    /// The host could not set up the sandbox (not the plugin's fault).
    #[error("host error while calling `{tool}`: {message}")]
    Host {
        /// The tool.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// The policy or the user did not allow the call.
    #[error("permission denied for `{tool}`: {reason}")]
    Denied {
        /// The tool.
        tool: String,
        /// Why: the rule's reason, or the user's message.
        reason: String,
    },
    /// A before-hook blocked the call (or failed, and fails closed).
    #[error("`{tool}` was blocked by hook `{hook}`: {reason}")]
    Blocked {
        /// The tool.
        tool: String,
        /// The hook that blocked.
        hook: String,
        /// Why.
        reason: String,
    },
    /// An after-hook turned the result into an error.
    #[error("`{tool}`: {message}")]
    HookFailed {
        /// The tool.
        tool: String,
        /// The hook's message.
        message: String,
    },
    /// The user denied the call and stopped the run (an approval's
    /// [`DenyAndStop`](crate::permission::CallApproval::DenyAndStop)); kind
    /// `aborted`.
    #[error("`{tool}` was not run, and the run was stopped: {reason}")]
    Stopped {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The user rejected the result; the model reads `{"status":"rejected","message":…}`.
    #[error("{}", crate::permission::rejected_json(.message.as_deref()))]
    Rejected {
        /// The tool.
        tool: String,
        /// What the user wants the model to know.
        message: Option<String>,
    },
}

/// The two kinds of error a tool reports itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolErrorKind {
    /// The arguments matched the schema but are unusable; the model should change them.
    InvalidArguments,
    /// The tool could not do its job.
    Failed,
}

/// A JSON pointer for messages: `/` for the whole value rather than `""`.
fn pointer(path: &str) -> &str {
    if path.is_empty() { "/" } else { path }
}

fn join_issues(issues: &[ArgumentIssue]) -> String {
    issues
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn not_found_message(
    name: &str,
    suggestions: &[String],
    available: &[String],
    unavailable: Option<&str>,
) -> String {
    let mut msg = format!("no tool named `{name}`");
    if let Some(why) = unavailable {
        msg.push_str(&format!(": {why}"));
    }
    if !suggestions.is_empty() {
        msg.push_str(&format!("; did you mean `{}`?", suggestions.join("`, `")));
    } else if !available.is_empty() {
        msg.push('.');
    }
    if available.is_empty() {
        msg.push_str(" (no tools are loaded)");
    } else {
        msg.push_str(&format!(" Available tools: {}", available.join(", ")));
    }
    msg
}

impl CallError {
    /// The kind of error, stable across versions (`not-found`,
    /// `invalid-arguments`, …, see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            CallError::NotFound { .. } => ErrorKind::NotFound,
            CallError::InvalidArguments { .. } => ErrorKind::InvalidArguments,
            CallError::Tool {
                kind: ToolErrorKind::InvalidArguments,
                ..
            } => ErrorKind::ToolInvalidArguments,
            CallError::Tool { .. } => ErrorKind::ToolFailed,
            CallError::Sandbox { .. } => ErrorKind::SandboxFault,
            CallError::Busy { .. } => ErrorKind::Busy,
            CallError::Host { .. } => ErrorKind::HostError,
            CallError::Denied { .. } => ErrorKind::PermissionDenied,
            CallError::Blocked { .. } => ErrorKind::BlockedByHook,
            CallError::HookFailed { .. } => ErrorKind::HookFailed,
            CallError::Rejected { .. } => ErrorKind::Rejected,
            CallError::Stopped { .. } => ErrorKind::Aborted,
        }
    }

    /// The error as structured data for user interfaces: `kind`, `message`,
    /// and what the case knows — the tool, the argument issues with their
    /// JSON pointers, the available tools and suggestions, the plugin and
    /// fault, the hook, the reason.
    ///
    /// ```
    /// use toolhost_runtime::{error::ArgumentIssue, CallError};
    ///
    /// let err = CallError::InvalidArguments {
    ///     tool: "calculate".into(),
    ///     issues: vec![ArgumentIssue { path: "/expression".into(), message: "expected a string".into() }],
    /// };
    /// let d = err.details();
    /// assert_eq!(d["kind"], "invalid-arguments");
    /// assert_eq!(d["issues"][0]["path"], "/expression");
    /// ```
    pub fn details(&self) -> serde_json::Value {
        use serde_json::json;
        let mut d = json!({ "kind": self.kind().as_str(), "message": self.to_string() });
        let extra = match self {
            CallError::NotFound {
                name,
                suggestions,
                available,
                unavailable,
            } => {
                json!({ "tool": name, "suggestions": suggestions, "available": available, "unavailable": unavailable })
            }
            CallError::InvalidArguments { tool, issues } => {
                json!({ "tool": tool, "issues": issues })
            }
            CallError::Tool { tool, message, .. } => json!({ "tool": tool, "reason": message }),
            CallError::Sandbox {
                tool,
                plugin,
                fault,
            } => json!({ "tool": tool, "plugin": plugin, "reason": fault.to_string() }),
            CallError::Busy {
                waiting,
                max_queued,
                ..
            } => json!({ "waiting": waiting, "max_queued": max_queued }),
            CallError::Host { tool, message } | CallError::HookFailed { tool, message } => {
                json!({ "tool": tool, "reason": message })
            }
            CallError::Denied { tool, reason } | CallError::Stopped { tool, reason } => {
                json!({ "tool": tool, "reason": reason })
            }
            CallError::Blocked { tool, hook, reason } => {
                json!({ "tool": tool, "hook": hook, "reason": reason })
            }
            CallError::Rejected { tool, message } => json!({ "tool": tool, "reason": message }),
        };
        if let (Some(d), serde_json::Value::Object(extra)) = (d.as_object_mut(), extra) {
            d.extend(extra);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_message_lists_suggestions_and_available_tools() {
        let err = CallError::NotFound {
            name: "calc".into(),
            suggestions: vec!["calculate".into()],
            available: vec!["calculate".into(), "word_count".into()],
            unavailable: None,
        };
        let msg = err.to_string();
        assert!(msg.contains("did you mean `calculate`"), "{msg}");
        assert!(
            msg.contains("Available tools: calculate, word_count"),
            "{msg}"
        );
    }

    #[test]
    fn invalid_arguments_message_names_every_path() {
        let err = CallError::InvalidArguments {
            tool: "t".into(),
            issues: vec![
                ArgumentIssue {
                    path: "/a".into(),
                    message: "bad".into(),
                },
                ArgumentIssue {
                    path: "".into(),
                    message: "missing `b`".into(),
                },
            ],
        };
        assert_eq!(
            err.to_string(),
            "invalid arguments for `t`: /a: bad; /: missing `b`"
        );
    }

    #[test]
    fn a_load_error_keeps_the_io_error_as_its_source_through_a_clone() {
        use std::error::Error as _;
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "no access");
        let err = LoadError::Io(std::sync::Arc::new(io)).clone();
        assert_eq!(err.to_string(), "cannot read the file: no access");
        let source = err.source().expect("a source");
        let io = source
            .downcast_ref::<std::sync::Arc<std::io::Error>>()
            .expect("the shared io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
    }
}
