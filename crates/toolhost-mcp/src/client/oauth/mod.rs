//! Signing in to an HTTP MCP server that asks for OAuth 2.1, as the MCP
//! authorization spec says (revisions 2025-03-26, 2025-06-18, 2025-11-25),
//! over rmcp's OAuth client (`rmcp::transport::auth`). rmcp does the
//! protocol: protected resource metadata (RFC 9728) from the
//! `WWW-Authenticate` challenge and the well-known fallbacks, authorization
//! server metadata (RFC 8414, then OpenID discovery, then the 2025-03-26
//! default endpoints), the resource must name this server, PKCE S256
//! (refused when the server cannot), the resource indicator (RFC 8707),
//! token endpoint auth (`client_secret_basic`, `_post`, `none`), refreshes
//! and client credentials (SEP-1046). This module decides when and with
//! what:
//!
//! - a request answered 401 (or 403 `insufficient_scope`) is answered by a
//!   new token and sent again, at most [`MAX_SIGN_INS`] times for one
//!   request, so a server that never accepts ends in an error, not a loop;
//! - the client: pre-registered (`client_id`), else a Client ID Metadata
//!   Document when the authorization server supports them, else dynamic
//!   registration (RFC 7591), the order of the spec;
//! - the scopes: the operator's, else the challenge's, else the protected
//!   resource's `scopes_supported`, else none (and `offline_access` when
//!   the authorization server lists it, for a refresh token); a step-up
//!   asks for what was granted plus what the challenge names;
//! - the grant: client credentials for an unattended gateway; else an
//!   authorization code through a person's browser ([`SignInPrompt`], the
//!   loopback redirect of `loopback.rs`), or, with nobody to ask, an error
//!   that says to sign in ([`sign_in`], `host mcp login NAME`);
//! - the authorization server: the one the server's metadata names, only
//!   when it is the `issuer` configured (needed with a client secret or
//!   key), else the one the kept tokens came from (pinned at their first
//!   sign-in): the issuer identifiers compared exactly (RFC 8414, 3.3), and
//!   nothing sent to another (no secret, no refresh token, no
//!   registration), so a server, or its DNS name, that names another
//!   authorization server gets nothing ([`SignInError::WrongIssuer`]);
//! - the tokens: kept by `token_store.rs` (a file only the user can read)
//!   with the issuer they came from, never written to a log, a trace or
//!   an error.

mod loopback;
mod token_store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationMetadataSource,
    ClientCredentialsConfig, JwtSigningAlgorithm, OAuthClientConfig, WWWAuthenticateParams,
};
use url::Url;

use token_store::TokenStore;

/// The most tokens obtained for one request (a sign-in, then up to two
/// step-ups) before it fails: the spec asks clients to bound retries.
pub const MAX_SIGN_INS: u32 = 3;
/// How long a person has to finish signing in.
pub const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);
/// The client name sent in dynamic registration.
const CLIENT_NAME: &str = "toolhost";

