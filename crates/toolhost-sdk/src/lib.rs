//! Write [toolhost] tool plugins as plain Rust functions.
//!
//! A toolhost *tool plugin* is a WebAssembly component that targets the
//! `tool-plugin` world of `toolhost:plugin` (see `wit/plugin.wit`). This crate
//! hides the component plumbing: you write one function per tool over a serde
//! argument struct, and [`plugin!`] exports them.
//!
//! ```
//! use toolhost_sdk::prelude::*;
//!
//! /// Greets someone by name. Use it when the user asks to be greeted.
//! #[derive(Deserialize, JsonSchema)]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//!     /// How many exclamation marks to add (default 1).
//!     #[serde(default)]
//!     excitement: Option<u8>,
//! }
//!
//! fn greet(cx: &Context, args: Greet) -> Result<Output, ToolError> {
//!     if args.name.trim().is_empty() {
//!         return Err(ToolError::invalid_arguments("`name` must not be blank"));
//!     }
//!     cx.log(LogLevel::Debug, format!("greeting {}", args.name));
//!     let bangs = "!".repeat(usize::from(args.excitement.unwrap_or(1)));
//!     Ok(Output::new(format!("Hello, {}{bangs}", args.name))
//!         .with_details(json!({ "name": args.name })))
//! }
//!
//! toolhost_sdk::plugin! {
//!     tools: [
//!         greet read_only idempotent,
//!     ]
//! }
//! # fn main() {
//! #     let out = plugin().call(&Context::default(), "greet", r#"{"name":"Ada"}"#).unwrap();
//! #     assert_eq!(out.output(), "Hello, Ada!");
//! # }
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (the crate
//! must be a `cdylib`) and load the `.wasm` file into the host.
//!
//! # How a tool is described
//!
//! * The tool's **name** is the function's name (`greet`); override it with
//!   the `name("…")` flag.
//! * Its **description** is the argument struct's doc comment; override it
//!   with the `description("…")` flag.
//! * Its **input schema** is the JSON Schema that [`schemars`] derives for
//!   the argument struct (draft 2020-12, nested types inlined, no `title`, no
//!   `$schema`, no `description` at the top level). Field doc comments become
//!   property descriptions; `Option` fields and `#[serde(default)]` fields are
//!   optional.
//! * Its **annotations** come from the flags after the function name:
//!   `read_only`, `idempotent`, `destructive`, `open_world`.
//! * Its **output schema**, if any, comes from the return type: a function
//!   that returns [`Structured<T>`] declares the schema [`schemars`] derives
//!   for `T` (see below).
//!
//! # How a call is handled
//!
//! The host validates the arguments against the schema before it calls the
//! plugin, so deserialization normally succeeds. When it does not, the call
//! fails with [`ToolError::InvalidArguments`] carrying serde's message. The
//! function's return value maps to the WIT `result<tool-output, tool-error>`:
//! [`Output`] (text for the model plus optional JSON details for user
//! interfaces) or [`ToolError`] (`invalid-arguments` when the model should fix
//! its arguments, `failed` when the tool could not do its job). Any error type
//! that implements [`std::error::Error`] converts into [`ToolError::Failed`],
//! so `?` works on I/O and parsing errors.
//!
//! Every call runs in a fresh instance of the component: do not keep state in
//! statics between calls.
//!
//! # Structured results
//!
//! Besides the text for the model, a result may carry *structured content*:
//! the same result as JSON that programs can use without parsing text (MCP's
//! `structuredContent`; `toolhost:plugin@0.2.0`). Return [`Structured<T>`]
//! with a `T` that derives `Serialize` and `JsonSchema`: the tool then
//! declares `T`'s schema as its output schema, and the host checks every
//! result against it. Use a struct with named fields, since structured
//! content is a JSON object.
//!
//! ```
//! use toolhost_sdk::prelude::*;
//!
//! /// Measures a text.
//! #[derive(Deserialize, JsonSchema)]
//! struct Measure {
//!     /// The text to measure.
//!     text: String,
//! }
//!
//! /// The text's size.
//! #[derive(Serialize, JsonSchema)]
//! struct Size {
//!     /// Characters (Unicode scalar values).
//!     chars: usize,
//!     /// Words, separated by white space.
//!     words: usize,
//! }
//!
//! fn measure(_cx: &Context, args: Measure) -> Result<Structured<Size>, ToolError> {
//!     let size = Size {
//!         chars: args.text.chars().count(),
//!         words: args.text.split_whitespace().count(),
//!     };
//!     let text = format!("{} characters, {} words", size.chars, size.words);
//!     Ok(Structured::new(text, size))
//! }
//!
//! toolhost_sdk::plugin! {
//!     tools: [ measure read_only idempotent ]
//! }
//! # fn main() {
//! #     plugin().validate().unwrap();
//! #     let spec = &plugin().specs()[0];
//! #     assert_eq!(spec.output_schema.as_ref().unwrap()["required"], json!(["chars", "words"]));
//! #     let out = plugin().call(&Context::default(), "measure", r#"{"text":"a b"}"#).unwrap();
//! #     assert_eq!(out.output(), "3 characters, 2 words");
//! #     assert_eq!(out.structured_json(), Some(json!({"chars": 3, "words": 2})));
//! # }
//! ```
//!
//! # Images and other content
//!
//! A result may also carry content blocks, as MCP results do: images,
//! audio, links to resources, embedded resources (`toolhost:plugin@0.3.0`).
//! An MCP client receives them as they are; the agent loop shows the images
//! to a model that reads images (and a one-line stand-in to one that does
//! not).
//!
//! ```
//! use toolhost_sdk::prelude::*;
//!
//! /// Draws a one-pixel image.
//! #[derive(Deserialize, JsonSchema)]
//! struct Dot {}
//!
//! fn dot(_cx: &Context, _args: Dot) -> Result<Output, ToolError> {
//!     let png: Vec<u8> = vec![0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n' /* … */];
//!     Ok(Output::new("A dot.").with_image(png, "image/png"))
//! }
//!
//! toolhost_sdk::plugin! {
//!     tools: [ dot read_only idempotent ]
//! }
//! # fn main() {
//! #     let out = plugin().call(&Context::default(), "dot", "{}").unwrap();
//! #     assert_eq!(out.content()[1].kind(), "image");
//! # }
//! ```
//!
//! Without a declared schema, [`Output::with_structured`] attaches structured
//! content to any output (and [`Tool::output_schema`] declares a schema by
//! hand, for [`Tool::raw`] tools). Plugins built against
//! `toolhost:plugin@0.1.0` have no structured results; the host runs them
//! unchanged.
//!
//! # Testing natively
//!
//! The crate also compiles for the host target, so tools can be unit-tested
//! with plain `cargo test`. [`plugin!`] defines `fn plugin() -> Plugin` in
//! your crate; call [`Plugin::call`] and [`Plugin::validate`] from tests:
//!
//! ```ignore
//! #[test]
//! fn greets() {
//!     let plugin = plugin();
//!     plugin.validate().unwrap();
//!     let out = plugin.call(&Context::default(), "greet", r#"{"name":"Ada"}"#).unwrap();
//!     assert_eq!(out.output(), "Hello, Ada!");
//! }
//! ```
//!
//! Off the wasm target the host functions have stand-ins: [`log`] writes to
//! stderr, [`progress`] does nothing and [`config`] returns `None` (use
//! [`Context::with_config`] to give a test context configuration values).
//!
//! [toolhost]: https://example.invalid/toolhost

#![warn(missing_docs)]

mod content;
mod context;
mod output;
mod plugin;
mod schema;
pub mod tools;

pub use content::{Audience, Content};
pub use context::{Context, LogLevel, config, config_keys, log, progress};
pub use output::{IntoOutput, Output, Structured, ToolError};
pub use plugin::{Annotations, Plugin, Tool, ToolSpec};

/// Re-exported so plugins need not depend on these crates just to name them.
pub use schemars;
/// Re-exported so plugins need not depend on these crates just to name them.
pub use serde;
/// Re-exported so plugins need not depend on these crates just to name them.
pub use serde_json;

/// The version of the `toolhost:plugin` WIT package this SDK builds against.
pub const WIT_VERSION: &str = "0.4.0";

/// Everything a plugin usually needs: `use toolhost_sdk::prelude::*;`.
///
/// Note that `#[derive(Deserialize)]`, `#[derive(Serialize)]` and
/// `#[derive(JsonSchema)]` expand to code that names the `serde` and
/// `schemars` crates, so a plugin crate lists them as its own dependencies
/// (`serde` with the `derive` feature, and `schemars` 1.x).
pub mod prelude {
    pub use crate::{
        Annotations, Audience, Content, Context, LogLevel, Output, Plugin, Structured, Tool,
        ToolError, config, log, progress,
    };
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};
}

