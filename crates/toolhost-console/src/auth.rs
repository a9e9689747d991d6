//! Who may use the console, and how a browser proves it on each request.
//!
//! - **Always an operator**: the console opens only to someone who signed
//!   in with an operator's token (a line with `role=operator` in the token
//!   file; a caller's token is refused). When none is configured (a
//!   loopback server without tokens), the console makes a one-time token
//!   when it starts ([`Console::sign_in_token`](crate::Console::sign_in_token)),
//!   which `host serve` prints to its terminal as a sign-in link
//!   (`/console?token=…`), as Jupyter does: a local process that can reach
//!   the port, such as an MCP client, cannot answer its own asks.
//! - **A session**: signing in sets a session cookie, `HttpOnly;
//!   SameSite=Strict; Path=/console`, that lasts 12 hours. Sessions live in
//!   memory (at most 64; a restart signs everyone out).
//! - **Every state-changing request** (a `POST`) must carry the session's
//!   CSRF token in `X-CSRF-Token` (the page has it; another site cannot
//!   read it) and, when the browser sends an `Origin`, one of this server:
//!   its own `Host`, or an allowed origin.
//!
//! The handlers ask for these as extractors: [`Session`] (signed in),
//! [`Change`] (signed in, same origin, the session's CSRF token) and
//! [`SameOrigin`] (the sign-in form); a request that fails one is answered
//! with its [`Refusal`]. Cookies are read and written with `axum-extra`'s
//! jar, secrets compared in constant time with `subtle`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum_extra::extract::cookie::{Cookie, CookieJar, SameSite};
use parking_lot::Mutex;
use subtle::ConstantTimeEq;

use crate::Console;

/// The session cookie's name.
pub const COOKIE: &str = "toolhost_console";
/// The header a state-changing request carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a sign-in lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Most signed-in sessions at once; signing in beyond evicts the oldest.
const MAX_SESSIONS: usize = 64;
/// The longest session id read from a cookie.
const MAX_SESSION_ID: usize = 128;

/// A signed-in browser (an extractor: a request without a live session is
/// refused with [`Refusal::SignIn`]).
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// The token its page sends with every `POST`.
    pub(crate) csrf: String,
    started: Instant,
}

/// A state-changing request (an extractor): from this server's origin,
/// signed in, carrying its session's CSRF token; else [`Refusal`].
pub(crate) struct Change;

/// A request from this server's own origin, or one it accepts (an
/// extractor, for the sign-in form); else [`Refusal::Forbidden`].
pub(crate) struct SameOrigin;

/// Why a request was refused; answers it (401 or 403, in words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not signed in: show the sign-in page (or 401 to a script).
    SignIn,
    /// A `POST` without the right CSRF token, or from another origin.
    Forbidden,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::SignIn => {
                (StatusCode::UNAUTHORIZED, "sign in to the console first\n").into_response()
            }
            Refusal::Forbidden => (
                StatusCode::FORBIDDEN,
                "refused: a change needs the page's CSRF token and this server's origin\n",
            )
                .into_response(),
        }
    }
}

impl FromRequestParts<Console> for Session {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Refusal> {
        console
            .inner
            .access
            .session(&CookieJar::from_headers(&parts.headers))
    }
}

impl FromRequestParts<Console> for Change {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Refusal> {
        let access = &console.inner.access;
        if !access.same_origin(&parts.headers) {
            return Err(Refusal::Forbidden);
        }
        let session = access.session(&CookieJar::from_headers(&parts.headers))?;
        let given = parts
            .headers
            .get(CSRF_HEADER)
            .map(axum::http::HeaderValue::as_bytes)
            .unwrap_or_default();
        if same(given, session.csrf.as_bytes()) {
            Ok(Change)
        } else {
            Err(Refusal::Forbidden)
        }
    }
}

impl FromRequestParts<Console> for SameOrigin {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Refusal> {
        if console.inner.access.same_origin(&parts.headers) {
            Ok(SameOrigin)
        } else {
            Err(Refusal::Forbidden)
        }
    }
}

