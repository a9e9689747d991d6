//! Why an MCP server's source cannot be set up.

/// Why a source cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum McpClientError {
    /// The name is not a valid plugin name.
    #[error("MCP server name `{0}` must match ^[a-zA-Z0-9_-]{{1,64}}$")]
    InvalidName(String),
    /// The configuration cannot work (an empty command, a bad URL or header,
    /// a sandbox asked for where there is none).
    #[error("MCP server `{name}`: {message}")]
    Invalid {
        /// The server.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// An OAuth client with a secret, a key or a workload's JWT, and no
    /// `issuer`: the authorization server it may be sent to is not known.
    #[error(
        "MCP server `{name}`: its OAuth settings keep a client secret, a key or a workload's JWT, so they need `issuer`, \
         the authorization server's issuer identifier exactly as its metadata says it \
         (`issuer = \"https://login.example.com\"` in its `oauth` table): the secret (or JWT) \
         and the tokens' refresh go to that server only, whichever one the MCP server names"
    )]
    IssuerRequired {
        /// The server.
        name: String,
    },
}
