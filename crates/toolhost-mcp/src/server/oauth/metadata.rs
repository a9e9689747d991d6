//! What clients and this server read to find each other: this server's
//! protected resource metadata (RFC 9728) and the challenge of its 401s,
//! which point a standard MCP client at the authorization server; and the
//! authorization server's own metadata (RFC 8414, else OpenID Connect
//! discovery), where this server finds its key set and introspection
//! endpoint.

use std::time::{Duration, Instant};

use http::HeaderValue;
use serde_json::{Value, json};

use super::OAuthError;
use super::fetch::{Fetcher, endpoint, shown_url};

/// The well-known path of protected resource metadata (RFC 9728, 3).
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// This server's protected resource metadata, and the challenges that
/// point at it.
pub(crate) struct ResourceMetadata {
    /// The document, as served.
    document: String,
    /// Where it is served: the root form and the one suffixed with the
    /// resource's path (`/.well-known/oauth-protected-resource/mcp`).
    paths: Vec<String>,
    /// Its absolute URL, for `resource_metadata` in challenges.
    url: String,
    /// The scopes every token needs, space-separated (may be empty).
    scope: String,
}

impl ResourceMetadata {
    pub(crate) fn new(resource: &url::Url, issuer: &str, scopes: &[String]) -> ResourceMetadata {
        let mut document = json!({
            "resource": resource.as_str(),
            "authorization_servers": [issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": "toolhost",
        });
        if !scopes.is_empty() {
            document["scopes_supported"] = json!(scopes);
        }
        let path = resource.path().trim_end_matches('/');
        let mut paths = vec![WELL_KNOWN.to_owned(), format!("{WELL_KNOWN}/mcp")];
        if !path.is_empty() {
            paths.push(format!("{WELL_KNOWN}{path}"));
        }
        paths.dedup();
        ResourceMetadata {
            document: document.to_string(),
            paths,
            url: format!(
                "{}{WELL_KNOWN}{path}",
                resource.origin().ascii_serialization()
            ),
            scope: scopes.join(" "),
        }
    }

    /// The paths it is served at.
    pub(crate) fn paths(&self) -> &[String] {
        &self.paths
    }

    /// The document (JSON).
    pub(crate) fn document(&self) -> &str {
        &self.document
    }

    /// `WWW-Authenticate` for a refusal: `error` is `None` for a request
    /// without a token (RFC 6750, 3.1), else `invalid_token` or
    /// `insufficient_scope`.
    pub(crate) fn challenge(&self, error: Option<&str>) -> HeaderValue {
        let mut parts = Vec::new();
        if let Some(error) = error {
            parts.push(format!("error=\"{error}\""));
        }
        parts.push(format!("resource_metadata=\"{}\"", self.url));
        if !self.scope.is_empty() {
            parts.push(format!("scope=\"{}\"", self.scope));
        }
        HeaderValue::from_str(&format!("Bearer {}", parts.join(", ")))
            .unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
    }
}

/// Whether `scope` may go in a challenge and a token request: a scope
/// token of RFC 6749, 3.3 (visible ASCII without `"` and `\`).
pub(crate) fn is_scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// What this server uses from the authorization server's metadata.
#[derive(Debug, Clone)]
pub(crate) struct IssuerMetadata {
    pub(crate) jwks_uri: url::Url,
    pub(crate) introspection_endpoint: Option<url::Url>,
}

/// How long a failed discovery is remembered before it is tried again.
const RETRY_AFTER: Duration = Duration::from_secs(10);

/// The authorization server's metadata, fetched once on first need.
pub(crate) struct Discovery {
    issuer: url::Url,
    /// The issuer as configured, which the metadata must name exactly.
    named: String,
    found: tokio::sync::Mutex<Found>,
}

#[derive(Default)]
struct Found {
    metadata: Option<IssuerMetadata>,
    failed: Option<(Instant, OAuthError)>,
}

impl Discovery {
    pub(crate) fn new(issuer: url::Url, named: &str) -> Discovery {
        Discovery {
            issuer,
            named: named.to_owned(),
            found: tokio::sync::Mutex::new(Found::default()),
        }
    }

