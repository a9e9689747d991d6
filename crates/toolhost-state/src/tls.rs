//! How the connection to the database is secured: libpq's `sslmode`,
//! `sslrootcert`, `sslcert` and `sslkey`, read from the connection string
//! as libpq reads them, over rustls.
//!
//! | `sslmode` | what it gives |
//! |---|---|
//! | `disable` | plain text: whoever is on the path reads and changes everything |
//! | `prefer` | TLS when the server offers it, else plain text; the certificate is not checked |
//! | `require` | TLS or no connection; the certificate is not checked |
//! | `verify-ca` | TLS, and the certificate must be signed by a trusted CA; any host name it names |
//! | `verify-full` | TLS, a certificate signed by a trusted CA **for the host connected to** |
//!
//! Only `verify-full` keeps out someone on the path who answers in the
//! database's place; `prefer` and `require` only stop someone who reads.
//! With no `sslmode`, a host that is not loopback gets `verify-full` (plain
//! text only when the URL says `sslmode=disable`), and a loopback host or a
//! Unix socket gets `prefer`, libpq's default.
//!
//! The trusted CAs are `sslrootcert`: a PEM file, or `system` (the
//! machine's, which also makes `verify-full` the only mode allowed, as in
//! libpq); without it, `verify-ca` and `verify-full` trust the machine's.
//! An `sslrootcert` file given with `prefer` or `require` checks the
//! certificate's CA as `verify-ca` does (libpq does the same). `sslcert`
//! and `sslkey` (PEM) are a client certificate for the server's `cert`
//! authentication. `sslmode=allow` (plain text first) is refused. Unlike
//! libpq, nothing is read from `~/.postgresql/`: what is trusted is what
//! the connection string names.
//!
//! A connection refused for its certificate says why, typed
//! ([`CertificateRefused`]).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`, as this crate reads it (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain text.
    Disable,
    /// TLS when the server offers it; the certificate is not checked.
    Prefer,
    /// TLS; the certificate is not checked.
    Require,
    /// TLS; the certificate's CA is checked, not its host name.
    VerifyCa,
    /// TLS; the certificate's CA and host name are checked.
    VerifyFull,
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        })
    }
}

/// Why the TLS settings of a connection string cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// `sslmode` is not one this crate knows.
    #[error("sslmode={0} is not disable, prefer, require, verify-ca or verify-full")]
    UnknownMode(String),
    /// `sslmode=allow` (plain text first, TLS if refused).
    #[error(
        "sslmode=allow (plain text first) is not supported: use prefer, require or verify-full"
    )]
    Allow,
    /// `sslrootcert=system` with a mode that does not check the host name.
    #[error(
        "sslrootcert=system needs sslmode=verify-full, not {0}: it would not check the host name"
    )]
    SystemNeedsVerifyFull(SslMode),
    /// The `sslrootcert` file cannot be read, or holds no certificate.
    #[error("sslrootcert {}: {message}", path.display())]
    Roots {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The machine's trusted CAs cannot be read.
    #[error("the system's trusted CAs cannot be read: {0}")]
    SystemRoots(String),
    /// Only one of `sslcert` and `sslkey`.
    #[error("sslcert and sslkey go together: {0} is missing")]
    HalfAPair(&'static str),
    /// The client certificate or its key cannot be read or used.
    #[error("{}: {message}", path.display())]
    ClientCertificate {
        /// The `sslcert` or `sslkey` file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Why the server's certificate was refused (the connection is not made).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CertificateRefused {
    /// Not signed by a trusted CA.
    #[error("the server's certificate is not signed by a trusted CA (trusted: {roots})")]
    UnknownIssuer {
        /// What was trusted (`the CA in /etc/toolhost/ca.pem`).
        roots: String,
    },
    /// Signed, but for another host name (`verify-full`).
    #[error(
        "the server's certificate is not valid for the host name `{host}` (sslmode=verify-full)"
    )]
    WrongName {
        /// The host connected to.
        host: String,
    },
    /// Refused for another reason (expired, not yet valid, …).
    #[error("the server's certificate is refused: {0}")]
    Other(String),
}

