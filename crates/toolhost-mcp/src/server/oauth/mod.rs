//! `host serve` as an OAuth 2.1 resource server (the MCP authorization
//! spec's server side): the callers of `/mcp` bring access tokens from the
//! organization's authorization server, and who they are decides the
//! policy profile their calls run under.
//!
//! In order, for a request that carries no static token
//! (`server/http.rs` checks those first):
//!
//! 1. `metadata.rs`: what a client reads to find the authorization server
//!    by itself: the protected resource metadata (RFC 9728) at
//!    `/.well-known/oauth-protected-resource[/mcp]`, and the
//!    `WWW-Authenticate: Bearer resource_metadata=…, scope=…` challenge of
//!    a 401; and the issuer's own metadata (RFC 8414 or OpenID discovery),
//!    for its key set and introspection endpoint.
//! 2. `jwt.rs`: a JWT access token is checked against the issuer's keys
//!    (`keys.rs`: fetched, cached, fetched again for an unknown `kid`):
//!    signature with an allowed algorithm, issuer, audience (this server's
//!    resource URL), expiry and not-before with a small leeway.
//!    `introspection.rs`: any other token is asked about at the issuer's
//!    introspection endpoint (RFC 7662), when one is configured: an access
//!    token only, refused tokens remembered, one request per token, a
//!    bound on the requests a second and at once.
//! 3. `callers.rs`: the token's claims (subject, client, scopes, groups)
//!    become a [`Caller`], and the configured rules map it to a profile;
//!    a caller no rule maps is refused (or gets the `unmapped` profile).
//!
//! Verified tokens are remembered (by digest, never the token) until they
//! expire, at most [`CACHE_TTL`], so a client's every request does not
//! repeat the signature check or the introspection. Tokens are secrets:
//! none is ever logged, traced or put in an error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

mod callers;
mod fetch;
mod introspection;
mod jwt;
mod keys;
mod metadata;

pub use callers::{Caller, CallerRule};
pub(crate) use metadata::Discovery;

use crate::server::Asks;

/// The most leeway allowed on `exp` and `nbf` (five minutes).
pub const MAX_LEEWAY_SECONDS: u64 = 300;
/// How long a verified token is remembered at most (the token's own
/// expiry first): also how long a token revoked at the issuer may still be
/// taken when it is checked by introspection.
pub const CACHE_TTL: Duration = Duration::from_secs(60);
/// The most verified tokens remembered.
const CACHE_ENTRIES: usize = 4096;
/// The longest token read (longer: refused without a look).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// How `host serve` takes OAuth access tokens: the `[oauth]` table of the
/// configuration file.
///
/// ```
/// let options: toolhost_mcp::server::OAuthOptions = toml::from_str(r#"
///     issuer = "https://login.example.com/realms/acme"
///     resource = "https://tools.example.com/mcp"
///     scopes = ["tools"]
///
///     [[callers]]
///     subject = "alice@example.com"
///     profile = "reviewer"
///
///     [[callers]]
///     group = "sre"
///     profile = "ops"
///     ask = "operator"
/// "#).unwrap();
/// assert_eq!(options.callers.len(), 2);
/// assert_eq!(options.unmapped, None, "a caller no rule names is refused");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct OAuthOptions {
    /// The authorization server whose tokens are taken: its issuer
    /// identifier, exactly as its tokens' `iss` (and its metadata) say.
    pub issuer: String,
    /// This server's resource URL as clients reach it (the `/mcp`
    /// endpoint's public URL): tokens must carry it in `aud`. Default, on
    /// a loopback address only: `http://ADDRESS/mcp`.
    #[serde(default)]
    pub resource: Option<String>,
    /// Other `aud` values a token may carry instead of the resource URL
    /// (an authorization server that names its APIs otherwise).
    #[serde(default)]
    pub audiences: Vec<String>,
    /// Scopes every token must hold; told to clients in the 401's
    /// `scope` and the metadata's `scopes_supported`.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The issuer's key set; default: the `jwks_uri` of its metadata.
    #[serde(default)]
    pub jwks_uri: Option<String>,
    /// Seconds of clock skew allowed on `exp` and `nbf` (default 30, at
    /// most [`MAX_LEEWAY_SECONDS`]).
    #[serde(default = "default_leeway")]
    pub leeway_seconds: u64,
    /// The claim that lists a caller's groups (default `groups`).
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Opaque (non-JWT) tokens are checked at the issuer's introspection
    /// endpoint (RFC 7662) with these credentials; without it only JWTs
    /// are taken.
    #[serde(default)]
    pub introspection: Option<IntrospectionOptions>,
    /// Who runs under which profile: the first rule that matches a caller
    /// wins ([`CallerRule`]).
    #[serde(default)]
    pub callers: Vec<CallerRule>,
    /// The profile of a caller no rule matches; `None` (the default): such
    /// a caller is refused (HTTP 403) and calls nothing.
    #[serde(default)]
    pub unmapped: Option<String>,
}

