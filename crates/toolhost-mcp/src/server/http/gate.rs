//! Who may reach what: the gate in front of `/mcp` ([`admit`]: a bearer
//! token, static or OAuth, when tokens or OAuth are set, and a free slot),
//! and the one in front of the extras ([`admit_extras`]: `/healthz`,
//! `/readyz`, `/metrics`, the protected resource metadata, the console's
//! pages: an accepted `Host`, and a caller's token for `/metrics` unless
//! the metrics are public). A refusal is a JSON-RPC error that never
//! quotes the token.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use super::super::identity::{ClientAsks, ClientIdentity, ClientProfile};
use super::super::oauth::{self, Checked, ResourceServer};
use super::origins::AllowedHosts;
use super::tokens::{ClientToken, TokenRole, client_of};

/// The challenge of a server that takes static tokens only, for a request
/// without one. It has no OAuth metadata to point to, so it says in
/// words what is wrong (RFC 6750, 3), for the clients that show
/// `error_description` (Codex, Claude Code) instead of a bare `Bearer`.
const NO_TOKEN_CHALLENGE: &str = r#"Bearer realm="toolhost", error="invalid_token", error_description="a bearer token is required (Authorization: Bearer TOKEN)""#;
/// The same, for a request whose token is none of the server's.
const WRONG_TOKEN_CHALLENGE: &str = r#"Bearer realm="toolhost", error="invalid_token", error_description="the bearer token is not one this server accepts""#;

/// Who may call: the static tokens and the OAuth resource server.
#[derive(Clone)]
pub(super) struct Auth {
    pub(super) tokens: Arc<[ClientToken]>,
    pub(super) oauth: Option<Arc<ResourceServer>>,
}

#[derive(Clone)]
pub(super) struct Gate {
    pub(super) auth: Auth,
    pub(super) slots: Arc<tokio::sync::Semaphore>,
}

/// Who may reach `/healthz`, `/readyz`, `/metrics` and the protected
/// resource metadata.
#[derive(Clone)]
pub(super) struct ExtrasGate {
    /// `Host` values accepted, as for `/mcp`.
    pub(super) hosts: Arc<AllowedHosts>,
    pub(super) auth: Auth,
    pub(super) metrics_public: bool,
}

/// Lets a request to `/healthz`, `/readyz`, `/metrics` or the metadata in
/// when its `Host` is one the server answers to (as for `/mcp`: DNS
/// rebinding), and one to `/metrics` only with a caller's token (static,
/// or an OAuth caller let in) when tokens are set, unless the metrics are
/// public.
pub(super) async fn admit_extras(
    State(gate): State<ExtrasGate>,
    request: Request,
    next: Next,
) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    // A clone of the URI shares its bytes: no copy of the path per request.
    let uri = request.uri().clone();
    let path = uri.path();
    let response = admit_extra(gate, request, next).await;
    tracing::info!(
        target: "toolhost::mcp::access",
        %method,
        path = logged(path),
        status = response.status().as_u16(),
        micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    response
}

/// The longest path an access-log line shows (a request's path is the
/// sender's to choose).
const MAX_LOGGED_PATH: usize = 200;

/// A request's path as an access-log line shows it: its first
/// [`MAX_LOGGED_PATH`] bytes (`http` keeps controls out of a path).
fn logged(path: &str) -> &str {
    let mut end = path.len().min(MAX_LOGGED_PATH);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    &path[..end]
}

