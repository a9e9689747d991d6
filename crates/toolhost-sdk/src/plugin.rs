//! Tools and the plugin that holds them.

use std::fmt;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{Context, IntoOutput, Output, ToolError, schema};

/// Hints about a tool's behaviour, as in the Model Context Protocol. The host
/// and its policy use them (e.g. to run read-only tools in parallel); they
/// are hints, never guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Annotations {
    /// The tool does not change its environment (it only reads).
    pub read_only: bool,
    /// Calling the tool twice with the same arguments has no additional
    /// effect beyond the first call.
    pub idempotent: bool,
    /// The tool may make destructive updates (delete, overwrite).
    pub destructive: bool,
    /// The tool interacts with an open world of external entities (the web,
    /// other services).
    pub open_world: bool,
}

/// A tool as the host sees it: what `describe` returns for one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls the tool by.
    pub name: String,
    /// What the tool does and when to use it, written for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// Behaviour hints.
    pub annotations: Annotations,
    /// JSON Schema of the structured content of every result, when the tool
    /// declares one (it returns [`Structured<T>`](crate::Structured), or sets
    /// [`Tool::output_schema`]).
    pub output_schema: Option<Value>,
}

type RunFn = dyn Fn(&Context, &str) -> Result<Output, ToolError>;
type SchemaFn = dyn Fn() -> (Value, Option<String>);
type OutputSchemaFn = dyn Fn() -> Option<Value>;

/// One tool: a name, a description, a JSON Schema for its arguments,
/// annotations, and the function that runs it.
///
/// [`plugin!`](crate::plugin!) builds these for you; build them yourself
/// with [`Tool::new`] or [`Tool::raw`] to assemble a [`Plugin`] by hand.
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
/// fn add(_cx: &Context, args: Add) -> Result<String, ToolError> {
///     Ok((args.a + args.b).to_string())
/// }
///
/// let tool = Tool::new("add", add).read_only().idempotent();
/// let spec = tool.spec();
/// assert_eq!(spec.name, "add");
/// assert_eq!(spec.description, "Adds two numbers.");
/// assert!(spec.annotations.read_only);
/// assert_eq!(spec.input_schema["type"], "object");
/// ```
pub struct Tool {
    name: String,
    description: Option<String>,
    annotations: Annotations,
    schema: Box<SchemaFn>,
    output_schema: Box<OutputSchemaFn>,
    run: Box<RunFn>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("annotations", &self.annotations)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool named `name` that deserializes its arguments into `A` and
    /// calls `run`.
    ///
    /// The description is `A`'s doc comment (override it with
    /// [`Tool::description`]) and the input schema is derived from `A`.
    /// Arguments that do not deserialize into `A` make the call fail with
    /// [`ToolError::InvalidArguments`] carrying serde's message. When `run`
    /// returns [`Structured<T>`](crate::Structured), `T`'s schema is the
    /// tool's output schema.
    pub fn new<A, O, E, F>(name: &str, run: F) -> Self
    where
        A: DeserializeOwned + JsonSchema + 'static,
        O: IntoOutput,
        E: Into<ToolError>,
        F: Fn(&Context, A) -> Result<O, E> + 'static,
    {
        Tool {
            name: name.to_string(),
            description: None,
            annotations: Annotations::default(),
            schema: Box::new(schema::for_args::<A>),
            // A fn pointer, so that `O` need not be `'static`.
            output_schema: Box::new(O::output_schema as fn() -> Option<Value>),
            run: Box::new(move |cx, args_json| {
                let args: A = serde_json::from_str(args_json)
                    .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
                run(cx, args)
                    .map(IntoOutput::into_output)
                    .map_err(Into::into)
            }),
        }
    }

    /// A tool with a hand-written schema that receives its arguments as
    /// JSON text. An escape hatch for schemas known only at run time; prefer
    /// [`Tool::new`].
    ///
    /// ```
    /// use toolhost_sdk::{Context, Output, Tool, ToolError};
    /// use serde_json::json;
    ///
    /// let tool = Tool::raw(
    ///     "echo_raw",
    ///     "Returns its arguments as they came.",
    ///     json!({ "type": "object" }),
    ///     |_cx: &Context, args: &str| Ok::<_, ToolError>(Output::new(args)),
    /// );
    /// assert_eq!(tool.spec().description, "Returns its arguments as they came.");
    /// ```
    pub fn raw<F>(name: &str, description: &str, input_schema: Value, run: F) -> Self
    where
        F: Fn(&Context, &str) -> Result<Output, ToolError> + 'static,
    {
        Tool {
            name: name.to_string(),
            description: Some(description.to_string()),
            annotations: Annotations::default(),
            schema: Box::new(move || (input_schema.clone(), None)),
            output_schema: Box::new(|| None),
            run: Box::new(run),
        }
    }

