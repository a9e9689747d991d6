//! Who may use the console, and how a browser proves it on each request.
//!
//! - **Open** (no operator token configured): only when the server listens
//!   on loopback, as `/mcp` without tokens; the `Host` check in front (the
//!   MCP server's) keeps other sites' pages out (DNS rebinding).
//! - **Operator tokens**: the operator signs in once with a token whose role
//!   is `operator` (a caller's token is refused); the console sets a
//!   session cookie, `HttpOnly; SameSite=Strict; Path=/console`, that lasts
//!   12 hours. Sessions live in memory (at most 64; a restart signs
//!   everyone out).
//! - **Every state-changing request** (a `POST`) must carry the session's
//!   CSRF token in `X-CSRF-Token` (the page has it; another site cannot
//!   read it) and, when the browser sends an `Origin`, one of this server:
//!   its own `Host`, or an allowed origin.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use http::{HeaderMap, header};
use parking_lot::Mutex;

/// The session cookie's name.
pub const COOKIE: &str = "toolhost_console";
/// The header a state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Most signed-in sessions at once; signing in beyond evicts the oldest.
const MAX_SESSIONS: usize = 64;

/// A signed-in browser.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token its page sends with every `POST`.
    pub(crate) csrf: String,
    started: Instant,
}

/// The sign-in state of the console.
pub(crate) struct Access {
    /// The operator tokens; empty: the console is open (loopback only).
    operators: Vec<String>,
    /// Browser origins accepted besides the server's own.
    origins: Vec<String>,
    sessions: Mutex<HashMap<String, Session>>,
    /// The CSRF token of the open console (no sessions there).
    open_csrf: String,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not signed in: show the sign-in page (or 401 to a script).
    SignIn,
    /// A `POST` without the right CSRF token, or from another origin.
    Forbidden,
}

impl Access {
    pub(crate) fn new(operators: Vec<String>, origins: Vec<String>) -> Access {
        Access {
            operators,
            origins,
            sessions: Mutex::new(HashMap::new()),
            open_csrf: random_token(),
        }
    }

    /// Whether signing in is needed at all.
    pub(crate) fn is_open(&self) -> bool {
        self.operators.is_empty()
    }

    /// The session a request's cookie names (the open console's, when no
    /// token is configured).
    pub(crate) fn session(&self, headers: &HeaderMap) -> Result<Session, Refusal> {
        if self.is_open() {
            return Ok(Session {
                csrf: self.open_csrf.clone(),
                started: Instant::now(),
            });
        }
        let id = cookie(headers, COOKIE).ok_or(Refusal::SignIn)?;
        let mut sessions = self.sessions.lock();
        match sessions.get(id) {
            Some(s) if s.started.elapsed() < SESSION_TTL => Ok(s.clone()),
            Some(_) => {
                sessions.remove(id);
                Err(Refusal::SignIn)
            }
            None => Err(Refusal::SignIn),
        }
    }

    /// The session of a state-changing request: signed in, same origin,
    /// and the CSRF token of its session.
    pub(crate) fn session_for_change(&self, headers: &HeaderMap) -> Result<Session, Refusal> {
        if !self.same_origin(headers) {
            return Err(Refusal::Forbidden);
        }
        let session = self.session(headers)?;
        let given = headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if same(given.as_bytes(), session.csrf.as_bytes()) {
            Ok(session)
        } else {
            Err(Refusal::Forbidden)
        }
    }

    /// Signs in with `token`: a new session's cookie value, when it is an
    /// operator's token. Every token is compared, in time that does not
    /// tell which matched.
    pub(crate) fn sign_in(&self, headers: &HeaderMap, token: &str) -> Result<String, Refusal> {
        if !self.same_origin(headers) {
            return Err(Refusal::Forbidden);
        }
        let token = token.trim();
        let matched = self.operators.iter().fold(false, |found, t| {
            found | same(token.as_bytes(), t.as_bytes())
        });
        if !matched || token.is_empty() {
            return Err(Refusal::SignIn);
        }
        let id = random_token();
        let mut sessions = self.sessions.lock();
        sessions.retain(|_, s| s.started.elapsed() < SESSION_TTL);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.started)
                .map(|(k, _)| k.clone())
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            id.clone(),
            Session {
                csrf: random_token(),
                started: Instant::now(),
            },
        );
        Ok(id)
    }

    /// Ends the request's session.
    pub(crate) fn sign_out(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers, COOKIE) {
            self.sessions.lock().remove(id);
        }
    }

    /// Whether a browser's `Origin` (when it sent one) is this server (the
    /// request's own `Host`) or an allowed origin.
    fn same_origin(&self, headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN) else {
            // Not from a browser's cross-site request (browsers send
            // `Origin` on every POST); the CSRF token still decides.
            return true;
        };
        let Ok(origin) = origin.to_str() else {
            return false;
        };
        if self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin)) {
            return true;
        }
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        !host.is_empty() && authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
    }
}