fn default_leeway() -> u64 {
    30
}

fn default_groups_claim() -> String {
    "groups".to_owned()
}

/// How the resource server asks the issuer about an opaque token.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct IntrospectionOptions {
    /// The endpoint; default: the `introspection_endpoint` of the issuer's
    /// metadata.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// This server's client id at the issuer.
    pub client_id: String,
    /// The environment variable that holds its client secret (sent with
    /// HTTP Basic).
    pub client_secret_env: String,
    /// The most introspection requests sent in a second (default 10, at
    /// most 1000); a new opaque token beyond it is answered 503 without
    /// asking. Tokens checked before keep being taken.
    #[serde(default)]
    pub max_per_second: Option<u32>,
}

/// Why OAuth cannot be set up or the issuer cannot be reached.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OAuthError {
    /// The configuration is wrong.
    #[error("[oauth]: {0}")]
    Config(String),
    /// The authorization server did not answer as it should.
    #[error("the authorization server at {url} cannot be used: {why}")]
    Unreachable {
        /// Where (without query).
        url: String,
        /// What went wrong.
        why: String,
    },
    /// More new opaque tokens to check than introspection's bounds take.
    #[error(
        "more new opaque tokens to check than the bound on introspection ({per_second} requests a second, {at_once} at once)"
    )]
    Busy {
        /// The requests sent in a second at most.
        per_second: u32,
        /// The requests in flight at most.
        at_once: usize,
    },
}

/// Why a token is refused (for the access log; the client hears only
/// that its token is invalid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenProblem {
    /// Not a JWT, or one that cannot be read.
    Malformed,
    /// Signed with an algorithm not allowed (`none`, HMAC, …).
    Algorithm,
    /// Names a key the issuer does not have.
    UnknownKey,
    /// Names a key of another kind than its algorithm.
    KeyMismatch,
    /// The signature does not verify.
    Signature,
    /// Another issuer's.
    Issuer,
    /// For another resource.
    Audience,
    /// Expired.
    Expired,
    /// Not valid yet.
    NotYetValid,
    /// A claim needed is missing or not of its type.
    Claims,
    /// The issuer says the token is not active.
    Inactive,
    /// The issuer says it is another kind of token (a refresh token).
    NotAnAccessToken,
    /// Longer than [`MAX_TOKEN_BYTES`].
    TooLong,
    /// Not a JWT, and no introspection is configured.
    NotJwt,
}

impl TokenProblem {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TokenProblem::Malformed => "malformed",
            TokenProblem::Algorithm => "algorithm not allowed",
            TokenProblem::UnknownKey => "unknown signing key",
            TokenProblem::KeyMismatch => "key of another kind than the algorithm",
            TokenProblem::Signature => "bad signature",
            TokenProblem::Issuer => "wrong issuer",
            TokenProblem::Audience => "wrong audience",
            TokenProblem::Expired => "expired",
            TokenProblem::NotYetValid => "not valid yet",
            TokenProblem::Claims => "claims missing or malformed",
            TokenProblem::Inactive => "not active",
            TokenProblem::NotAnAccessToken => "not an access token",
            TokenProblem::TooLong => "too long",
            TokenProblem::NotJwt => "not a JWT (no introspection configured)",
        }
    }
}

