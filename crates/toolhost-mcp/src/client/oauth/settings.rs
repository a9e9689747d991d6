//! What an `[[mcp-servers]]` entry's `oauth` table says: how the client
//! signs in to an upstream server that asks for OAuth ([`UpstreamOAuth`]),
//! and what of it can be checked before signing in ([`check`]).

use std::path::PathBuf;
use std::sync::Arc;

use url::Url;

use crate::client::error::McpClientError;

/// How the client obtains tokens from a server that answers 401.
///
/// ```
/// use toolhost_mcp::McpServerConfig;
/// use toolhost_mcp::client::{McpTransport, OAuthGrant, UpstreamOAuth};
///
/// let mut config = McpServerConfig::http("docs", "https://mcp.example.com/mcp");
/// if let McpTransport::Http(endpoint) = &mut config.transport {
///     endpoint.oauth = Some(UpstreamOAuth {
///         client_id: Some("gateway".into()),
///         client_secret: Some("s3cret".into()),
///         // The only authorization server the secret is sent to.
///         issuer: Some("https://login.example.com".into()),
///         grant: OAuthGrant::ClientCredentials,
///         ..UpstreamOAuth::default()
///     });
/// }
/// assert!(!format!("{config:?}").contains("s3cret"));
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct UpstreamOAuth {
    /// A client registered with the authorization server beforehand (the
    /// first choice of the spec's order).
    pub client_id: Option<String>,
    /// Its secret (a confidential client).
    pub client_secret: Option<String>,
    /// The authorization server's issuer identifier, exactly as its
    /// metadata says it (`https://login.example.com`): the only one the
    /// client's secret or key, and the tokens' refresh, are sent to.
    /// Required with `client_secret` or `private_key_pem`
    /// ([`McpClientError::IssuerRequired`](crate::McpClientError::IssuerRequired));
    /// without it, the issuer of the first sign-in is kept with the tokens
    /// and holds until a person signs in anew ([`sign_in`]).
    pub issuer: Option<String>,
    /// The https URL of this client's metadata document (a Client ID
    /// Metadata Document), used as its id where the authorization server
    /// supports them and no `client_id` is given.
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for; empty: the challenge's, else the protected
    /// resource's `scopes_supported`, else none.
    pub scopes: Vec<String>,
    /// How tokens are obtained.
    pub grant: OAuthGrant,
    /// The client-credentials grant's `private_key_jwt` key (PEM, RSA or
    /// EC); without it the grant uses `client_secret`.
    pub private_key_pem: Option<String>,
    /// The key's algorithm: `ES256` (default), `ES384`, `RS256`, `RS384`, `RS512`.
    pub signing_algorithm: Option<String>,
    /// The JWT-bearer grant's assertion: a file holding the workload's
    /// JWT, read again at each grant (its platform rotates it).
    pub assertion_file: Option<PathBuf>,
    /// Enterprise-managed authorization's identity provider.
    pub enterprise: Option<Box<EnterpriseIdp>>,
    /// The loopback port of the sign-in redirect (any free port if `None`),
    /// for an authorization server that registered one.
    pub redirect_port: Option<u16>,
    /// Where the tokens are kept, one file per server, readable by the user
    /// only; in memory for the process if `None`.
    pub token_dir: Option<PathBuf>,
    /// Who shows a person the sign-in page; without it a server that needs
    /// a person's sign-in is reported down until [`sign_in`] is run.
    pub prompt: Option<SignInPrompt>,
    /// What a person runs to sign in, named in errors (`host mcp login docs`).
    pub sign_in_command: Option<String>,
}

impl std::fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("issuer", &self.issuer)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field(
                "private_key_pem",
                &self.private_key_pem.as_ref().map(|_| "[redacted]"),
            )
            .field("signing_algorithm", &self.signing_algorithm)
            .field("assertion_file", &self.assertion_file)
            .field("enterprise", &self.enterprise)
            .field("redirect_port", &self.redirect_port)
            .field("token_dir", &self.token_dir)
            .field("sign_in_command", &self.sign_in_command)
            .finish_non_exhaustive()
    }
}

