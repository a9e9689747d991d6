//! Outgoing HTTP from plugins (wasi:http), limited to the hosts a plugin was granted.

use std::sync::Arc;

use http_body_util::BodyExt;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiHttpHooks};

use crate::grants::HostPattern;

type ResponseFuture = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<wasmtime_wasi_http::WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

/// [`WasiHttpHooks`] that send a request only when its scheme, host and port
/// match one of the plugin's granted [`HostPattern`]s; anything else fails in
/// the plugin with `HTTP-request-denied`.
pub(crate) struct HttpAllowlist {
    plugin: String,
    allowed: Arc<[HostPattern]>,
    resolver: Resolver,
    /// The running call's policy check of each request it makes (every
    /// redirect hop included); set per call (`call/admit.rs`, `hop_check`).
    pub(crate) hop_check: Option<HopCheck>,
}

/// Whether the policy lets the running call request this URL: `Err` with
/// the reason when it does not.
pub(crate) type HopCheck = Arc<dyn Fn(&http::Uri) -> Result<(), String> + Send + Sync>;

/// Name resolution: the system's, or one a test controls.
type Resolver =
    fn(String, u16) -> futures::future::BoxFuture<'static, Result<Vec<std::net::IpAddr>, String>>;

fn system_resolver(
    host: String,
    port: u16,
) -> futures::future::BoxFuture<'static, Result<Vec<std::net::IpAddr>, String>> {
    Box::pin(async move { resolve(&host, port).await })
}

impl HttpAllowlist {
    pub(crate) fn new(plugin: String, allowed: Arc<[HostPattern]>) -> Self {
        HttpAllowlist {
            plugin,
            allowed,
            resolver: system_resolver,
            hop_check: None,
        }
    }

    /// Whether `uri` may be requested (before name resolution).
    pub(crate) fn allows(&self, uri: &http::Uri) -> bool {
        let Some((scheme, host, port)) = target(uri) else {
            return false;
        };
        self.allowed.iter().any(|p| p.matches(scheme, host, port))
    }
}