/// [`admit_extras`]' checks, before its log line.
async fn admit_extra(gate: ExtrasGate, request: Request, next: Next) -> Response {
    // An accepted name matches with or without the port (`toolhost`,
    // `toolhost:8080`), as rmcp's check for `/mcp`.
    let allowed = gate.hosts.allow(request.uri(), request.headers());
    if !allowed {
        tracing::debug!(target: "toolhost::mcp::access", "refused: Host not accepted");
        return (StatusCode::FORBIDDEN, "Host not accepted\n").into_response();
    }
    if request.uri().path() == "/metrics" && !gate.metrics_public && gate.auth.required() {
        let given = bearer(&request).map(str::to_owned);
        match gate.auth.identify(given.as_deref(), "/metrics").await {
            Identified::Token(_) | Identified::OAuth(_) => {}
            Identified::Refused(refusal) => {
                tracing::debug!(target: "toolhost::mcp::access", "refused: no valid bearer token");
                return refusal;
            }
        }
    }
    next.run(request).await
}

/// The bearer token `request` carries (`Authorization: Bearer …`).
fn bearer(request: &Request) -> Option<&str> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        // The scheme is case-insensitive (RFC 9110, 11.1).
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// Who a request's bearer token says its sender is.
enum Identified {
    /// A static token's holder.
    Token(ClientToken),
    /// An OAuth caller, let in.
    OAuth(oauth::Admitted),
    /// Nobody this server lets in: the answer to send.
    Refused(Response),
}

impl Auth {
    /// Whether a request needs a token at all.
    fn required(&self) -> bool {
        !self.tokens.is_empty() || self.oauth.is_some()
    }

