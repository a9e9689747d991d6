//! MCP over Streamable HTTP: the endpoint `/mcp` (rmcp's
//! `StreamableHttpService`, both protocol revisions), behind a bearer token
//! (a static one, or an OAuth access token: `oauth/`), `Host` and `Origin`
//! checks, a request-size bound and a concurrency bound, with `/healthz`,
//! `/readyz`, `/metrics` (Prometheus, `metrics.rs`) and, with OAuth, the
//! protected resource metadata beside it.
//!
//! A stateless server (`HttpOptions::stateless`) answers the plain
//! stateless `tools/call` itself, in front of rmcp (`stateless_call.rs`):
//! a POST without `Mcp-Session-Id` or `Origin`, whose headers pass rmcp's
//! checks, of a revision with `initialize` (2025-11-25 and older), whose
//! body is one `tools/call` request without a progress token or a
//! per-request protocol version in its `_meta`. The call goes through
//! rmcp's dispatch to the same handler, with the same context, and its
//! answer is rmcp's; rmcp serves every other request (and every request of
//! a server with sessions).
//!
//! ```no_run
//! # async fn run(server: toolhost_mcp::McpServer) -> Result<(), toolhost_mcp::McpServeError> {
//! use toolhost_mcp::HttpOptions;
//!
//! let bound = toolhost_mcp::HttpServer::bind(server, HttpOptions::local(8080)).await?;
//! eprintln!("MCP on http://{}/mcp", bound.local_addr());
//! bound.run(async { let _ = tokio::signal::ctrl_c().await; }).await
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use http::{HeaderValue, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::identity::{ClientAsks, ClientIdentity, ClientProfile};
use super::oauth::{self, Checked, OAuthOptions, ResourceServer};
use super::stateless_call::{self, Endpoint, StatelessCalls};
use super::{Asks, McpServer};
use crate::McpServeError;

/// Largest request body accepted by default (4 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// Most requests served at once by default; more get HTTP 503.
pub const DEFAULT_MAX_CONCURRENT_REQUESTS: usize = 256;

/// How the HTTP endpoint listens and whom it lets in.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The bearer tokens a request to `/mcp` may carry (`Authorization:
    /// Bearer …`), each with the policy profile its client's calls run
    /// under (`None`: the server's). Empty (and no `oauth`): no token
    /// needed, which only a loopback address allows.
    pub tokens: Vec<ClientToken>,
    /// OAuth access tokens from the organization's authorization server,
    /// taken beside `tokens` ([`OAuthOptions`]): a request whose bearer
    /// token is none of `tokens` is checked as an access token, and its
    /// caller's claims choose its profile.
    pub oauth: Option<OAuthOptions>,
    /// `Host` header values accepted besides loopback names (the names
    /// clients reach this server by, when it is not on loopback).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted (`https://app.example.com:443`); a request
    /// with any other `Origin` header is refused (DNS-rebinding defence).
    /// Requests without `Origin` (not from a browser) are not affected.
    pub allowed_origins: Vec<String>,
    /// Largest request body (HTTP 413 beyond).
    pub max_request_bytes: usize,
    /// Most requests served at once (HTTP 503 beyond).
    pub max_concurrent_requests: usize,
    /// Serve every request statelessly (no `Mcp-Session-Id`, even for
    /// clients of 2025-11-25 and older), so any replica can answer any
    /// request. 2026-07-28 requests are always stateless.
    pub stateless: bool,
    /// Serve `/metrics` without a bearer token even when tokens are set
    /// (for a scraper on a private network). Off by default: the figures
    /// tell who calls which tool how often.
    pub metrics_public: bool,
    /// Serve the operator's console at `/console` (`toolhost-console`, the
    /// default `console` feature). Only an operator signs in to it: with
    /// an operator's token from `tokens`, or, when no token is set, with a
    /// one-time token the console makes at start
    /// ([`HttpServer::console_token`]).
    pub console: bool,
}

impl HttpOptions {
    /// Listening on `127.0.0.1:port` with the defaults and no token.
    pub fn local(port: u16) -> HttpOptions {
        HttpOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], port)),
            tokens: Vec::new(),
            oauth: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_concurrent_requests: DEFAULT_MAX_CONCURRENT_REQUESTS,
            stateless: false,
            metrics_public: false,
            console: false,
        }
    }
}

