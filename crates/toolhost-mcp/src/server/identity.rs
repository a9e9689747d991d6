//! Who is calling over HTTP, as the server adapter reads it from a
//! request's extensions: the profile a bearer token carries, and an
//! identity of the token (never the secret) that keys the result cache.

/// The profile the request's token names, for the server to read
/// (`server/mod.rs`): set on the HTTP request by `admit`.
#[derive(Debug, Clone)]
pub(crate) struct ClientProfile(pub(crate) String);

/// Which client a request came from, for the result cache (`server/mod.rs`
/// sets it on the call): its bearer token's digest, never the token.
#[derive(Debug, Clone)]
pub(crate) struct ClientIdentity(pub(crate) String);

impl ClientIdentity {
    pub(crate) fn of_token(token: &str) -> Self {
        use sha2::Digest;
        let digest = hex::encode(sha2::Sha256::digest(token.as_bytes()));
        ClientIdentity(format!("token:{}", &digest[..16]))
    }
}

/// Who answers the `ask`s of the request's token, when the token file says
/// (`ask=operator`): set on the HTTP request by `admit`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAsks(pub(crate) super::Asks);
