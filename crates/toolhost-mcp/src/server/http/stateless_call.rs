//! The stateless `tools/call`: a POST to `/mcp` that calls one tool and is
//! answered with one JSON response, served here instead of through rmcp's
//! `StreamableHttpService`, which builds a whole session for every
//! stateless request (a serve loop, its tasks and channels, the message
//! parsed and written again). The call itself is the same: it goes through
//! rmcp's own dispatch ([`rmcp::Service::handle_request`], with its checks
//! and its shaping of the result) to [`McpServer::call_tool`], and so
//! through the one pipeline (policy, hooks, approval, audit, traces).
//!
//! A request is taken only when every check rmcp makes on it passes and
//! rmcp would answer it in JSON with nothing sent before the answer:
//!
//! - the server is stateless (`--stateless`), the request a POST without
//!   `Mcp-Session-Id` and without `Origin` (a browser's requests go to
//!   rmcp), whose `Host` is one the server answers to;
//! - `Accept` takes `application/json` and `text/event-stream`,
//!   `Content-Type` is `application/json`, `Content-Length` within the
//!   request bound;
//! - `MCP-Protocol-Version` is absent (2025-03-26) or names a known
//!   revision with `initialize` (up to 2025-11-25);
//! - the body is one JSON-RPC request, `tools/call`, whose `_meta` names
//!   no protocol version (the 2026-07-28 per-request lifecycle) and no
//!   progress token (its progress would turn the answer into an SSE
//!   stream).
//!
//! Anything else goes to rmcp unchanged (with the body read, when it was),
//! and so gets rmcp's answer: its refusals are not written twice. Only a
//! body that is read here and turns out too large (chunked, past the
//! bound: 413) or cannot be read (500) is answered here, with rmcp's words.
//!
//! The call's [`RequestContext`] is the one rmcp would build: the request's
//! `http::request::Parts` (with the caller's identity, profile and asks
//! that `admit` put there) in its extensions, the request's `_meta`, and a
//! peer whose `peer_info` is the one rmcp makes for a stateless request of
//! that revision (its version, no capabilities), so no elicitation or
//! sampling is ever attempted. The peers are made once, when the server
//! binds, and closed at once: anything a call would still send to its
//! client fails at once (`TransportClosed`), never waits. The call is
//! cancelled when its client goes away (this future dropped) and, as rmcp
//! does, when the server stops (answered with rmcp's 500).
//!
//! This file exists because rmcp builds a whole session per stateless
//! request; what it costs there, and the rmcp API that would let us delete
//! this file, are in the upstream issue text,
//! `docs/upstream/rmcp-stateless-per-request-cost.md` (to file with rmcp,
//! then link here).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::Response;
use futures::StreamExt;
use http::{HeaderMap, StatusCode, header};
use rmcp::model::{
    ClientCapabilities, ClientJsonRpcMessage, ClientRequest, GetExtensions, GetMeta,
    Implementation, InitializeRequestParams, JsonRpcRequest, ProtocolVersion, ServerJsonRpcMessage,
};
use rmcp::service::{Peer, RequestContext, RoleServer};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use super::super::McpServer;
use super::origins::AllowedHosts;

/// rmcp's endpoint, with the stateless calls taken in front of it when the
/// server is stateless. Shared by every request (behind an `Arc`: rmcp's
/// service is costly to clone, its configuration's lists with it).
pub(super) struct Endpoint {
    rmcp: StreamableHttpService<McpServer, LocalSessionManager>,
    calls: Option<Arc<StatelessCalls>>,
}

impl Endpoint {
    /// `rmcp`, and in front of it `calls` (`None`: rmcp answers all).
    pub(super) fn new(
        rmcp: StreamableHttpService<McpServer, LocalSessionManager>,
        calls: Option<Arc<StatelessCalls>>,
    ) -> Arc<Endpoint> {
        Arc::new(Endpoint { rmcp, calls })
    }
}

