//! Why a server could not start or stopped.

use super::oauth::OAuthError;

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