/// How the client obtains tokens from a server that answers 401.
///
/// ```
/// use toolhost_mcp::{McpServerConfig, McpTransport, OAuthGrant, OAuthSettings};
///
/// let mut config = McpServerConfig::http("docs", "https://mcp.example.com/mcp");
/// if let McpTransport::Http(endpoint) = &mut config.transport {
///     endpoint.oauth = Some(OAuthSettings {
///         client_id: Some("gateway".into()),
///         client_secret: Some("s3cret".into()),
///         // The only authorization server the secret is sent to.
///         issuer: Some("https://login.example.com".into()),
///         grant: OAuthGrant::ClientCredentials,
///         ..OAuthSettings::default()
///     });
/// }
/// assert!(!format!("{config:?}").contains("s3cret"));
/// ```
#[derive(Clone, Default, PartialEq)]
pub struct OAuthSettings {
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

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSettings")
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

/// Why no token could be obtained. Messages never hold a token or secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SignInError {
    /// A person must sign in, and nobody is there to ask.
    #[error("needs sign-in (the server answered {status}{}){}", scope_note(.scope.as_deref()), hint_note(.hint.as_deref()))]
    NeedsSignIn {
        /// 401, or 403 for more scope.
        status: u16,
        /// The scope the server asks for, if it says.
        scope: Option<String>,
        /// What to run (`host mcp login NAME`), when the embedder says.
        hint: Option<String>,
    },
    /// The server keeps refusing the tokens obtained for one request.
    #[error("the server still refuses after {attempts} sign-ins{}", scope_note(.scope.as_deref()))]
    StillRefused {
        /// How many.
        attempts: u32,
        /// The scope it asks for, if it says.
        scope: Option<String>,
    },
    /// The OAuth exchange failed (discovery, registration, token endpoint).
    #[error("OAuth sign-in failed: {0}")]
    Failed(String),
    /// The person did not finish, or the authorization server refused.
    #[error("sign-in did not complete: {0}")]
    Interrupted(String),
    /// The server does not ask for a token.
    #[error("the server answers without sign-in")]
    NotNeeded,
    /// The server names an authorization server other than the one
    /// trusted: the `issuer` configured, or the one its kept tokens came
    /// from. Nothing was sent to it.
    #[error("{}", wrong_issuer(.expected, .named.as_deref(), .pinned, .hint.as_deref()))]
    WrongIssuer {
        /// The issuer trusted.
        expected: String,
        /// The one the server's metadata names (`None`: none).
        named: Option<String>,
        /// Whether `expected` is the kept tokens' (pinned at their first
        /// sign-in) rather than configured.
        pinned: bool,
        /// What to run to sign in anew (`host mcp login NAME`).
        hint: Option<String>,
    },
}

fn wrong_issuer(expected: &str, named: Option<&str>, pinned: &bool, hint: Option<&str>) -> String {
    let named = named.map_or_else(
        || "an authorization server without an issuer".to_owned(),
        |n| format!("the authorization server `{}`", toolhost_text::line(n, 200)),
    );
    let expected = toolhost_text::line(expected, 200);
    if *pinned {
        format!(
            "the server names {named}, not `{expected}`, which issued the tokens kept for it: \
             nothing was sent there{}",
            hint.map(|h| format!("; to sign in there, run `{h}`"))
                .unwrap_or_default()
        )
    } else {
        format!(
            "the server names {named}, not the `issuer` configured (`{expected}`): nothing was \
             sent there (if the server has moved to it, change `issuer`)"
        )
    }
}

fn scope_note(scope: Option<&str>) -> String {
    scope
        .map(|s| format!(", scope `{}`", toolhost_text::line(s, 200)))
        .unwrap_or_default()
}

fn hint_note(hint: Option<&str>) -> String {
    hint.map(|h| format!(": run `{h}`")).unwrap_or_default()
}

/// An rmcp error as text, bounded (rmcp's messages hold no token).
fn failed(e: AuthError) -> SignInError {
    SignInError::Failed(toolhost_text::line(&e.to_string(), 400))
}

/// What a successful sign-in obtained.
#[derive(Debug, Clone)]
pub struct SignedIn {
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// How long the access token lasts, if the server says.
    pub expires_in: Option<Duration>,
    /// Whether a refresh token came with it.
    pub refreshable: bool,
    /// Where the tokens are kept (`None`: in memory).
    pub token_file: Option<PathBuf>,
}

/// The sign-in state of one server, shared by its connection task and its
/// calls; the HTTP client its sessions send through adds its token.
pub(crate) struct Authorizer {
    server: String,
    url: Url,
    settings: OAuthSettings,
    store: TokenStore,
    client: AuthClient<reqwest::Client>,
    /// One sign-in at a time (two calls refused at once sign in once).
    signing_in: tokio::sync::Mutex<()>,
    /// Whether connecting may still ask a person (a sign-in that failed
    /// at connect time is not asked again by every reconnection).
    prompt_at_connect: AtomicBool,
    /// What to tell a person to run when nobody can be asked.
    hint: Option<String>,
    /// Why the kept tokens are not in use (their server named another
    /// authorization server); tried again when the server refuses.
    refused: parking_lot::Mutex<Option<SignInError>>,
}

