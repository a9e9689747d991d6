//! The two HTTP clients of a DPoP sign-in (`dpop.rs`): [`DpopOAuthClient`]
//! puts a proof on each token request to the authorization server, and
//! [`DpopHttp`] presents a bound token with a proof on each request to
//! the MCP server; each sends a request again once with the nonce a
//! server asks for.
//!
//! rmcp's reqwest transport keeps only the `WWW-Authenticate` header of a
//! 401, not its `DPoP-Nonce`: when the MCP server answers
//! `use_dpop_nonce`, [`DpopHttp`] learns the nonce from one `ping` sent
//! with a proof and nothing else (which the server turns away as it did
//! the request, and which changes nothing if it lets it through), then
//! sends the request again with it.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use url::Url;

use super::dpop::{DPOP, Dpop, USE_DPOP_NONCE};

/// How long one request to the authorization server may take (rmcp's own
/// client's limit).
const OAUTH_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest answer of the authorization server read (rmcp's limit).
const MAX_OAUTH_BODY_BYTES: usize = 1024 * 1024;
/// The most redirects followed in discovery (rmcp's limit).
const MAX_REDIRECTS: usize = 10;

/// The OAuth client of a DPoP sign-in: every request of rmcp's OAuth
/// state machine (discovery, registration, token requests), a proof on
/// each token request (a `POST` with a `grant_type`). The addresses it
/// reaches are those rmcp's own client reaches ([`AddressGuard`]).
pub(super) struct DpopOAuthClient {
    dpop: Arc<Dpop>,
    follow: reqwest::Client,
    stop: reqwest::Client,
    guard: Arc<AddressGuard>,
}

impl DpopOAuthClient {
    /// The client of `dpop`'s sign-in to the MCP server at `server`.
    pub(super) fn new(dpop: Arc<Dpop>, server: &Url) -> Result<DpopOAuthClient, String> {
        let guard = Arc::new(AddressGuard::for_server(server));
        let build = |redirect: reqwest::redirect::Policy| {
            reqwest::Client::builder()
                .timeout(OAUTH_TIMEOUT)
                .redirect(redirect)
                .dns_resolver(guard.clone())
                .build()
                .map_err(|e| e.to_string())
        };
        let policy = guard.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            if !policy.allows_url(attempt.url()) {
                attempt.error("redirect to an address not allowed")
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error("too many redirects")
            } else {
                attempt.follow()
            }
        });
        Ok(DpopOAuthClient {
            dpop,
            follow: build(follow)?,
            stop: build(reqwest::redirect::Policy::none())?,
            guard,
        })
    }

    async fn send(
        &self,
        request: &oauth2::HttpRequest,
        policy: &OAuthHttpRedirectPolicy,
        proof: Option<String>,
    ) -> Result<oauth2::HttpResponse, OAuthHttpClientError> {
        let mut request = request.clone();
        if let Some(proof) = proof {
            request
                .headers_mut()
                .insert(DPOP, HeaderValue::from_str(&proof)?);
        }
        let request = reqwest::Request::try_from(request)?;
        if !self.guard.allows_url(request.url()) {
            return Err(format!("{}: address not allowed", request.url()).into());
        }
        let client = match policy {
            OAuthHttpRedirectPolicy::Stop => &self.stop,
            _ => &self.follow,
        };
        let response = client.execute(request).await?;
        let mut answer = http::Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let body = read_limited(response, MAX_OAUTH_BODY_BYTES).await?;
        Ok(answer.body(body)?)
    }
}

/// Whether `request` asks the token endpoint for a token.
fn is_token_request(request: &oauth2::HttpRequest) -> bool {
    request.method() == http::Method::POST
        && url::form_urlencoded::parse(request.body()).any(|(k, _)| k == "grant_type")
}

/// Whether an authorization server's answer asks for a nonce (RFC 9449, 8).
fn asks_for_nonce(response: &oauth2::HttpResponse) -> bool {
    response.status() == http::StatusCode::BAD_REQUEST
        && serde_json::from_slice::<serde_json::Value>(response.body())
            .is_ok_and(|b| b["error"] == USE_DPOP_NONCE)
}

