//! Who is calling over HTTP, as the server adapter reads it from a
//! request's extensions: the profile a bearer token carries, and an
//! identity of the token (never the secret) that keys the result cache.

/// The profile the request's token names, for the server to read
/// (`server/mod.rs`): set on the HTTP request by `admit`.
#[derive(Debug, Clone)]
pub(crate) struct ClientProfile(pub(crate) String);

/// Which client a request came from, for the result cache and saved
/// approvals (`server/mod.rs` sets it on the call): its bearer token's
/// digest (never the token), an OAuth caller's `oauth:SUBJECT`, else how
/// it came (`mcp-stdio`, or `mcp-http` for any caller of a server without
/// tokens, on loopback).
#[derive(Debug, Clone)]
pub(crate) struct ClientIdentity(pub(crate) String);

/// The identity of the client of a server over stdio.
pub(crate) const STDIO: &str = "mcp-stdio";
/// The identity of every client of an HTTP server without tokens.
pub(crate) const HTTP_WITHOUT_TOKEN: &str = "mcp-http";

impl ClientIdentity {
    pub(crate) fn of_token(token: &str) -> Self {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(token.as_bytes()));
        ClientIdentity(format!("token:{}", &digest[..16]))
    }

    /// The identity of the client that sent the request of `context`.
    pub(crate) fn of_request(
        context: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
    ) -> Self {
        match context.extensions.get::<::http::request::Parts>() {
            Some(parts) => parts
                .extensions
                .get::<ClientIdentity>()
                .cloned()
                .unwrap_or_else(|| ClientIdentity(HTTP_WITHOUT_TOKEN.to_owned())),
            None => ClientIdentity(STDIO.to_owned()),
        }
    }
}

/// Who answers the `ask`s of the request's token, when the token file says
/// (`ask=operator`): set on the HTTP request by `admit`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAsks(pub(crate) super::Asks);