/// The TLS keys of a connection string, before they are used.
#[derive(Debug, Default)]
pub(crate) struct Settings {
    mode: Option<String>,
    root: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

impl Settings {
    /// Keeps `key = value` when it is one of the TLS keys; `false` if not.
    fn take(&mut self, key: &str, value: String) -> bool {
        let slot = match key {
            "sslmode" => &mut self.mode,
            "sslrootcert" => &mut self.root,
            "sslcert" => &mut self.cert,
            "sslkey" => &mut self.key,
            _ => return false,
        };
        *slot = Some(value);
        true
    }
}

/// A connection string that cannot be read; the text says why (it
/// becomes [`DatabaseError::Config`](crate::DatabaseError::Config)).
#[derive(Debug)]
pub(crate) struct Unreadable(pub(crate) String);

/// Takes the TLS keys out of a connection string (a `postgres://` URL's
/// query, or `key=value` pairs): the rest, for the driver, and them.
pub(crate) fn split(url: &str) -> Result<(String, Settings), Unreadable> {
    let mut settings = Settings::default();
    let url = url.trim();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((head, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), settings));
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8()
                    .map(std::borrow::Cow::into_owned)
                    .map_err(|e| Unreadable(format!("parameter `{key}`: {e}")))
            };
            if !settings.take(&decode(key)?, decode(value)?) {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            head.to_owned()
        } else {
            format!("{head}?{}", kept.join("&"))
        };
        return Ok((rest, settings));
    }
    let mut kept = Vec::new();
    for (key, value) in pairs(url)? {
        if !settings.take(&key, value.clone()) {
            kept.push(format!(
                "{key}='{}'",
                value.replace('\\', "\\\\").replace('\'', "\\'")
            ));
        }
    }
    Ok((kept.join(" "), settings))
}

/// The `key=value` pairs of a libpq connection string: values bare (up to
/// white space) or in single quotes, `\` escaping the next character in
/// both, as the driver reads them.
fn pairs(text: &str) -> Result<Vec<(String, String)>, Unreadable> {
    let bad = |what: &str| Unreadable(what.to_owned());
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(bad(&format!("expected `=` after `{key}`")));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    None => return Err(bad("unterminated quoted value")),
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
            if value.is_empty() {
                return Err(bad(&format!("no value for `{key}`")));
            }
        }
        out.push((key, value));
    }
}

/// Where trusted CAs come from.
enum Roots {
    /// `sslrootcert=system`, or a verifying mode without `sslrootcert`.
    System,
    /// `sslrootcert=PATH`.
    File(PathBuf),
    /// Nothing is checked (`prefer`, `require`).
    None,
}

/// The TLS of one connection: the mode, and the connector that makes it.
#[derive(Clone)]
pub(crate) struct Tls {
    mode: SslMode,
    connector: MakeRustlsConnect,
    /// What is trusted, in words.
    roots: String,
    /// The host name connected to, for messages.
    host: String,
}

