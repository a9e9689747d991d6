//! What a tool returns: [`Output`] (or [`Structured`]) or [`ToolError`].

use std::fmt;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::content::Content;
use crate::schema;

/// The successful result of a tool call: text for the model, optional
/// details (JSON) for user interfaces and logs, optional structured
/// content (JSON, MCP's `structuredContent`; see [`Output::with_structured`]
/// and [`Structured`]), and optional content blocks (images, audio,
/// resources; see [`Output::with_content`]).
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
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Output {
    output: String,
    details: Option<String>,
    structured: Option<String>,
    content: Vec<Content>,
    /// Why the value given to `with_structured` could not be serialized: the
    /// call fails with it (see [`Output::into_result`]).
    structured_error: Option<String>,
}

impl Output {
    /// An output with this text and no details.
    pub fn new(output: impl Into<String>) -> Self {
        Output {
            output: output.into(),
            ..Output::default()
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

    /// Attaches structured content: the result as JSON, for programs and for
    /// models that read structured results (MCP's `structuredContent`).
    ///
    /// When the tool declares an output schema, the host checks the content
    /// against it; [`Structured`] declares the schema from the value's type,
    /// so prefer returning one of those. If `value` cannot be serialized to
    /// JSON (a map with non-string keys, a failing `Serialize` impl), the
    /// call fails with [`ToolError::Failed`] saying why.
    ///
    /// ```
    /// use toolhost_sdk::Output;
    /// use serde_json::json;
    ///
    /// let out = Output::new("14").with_structured(json!({ "value": 14 }));
    /// assert_eq!(out.structured(), Some(r#"{"value":14}"#));
    /// ```
    pub fn with_structured(mut self, value: impl Serialize) -> Self {
        match serde_json::to_string(&value) {
            Ok(text) => {
                self.structured = Some(text);
                self.structured_error = None;
            }
            Err(e) => {
                self.structured = None;
                self.structured_error = Some(e.to_string());
            }
        }
        self
    }

    /// Attaches structured content given as JSON text, **unchecked**.
    ///
    /// The host rejects structured content that is not valid JSON, so prefer
    /// [`Output::with_structured`]. This exists for plugins that already hold
    /// serialized JSON (and for tests of the host's checks).
    pub fn with_raw_structured(mut self, json_text: impl Into<String>) -> Self {
        self.structured = Some(json_text.into());
        self.structured_error = None;
        self
    }

    /// Attaches a content block (an image, an audio clip, a resource link,
    /// an embedded resource, more text): the result as an MCP client
    /// receives it becomes the output's text (first, unless it is empty)
    /// followed by the blocks, in the order they were attached. The model
    /// reads the output and sees the images (if it reads images; a
    /// one-line stand-in for each other block).
    ///
    /// ```
    /// use toolhost_sdk::{Content, Output};
    ///
    /// let out = Output::new("The logo:")
    ///     .with_content(Content::image(b"\x89PNG\r\n\x1a\n".to_vec(), "image/png"));
    /// let kinds: Vec<_> = out.content().iter().map(Content::kind).collect();
    /// assert_eq!(kinds, ["text", "image"]);
    /// assert_eq!(out.content()[0].as_text(), Some("The logo:"));
    /// ```
    pub fn with_content(mut self, block: Content) -> Self {
        if self.content.is_empty() && !self.output.is_empty() {
            self.content.push(Content::text(self.output.clone()));
        }
        self.content.push(block);
        self
    }

    /// Attaches an image: [`Output::with_content`] of
    /// [`Content::image`].
    pub fn with_image(self, data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        self.with_content(Content::image(data, mime_type))
    }

    /// The content blocks, the output's text first (empty when none was
    /// attached: the result is the output alone).
    pub fn content(&self) -> &[Content] {
        &self.content
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

    /// The structured content as JSON text, if any.
    pub fn structured(&self) -> Option<&str> {
        self.structured.as_deref()
    }

    /// The structured content parsed as JSON (`None` when there is none or it
    /// is not valid JSON). Handy in tests.
    pub fn structured_json(&self) -> Option<Value> {
        self.structured
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
    }

    /// Splits the output into its text, details and structured content
    /// (see [`Output::content`] for the content blocks).
    pub fn into_parts(self) -> (String, Option<String>, Option<String>) {
        (self.output, self.details, self.structured)
    }

    /// Splits the output into its text, details, structured content and
    /// content blocks.
    pub(crate) fn into_all(self) -> (String, Option<String>, Option<String>, Vec<Content>) {
        (self.output, self.details, self.structured, self.content)
    }

    /// The output, or the error that [`Output::with_structured`] recorded
    /// when its value could not be serialized.
    pub fn into_result(self) -> Result<Output, ToolError> {
        match &self.structured_error {
            Some(e) => Err(ToolError::Failed(format!(
                "cannot serialize the structured result: {e}"
            ))),
            None => Ok(self),
        }
    }
}

/// A result with typed structured content: text (or a whole [`Output`]) for
/// the model, and a value of `T` sent as structured content.
///
/// A tool function that returns `Result<Structured<T>, _>` declares `T`'s JSON
/// Schema (derived by [`schemars`], like the input schema) as the tool's
/// output schema, so the host knows the shape of every result and checks it.
/// As in MCP, structured content is a JSON object: use a struct with named
/// fields for `T`.
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// /// Adds two numbers.
/// #[derive(Deserialize, JsonSchema)]
/// struct Add {
///     a: f64,
///     b: f64,
/// }
///
/// /// The sum.
/// #[derive(Serialize, JsonSchema)]
/// struct Sum {
///     /// The sum of `a` and `b`.
///     value: f64,
/// }
///
/// fn add(_cx: &Context, args: Add) -> Result<Structured<Sum>, ToolError> {
///     let value = args.a + args.b;
///     Ok(Structured::new(value.to_string(), Sum { value }))
/// }
///
/// let tool = Tool::new("add", add);
/// let schema = tool.spec().output_schema.unwrap();
/// assert_eq!(schema["properties"]["value"]["type"], "number");
/// let out = tool.call(&Context::default(), r#"{"a":1,"b":2}"#).unwrap();
/// assert_eq!(out.output(), "3");
/// assert_eq!(out.structured_json(), Some(json!({ "value": 3.0 })));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Structured<T> {
    output: Output,
    value: T,
}

impl<T: Serialize + JsonSchema> Structured<T> {
    /// A result with this text (or [`Output`], e.g. with details) for the
    /// model and `value` as its structured content.
    pub fn new(output: impl Into<Output>, value: T) -> Self {
        Structured {
            output: output.into(),
            value,
        }
    }

    /// The structured value.
    pub fn value(&self) -> &T {
        &self.value
    }
}

/// What a tool function returns when it succeeds: [`Output`] or anything
/// that converts into it (`String`, `&str`), or [`Structured<T>`], which
/// also gives the tool its output schema.
pub trait IntoOutput {
    /// The JSON Schema of the structured content this type carries, if it
    /// declares one. `None` by default.
    fn output_schema() -> Option<Value> {
        None
    }

    /// Converts into the [`Output`] sent to the host.
    fn into_output(self) -> Output;
}

impl<O: Into<Output>> IntoOutput for O {
    fn into_output(self) -> Output {
        self.into()
    }
}

impl<T: Serialize + JsonSchema> IntoOutput for Structured<T> {
    fn output_schema() -> Option<Value> {
        Some(schema::for_output::<T>())
    }

    fn into_output(self) -> Output {
        self.output.with_structured(&self.value)
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
            ("x".to_string(), Some("{not json".to_string()), None)
        );
    }

    #[test]
    fn output_structured() {
        let out = Output::new("x").with_structured(json!({"v": 1}));
        assert_eq!(out.structured(), Some(r#"{"v":1}"#));
        assert_eq!(out.structured_json(), Some(json!({"v": 1})));
        assert_eq!(out.details(), None);
        let raw = Output::new("x").with_raw_structured("{nope");
        assert_eq!(raw.structured_json(), None);
        assert_eq!(
            raw.clone().into_result().unwrap().into_parts(),
            ("x".to_string(), None, Some("{nope".to_string()))
        );

        // A map with non-string keys cannot be JSON: the call fails, saying why.
        let bad = std::collections::BTreeMap::from([((1, 2), "x")]);
        let err = Output::new("x")
            .with_structured(bad)
            .into_result()
            .unwrap_err();
        assert!(
            err.message()
                .starts_with("cannot serialize the structured result: "),
            "{err}"
        );
        // A later valid value replaces the failed one.
        let out = Output::new("x")
            .with_structured(std::collections::BTreeMap::from([((1, 2), "x")]))
            .with_structured(json!(1));
        assert_eq!(out.into_result().unwrap().structured(), Some("1"));
    }

    #[test]
    fn structured_results_declare_their_schema() {
        /// A point.
        #[derive(Serialize, JsonSchema)]
        struct Point {
            /// Across.
            x: i32,
            y: i32,
        }
        assert_eq!(<String as IntoOutput>::output_schema(), None);
        assert_eq!(<Output as IntoOutput>::output_schema(), None);
        let schema = <Structured<Point> as IntoOutput>::output_schema().unwrap();
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "format": "int32", "description": "Across."},
                    "y": {"type": "integer", "format": "int32"}
                },
                "required": ["x", "y"],
                "description": "A point."
            })
        );
        let s = Structured::new(
            Output::new("p").with_details(json!({"d": 1})),
            Point { x: 1, y: 2 },
        );
        assert_eq!(s.value().x, 1);
        let out = s.into_output();
        assert_eq!(out.output(), "p");
        assert_eq!(out.details(), Some(r#"{"d":1}"#));
        assert_eq!(out.structured_json(), Some(json!({"x": 1, "y": 2})));
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