/// An HTTP endpoint bound to its address, ready to [`run`](Self::run).
pub struct HttpServer {
    listener: tokio::net::TcpListener,
    app: axum::Router,
    addr: SocketAddr,
    stop: CancellationToken,
    ready: Arc<AtomicBool>,
    console_token: Option<String>,
    oauth: Option<(String, String)>,
    /// The stateless calls' fast path, when on (the tests count its calls).
    #[cfg(test)]
    pub(super) calls: Option<Arc<StatelessCalls>>,
}

/// A bearer token: whose it is, and what its holder may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientToken {
    /// The secret.
    pub token: String,
    /// The agent profile its calls run under (`None`: the server's).
    pub agent: Option<String>,
    /// A caller's (calls `/mcp`) or the operator's (signs in to the
    /// console, and nothing else).
    pub role: TokenRole,
    /// Who answers its calls' `ask`s (`None`: the server's `--asks`).
    pub asks: Option<Asks>,
}

/// What a token's holder may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenRole {
    /// Calls tools over `/mcp`; never opens the console.
    #[default]
    Caller,
    /// Signs in to the console (`/console`); never calls `/mcp`.
    Operator,
}

/// A line of a token file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token file line {line}: {problem}")]
pub struct TokenFileError {
    /// Its number (from 1).
    pub line: usize,
    /// What is wrong (the secret is never quoted).
    pub problem: String,
}

impl ClientToken {
    /// A caller's token, under `agent`'s profile.
    pub fn caller(token: impl Into<String>, agent: Option<String>) -> ClientToken {
        ClientToken {
            token: token.into(),
            agent,
            role: TokenRole::Caller,
            asks: None,
        }
    }

    /// Reads a token file: one token per line, optionally followed by the
    /// profile its client's calls run under (`s3cret reviewer`), then
    /// settings: `role=operator` (an operator's token, for the console) and
    /// `ask=client|operator|deny` (who answers its calls' asks). Blank
    /// lines and lines starting with `#` are skipped, and a `#` after the
    /// token starts a comment to the end of the line.
    ///
    /// ```
    /// use toolhost_mcp::{Asks, ClientToken, TokenRole};
    /// let tokens = ClientToken::parse(
    ///     "# team\nabc reviewer ask=operator  # Ada's laptop\nxyz\nop1 role=operator #ops\n",
    /// )
    /// .unwrap();
    /// assert_eq!(tokens[0].agent.as_deref(), Some("reviewer"));
    /// assert_eq!(tokens[0].asks, Some(Asks::Operator));
    /// assert_eq!(tokens[1].agent, None);
    /// assert_eq!(tokens[2].role, TokenRole::Operator);
    /// assert!(ClientToken::parse("abc colour=blue").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Vec<ClientToken>, TokenFileError> {
        let mut tokens = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let problem = |problem: String| TokenFileError {
                line: i + 1,
                problem,
            };
            // A word that starts with `#` starts a comment (the token is
            // the first word: a line that starts with `#` is one already).
            let mut words = l.split_whitespace().take_while(|w| !w.starts_with('#'));
            let mut token = ClientToken::caller(words.next().unwrap_or_default(), None);
            for word in words {
                match word.split_once('=') {
                    None if token.agent.is_none() => token.agent = Some(word.to_owned()),
                    None => return Err(problem("more than one profile named".to_owned())),
                    Some(("role", "operator")) => token.role = TokenRole::Operator,
                    Some(("role", "caller")) => token.role = TokenRole::Caller,
                    Some(("ask", value)) => {
                        token.asks = Some(match value {
                            "client" => Asks::Client,
                            "operator" => Asks::Operator,
                            "deny" => Asks::Deny,
                            _ => {
                                return Err(problem("ask must be client, operator or deny".into()));
                            }
                        });
                    }
                    Some((key, _)) => {
                        return Err(problem(format!(
                            "unknown setting `{}` (role=operator, ask=client|operator|deny)",
                            toolhost_text::line(key, 40)
                        )));
                    }
                }
            }
            if token.role == TokenRole::Operator && (token.agent.is_some() || token.asks.is_some())
            {
                return Err(problem(
                    "an operator's token makes no calls: it takes no profile or ask".to_owned(),
                ));
            }
            tokens.push(token);
        }
        Ok(tokens)
    }
}

/// Who may call: the static tokens and the OAuth resource server.
#[derive(Clone)]
struct Auth {
    tokens: Arc<[ClientToken]>,
    oauth: Option<Arc<ResourceServer>>,
}