impl Tls {
    /// The TLS that `settings` ask for, connecting as `config` says.
    pub(crate) fn new(
        settings: &Settings,
        config: &tokio_postgres::Config,
    ) -> Result<Tls, TlsError> {
        let system = settings.root.as_deref() == Some("system");
        let mode = match settings.mode.as_deref() {
            None if system => SslMode::VerifyFull,
            None if loopback(config) => SslMode::Prefer,
            None => SslMode::VerifyFull,
            Some("disable") => SslMode::Disable,
            Some("allow") => return Err(TlsError::Allow),
            Some("prefer") => SslMode::Prefer,
            Some("require") => SslMode::Require,
            Some("verify-ca") => SslMode::VerifyCa,
            Some("verify-full") => SslMode::VerifyFull,
            Some(other) => return Err(TlsError::UnknownMode(other.to_owned())),
        };
        if system && mode != SslMode::VerifyFull {
            return Err(TlsError::SystemNeedsVerifyFull(mode));
        }
        let roots = match (&settings.root, mode) {
            (Some(_), _) if system => Roots::System,
            (Some(path), _) => Roots::File(PathBuf::from(path)),
            (None, SslMode::VerifyCa | SslMode::VerifyFull) => Roots::System,
            (None, _) => Roots::None,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (store, described) = match &roots {
            Roots::None => (None, "nothing: the certificate is not checked".to_owned()),
            Roots::System => (Some(system_roots()?), "the system's CAs".to_owned()),
            Roots::File(path) => (
                Some(file_roots(path)?),
                format!("the CAs in {}", path.display()),
            ),
        };
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let verifier: Arc<dyn ServerCertVerifier> = match store {
            None => Arc::new(Unchecked(Arc::clone(&provider))),
            Some(store) => {
                let webpki = WebPkiServerVerifier::builder_with_provider(
                    Arc::new(store),
                    Arc::clone(&provider),
                )
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
                if mode == SslMode::VerifyFull {
                    webpki
                } else {
                    Arc::new(AnyName(webpki))
                }
            }
        };
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let client = match (&settings.cert, &settings.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(_), None) => return Err(TlsError::HalfAPair("sslkey")),
            (None, Some(_)) => return Err(TlsError::HalfAPair("sslcert")),
            (Some(cert), Some(key)) => {
                let (cert, key) = (PathBuf::from(cert), PathBuf::from(key));
                let bad = |path: &PathBuf| {
                    let path = path.clone();
                    move |e: rustls::pki_types::pem::Error| TlsError::ClientCertificate {
                        path,
                        message: e.to_string(),
                    }
                };
                let chain = CertificateDer::pem_file_iter(&cert)
                    .map_err(bad(&cert))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(bad(&cert))?;
                let key_der = PrivateKeyDer::from_pem_file(&key).map_err(bad(&key))?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    TlsError::ClientCertificate {
                        path: cert.clone(),
                        message: e.to_string(),
                    }
                })?
            }
        };
        Ok(Tls {
            mode,
            connector: MakeRustlsConnect::new(client),
            roots: described,
            host: host_name(config),
        })
    }

    /// The mode.
    pub(crate) fn mode(&self) -> SslMode {
        self.mode
    }

    /// The driver's own mode for it (the checks are the connector's).
    pub(crate) fn driver_mode(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }

    /// The connector for one attempt.
    pub(crate) fn connector(&self) -> MakeRustlsConnect {
        self.connector.clone()
    }

    /// Why the server's certificate was refused, if that is why `e`
    /// ended the attempt.
    pub(crate) fn refused(&self, e: &tokio_postgres::Error) -> Option<CertificateRefused> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(error) = source {
            let tls = error.downcast_ref::<rustls::Error>().or_else(|| {
                error
                    .downcast_ref::<std::io::Error>()
                    .and_then(std::io::Error::get_ref)
                    .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            });
            if let Some(rustls::Error::InvalidCertificate(why)) = tls {
                return Some(match why {
                    CertificateError::UnknownIssuer => CertificateRefused::UnknownIssuer {
                        roots: self.roots.clone(),
                    },
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => {
                        CertificateRefused::WrongName {
                            host: self.host.clone(),
                        }
                    }
                    other => CertificateRefused::Other(other.to_string()),
                });
            }
            source = error.source();
        }
        None
    }
}

/// Whether every host `config` names is this machine: a loopback address,
/// `localhost`, or a Unix socket.
fn loopback(config: &tokio_postgres::Config) -> bool {
    use tokio_postgres::config::Host;
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    (!hosts.is_empty() || !addrs.is_empty())
        && hosts.iter().all(|h| match h {
            Host::Unix(_) => true,
            Host::Tcp(name) => {
                name.eq_ignore_ascii_case("localhost")
                    || name
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
        })
        && addrs.iter().all(std::net::IpAddr::is_loopback)
}

/// The first host name, for messages.
fn host_name(config: &tokio_postgres::Config) -> String {
    match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(name)) => name.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    }
}

fn file_roots(path: &PathBuf) -> Result<RootCertStore, TlsError> {
    let bad = |message: String| TlsError::Roots {
        path: path.clone(),
        message,
    };
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| bad(e.to_string()))? {
        store
            .add(cert.map_err(|e| bad(e.to_string()))?)
            .map_err(|e| bad(e.to_string()))?;
    }
    if store.is_empty() {
        return Err(bad("no certificate in it".to_owned()));
    }
    Ok(store)
}

fn system_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut store = RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(found.certs);
    if added == 0 {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_owned(), ToString::to_string);
        return Err(TlsError::SystemRoots(why));
    }
    Ok(store)
}

