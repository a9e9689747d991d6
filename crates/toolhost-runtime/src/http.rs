//! Outgoing HTTP from plugins (wasi:http), limited to the hosts a plugin was granted.

use std::sync::Arc;

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
    /// The one host a call may reach besides the grant's rule (a per-call
    /// grant, `call/narrow.rs`).
    only: Option<HostPattern>,
    resolver: Resolver,
    /// The TLS configuration for HTTPS; `None` is the default (webpki's
    /// roots), a test sets its own.
    tls: Option<Arc<rustls::ClientConfig>>,
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
            only: None,
            resolver: system_resolver,
            tls: None,
            hop_check: None,
        }
    }

    /// The same allowlist, for requests to `host` only (when given).
    pub(crate) fn only(mut self, host: Option<HostPattern>) -> Self {
        self.only = host;
        self
    }

    /// Whether `uri` may be requested (before name resolution).
    pub(crate) fn allows(&self, uri: &http::Uri) -> bool {
        let Some((scheme, host, port)) = target(uri) else {
            return false;
        };
        self.only
            .as_ref()
            .is_none_or(|one| one.matches(scheme, host, port))
            && self.allowed.iter().any(|p| p.matches(scheme, host, port))
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
        let (plugin, allowed, resolver, tls) = (
            self.plugin.clone(),
            self.allowed.clone(),
            self.resolver,
            self.tls.clone(),
        );
        Box::new(async move {
            let mut request = request;
            let uri = request.uri().clone();
            let Some((scheme, host, port)) = target(&uri) else {
                return Err(HttpError::HttpRequestUriInvalid);
            };
            let found = resolver(host.to_owned(), port).await;
            let checked = found.as_ref().ok().and_then(|a| a.first().copied());
            let refused = refuse_internal(&uri, found, &allowed);
            let Some(ip) = checked.filter(|_| refused.is_ok()) else {
                tracing::warn!(
                    target: "toolhost::plugin",
                    plugin = %plugin,
                    uri = %uri,
                    "refused an HTTP request: {}",
                    refused.err().unwrap_or_default()
                );
                return Err(HttpError::HttpRequestDenied);
            };
            // Connect to the address just checked, never to a second
            // lookup's answer (DNS rebinding). The Host header, and for
            // HTTPS the SNI and the certificate check, keep the name.
            let tls = match scheme {
                "http" => None,
                "https" => Some(match tls {
                    Some(config) => config,
                    None => crate::http_connect::default_tls()?,
                }),
                _ => return Err(HttpError::HttpRequestUriInvalid),
            };
            if !request.headers().contains_key(http::header::HOST)
                && let Some(authority) = uri.authority()
                && let Ok(value) = http::HeaderValue::from_str(authority.as_str())
            {
                request.headers_mut().insert(http::header::HOST, value);
            }
            let addr = std::net::SocketAddr::new(ip, port);
            crate::http_connect::send_to(request, options, addr, tls).await
        })
    }
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
/// Both plain HTTP and HTTPS then connect to the first address checked
/// (`http_connect.rs`), so a DNS server that answers differently the second
/// time (DNS rebinding) gets no second question; HTTPS keeps the request's
/// name for SNI and the certificate check (docs/security/plugins.md).
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