/// How tokens are obtained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OAuthGrant {
    /// A person signs in (authorization code with PKCE), once; the tokens
    /// are refreshed from then on.
    #[default]
    AuthorizationCode,
    /// The client's own credentials (SEP-1046), for a gateway nobody
    /// attends: `client_id` with `client_secret` or `private_key_pem`.
    ClientCredentials,
    /// A workload's own identity (RFC 7523's JWT-bearer grant, SEP-1933):
    /// the JWT in `assertion_file` traded for a token, nobody signing in.
    JwtBearer,
    /// Enterprise-managed authorization (SEP-990): the person's ID token
    /// from their organization's identity provider ([`EnterpriseIdp`])
    /// traded there for an identity assertion, and that here for a token;
    /// `client_id` (and `client_secret`) are the client's at this server's
    /// authorization server.
    Enterprise,
}

/// The organization's identity provider of enterprise-managed
/// authorization, and where the person's ID token from it is.
#[derive(Clone, Default, PartialEq)]
pub struct EnterpriseIdp {
    /// Its issuer identifier.
    pub issuer: String,
    /// Its token endpoint (from its OpenID configuration if `None`).
    pub token_endpoint: Option<String>,
    /// This client's id there.
    pub client_id: String,
    /// Its secret there (a confidential client).
    pub client_secret: Option<String>,
    /// The file holding the person's ID token, which their sign-in tool
    /// writes; read again at each grant.
    pub id_token_file: PathBuf,
}

impl std::fmt::Debug for EnterpriseIdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnterpriseIdp")
            .field("issuer", &self.issuer)
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("id_token_file", &self.id_token_file)
            .finish()
    }
}

/// What shows the sign-in page: called with the server's name and the
/// authorization URL.
pub type ShowSignIn = dyn Fn(&str, &str) + Send + Sync;

/// Shows a person the page where they sign in to `server`: called with
/// the server's name and the authorization URL (print it, open a browser).
#[derive(Clone)]
pub struct SignInPrompt(pub Arc<ShowSignIn>);

impl std::fmt::Debug for SignInPrompt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SignInPrompt")
    }
}

impl PartialEq for SignInPrompt {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What can be checked of `settings` (server `name`'s) before signing in:
/// a client that keeps a secret or a key names the authorization server
/// it may be sent to, as an issuer identifier (a URL without query or
/// fragment).
pub(crate) fn check(name: &str, settings: &UpstreamOAuth) -> Result<(), McpClientError> {
    match &settings.issuer {
        None if settings.client_secret.is_some()
            || settings.private_key_pem.is_some()
            || settings.assertion_file.is_some() =>
        {
            Err(McpClientError::IssuerRequired {
                name: name.to_owned(),
            })
        }
        None => Ok(()),
        Some(issuer) => match Url::parse(issuer) {
            Ok(url)
                if matches!(url.scheme(), "https" | "http")
                    && url.query().is_none()
                    && url.fragment().is_none() =>
            {
                Ok(())
            }
            _ => Err(McpClientError::Invalid {
                name: name.to_owned(),
                message: format!(
                    "OAuth `issuer` `{}` is not an issuer identifier (an http(s) URL without query or fragment)",
                    toolhost_text::line(issuer, 200)
                ),
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_with_a_secret_or_a_key_names_its_issuer() {
        let secret = UpstreamOAuth {
            client_id: Some("gw".into()),
            client_secret: Some("s3cret".into()),
            ..UpstreamOAuth::default()
        };
        let e = check("tickets", &secret).unwrap_err();
        assert!(
            matches!(&e, McpClientError::IssuerRequired { name } if name == "tickets"),
            "{e}"
        );
        assert!(e.to_string().contains("issuer = \"https://"), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let key = UpstreamOAuth {
            private_key_pem: Some("-----BEGIN".into()),
            ..UpstreamOAuth::default()
        };
        assert!(check("tickets", &key).is_err());
        assert!(
            check("docs", &UpstreamOAuth::default()).is_ok(),
            "a public client"
        );
        let named = |issuer: &str| UpstreamOAuth {
            issuer: Some(issuer.into()),
            ..secret.clone()
        };
        assert!(check("tickets", &named("https://login.example.com")).is_ok());
        for bad in [
            "login.example.com",
            "https://l.example?x=1",
            "https://l.example#f",
            "ftp://l",
        ] {
            assert!(check("tickets", &named(bad)).is_err(), "{bad}");
        }
    }
}
