//! What a tool returns: [`Output`] or [`ToolError`].

use std::fmt;

/// The successful result of a tool call: text for the model and optional
/// structured details (JSON) for user interfaces and logs.
///
/// ```
/// use toolhost_sdk::Output;
/// use serde_json::json;
///
/// let out = Output::new("14").with_details(json!({ "value": 14 }));
/// assert_eq!(out.output(), "14");
/// assert_eq!(out.details(), Some(r#"{"value":14}"#));
///
/// // Plain strings convert too, so a tool may return `Ok(text)`.
/// let out: Output = "done".into();
/// assert_eq!(out.details(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    output: String,
    details: Option<String>,
}

impl Output {
    /// An output with this text and no details.
    pub fn new(output: impl Into<String>) -> Self {
        Output {
            output: output.into(),
            details: None,
        }
    }

    /// Attaches structured details. The model never sees them; user
    /// interfaces and logs do.
    pub fn with_details(mut self, details: impl Into<serde_json::Value>) -> Self {
        self.details = Some(details.into().to_string());
        self
    }

    /// Attaches details given as JSON text, **unchecked**.
    ///
    /// The host rejects details that are not valid JSON, so prefer
    /// [`Output::with_details`]. This exists for plugins that already hold
    /// serialized JSON (and for tests of the host's checks).
    pub fn with_raw_details(mut self, json_text: impl Into<String>) -> Self {
        self.details = Some(json_text.into());
        self
    }

    /// The text for the model.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// The details as JSON text, if any.
    pub fn details(&self) -> Option<&str> {
        self.details.as_deref()
    }

    /// The details parsed as JSON (`None` when there are none or they are not
    /// valid JSON). Handy in tests.
    pub fn details_json(&self) -> Option<serde_json::Value> {
        self.details
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
    }

    /// Splits the output into its text and details.
    pub fn into_parts(self) -> (String, Option<String>) {
        (self.output, self.details)
    }
}

impl From<String> for Output {
    fn from(output: String) -> Self {
        Output::new(output)
    }
}

impl From<&str> for Output {
    fn from(output: &str) -> Self {
        Output::new(output)
    }
}

/// Why a tool call failed. The host turns it into a tool result the model
/// can read.
///
/// Any [`std::error::Error`] converts into [`ToolError::Failed`] with the
/// error's message, so `?` works on I/O, parsing and similar errors:
///
/// ```
/// use toolhost_sdk::ToolError;
///
/// fn parse(n: &str) -> Result<i64, ToolError> {
///     if n.is_empty() {
///         return Err(ToolError::invalid_arguments("`n` must not be empty"));
///     }
///     Ok(n.parse::<i64>()?) // ParseIntError -> ToolError::Failed
/// }
/// assert!(matches!(parse(""), Err(ToolError::InvalidArguments(_))));
/// assert_eq!(parse("x").unwrap_err().message(), "invalid digit found in string");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The arguments are unusable (e.g. an expression that does not parse).
    /// The message should say what to change; the model is expected to
    /// retry with other arguments.
    InvalidArguments(String),
    /// The tool ran and could not do its job (a missing file, a network
    /// error, division by zero).
    Failed(String),
}

impl ToolError {
    /// A [`ToolError::InvalidArguments`] with this message.
    pub fn invalid_arguments(message: impl fmt::Display) -> Self {
        ToolError::InvalidArguments(message.to_string())
    }

    /// A [`ToolError::Failed`] with this message.
    pub fn failed(message: impl fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            ToolError::InvalidArguments(m) | ToolError::Failed(m) => m,
        }
    }

    /// Whether this is [`ToolError::InvalidArguments`].
    pub fn is_invalid_arguments(&self) -> bool {
        matches!(self, ToolError::InvalidArguments(_))
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::InvalidArguments(m) => write!(f, "invalid arguments: {m}"),
            ToolError::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        ToolError::Failed(error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn output_details() {
        let out = Output::new("x").with_details(json!({"a": [1, 2]}));
        assert_eq!(out.details(), Some(r#"{"a":[1,2]}"#));
        assert_eq!(out.details_json(), Some(json!({"a": [1, 2]})));
        let raw = Output::new("x").with_raw_details("{not json");
        assert_eq!(raw.details(), Some("{not json"));
        assert_eq!(raw.details_json(), None);
        assert_eq!(
            raw.into_parts(),
            ("x".to_string(), Some("{not json".to_string()))
        );
    }

    #[test]
    fn error_conversions() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e: ToolError = io.into();
        assert_eq!(e, ToolError::Failed("no such file".into()));
        assert!(!e.is_invalid_arguments());
        assert_eq!(e.to_string(), "failed: no such file");
        let e = ToolError::invalid_arguments("bad");
        assert!(e.is_invalid_arguments());
        assert_eq!(e.message(), "bad");
    }
}