/// The authorization server a sign-in may talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trusted {
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
    fn admit(&self, discovered: &Discovered, hint: Option<&str>) -> Result<(), SignInError> {
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
struct Discovered {
    metadata: AuthorizationMetadata,
    /// The metadata's `issuer`; for a 2025-03-26 server without any
    /// metadata (its default endpoints), the server's own origin.
    issuer: Option<String>,
}

/// What set off a sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Asked {
    /// Connecting (initialise or listing tools).
    Connect,
    /// A call a caller is waiting for.
    Call,
}

impl Authorizer {
    /// The state of server `server` at `url`, with its stored tokens (in
    /// use only when the server still names the authorization server they
    /// came from, or the configured one).
    pub(crate) async fn new(
        server: &str,
        url: &str,
        settings: &OAuthSettings,
    ) -> Result<Authorizer, SignInError> {
        let parsed = Url::parse(url).map_err(|e| SignInError::Failed(e.to_string()))?;
        let store = TokenStore::new(server, url, settings.token_dir.as_deref());
        let bare = AuthorizationManager::new(parsed.clone())
            .await
            .map_err(failed)?;
        let authorizer = Authorizer {
            server: server.to_owned(),
            url: parsed,
            settings: settings.clone(),
            store,
            client: AuthClient::new(reqwest::Client::default(), bare),
            signing_in: tokio::sync::Mutex::new(()),
            prompt_at_connect: AtomicBool::new(true),
            hint: settings.sign_in_command.clone(),
            refused: parking_lot::Mutex::new(None),
        };
        if authorizer
            .store
            .credentials()
            .is_some_and(|c| c.token_response.is_some())
        {
            let manager = match authorizer.stored_manager(None).await {
                Ok(manager) => manager,
                Err(e @ SignInError::WrongIssuer { .. }) => {
                    tracing::warn!(server, "the OAuth tokens kept are not used: {e}");
                    *authorizer.refused.lock() = Some(e);
                    return Ok(authorizer);
                }
                // The access token still serves until it expires.
                Err(e) => {
                    tracing::warn!(server, "the stored OAuth tokens cannot be refreshed: {e}");
                    authorizer.manager().await?
                }
            };
            *authorizer.client.auth_manager.lock().await = manager;
        }
        Ok(authorizer)
    }

    /// A manager over the kept tokens, ready to refresh them at the
    /// authorization server `challenge` (or the well-known places) leads
    /// to, when that is the one trusted.
    async fn stored_manager(
        &self,
        challenge: Option<&str>,
    ) -> Result<AuthorizationManager, SignInError> {
        let mut manager = self.manager().await?;
        let found = discover(&mut manager, &self.url, challenge).await?;
        self.trusted(false).admit(&found, self.hint.as_deref())?;
        // Tokens of an older version, kept without their issuer: pinned
        // to this one from now on.
        if self.settings.issuer.is_none() && self.store.issuer().is_none() {
            self.store
                .set_issuer(found.issuer.clone())
                .map_err(failed)?;
        }
        if manager.initialize_from_store().await.map_err(failed)?
            && let Some(stored) = self.store.credentials()
        {
            let secret = self.store.client_secret().or_else(|| {
                (self.settings.client_id.as_deref() == Some(stored.client_id.as_str()))
                    .then(|| self.settings.client_secret.clone())
                    .flatten()
            });
            if let Some(secret) = secret {
                let config = OAuthClientConfig::new(stored.client_id, self.url.as_str())
                    .with_client_secret(secret);
                manager.configure_client(config).map_err(failed)?;
            }
        }
        Ok(manager)
    }

    /// The authorization server this server's sign-ins may use: the one
    /// configured, else (unless a person signs in anew, `repin`) the one
    /// the kept tokens came from, else any.
    fn trusted(&self, repin: bool) -> Trusted {
        if let Some(issuer) = &self.settings.issuer {
            return Trusted::Configured(issuer.clone());
        }
        if repin {
            return Trusted::Any;
        }
        match self.store.issuer() {
            Some(issuer) => Trusted::Pinned(issuer),
            None => Trusted::Any,
        }
    }

