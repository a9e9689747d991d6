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
//!   with a person at hand (a prompt) and no `issuer` configured, such a
//!   server has moved (SEP-2352): the person signs in at the new one,
//!   registered anew, and the kept tokens are replaced once that completes;
//! - DPoP (`dpop.rs`, `dpop_http.rs`): where the server's challenge offers
//!   the scheme and its authorization server takes ES256 proofs, the
//!   tokens are bound to a key kept with them, proved on each token
//!   request and each request to the server;
//! - the tokens: kept by `token_store.rs` (a file only the user can read)
//!   with the issuer they came from, never written to a log, a trace or
//!   an error.

mod client_credentials;
mod discovery;
mod dpop;
mod dpop_http;
mod enterprise;
mod error;
mod jwt_bearer;
mod loopback;
mod settings;
mod token_store;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, OAuthClientConfig, WWWAuthenticateParams,
};
use url::Url;

use client_credentials::{Grant, client_credentials};
use discovery::{Discovered, Trusted, discover};
use dpop::Dpop;
pub(crate) use dpop_http::DpopHttp;
use dpop_http::DpopOAuthClient;
pub use error::SignInError;
use error::failed;
pub(crate) use settings::check;
pub use settings::{EnterpriseIdp, OAuthGrant, ShowSignIn, SignInPrompt, UpstreamOAuth};
use token_store::TokenStore;

