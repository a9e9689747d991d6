//! Sending a plugin's HTTP request to the address that was checked.
//!
//! The allowlist (`http.rs`) resolves the request's host once and
//! checks every address (no private, loopback or link-local address unless
//! granted). [`send_to`] then connects to that address, never to a second
//! lookup's answer, so a name that rebinds between the check and the
//! connection (DNS rebinding) cannot reach an address that was not
//! checked. For HTTPS, TLS still runs on the request's name: it is the SNI
//! sent and the name the server's certificate must be valid for.
//!
//! This is wasmtime-wasi-http 48's `default_send_request` with the connect
//! step changed (that function takes the host from the URI and resolves it
//! again, and offers no hook for the connect): the timeouts and the errors
//! are the same, and the TLS configuration (webpki's roots, as wasmtime's)
//! is built once instead of per request.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// A response, and the future that drives the connection to its end.
pub(crate) type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

/// The TLS client configuration for plugins' HTTPS: the webpki roots, as
/// wasmtime-wasi-http uses, with the ring provider; built once.
pub(crate) fn default_tls() -> Result<Arc<rustls::ClientConfig>, Error> {
    static CONFIG: LazyLock<Result<Arc<rustls::ClientConfig>, String>> = LazyLock::new(|| {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        client_config(roots).map(Arc::new)
    });
    CONFIG
        .clone()
        .map_err(|e| Error::InternalError(Some(format!("TLS configuration: {e}"))))
}

/// A client configuration trusting `roots`, with the ring provider.
pub(crate) fn client_config(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, String> {
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

trait Stream: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}
impl<T> Stream for T where T: AsyncRead + AsyncWrite + Send + Sync + Unpin + 'static {}

/// Sends `request` to `addr`. With `tls`, the connection is TLS for the
/// request's host name (SNI and certificate check), whatever `addr` is.
pub(crate) async fn send_to(
    mut request: http::Request<WasiBody>,
    options: Option<RequestOptions>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Sent, Error> {
    let timeout = |pick: fn(&RequestOptions) -> Option<Duration>| {
        options
            .as_ref()
            .and_then(pick)
            .unwrap_or(Duration::from_secs(600))
    };
    let connect_timeout = timeout(|o| o.connect_timeout);
    let first_byte_timeout = timeout(|o| o.first_byte_timeout);
    let between_bytes_timeout = timeout(|o| o.between_bytes_timeout);

    let tcp = match tokio::time::timeout(connect_timeout, TcpStream::connect(addr)).await {
        Ok(stream) => stream.map_err(Error::Connect)?,
        Err(_) => return Err(Error::ConnectionTimeout),
    };
    let stream: Box<dyn Stream> = match tls {
        Some(config) => {
            let name = server_name(request.uri())?;
            let connecting = tokio_rustls::TlsConnector::from(config).connect(name, tcp);
            match tokio::time::timeout(connect_timeout, connecting).await {
                Ok(stream) => Box::new(stream.map_err(Error::Tls)?),
                Err(_) => return Err(Error::ConnectionTimeout),
            }
        }
        None => Box::new(tcp),
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)??;

    // The request line carries only the path: the scheme and authority are
    // for a proxy (the Host header names the server).
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(request.uri().path_and_query().map_or("/", |p| p.as_str()))
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;

    let send = async move {
        let response = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
        // Tokio panics on a zero interval.
        let mut gap = tokio::time::interval(between_bytes_timeout.max(Duration::from_nanos(1)));
        gap.reset();
        Ok::<_, Error>(response.map(|incoming| {
            TimedBody {
                incoming,
                timeout: gap,
            }
            .boxed_unsync()
        }))
    };
    let mut send = std::pin::pin!(send);
    let mut conn = Some(conn);
    // Wait for the response while driving the connection's I/O.
    let response = std::future::poll_fn(|cx| match send.as_mut().poll(cx) {
        Poll::Ready(result) => Poll::Ready(result),
        Poll::Pending => {
            let Some(driving) = conn.as_mut() else {
                return Poll::Pending;
            };
            let done = ready!(Pin::new(driving).poll(cx));
            conn = None;
            match done {
                Ok(()) => send.as_mut().poll(cx),
                Err(e) => Poll::Ready(Err(Error::from(e))),
            }
        }
    })
    .await?;
    let io = async move {
        let Some(conn) = conn else {
            return Ok(());
        };
        conn.await.map_err(|e| {
            if e.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                Error::from(e)
            }
        })
    };
    Ok((response, Box::new(io)))
}

/// The name TLS checks the server's certificate against: the request's
/// host (an address literal is checked as an address).
fn server_name(uri: &http::Uri) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    let host = uri.host().ok_or(Error::HttpRequestUriInvalid)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(ip.into());
    }
    Ok(rustls::pki_types::ServerName::try_from(host)?.to_owned())
}

/// A response body that fails when no frame comes for the between-bytes
/// timeout.
struct TimedBody {
    incoming: hyper::body::Incoming,
    timeout: tokio::time::Interval,
}

impl http_body::Body for TimedBody {
    type Data = bytes::Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        match Pin::new(&mut self.incoming).poll_frame(cx) {
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(if e.is_timeout() {
                Error::HttpResponseTimeout
            } else {
                Error::from(e)
            }))),
            Poll::Ready(Some(Ok(frame))) => {
                self.timeout.reset();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(self.timeout.poll_tick(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.incoming.size_hint()
    }
}