/// Raw bindings generated by `wit-bindgen` for world `tool-plugin`.
///
/// Not part of the stable API: use the wrappers at the crate root.
#[doc(hidden)]
#[allow(unsafe_code, missing_docs, clippy::all)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "tool-plugin",
        pub_export_macro: true,
        default_bindings_module: "toolhost_sdk::bindings",
        export_macro_name: "export",
    });
}

/// Glue used by the expansion of [`plugin!`]. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use crate::bindings::export;
    pub use crate::bindings::exports::toolhost::plugin::tool::{
        CallContext, Guest, ToolError, ToolOutput, ToolSpec,
    };

    use crate::bindings::toolhost::plugin::types as wit;

    /// The `describe` export: the specs of every registered tool.
    pub fn describe(plugin: &crate::Plugin) -> Vec<ToolSpec> {
        plugin
            .specs()
            .into_iter()
            .map(|spec| ToolSpec {
                name: spec.name,
                description: spec.description,
                input_schema: spec.input_schema.to_string(),
                annotations: wit::Annotations {
                    read_only: spec.annotations.read_only,
                    idempotent: spec.annotations.idempotent,
                    destructive: spec.annotations.destructive,
                    open_world: spec.annotations.open_world,
                },
                output_schema: spec.output_schema.map(|s| s.to_string()),
            })
            .collect()
    }

    /// The `execute` export: runs one tool.
    pub fn execute(
        plugin: &crate::Plugin,
        context: CallContext,
        name: String,
        args_json: String,
    ) -> Result<ToolOutput, ToolError> {
        let cx = crate::Context::from_parts(context.call_id, context.session_id, context.agent);
        match plugin.call(&cx, &name, &args_json) {
            Ok(out) => {
                let (output, details, structured, content) = out.into_all();
                Ok(ToolOutput {
                    output,
                    details,
                    structured,
                    content: content.into_iter().map(block).collect(),
                })
            }
            Err(crate::ToolError::InvalidArguments(m)) => Err(ToolError::InvalidArguments(m)),
            Err(crate::ToolError::Failed(m)) => Err(ToolError::Failed(m)),
        }
    }

    /// A content block as the contract's `content-block`.
    fn block(c: crate::Content) -> wit::ContentBlock {
        use crate::content::Body;
        let annotations = (!c.audience.is_empty()
            || c.priority.is_some()
            || c.last_modified.is_some())
        .then(|| wit::ContentAnnotations {
            audience: c
                .audience
                .iter()
                .map(|a| match a {
                    crate::Audience::User => wit::Audience::User,
                    crate::Audience::Assistant => wit::Audience::Assistant,
                })
                .collect(),
            priority: c.priority,
            last_modified: c.last_modified.clone(),
        });
        let content = match c.body {
            Body::Text(t) => wit::Content::Text(t),
            Body::Image { data, mime_type } => wit::Content::Image(wit::Media { data, mime_type }),
            Body::Audio { data, mime_type } => wit::Content::Audio(wit::Media { data, mime_type }),
            Body::ResourceLink {
                uri,
                name,
                title,
                description,
                mime_type,
                size,
            } => wit::Content::ResourceLink(wit::ResourceLink {
                uri,
                name,
                title,
                description,
                mime_type,
                size,
            }),
            Body::Resource {
                uri,
                mime_type,
                text,
                blob,
            } => wit::Content::Embedded(wit::EmbeddedResource {
                uri,
                mime_type,
                body: match text {
                    Some(t) => wit::ResourceBody::Text(t),
                    None => wit::ResourceBody::Blob(blob),
                },
            }),
        };
        wit::ContentBlock {
            content,
            annotations,
            meta: c.meta,
        }
    }
}

