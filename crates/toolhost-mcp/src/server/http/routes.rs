//! The endpoint's routers, one per concern, merged by
//! [`HttpServer::bind`](super::HttpServer::bind):
//!
//! - [`mcp`]: `/mcp` (rmcp's `StreamableHttpService`, with the stateless
//!   calls' fast path in front), behind [`admit`] and the priming by
//!   revision;
//! - [`oauth_metadata`]: with OAuth, the protected resource metadata
//!   (RFC 9728) at its well-known paths;
//! - [`health`]: `/healthz`, `/readyz` and `/metrics`;
//! - [`console`]: the operator's console (`/console`), when asked for;
//! - [`not_found`]: every other path, a JSON 404 a client can read.
//!
//! All but `/mcp` are behind [`admit_extras`], which logs each request
//! (`/mcp`'s line is [`admit`]'s).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use http::{StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::super::McpServer;
use super::super::oauth::ResourceServer;
use super::gate::{Auth, ExtrasGate, Gate, admit, admit_extras};
use super::options::{HttpOptions, operator_tokens};
use super::origins;
use super::stateless_call::{self, Endpoint, StatelessCalls};

/// `/mcp`: rmcp's service under the `Host`, `Origin` and size checks of
/// `options`, the stateless calls' fast path in front of it when
/// `fast_calls` and the server is stateless (returned too: the tests
/// count its calls), behind [`admit`].
pub(super) async fn mcp(
    server: &McpServer,
    options: &HttpOptions,
    addr: SocketAddr,
    hosts: &[String],
    auth: Auth,
    stop: &CancellationToken,
    fast_calls: bool,
) -> (Router, Option<Arc<StatelessCalls>>) {
    let mut origins = origins::own_origins(addr.port(), &options.allowed_hosts);
    origins.extend(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.to_vec())
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_request_bytes)
        .with_legacy_session_mode(!options.stateless)
        .with_json_response(true)
        .with_cancellation_token(stop.child_token());
    let factory = server.clone();
    let service: StreamableHttpService<McpServer, LocalSessionManager> =
        StreamableHttpService::new(move || Ok(factory.clone()), Default::default(), config);
    let calls = if options.stateless && fast_calls {
        Some(Arc::new(
            StatelessCalls::new(
                server.clone(),
                hosts,
                options.max_request_bytes,
                stop.child_token(),
            )
            .await,
        ))
    } else {
        None
    };
    let gate = Gate {
        auth,
        slots: Arc::new(tokio::sync::Semaphore::new(
            options.max_concurrent_requests.max(1),
        )),
    };
    let max_body = options.max_request_bytes;
    let endpoint = Endpoint::new(service, calls.clone());
    let router = Router::new()
        .nest_service(
            "/mcp",
            axum::handler::Handler::with_state(stateless_call::serve, endpoint),
        )
        // Inside `admit`: only an admitted request's body is read.
        .layer(axum::middleware::from_fn(move |request, next| {
            super::super::priming::by_revision(max_body, request, next)
        }))
        .layer(axum::middleware::from_fn_with_state(gate, admit));
    (router, calls)
}

/// With OAuth on, the protected resource metadata at each of its paths:
/// public, and for browser clients too (RFC 9728 metadata says nothing
/// secret).
pub(super) fn oauth_metadata(oauth: Option<&ResourceServer>, extras: &ExtrasGate) -> Router {
    let mut router = Router::new();
    if let Some(oauth) = oauth {
        let document = oauth.metadata().document().to_owned();
        for path in oauth.metadata().paths() {
            let document = document.clone();
            router = router.route(
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
    router.layer(axum::middleware::from_fn_with_state(
        extras.clone(),
        admit_extras,
    ))
}

/// What a static-token server answers an OAuth probe. Clients show it as
/// the reason they could not connect (opencode shows the last answer of
/// its sign-in attempt after a 401, not the 401): it says what to check.
const STATIC_TOKENS_ONLY: &str = "this server takes static bearer tokens (Authorization: Bearer TOKEN), not OAuth: it has no OAuth metadata and registers no clients; a 401 from /mcp means the token sent is missing or not one it accepts";

/// Whether `path` is where a client looks for OAuth after a 401: the
/// metadata (RFC 9728, RFC 8414, OpenID Connect discovery) and the
/// endpoints clients guess when there is none (dynamic registration,
/// RFC 7591; `/authorize`, `/token`).
fn oauth_probe(path: &str) -> bool {
    path.starts_with("/.well-known/oauth-")
        || path.starts_with("/.well-known/openid-configuration")
        || matches!(path, "/register" | "/authorize" | "/token")
}

/// Every path no other router answers: 404 with an OAuth-style JSON error
/// (`error`, `error_description`). A client that probes for OAuth
/// metadata after a 401 (RFC 9728's well-known paths, RFC 8414's) reads
/// that this server has none, instead of failing on an empty body.
pub(super) fn not_found(oauth: bool, extras: &ExtrasGate) -> Router {
    Router::new()
        .fallback(move |uri: http::Uri| async move {
            let description = if oauth_probe(uri.path()) && !oauth {
                STATIC_TOKENS_ONLY
            } else {
                "no such endpoint here; MCP is served at /mcp"
            };
            (
                StatusCode::NOT_FOUND,
                [(header::CONTENT_TYPE, "application/json")],
                serde_json::json!({"error": "not_found", "error_description": description})
                    .to_string(),
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            extras.clone(),
            admit_extras,
        ))
}

/// `/healthz`, `/readyz` (not ready once `ready` is cleared, at shutdown)
/// and `/metrics` (Prometheus, counting the runtime's plugin events from
/// now on).
pub(super) fn health(server: &McpServer, ready: Arc<AtomicBool>, extras: &ExtrasGate) -> Router {
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
    Router::new()
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
                let ready = ready.load(Ordering::Relaxed);
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
            extras.clone(),
            admit_extras,
        ))
}

/// The operator's console (`/console`), when `options` ask for it, with
/// the one-time operator token it made when no token is set.
#[cfg(feature = "console")]
pub(super) fn console(
    server: &McpServer,
    options: &HttpOptions,
    extras: &ExtrasGate,
) -> Option<(Router, Option<String>)> {
    if !options.console {
        return None;
    }
    let console = toolhost_console::Console::new(
        server.runtime().clone(),
        toolhost_console::ConsoleOptions {
            operator_tokens: operator_tokens(options),
            allowed_origins: options.allowed_origins.clone(),
            queue: server.options.operator_queue.clone(),
            failures: server.options.failures.clone(),
            tasks: server.tasks.settings().enabled().then(|| {
                let board: std::sync::Arc<dyn toolhost_runtime::tasks::TaskBoard> =
                    server.tasks.clone();
                board
            }),
        },
    );
    let token = console.sign_in_token().map(str::to_owned);
    let pages = console.router().layer(axum::middleware::from_fn_with_state(
        extras.clone(),
        admit_extras,
    ));
    Some((pages, token))
}