/// The handler of `/mcp`: a stateless call, else rmcp.
pub(super) async fn serve(State(endpoint): State<Arc<Endpoint>>, request: Request) -> Response {
    let request = match &endpoint.calls {
        Some(calls) => match calls.take(request).await {
            Taken::Answered(response) => return response,
            Taken::Declined(request) => request,
        },
        None => request,
    };
    endpoint.rmcp.handle(request).await.map(Body::new)
}

/// What the fast path does with a request.
enum Taken {
    /// It answered it.
    Answered(Response),
    /// Not one it takes: for rmcp, as it came (its body, when read, put
    /// back).
    Declined(Request),
}

/// Serves the stateless calls (see the module docs).
pub(crate) struct StatelessCalls {
    server: McpServer,
    /// One closed peer per revision with `initialize`, with the
    /// `peer_info` rmcp gives a stateless request of that revision.
    peers: Vec<(ProtocolVersion, Peer<RoleServer>)>,
    /// The `Host` values accepted (as rmcp is configured).
    hosts: AllowedHosts,
    /// The request bound (as rmcp is configured).
    max_body: usize,
    /// The server's stop: calls in flight are cancelled, as rmcp does.
    stop: CancellationToken,
    /// Calls answered here (the tests see which path answered).
    #[cfg(test)]
    pub(crate) answered: std::sync::atomic::AtomicU64,
}

impl StatelessCalls {
    /// The fast path for `server`, with rmcp's `Host` list (`hosts`), request bound
    /// and stop token.
    pub(crate) async fn new(
        server: McpServer,
        hosts: &[String],
        max_body: usize,
        stop: CancellationToken,
    ) -> StatelessCalls {
        let mut peers = Vec::new();
        for version in ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .filter(|v| v.has_initialize())
        {
            peers.push((version.clone(), closed_peer(&server, version).await));
        }
        StatelessCalls {
            server,
            peers,
            hosts: AllowedHosts::new(hosts),
            max_body,
            stop,
            #[cfg(test)]
            answered: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Answers `request` when it is a stateless call (module docs).
    async fn take(&self, request: Request) -> Taken {
        let Some(peer) = self.peer_for(&request) else {
            return Taken::Declined(request);
        };
        let (parts, body) = request.into_parts();
        let bytes = match read_body(body, self.max_body).await {
            Ok(bytes) => bytes,
            Err(refused) => return Taken::Answered(refused),
        };
        let call = match serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
            Ok(ClientJsonRpcMessage::Request(call)) if is_plain_call(&call) => call,
            _ => return Taken::Declined(Request::from_parts(parts, Body::from(bytes))),
        };
        #[cfg(test)]
        self.answered
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Taken::Answered(self.call(call, parts, peer.clone()).await)
    }

    /// The peer for `request`'s revision, when its method and headers are
    /// those of a stateless call rmcp takes.
    fn peer_for(&self, request: &Request) -> Option<&Peer<RoleServer>> {
        let headers = request.headers();
        if request.method() != http::Method::POST
            || headers.contains_key("mcp-session-id")
            || headers.contains_key(header::ORIGIN)
            || !self.hosts.allow(request.uri(), headers)
            || !accepts_json_and_sse(headers)
            || !is_json(headers)
        {
            return None;
        }
        let length = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if length.is_some_and(|l| l > self.max_body) {
            return None;
        }
        // rmcp: an absent header is 2025-03-26.
        let version = match headers.get("mcp-protocol-version") {
            None => ProtocolVersion::V_2025_03_26.as_str(),
            Some(v) => v.to_str().ok()?,
        };
        self.peers
            .iter()
            .find(|(v, _)| v.as_str() == version)
            .map(|(_, peer)| peer)
    }

    /// Runs `call` as rmcp's serve loop would, and answers as rmcp's
    /// stateless JSON response does.
    async fn call(
        &self,
        call: JsonRpcRequest<ClientRequest>,
        parts: http::request::Parts,
        peer: Peer<RoleServer>,
    ) -> Response {
        let JsonRpcRequest {
            id, mut request, ..
        } = call;
        // As rmcp: the HTTP request's parts in the request's extensions,
        // which (with its `_meta`) move into the context.
        request.extensions_mut().insert(parts);
        let mut context = RequestContext::new(id.clone(), peer);
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let cancelled = CancellationToken::new();
        context.ct = cancelled.child_token();
        // Cancels the call when its client goes away (this future dropped)
        // or the server stops; a no-op once it has ended.
        let _cancel_when_dropped = cancelled.drop_guard();
        let handled =
            rmcp::service::Service::<RoleServer>::handle_request(&self.server, request, context);
        let message = tokio::select! {
            result = handled => match result {
                Ok(result) => ServerJsonRpcMessage::response(result, id),
                Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
            },
            () = self.stop.cancelled() => return stopped(),
        };
        match serde_json::to_vec(&message) {
            Ok(body) => Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body))
                .unwrap_or_default(),
            Err(e) => internal_error("serialize json response", &e),
        }
    }
}