/// The most tokens obtained for one request (a sign-in, then up to two
/// step-ups) before it fails: the spec asks clients to bound retries.
pub const MAX_SIGN_INS: u32 = 3;
/// How long a person has to finish signing in.
pub const SIGN_IN_TIMEOUT: Duration = Duration::from_secs(300);
/// The client name sent in dynamic registration.
const CLIENT_NAME: &str = "toolhost";

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
    settings: UpstreamOAuth,
    store: TokenStore,
    client: AuthClient<DpopHttp>,
    /// The DPoP key and nonces of its sign-in, if it is DPoP's.
    dpop: Arc<Dpop>,
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
    /// The digest of the workload assertion the authorization server
    /// refused last (JWT-bearer grant), not sent again.
    refused_assertion: parking_lot::Mutex<Option<[u8; 32]>>,
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
        settings: &UpstreamOAuth,
    ) -> Result<Authorizer, SignInError> {
        let parsed = Url::parse(url).map_err(|e| SignInError::Failed(e.to_string()))?;
        let store = TokenStore::new(server, url, settings.token_dir.as_deref());
        let bare = AuthorizationManager::new(parsed.clone())
            .await
            .map_err(failed)?;
        let dpop = Dpop::new(store.clone());
        let authorizer = Authorizer {
            server: server.to_owned(),
            url: parsed,
            settings: settings.clone(),
            store,
            client: AuthClient::new(DpopHttp::new(dpop.clone()), bare),
            dpop,
            signing_in: tokio::sync::Mutex::new(()),
            prompt_at_connect: AtomicBool::new(true),
            hint: settings.sign_in_command.clone(),
            refused: parking_lot::Mutex::new(None),
            refused_assertion: parking_lot::Mutex::new(None),
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
    pub(crate) fn http_client(&self) -> AuthClient<DpopHttp> {
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
        match self.settings.grant {
            OAuthGrant::ClientCredentials => {
                return self.client_credentials(Some(challenge), params.scope).await;
            }
            grant @ (OAuthGrant::JwtBearer | OAuthGrant::Enterprise) => {
                return self.unattended(grant, Some(challenge), params.scope).await;
            }
            OAuthGrant::AuthorizationCode => {}
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
        let step_up = step_up.then_some(params.scope).flatten();
        let signed = match self
            .authorization_code(Some(challenge), step_up.clone(), prompt, false)
            .await
        {
            // The server has moved to another authorization server
            // (SEP-2352) and a person is at hand: a sign-in there anew,
            // registered anew; nothing kept is sent there, and the kept
            // tokens are replaced only once it completes.
            Err(SignInError::WrongIssuer {
                pinned: true,
                named: Some(named),
                ..
            }) => {
                tracing::warn!(
                    server = %self.server,
                    issuer = %toolhost_text::line(&named, 200),
                    "OAuth: the server names another authorization server; signing in there anew"
                );
                self.authorization_code(Some(challenge), step_up, prompt, true)
                    .await
            }
            signed => signed,
        };
        if signed.is_err() && asked == Asked::Connect {
            self.prompt_at_connect.store(false, Ordering::Relaxed);
        }
        signed.map(|_| ())
    }

    /// A new manager over the same store, for one sign-in; DPoP's
    /// (`dpop.rs`) when a DPoP key is kept with the tokens.
    async fn manager(&self) -> Result<AuthorizationManager, SignInError> {
        let mut manager = if self.dpop.key().is_some() {
            let client =
                DpopOAuthClient::new(self.dpop.clone(), &self.url).map_err(SignInError::Failed)?;
            AuthorizationManager::new_with_oauth_http_client(self.url.clone(), Arc::new(client))
                .await
                .map_err(failed)?
        } else {
            AuthorizationManager::new(self.url.clone())
                .await
                .map_err(failed)?
        };
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

    /// A grant nobody attends but the client-credentials one: a
    /// workload's JWT-bearer grant (`jwt_bearer.rs`) or enterprise-managed
    /// authorization (`enterprise.rs`).
    async fn unattended(
        &self,
        grant: OAuthGrant,
        challenge: Option<&str>,
        challenged: Option<String>,
    ) -> Result<(), SignInError> {
        let trusted = self.trusted(false);
        let terms = Grant {
            challenge,
            challenged,
            trusted: &trusted,
            hint: self.hint.as_deref(),
        };
        let (url, store) = (self.url.clone(), self.store.clone());
        let manager = if grant == OAuthGrant::Enterprise {
            enterprise::enterprise(url, store, &self.settings, terms).await?
        } else {
            jwt_bearer::jwt_bearer(url, store, &self.settings, terms, &self.refused_assertion)
                .await?
        };
        *self.client.auth_manager.lock().await = manager;
        *self.refused.lock() = None;
        tracing::info!(server = %self.server, ?grant, "OAuth: obtained a token without a sign-in");
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
        let trusted = self.trusted(repin);
        let mut manager = self.manager().await?;
        let mut found = self.discover(&mut manager, challenge, &trusted).await?;
        // DPoP where both the server and its authorization server take
        // it: a key kept with the tokens (made now if there is none), and
        // the manager whose token requests carry proofs; none elsewhere.
        let dpop = dpop::taken_by(challenge) && dpop::offered(&found.metadata);
        if dpop != self.dpop.key().is_some() {
            if dpop {
                self.dpop.key_or_new().map_err(SignInError::Failed)?;
            } else {
                self.store.set_dpop_key(None).map_err(failed)?;
            }
            manager = self.manager().await?;
            found = self.discover(&mut manager, challenge, &trusted).await?;
        }
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

impl Authorizer {
    /// Signs in now with the grant of `settings`, whatever tokens are
    /// kept, after the server's `challenge` (`client/sign_in.rs`).
    pub(crate) async fn sign_in_now(
        &self,
        challenge: Option<&str>,
        settings: &UpstreamOAuth,
    ) -> Result<SignedIn, SignInError> {
        match settings.grant {
            grant @ (OAuthGrant::ClientCredentials
            | OAuthGrant::JwtBearer
            | OAuthGrant::Enterprise) => {
                let scope =
                    challenge.and_then(|c| WWWAuthenticateParams::parse(c, &self.url).scope);
                if grant == OAuthGrant::ClientCredentials {
                    self.client_credentials(challenge, scope).await?;
                } else {
                    self.unattended(grant, challenge, scope).await?;
                }
                Ok(SignedIn {
                    scopes: self
                        .store
                        .credentials()
                        .map(|c| c.granted_scopes)
                        .unwrap_or_default(),
                    expires_in: None,
                    refreshable: false,
                    token_file: self.token_file().map(Path::to_path_buf),
                })
            }
            OAuthGrant::AuthorizationCode => {
                let Some(prompt) = &settings.prompt else {
                    return Err(SignInError::Failed(
                        "nobody to show the sign-in page to (no prompt set)".into(),
                    ));
                };
                self.authorization_code(challenge, None, prompt, true).await
            }
        }
    }
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
}