#[derive(Clone)]
struct Gate {
    auth: Auth,
    slots: Arc<tokio::sync::Semaphore>,
}

impl HttpServer {
    /// Binds `options.listen` (port 0: any free port). Refuses a
    /// non-loopback address without a token.
    pub async fn bind(
        server: McpServer,
        options: HttpOptions,
    ) -> Result<HttpServer, McpServeError> {
        HttpServer::bind_with(server, options, true).await
    }

    /// [`bind`](Self::bind), with stateless calls taken in front of rmcp
    /// (`stateless_call.rs`) when `fast_calls` and the server is stateless;
    /// the tests compare both paths' answers.
    pub(crate) async fn bind_with(
        server: McpServer,
        options: HttpOptions,
        fast_calls: bool,
    ) -> Result<HttpServer, McpServeError> {
        if !options.listen.ip().is_loopback()
            && options.tokens.is_empty()
            && options.oauth.is_none()
        {
            return Err(McpServeError::TokenRequired(options.listen));
        }
        if options.tokens.iter().any(|t| t.token.is_empty()) {
            return Err(McpServeError::EmptyToken);
        }
        if options.console && cfg!(not(feature = "console")) {
            return Err(McpServeError::NoConsole);
        }
        let operators: Vec<String> = options
            .tokens
            .iter()
            .filter(|t| t.role == TokenRole::Operator)
            .map(|t| t.token.clone())
            .collect();
        if options.console && !options.tokens.is_empty() && operators.is_empty() {
            return Err(McpServeError::NoOperatorToken);
        }
        let to_operator = server.options.asks == Asks::Operator
            || options
                .tokens
                .iter()
                .any(|t| t.asks == Some(Asks::Operator))
            || options
                .oauth
                .as_ref()
                .is_some_and(|o| o.callers.iter().any(|c| c.ask == Some(Asks::Operator)));
        if to_operator && (!options.console || server.options.operator_queue.is_none()) {
            return Err(McpServeError::NoConsole);
        }
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|e| McpServeError::Bind(options.listen, e.to_string()))?;
        let addr = listener
            .local_addr()
            .map_err(|e| McpServeError::Bind(options.listen, e.to_string()))?;
        // The resource URL tokens must name: the configured one, else (on
        // loopback) the address bound.
        let oauth = match &options.oauth {
            Some(o) => {
                let local = addr
                    .ip()
                    .is_loopback()
                    .then(|| format!("http://{addr}/mcp"));
                Some(Arc::new(ResourceServer::new(o, local)?))
            }
            None => None,
        };
        let stop = CancellationToken::new();
        let mut hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        hosts.extend(options.allowed_hosts.iter().cloned());
        let mut origins = own_origins(addr.port(), &options.allowed_hosts);
        origins.extend(options.allowed_origins.iter().cloned());
        let config = StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts.clone())
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(options.max_request_bytes)
            .with_legacy_session_mode(!options.stateless)
            .with_json_response(true)
            .with_cancellation_token(stop.child_token());
        let factory = server.clone();
        let mcp: StreamableHttpService<McpServer, LocalSessionManager> =
            StreamableHttpService::new(move || Ok(factory.clone()), Default::default(), config);
        let calls = if options.stateless && fast_calls {
            Some(Arc::new(
                StatelessCalls::new(
                    server.clone(),
                    &hosts,
                    options.max_request_bytes,
                    stop.child_token(),
                )
                .await,
            ))
        } else {
            None
        };
        let auth = Auth {
            tokens: options.tokens.clone().into(),
            oauth: oauth.clone(),
        };
        let gate = Gate {
            auth: auth.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(
                options.max_concurrent_requests.max(1),
            )),
        };
        let extras_gate = ExtrasGate {
            hosts: hosts.clone().into(),
            auth,
            metrics_public: options.metrics_public,
        };
        let metrics = server.metrics().clone();
        let mut events = server.runtime().subscribe();
        let counted = metrics.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => counted.plugin_event(&event),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
        });
        let ready = Arc::new(AtomicBool::new(true));
        let ready_flag = ready.clone();
        let max_body = options.max_request_bytes;
        let endpoint = Endpoint::new(mcp, calls.clone());
        let mcp_routes = axum::Router::new()
            .nest_service(
                "/mcp",
                axum::handler::Handler::with_state(stateless_call::serve, endpoint),
            )
            // Inside `admit`: only an admitted request's body is read.
            .layer(axum::middleware::from_fn(move |request, next| {
                super::priming::by_revision(max_body, request, next)
            }))
            .layer(axum::middleware::from_fn_with_state(gate, admit));
        let mut extras = axum::Router::new();
        if let Some(oauth) = &oauth {
            // Public, and for browser clients too (RFC 9728 metadata
            // says nothing secret).
            let document = oauth.metadata().document().to_owned();
            for path in oauth.metadata().paths() {
                let document = document.clone();
                extras = extras.route(
                    path,
                    axum::routing::get(move || async move {
                        (
                            [
                                (header::CONTENT_TYPE, "application/json"),
                                (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
                            ],
                            document,
                        )
                    }),
                );
            }
        }
        let extras = extras
            .route("/healthz", axum::routing::get(|| async { "ok\n" }))
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let text = metrics.encode();
                    async move {
                        (
                            [(
                                header::CONTENT_TYPE,
                                "text/plain; version=0.0.4; charset=utf-8",
                            )],
                            text,
                        )
                    }
                }),
            )
            .route(
                "/readyz",
                axum::routing::get(move || {
                    let ready = ready_flag.load(Ordering::Relaxed);
                    async move {
                        if ready {
                            (StatusCode::OK, "ready\n")
                        } else {
                            (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
                        }
                    }
                }),
            )
            .layer(axum::middleware::from_fn_with_state(
                extras_gate.clone(),
                admit_extras,
            ));
        let app = mcp_routes.merge(extras);
        #[cfg(feature = "console")]
        let (app, console_token) = if options.console {
            let console = toolhost_console::Console::new(
                server.runtime().clone(),
                toolhost_console::ConsoleOptions {
                    operator_tokens: operators,
                    allowed_origins: options.allowed_origins.clone(),
                    queue: server.options.operator_queue.clone(),
                    failures: server.options.failures.clone(),
                },
            );
            let token = console.sign_in_token().map(str::to_owned);
            let pages = console.router().layer(axum::middleware::from_fn_with_state(
                extras_gate.clone(),
                admit_extras,
            ));
            (app.merge(pages), token)
        } else {
            (app, None)
        };
        #[cfg(not(feature = "console"))]
        let console_token = None;
        Ok(HttpServer {
            listener,
            app,
            addr,
            stop,
            ready,
            console_token,
            oauth: oauth.map(|o| (o.resource().to_owned(), o.issuer().to_owned())),
            #[cfg(test)]
            calls,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The one-time operator token the console made because no token was
    /// set (`None` without the console, or when tokens are set): show it
    /// only where whoever started the server reads it (its terminal), as
    /// the sign-in link `http://ADDRESS/console?token=…`. It lasts until
    /// the server stops.
    pub fn console_token(&self) -> Option<&str> {
        self.console_token.as_deref()
    }

    /// With OAuth on: the resource URL tokens must name, and the issuer
    /// whose tokens are taken.
    pub fn oauth_resource(&self) -> Option<(&str, &str)> {
        self.oauth.as_ref().map(|(r, i)| (r.as_str(), i.as_str()))
    }

    /// Serves until `shutdown` completes, then stops taking requests,
    /// reports not-ready, and lets the requests in flight finish.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), McpServeError> {
        let (stop, ready) = (self.stop.clone(), self.ready.clone());
        // Answers go out at once (no Nagle delay between headers and body).
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        axum::serve(listener, self.app)
            .with_graceful_shutdown(async move {
                shutdown.await;
                ready.store(false, Ordering::Relaxed);
                tracing::info!("MCP server shutting down: finishing the requests in flight");
                stop.cancel();
            })
            .await
            .map_err(|e| McpServeError::Stopped(e.to_string()))
    }
}

/// The browser origins that are this server's own: its loopback names on
/// the port it listens on, and every `--accept-host` name (with the port it
/// names, or else this port, and the default ports behind a proxy). A page
/// served from one of them may call `/mcp`; any other origin is refused
/// (DNS rebinding), as is another port on loopback (another local app).
fn own_origins(port: u16, accepted_hosts: &[String]) -> Vec<String> {
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect();
    for host in accepted_hosts {
        let Ok(authority) = host.trim().parse::<axum::http::uri::Authority>() else {
            tracing::warn!("--accept-host {host:?} is not a host name: no origin of it accepted");
            continue;
        };
        match authority.port_u16() {
            Some(_) => {
                origins.push(format!("http://{authority}"));
                origins.push(format!("https://{authority}"));
            }
            // Ports always written: an origin rmcp is given without one
            // matches every port.
            None => {
                origins.push(format!("http://{authority}:{port}"));
                origins.push(format!("http://{authority}:80"));
                origins.push(format!("https://{authority}:443"));
            }
        }
    }
    origins
}

/// Who may reach `/healthz`, `/readyz`, `/metrics` and the protected
/// resource metadata.
#[derive(Clone)]
struct ExtrasGate {
    /// `Host` values accepted, as for `/mcp`.
    hosts: Arc<[String]>,
    auth: Auth,
    metrics_public: bool,
}

/// Lets a request to `/healthz`, `/readyz`, `/metrics` or the metadata in
/// when its `Host` is one the server answers to (as for `/mcp`: DNS
/// rebinding), and one to `/metrics` only with a caller's token (static,
/// or an OAuth caller let in) when tokens are set, unless the metrics are
/// public.
async fn admit_extras(State(gate): State<ExtrasGate>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<http::uri::Authority>().ok());
    // An accepted name matches with or without the port (`toolhost`,
    // `toolhost:8080`).
    let allowed = host.is_some_and(|a| {
        let name = a.host().trim_start_matches('[').trim_end_matches(']');
        gate.hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name) || h.eq_ignore_ascii_case(a.as_str()))
    });
    if !allowed {
        tracing::info!(target: "toolhost::mcp::access", path = request.uri().path(), status = 403, "refused: Host not accepted");
        return (StatusCode::FORBIDDEN, "Host not accepted\n").into_response();
    }
    if request.uri().path() == "/metrics" && !gate.metrics_public && gate.auth.required() {
        let given = bearer(&request).map(str::to_owned);
        match gate.auth.identify(given.as_deref(), "/metrics").await {
            Identified::Token(_) | Identified::OAuth(_) => {}
            Identified::Refused(refusal) => {
                tracing::info!(target: "toolhost::mcp::access", path = "/metrics", status = refusal.status().as_u16(), "refused: no valid bearer token");
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

/// The static token `given` is, if any.
fn client_of<'a>(tokens: &'a [ClientToken], given: &str) -> Option<&'a ClientToken> {
    // Every token is compared, so the time taken does not tell which matched.
    tokens.iter().fold(None, |found, t| {
        if same(given.as_bytes(), t.token.as_bytes()) {
            Some(t)
        } else {
            found
        }
    })
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
            return Identified::Refused(refusal(
                StatusCode::UNAUTHORIZED,
                -32001,
                "a valid bearer token is required (Authorization: Bearer …)",
                (header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")),
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
async fn admit(State(gate): State<Gate>, mut request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    if gate.auth.required() {
        let given = bearer(&request).map(str::to_owned);
        let path = request.uri().path().to_owned();
        let (identity, agent, asks) = match gate.auth.identify(given.as_deref(), &path).await {
            Identified::Refused(refused) => {
                if refused.status() == StatusCode::UNAUTHORIZED {
                    tracing::info!(target: "toolhost::mcp::access", %method, status = 401, "refused: no valid bearer token");
                }
                return refused;
            }
            Identified::Token(client) if client.role == TokenRole::Operator => {
                tracing::info!(target: "toolhost::mcp::access", %method, status = 403, "refused: an operator's token calls no tool");
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
        tracing::warn!(target: "toolhost::mcp::access", %method, status = 503, "refused: too many requests in flight");
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

/// Compares two secrets in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn the_own_origins_are_loopback_on_this_port_and_each_accepted_host() {
        let origins = own_origins(
            8931,
            &[
                "mcp.example.com".to_owned(),
                "gw.example.com:8443".to_owned(),
                "not a host".to_owned(),
            ],
        );
        for own in [
            "http://localhost:8931",
            "http://127.0.0.1:8931",
            "http://[::1]:8931",
            "https://mcp.example.com:443",
            "http://mcp.example.com:80",
            "http://mcp.example.com:8931",
            "https://gw.example.com:8443",
        ] {
            assert!(origins.iter().any(|o| o == own), "{own} in {origins:?}");
        }
        assert!(!origins.iter().any(|o| o.contains("not a host")));
        assert!(
            origins.iter().all(|o| o
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())),
            "every origin names its port: {origins:?}"
        );
        assert!(
            !origins
                .iter()
                .any(|o| o.starts_with("http://localhost:") && !o.ends_with(":8931"))
        );
    }
}