    /// The metadata: from its RFC 8414 place, else from OpenID discovery.
    /// Its `issuer` must be the one configured, exactly.
    pub(crate) async fn get(&self, fetcher: &Fetcher) -> Result<IssuerMetadata, OAuthError> {
        let mut found = self.found.lock().await;
        if let Some(m) = &found.metadata {
            return Ok(m.clone());
        }
        if let Some((at, e)) = &found.failed
            && at.elapsed() < RETRY_AFTER
        {
            return Err(e.clone());
        }
        match self.fetch(fetcher).await {
            Ok(m) => {
                found.metadata = Some(m.clone());
                Ok(m)
            }
            Err(e) => {
                found.failed = Some((Instant::now(), e.clone()));
                Err(e)
            }
        }
    }

    async fn fetch(&self, fetcher: &Fetcher) -> Result<IssuerMetadata, OAuthError> {
        let mut last = None;
        for url in self.places() {
            match fetcher.get_json(&url).await {
                Ok(doc) => return self.read(&url, &doc),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| OAuthError::Config("the issuer has no metadata URL".into())))
    }

    /// RFC 8414's well-known URL (inserted before the issuer's path), then
    /// OpenID Connect's (appended to it).
    fn places(&self) -> Vec<url::Url> {
        let path = self.issuer.path().trim_end_matches('/');
        let mut places = Vec::new();
        for p in [
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ] {
            let mut url = self.issuer.clone();
            url.set_path(&p);
            url.set_query(None);
            places.push(url);
        }
        places
    }

    fn read(&self, url: &url::Url, doc: &Value) -> Result<IssuerMetadata, OAuthError> {
        let wrong = |why: String| OAuthError::Unreachable {
            url: shown_url(url),
            why,
        };
        let issuer = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
        if issuer != self.named {
            return Err(wrong(format!(
                "its metadata names the issuer `{}`, not the one configured",
                toolhost_text::line(issuer, 200)
            )));
        }
        let jwks_uri = doc
            .get("jwks_uri")
            .and_then(Value::as_str)
            .ok_or_else(|| wrong("its metadata has no jwks_uri".into()))
            .and_then(|u| endpoint("jwks_uri", u))?;
        let introspection_endpoint = doc
            .get("introspection_endpoint")
            .and_then(Value::as_str)
            .map(|u| endpoint("introspection_endpoint", u))
            .transpose()?;
        Ok(IssuerMetadata {
            jwks_uri,
            introspection_endpoint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_is_found_under_the_resource_path_and_named_in_challenges() {
        let resource = url::Url::parse("https://tools.example.com/mcp").unwrap();
        let m = ResourceMetadata::new(&resource, "https://login.example.com", &["tools".into()]);
        assert_eq!(
            m.paths(),
            [WELL_KNOWN, "/.well-known/oauth-protected-resource/mcp"]
        );
        let doc: Value = serde_json::from_str(m.document()).unwrap();
        assert_eq!(doc["resource"], "https://tools.example.com/mcp");
        assert_eq!(doc["authorization_servers"][0], "https://login.example.com");
        assert_eq!(doc["scopes_supported"][0], "tools");
        assert_eq!(
            m.challenge(None).to_str().unwrap(),
            "Bearer resource_metadata=\"https://tools.example.com/.well-known/oauth-protected-resource/mcp\", scope=\"tools\""
        );
        assert!(
            m.challenge(Some("invalid_token"))
                .to_str()
                .unwrap()
                .starts_with("Bearer error=\"invalid_token\", ")
        );
    }

    #[test]
    fn rfc_8414_comes_before_openid_discovery() {
        let d = Discovery::new(
            url::Url::parse("https://login.example.com/realms/acme").unwrap(),
            "https://login.example.com/realms/acme",
        );
        let places: Vec<String> = d.places().iter().map(url::Url::to_string).collect();
        assert_eq!(
            places,
            [
                "https://login.example.com/.well-known/oauth-authorization-server/realms/acme",
                "https://login.example.com/realms/acme/.well-known/openid-configuration"
            ]
        );
        assert!(is_scope_token("tools:read"));
        assert!(!is_scope_token("a\"b"));
        assert!(!is_scope_token("a b"));
    }
}
