//! An opaque access token asked about at the issuer's introspection
//! endpoint (RFC 7662), with this server's client credentials. The answer
//! is held to the same rules as a JWT's claims: active, an access token
//! (not a refresh token), the configured issuer (when it names one), this
//! server's resource in `aud`, not expired, not before its time.
//!
//! Every opaque token anyone sends would cost a request to the issuer, so
//! the requests are bounded, as the key set's fetches for unknown `kid`s
//! are (`keys.rs`):
//!
//! - a token the answer refused is refused again without asking, for
//!   [`REFUSED_TTL`] ([`REFUSED_ENTRIES`] remembered, by digest);
//! - one request per token at a time: those who bring the same token
//!   meanwhile wait for its answer (the request runs on its own task with
//!   the fetch's time limit, so no caller that leaves strands the others);
//! - at most [`MAX_IN_FLIGHT`] requests at once, and at most
//!   `max-per-second` (default [`DEFAULT_PER_SECOND`]) sent in any second:
//!   a token that finds no room is answered 503 (`Retry-After`) without
//!   asking, so a flood of made-up tokens never pushes the issuer into its
//!   own rate limit. Tokens checked before are remembered and keep being
//!   taken meanwhile (`CACHE_TTL`).
//!
//! `token_type` is optional in an answer (RFC 7662, 2.2): one that names
//! a type other than an access token's (`Bearer`, or `access_token`) is
//! refused, and so are the markers two issuers use instead (Ory Hydra's
//! `token_use`, Keycloak's `typ`). An answer without any is taken: many
//! issuers leave it out for access tokens, and the `aud` check holds a
//! refresh token off where it names no resource (`oidc-provider`'s).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use serde_json::Value;

use super::metadata::Discovery;
use super::{
    CACHE_TTL, Caller, IntrospectionOptions, OAuthError, ResourceServer, TokenProblem, Verified,
    fetch, unix_now,
};

/// How long a refused token is refused without asking again.
pub(crate) const REFUSED_TTL: Duration = CACHE_TTL;
/// The most refused tokens remembered.
pub(crate) const REFUSED_ENTRIES: usize = 4096;
/// The most introspection requests in flight at once.
pub(crate) const MAX_IN_FLIGHT: usize = 8;
/// The default bound on the requests sent in a second.
pub(crate) const DEFAULT_PER_SECOND: u32 = 10;
/// The largest `max-per-second`.
pub(crate) const MAX_PER_SECOND: u32 = 1000;

/// What the issuer's answer about one token came to, shared by all who
/// wait for it.
type Answer = Shared<BoxFuture<'static, Judged>>;
type Judged = Result<(Caller, Option<u64>), Verified>;

/// What an answer is held to: the server's issuer, the `aud` values it
/// takes, its leeway and its groups claim.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    pub(crate) issuer: String,
    pub(crate) audiences: Vec<String>,
    pub(crate) leeway: u64,
    pub(crate) groups_claim: String,
}

/// Tokens refused, by digest, and until when.
type Refused = parking_lot::Mutex<lru::LruCache<Digest, (TokenProblem, Instant)>>;

/// A token's digest (SHA-256).
pub(crate) type Digest = [u8; 32];

/// Where and as whom tokens are introspected, and the bounds on it.
pub(crate) struct Introspection {
    endpoint: Option<url::Url>,
    discovery: Arc<Discovery>,
    client_id: Arc<str>,
    secret: Arc<str>,
    per_second: u32,
    rules: Arc<Rules>,
    /// Tokens the issuer's answer refused, and until when they stay so.
    refused: Arc<Refused>,
    /// The requests in flight, by the token's digest.
    in_flight: Arc<parking_lot::Mutex<HashMap<Digest, Answer>>>,
    /// When the requests of the last second were sent.
    sent: parking_lot::Mutex<VecDeque<Instant>>,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("per_second", &self.per_second)
            .finish_non_exhaustive()
    }
}

