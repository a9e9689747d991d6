//! The version-neutral types every contract version's bindings convert to
//! and from: what the rest of the runtime sees of a plugin, whatever
//! contract it was built against.

/// Behaviour hints of a tool (MCP's annotations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Does not change its environment.
    pub read_only: bool,
    /// Repeating a call has no further effect.
    pub idempotent: bool,
    /// May make destructive updates.
    pub destructive: bool,
    /// Talks to an open world of external entities.
    pub open_world: bool,
}

/// A tool as `describe()` declares it, before validation.
#[derive(Debug, Clone)]
pub(crate) struct RawToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: String,
    /// JSON Schema of the structured result (0.2.0 and later).
    pub output_schema: Option<String>,
    pub annotations: Annotations,
}

/// Call context passed to `execute`.
#[derive(Debug, Clone)]
pub(crate) struct RawContext<'a> {
    pub call_id: &'a str,
    pub session_id: Option<&'a str>,
    pub agent: Option<&'a str>,
}

/// What `execute` returned.
#[derive(Debug)]
pub(crate) enum RawOutcome {
    Ok {
        output: String,
        details: Option<String>,
        /// Structured result as JSON text (0.2.0 and later).
        structured: Option<String>,
        /// Content blocks (0.3.0 and later; empty: `output` alone).
        content: Vec<toolhost_content::Content>,
    },
    InvalidArguments(String),
    Failed(String),
    /// The plugin returned a content block the host refuses (a MIME type
    /// that is not one, `meta` that is not a JSON object, …).
    InvalidContent(toolhost_content::ContentError),
}

/// What a hook plugin's `before-execute` decided.
#[derive(Debug)]
pub(crate) enum RawBefore {
    Proceed,
    Rewrite(String),
    Block(String),
    Ask(String),
}

/// What a hook plugin's `after-execute` decided.
#[derive(Debug)]
pub(crate) enum RawAfter {
    Keep,
    Replace {
        output: String,
        details: Option<String>,
        structured: Option<String>,
        /// The new content blocks; `None` when the hook's contract has
        /// none (0.2.0) or it gave back the blocks it was given.
        content: Option<Vec<toolhost_content::Content>>,
    },
    Fail(String),
    /// The hook replaced the content with a block the host refuses.
    InvalidContent(toolhost_content::ContentError),
}

/// Host-side log levels a plugin may use.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}
