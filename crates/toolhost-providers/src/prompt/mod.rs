//! A prompt-based tool protocol, for models without native tool calling.
//!
//! [`PromptTools`] wraps any [`Provider`](crate::Provider): it describes the
//! tools in the system prompt with the calling convention of a
//! [`PromptProfile`], sends the request without native tools, and parses the
//! calls back out of the text.
//! Earlier calls and results in the history are written in the same
//! convention (results go back as user messages).
//!
//! - `profile.rs`: the two conventions ([`PromptProfile`]: json, xml).
//! - `render.rs`: rendering, the request as sent in a convention: the tool
//!   definitions in the system prompt, calls and results in the history as
//!   text, stop sequences, and the schema a constrained reply follows.
//! - `parse.rs`: parsing, the calls out of the model's text.
//! - `stream.rs`: streaming, holding back the call text while the reply
//!   streams, so that user interfaces show only the answer.
//! - `provider.rs`: [`PromptTools`], the provider that puts the three
//!   together around a wrapped one, and [`Constrain`].
//!
//! ```
//! use toolhost_providers::prompt::{PromptProfile, parse_tool_calls};
//!
//! let (text, calls) = parse_tool_calls(
//!     PromptProfile::Xml,
//!     "Let me check.\n<tool_code>{\"name\": \"calc\", \"arguments\": {\"e\": \"2+2\"}}</tool_code>",
//! );
//! assert_eq!(text, "Let me check.");
//! assert_eq!(calls[0].name, "calc");
//! assert_eq!(calls[0].arguments, r#"{"e":"2+2"}"#);
//! ```

mod parse;
mod profile;
mod provider;
mod render;
mod stream;

pub use parse::parse_tool_calls;
pub use profile::PromptProfile;
pub use provider::{Constrain, PromptTools, complete_through_prompt};
pub use render::{
    call_schema, render_tool_calls, render_tool_result, reply_schema, result_markers,
    tool_instructions,
};
pub(crate) use stream::filter_deltas;