    /// Declares the JSON Schema of the tool's structured content by hand
    /// (for [`Tool::raw`] tools, which return it with
    /// [`Output::with_structured`]). A tool that returns
    /// [`Structured<T>`](crate::Structured) has one already.
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Box::new(move || Some(schema.clone()));
        self
    }

    /// Renames the tool (by default it is the function's name).
    pub fn name(mut self, name: &str) -> Self {
        self.name = name.to_string();
        self
    }

    /// Sets the description (by default the argument type's doc comment).
    pub fn description(mut self, description: &str) -> Self {
        self.description = Some(description.to_string());
        self
    }

    /// Sets all annotations at once.
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = annotations;
        self
    }

    /// Marks the tool read-only: it does not change its environment.
    pub fn read_only(mut self) -> Self {
        self.annotations.read_only = true;
        self
    }

    /// Marks the tool idempotent: repeating a call has no further effect.
    pub fn idempotent(mut self) -> Self {
        self.annotations.idempotent = true;
        self
    }

    /// Marks the tool destructive: it may delete or overwrite things.
    pub fn destructive(mut self) -> Self {
        self.annotations.destructive = true;
        self
    }

    /// Marks the tool open-world: it talks to the web or other services.
    pub fn open_world(mut self) -> Self {
        self.annotations.open_world = true;
        self
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.name
    }

    /// What `describe` reports for this tool.
    pub fn spec(&self) -> ToolSpec {
        let (input_schema, doc) = (self.schema)();
        ToolSpec {
            name: self.name.clone(),
            description: self.description.clone().or(doc).unwrap_or_default(),
            input_schema,
            annotations: self.annotations,
            output_schema: (self.output_schema)(),
        }
    }

    /// Runs the tool with arguments given as JSON text.
    pub fn call(&self, cx: &Context, args_json: &str) -> Result<Output, ToolError> {
        (self.run)(cx, args_json).and_then(Output::into_result)
    }
}

/// The set of tools a plugin exports.
///
/// [`plugin!`](crate::plugin!) defines `fn plugin() -> Plugin` in your crate;
/// use it in native tests:
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// /// Repeats a text.
/// #[derive(Deserialize, JsonSchema)]
/// struct Echo {
///     /// The text to repeat.
///     text: String,
/// }
///
/// fn echo(_cx: &Context, args: Echo) -> Result<String, ToolError> {
///     Ok(args.text)
/// }
///
/// let plugin = Plugin::new().tool(Tool::new("echo", echo).read_only());
/// plugin.validate().unwrap();
/// let out = plugin.call(&Context::default(), "echo", r#"{"text":"hi"}"#).unwrap();
/// assert_eq!(out.output(), "hi");
/// let err = plugin.call(&Context::default(), "echo", r#"{}"#).unwrap_err();
/// assert!(err.is_invalid_arguments());
/// ```
#[derive(Debug, Default)]
pub struct Plugin {
    tools: Vec<Tool>,
}

impl Plugin {
    /// A plugin with no tools.
    pub fn new() -> Self {
        Plugin::default()
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// The tools, in registration order.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// What `describe` returns: one spec per tool, in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(Tool::spec).collect()
    }

    /// Runs the tool `name` with arguments given as JSON text. An unknown
    /// name fails with [`ToolError::Failed`] listing the known names.
    pub fn call(&self, cx: &Context, name: &str, args_json: &str) -> Result<Output, ToolError> {
        match self.tools.iter().find(|t| t.name == name) {
            Some(tool) => tool.call(cx, args_json),
            None => {
                let known: Vec<&str> = self.tools.iter().map(|t| t.name.as_str()).collect();
                Err(ToolError::Failed(format!(
                    "unknown tool '{name}'; this plugin provides: {}",
                    known.join(", ")
                )))
            }
        }
    }

