//! A real authorization server for the OAuth tests: `oidc-provider` (npm,
//! OpenID Certified), which `cargo xtask test` installs under
//! `target/tools/oidc/`, run with `oidc/provider.mjs` (this crate's) on a
//! free loopback port. The test gives its configuration as JSON (all
//! optional):
//!
//! - `resource`: the resource server's URL (RFC 8707), the `aud` of its
//!   tokens; or `resource_pattern`, a regular expression for a server
//!   whose port is not known when the provider starts;
//! - `scopes`: the resource's scopes (`openid` and `offline_access` are
//!   always there);
//! - `clients`: pre-registered clients, as `oidc-provider` takes them
//!   ([`OidcProvider::machine_client`],
//!   [`OidcProvider::introspecting_client`], or any client metadata);
//!   clients may also register themselves (RFC 7591);
//! - `opaque_clients`: the clients whose access tokens are opaque (checked
//!   through introspection) rather than JWTs (RS256);
//! - `groups`: `{"account or client id": ["group", …]}`, put in the
//!   access tokens' `groups` claim;
//! - `access_token_ttl`: seconds (default 300), to test expiry and refresh;
//! - `refresh_tokens`: `true` to issue refresh tokens to every client that
//!   may refresh ([`OidcProvider::grants`] lists the tokens issued, by
//!   grant type);
//! - `subject`: who signs in when an authorization request carries no
//!   `login_hint` (default `alice`).
//!
//! [`OidcProvider::requests`] lists every request it was sent (`POST
//! /token`), so a test can show that nothing reached it.
//!
//! The consent is scripted: a browser that follows the redirects from an
//! authorization URL (keeping the cookies it is given) until it is sent to
//! the client's redirect URI gets the code, with no page shown.
//!
//! ```no_run
//! use toolhost_test_support::oidc::OidcProvider;
//!
//! let idp = OidcProvider::start(serde_json::json!({
//!     "resource": "http://127.0.0.1:8080/mcp",
//!     "scopes": ["tools"],
//!     "clients": [OidcProvider::machine_client("bot", "bot-secret")],
//! }));
//! let token = idp.client_credentials("bot", "bot-secret", "http://127.0.0.1:8080/mcp", "tools");
//! # let _ = token;
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use serde_json::{Value, json};

/// Where `oidc-provider` is installed under `target/tools/`
/// (`xtask/src/outside.rs`).
pub const OIDC_PROVIDER_DIR: &str = "oidc";

/// A running `oidc-provider`; stopped when dropped.
pub struct OidcProvider {
    child: Child,
    /// Its issuer identifier (`http://127.0.0.1:PORT`).
    pub issuer: String,
    files: Vec<PathBuf>,
    grants: Arc<Mutex<Vec<String>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// The Node that runs it: the Node 22 `cargo xtask test` installs
/// (`TOOLHOST_TEST_NODE22`), else the machine's `node`.
fn node() -> PathBuf {
    std::env::var_os("TOOLHOST_TEST_NODE22").map_or_else(|| PathBuf::from("node"), PathBuf::from)
}

impl OidcProvider {
    /// A pre-registered client for the client-credentials grant, which
    /// sends its secret in the form (`client_secret_post`).
    pub fn machine_client(id: &str, secret: &str) -> Value {
        json!({
            "client_id": id,
            "client_secret": secret,
            "grant_types": ["client_credentials"],
            "redirect_uris": [],
            "response_types": [],
            "token_endpoint_auth_method": "client_secret_post",
        })
    }

    /// A pre-registered client that only introspects (HTTP Basic).
    pub fn introspecting_client(id: &str, secret: &str) -> Value {
        json!({
            "client_id": id,
            "client_secret": secret,
            "grant_types": [],
            "redirect_uris": [],
            "response_types": [],
        })
    }

    /// Starts the provider with `config` (see the module docs) and waits
    /// until it listens. Fails the test, saying how to install it, when
    /// `oidc-provider` is missing.
    pub fn start(config: Value) -> OidcProvider {
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let modules = crate::outside_tool(&format!(
            "{OIDC_PROVIDER_DIR}/node_modules/oidc-provider/package.json"
        ));
        // The script beside the installed module, so that its import
        // finds it.
        let dir = modules
            .parent()
            .and_then(|p| p.parent())
            .and_then(|p| p.parent())
            .expect("the oidc tools directory")
            .to_owned();
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let script = dir.join(format!("provider-{}-{n}.mjs", std::process::id()));
        std::fs::copy(
            crate::root().join("crates/toolhost-test-support/oidc/provider.mjs"),
            &script,
        )
        .expect("copy provider.mjs");
        let config_file = dir.join(format!("config-{}-{n}.json", std::process::id()));
        std::fs::write(&config_file, config.to_string()).expect("write the provider's config");
        let mut child = Command::new(node())
            .arg(&script)
            .arg(&config_file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs oidc-provider");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let issuer = match lines.next() {
            Some(Ok(line)) if line.starts_with("listening on ") => {
                line["listening on ".len()..].trim().to_owned()
            }
            other => {
                let mut err = String::new();
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                let _ = child.kill();
                panic!("oidc-provider did not start: {other:?}\n{err}");
            }
        };
        // Keep reading its output (so it never blocks on a full pipe),
        // noting the grants.
        let grants = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (noted, asked) = (grants.clone(), requests.clone());
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let (list, item) = if let Some(grant) = line.strip_prefix("grant ") {
                    (&noted, grant)
                } else if let Some(request) = line.strip_prefix("request ") {
                    (&asked, request)
                } else {
                    continue;
                };
                list.lock().push(item.to_owned());
            }
        });
        if let Some(stderr) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if !line.contains("WARNING") && !line.contains("NOTICE") {
                        eprintln!("oidc-provider: {line}");
                    }
                }
            });
        }
        OidcProvider {
            child,
            issuer,
            files: vec![script, config_file],
            grants,
            requests,
        }
    }

    /// Every request it was sent so far, in order, as `METHOD PATH`
    /// (`GET /.well-known/openid-configuration`, `POST /token`).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().clone()
    }

    /// The grant type of every token issued so far, in order
    /// (`authorization_code`, `refresh_token`, `client_credentials`).
    pub fn grants(&self) -> Vec<String> {
        self.grants.lock().clone()
    }

    /// An access token for `resource` with `scope` from the
    /// client-credentials grant of the machine client `id`.
    pub fn client_credentials(
        &self,
        id: &str,
        secret: &str,
        resource: &str,
        scope: &str,
    ) -> String {
        let (status, body) = self.post_form(
            "/token",
            &[
                ("grant_type", "client_credentials"),
                ("client_id", id),
                ("client_secret", secret),
                ("resource", resource),
                ("scope", scope),
            ],
        );
        assert_eq!(status, 200, "the token request: {body}");
        let answer: Value = serde_json::from_str(&body).expect("a JSON token response");
        answer["access_token"]
            .as_str()
            .expect("an access token")
            .to_owned()
    }

    /// POSTs a form to `path` of the provider; returns the status and body.
    pub fn post_form(&self, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let body: Vec<String> = form
            .iter()
            .map(|(k, v)| format!("{}={}", percent(k), percent(v)))
            .collect();
        let body = body.join("&");
        let authority = self.issuer.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(authority).expect("connect to oidc-provider");
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            unchunk(body)
        } else {
            body.to_owned()
        };
        (status, body)
    }
}

/// Percent-encodes a form value.
fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The body of a chunked HTTP/1.1 response.
fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}