/// Whether `call` is a `tools/call` rmcp serves statelessly without a
/// per-request lifecycle and answers in JSON: no protocol version and no
/// progress token in its `_meta`.
fn is_plain_call(call: &JsonRpcRequest<ClientRequest>) -> bool {
    let meta = call.request.get_meta();
    matches!(call.request, ClientRequest::CallToolRequest(_))
        && meta.protocol_version().is_none()
        && meta.get_progress_token().is_none()
}

/// A peer with the `peer_info` rmcp gives a stateless request of `version`,
/// whose service has stopped: whatever is sent to it fails at once.
async fn closed_peer(server: &McpServer, version: &ProtocolVersion) -> Peer<RoleServer> {
    let info =
        InitializeRequestParams::new(ClientCapabilities::default(), Implementation::default())
            .with_protocol_version(version.clone());
    let transport = (
        futures::sink::drain::<rmcp::service::TxJsonRpcMessage<RoleServer>>(),
        futures::stream::pending::<rmcp::service::RxJsonRpcMessage<RoleServer>>(),
    );
    let running = rmcp::service::serve_directly(server.clone(), transport, Some(info));
    let peer = running.peer().clone();
    if let Err(e) = running.cancel().await {
        tracing::debug!("the stateless calls' peer stopped with: {e}");
    }
    peer
}

/// The body, read as rmcp reads it: at most `max` bytes (413 beyond),
/// rmcp's answers when it is too large or cannot be read.
async fn read_body(body: Body, max: usize) -> Result<Bytes, Response> {
    let mut collected = Vec::new();
    let mut frames = body.into_data_stream();
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(data) if data.len() > max.saturating_sub(collected.len()) => {
                return Err(plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("Payload Too Large: request body exceeds {max} bytes"),
                ));
            }
            Ok(data) => collected.extend_from_slice(&data),
            Err(e) => {
                return Err(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("Failed to read request body: {e}"),
                ));
            }
        }
    }
    Ok(Bytes::from(collected))
}

/// rmcp's answer when the server stops before a stateless call has.
fn stopped() -> Response {
    internal_error(
        "empty response",
        &"no response message received from handler",
    )
}

/// rmcp's 500.
fn internal_error(context: &str, error: &dyn std::fmt::Display) -> Response {
    tracing::error!("Internal server error when {context}: {error}");
    plain(
        StatusCode::INTERNAL_SERVER_ERROR,
        format!("Encounter an error when {context}: {error}"),
    )
}

/// A response of `status` with a text body and no content type, as rmcp's.
fn plain(status: StatusCode, text: String) -> Response {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() = status;
    response
}

/// Whether `Content-Type` is `application/json` (parameters aside), as
/// rmcp checks it.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// Whether `Accept` takes both `application/json` and `text/event-stream`,
/// as rmcp reads it (a media range with `q=0` is refused; a malformed
/// weight is ignored).
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for essence in accepted_media_types(headers) {
        json |= essence.eq_ignore_ascii_case("application/json");
        sse |= essence.eq_ignore_ascii_case("text/event-stream");
    }
    json && sse
}