impl OAuthHttpClient for DpopOAuthClient {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let OAuthHttpRequest {
                request,
                redirect_policy,
                ..
            } = request;
            let key = is_token_request(&request)
                .then(|| self.dpop.key())
                .flatten();
            let Some(key) = key else {
                return self.send(&request, &redirect_policy, None).await;
            };
            let url = request.uri().to_string();
            let mut sent_nonce = self.dpop.nonce(&url);
            let mut tries = 0;
            loop {
                let proof = key.proof("POST", &url, None, sent_nonce.as_deref());
                let response = self.send(&request, &redirect_policy, Some(proof)).await?;
                let learned = self.dpop.learn(&url, response.headers());
                tries += 1;
                let nonce = self.dpop.nonce(&url);
                if tries < 2 && learned && nonce != sent_nonce && asks_for_nonce(&response) {
                    tracing::debug!("DPoP: the authorization server asks for a nonce");
                    sent_nonce = nonce;
                    continue;
                }
                return Ok(response);
            }
        })
    }
}

/// Reads at most `limit` bytes of `response`'s body.
async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, OAuthHttpClientError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if chunk.len() > limit.saturating_sub(body.len()) {
            return Err(format!("the answer is over {limit} bytes").into());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The addresses rmcp's OAuth client reaches for a server: public and
/// private ones, loopback only for a server on loopback; never link-local
/// (cloud metadata endpoints), unspecified, broadcast or multicast ones.
/// Names are checked as resolved, literals as written.
struct AddressGuard {
    loopback: bool,
}

impl AddressGuard {
    fn for_server(server: &Url) -> AddressGuard {
        let loopback = match server.host() {
            Some(url::Host::Domain(d)) => {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                d == "localhost" || d.ends_with(".localhost")
            }
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        AddressGuard { loopback }
    }

    fn allows(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 @ IpAddr::V4(_) => v4,
        };
        match ip {
            IpAddr::V4(v4) => {
                if v4.is_loopback() {
                    return self.loopback;
                }
                !(v4.is_link_local()
                    || v4.is_unspecified()
                    || v4.is_broadcast()
                    || v4.is_multicast()
                    || v4.octets()[0] == 0)
            }
            IpAddr::V6(v6) => {
                if v6.is_loopback() {
                    return self.loopback;
                }
                let first = v6.segments()[0];
                !(v6.is_unspecified() || v6.is_multicast() || (first & 0xffc0) == 0xfe80)
            }
        }
    }

    fn allows_url(&self, url: &Url) -> bool {
        match url.host() {
            Some(url::Host::Ipv4(ip)) => self.allows(IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.allows(IpAddr::V6(ip)),
            Some(url::Host::Domain(_)) => true,
            None => false,
        }
    }
}

impl reqwest::dns::Resolve for AddressGuard {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let loopback = self.loopback;
        Box::pin(async move {
            let guard = AddressGuard { loopback };
            let found: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0))
                .await?
                .filter(|a| guard.allows(a.ip()))
                .collect();
            if found.is_empty() {
                return Err(format!("{}: no address allowed", name.as_str()).into());
            }
            Ok(Box::new(found.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The HTTP client of an MCP server's requests where its sign-in may be
/// DPoP's: a token issued bound to the kept key goes as `DPoP` with a
/// proof; any other as rmcp's reqwest client sends it (`Bearer`).
#[derive(Clone)]
pub(crate) struct DpopHttp {
    http: reqwest::Client,
    dpop: Arc<Dpop>,
}

type Failed = StreamableHttpError<reqwest::Error>;

impl DpopHttp {
    pub(super) fn new(dpop: Arc<Dpop>) -> DpopHttp {
        DpopHttp {
            http: reqwest::Client::default(),
            dpop,
        }
    }

    /// The headers of a `method` request to `uri` presenting `token`
    /// bound to the kept key: `None` when it is not bound (a `Bearer`).
    fn bound_headers(
        &self,
        method: &str,
        uri: &str,
        token: Option<&str>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) -> Option<HashMap<HeaderName, HeaderValue>> {
        let token = token?;
        let key = self.dpop.binding(token)?;
        let proof = key.proof(method, uri, Some(token), self.dpop.nonce(uri).as_deref());
        let mut headers = headers.clone();
        headers.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("DPoP {token}")).ok()?,
        );
        headers.insert(
            HeaderName::from_static(DPOP),
            HeaderValue::from_str(&proof).ok()?,
        );
        Some(headers)
    }

    /// Whether `error` is the MCP server asking for a nonce and one was
    /// learned from it ([module docs](self)): the request may go again.
    async fn learned_nonce(
        &self,
        error: &Failed,
        uri: &str,
        session: Option<&str>,
        token: &str,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) -> bool {
        let StreamableHttpError::AuthRequired(challenge) = error else {
            return false;
        };
        if !challenge.www_authenticate_header.contains(USE_DPOP_NONCE) {
            return false;
        }
        let Some(headers) = self.bound_headers("POST", uri, Some(token), headers) else {
            return false;
        };
        let mut ping = self
            .http
            .post(uri)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .json(&serde_json::json!({"jsonrpc": "2.0", "id": "toolhost-dpop-nonce", "method": "ping"}));
        for (name, value) in headers {
            ping = ping.header(name, value);
        }
        if let Some(session) = session {
            ping = ping.header("mcp-session-id", session);
        }
        match ping.send().await {
            Ok(answer) => {
                let learned = self.dpop.learn(uri, answer.headers());
                tracing::debug!(learned, "DPoP: the MCP server asks for a nonce");
                learned
            }
            Err(e) => {
                tracing::debug!("DPoP: the nonce could not be learned: {e}");
                false
            }
        }
    }
}

impl StreamableHttpClient for DpopHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let Some(token) = auth_header
            .clone()
            .filter(|t| self.dpop.binding(t).is_some())
        else {
            return self
                .http
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
        };
        let mut tries = 0;
        loop {
            let headers = self
                .bound_headers("POST", &uri, Some(&token), &custom_headers)
                .unwrap_or_else(|| custom_headers.clone());
            let sent = self
                .http
                .post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    None,
                    headers,
                    limits,
                )
                .await;
            tries += 1;
            match sent {
                Err(e)
                    if tries < 2
                        && self
                            .learned_nonce(&e, &uri, session_id.as_deref(), &token, &custom_headers)
                            .await => {}
                sent => return sent,
            }
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failed> {
        match self.bound_headers("DELETE", &uri, auth_header.as_deref(), &custom_headers) {
            Some(headers) => {
                self.http
                    .delete_session(uri, session_id, None, headers)
                    .await
            }
            None => {
                self.http
                    .delete_session(uri, session_id, auth_header, custom_headers)
                    .await
            }
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse, Failed> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse, Failed> {
        let (auth_header, headers) =
            match self.bound_headers("GET", &uri, auth_header.as_deref(), &custom_headers) {
                Some(headers) => (None, headers),
                None => (auth_header, custom_headers),
            };
        self.http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_keeps_rmcps_addresses() {
        let public = AddressGuard::for_server(&Url::parse("https://mcp.example/mcp").unwrap());
        let local = AddressGuard::for_server(&Url::parse("http://localhost:3000/mcp").unwrap());
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(public.allows(ip("93.184.216.34")));
        assert!(public.allows(ip("10.0.0.9")));
        assert!(!public.allows(ip("127.0.0.1")));
        assert!(!public.allows(ip("::ffff:127.0.0.1")));
        assert!(!public.allows(ip("169.254.169.254")));
        assert!(!public.allows(ip("fe80::1")));
        assert!(!public.allows(ip("0.0.0.0")));
        assert!(local.allows(ip("127.0.0.1")));
        assert!(local.allows(ip("::1")));
        assert!(!local.allows(ip("169.254.169.254")));
        assert!(!public.allows_url(&Url::parse("http://169.254.169.254/latest").unwrap()));
    }

    #[test]
    fn only_a_post_with_a_grant_type_is_a_token_request() {
        let request = |method: http::Method, body: &str| {
            http::Request::builder()
                .method(method)
                .uri("https://as.example/token")
                .body(body.as_bytes().to_vec())
                .unwrap()
        };
        assert!(is_token_request(&request(
            http::Method::POST,
            "grant_type=authorization_code&code=x"
        )));
        assert!(!is_token_request(&request(http::Method::POST, "token=x")));
        assert!(!is_token_request(&request(
            http::Method::GET,
            "grant_type=refresh_token"
        )));
    }
}