/// The sign-in state of the console.
pub(crate) struct Access {
    /// The operator tokens (never empty: one is made when none is given).
    operators: Vec<String>,
    /// The token this console made, when none was given.
    made: Option<String>,
    /// Browser origins accepted besides the server's own.
    origins: Vec<String>,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Access {
    /// Access for `operators`; with none, for a one-time token made now.
    pub(crate) fn new(operators: Vec<String>, origins: Vec<String>) -> Access {
        let operators: Vec<String> = operators.into_iter().filter(|t| !t.is_empty()).collect();
        let made = operators.is_empty().then(random_token);
        Access {
            operators: made.iter().cloned().chain(operators).collect(),
            made,
            origins,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The one-time operator token this console made, when none was
    /// configured.
    pub(crate) fn made_token(&self) -> Option<&str> {
        self.made.as_deref()
    }

    /// The session `jar`'s cookie names.
    fn session(&self, jar: &CookieJar) -> Result<Session, Refusal> {
        let id = session_id(jar).ok_or(Refusal::SignIn)?;
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

    /// Signs in with `token`: `jar` with a new session's cookie, when it
    /// is an operator's token. Every token is compared, in time that does
    /// not tell which matched.
    pub(crate) fn sign_in(&self, jar: CookieJar, token: &str) -> Result<CookieJar, Refusal> {
        let token = token.trim();
        let matched = self.operators.iter().fold(false, |found, t| {
            found | same(token.as_bytes(), t.as_bytes())
        });
        let id = random_token();
        if !matched || token.is_empty() || id.is_empty() {
            return Err(Refusal::SignIn);
        }
        let csrf = random_token();
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
                csrf,
                started: Instant::now(),
            },
        );
        Ok(jar.add(session_cookie(id)))
    }

    /// Ends `jar`'s session: `jar` with its cookie cleared.
    pub(crate) fn sign_out(&self, jar: CookieJar) -> CookieJar {
        if let Some(id) = session_id(&jar) {
            self.sessions.lock().remove(id);
        }
        jar.remove(session_cookie(String::new()))
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

/// The session cookie, holding `id`: `HttpOnly; SameSite=Strict;
/// Path=/console`, for [`SESSION_TTL`].
fn session_cookie(id: String) -> Cookie<'static> {
    Cookie::build((COOKIE, id))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/console")
        .max_age(cookie::time::Duration::seconds(
            i64::try_from(SESSION_TTL.as_secs()).unwrap_or(i64::MAX),
        ))
        .build()
}

/// The session id in `jar`'s cookie, when it looks like one.
fn session_id(jar: &CookieJar) -> Option<&str> {
    jar.get(COOKIE)
        .map(Cookie::value)
        .filter(|v| !v.is_empty() && v.len() <= MAX_SESSION_ID)
}

/// 32 random bytes, as hex; empty without the system's randomness.
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

/// Whether two secrets are equal, in time that does not depend on where
/// they differ (`subtle`); an empty secret equals nothing.
fn same(given: &[u8], secret: &[u8]) -> bool {
    !secret.is_empty() && bool::from(given.ct_eq(secret))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// The session cookie `jar` sets, as a request's `Cookie` header.
    fn cookie_of(jar: &CookieJar) -> String {
        let c = jar.get(COOKIE).expect("a session cookie");
        format!("a=b; {}={}", c.name(), c.value())
    }

    fn jar(pairs: &[(&'static str, &str)]) -> CookieJar {
        CookieJar::from_headers(&headers(pairs))
    }

    #[test]
    fn only_an_operator_token_signs_in_and_its_cookie_names_the_session() {
        let access = Access::new(vec!["op-secret".into()], Vec::new());
        assert_eq!(access.made_token(), None);
        assert_eq!(
            access.sign_in(jar(&[]), "caller-secret").err(),
            Some(Refusal::SignIn)
        );
        assert_eq!(access.sign_in(jar(&[]), "").err(), Some(Refusal::SignIn));
        let signed = access.sign_in(jar(&[]), " op-secret ").unwrap();
        let cookie = cookie_of(&signed);
        let set = signed.get(COOKIE).unwrap();
        assert_eq!(set.http_only(), Some(true));
        assert_eq!(set.same_site(), Some(SameSite::Strict));
        assert_eq!(set.path(), Some("/console"));
        let request = jar(&[("cookie", &cookie)]);
        assert!(access.session(&request).is_ok());
        assert_eq!(access.session(&jar(&[])).err(), Some(Refusal::SignIn));
        let cleared = access.sign_out(request.clone());
        assert_eq!(access.session(&request).err(), Some(Refusal::SignIn));
        assert_eq!(cleared.get(COOKIE).map(Cookie::value), None);
    }

    #[test]
    fn without_an_operator_token_the_console_makes_one_and_still_needs_a_sign_in() {
        let access = Access::new(Vec::new(), Vec::new());
        let made = access.made_token().expect("a one-time token").to_owned();
        assert_eq!(made.len(), 64);
        assert_eq!(access.session(&jar(&[])).err(), Some(Refusal::SignIn));
        assert_eq!(
            access.sign_in(jar(&[]), "guess").err(),
            Some(Refusal::SignIn)
        );
        let signed = access.sign_in(jar(&[]), &made).unwrap();
        assert!(
            access
                .session(&jar(&[("cookie", &cookie_of(&signed))]))
                .is_ok()
        );
        // Two consoles make two tokens.
        assert_ne!(
            Access::new(Vec::new(), Vec::new()).made_token(),
            Some(&*made)
        );
    }

    #[test]
    fn the_origin_must_be_this_server_or_an_accepted_one() {
        let access = Access::new(vec!["op".into()], vec!["https://ops.example".into()]);
        for (origin, ok) in [
            (None, true),
            (Some("http://127.0.0.1:8080"), true),
            (Some("https://ops.example"), true),
            (Some("http://evil.example"), false),
            (Some("null"), false),
        ] {
            let mut pairs = vec![("host", "127.0.0.1:8080")];
            pairs.extend(origin.map(|o| ("origin", o)));
            assert_eq!(access.same_origin(&headers(&pairs)), ok, "{origin:?}");
        }
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abd", b"abc"));
        assert!(!same(b"ab", b"abc"));
        assert!(!same(b"", b""));
    }

    #[test]
    fn sessions_are_bounded() {
        let access = Access::new(vec!["op".into()], Vec::new());
        for _ in 0..(MAX_SESSIONS * 2) {
            let _ = access.sign_in(jar(&[]), "op").unwrap();
        }
        assert!(access.sessions.lock().len() <= MAX_SESSIONS);
    }
}
