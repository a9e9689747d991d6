//! The MCP client: an external MCP server as a tool source
//! ([`McpSource`], a [`ToolSource`]). Its tools join the runtime's
//! registry as `PREFIX` + their names (`git__status`), and every call to
//! one goes through the runtime's one pipeline — policy, hooks, approvals,
//! limits, events — like a plugin's.
//!
//! A source keeps one connection to its server, made by a task of its own
//! (`session.rs`; `connect.rs` starts the process or opens the HTTP
//! session):
//!
//! - at start-up (`start = "eager"`: building the runtime waits for it,
//!   within `connect-timeout`) or in the background (`"lazy"`: the host
//!   starts serving at once and the tools join when the server answers);
//! - a server that exits or drops the connection is reconnected, at once
//!   the first time and then with a backoff from 0.5 s doubling to 30 s,
//!   while calls to its tools fail at once with the reason (a dead server
//!   is a tool error, never a hung agent);
//! - `notifications/tools/list_changed` re-lists its tools, and the
//!   runtime's registry follows;
//! - every message it sends is bounded (`max-message-bytes`), every list
//!   it pages through too, and its calls run under the runtime's
//!   `timeout-ms` for it (a call past it is cancelled on the server).
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolhost_mcp::{McpServerConfig, McpSource};
//!
//! let time = McpSource::start(McpServerConfig::stdio("time", "mcp-server-time", &[]))?;
//! let runtime = toolhost_runtime::Runtime::builder()
//!     .source(Arc::new(time))
//!     .build()
//!     .await?;
//! let now = runtime
//!     .call("time__get_current_time", serde_json::json!({"timezone": "UTC"}), Default::default())
//!     .await?;
//! println!("{}", now.output);
//! # Ok(()) }
//! ```
//!
//! The files, lowest first (each imports only those above it): `error.rs`,
//! `requests.rs` (what a server asks during a call), `oauth/` (signing in
//! to a server), `config.rs`, `connect.rs`, `sign_in.rs`, `link.rs` (the
//! connection as requests see it), `offers.rs` (resources, prompts,
//! completion, logging), `state.rs` (what a source and its task share),
//! `handler.rs` (what the client answers its server), `input.rs` (a
//! server's `input_required`: relayed to a 2026-07-28 caller or answered
//! here), `call.rs` (`tools/call`), `session.rs` (the connection task), `source.rs`
//! ([`McpSource`]). The client never imports the server (`crate::server`);
//! the gateway (`gateway.rs`) joins them.

mod call;
mod config;
mod connect;
mod error;
mod handler;
mod input;
mod link;
mod oauth;
mod offers;
mod prompt;
mod requests;
mod revisions;
mod session;
mod sign_in;
pub mod skills;
mod source;
mod state;
mod task;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_ENV, DEFAULT_MAX_MESSAGE_BYTES, HttpEndpoint, McpServerConfig,
    McpTransport, ProcessSandbox, Start, StdioServer,
};
pub use error::McpClientError;
pub use oauth::{
    EnterpriseIdp, MAX_SIGN_INS, OAuthGrant, SIGN_IN_TIMEOUT, ShowSignIn, SignInError,
    SignInPrompt, SignedIn, UpstreamOAuth, sign_out, token_file,
};
pub use requests::{
    ANSWER_TIMEOUT, DEFAULT_MAX_SAMPLING_TOKENS, DEFAULT_REQUESTS_PER_MINUTE, MAX_FORWARDED_BYTES,
    ServerRequests,
};
pub use sign_in::sign_in;
pub use skills::SkillError;
pub use source::McpSource;