    /// The HTTP client that adds the token (and refreshes it).
    pub(crate) fn http_client(&self) -> AuthClient<reqwest::Client> {
        self.client.clone()
    }

    /// The token file, if any.
    pub(crate) fn token_file(&self) -> Option<&Path> {
        self.store.path()
    }

    /// A line on the sign-in state, for `host plugins`: signed in (with
    /// the scopes granted) or not.
    pub(crate) fn describe(&self) -> String {
        match self.store.credentials() {
            Some(c) if c.token_response.is_some() => {
                let scopes = if c.granted_scopes.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", scopes {}",
                        toolhost_text::line(&c.granted_scopes.join(" "), 200)
                    )
                };
                let refresh = c
                    .token_response
                    .as_ref()
                    .is_some_and(|t| oauth2::TokenResponse::refresh_token(t).is_some());
                let at = self
                    .store
                    .issuer()
                    .map(|i| format!(" at {}", toolhost_text::line(&i, 200)))
                    .unwrap_or_default();
                let unused = if self.refused.lock().is_some() {
                    " (not in use: the server names another authorization server)"
                } else {
                    ""
                };
                format!(
                    "OAuth: signed in as client {}{at}{scopes}{}{unused}",
                    toolhost_text::line(&c.client_id, 120),
                    if refresh { ", refreshable" } else { "" }
                )
            }
            _ => "OAuth: not signed in".to_owned(),
        }
    }

    /// Obtains a token that answers `challenge` (the `WWW-Authenticate`
    /// of a 401 or 403), the `attempt`-th for one request.
    pub(crate) async fn answer(
        &self,
        challenge: &str,
        attempt: u32,
        asked: Asked,
    ) -> Result<(), SignInError> {
        let params = WWWAuthenticateParams::parse(challenge, &self.url);
        let step_up = params.is_insufficient_scope();
        if attempt >= MAX_SIGN_INS {
            return Err(SignInError::StillRefused {
                attempts: attempt,
                scope: params.scope,
            });
        }
        let before = self.store.credentials().and_then(|c| c.token_received_at);
        let _one = self.signing_in.lock().await;
        // Another request signed in meanwhile: its token may do.
        let after = self.store.credentials().and_then(|c| c.token_received_at);
        if attempt == 0 && after.is_some() && after != before {
            return Ok(());
        }
        if self.settings.grant == OAuthGrant::ClientCredentials {
            return self.client_credentials(Some(challenge), params.scope).await;
        }
        let prompt = match (&self.settings.prompt, asked) {
            (Some(_), Asked::Connect) if !self.prompt_at_connect.load(Ordering::Relaxed) => None,
            (prompt, _) => prompt.as_ref(),
        };
        let Some(prompt) = prompt else {
            // The kept tokens, set aside while the server named another
            // authorization server: in use again if it names theirs now.
            let refused = self.refused.lock().clone();
            if let Some(refused) = refused {
                return match self.stored_manager(Some(challenge)).await {
                    Ok(manager) => {
                        *self.client.auth_manager.lock().await = manager;
                        *self.refused.lock() = None;
                        tracing::info!(server = %self.server, "OAuth: the kept tokens are in use again");
                        Ok(())
                    }
                    Err(e @ SignInError::WrongIssuer { .. }) => Err(e),
                    Err(_) => Err(refused),
                };
            }
            return Err(SignInError::NeedsSignIn {
                status: if step_up { 403 } else { 401 },
                scope: params.scope,
                hint: self.hint.clone(),
            });
        };
        let signed = self
            .authorization_code(
                Some(challenge),
                step_up.then_some(params.scope).flatten(),
                prompt,
                false,
            )
            .await;
        if signed.is_err() && asked == Asked::Connect {
            self.prompt_at_connect.store(false, Ordering::Relaxed);
        }
        signed.map(|_| ())
    }

    /// A new manager over the same store, for one sign-in.
    async fn manager(&self) -> Result<AuthorizationManager, SignInError> {
        let mut manager = AuthorizationManager::new(self.url.clone())
            .await
            .map_err(failed)?;
        manager.set_credential_store(self.store.clone());
        Ok(manager)
    }

    /// Discovery from `challenge` (or the well-known places), and the
    /// authorization server found only if it is `trusted`.
    async fn discover(
        &self,
        manager: &mut AuthorizationManager,
        challenge: Option<&str>,
        trusted: &Trusted,
    ) -> Result<Discovered, SignInError> {
        let found = discover(manager, &self.url, challenge).await?;
        trusted.admit(&found, self.hint.as_deref())?;
        Ok(found)
    }

    /// The client-credentials grant (SEP-1046). rmcp's `private_key_jwt`
    /// exchange is not `Send` (it holds a form serializer across an
    /// await), so the grant runs on a runtime of its own.
    async fn client_credentials(
        &self,
        challenge: Option<&str>,
        challenged: Option<String>,
    ) -> Result<(), SignInError> {
        let url = self.url.clone();
        let store = self.store.clone();
        let settings = self.settings.clone();
        let challenge = challenge.map(str::to_owned);
        let trusted = self.trusted(false);
        let hint = self.hint.clone();
        let manager = tokio::task::spawn_blocking(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| SignInError::Failed(e.to_string()))?
                .block_on(client_credentials(
                    url,
                    store,
                    &settings,
                    Grant {
                        challenge: challenge.as_deref(),
                        challenged,
                        trusted: &trusted,
                        hint: hint.as_deref(),
                    },
                ))
        })
        .await
        .map_err(|e| SignInError::Failed(e.to_string()))??;
        *self.client.auth_manager.lock().await = manager;
        *self.refused.lock() = None;
        tracing::info!(server = %self.server, "OAuth: obtained a token with the client's credentials");
        Ok(())
    }

    /// The authorization-code grant with PKCE, through a person's browser;
    /// `step_up`: the scope a 403 asked for, added to what was granted;
    /// `repin`: a person signs in anew, at whichever authorization server
    /// the server names now (unless one is configured).
    async fn authorization_code(
        &self,
        challenge: Option<&str>,
        step_up: Option<String>,
        prompt: &SignInPrompt,
        repin: bool,
    ) -> Result<SignedIn, SignInError> {
        let mut manager = self.manager().await?;
        let found = self
            .discover(&mut manager, challenge, &self.trusted(repin))
            .await?;
        let metadata = &found.metadata;
        let mut scopes = if !self.settings.scopes.is_empty() {
            self.settings.scopes.clone()
        } else if let Some(more) = step_up {
            let granted = self
                .store
                .credentials()
                .map(|c| c.granted_scopes)
                .unwrap_or_default();
            granted
                .into_iter()
                .chain(more.split_whitespace().map(str::to_owned))
                .collect()
        } else {
            manager.select_initial_scopes(&[]).await
        };
        dedup(&mut scopes);
        add_offline_access(&mut scopes, metadata);
        let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let loopback = loopback::Loopback::bind(self.settings.redirect_port)
            .await
            .map_err(|e| SignInError::Failed(format!("cannot listen for the redirect: {e}")))?;
        let redirect = loopback.redirect_uri().to_owned();
        // The client, in the spec's order: pre-registered, a metadata
        // document where the server takes one, dynamic registration.
        let takes_metadata_documents = metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(serde_json::Value::as_bool)
            == Some(true);
        let client = if let Some(id) = &self.settings.client_id {
            let mut config = OAuthClientConfig::new(id.clone(), redirect.clone());
            if let Some(secret) = &self.settings.client_secret {
                config = config.with_client_secret(secret.clone());
            }
            config
        } else if let Some(document) = self
            .settings
            .client_metadata_url
            .as_ref()
            .filter(|_| takes_metadata_documents)
        {
            OAuthClientConfig::new(document.clone(), redirect.clone())
        } else {
            manager
                .register_client(CLIENT_NAME, &redirect, &scope_refs)
                .await
                .map_err(failed)?
        };
        let secret = client.client_secret.clone();
        manager.configure_client(client).map_err(failed)?;
        let url = manager
            .get_authorization_url(&scope_refs)
            .await
            .map_err(failed)?;
        let state = Url::parse(&url)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .ok_or_else(|| SignInError::Failed("the authorization URL has no state".into()))?;
        tracing::info!(server = %self.server, "OAuth: waiting for the sign-in in the browser");
        (prompt.0)(&self.server, &url);
        let callback = loopback
            .wait(&state, SIGN_IN_TIMEOUT)
            .await
            .map_err(SignInError::Interrupted)?;
        let token = manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.state,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(failed)?;
        self.store.set_client_secret(secret).map_err(failed)?;
        self.store.set_issuer(found.issuer).map_err(failed)?;
        let signed = SignedIn {
            scopes: manager.get_current_scopes().await,
            expires_in: oauth2::TokenResponse::expires_in(&token),
            refreshable: oauth2::TokenResponse::refresh_token(&token).is_some(),
            token_file: self.store.path().map(Path::to_path_buf),
        };
        *self.client.auth_manager.lock().await = manager;
        *self.refused.lock() = None;
        tracing::info!(server = %self.server, "OAuth: signed in");
        Ok(signed)
    }
}