impl WasiHttpHooks for HttpAllowlist {
    fn send_request(
        &mut self,
        request: http::Request<wasmtime_wasi_http::WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> ResponseFuture {
        drop(fut);
        if !self.allows(request.uri()) {
            tracing::warn!(
                target: "toolhost::plugin",
                plugin = %self.plugin,
                uri = %request.uri(),
                "refused an HTTP request to a host that is not granted"
            );
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        if let Some(Err(reason)) = self.hop_check.as_ref().map(|check| check(request.uri())) {
            tracing::warn!(
                target: "toolhost::plugin",
                plugin = %self.plugin,
                uri = %request.uri(),
                "refused an HTTP request the policy does not allow: {reason}"
            );
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        tracing::debug!(target: "toolhost::plugin", plugin = %self.plugin, uri = %request.uri(), "HTTP request");
        let (plugin, allowed, resolver) =
            (self.plugin.clone(), self.allowed.clone(), self.resolver);
        Box::new(async move {
            let mut request = request;
            let uri = request.uri().clone();
            let found = match target(&uri) {
                Some((_, host, port)) => resolver(host.to_owned(), port).await,
                None => Err("the request has no host".to_owned()),
            };
            let checked = found.as_ref().ok().and_then(|a| a.first().copied());
            if let Err(refusal) = refuse_internal(&uri, found, &allowed) {
                tracing::warn!(
                    target: "toolhost::plugin",
                    plugin = %plugin,
                    uri = %uri,
                    "refused an HTTP request: {refusal}"
                );
                return Err(HttpError::HttpRequestDenied);
            }
            // Plain HTTP connects to the address just checked, never to a
            // second lookup's answer (DNS rebinding); the Host header keeps
            // the name. HTTPS connects by name: a rebound address would have
            // to present a valid certificate for that name.
            if let Some(ip) = checked
                && let Some(pinned) = pin_to(&uri, ip)
            {
                *request.uri_mut() = pinned;
            }
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

/// `uri` aimed at `ip` instead of its host name, for plain `http` only
/// (`None` for anything else, or a URI that is already an address).
fn pin_to(uri: &http::Uri, ip: std::net::IpAddr) -> Option<http::Uri> {
    let (scheme, host, port) = target(uri)?;
    if scheme != "http" || host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let authority = std::net::SocketAddr::new(ip, port).to_string();
    http::Uri::builder()
        .scheme("http")
        .authority(authority)
        .path_and_query(uri.path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .ok()
}

/// The scheme, host and port a request goes to (default ports filled in).
fn target(uri: &http::Uri) -> Option<(&str, &str, u16)> {
    let scheme = uri.scheme_str().unwrap_or("https");
    let host = uri.host()?;
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "http" { 80 } else { 443 });
    Some((
        scheme,
        host.trim_start_matches('[').trim_end_matches(']'),
        port,
    ))
}

/// The addresses `host` stands for: itself when it is an IP address, else
/// what the system resolver answers (an error, or no address, is an error).
async fn resolve(host: &str, port: u16) -> Result<Vec<std::net::IpAddr>, String> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![ip]);
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(found) => {
            let addresses: Vec<_> = found.map(|a| a.ip()).collect();
            if addresses.is_empty() {
                Err(format!("{host} resolves to no address"))
            } else {
                Ok(addresses)
            }
        }
        Err(e) => Err(format!("cannot resolve {host}: {e}")),
    }
}

/// Checks the addresses the request's host resolved to (`found`): refused
/// when the lookup failed (fail closed: a resolver that fails once cannot
/// get a later lookup past the check), or when one address is internal
/// (loopback, private, link-local, ...) without being granted explicitly,
/// that is by a host pattern naming that very IP address. A grant of a name
/// (`localhost`, `*.corp.example`) is not a grant of the internal network
/// behind it.
///
/// Plain HTTP then connects to the first address checked ([`pin_to`]), so a
/// DNS server that answers differently the second time (DNS rebinding)
/// gets no second question; HTTPS connects by name and relies on the
/// certificate (SECURITY.md).
fn refuse_internal(
    uri: &http::Uri,
    found: Result<Vec<std::net::IpAddr>, String>,
    allowed: &[HostPattern],
) -> Result<(), String> {
    let Some((scheme, _, port)) = target(uri) else {
        return Err("the request has no host".to_owned());
    };
    let addresses = found?;
    match addresses.into_iter().find(|ip| {
        is_internal(ip)
            && !allowed
                .iter()
                .any(|p| p.names_ip(ip) && p.matches(scheme, &ip.to_string(), port))
    }) {
        Some(ip) => Err(format!(
            "the host resolves to {ip}, a private, loopback or link-local address that is \
             not granted by IP"
        )),
        None => Ok(()),
    }
}

/// Loopback, private, link-local, shared (CGNAT), unspecified or broadcast.
pub(crate) fn is_internal(ip: &std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b))
        }
        std::net::IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(&std::net::IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_granted_hosts_are_allowed() {
        let list = HttpAllowlist::new(
            "http".into(),
            vec!["127.0.0.1:8080".parse().unwrap()].into(),
        );
        assert!(list.allows(&"http://127.0.0.1:8080/x".parse().unwrap()));
        assert!(!list.allows(&"http://127.0.0.1:8081/x".parse().unwrap()));
        assert!(!list.allows(&"http://example.com/".parse().unwrap()));
    }

    #[test]
    fn nothing_is_allowed_without_grants() {
        let list = HttpAllowlist::new("http".into(), Vec::new().into());
        assert!(!list.allows(&"https://example.com/".parse().unwrap()));
    }

    #[test]
    fn internal_addresses_are_recognised() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(&internal.parse().unwrap()), "{internal}");
        }
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!is_internal(&public.parse().unwrap()), "{public}");
        }
    }

    /// [`refuse_internal`] after resolving `uri`'s host for real.
    async fn check(uri: &http::Uri, allowed: &[HostPattern]) -> Result<(), String> {
        let (_, host, port) = target(uri).unwrap();
        refuse_internal(uri, resolve(host, port).await, allowed)
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_needs_the_loopback_address_granted() {
        let uri: http::Uri = "http://localhost:8080/".parse().unwrap();
        let by_name: Vec<HostPattern> = vec!["localhost:8080".parse().unwrap()];
        assert!(check(&uri, &by_name).await.is_err());
        let by_ip: Vec<HostPattern> = vec![
            "localhost:8080".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
            "[::1]".parse().unwrap(),
        ];
        assert_eq!(check(&uri, &by_ip).await, Ok(()));
        let literal: http::Uri = "http://127.0.0.1:8080/".parse().unwrap();
        let any: Vec<HostPattern> = vec!["*".parse().unwrap()];
        assert!(
            check(&literal, &any).await.is_err(),
            "`*` is not a grant of loopback"
        );
    }

    #[test]
    fn plain_http_is_pinned_to_the_checked_address_and_https_is_not() {
        let v4: std::net::IpAddr = "203.0.113.7".parse().unwrap();
        let v6: std::net::IpAddr = "2001:db8::1".parse().unwrap();
        let uri: http::Uri = "http://api.example.com/a/b?c=d".parse().unwrap();
        assert_eq!(
            pin_to(&uri, v4).unwrap().to_string(),
            "http://203.0.113.7:80/a/b?c=d"
        );
        let uri: http::Uri = "http://api.example.com:8080".parse().unwrap();
        assert_eq!(
            pin_to(&uri, v6).unwrap().to_string(),
            "http://[2001:db8::1]:8080/"
        );
        assert!(pin_to(&"https://api.example.com/".parse().unwrap(), v4).is_none());
        assert!(pin_to(&"http://127.0.0.1:9/".parse().unwrap(), v4).is_none());
    }

    /// A resolver we control: `rebind.test` is 127.0.0.1 when checked; the
    /// system resolver has never heard of it, so a second lookup fails.
    fn rebinding_resolver(
        host: String,
        _port: u16,
    ) -> futures::future::BoxFuture<'static, Result<Vec<std::net::IpAddr>, String>> {
        Box::pin(async move {
            assert_eq!(host, "rebind.test");
            Ok(vec!["127.0.0.1".parse().unwrap()])
        })
    }

    #[tokio::test]
    async fn a_request_connects_to_the_address_that_was_checked_not_to_a_second_lookup() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0; 4096];
            let n = conn.read(&mut buf).await.unwrap();
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await
                .unwrap();
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        let mut hooks = HttpAllowlist {
            plugin: "http".into(),
            allowed: vec![
                format!("rebind.test:{port}").parse().unwrap(),
                "127.0.0.1".parse().unwrap(),
            ]
            .into(),
            resolver: rebinding_resolver,
            hop_check: None,
        };
        let body = http_body_util::Empty::<bytes::Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        let request = http::Request::builder()
            .uri(format!("http://rebind.test:{port}/path"))
            .header(http::header::HOST, format!("rebind.test:{port}"))
            .body(body)
            .unwrap();
        let sent = Box::into_pin(hooks.send_request(request, None, Box::new(async { Ok(()) })));
        let (response, _io) = sent.await.expect("sent to the checked address");
        assert_eq!(response.status(), 200);
        let seen = server.await.unwrap();
        assert!(
            seen.starts_with("GET /path HTTP/1.1") && seen.contains("host: rebind.test"),
            "the request went to 127.0.0.1 with its name in Host: {seen}"
        );
    }

    #[test]
    fn a_lookup_that_fails_or_finds_nothing_refuses_the_request() {
        // The resolver's answers, as a resolver we control would give them.
        let uri: http::Uri = "https://api.example.com/".parse().unwrap();
        let any: Vec<HostPattern> = vec!["*".parse().unwrap()];
        let refused = refuse_internal(
            &uri,
            Err("cannot resolve api.example.com: timed out".into()),
            &any,
        );
        assert!(refused.is_err_and(|e| e.contains("cannot resolve")));
        assert!(refuse_internal(&uri, Ok(vec!["93.184.216.34".parse().unwrap()]), &any).is_ok());
        // An answer that mixes a public and a metadata address is refused.
        let mixed = Ok(vec![
            "93.184.216.34".parse().unwrap(),
            "169.254.169.254".parse().unwrap(),
        ]);
        assert!(refuse_internal(&uri, mixed, &any).is_err_and(|e| e.contains("169.254.169.254")));
    }
}