    /// Checks what the host will check at load time: at least one tool,
    /// names that match `^[a-zA-Z0-9_-]{1,64}$` and are unique, non-empty
    /// descriptions, and input and output schemas whose top level is
    /// `"type": "object"`.
    ///
    /// Call it from a unit test of every plugin. The error lists every
    /// problem found, one per line.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if self.tools.is_empty() {
            problems.push("the plugin has no tools".to_string());
        }
        let mut seen = std::collections::BTreeSet::new();
        for spec in self.specs() {
            let name = &spec.name;
            if !valid_tool_name(name) {
                problems.push(format!(
                    "tool name '{name}' must match ^[a-zA-Z0-9_-]{{1,64}}$"
                ));
            }
            if !seen.insert(name.clone()) {
                problems.push(format!("tool name '{name}' is used more than once"));
            }
            if spec.description.trim().is_empty() {
                problems.push(format!(
                    "tool '{name}' has no description (add a doc comment to its argument type)"
                ));
            }
            if spec.input_schema.get("type") != Some(&Value::from("object")) {
                problems.push(format!(
                    "tool '{name}': the input schema must have \"type\": \"object\" at the top level (use a struct with named fields, e.g. `struct Args {{}}`)"
                ));
            }
            if let Some(output) = &spec.output_schema
                && output.get("type") != Some(&Value::from("object"))
            {
                problems.push(format!(
                    "tool '{name}': the output schema must have \"type\": \"object\" at the top level (structured content is a JSON object, as in MCP: use a struct with named fields)"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }
}

fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// Adds two numbers.
    #[derive(Deserialize, JsonSchema)]
    struct Add {
        /// The first number.
        a: f64,
        /// The second number.
        b: f64,
    }

    fn add(_cx: &Context, args: Add) -> Result<Output, ToolError> {
        if args.b.is_nan() {
            return Err(ToolError::invalid_arguments("b is NaN"));
        }
        Ok(
            Output::new((args.a + args.b).to_string())
                .with_details(json!({"sum": args.a + args.b})),
        )
    }

    #[derive(Deserialize, JsonSchema)]
    struct Undocumented {}

    fn undocumented(_cx: &Context, _args: Undocumented) -> Result<&'static str, ToolError> {
        Ok("ok")
    }

    fn io_fail(_cx: &Context, _args: Undocumented) -> Result<Output, std::io::Error> {
        Err(std::io::Error::other("disk on fire"))
    }

    #[test]
    fn call_success_and_errors() {
        let plugin = Plugin::new().tool(Tool::new("add", add).read_only().idempotent());
        let cx = Context::default();
        let out = plugin.call(&cx, "add", r#"{"a":1,"b":2.5}"#).unwrap();
        assert_eq!(out.output(), "3.5");
        assert_eq!(out.details_json(), Some(json!({"sum": 3.5})));

        let err = plugin.call(&cx, "add", r#"{"a":1}"#).unwrap_err();
        assert_eq!(
            err,
            ToolError::InvalidArguments("missing field `b` at line 1 column 7".into())
        );
        let err = plugin.call(&cx, "add", "not json").unwrap_err();
        assert!(err.is_invalid_arguments());

        let err = plugin.call(&cx, "sub", "{}").unwrap_err();
        assert_eq!(
            err,
            ToolError::Failed("unknown tool 'sub'; this plugin provides: add".into())
        );
    }

    #[test]
    fn error_types_convert() {
        let plugin = Plugin::new().tool(Tool::new("io_fail", io_fail));
        let err = plugin
            .call(&Context::default(), "io_fail", "{}")
            .unwrap_err();
        assert_eq!(err, ToolError::Failed("disk on fire".into()));
    }

    #[test]
    fn flags_and_overrides() {
        let tool = Tool::new("add", add)
            .destructive()
            .open_world()
            .name("plus")
            .description("Sums.");
        let spec = tool.spec();
        assert_eq!(spec.name, "plus");
        assert_eq!(spec.description, "Sums.");
        assert_eq!(
            spec.annotations,
            Annotations {
                read_only: false,
                idempotent: false,
                destructive: true,
                open_world: true
            }
        );
        let all = Annotations {
            read_only: true,
            idempotent: true,
            destructive: false,
            open_world: false,
        };
        assert_eq!(
            Tool::new("add", add).annotations(all).spec().annotations,
            all
        );
        assert!(format!("{tool:?}").contains("plus"));
    }

    #[test]
    fn validate_reports_every_problem() {
        let good = Plugin::new().tool(Tool::new("add", add));
        assert_eq!(good.validate(), Ok(()));

        assert!(Plugin::new().validate().unwrap_err().contains("no tools"));

        let bad = Plugin::new()
            .tool(Tool::new("add", add))
            .tool(Tool::new("add", add))
            .tool(Tool::new("bad name!", add))
            .tool(Tool::new("undocumented", undocumented))
            .tool(Tool::raw(
                "raw",
                "Raw.",
                json!({"type": "string"}),
                |_, _| Ok(Output::new("")),
            ))
            .tool(
                Tool::raw("list", "List.", json!({"type": "object"}), |_, _| {
                    Ok(Output::new(""))
                })
                .output_schema(json!({"type": "array"})),
            );
        let problems = bad.validate().unwrap_err();
        assert!(
            problems.contains("'add' is used more than once"),
            "{problems}"
        );
        assert!(problems.contains("'bad name!' must match"), "{problems}");
        assert!(
            problems.contains("'undocumented' has no description"),
            "{problems}"
        );
        assert!(
            problems.contains("tool 'raw': the input schema"),
            "{problems}"
        );
        assert!(
            problems.contains("tool 'list': the output schema"),
            "{problems}"
        );
        assert_eq!(problems.lines().count(), 5);
    }

    /// The sum.
    #[derive(serde::Serialize, JsonSchema)]
    struct Sum {
        /// `a + b`.
        value: f64,
    }

    fn structured_add(_cx: &Context, args: Add) -> Result<crate::Structured<Sum>, ToolError> {
        let value = args.a + args.b;
        Ok(crate::Structured::new(value.to_string(), Sum { value }))
    }

    #[test]
    fn structured_results_and_output_schemas() {
        let plugin = Plugin::new()
            .tool(Tool::new("add", structured_add).read_only())
            .tool(Tool::new("plain", add))
            .tool(
                Tool::raw("raw", "Raw.", json!({"type": "object"}), |_, _| {
                    Ok(Output::new("r").with_structured(json!({"n": 1})))
                })
                .output_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}})),
            );
        plugin.validate().unwrap();
        let specs = plugin.specs();
        assert_eq!(
            specs[0].output_schema,
            Some(json!({
                "type": "object",
                "properties": {"value": {"type": "number", "format": "double", "description": "`a + b`."}},
                "required": ["value"],
                "description": "The sum."
            }))
        );
        assert_eq!(specs[0].description, "Adds two numbers.");
        assert_eq!(specs[1].output_schema, None);
        assert_eq!(
            specs[2].output_schema.as_ref().unwrap()["properties"]["n"]["type"],
            "integer"
        );

        let cx = Context::default();
        let out = plugin.call(&cx, "add", r#"{"a":1,"b":2}"#).unwrap();
        assert_eq!(out.output(), "3");
        assert_eq!(out.structured_json(), Some(json!({"value": 3.0})));
        let out = plugin.call(&cx, "raw", "{}").unwrap();
        assert_eq!(out.structured(), Some(r#"{"n":1}"#));
        assert_eq!(
            plugin
                .call(&cx, "plain", r#"{"a":1,"b":2}"#)
                .unwrap()
                .structured(),
            None
        );
    }

    /// JSON object keys must be strings: this map cannot be serialized.
    fn unserializable(_cx: &Context, _args: Undocumented) -> Result<Output, ToolError> {
        let map = std::collections::HashMap::from([(vec![1u8], 1)]);
        Ok(Output::new("x").with_structured(map))
    }

    #[test]
    fn unserializable_structured_content_fails_the_call() {
        let tool = Tool::new("unserializable", unserializable);
        let err = tool.call(&Context::default(), "{}").unwrap_err();
        assert!(!err.is_invalid_arguments());
        let message = err.message();
        assert!(
            message.contains("cannot serialize the structured result"),
            "{err}"
        );
    }

    #[test]
    fn tool_names() {
        assert!(valid_tool_name("a"));
        assert!(valid_tool_name("read_file-2"));
        assert!(valid_tool_name(&"x".repeat(64)));
        assert!(!valid_tool_name(&"x".repeat(65)));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a.b"));
        assert!(!valid_tool_name("é"));
    }

    #[test]
    fn raw_tool_receives_json_text() {
        let plugin = Plugin::new().tool(Tool::raw(
            "echo",
            "Echo.",
            json!({"type": "object"}),
            |cx, args| Ok(Output::new(format!("{}:{args}", cx.call_id()))),
        ));
        let out = plugin
            .call(&Context::new("c9"), "echo", r#"{"x":1}"#)
            .unwrap();
        assert_eq!(out.output(), r#"c9:{"x":1}"#);
        assert_eq!(plugin.tools().len(), 1);
        assert_eq!(plugin.tools()[0].tool_name(), "echo");
    }
}