/// Loopback, private, link-local, shared (CGNAT), unspecified or broadcast;
/// an IPv6 address that leads to an IPv4 one (IPv4-mapped, or NAT64's
/// well-known prefix `64:ff9b::/96`, RFC 6052) by the IPv4 address it
/// carries; NAT64's local-use prefix `64:ff9b:1::/48` (RFC 8215), whose
/// translator's network is the operator's, always.
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
            let segments = v6.segments();
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [.., a, b, c, d] = v6.octets();
                return is_internal(&std::net::IpAddr::V4([a, b, c, d].into()));
            }
            if segments[..3] == [0x64, 0xff9b, 1] {
                return true;
            }
            let first = segments[0];
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
    use http_body_util::BodyExt;

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
    fn a_calls_one_host_narrows_the_grant_and_never_widens_it() {
        let list = HttpAllowlist::new("http".into(), vec!["*.example.com".parse().unwrap()].into())
            .only(HostPattern::of_url("https://a.example.com/x", false));
        let allows = |u: &str| list.allows(&u.parse::<http::Uri>().unwrap());
        assert!(allows("https://a.example.com/y"));
        assert!(allows("http://a.example.com:8080/"));
        assert!(!allows("https://b.example.com/"), "granted, not the call's");
        let outside = HttpAllowlist::new("http".into(), Vec::new().into())
            .only(HostPattern::of_url("https://a.example.com/", false));
        assert!(!outside.allows(&"https://a.example.com/".parse::<http::Uri>().unwrap()));
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

    #[test]
    fn nat64_addresses_are_judged_by_the_ipv4_address_they_lead_to() {
        // The well-known prefix: a NAT64 gateway turns these into the IPv4
        // address in their last 32 bits.
        for internal in [
            "64:ff9b::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b::192.168.1.1",
            "64:ff9b::169.254.169.254",
            "64:ff9b::100.64.0.1",
            "64:ff9b::",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(is_internal(&internal.parse().unwrap()), "{internal}");
        }
        for public in ["64:ff9b::8.8.8.8", "64:ff9b::5db8:d822"] {
            assert!(!is_internal(&public.parse().unwrap()), "{public}");
        }
        // The local-use prefix: the operator's own translator, whatever
        // the address embeds, and wherever (RFC 6052 allows several
        // prefix lengths).
        for internal in ["64:ff9b:1::808:808", "64:ff9b:1:ffff::1", "64:ff9b:1::"] {
            assert!(is_internal(&internal.parse().unwrap()), "{internal}");
        }
        // Neither prefix: an ordinary address.
        for public in ["64:ff9b:2::a00:1", "64:ff9a::a00:1"] {
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
            only: None,
            allowed: vec![
                format!("rebind.test:{port}").parse().unwrap(),
                "127.0.0.1".parse().unwrap(),
            ]
            .into(),
            resolver: rebinding_resolver,
            tls: None,
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

    /// An HTTPS server on 127.0.0.1 presenting the test certificate for
    /// `name` (signed by `testdata/tls/ca.pem`); it answers one request
    /// and returns what it read, or the TLS error.
    async fn tls_server(
        name: &str,
    ) -> (u16, tokio::task::JoinHandle<Result<String, std::io::Error>>) {
        use rustls::pki_types::pem::PemObject;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tls");
        let cert =
            rustls::pki_types::CertificateDer::pem_file_iter(dir.join(format!("{name}.pem")))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(dir.join(format!("{name}.key")))
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(cert, key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (conn, _) = listener.accept().await?;
            let mut conn = acceptor.accept(conn).await?;
            let mut buf = vec![0; 4096];
            let n = conn.read(&mut buf).await?;
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .await?;
            conn.shutdown().await?;
            Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
        });
        (port, server)
    }

    /// The allowlist for `https://rebind.test:PORT`, trusting the test CA.
    fn https_hooks(port: u16) -> HttpAllowlist {
        use rustls::pki_types::pem::PemObject;
        let ca = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tls/ca.pem");
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        HttpAllowlist {
            plugin: "http".into(),
            only: None,
            allowed: vec![
                format!("https://rebind.test:{port}").parse().unwrap(),
                "127.0.0.1".parse().unwrap(),
            ]
            .into(),
            resolver: rebinding_resolver,
            tls: Some(Arc::new(crate::http_connect::client_config(roots).unwrap())),
            hop_check: None,
        }
    }

    fn get(uri: String) -> http::Request<wasmtime_wasi_http::WasiBody> {
        let body = http_body_util::Empty::<bytes::Bytes>::new()
            .map_err(|never| match never {})
            .boxed_unsync();
        http::Request::builder().uri(uri).body(body).unwrap()
    }

    #[tokio::test]
    async fn https_connects_to_the_checked_address_with_the_name_for_sni_and_certificate() {
        let (port, server) = tls_server("rebind.test").await;
        let mut hooks = https_hooks(port);
        let request = get(format!("https://rebind.test:{port}/secure"));
        let sent = Box::into_pin(hooks.send_request(request, None, Box::new(async { Ok(()) })));
        let (response, io) = sent.await.expect("sent to the checked address over TLS");
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
        Box::into_pin(io).await.unwrap();
        let seen = server.await.unwrap().expect("the TLS handshake succeeded");
        assert!(
            seen.starts_with("GET /secure HTTP/1.1") && seen.contains("host: rebind.test"),
            "{seen}"
        );
    }

    #[tokio::test]
    async fn https_to_the_checked_address_still_needs_a_certificate_for_the_name() {
        // The address answers with a valid certificate, for another name.
        let (port, server) = tls_server("other.test").await;
        let mut hooks = https_hooks(port);
        let request = get(format!("https://rebind.test:{port}/"));
        let sent = Box::into_pin(hooks.send_request(request, None, Box::new(async { Ok(()) })));
        let refused = sent
            .await
            .err()
            .expect("the certificate is not for rebind.test");
        assert!(matches!(refused, HttpError::Tls(_)), "{refused:?}");
        assert!(server.await.unwrap().is_err());
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