/// What came of checking a token.
#[derive(Debug)]
pub(crate) enum Checked {
    /// A caller, with what it may do here.
    Admitted(Admitted),
    /// The token is not good (401, `invalid_token`).
    Invalid(TokenProblem),
    /// A good token without every scope required (403,
    /// `insufficient_scope`).
    InsufficientScope(Caller),
    /// A good token of a caller no rule maps (403).
    Unmapped(Caller),
    /// The issuer's keys or introspection cannot be had (503).
    Unavailable(OAuthError),
}

/// A caller let in, and how its calls run.
#[derive(Debug, Clone)]
pub(crate) struct Admitted {
    pub(crate) caller: Caller,
    /// Its profile (`None`: the server's).
    pub(crate) profile: Option<String>,
    /// Who answers its asks (`None`: its profile's or the server's).
    pub(crate) asks: Option<Asks>,
}

/// The resource server: checks tokens and maps their callers.
pub(crate) struct ResourceServer {
    issuer: String,
    resource: String,
    audiences: Vec<String>,
    scopes: Vec<String>,
    leeway: u64,
    groups_claim: String,
    fetcher: fetch::Fetcher,
    keys: keys::Keys,
    introspection: Option<introspection::Introspection>,
    callers: Vec<CallerRule>,
    unmapped: Option<String>,
    metadata: metadata::ResourceMetadata,
    cache: parking_lot::Mutex<lru::LruCache<[u8; 32], (Caller, Instant)>>,
}