/// What one client-credentials grant answers.
struct Grant<'a> {
    /// The `WWW-Authenticate` of the refusal, if any.
    challenge: Option<&'a str>,
    /// The scope it names.
    challenged: Option<String>,
    /// The authorization server the client's credentials may go to.
    trusted: &'a Trusted,
    /// What to run to sign in anew.
    hint: Option<&'a str>,
}

/// A manager over `store` holding a token of the client-credentials grant.
async fn client_credentials(
    url: Url,
    store: TokenStore,
    settings: &OAuthSettings,
    grant: Grant<'_>,
) -> Result<AuthorizationManager, SignInError> {
    crate::jwt_crypto();
    let Some(client_id) = settings.client_id.clone() else {
        return Err(SignInError::Failed(
            "the client-credentials grant needs a client id".into(),
        ));
    };
    let mut manager = AuthorizationManager::new(url.clone())
        .await
        .map_err(failed)?;
    manager.set_credential_store(store.clone());
    // Before anything is sent: the credentials go to the trusted
    // authorization server only.
    let found = discover(&mut manager, &url, grant.challenge).await?;
    grant.trusted.admit(&found, grant.hint)?;
    let challenged = grant.challenged;
    let scopes = if settings.scopes.is_empty() {
        challenged
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default()
    } else {
        settings.scopes.clone()
    };
    // RFC 8707: the resource is this server.
    let resource = Some(url.to_string());
    let config = match (&settings.private_key_pem, &settings.client_secret) {
        (Some(pem), _) => ClientCredentialsConfig::PrivateKeyJwt {
            client_id,
            signing_key: pem.as_bytes().to_vec(),
            signing_algorithm: signing_algorithm(settings.signing_algorithm.as_deref())?,
            token_endpoint_audience: None,
            scopes,
            resource,
        },
        (None, Some(secret)) => ClientCredentialsConfig::ClientSecret {
            client_id,
            client_secret: secret.clone(),
            scopes,
            resource,
        },
        (None, None) => {
            return Err(SignInError::Failed(
                "the client-credentials grant needs a client secret or a private key".into(),
            ));
        }
    };
    manager
        .validate_client_credentials_metadata(&config)
        .map_err(failed)?;
    manager
        .configure_client_credentials(&config)
        .map_err(failed)?;
    manager
        .exchange_client_credentials(&config)
        .await
        .map_err(failed)?;
    store.set_issuer(found.issuer).map_err(failed)?;
    Ok(manager)
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
async fn discover(
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
    let client = reqwest::Client::builder()
        .timeout(METADATA_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let mut response = client
        .get(well_known.clone())
        .header("MCP-Protocol-Version", "2025-03-26")
        .send()
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !response.status().is_success() {
        return Err(fail(format!("answered {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| fail(e.to_string()))? {
        if body.len().saturating_add(chunk.len()) > MAX_METADATA_BYTES {
            return Err(fail(format!("larger than {MAX_METADATA_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body)
        .map_err(|e| fail(format!("not authorization server metadata: {e}")))
}

/// `offline_access` joins the scopes when the authorization server lists
/// it (for a refresh token), unless no scope is asked for at all.
fn add_offline_access(scopes: &mut Vec<String>, metadata: &AuthorizationMetadata) {
    let listed = metadata
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    if listed && !scopes.is_empty() && !scopes.iter().any(|s| s == "offline_access") {
        scopes.push("offline_access".to_owned());
    }
}

fn dedup(scopes: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
}

fn signing_algorithm(name: Option<&str>) -> Result<JwtSigningAlgorithm, SignInError> {
    Ok(match name.unwrap_or("ES256") {
        "ES256" => JwtSigningAlgorithm::ES256,
        "ES384" => JwtSigningAlgorithm::ES384,
        "RS256" => JwtSigningAlgorithm::RS256,
        "RS384" => JwtSigningAlgorithm::RS384,
        "RS512" => JwtSigningAlgorithm::RS512,
        other => {
            return Err(SignInError::Failed(format!(
                "unknown signing algorithm `{}` (ES256, ES384, RS256, RS384 or RS512)",
                toolhost_text::line(other, 40)
            )));
        }
    })
}

/// Signs in to the HTTP server of `config` now, whatever tokens are kept,
/// and keeps the new ones: asks the server (its 401 names where to sign
/// in), then signs in with the grant of its OAuth settings (a person's
/// browser through their [`SignInPrompt`], or the client's credentials).
///
/// ```no_run
/// # async fn run() -> Result<(), toolhost_mcp::McpClientError> {
/// use std::sync::Arc;
/// use toolhost_mcp::{McpServerConfig, McpTransport, OAuthSettings, SignInPrompt};
///
/// let mut config = McpServerConfig::http("docs", "https://mcp.example.com/mcp");
/// if let McpTransport::Http(endpoint) = &mut config.transport {
///     endpoint.oauth = Some(OAuthSettings {
///         token_dir: Some("/home/me/.local/share/toolhost/oauth".into()),
///         prompt: Some(SignInPrompt(Arc::new(|server, url| {
///             eprintln!("sign in to {server}: {url}")
///         }))),
///         ..OAuthSettings::default()
///     });
/// }
/// let signed = toolhost_mcp::sign_in(&config).await?;
/// println!("granted: {}", signed.scopes.join(" "));
/// # Ok(()) }
/// ```
pub async fn sign_in(config: &super::McpServerConfig) -> Result<SignedIn, super::McpClientError> {
    let invalid = |message: String| super::McpClientError::Invalid {
        name: config.name.clone(),
        message,
    };
    let super::McpTransport::Http(endpoint) = &config.transport else {
        return Err(invalid("only an HTTP server signs in (OAuth)".into()));
    };
    let Some(settings) = &endpoint.oauth else {
        return Err(invalid("OAuth is not set for this server".into()));
    };
    check(&config.name, settings)?;
    super::connect::check(config).map_err(invalid)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let signed = async {
        let challenge = Some(super::connect::challenge(config).await?);
        let authorizer = Authorizer::new(&config.name, &endpoint.url, settings).await?;
        match settings.grant {
            OAuthGrant::ClientCredentials => {
                let scope = challenge
                    .as_deref()
                    .and_then(|c| WWWAuthenticateParams::parse(c, &authorizer.url).scope);
                authorizer
                    .client_credentials(challenge.as_deref(), scope)
                    .await?;
                Ok(SignedIn {
                    scopes: authorizer
                        .store
                        .credentials()
                        .map(|c| c.granted_scopes)
                        .unwrap_or_default(),
                    expires_in: None,
                    refreshable: false,
                    token_file: authorizer.token_file().map(Path::to_path_buf),
                })
            }
            OAuthGrant::AuthorizationCode => {
                let Some(prompt) = &settings.prompt else {
                    return Err(SignInError::Failed(
                        "nobody to show the sign-in page to (no prompt set)".into(),
                    ));
                };
                authorizer
                    .authorization_code(challenge.as_deref(), None, prompt, true)
                    .await
            }
        }
    }
    .await;
    signed.map_err(|e| invalid(e.to_string()))
}

/// What can be checked of `settings` (server `name`'s) before signing in:
/// a client that keeps a secret or a key names the authorization server
/// it may be sent to, as an issuer identifier (a URL without query or
/// fragment).
pub(crate) fn check(name: &str, settings: &OAuthSettings) -> Result<(), super::McpClientError> {
    match &settings.issuer {
        None if settings.client_secret.is_some() || settings.private_key_pem.is_some() => {
            Err(super::McpClientError::IssuerRequired {
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
            _ => Err(super::McpClientError::Invalid {
                name: name.to_owned(),
                message: format!(
                    "OAuth `issuer` `{}` is not an issuer identifier (an http(s) URL without query or fragment)",
                    toolhost_text::line(issuer, 200)
                ),
            }),
        },
    }
}

/// Forgets the tokens kept for server `name` in `token_dir`; whether there
/// were any. (The authorization server is not told: its tokens expire.)
pub fn sign_out(name: &str, token_dir: &Path) -> std::io::Result<bool> {
    token_store::remove(token_dir, name)
}

/// The file server `name`'s tokens are kept in, in `token_dir`.
pub fn token_file(name: &str, token_dir: &Path) -> PathBuf {
    token_store::token_path(token_dir, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offline_access_is_asked_for_only_where_listed_and_with_other_scopes() {
        let mut metadata = AuthorizationMetadata::default();
        let mut scopes = vec!["a".to_owned()];
        add_offline_access(&mut scopes, &metadata);
        assert_eq!(scopes, ["a"]);
        metadata.scopes_supported = Some(vec!["a".into(), "offline_access".into()]);
        add_offline_access(&mut scopes, &metadata);
        assert_eq!(scopes, ["a", "offline_access"]);
        let mut none = Vec::new();
        add_offline_access(&mut none, &metadata);
        assert!(none.is_empty());
    }

    #[test]
    fn errors_say_what_to_run_and_hold_no_secret() {
        let e = SignInError::NeedsSignIn {
            status: 401,
            scope: Some("mcp:read".into()),
            hint: Some("host mcp login docs".into()),
        };
        assert_eq!(
            e.to_string(),
            "needs sign-in (the server answered 401, scope `mcp:read`): run `host mcp login docs`"
        );
        let settings = OAuthSettings {
            client_secret: Some("s3cret".into()),
            private_key_pem: Some("-----BEGIN".into()),
            ..OAuthSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("BEGIN"),
            "{shown}"
        );
    }

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

    #[test]
    fn a_client_with_a_secret_or_a_key_names_its_issuer() {
        let secret = OAuthSettings {
            client_id: Some("gw".into()),
            client_secret: Some("s3cret".into()),
            ..OAuthSettings::default()
        };
        let e = check("tickets", &secret).unwrap_err();
        assert!(
            matches!(&e, crate::McpClientError::IssuerRequired { name } if name == "tickets"),
            "{e}"
        );
        assert!(e.to_string().contains("issuer = \"https://"), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let key = OAuthSettings {
            private_key_pem: Some("-----BEGIN".into()),
            ..OAuthSettings::default()
        };
        assert!(check("tickets", &key).is_err());
        assert!(
            check("docs", &OAuthSettings::default()).is_ok(),
            "a public client"
        );
        let named = |issuer: &str| OAuthSettings {
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

    #[test]
    fn signing_algorithms_are_named_as_jose_names_them() {
        assert!(signing_algorithm(None).is_ok());
        assert!(signing_algorithm(Some("RS256")).is_ok());
        assert!(signing_algorithm(Some("none")).is_err());
    }
}
