//! Resources and prompts as the rules see them. Reading a resource or
//! getting a prompt of an MCP server is judged as a call of a tool that is
//! never listed: [`READ_RESOURCE`] with the argument `uri`, [`GET_PROMPT`]
//! with the argument `name` (the prompt's name as the caller sees it) and
//! its `arguments`, from the plugin named after the server. A rule names
//! them with `resource = "GLOB"` (on the URI, `*` crossing `/`) or
//! `prompt = "GLOB"` (on the name) in place of `tool`; the builder's
//! [`Rule::resource`](crate::Rule::resource) and
//! [`Rule::prompt`](crate::Rule::prompt) make the same rules. Precedence,
//! profiles and defaults are a tool's: deny wins, and a caller is shown
//! only the resources and prompts whose read it may make.
//!
//! ```
//! use serde_json::json;
//! use toolhost_policy::{CallRequest, Decision, Policy, Rule, SessionToggles, READ_RESOURCE};
//!
//! let policy = Policy::builder()
//!     .rule(Rule::resource(Decision::Deny, "file:///secret/*"))
//!     .build()?;
//! let args = json!({"uri": "file:///secret/keys/a.pem"});
//! let read = CallRequest::new(READ_RESOURCE, &args).plugin("files");
//! assert_eq!(policy.evaluate(&read, &SessionToggles::new()).decision, Decision::Deny);
//! # Ok::<(), toolhost_policy::PolicyError>(())
//! ```

/// The name a resource read is judged under; its argument `uri` holds the
/// resource's URI.
pub const READ_RESOURCE: &str = "resources/read";

/// The name a prompt's get is judged under; its argument `name` holds the
/// prompt's name as the caller sees it, `arguments` what the caller filled in.
pub const GET_PROMPT: &str = "prompts/get";

/// The argument of [`READ_RESOURCE`] that holds the URI.
pub const URI_ARG: &str = "uri";

/// The argument of [`GET_PROMPT`] that holds the prompt's name.
pub const NAME_ARG: &str = "name";
