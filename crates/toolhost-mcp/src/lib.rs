//! toolhost over the Model Context Protocol.
//!
//! [`McpServer`] serves a [`toolhost_runtime::Runtime`]'s tools to any MCP
//! client (Claude Code, Codex, Cursor, goose, the MCP SDKs), over stdio
//! ([`McpServer::serve_stdio`]) or Streamable HTTP ([`HttpServer`]), for
//! protocol revisions 2025-11-25 (and older) and 2026-07-28, through
//! [rmcp](https://docs.rs/rmcp), the official Rust SDK.
//!
//! It is an adapter: every call goes through `Runtime::call`, the one call
//! pipeline (lookup, validation, policy, hooks, approval, limits, result
//! approval), exactly as the agent loop's and `host call`'s do. Two parts
//! that never import each other, as rmcp's `handler/{client,server}`:
//!
//! - [`server`]: the MCP server over the runtime (how an `ask` reaches the
//!   client's user in `server/elicit.rs`, the HTTP endpoint in
//!   `server/http/`, the OAuth resource server in `server/oauth/`);
//! - [`client`]: the client of external MCP servers, each a tool source
//!   ([`McpSource`]), and its sign-in to them (`client/oauth/`).
//!
//! Below both: how tools and results map to MCP (`tools.rs`), and what both
//! know of the peers a call passes between (`peer/`: the client a call came
//! from, an upstream server's notices). The gateway (`gateway.rs`) joins
//! them: it serves the upstream servers' resources and prompts through the
//! server, implementing for [`McpSource`] the small trait the server
//! declares. The root names what most users need; the rest is under
//! [`server`] and [`client`].
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use toolhost_mcp::{HttpOptions, HttpServer, McpServer, ServerOptions};
//!
//! let runtime = toolhost_runtime::Runtime::builder()
//!     .plugin_dir("target/plugins")
//!     .watch(true)
//!     .build()
//!     .await?;
//! let server = McpServer::new(runtime, ServerOptions::default());
//! let http = HttpServer::bind(server, HttpOptions::local(8080)).await?;
//! http.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

pub mod client;
mod crypto;
mod gateway;
mod peer;
pub mod server;
mod skill_files;
mod tools;

pub use client::{McpClientError, McpServerConfig, McpSource, SignInError};
pub use server::{
    ClientToken, HttpOptions, HttpServer, McpServeError, McpServer, OAuthError, ServerOptions,
};

/// The old name of [`client::UpstreamOAuth`] (how the client signs in to
/// an upstream server), beside the server's [`server::OAuthOptions`].
#[deprecated(note = "renamed `toolhost_mcp::client::UpstreamOAuth`")]
pub type OAuthSettings = client::UpstreamOAuth;