/// The media types `Accept` takes (rmcp's reading: lists and parameters
/// split outside quoted strings, ranges weighted zero left out).
fn accepted_media_types(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| split_unquoted(value, ','))
        .filter_map(|entry| {
            let mut parts = split_unquoted(entry, ';');
            let essence = parts.next()?.trim();
            parts
                .all(|parameter| match parameter.split_once('=') {
                    Some((name, value)) if name.trim().eq_ignore_ascii_case("q") => {
                        weight_is_acceptable(value.trim())
                    }
                    _ => true,
                })
                .then_some(essence)
        })
}

/// Splits `value` at `delimiter` outside quoted strings (a quoted pair
/// keeps an escaped quote from ending one).
fn split_unquoted(value: &str, delimiter: char) -> impl Iterator<Item = &str> {
    let (mut quoted, mut escaped) = (false, false);
    value.split(move |c| {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if !quoted && c == delimiter {
            return true;
        }
        false
    })
}

/// Whether a weight keeps its media range: only an explicit zero (RFC 9110
/// 12.4.2: up to three decimals) excludes it; a malformed one is ignored.
fn weight_is_acceptable(weight: &str) -> bool {
    let (whole, fraction) = weight.split_once('.').unwrap_or((weight, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|d| d.is_ascii_digit()) {
        return true;
    }
    whole != "0" || fraction.bytes().any(|d| d != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{ClientToken, HttpOptions, HttpServer, ServerOptions};
    use serde_json::{Value, json};
    use toolhost_runtime::Runtime;

    fn accept(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(header::ACCEPT, v.parse().unwrap());
        }
        headers
    }

    #[test]
    fn accept_needs_both_json_and_sse_and_a_zero_weight_refuses_one() {
        assert!(accepts_json_and_sse(&accept(&[
            "application/json, text/event-stream"
        ])));
        assert!(accepts_json_and_sse(&accept(&[
            "application/json",
            "Text/Event-Stream;q=0.5"
        ])));
        assert!(!accepts_json_and_sse(&accept(&["application/json"])));
        assert!(!accepts_json_and_sse(&accept(&["*/*"])));
        assert!(!accepts_json_and_sse(&accept(&[
            "application/json;q=0.000, text/event-stream"
        ])));
        // A malformed weight is ignored, a quoted `,` or `;q=0` is no split.
        assert!(accepts_json_and_sse(&accept(&[
            "application/json;q=abc, text/event-stream;q=1.5"
        ])));
        assert!(!accepts_json_and_sse(&accept(&[
            r#"application/json;p="a, text/event-stream""#
        ])));
        assert!(accepts_json_and_sse(&accept(&[
            r#"application/json;p="a;q=0", text/event-stream"#
        ])));
    }

    #[test]
    fn weights_as_rfc_9110_reads_them() {
        for zero in ["0", "0.", "0.0", "0.000"] {
            assert!(!weight_is_acceptable(zero), "{zero}");
        }
        for kept in ["0.001", "1", "1.000", ".5", "0.0001", "abc", "", "2"] {
            assert!(weight_is_acceptable(kept), "{kept}");
        }
    }

    #[test]
    fn content_type_is_json_with_or_without_parameters() {
        let ct = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, v.parse().unwrap());
            is_json(&h)
        };
        assert!(ct("application/json"));
        assert!(ct("Application/JSON ; charset=utf-8"));
        assert!(!ct("text/plain"));
        assert!(!ct("application/json-seq"));
        assert!(!is_json(&HeaderMap::new()));
    }

    #[test]
    fn hosts_compare_by_name_and_by_port_only_where_the_entry_has_one() {
        let allowed: Vec<String> = ["localhost", "::1", "gw.example.com:8443"]
            .map(str::to_owned)
            .into();
        let host = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, v.parse().unwrap());
            AllowedHosts::new(&allowed).allow(&"/mcp".parse().unwrap(), &h)
        };
        assert!(host("localhost:8080"));
        assert!(host("LOCALHOST"));
        assert!(host("[::1]:9"));
        assert!(host("gw.example.com:8443"));
        assert!(!host("gw.example.com:8444"));
        assert!(!host("gw.example.com"));
        assert!(!host("evil.example"));
        assert!(!host("bad host"));
        let hosts = AllowedHosts::new(&allowed);
        assert!(!hosts.allow(&"/mcp".parse().unwrap(), &HeaderMap::new()));
        // rmcp: no list takes every host, a list of blanks none.
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "evil.example".parse().unwrap());
        assert!(AllowedHosts::new(&[]).allow(&"/mcp".parse().unwrap(), &h));
        assert!(!AllowedHosts::new(&[" ".to_owned()]).allow(&"/mcp".parse().unwrap(), &h));
    }

    /// The stateless endpoint over the calc plugin, with `tokens`
    /// (`reviewer`'s profile denies every tool), and the fast path when
    /// `fast`: its base URL and the fast path.
    async fn endpoint(
        fast: bool,
        tokens: &[ClientToken],
    ) -> (String, Option<Arc<StatelessCalls>>, Runtime) {
        let dir = tempfile::tempdir().unwrap();
        toolhost_test_support::copy_plugin(
            &toolhost_test_support::plugins_dir(),
            "calc",
            dir.path(),
        );
        let policy = toolhost_runtime::policy::Policy::from_toml(
            "default = \"allow\"\n[profiles.reviewer]\ndefault = \"deny\"\n",
            std::path::Path::new("policy.toml"),
        )
        .unwrap();
        let runtime = Runtime::builder()
            .plugin_dir(dir.path())
            .cache_dir(None)
            .policy(policy)
            .build()
            .await
            .unwrap();
        std::mem::forget(dir);
        let mut options = HttpOptions::local(0);
        options.stateless = true;
        options.tokens = tokens.to_vec();
        options.max_request_bytes = 4096;
        let server = McpServer::new(runtime.clone(), ServerOptions::default());
        let bound = HttpServer::bind_with(server, options, fast).await.unwrap();
        let base = format!("http://{}", bound.local_addr());
        let calls = bound.calls.clone();
        assert_eq!(calls.is_some(), fast);
        tokio::spawn(bound.run(std::future::pending()));
        (base, calls, runtime)
    }

    /// Both endpoints, with and without the fast path.
    async fn both(tokens: &[ClientToken]) -> [(String, Option<Arc<StatelessCalls>>, Runtime); 2] {
        [endpoint(true, tokens).await, endpoint(false, tokens).await]
    }

    fn answered(calls: Option<&Arc<StatelessCalls>>) -> u64 {
        calls.map_or(0, |c| c.answered.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// What a client sees: the status, `Content-Type`, and the body (as
    /// JSON when it is, else as text).
    #[derive(Debug, PartialEq)]
    struct Seen {
        status: u16,
        content_type: Option<String>,
        body: Value,
    }

    /// Headers to set on a request (`None`: left out).
    type Headers<'a> = &'a [(&'a str, Option<&'a str>)];

    /// POSTs `body` to `base`'s `/mcp` with the benchmark's clients'
    /// headers, each of `headers` set instead (`None`: left out).
    async fn post(base: &str, body: &str, headers: Headers<'_>) -> Seen {
        let mut sent = reqwest::header::HeaderMap::new();
        for (name, value) in [
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ] {
            sent.insert(name, value.parse().unwrap());
        }
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap();
            match value {
                Some(v) => sent.insert(name, v.parse().unwrap()),
                None => sent.remove(name),
            };
        }
        let response = client()
            .post(format!("{base}/mcp"))
            .headers(sent)
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let text = response.text().await.unwrap();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Seen {
            status,
            content_type,
            body,
        }
    }

    /// An HTTP client (reqwest here has TLS without a provider: ring's).
    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::new()
    }

    fn call(id: u64, name: &str, arguments: Value) -> String {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
        .to_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_is_answered_on_the_fast_path_as_rmcp_answers_it() {
        let [(fast, calls, _), (rmcp, _, _)] = both(&[]).await;
        let cases = [
            (
                "success",
                call(1, "calculate", json!({"expression": "2*(3+4)"})),
            ),
            (
                "tool error",
                call(2, "calculate", json!({"expression": "2*("})),
            ),
            ("unknown tool", call(3, "no_such_tool", json!({}))),
            (
                "invalid arguments",
                call(4, "calculate", json!({"expression": 5})),
            ),
            (
                "string id, no arguments",
                json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call",
                    "params": {"name": "calculate"}})
                .to_string(),
            ),
        ];
        for (n, (case, body)) in cases.iter().enumerate() {
            let seen = post(&fast, body, &[]).await;
            let expected = post(&rmcp, body, &[]).await;
            assert_eq!(seen, expected, "{case}");
            assert_eq!(
                answered(calls.as_ref()),
                n as u64 + 1,
                "{case} took the fast path"
            );
        }
        assert_eq!(cases_answer(&fast, &cases[0].1).await, "14");
        // Without the header (2025-03-26), and with older ones.
        for version in [None, Some("2025-06-18"), Some("2024-11-05")] {
            let header = [("mcp-protocol-version", version)];
            let before = answered(calls.as_ref());
            let seen = post(&fast, &cases[0].1, &header).await;
            let expected = post(&rmcp, &cases[0].1, &header).await;
            assert_eq!(seen, expected, "{version:?}");
            assert_eq!(seen.status, 200, "{version:?}");
            assert_eq!(answered(calls.as_ref()), before + 1, "{version:?}");
        }
    }

    /// The text `body`'s call answers at `base`.
    async fn cases_answer(base: &str, body: &str) -> String {
        let seen = post(base, body, &[]).await;
        seen.body["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bearer_tokens_profile_reaches_a_call_on_the_fast_path() {
        let tokens = [
            ClientToken::caller("denied-token", Some("reviewer".into())),
            ClientToken::caller("plain-token", None),
        ];
        let [(fast, calls, _), (rmcp, _, _)] = both(&tokens).await;
        let body = call(1, "calculate", json!({"expression": "2*(3+4)"}));
        for token in ["denied-token", "plain-token"] {
            let bearer = format!("Bearer {token}");
            let auth = [("authorization", Some(bearer.as_str()))];
            let seen = post(&fast, &body, &auth).await;
            let expected = post(&rmcp, &body, &auth).await;
            assert_eq!(seen, expected, "{token}");
        }
        assert_eq!(answered(calls.as_ref()), 2);
        let denied = post(
            &fast,
            &body,
            &[("authorization", Some("Bearer denied-token"))],
        )
        .await;
        let text = denied.body.to_string();
        assert_eq!(denied.body["result"]["isError"], true, "{text}");
        assert!(text.contains("denied"), "{text}");
        let allowed = post(
            &fast,
            &body,
            &[("authorization", Some("Bearer plain-token"))],
        )
        .await;
        assert!(
            allowed.body["result"]["content"].to_string().contains("14"),
            "{allowed:?}"
        );
        // No token: refused before any path.
        let refused = post(&fast, &body, &[]).await;
        assert_eq!(refused.status, 401);
        assert_eq!(answered(calls.as_ref()), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_request_is_refused_as_rmcp_refuses_it() {
        let [(fast, calls, _), (rmcp, _, _)] = both(&[]).await;
        let body = call(1, "calculate", json!({"expression": "2*(3+4)"}));
        let large = format!("{body}{:5000}", " ");
        let cases: [(&str, Headers, &str, u16); 12] = [
            ("Host", &[("host", Some("evil.example"))], &body, 403),
            (
                "Origin",
                &[("origin", Some("http://evil.example"))],
                &body,
                403,
            ),
            (
                "Accept without SSE",
                &[("accept", Some("application/json"))],
                &body,
                406,
            ),
            ("no Accept", &[("accept", None)], &body, 406),
            (
                "Accept JSON at q=0",
                &[("accept", Some("application/json;q=0, text/event-stream"))],
                &body,
                406,
            ),
            (
                "Content-Type",
                &[("content-type", Some("text/plain"))],
                &body,
                415,
            ),
            ("no Content-Type", &[("content-type", None)], &body, 415),
            (
                "unknown revision",
                &[("mcp-protocol-version", Some("1999-01-01"))],
                &body,
                400,
            ),
            (
                "2026-07-28 without _meta",
                &[("mcp-protocol-version", Some("2026-07-28"))],
                &body,
                400,
            ),
            ("too large", &[], &large, 413),
            ("not JSON", &[], "{not json", 415),
            ("empty body", &[], "", 415),
        ];
        for (case, headers, body, status) in cases {
            let seen = post(&fast, body, headers).await;
            let expected = post(&rmcp, body, headers).await;
            assert_eq!(seen, expected, "{case}");
            assert_eq!(seen.status, status, "{case}: {seen:?}");
        }
        assert_eq!(answered(calls.as_ref()), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_chunked_body_over_the_bound_is_refused_with_413_as_rmcp_does() {
        let [(fast, calls, _), (rmcp, _, _)] = both(&[]).await;
        let mut seen = Vec::new();
        for base in [&fast, &rmcp] {
            let authority = base.trim_start_matches("http://");
            let mut tcp = tokio::net::TcpStream::connect(authority).await.unwrap();
            let chunk = "x".repeat(3000);
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
                 Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n\
                 {len:x}\r\n{chunk}\r\n{len:x}\r\n{chunk}\r\n0\r\n\r\n",
                len = chunk.len()
            );
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            tcp.write_all(request.as_bytes()).await.unwrap();
            let mut response = String::new();
            let _ = tcp.read_to_string(&mut response).await;
            let (head, body) = response.split_once("\r\n\r\n").unwrap();
            let status = head.lines().next().unwrap().to_owned();
            seen.push((status, body.to_owned()));
        }
        assert_eq!(seen[0], seen[1]);
        assert!(seen[0].0.contains("413"), "{seen:?}");
        assert_eq!(answered(calls.as_ref()), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_is_not_a_plain_call_goes_to_rmcp() {
        let [(fast, calls, _), (rmcp, _, _)] = both(&[]).await;
        let one = call(1, "calculate", json!({"expression": "1+1"}));
        let cases = [
            ("batch", format!("[{one}]")),
            (
                "notification",
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            ),
            (
                "tools/list",
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
            ),
            (
                "no tool name",
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}})
                    .to_string(),
            ),
            (
                "a progress token",
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
                    "name": "calculate", "arguments": {"expression": "1+1"},
                    "_meta": {"progressToken": "p"}}})
                .to_string(),
            ),
            (
                "a response",
                json!({"jsonrpc": "2.0", "id": 5, "result": {}}).to_string(),
            ),
        ];
        for (case, body) in &cases {
            let seen = post(&fast, body, &[]).await;
            let expected = post(&rmcp, body, &[]).await;
            assert_eq!(seen, expected, "{case}");
        }
        // A session id, or a GET: rmcp's.
        let session = [("mcp-session-id", Some("s"))];
        let with_session = post(&fast, &one, &session).await;
        assert_eq!(with_session, post(&rmcp, &one, &session).await);
        let get = client()
            .get(format!("{fast}/mcp"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(
            get,
            client()
                .get(format!("{rmcp}/mcp"))
                .send()
                .await
                .unwrap()
                .status()
        );
        assert_eq!(answered(calls.as_ref()), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_a_call_sends_its_client_on_the_fast_path_fails_at_once() {
        let (_, calls, _) = endpoint(true, &[]).await;
        let calls = calls.unwrap();
        assert_eq!(
            calls.peers.len(),
            4,
            "one peer per revision with initialize"
        );
        for (version, peer) in &calls.peers {
            let info = peer.peer_info().unwrap();
            assert_eq!(&info.protocol_version, version);
            assert!(info.capabilities.elicitation.is_none());
            let quick = std::time::Duration::from_secs(5);
            let progress = peer.notify_progress(rmcp::model::ProgressNotificationParam::new(
                rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1)),
                1.0,
            ));
            let sent = tokio::time::timeout(quick, progress).await;
            assert!(matches!(sent, Ok(Err(_))), "progress: {sent:?}");
            let ping =
                peer.send_request(rmcp::model::ServerRequest::PingRequest(Default::default()));
            let asked = tokio::time::timeout(quick, ping).await;
            assert!(matches!(asked, Ok(Err(_))), "a request: {asked:?}");
        }
    }
}