    /// Reads the request's token: a static one first, else an OAuth
    /// access token (when OAuth is on). A refusal never quotes the token.
    async fn identify(&self, given: Option<&str>, path: &str) -> Identified {
        if let Some(client) = given.and_then(|g| client_of(&self.tokens, g)) {
            return Identified::Token(client.clone());
        }
        let Some(oauth) = &self.oauth else {
            let (message, challenge) = match given {
                Some(g) if !g.is_empty() => (
                    "the bearer token is not one this server accepts",
                    WRONG_TOKEN_CHALLENGE,
                ),
                _ => (
                    "a valid bearer token is required (Authorization: Bearer …)",
                    NO_TOKEN_CHALLENGE,
                ),
            };
            return Identified::Refused(refusal(
                StatusCode::UNAUTHORIZED,
                -32001,
                message,
                (
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static(challenge),
                ),
            ));
        };
        let metadata = oauth.metadata();
        let Some(token) = given.filter(|t| !t.is_empty()) else {
            return Identified::Refused(refusal(
                StatusCode::UNAUTHORIZED,
                -32001,
                "a valid bearer token is required (Authorization: Bearer …): an access token \
                 from the authorization server this server's metadata names",
                (header::WWW_AUTHENTICATE, metadata.challenge(None)),
            ));
        };
        match oauth.check(token).await {
            Checked::Admitted(admitted) => Identified::OAuth(admitted),
            Checked::Invalid(problem) => {
                tracing::info!(target: "toolhost::mcp::access", path, status = 401, problem = problem.as_str(), "refused: the access token is not valid here");
                Identified::Refused(refusal(
                    StatusCode::UNAUTHORIZED,
                    -32001,
                    "the access token is not valid for this server",
                    (
                        header::WWW_AUTHENTICATE,
                        metadata.challenge(Some("invalid_token")),
                    ),
                ))
            }
            Checked::InsufficientScope(caller) => {
                tracing::info!(target: "toolhost::mcp::access", path, status = 403, client = %caller.identity(), "refused: the access token lacks a scope this server requires");
                Identified::Refused(refusal(
                    StatusCode::FORBIDDEN,
                    -32001,
                    "the access token lacks a scope this server requires",
                    (
                        header::WWW_AUTHENTICATE,
                        metadata.challenge(Some("insufficient_scope")),
                    ),
                ))
            }
            Checked::Unmapped(caller) => {
                tracing::info!(target: "toolhost::mcp::access", path, status = 403, client = %caller.identity(), "refused: no [[oauth.callers]] rule names this caller");
                Identified::Refused(refusal(
                    StatusCode::FORBIDDEN,
                    -32001,
                    "this server has no profile for the caller the access token names",
                    (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                ))
            }
            Checked::Unavailable(e) => {
                tracing::warn!(target: "toolhost::mcp::access", path, status = 503, "cannot check an access token: {e}");
                let (message, retry) = match e {
                    oauth::OAuthError::Busy { .. } => (
                        "too many new access tokens to check at the authorization server now; retry shortly",
                        "1",
                    ),
                    _ => (
                        "the authorization server cannot be reached to check the access token; retry shortly",
                        "5",
                    ),
                };
                Identified::Refused(refusal(
                    StatusCode::SERVICE_UNAVAILABLE,
                    -32000,
                    message,
                    (header::RETRY_AFTER, HeaderValue::from_static(retry)),
                ))
            }
        }
    }
}

/// Lets a request to `/mcp` in when it carries a token (when tokens or
/// OAuth are set) and a slot is free; marks it with its caller's identity,
/// profile and who answers its asks.
pub(super) async fn admit(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    // A clone of the URI shares its bytes: no copy of the path per request.
    let uri = request.uri().clone();
    let path = uri.path();
    if gate.auth.required() {
        let given = bearer(&request).map(str::to_owned);
        let (identity, agent, asks) = match gate.auth.identify(given.as_deref(), path).await {
            Identified::Refused(refused) => {
                if refused.status() == StatusCode::UNAUTHORIZED {
                    // Said apart, as the 401's challenge says them apart: a
                    // client that reports only "disconnected" (Gemini CLI,
                    // Qwen Code) leaves the operator this line.
                    let why = if given.is_some() {
                        "refused: the bearer token is not one this server accepts"
                    } else {
                        "refused: no bearer token"
                    };
                    tracing::info!(target: "toolhost::mcp::access", %method, path = logged(path), status = 401, "{why}");
                }
                return refused;
            }
            Identified::Token(client) if client.role == TokenRole::Operator => {
                tracing::info!(target: "toolhost::mcp::access", %method, path = logged(path), status = 403, "refused: an operator's token calls no tool");
                return refusal(
                    StatusCode::FORBIDDEN,
                    -32001,
                    "an operator's token opens the console only; calls need a caller's token",
                    (header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
                );
            }
            Identified::Token(client) => (
                ClientIdentity::of_token(&client.token),
                client.agent,
                client.asks,
            ),
            Identified::OAuth(admitted) => (
                ClientIdentity(admitted.caller.identity()),
                admitted.profile,
                admitted.asks,
            ),
        };
        if let Some(agent) = agent {
            request.extensions_mut().insert(ClientProfile(agent));
        }
        if let Some(asks) = asks {
            request.extensions_mut().insert(ClientAsks(asks));
        }
        request.extensions_mut().insert(identity);
    }
    let client = request
        .extensions()
        .get::<ClientIdentity>()
        .map(|c| c.0.clone());
    let Ok(_slot) = gate.slots.clone().try_acquire_owned() else {
        tracing::warn!(target: "toolhost::mcp::access", %method, path = logged(path), status = 503, "refused: too many requests in flight");
        return refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            -32000,
            "the server is at its limit of concurrent requests; retry shortly",
            (header::RETRY_AFTER, HeaderValue::from_static("1")),
        );
    };
    let response = next.run(request).await;
    tracing::info!(
        target: "toolhost::mcp::access",
        %method,
        path = logged(path),
        status = response.status().as_u16(),
        client = client.as_deref(),
        micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    response
}

/// A refused request: `status`, a JSON-RPC error, and one header.
fn refusal(
    status: StatusCode,
    code: i32,
    message: &str,
    (name, value): (http::HeaderName, HeaderValue),
) -> Response {
    let mut response = rpc_error(status, code, message);
    response.headers_mut().insert(name, value);
    response
}

/// A JSON-RPC error response with no id, and `status`.
fn rpc_error(status: StatusCode, code: i32, message: &str) -> Response {
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body.to_string()),
    )
        .into_response()
}
