//! The JWT-bearer grant (RFC 7523) of workload identity federation
//! (SEP-1933): a workload with a JWT its platform issued (a Kubernetes
//! service account token, a CI job's OIDC token), read from a file at
//! each grant since platforms rotate it, trades it at the trusted
//! authorization server for an access token. Nobody signs in and nothing
//! is registered; a refusal is reported as the server gave it, and the
//! same assertion is not sent again (another grant type is never tried).

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{
    AuthorizationManager, CredentialStore, OAuthTokenResponse, StoredCredentials,
};
use url::Url;

use super::client_credentials::Grant;
use super::discovery::{http, read_bounded};
use super::error::{SignInError, failed};
use super::settings::UpstreamOAuth;
use super::token_store::TokenStore;

/// The grant type of RFC 7523, section 2.1.
pub const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// The largest assertion file read.
const MAX_ASSERTION_BYTES: u64 = 16 * 1024;
/// The largest token response read.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// How long the token request may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A manager over `store` holding the token the workload's assertion
/// (`settings.assertion_file`) was traded for. `refused`: the digest of an
/// assertion the server refused before, which is not sent again.
pub(super) async fn jwt_bearer(
    url: Url,
    store: TokenStore,
    settings: &UpstreamOAuth,
    grant: Grant<'_>,
    refused: &parking_lot::Mutex<Option<[u8; 32]>>,
) -> Result<AuthorizationManager, SignInError> {
    let Some(file) = &settings.assertion_file else {
        return Err(SignInError::Failed(
            "the JWT-bearer grant needs the workload's assertion file".into(),
        ));
    };
    let assertion = read_assertion(file)?;
    let key: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(assertion.as_bytes()).into();
    if *refused.lock() == Some(key) {
        return Err(SignInError::Failed(format!(
            "the authorization server refused the assertion in {}; it is not sent again until \
             the file changes",
            file.display()
        )));
    }
    let (mut manager, found) = grant.trusted_manager(&url, &store).await?;
    let scopes = grant.scopes(settings);
    let mut form = vec![
        ("grant_type", GRANT_TYPE.to_owned()),
        ("assertion", assertion),
        // RFC 8707: the resource is this server.
        ("resource", url.to_string()),
    ];
    if let Some(id) = &settings.client_id {
        form.push(("client_id", id.clone()));
    }
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    let token = match request(&found.metadata.token_endpoint, &form).await? {
        Ok(token) => token,
        Err(why) => {
            *refused.lock() = Some(key);
            return Err(SignInError::Failed(why));
        }
    };
    let granted = oauth2::TokenResponse::scopes(&token)
        .map(|s| s.iter().map(|s| s.to_string()).collect())
        .unwrap_or(scopes);
    let client_id = settings
        .client_id
        .clone()
        .unwrap_or_else(|| "workload".to_owned());
    keep_granted(
        &store,
        &mut manager,
        client_id,
        token,
        granted,
        found.issuer,
    )
    .await?;
    Ok(manager)
}

/// Keeps `token`, granted to `client_id` by `issuer` without a person, in
/// `store`, and makes `manager` (over `store`) use it.
pub(super) async fn keep_granted(
    store: &TokenStore,
    manager: &mut AuthorizationManager,
    client_id: String,
    token: OAuthTokenResponse,
    scopes: Vec<String>,
    issuer: Option<String>,
) -> Result<(), SignInError> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    store
        .save(
            StoredCredentials::new(client_id, Some(token), scopes, Some(now))
                .with_issuer(issuer.clone()),
        )
        .await
        .map_err(failed)?;
    store.set_issuer(issuer).map_err(failed)?;
    manager.initialize_from_store().await.map_err(failed)?;
    Ok(())
}

/// The assertion in `file`, trimmed; bounded, and a JWT in form (three
/// base64url parts).
pub(super) fn read_assertion(file: &Path) -> Result<String, SignInError> {
    let fail = |why: String| SignInError::Failed(format!("{}: {why}", file.display()));
    let size = std::fs::metadata(file)
        .map_err(|e| fail(e.to_string()))?
        .len();
    if size > MAX_ASSERTION_BYTES {
        return Err(fail(format!("larger than {MAX_ASSERTION_BYTES} bytes")));
    }
    let text = std::fs::read_to_string(file).map_err(|e| fail(e.to_string()))?;
    let assertion = text.trim();
    let parts: Vec<&str> = assertion.split('.').collect();
    let base64url = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if parts.len() != 3 || !parts.iter().all(|p| base64url(p)) {
        return Err(fail("not a JWT (three base64url parts)".into()));
    }
    Ok(assertion.to_owned())
}

/// Posts the grant to `endpoint`: the token, or (inner `Err`) the
/// server's refusal in words; the outer `Err` when no answer was read.
async fn request(
    endpoint: &str,
    form: &[(&str, String)],
) -> Result<Result<OAuthTokenResponse, String>, SignInError> {
    let fail = |why: String| SignInError::Failed(format!("token request: {why}"));
    let client = http(TOKEN_TIMEOUT).map_err(fail)?;
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = client
        .post(endpoint)
        .header("accept", "application/json")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|e| fail(toolhost_text::cause(&e)))?;
    let status = response.status();
    let body = read_bounded(response, MAX_RESPONSE_BYTES)
        .await
        .map_err(fail)?;
    if status.is_success() {
        return serde_json::from_slice::<OAuthTokenResponse>(&body)
            .map(Ok)
            .map_err(|e| fail(format!("not a token response: {e}")));
    }
    // RFC 6749, 5.2: the error and its description.
    let refusal: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let error = refusal["error"].as_str().unwrap_or("no error code");
    let description = refusal["error_description"]
        .as_str()
        .map(|d| format!(": {}", toolhost_text::line(d, 200)))
        .unwrap_or_default();
    Ok(Err(format!(
        "the authorization server refused the workload's assertion ({status}, {}{description})",
        toolhost_text::line(error, 60)
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bounded_jwt_is_read_as_the_assertion() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "eyJh.eyJz.c2ln\n").unwrap();
        assert_eq!(read_assertion(&file).unwrap(), "eyJh.eyJz.c2ln");
        for bad in ["not a jwt", "a.b", "a..c", "a.b.c.d", "a.b c.d"] {
            std::fs::write(&file, bad).unwrap();
            assert!(read_assertion(&file).is_err(), "{bad}");
        }
        std::fs::write(&file, "a".repeat(20_000)).unwrap();
        let e = read_assertion(&file).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
    }
}
