//! Which authorization server a sign-in talks to: discovery (rmcp's,
//! and the 2025-03-26 back-compat case rmcp refuses) of its metadata and
//! issuer, and the check that it is the one trusted ([`Trusted`]) before
//! anything is sent there.

use std::time::Duration;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationMetadataSource,
    WWWAuthenticateParams,
};
use url::Url;

use super::error::{SignInError, failed};

/// The authorization server a sign-in may talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Trusted {
    /// The `issuer` of the settings.
    Configured(String),
    /// The one the kept tokens came from.
    Pinned(String),
    /// Whichever the server names (nothing configured, nothing kept).
    Any,
}

impl Trusted {
    /// Whether `discovered` (the issuer the server's metadata names) may
    /// be talked to; compared as RFC 8414 (3.3) has it, exactly.
    pub(super) fn admit(
        &self,
        discovered: &Discovered,
        hint: Option<&str>,
    ) -> Result<(), SignInError> {
        let (expected, pinned) = match self {
            Trusted::Any => return Ok(()),
            Trusted::Configured(e) => (e, false),
            Trusted::Pinned(e) => (e, true),
        };
        if discovered.issuer.as_deref() == Some(expected.as_str()) {
            return Ok(());
        }
        Err(SignInError::WrongIssuer {
            expected: expected.clone(),
            named: discovered.issuer.clone(),
            pinned,
            hint: hint.map(str::to_owned),
        })
    }
}

/// What discovery found: the authorization server's metadata, and its
/// issuer identifier.
pub(super) struct Discovered {
    pub(super) metadata: AuthorizationMetadata,
    /// The metadata's `issuer`; for a 2025-03-26 server without any
    /// metadata (its default endpoints), the server's own origin.
    pub(super) issuer: Option<String>,
}

/// The largest authorization server metadata document read.
const MAX_METADATA_BYTES: usize = 64 * 1024;
/// How long fetching it may take.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// Discovery (rmcp's) from `challenge`, else the well-known places, into
/// `manager`: its authorization server's metadata.
///
/// One case rmcp refuses is served here: a 2025-03-26 server (no
/// protected resource metadata) is its own authorization server, and the
/// metadata at its origin's `/.well-known/oauth-authorization-server` may
/// name an issuer with a path (`https://host/oauth`); RFC 8414 would have
/// it at `/.well-known/oauth-authorization-server/oauth`, so rmcp's issuer
/// check fails. Such metadata is taken when the challenge names no
/// resource metadata and the issuer is of the server's own origin (the
/// same party the MCP server is), as the MCP SDKs take it.
///
/// The issuer found is the metadata's; a server without any metadata
/// (rmcp's fallback to 2025-03-26's default endpoints, `/authorize` and
/// `/token` at the server's origin) is its own authorization server, and
/// its origin (`https://host[:port]`) stands for its issuer.
pub(super) async fn discover(
    manager: &mut AuthorizationManager,
    url: &Url,
    challenge: Option<&str>,
) -> Result<Discovered, SignInError> {
    let metadata = match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution)
            if resolution.source == AuthorizationMetadataSource::LegacyEndpointFallback =>
        {
            manager.set_metadata(resolution.metadata.clone());
            return Ok(Discovered {
                metadata: resolution.metadata,
                issuer: Some(url.origin().ascii_serialization()),
            });
        }
        Ok(resolution) => resolution.metadata,
        Err(AuthError::AuthorizationServerMismatch {
            received_issuer, ..
        }) if same_origin(&received_issuer, url)
            && challenge.is_none_or(|c| {
                WWWAuthenticateParams::parse(c, url)
                    .resource_metadata_url
                    .is_none()
            }) =>
        {
            tracing::debug!(%url, "OAuth: 2025-03-26 metadata at the server's origin");
            origin_metadata(url).await?
        }
        Err(e) => return Err(failed(e)),
    };
    manager.set_metadata(metadata.clone());
    Ok(Discovered {
        issuer: metadata.issuer.clone(),
        metadata,
    })
}

/// Whether `issuer` has the scheme, host and port of `url`.
fn same_origin(issuer: &str, url: &Url) -> bool {
    Url::parse(issuer).is_ok_and(|issuer| issuer.origin() == url.origin())
}

/// The metadata at `url`'s origin's `/.well-known/oauth-authorization-server`
/// (bounded in bytes and time).
async fn origin_metadata(url: &Url) -> Result<AuthorizationMetadata, SignInError> {
    let mut well_known = url.clone();
    well_known.set_path("/.well-known/oauth-authorization-server");
    well_known.set_query(None);
    well_known.set_fragment(None);
    let fail = |why: String| SignInError::Failed(format!("{well_known}: {why}"));
    let request = http(METADATA_TIMEOUT)
        .map_err(fail)?
        .get(well_known.clone())
        .header("MCP-Protocol-Version", "2025-03-26");
    let body = get_document(request, MAX_METADATA_BYTES)
        .await
        .map_err(fail)?;
    serde_json::from_slice(&body)
        .map_err(|e| fail(format!("not authorization server metadata: {e}")))
}

/// An HTTP client for the sign-in's own requests: no redirects followed,
/// each request bounded by `timeout`.
pub(super) fn http(timeout: Duration) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
}

/// The document `request` fetches: a success status, at most `limit` bytes.
pub(super) async fn get_document(
    request: reqwest::RequestBuilder,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let response = request.send().await.map_err(|e| toolhost_text::cause(&e))?;
    if !response.status().is_success() {
        return Err(format!("answered {}", response.status()));
    }
    read_bounded(response, limit).await
}

/// The body of `response`, read only up to `limit` bytes.
pub(super) async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len().saturating_add(chunk.len()) > limit {
            return Err(format!("the answer is larger than {limit} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_issuer_of_the_servers_own_origin_is_taken_in_back_compat() {
        let url = Url::parse("http://localhost:3000/mcp").unwrap();
        assert!(same_origin("http://localhost:3000/oauth", &url));
        assert!(!same_origin("http://localhost:3001/oauth", &url));
        assert!(!same_origin("https://localhost:3000/oauth", &url));
        assert!(!same_origin("http://evil.example/oauth", &url));
    }

    #[test]
    fn an_authorization_server_is_talked_to_only_when_it_is_the_one_trusted() {
        let found = |issuer: Option<&str>| Discovered {
            metadata: AuthorizationMetadata::default(),
            issuer: issuer.map(str::to_owned),
        };
        let configured = Trusted::Configured("https://as.example".into());
        assert!(
            configured
                .admit(&found(Some("https://as.example")), None)
                .is_ok()
        );
        for other in [
            Some("https://evil.example"),
            // Compared exactly, as RFC 8414 has it.
            Some("https://as.example/"),
            Some("https://AS.example"),
            None,
        ] {
            let e = configured.admit(&found(other), None).unwrap_err();
            assert!(
                matches!(&e, SignInError::WrongIssuer { pinned: false, .. }),
                "{other:?}: {e}"
            );
            assert!(e.to_string().contains("not the `issuer` configured"), "{e}");
        }
        let pinned = Trusted::Pinned("https://as.example".into());
        let e = pinned
            .admit(
                &found(Some("https://evil.example")),
                Some("host mcp login docs"),
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server names the authorization server `https://evil.example`, not \
             `https://as.example`, which issued the tokens kept for it: nothing was sent there; \
             to sign in there, run `host mcp login docs`"
        );
        assert!(Trusted::Any.admit(&found(None), None).is_ok());
    }
}
