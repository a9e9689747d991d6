//! The redirect of an interactive sign-in, received on the loopback
//! interface (RFC 8252 §7.3): `http://127.0.0.1:PORT/callback` answers the
//! browser once, with the authorization code of the sign-in it started
//! (its `state` must match; any other request is refused and ignored), and
//! stops.

use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::Html;
use serde::Deserialize;
use tokio::sync::mpsc;

/// What the authorization server sent back.
#[derive(Debug)]
pub(crate) struct Callback {
    pub code: String,
    pub state: String,
    /// RFC 9207's `iss`, when the server sends it.
    pub issuer: Option<String>,
}

#[derive(Deserialize)]
struct Params {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// A listener for one redirect.
pub(crate) struct Loopback {
    listener: tokio::net::TcpListener,
    redirect_uri: String,
}

impl Loopback {
    /// Listens on 127.0.0.1 at `port` (any free port when `None` or 0).
    pub(crate) async fn bind(port: Option<u16>) -> std::io::Result<Loopback> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).await?;
        let port = listener.local_addr()?.port();
        Ok(Loopback {
            listener,
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }

    /// The redirect URI to register and send.
    pub(crate) fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits (at most `timeout`) for the redirect whose `state` is `state`.
    pub(crate) async fn wait(self, state: &str, timeout: Duration) -> Result<Callback, String> {
        let (tx, mut rx) = mpsc::channel::<Result<Callback, String>>(1);
        let app = axum::Router::new()
            .route("/callback", axum::routing::get(callback))
            .with_state((tx, state.to_owned()));
        let server = axum::serve(self.listener, app);
        let answer = tokio::time::timeout(timeout, async {
            tokio::select! {
                got = rx.recv() => got.unwrap_or_else(|| Err("the sign-in page went away".into())),
                served = server => Err(match served {
                    Ok(()) => "the sign-in listener stopped".into(),
                    Err(e) => format!("the sign-in listener failed: {e}"),
                }),
            }
        })
        .await;
        answer.unwrap_or_else(|_| {
            Err(format!(
                "nobody finished signing in within {} s",
                timeout.as_secs()
            ))
        })
    }
}

type Shared = (mpsc::Sender<Result<Callback, String>>, String);

async fn callback(
    State((tx, expected)): State<Shared>,
    Query(params): Query<Params>,
) -> (http::StatusCode, Html<String>) {
    // Another page's request (a guess, a stale tab) changes nothing.
    if params.state.as_deref() != Some(expected.as_str()) {
        return (
            http::StatusCode::BAD_REQUEST,
            Html(page("This is not the sign-in toolhost is waiting for.")),
        );
    }
    if let Some(error) = params.error {
        let why = match params.error_description {
            Some(d) => format!("{error}: {d}"),
            None => error,
        };
        let why = toolhost_text::line(&why, 300);
        let _ = tx.try_send(Err(format!("the authorization server refused: {why}")));
        return (
            http::StatusCode::OK,
            Html(page("Sign-in refused. You can close this tab.")),
        );
    }
    let Some(code) = params.code else {
        return (
            http::StatusCode::BAD_REQUEST,
            Html(page("The redirect carries no authorization code.")),
        );
    };
    let _ = tx.try_send(Ok(Callback {
        code,
        state: expected,
        issuer: params.iss,
    }));
    (
        http::StatusCode::OK,
        Html(page(
            "Signed in. You can close this tab and go back to toolhost.",
        )),
    )
}

fn page(text: &str) -> String {
    format!(
        "<!doctype html><meta charset=utf-8><title>toolhost</title><p style=\"font: 16px sans-serif; margin: 3em\">{text}</p>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(url: &str) -> u16 {
        reqwest::Client::new()
            .get(url)
            .send()
            .await
            .map_or(0, |r| r.status().as_u16())
    }

    #[tokio::test]
    async fn only_the_redirect_with_the_sign_ins_state_is_taken() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let loopback = Loopback::bind(None).await.unwrap();
        let uri = loopback.redirect_uri().to_owned();
        assert!(uri.starts_with("http://127.0.0.1:"));
        let waiting =
            tokio::spawn(async move { loopback.wait("s1", Duration::from_secs(10)).await });
        assert_eq!(get(&format!("{uri}?code=forged&state=other")).await, 400);
        assert_eq!(
            get(&format!("{uri}?code=c1&state=s1&iss=https://as")).await,
            200
        );
        let callback = waiting.await.unwrap().unwrap();
        assert_eq!(
            (callback.code.as_str(), callback.issuer.as_deref()),
            ("c1", Some("https://as"))
        );
    }

    #[tokio::test]
    async fn a_refusal_says_why_and_silence_times_out() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let loopback = Loopback::bind(None).await.unwrap();
        let uri = loopback.redirect_uri().to_owned();
        let waiting =
            tokio::spawn(async move { loopback.wait("s1", Duration::from_secs(10)).await });
        get(&format!(
            "{uri}?error=access_denied&error_description=no&state=s1"
        ))
        .await;
        let why = waiting.await.unwrap().unwrap_err();
        assert!(why.contains("access_denied: no"), "{why}");
        let quiet = Loopback::bind(None).await.unwrap();
        let why = quiet
            .wait("s", Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(why.contains("within 0 s"), "{why}");
    }
}
