//! The resource server's way out: bounded HTTP requests to the
//! authorization server (its metadata, its keys, its introspection
//! endpoint). HTTPS, or plain HTTP to a loopback address only; no
//! redirects; a time limit on the whole request and a byte limit on the
//! answer, which must be JSON.

use std::time::Duration;

use serde_json::Value;

use super::OAuthError;

/// How long one request to the authorization server may take.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from the authorization server (its metadata,
/// its key set, an introspection answer).
pub(crate) const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// A client for the authorization server's endpoints.
#[derive(Clone)]
pub(crate) struct Fetcher {
    client: reqwest::Client,
}

impl Fetcher {
    pub(crate) fn new() -> Result<Fetcher, OAuthError> {
        // HTTPS through rustls with ring; a provider installed before stays.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("toolhost/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| OAuthError::Config(format!("cannot make an HTTP client: {e}")))?;
        Ok(Fetcher { client })
    }

    /// GETs `url` and reads its JSON answer.
    pub(crate) async fn get_json(&self, url: &url::Url) -> Result<Value, OAuthError> {
        let request = self
            .client
            .get(url.clone())
            .header(http::header::ACCEPT, "application/json");
        self.send(url, request).await
    }

    /// POSTs `form` (`application/x-www-form-urlencoded`) to `url` with
    /// HTTP Basic client authentication, and reads its JSON answer.
    pub(crate) async fn post_form(
        &self,
        url: &url::Url,
        form: &[(&str, &str)],
        (client_id, secret): (&str, &str),
    ) -> Result<Value, OAuthError> {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        // RFC 6749, 2.3.1: the id and secret are form-encoded before Basic.
        let encode =
            |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let request = self
            .client
            .post(url.clone())
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .basic_auth(encode(client_id), Some(encode(secret)))
            .body(body);
        self.send(url, request).await
    }

    async fn send(
        &self,
        url: &url::Url,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, OAuthError> {
        let unreachable = |why: String| OAuthError::Unreachable {
            url: shown_url(url),
            why,
        };
        let mut response = request
            .send()
            .await
            .map_err(|e| unreachable(without_url(&e)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(unreachable(format!("HTTP {}", status.as_u16())));
        }
        if response
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
        {
            return Err(unreachable(format!(
                "the answer is over {MAX_ANSWER_BYTES} bytes"
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unreachable(without_url(&e)))?
        {
            if body.len().saturating_add(chunk.len()) > MAX_ANSWER_BYTES {
                return Err(unreachable(format!(
                    "the answer is over {MAX_ANSWER_BYTES} bytes"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|e| unreachable(format!("not JSON: {e}")))
    }
}

/// A reqwest error without its URL (shown once, by the caller).
fn without_url(e: &reqwest::Error) -> String {
    use std::error::Error;
    let mut text = if e.is_timeout() {
        "timed out".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        "request failed".to_owned()
    };
    if let Some(source) = e.source().and_then(|s| s.source()) {
        text.push_str(&format!(
            ": {}",
            toolhost_text::line(&source.to_string(), 200)
        ));
    }
    text
}

/// `url` without its query and fragment, for messages.
pub(crate) fn shown_url(url: &url::Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    toolhost_text::line(shown.as_str(), 300)
}

/// Parses `text` as a URL the resource server may fetch: HTTPS, or HTTP to
/// a loopback host (an authorization server on the same machine, a test's).
pub(crate) fn endpoint(what: &str, text: &str) -> Result<url::Url, OAuthError> {
    let url = url::Url::parse(text).map_err(|e| {
        OAuthError::Config(format!(
            "{what} `{}` is not a URL: {e}",
            toolhost_text::line(text, 200)
        ))
    })?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(OAuthError::Config(format!(
            "{what} `{}` must be https (plain http only to a loopback address)",
            shown_url(&url)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        assert!(endpoint("x", "https://login.example.com/jwks").is_ok());
        assert!(endpoint("x", "http://127.0.0.1:8080/jwks").is_ok());
        assert!(endpoint("x", "http://[::1]:8080/jwks").is_ok());
        assert!(endpoint("x", "http://localhost/jwks").is_ok());
        assert!(endpoint("x", "http://login.example.com/jwks").is_err());
        assert!(endpoint("x", "file:///etc/passwd").is_err());
        assert!(endpoint("x", "not a url").is_err());
    }
}
