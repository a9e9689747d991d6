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

use axum::serve::ListenerExt;
use tokio_util::sync::CancellationToken;

mod gate;
mod options;
mod origins;
mod routes;
mod stateless_call;
mod tokens;

pub use options::{DEFAULT_MAX_CONCURRENT_REQUESTS, DEFAULT_MAX_REQUEST_BYTES, HttpOptions};
pub use tokens::{ClientToken, TokenFileError, TokenRole};

use super::error::McpServeError;
use super::oauth::ResourceServer;
use super::{Asks, McpServer};
use gate::{Auth, ExtrasGate};
use options::operator_tokens;
#[cfg(test)]
use stateless_call::StatelessCalls;

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
    /// the tests compare both paths' answers. The app is one router per
    /// concern (`routes.rs`), merged.
    pub(crate) async fn bind_with(
        server: McpServer,
        options: HttpOptions,
        fast_calls: bool,
    ) -> Result<HttpServer, McpServeError> {
        check(&server, &options)?;
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
        let hosts = origins::own_hosts(&options.allowed_hosts);
        let auth = Auth {
            tokens: options.tokens.clone().into(),
            oauth: oauth.clone(),
        };
        let extras = ExtrasGate {
            hosts: Arc::new(origins::AllowedHosts::new(&hosts)),
            auth: auth.clone(),
            metrics_public: options.metrics_public,
        };
        let ready = Arc::new(AtomicBool::new(true));
        let (mcp, calls) =
            routes::mcp(&server, &options, addr, &hosts, auth, &stop, fast_calls).await;
        let app = mcp
            .merge(routes::oauth_metadata(oauth.as_deref(), &extras))
            .merge(routes::health(&server, ready.clone(), &extras))
            .merge(routes::not_found(oauth.is_some(), &extras));
        #[cfg(feature = "console")]
        let (app, console_token) = match routes::console(&server, &options, &extras) {
            Some((pages, token)) => (app.merge(pages), token),
            None => (app, None),
        };
        #[cfg(not(feature = "console"))]
        let console_token = None;
        #[cfg(not(test))]
        let _ = calls;
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

/// Refuses what `options` cannot serve safely or at all: a non-loopback
/// address without a token, an empty token, a console without an
/// operator's token where tokens are set, or asks that go to an operator
/// who has no console.
fn check(server: &McpServer, options: &HttpOptions) -> Result<(), McpServeError> {
    if !options.listen.ip().is_loopback() && options.tokens.is_empty() && options.oauth.is_none() {
        return Err(McpServeError::TokenRequired(options.listen));
    }
    if options.tokens.iter().any(|t| t.token.is_empty()) {
        return Err(McpServeError::EmptyToken);
    }
    if options.console && cfg!(not(feature = "console")) {
        return Err(McpServeError::NoConsole);
    }
    if options.console && !options.tokens.is_empty() && operator_tokens(options).is_empty() {
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
    Ok(())
}