impl Introspection {
    pub(crate) fn new(
        options: &IntrospectionOptions,
        discovery: Arc<Discovery>,
        rules: Rules,
    ) -> Result<Introspection, OAuthError> {
        let endpoint = options
            .endpoint
            .as_deref()
            .map(|e| fetch::endpoint("introspection endpoint", e))
            .transpose()?;
        let secret = std::env::var(&options.client_secret_env).map_err(|_| {
            OAuthError::Config(format!(
                "introspection: the variable {} (the client secret) is not set",
                toolhost_text::line(&options.client_secret_env, 100)
            ))
        })?;
        if options.client_id.is_empty() || secret.is_empty() {
            return Err(OAuthError::Config(
                "introspection: the client id and secret may not be empty".to_owned(),
            ));
        }
        let per_second = options.max_per_second.unwrap_or(DEFAULT_PER_SECOND);
        if !(1..=MAX_PER_SECOND).contains(&per_second) {
            return Err(OAuthError::Config(format!(
                "introspection: max-per-second is from 1 to {MAX_PER_SECOND}"
            )));
        }
        Ok(Introspection {
            endpoint,
            discovery,
            client_id: options.client_id.as_str().into(),
            secret: secret.into(),
            per_second,
            rules: Arc::new(rules),
            refused: Arc::new(parking_lot::Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(REFUSED_ENTRIES).unwrap_or(std::num::NonZeroUsize::MIN),
            ))),
            in_flight: Arc::default(),
            sent: parking_lot::Mutex::new(VecDeque::new()),
        })
    }

    /// The caller of a good opaque token (of digest `digest`), and when
    /// it expires.
    pub(crate) async fn check(
        &self,
        server: &ResourceServer,
        token: &str,
        digest: Digest,
    ) -> Result<(Caller, Option<u64>), Verified> {
        if let Some(problem) = self.refused_before(&digest) {
            return Err(Verified::Invalid(problem));
        }
        self.ask(server, token, digest).await
    }

    /// Why the issuer's answer refused this token lately, if it did.
    fn refused_before(&self, digest: &Digest) -> Option<TokenProblem> {
        let mut refused = self.refused.lock();
        match refused.get(digest) {
            Some((problem, until)) if Instant::now() < *until => Some(*problem),
            Some(_) => {
                refused.pop(digest);
                None
            }
            None => None,
        }
    }

    /// The issuer's answer about `token`: the one in flight for it, else a
    /// new request, when the bounds leave room for one.
    async fn ask(&self, server: &ResourceServer, token: &str, digest: Digest) -> Judged {
        let joined = self.in_flight.lock().get(&digest).cloned();
        let answer = match joined {
            Some(answer) => answer,
            None => {
                let endpoint = self.endpoint(server).await?;
                let mut in_flight = self.in_flight.lock();
                match in_flight.get(&digest) {
                    Some(answer) => answer.clone(),
                    None => {
                        if in_flight.len() >= MAX_IN_FLIGHT || !self.room_this_second() {
                            return Err(Verified::Unavailable(OAuthError::Busy {
                                per_second: self.per_second,
                                at_once: MAX_IN_FLIGHT,
                            }));
                        }
                        let answer = self.send(server, endpoint, token, digest);
                        in_flight.insert(digest, answer.clone());
                        answer
                    }
                }
            }
        };
        answer.await
    }

    /// Whether a request may be sent now (at most `per_second` in any
    /// second), counting it when it may.
    fn room_this_second(&self) -> bool {
        let now = Instant::now();
        let mut sent = self.sent.lock();
        while sent
            .front()
            .is_some_and(|t| now.duration_since(*t) >= Duration::from_secs(1))
        {
            sent.pop_front();
        }
        if sent.len() >= usize::try_from(self.per_second).unwrap_or(usize::MAX) {
            return false;
        }
        sent.push_back(now);
        true
    }

    /// The introspection endpoint: configured, or the issuer's metadata's.
    async fn endpoint(&self, server: &ResourceServer) -> Result<url::Url, Verified> {
        if let Some(e) = &self.endpoint {
            return Ok(e.clone());
        }
        self.discovery
            .get(&server.fetcher)
            .await
            .map_err(Verified::Unavailable)?
            .introspection_endpoint
            .clone()
            .ok_or_else(|| {
                Verified::Unavailable(OAuthError::Config(
                    "introspection: the issuer's metadata names no introspection_endpoint; \
                     set [oauth.introspection] endpoint"
                        .to_owned(),
                ))
            })
    }

    /// Sends the request about `token` on a task of its own (it ends
    /// within the fetch's time limit, whoever still waits), which judges
    /// the answer, remembers a refusal, and then takes itself out of the
    /// requests in flight.
    fn send(
        &self,
        server: &ResourceServer,
        endpoint: url::Url,
        token: &str,
        digest: Digest,
    ) -> Answer {
        let fetcher = server.fetcher.clone();
        let (client_id, secret) = (self.client_id.clone(), self.secret.clone());
        let token = token.to_owned();
        let (rules, refused) = (self.rules.clone(), self.refused.clone());
        let in_flight = self.in_flight.clone();
        let task = tokio::spawn(async move {
            let answer = fetcher
                .post_form(
                    &endpoint,
                    &[
                        ("token", token.as_str()),
                        ("token_type_hint", "access_token"),
                    ],
                    (&client_id, &secret),
                )
                .await;
            let judged = match answer {
                Err(e) => Err(Verified::Unavailable(e)),
                Ok(answer) => match answer.as_object() {
                    Some(claims) => judge(&rules, claims, unix_now()),
                    None => Err(TokenProblem::Malformed),
                }
                .map_err(|problem| {
                    // A token not valid yet may be soon: asked again then.
                    if problem != TokenProblem::NotYetValid {
                        refused
                            .lock()
                            .put(digest, (problem, Instant::now() + REFUSED_TTL));
                    }
                    Verified::Invalid(problem)
                }),
            };
            in_flight.lock().remove(&digest);
            judged
        });
        async move {
            task.await.unwrap_or_else(|e| {
                Err(Verified::Unavailable(OAuthError::Unreachable {
                    url: "the introspection endpoint".to_owned(),
                    why: format!("the request ended early: {e}"),
                }))
            })
        }
        .boxed()
        .shared()
    }
}