/// `verify-ca`: the chain is checked as `verify-full` checks it, the host
/// name is not (webpki checks the chain first: a name refused means the
/// chain passed).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `prefer` and `require` without `sslrootcert`: any certificate (the
/// handshake's own signatures are still checked, so the session is with
/// whoever holds that certificate's key).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::DatabaseError;

    fn mode(url: &str) -> Result<SslMode, DatabaseError> {
        let (rest, settings) = split(url)?;
        let config: tokio_postgres::Config = rest.parse().unwrap();
        Ok(Tls::new(&settings, &config)?.mode())
    }

    #[test]
    fn the_tls_keys_are_taken_out_of_both_forms_and_the_rest_is_kept() {
        let (rest, s) = split(
            "postgresql://u:p%40ss@db.internal:6432/gate?sslmode=verify-full&application_name=th&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgresql://u:p%40ss@db.internal:6432/gate?application_name=th"
        );
        assert_eq!(s.mode.as_deref(), Some("verify-full"));
        assert_eq!(s.root.as_deref(), Some("/etc/ca.pem"));
        let (rest, s) = split(
            r"host=db.internal sslmode = require password='it\'s a \\ secret' sslcert=/c.pem sslkey='/k ey.pem' dbname=gate",
        )
        .unwrap();
        let config: tokio_postgres::Config = rest.parse().unwrap();
        assert_eq!(config.get_password(), Some(br"it's a \ secret".as_slice()));
        assert_eq!(config.get_dbname(), Some("gate"));
        assert_eq!(s.mode.as_deref(), Some("require"));
        assert_eq!(s.cert.as_deref(), Some("/c.pem"));
        assert_eq!(s.key.as_deref(), Some("/k ey.pem"));
        assert!(split("host=db sslmode").is_err());
        assert!(split("host='db").is_err());
    }

    #[test]
    fn plain_text_to_another_machine_is_only_by_saying_so() {
        assert_eq!(
            mode("postgresql://db.internal/gate").unwrap(),
            SslMode::VerifyFull
        );
        assert_eq!(
            mode("host=10.0.0.5 dbname=gate").unwrap(),
            SslMode::VerifyFull
        );
        assert_eq!(
            mode("postgresql://127.0.0.1/gate").unwrap(),
            SslMode::Prefer
        );
        assert_eq!(
            mode("postgresql://localhost/gate").unwrap(),
            SslMode::Prefer
        );
        assert_eq!(
            mode("postgresql://[::1]:5432/gate").unwrap(),
            SslMode::Prefer
        );
        assert_eq!(
            mode("host=/run/postgresql dbname=gate").unwrap(),
            SslMode::Prefer
        );
        // A loopback host name reached at another address is not loopback.
        assert_eq!(
            mode("host=localhost hostaddr=10.0.0.5 dbname=gate").unwrap(),
            SslMode::VerifyFull
        );
        assert_eq!(
            mode("postgresql://db.internal/gate?sslmode=disable").unwrap(),
            SslMode::Disable
        );
        assert_eq!(
            mode("postgresql://db.internal/gate?sslrootcert=system").unwrap(),
            SslMode::VerifyFull
        );
        assert!(matches!(
            mode("postgresql://db.internal/gate?sslmode=allow"),
            Err(DatabaseError::Tls(TlsError::Allow))
        ));
        assert!(matches!(
            mode("postgresql://db.internal/gate?sslmode=strict"),
            Err(DatabaseError::Tls(TlsError::UnknownMode(m))) if m == "strict"
        ));
        assert!(matches!(
            mode("postgresql://db.internal/gate?sslmode=require&sslrootcert=system"),
            Err(DatabaseError::Tls(TlsError::SystemNeedsVerifyFull(
                SslMode::Require
            )))
        ));
        assert!(matches!(
            mode("postgresql://db.internal/gate?sslrootcert=/no/such/ca.pem"),
            Err(DatabaseError::Tls(TlsError::Roots { .. }))
        ));
        assert!(matches!(
            mode("postgresql://db.internal/gate?sslcert=/c.pem"),
            Err(DatabaseError::Tls(TlsError::HalfAPair("sslkey")))
        ));
    }
}
