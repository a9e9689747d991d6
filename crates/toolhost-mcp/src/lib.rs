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
//! approval), exactly as the agent loop's and `host call`'s do. How tools
//! and results map to MCP is in `tools.rs`; the server is in `server/`
//! (how an `ask` reaches the client's user in `server/elicit.rs`, the HTTP
//! endpoint in `server/http.rs`, the OAuth resource server in
//! `server/oauth/`), the client of external servers, a tool
//! source, in `client/`.
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

mod client;
mod server;
mod tools;

pub use client::{
    ANSWER_TIMEOUT, DEFAULT_MAX_SAMPLING_TOKENS, DEFAULT_REQUESTS_PER_MINUTE, MAX_FORWARDED_BYTES,
    ServerRequests,
};
pub use client::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_ENV, DEFAULT_MAX_MESSAGE_BYTES, HttpEndpoint, MAX_SIGN_INS,
    McpClientError, McpServerConfig, McpSource, McpTransport, OAuthGrant, OAuthSettings,
    ProcessSandbox, SIGN_IN_TIMEOUT, SignInError, SignInPrompt, SignedIn, Start, StdioServer,
    sign_in, sign_out, token_file,
};
pub use server::elicit::ELICITATION_TIMEOUT;
pub use server::http::{
    ClientToken, DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_REQUEST_BYTES, HttpOptions,
    HttpServer, TokenFileError, TokenRole,
};
pub use server::oauth::{
    CACHE_TTL as OAUTH_CACHE_TTL, Caller, CallerRule, IntrospectionOptions, MAX_LEEWAY_SECONDS,
    MAX_TOKEN_BYTES, OAuthError, OAuthOptions,
};
pub use server::{Asks, McpServer, ServerOptions};
pub use tools::{CACHED_META_KEY, DETAILS_META_KEY, ERROR_KIND_META_KEY, PLUGIN_META_KEY};

/// Why a server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// The transport could not be set up (e.g. the client never initialised).
    #[error("the MCP server could not start: {0}")]
    Start(String),
    /// The server stopped with an error.
    #[error("the MCP server stopped: {0}")]
    Stopped(String),
    /// The address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(std::net::SocketAddr, String),
    /// A non-loopback address without a bearer token.
    #[error(
        "refusing to listen on {0} without a bearer token: anyone who can reach it could call \
         every tool (give a token, or listen on 127.0.0.1)"
    )]
    TokenRequired(std::net::SocketAddr),
    /// An empty bearer token.
    #[error("the bearer token is empty")]
    EmptyToken,
    /// The console asked for where tokens are set, with no operator's
    /// among them: nobody could sign in.
    #[error(
        "the console needs an operator's token when tokens are set (a line with role=operator in the token file)"
    )]
    NoOperatorToken,
    /// OAuth cannot be set up (`HttpOptions::oauth`).
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// A call's `ask` goes to the operator, and no console is served
    /// where the operator could answer it.
    #[error("ask=operator needs the console (host serve --console), where the operator answers")]
    NoConsole,
}

/// Selects jsonwebtoken's RustCrypto provider for the process (once): with
/// both its `rust_crypto` (ours) and `aws_lc_rs` (rmcp's client-credentials
/// JWT) features on, it picks none by itself and panics at first use.
pub(crate) fn jwt_crypto() {
    let _ = jsonwebtoken::crypto::CryptoProvider::install_default(
        &jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER,
    );
}