/// Registers a plugin's tools and exports them as the component's `tool`
/// interface.
///
/// Use it once, at the root of a `cdylib` crate:
///
/// ```
/// # use toolhost_sdk::prelude::*;
/// # /// Evaluates an expression.
/// # #[derive(Deserialize, JsonSchema)]
/// # struct Calculate { expression: String }
/// # fn calculate(_: &Context, a: Calculate) -> Result<String, ToolError> { Ok(a.expression) }
/// # /// Counts words.
/// # #[derive(Deserialize, JsonSchema)]
/// # struct WordCount { text: String }
/// # fn word_count(_: &Context, a: WordCount) -> Result<String, ToolError> {
/// #     Ok(a.text.split_whitespace().count().to_string())
/// # }
/// # #[derive(Deserialize, JsonSchema)]
/// # struct DeleteFile { path: String }
/// # fn delete_file(_: &Context, _: DeleteFile) -> Result<String, ToolError> { Ok("gone".into()) }
/// toolhost_sdk::plugin! {
///     tools: [
///         calculate read_only idempotent,
///         word_count(WordCount) read_only idempotent name("count_words"),
///         delete_file destructive description("Deletes one file."),
///     ]
/// }
/// # fn main() {
/// #     let specs = plugin().specs();
/// #     assert_eq!(specs[1].name, "count_words");
/// #     assert!(specs[2].annotations.destructive);
/// #     assert_eq!(specs[2].description, "Deletes one file.");
/// #     plugin().validate().unwrap();
/// # }
/// ```
///
/// Each entry is a tool function's name (an identifier in scope; its name is
/// the tool's name), optionally followed by its argument type in parentheses
/// (only as documentation, it is checked against the function), then any
/// number of flags. A flag is a method of [`Tool`] called on the tool: the
/// annotations `read_only`, `idempotent`, `destructive`, `open_world`, and
/// `name("…")` and `description("…")` to override the derived name and
/// description.
///
/// A tool function has the shape
/// `fn(&Context, Args) -> Result<impl IntoOutput, impl Into<ToolError>>`
/// where `Args: serde::de::DeserializeOwned + schemars::JsonSchema`: it
/// returns [`Output`], a `String`, or [`Structured<T>`] (which also declares
/// the tool's output schema).
///
/// The macro defines `pub(crate) fn plugin() -> toolhost_sdk::Plugin` in the
/// calling module, which tests can use to call tools natively.
///
/// For tools whose schema is only known at run time, build the [`Plugin`]
/// yourself (see [`Tool::raw`]) and pass a function that returns it:
///
/// ```
/// use toolhost_sdk::prelude::*;
///
/// fn my_tools() -> Plugin {
///     Plugin::new().tool(Tool::raw(
///         "echo_raw",
///         "Returns its arguments as they came.",
///         json!({ "type": "object" }),
///         |_cx, args| Ok(Output::new(args)),
///     ))
/// }
///
/// toolhost_sdk::plugin! { plugin: my_tools }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! plugin {
    (tools: [ $(
        $f:ident $( ( $a:ty ) )? $( $flag:ident $( ( $($farg:expr),* $(,)? ) )? )*
    ),* $(,)? ] $(,)?) => {
        /// This plugin's tools, as registered with `toolhost_sdk::plugin!`.
        #[allow(dead_code)]
        pub(crate) fn plugin() -> $crate::Plugin {
            $crate::Plugin::new()
            $(
                .tool(
                    $crate::Tool::new $( ::<$a, _, _, _> )? (::core::stringify!($f), $f)
                    $( .$flag( $( $($farg),* )? ) )*
                )
            )*
        }
        $crate::plugin!(plugin: plugin);
    };
    (plugin: $plugin:path $(,)?) => {
        #[doc(hidden)]
        struct __ToolhostGuest;

        impl $crate::__private::Guest for __ToolhostGuest {
            fn describe() -> ::std::vec::Vec<$crate::__private::ToolSpec> {
                $crate::__private::describe(&$plugin())
            }

            fn execute(
                context: $crate::__private::CallContext,
                name: ::std::string::String,
                args_json: ::std::string::String,
            ) -> ::core::result::Result<$crate::__private::ToolOutput, $crate::__private::ToolError>
            {
                $crate::__private::execute(&$plugin(), context, name, args_json)
            }
        }

        $crate::__private::export!(__ToolhostGuest with_types_in $crate::bindings);
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn wit_version_matches_the_contract() {
        let wit = include_str!("../../../wit/plugin.wit");
        let package = format!("package toolhost:plugin@{};", super::WIT_VERSION);
        assert!(
            wit.lines().any(|l| l.trim() == package),
            "{package} not in wit/plugin.wit"
        );
    }
}