impl ResourceServer {
    /// Checks `options` and sets up; `default_resource` is the resource URL
    /// when the options give none (`None` off loopback: then it is needed).
    pub(crate) fn new(
        options: &OAuthOptions,
        default_resource: Option<String>,
    ) -> Result<ResourceServer, OAuthError> {
        crate::crypto::jwt_crypto();
        let issuer = fetch::endpoint("issuer", &options.issuer)?;
        let resource = options
            .resource
            .clone()
            .or(default_resource)
            .ok_or_else(|| {
                OAuthError::Config(
                "`resource` is needed off loopback: this server's /mcp URL as clients reach it \
                 (https://…/mcp), which tokens must carry in `aud`"
                    .to_owned(),
            )
            })?;
        let resource_url = url::Url::parse(&resource).map_err(|e| {
            OAuthError::Config(format!(
                "resource `{}` is not a URL: {e}",
                toolhost_text::line(&resource, 200)
            ))
        })?;
        if !matches!(resource_url.scheme(), "https" | "http") || resource_url.fragment().is_some() {
            return Err(OAuthError::Config(
                "resource must be an http(s) URL without a fragment".to_owned(),
            ));
        }
        if options.leeway_seconds > MAX_LEEWAY_SECONDS {
            return Err(OAuthError::Config(format!(
                "leeway-seconds is at most {MAX_LEEWAY_SECONDS}"
            )));
        }
        for rule in &options.callers {
            rule.check().map_err(OAuthError::Config)?;
        }
        if options.groups_claim.is_empty() {
            return Err(OAuthError::Config("groups-claim is empty".to_owned()));
        }
        if let Some(bad) = options.scopes.iter().find(|s| !metadata::is_scope_token(s)) {
            return Err(OAuthError::Config(format!(
                "scope `{}` is not a scope token (visible ASCII, no space, `\"` or `\\`)",
                toolhost_text::line(bad, 100)
            )));
        }
        let discovery = Arc::new(Discovery::new(issuer, &options.issuer));
        let key_source = match &options.jwks_uri {
            Some(uri) => keys::KeySource::Url(fetch::endpoint("jwks-uri", uri)?),
            None => keys::KeySource::Discover(discovery.clone()),
        };
        let rules = introspection::Rules {
            issuer: options.issuer.clone(),
            audiences: std::iter::once(resource.clone())
                .chain(options.audiences.iter().cloned())
                .collect(),
            leeway: options.leeway_seconds,
            groups_claim: options.groups_claim.clone(),
        };
        let introspection = options
            .introspection
            .as_ref()
            .map(|i| introspection::Introspection::new(i, discovery.clone(), rules))
            .transpose()?;
        let metadata =
            metadata::ResourceMetadata::new(&resource_url, &options.issuer, &options.scopes);
        Ok(ResourceServer {
            issuer: options.issuer.clone(),
            resource,
            audiences: options.audiences.clone(),
            scopes: options.scopes.clone(),
            leeway: options.leeway_seconds,
            groups_claim: options.groups_claim.clone(),
            fetcher: fetch::Fetcher::new()?,
            keys: keys::Keys::new(key_source),
            introspection,
            callers: options.callers.clone(),
            unmapped: options.unmapped.clone(),
            metadata,
            cache: parking_lot::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(CACHE_ENTRIES).unwrap_or(std::num::NonZeroUsize::MIN),
            )),
        })
    }

    /// The resource URL tokens must name.
    pub(crate) fn resource(&self) -> &str {
        &self.resource
    }

    /// The issuer whose tokens are taken.
    pub(crate) fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The protected resource metadata and the challenges of refusals.
    pub(crate) fn metadata(&self) -> &metadata::ResourceMetadata {
        &self.metadata
    }

    /// The `aud` values a token may carry.
    fn audiences(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.resource.as_str()).chain(self.audiences.iter().map(String::as_str))
    }

    /// Checks `token` and says who it is and what it may do.
    pub(crate) async fn check(&self, token: &str) -> Checked {
        let caller = match self.verify(token).await {
            Ok(caller) => caller,
            Err(Verified::Invalid(problem)) => return Checked::Invalid(problem),
            Err(Verified::Unavailable(e)) => return Checked::Unavailable(e),
        };
        if !self.scopes.iter().all(|s| caller.scopes.contains(s)) {
            return Checked::InsufficientScope(caller);
        }
        match callers::map(&self.callers, &caller) {
            Some(rule) => Checked::Admitted(Admitted {
                profile: rule.profile.clone(),
                asks: rule.ask,
                caller,
            }),
            None => match &self.unmapped {
                Some(profile) => Checked::Admitted(Admitted {
                    profile: Some(profile.clone()),
                    asks: None,
                    caller,
                }),
                None => Checked::Unmapped(caller),
            },
        }
    }

    /// The caller of a good token, from the cache or checked anew.
    async fn verify(&self, token: &str) -> Result<Caller, Verified> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Verified::Invalid(TokenProblem::TooLong));
        }
        let digest: [u8; 32] = {
            use sha2::Digest;
            sha2::Sha256::digest(token.as_bytes()).into()
        };
        if let Some((caller, until)) = self.cache.lock().get(&digest)
            && Instant::now() < *until
        {
            return Ok(caller.clone());
        }
        let (caller, expires) = if jwt::looks_like_jwt(token) {
            jwt::verify(self, token).await?
        } else if let Some(introspection) = &self.introspection {
            introspection.check(self, token, digest).await?
        } else {
            return Err(Verified::Invalid(TokenProblem::NotJwt));
        };
        let now = unix_now();
        let left = Duration::from_secs(expires.map_or(0, |exp| exp.saturating_sub(now)));
        let keep = left.min(CACHE_TTL);
        if !keep.is_zero() {
            self.cache
                .lock()
                .put(digest, (caller.clone(), Instant::now() + keep));
        }
        Ok(caller)
    }
}

/// Why a token gave no caller.
#[derive(Debug, Clone)]
pub(crate) enum Verified {
    Invalid(TokenProblem),
    Unavailable(OAuthError),
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_url_is_needed_off_loopback_and_the_leeway_is_small() {
        let mut options = OAuthOptions {
            issuer: "https://login.example.com".into(),
            leeway_seconds: 30,
            groups_claim: "groups".into(),
            ..OAuthOptions::default()
        };
        assert!(ResourceServer::new(&options, None).is_err());
        assert!(ResourceServer::new(&options, Some("http://127.0.0.1:1/mcp".into())).is_ok());
        options.resource = Some("https://tools.example.com/mcp".into());
        assert!(ResourceServer::new(&options, None).is_ok());
        options.leeway_seconds = 3600;
        assert!(ResourceServer::new(&options, None).is_err());
        options.leeway_seconds = 30;
        options.issuer = "http://login.example.com".into();
        assert!(
            ResourceServer::new(&options, None).is_err(),
            "an issuer over plain http off loopback"
        );
    }
}
