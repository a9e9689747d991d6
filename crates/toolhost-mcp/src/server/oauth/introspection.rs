//! An opaque access token asked about at the issuer's introspection
//! endpoint (RFC 7662), with this server's client credentials. The answer
//! is held to the same rules as a JWT's claims: active, the configured
//! issuer (when it names one), this server's resource in `aud`, not
//! expired, not before its time.

use std::sync::Arc;

use serde_json::Value;

use super::metadata::Discovery;
use super::{
    Caller, IntrospectionOptions, OAuthError, ResourceServer, TokenProblem, Verified, fetch,
    unix_now,
};

/// Where and as whom tokens are introspected.
pub(crate) struct Introspection {
    endpoint: Option<url::Url>,
    discovery: Arc<Discovery>,
    client_id: String,
    secret: String,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl Introspection {
    pub(crate) fn new(
        options: &IntrospectionOptions,
        discovery: Arc<Discovery>,
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
        Ok(Introspection {
            endpoint,
            discovery,
            client_id: options.client_id.clone(),
            secret,
        })
    }

    /// The caller of a good opaque token, and when it expires.
    pub(crate) async fn check(
        &self,
        server: &ResourceServer,
        token: &str,
    ) -> Result<(Caller, Option<u64>), Verified> {
        let endpoint = match &self.endpoint {
            Some(e) => e.clone(),
            None => self
                .discovery
                .get(&server.fetcher)
                .await
                .map_err(Verified::Unavailable)?
                .introspection_endpoint
                .ok_or_else(|| {
                    Verified::Unavailable(OAuthError::Config(
                        "introspection: the issuer's metadata names no introspection_endpoint; \
                         set [oauth.introspection] endpoint"
                            .to_owned(),
                    ))
                })?,
        };
        let answer = server
            .fetcher
            .post_form(
                &endpoint,
                &[("token", token), ("token_type_hint", "access_token")],
                (&self.client_id, &self.secret),
            )
            .await
            .map_err(Verified::Unavailable)?;
        let claims = answer
            .as_object()
            .ok_or(Verified::Invalid(TokenProblem::Malformed))?;
        judge(server, claims, unix_now()).map_err(Verified::Invalid)
    }
}

/// Holds an introspection answer to the rules a JWT's claims meet.
fn judge(
    server: &ResourceServer,
    claims: &serde_json::Map<String, Value>,
    now: u64,
) -> Result<(Caller, Option<u64>), TokenProblem> {
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenProblem::Inactive);
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
    if !server.audiences().any(|ours| audiences.contains(&ours)) {
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
    let caller = Caller::from_claims(claims, &server.groups_claim)?;
    Ok((caller, exp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::OAuthOptions;
    use serde_json::json;

    #[test]
    fn an_introspection_answer_must_be_active_ours_and_current() {
        let server = ResourceServer::new(
            &OAuthOptions {
                issuer: "https://login.example.com".into(),
                resource: Some("https://tools.example.com/mcp".into()),
                leeway_seconds: 30,
                groups_claim: "groups".into(),
                ..OAuthOptions::default()
            },
            None,
        )
        .unwrap();
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
        let mut no_aud = good.clone();
        no_aud.as_object_mut().unwrap().remove("aud");
        assert_eq!(
            judged(no_aud).unwrap_err(),
            TokenProblem::Audience,
            "no audience: not known to be ours"
        );
    }
}
