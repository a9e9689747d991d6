//! How the HTTP endpoint listens and whom it lets in ([`HttpOptions`]).

use std::net::SocketAddr;

use super::super::oauth::OAuthOptions;
use super::tokens::{ClientToken, TokenRole};

/// Largest request body accepted by default (4 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// Most requests served at once by default; more get HTTP 503.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 256;

/// How the HTTP endpoint listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The bearer tokens a request to `/mcp` may carry (`Authorization:
    /// Bearer …`), each with the policy profile its client's calls run
    /// under (`None`: the server's). Empty (and no `oauth`): no token
    /// needed, which only a loopback address allows.
    pub tokens: Vec<ClientToken>,
    /// OAuth access tokens from the organization's authorization server,
    /// taken beside `tokens` ([`OAuthOptions`]): a request whose bearer
    /// token is none of `tokens` is checked as an access token, and its
    /// caller's claims choose its profile.
    pub oauth: Option<OAuthOptions>,
    /// `Host` header values accepted besides loopback names (the names
    /// clients reach this server by, when it is not on loopback).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted (`https://app.example.com:443`); a request
    /// with any other `Origin` header is refused (DNS-rebinding defence).
    /// Requests without `Origin` (not from a browser) are not affected.
    pub allowed_origins: Vec<String>,
    /// Largest request body (HTTP 413 beyond).
    pub max_request_bytes: usize,
    /// Most requests served at once (HTTP 503 beyond).
    pub max_concurrent_requests: usize,
    /// Serve every request statelessly (no `Mcp-Session-Id`, even for
    /// clients of 2025-11-25 and older), so any replica can answer any
    /// request. 2026-07-28 requests are always stateless.
    pub stateless: bool,
    /// Serve `/metrics` without a bearer token even when tokens are set
    /// (for a scraper on a private network). Off by default: the figures
    /// tell who calls which tool how often.
    pub metrics_public: bool,
    /// Serve the operator's console at `/console` (`toolhost-console`, the
    /// default `console` feature). Only an operator signs in to it: with
    /// an operator's token from `tokens`, or, when no token is set, with a
    /// one-time token the console makes at start
    /// ([`HttpServer::console_token`]).
    pub console: bool,
}

impl HttpOptions {
    /// Listening on `127.0.0.1:port` with the defaults and no token.
    pub fn local(port: u16) -> HttpOptions {
        HttpOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            tokens: Vec::new(),
            oauth: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            stateless: false,
            metrics_public: false,
            console: false,
        }
    }
}

/// The operators' tokens among `options`'.
pub(super) fn operator_tokens(options: &HttpOptions) -> Vec<String> {
    options
        .tokens
        .iter()
        .filter(|t| t.role == TokenRole::Operator)
        .map(|t| t.token.clone())
        .collect()
}
