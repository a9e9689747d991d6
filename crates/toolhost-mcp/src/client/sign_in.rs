//! Signing in to an upstream HTTP server now (`host mcp login NAME`):
//! the server's challenge (`connect.rs`) and the sign-in of its OAuth
//! settings (`oauth/`).

use super::config::{McpServerConfig, McpTransport};
use super::connect;
use super::error::McpClientError;
use super::oauth::{self, Authorizer, SignedIn};

/// Signs in to the HTTP server of `config` now, whatever tokens are kept,
/// and keeps the new ones: asks the server (its 401 names where to sign
/// in), then signs in with the grant of its OAuth settings (a person's
/// browser through their [`SignInPrompt`](super::oauth::SignInPrompt), or the client's credentials).
///
/// ```no_run
/// # async fn run() -> Result<(), toolhost_mcp::McpClientError> {
/// use std::sync::Arc;
/// use toolhost_mcp::McpServerConfig;
/// use toolhost_mcp::client::{McpTransport, SignInPrompt, UpstreamOAuth};
///
/// let mut config = McpServerConfig::http("docs", "https://mcp.example.com/mcp");
/// if let McpTransport::Http(endpoint) = &mut config.transport {
///     endpoint.oauth = Some(UpstreamOAuth {
///         token_dir: Some("/home/me/.local/share/toolhost/oauth".into()),
///         prompt: Some(SignInPrompt(Arc::new(|server, url| {
///             eprintln!("sign in to {server}: {url}")
///         }))),
///         ..UpstreamOAuth::default()
///     });
/// }
/// let signed = toolhost_mcp::client::sign_in(&config).await?;
/// println!("granted: {}", signed.scopes.join(" "));
/// # Ok(()) }
/// ```
pub async fn sign_in(config: &McpServerConfig) -> Result<SignedIn, McpClientError> {
    let invalid = |message: String| McpClientError::Invalid {
        name: config.name.clone(),
        message,
    };
    let McpTransport::Http(endpoint) = &config.transport else {
        return Err(invalid("only an HTTP server signs in (OAuth)".into()));
    };
    let Some(settings) = &endpoint.oauth else {
        return Err(invalid("OAuth is not set for this server".into()));
    };
    oauth::check(&config.name, settings)?;
    connect::check(config).map_err(invalid)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let signed = async {
        let challenge = Some(connect::challenge(config).await?);
        let authorizer = Authorizer::new(&config.name, &endpoint.url, settings).await?;
        authorizer.sign_in_now(challenge.as_deref(), settings).await
    }
    .await;
    signed.map_err(|e| invalid(e.to_string()))
}