/// Holds an introspection answer to the rules a JWT's claims meet.
fn judge(
    server: &Rules,
    claims: &serde_json::Map<String, Value>,
    now: u64,
) -> Result<(Caller, Option<u64>), TokenProblem> {
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenProblem::Inactive);
    }
    if !is_access_token(claims) {
        return Err(TokenProblem::NotAnAccessToken);
    }
    if let Some(iss) = claims.get("iss")
        && iss.as_str() != Some(server.issuer.as_str())
    {
        return Err(TokenProblem::Issuer);
    }
    let audiences: Vec<&str> = match claims.get("aud") {
        Some(Value::String(a)) => vec![a.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !server
        .audiences
        .iter()
        .any(|ours| audiences.contains(&ours.as_str()))
    {
        return Err(TokenProblem::Audience);
    }
    let exp = claims.get("exp").and_then(Value::as_u64);
    if exp.is_some_and(|exp| exp.saturating_add(server.leeway) < now) {
        return Err(TokenProblem::Expired);
    }
    if claims
        .get("nbf")
        .and_then(Value::as_u64)
        .is_some_and(|nbf| nbf > now.saturating_add(server.leeway))
    {
        return Err(TokenProblem::NotYetValid);
    }
    // `sub` is optional in an introspection answer (RFC 7662), and an
    // authorization server leaves it out of a machine's token (client
    // credentials): then the caller is the client, as RFC 9068 has it for
    // a JWT's `sub`.
    let caller = match (claims.get("sub"), claims.get("client_id")) {
        (None, Some(client)) => {
            let mut with_subject = claims.clone();
            with_subject.insert("sub".to_owned(), client.clone());
            Caller::from_claims(&with_subject, &server.groups_claim)?
        }
        _ => Caller::from_claims(claims, &server.groups_claim)?,
    };
    Ok((caller, exp))
}

/// Whether an answer is about an access token: its `token_type`, when
/// it names one, is an access token's (`Bearer`, RFC 6750; `access_token`,
/// the hint's word), and neither Ory Hydra's `token_use` nor Keycloak's
/// `typ` says it is another kind.
fn is_access_token(claims: &serde_json::Map<String, Value>) -> bool {
    let named = |key: &str| claims.get(key).map(|v| v.as_str().unwrap_or_default());
    let token_type =
        named("token_type").is_none_or(|t| t.eq_ignore_ascii_case("bearer") || t == "access_token");
    let token_use = named("token_use").is_none_or(|t| t == "access_token" || t == "access");
    let typ = named("typ").is_none_or(|t| {
        !["refresh", "offline", "id", "logout"]
            .iter()
            .any(|other| t.eq_ignore_ascii_case(other))
    });
    token_type && token_use && typ
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_introspection_answer_must_be_active_ours_and_current() {
        let server = Rules {
            issuer: "https://login.example.com".into(),
            audiences: vec!["https://tools.example.com/mcp".into()],
            leeway: 30,
            groups_claim: "groups".into(),
        };
        let now = 1_000_000;
        let judged = |v: Value| judge(&server, v.as_object().unwrap(), now);
        let good = json!({"active": true, "sub": "alice", "aud": "https://tools.example.com/mcp", "iss": "https://login.example.com", "exp": now + 60});
        let (caller, exp) = judged(good.clone()).unwrap();
        assert_eq!((caller.subject.as_str(), exp), ("alice", Some(now + 60)));
        let with = |k: &str, v: Value| {
            let mut doc = good.clone();
            doc[k] = v;
            judged(doc)
        };
        assert_eq!(
            with("active", json!(false)).unwrap_err(),
            TokenProblem::Inactive
        );
        assert_eq!(
            with("iss", json!("https://evil.example.com")).unwrap_err(),
            TokenProblem::Issuer
        );
        assert_eq!(
            with("aud", json!(["https://other.example.com"])).unwrap_err(),
            TokenProblem::Audience
        );
        assert_eq!(
            with("exp", json!(now - 31)).unwrap_err(),
            TokenProblem::Expired
        );
        assert!(with("exp", json!(now - 29)).is_ok(), "within the leeway");
        assert_eq!(
            with("nbf", json!(now + 31)).unwrap_err(),
            TokenProblem::NotYetValid
        );
        let mut machine = good.clone();
        machine.as_object_mut().unwrap().remove("sub");
        machine["client_id"] = json!("bot");
        let (caller, _) = judged(machine.clone()).unwrap();
        assert_eq!(
            (caller.subject.as_str(), caller.client.as_deref()),
            ("bot", Some("bot")),
            "a machine's token without `sub` is its client's"
        );
        machine.as_object_mut().unwrap().remove("client_id");
        assert_eq!(
            judged(machine).unwrap_err(),
            TokenProblem::Claims,
            "neither subject nor client"
        );
        // An access token's type, or none named; never a refresh token.
        for access in [json!("Bearer"), json!("bearer"), json!("access_token")] {
            assert!(with("token_type", access.clone()).is_ok(), "{access}");
        }
        for (key, other) in [
            ("token_type", json!("refresh_token")),
            ("token_type", json!("DPoP")),
            ("token_type", json!("N_A")),
            ("token_type", json!(7)),
            ("token_use", json!("refresh_token")),
            ("typ", json!("Refresh")),
            ("typ", json!("Offline")),
        ] {
            assert_eq!(
                with(key, other.clone()).unwrap_err(),
                TokenProblem::NotAnAccessToken,
                "{key}: {other}"
            );
        }
        assert!(with("token_use", json!("access_token")).is_ok());
        assert!(with("typ", json!("Bearer")).is_ok());
        let mut no_aud = good.clone();
        no_aud.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            judged(no_aud).unwrap_err(),
            TokenProblem::Audience,
            "no audience: not known to be ours"
        );
    }
}