/// The `Set-Cookie` value that signs a browser in.
pub(crate) fn session_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/console; Max-Age={}",
        SESSION_TTL.as_secs()
    )
}

/// The `Set-Cookie` value that signs a browser out.
pub(crate) fn cleared_cookie() -> String {
    format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0")
}

/// The value of cookie `name` in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty() && v.len() <= 128)
}

/// 32 random bytes, as hex.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // Without the system's randomness no safe token can be made: a
    // sign-in and a CSRF check then fail rather than use a guessable one.
    if getrandom::fill(&mut bytes).is_err() {
        tracing::error!("no system randomness: the console's tokens cannot be made");
        return String::new();
    }
    hex::encode(bytes)
}

/// Compares two secrets in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    !b.is_empty()
        && a.len() == b.len()
        && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn only_an_operator_token_signs_in_and_its_cookie_names_the_session() {
        let access = Access::new(vec!["op-secret".into()], Vec::new());
        let none = headers(&[("host", "127.0.0.1:1")]);
        assert_eq!(
            access.sign_in(&none, "caller-secret").err(),
            Some(Refusal::SignIn)
        );
        assert_eq!(access.sign_in(&none, "").err(), Some(Refusal::SignIn));
        let id = access.sign_in(&none, " op-secret ").unwrap();
        let signed = headers(&[("cookie", &format!("a=b; {COOKIE}={id}"))]);
        assert!(access.session(&signed).is_ok());
        assert_eq!(access.session(&none).err(), Some(Refusal::SignIn));
        access.sign_out(&signed);
        assert_eq!(access.session(&signed).err(), Some(Refusal::SignIn));
    }

    #[test]
    fn a_change_needs_the_sessions_csrf_token_and_the_servers_origin() {
        let access = Access::new(vec!["op".into()], Vec::new());
        let id = access.sign_in(&HeaderMap::new(), "op").unwrap();
        let csrf = access
            .session(&headers(&[("cookie", &format!("{COOKIE}={id}"))]))
            .unwrap()
            .csrf;
        let cookie = format!("{COOKIE}={id}");
        let ok = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            (CSRF_HEADER, &csrf),
        ]);
        assert!(access.session_for_change(&ok).is_ok());
        let no_token = headers(&[("cookie", &cookie), ("host", "127.0.0.1:8080")]);
        assert_eq!(
            access.session_for_change(&no_token).err(),
            Some(Refusal::Forbidden)
        );
        let elsewhere = headers(&[
            ("cookie", &cookie),
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
            (CSRF_HEADER, &csrf),
        ]);
        assert_eq!(
            access.session_for_change(&elsewhere).err(),
            Some(Refusal::Forbidden)
        );
    }

    #[test]
    fn the_open_console_still_needs_its_csrf_token() {
        let access = Access::new(Vec::new(), Vec::new());
        let csrf = access.session(&HeaderMap::new()).unwrap().csrf;
        assert_eq!(csrf.len(), 64);
        assert_eq!(
            access
                .session_for_change(&headers(&[(CSRF_HEADER, "guess")]))
                .err(),
            Some(Refusal::Forbidden)
        );
        assert!(
            access
                .session_for_change(&headers(&[(CSRF_HEADER, &csrf)]))
                .is_ok()
        );
    }

    #[test]
    fn sessions_are_bounded() {
        let access = Access::new(vec!["op".into()], Vec::new());
        for _ in 0..(MAX_SESSIONS * 2) {
            access.sign_in(&HeaderMap::new(), "op").unwrap();
        }
        assert!(access.sessions.lock().len() <= MAX_SESSIONS);
    }
}
