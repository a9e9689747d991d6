//! The HTTP transport under both wire formats: the `reqwest` client,
//! retries with backoff, timeouts, cancellation, bounded bodies and the
//! server-sent-event framing. (Its public items are also reachable as
//! `toolhost_providers::retry`, its old name.)
//!
//! Every HTTP request goes through `send`: transient failures (HTTP 429,
//! 5xx, connection errors and timeouts before the response headers) are
//! retried with exponential backoff and jitter, honouring `Retry-After`;
//! other statuses (400, 401, 404, ...) fail at once. Once a response
//! streams, nothing is retried (deltas already reached the user): a stream
//! silent for longer than [`RetryPolicy::idle_timeout`] fails with
//! [`ProviderError::Timeout`]. What is done with a successful response is
//! the exchange's (`exchange.rs`).
//!
//! ```
//! use std::time::Duration;
//! use toolhost_providers::transport::RetryPolicy;
//!
//! let policy = RetryPolicy {
//!     max_attempts: 3,
//!     jitter: false,
//!     idle_timeout: Duration::from_secs(30),
//!     ..RetryPolicy::default()
//! };
//! assert_eq!(policy.backoff(1, None), Duration::from_secs(1));
//! assert_eq!(policy.backoff(2, None), Duration::from_secs(2));
//! // `Retry-After` wins, bounded by `max_backoff`.
//! assert_eq!(policy.backoff(1, Some(Duration::from_secs(90))), Duration::from_secs(30));
//! ```

use std::pin::Pin;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, Response};
use tokio_util::sync::CancellationToken;

use super::ProviderError;

/// The longest body excerpt kept in error messages, in characters.
pub const BODY_EXCERPT_CHARS: usize = 500;

/// How an HTTP provider retries and times out.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included (at least 1; default 4).
    pub max_attempts: u32,
    /// Delay before the first retry; doubled for each further one (default 1 s).
    pub initial_backoff: Duration,
    /// Upper bound of one delay, `Retry-After` included (default 30 s).
    pub max_backoff: Duration,
    /// Whether delays get random jitter (default on: half to all of the delay).
    pub jitter: bool,
    /// Connecting to the server (default 10 s).
    pub connect_timeout: Duration,
    /// Until the response headers arrive; for a non-streaming request until
    /// the whole body has arrived (default 300 s).
    pub request_timeout: Duration,
    /// The longest silence allowed while a response streams (default 90 s).
    pub idle_timeout: Duration,
    /// The most bytes one response may have, streamed or whole (default
    /// 32 MiB): the text, the tool calls' arguments and the stream's own
    /// framing are all made of them, so this bounds each. Past it the
    /// response is refused (not retried).
    pub max_response_bytes: usize,
}

/// The default [`RetryPolicy::max_response_bytes`].
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// The most of an error response's body that is read (only an excerpt of
/// it is ever shown).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            jitter: true,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            idle_timeout: Duration::from_secs(90),
        }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1 for the first retry), given
    /// the server's `Retry-After`, if any. Never more than `max_backoff`.
    pub fn backoff(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(self.max_backoff);
        }
        let factor = 1u32 << retry.saturating_sub(1).min(20);
        let full = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        if self.jitter && !full.is_zero() {
            // Half the delay, plus a random part of the other half.
            full / 2 + full.mul_f64(fastrand::f64() / 2.0)
        } else {
            full
        }
    }
}

/// Builds the `reqwest` client every HTTP provider uses.
pub(crate) fn http_client(policy: &RetryPolicy) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .connect_timeout(policy.connect_timeout)
        .user_agent(concat!("toolhost-agent/", env!("CARGO_PKG_VERSION")));
    match builder.build() {
        Ok(c) => c,
        Err(e) => {
            // Only fails when the TLS backend cannot initialise; fall back to
            // the defaults rather than failing the provider's constructor.
            tracing::warn!(error = %e, "cannot build the configured HTTP client; using defaults");
            reqwest::Client::new()
        }
    }
}

/// Runs `fut` unless `cancel` fires first.
pub(crate) async fn cancellable<T>(
    cancel: &CancellationToken,
    fut: impl Future<Output = T>,
) -> Result<T, ProviderError> {
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ProviderError::Cancelled),
        v = fut => Ok(v),
    }
}

/// Whether an HTTP status is worth retrying.
pub fn is_retryable_status(status: u16) -> bool {
    status == 429 || status == 408 || (500..=599).contains(&status)
}

/// The first [`BODY_EXCERPT_CHARS`] characters of `body` (a server's
/// words), on one line and made safe to show ([`toolhost_text::line`]):
/// the excerpt reaches error messages, logs and the terminal.
pub fn excerpt(body: &str) -> String {
    toolhost_text::line(body, BODY_EXCERPT_CHARS)
}

/// An error with its chain of causes, on one line.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        source = cause.source();
    }
    s
}

/// The wait a server asks for: `retry-after-ms` (milliseconds), or
/// `Retry-After` as seconds or as an HTTP date (RFC 9110), relative to
/// `now`. Outside input: a number too large for a [`Duration`] is
/// `Duration::MAX` (then capped by [`RetryPolicy::backoff`]), never a panic;
/// a date in the past is no wait; anything unreadable is `None`.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let seconds = |value: f64| {
        (value.is_finite() && value >= 0.0)
            .then(|| Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX))
    };
    if let Some(wait) = header("retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(|ms| seconds(ms / 1000.0))
    {
        return Some(wait);
    }
    let value = header(reqwest::header::RETRY_AFTER.as_str())?;
    match value.parse::<f64>() {
        Ok(secs) => seconds(secs),
        Err(_) => {
            let at = httpdate::parse_http_date(value).ok()?;
            Some(at.duration_since(now).unwrap_or(Duration::ZERO))
        }
    }
}

/// Sends the request `make` builds, retrying transient failures, and returns
/// the first successful response (its body not read yet).
pub(crate) async fn send(
    provider: &str,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
    make: &(dyn Fn() -> RequestBuilder + Send + Sync),
) -> Result<Response, ProviderError> {
    let attempts = policy.max_attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let last = attempt >= attempts;
        let sent = cancellable(
            cancel,
            tokio::time::timeout(policy.request_timeout, make().send()),
        )
        .await?;
        let (error, retry_after) = match sent {
            Ok(Ok(resp)) if resp.status().is_success() => return Ok(resp),
            Ok(Ok(resp)) => {
                let status = resp.status();
                let after = retry_after(resp.headers(), SystemTime::now());
                let body = read_error_body(resp, policy, cancel).await?;
                let retryable = is_retryable_status(status.as_u16());
                let body = if retryable && last && attempts > 1 {
                    format!("{body} (gave up after {attempt} attempts)")
                } else {
                    body
                };
                let error = ProviderError::Status {
                    provider: provider.to_owned(),
                    status: status.as_u16(),
                    body,
                };
                if !retryable {
                    return Err(error);
                }
                (error, after)
            }
            Ok(Err(e)) if e.is_builder() => {
                return Err(ProviderError::Connect {
                    provider: provider.to_owned(),
                    message: error_chain(&e),
                });
            }
            Ok(Err(e)) => {
                let suffix = give_up_suffix(last, attempt, attempts);
                // What failed (the URL) and why (the cause in words:
                // `connection refused`), once.
                let failed = format!(
                    "{}: {}{suffix}",
                    e.url()
                        .map_or_else(|| "the server".to_owned(), ToString::to_string),
                    toolhost_text::cause(&e)
                );
                let error = if e.is_timeout() {
                    ProviderError::Timeout {
                        provider: provider.to_owned(),
                        message: failed,
                    }
                } else {
                    ProviderError::Connect {
                        provider: provider.to_owned(),
                        message: format!(
                            "cannot connect to {failed}; is the server running there, and is that its \
                             address (--base-url, `base-url` in [model])?"
                        ),
                    }
                };
                (error, None)
            }
            Err(_) => (
                ProviderError::Timeout {
                    provider: provider.to_owned(),
                    message: format!(
                        "no response within {:?}{}",
                        policy.request_timeout,
                        give_up_suffix(last, attempt, attempts)
                    ),
                },
                None,
            ),
        };
        if last {
            // The caller reports the error (the agent loop ends its run
            // with it): the log has it at info, not a second time on stderr.
            tracing::info!(provider, attempt, error = %error, "giving up");
            return Err(error);
        }
        let delay = policy.backoff(attempt, retry_after);
        tracing::info!(provider, attempt, ?delay, error = %error, "retrying");
        cancellable(cancel, tokio::time::sleep(delay)).await?;
    }
}

fn give_up_suffix(last: bool, attempt: u32, attempts: u32) -> String {
    if last && attempts > 1 {
        format!(" (gave up after {attempt} attempts)")
    } else {
        String::new()
    }
}

/// Reads an error response's body (bounded by the request timeout and by
/// [`MAX_ERROR_BODY_BYTES`]) as an excerpt.
async fn read_error_body(
    resp: Response,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<String, ProviderError> {
    let read = cancellable(
        cancel,
        tokio::time::timeout(
            policy.request_timeout,
            read_at_most(resp, MAX_ERROR_BODY_BYTES),
        ),
    )
    .await?;
    Ok(match read {
        Ok(Ok((bytes, _))) => excerpt(&String::from_utf8_lossy(&bytes)),
        Ok(Err(e)) => format!("(body unreadable: {})", error_chain(&e)),
        Err(_) => "(body timed out)".to_owned(),
    })
}

/// Up to `max` bytes of `resp`'s body, and whether there was more.
async fn read_at_most(mut resp: Response, max: usize) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = max.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The error for a response past [`RetryPolicy::max_response_bytes`].
fn too_large(provider: &str, max: usize, partial_text: &str) -> ProviderError {
    ProviderError::InvalidResponse {
        provider: provider.to_owned(),
        message: format!(
            "the response is larger than {max} bytes (the limit `max_response_bytes`)"
        ),
        partial_text: partial_text.to_owned(),
    }
}

/// Reads a whole successful response body, bounded by the request timeout
/// and by [`RetryPolicy::max_response_bytes`].
pub(crate) async fn read_body(
    provider: &str,
    resp: Response,
    policy: &RetryPolicy,
    cancel: &CancellationToken,
) -> Result<Bytes, ProviderError> {
    let max = policy.max_response_bytes;
    match cancellable(
        cancel,
        tokio::time::timeout(policy.request_timeout, read_at_most(resp, max)),
    )
    .await?
    {
        Ok(Ok((_, true))) => Err(too_large(provider, max, "")),
        Ok(Ok((b, false))) => Ok(Bytes::from(b)),
        Ok(Err(e)) => Err(ProviderError::InvalidResponse {
            provider: provider.to_owned(),
            message: format!("cannot read the body: {}", error_chain(&e)),
            partial_text: String::new(),
        }),
        Err(_) => Err(ProviderError::Timeout {
            provider: provider.to_owned(),
            message: format!("body not complete within {:?}", policy.request_timeout),
        }),
    }
}

/// Why a response body stream stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StreamFail {
    #[error("no data for {0:?}")]
    Idle(Duration),
    #[error("more than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Http(String),
}

/// The server-sent events of a response.
pub(crate) type SseStream =
    Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<StreamFail>>> + Send>>;

/// Parses `resp`'s body as server-sent events; a silence longer than `idle`
/// ends the stream with [`StreamFail::Idle`], and more than `max_bytes` in
/// all with [`StreamFail::TooLarge`] (before the parser buffers them).
pub(crate) fn sse(resp: Response, idle: Duration, max_bytes: usize) -> SseStream {
    let bytes = Box::pin(resp.bytes_stream());
    let guarded = futures::stream::unfold(Some((bytes, 0usize)), move |state| async move {
        let (mut s, seen) = state?;
        match tokio::time::timeout(idle, s.next()).await {
            Err(_) => Some((Err(StreamFail::Idle(idle)), None)),
            Ok(None) => None,
            Ok(Some(Ok(b))) => match seen.checked_add(b.len()).filter(|n| *n <= max_bytes) {
                Some(seen) => Some((Ok(b), Some((s, seen)))),
                None => Some((Err(StreamFail::TooLarge(max_bytes)), None)),
            },
            Ok(Some(Err(e))) => Some((Err(StreamFail::Http(error_chain(&e))), None)),
        }
    });
    Box::pin(guarded.eventsource())
}

/// The next event of `events`, or `None` at the end of the body. Returns
/// `Cancelled` as soon as `cancel` fires (the caller then drops the stream,
/// which closes the connection).
pub(crate) async fn next_event(
    provider: &str,
    events: &mut SseStream,
    cancel: &CancellationToken,
    partial_text: &str,
) -> Result<Option<Event>, ProviderError> {
    match cancellable(cancel, events.next()).await? {
        None => Ok(None),
        Some(Ok(ev)) => Ok(Some(ev)),
        Some(Err(EventStreamError::Transport(StreamFail::Idle(d)))) => {
            Err(ProviderError::Timeout {
                provider: provider.to_owned(),
                message: format!("the stream sent nothing for {d:?}"),
            })
        }
        Some(Err(EventStreamError::Transport(StreamFail::TooLarge(max)))) => {
            Err(too_large(provider, max, partial_text))
        }
        Some(Err(e)) => Err(ProviderError::InvalidResponse {
            provider: provider.to_owned(),
            message: format!("the stream broke: {e}"),
            partial_text: partial_text.to_owned(),
        }),
    }
}

/// Whether a response carries a whole JSON body (a server that ignored
/// `stream: true`) rather than server-sent events.
pub(crate) fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, value.parse().unwrap());
        }
        h
    }

    #[test]
    fn an_absurd_retry_after_is_capped_by_the_policy_not_a_panic() {
        let policy = RetryPolicy::default();
        let now = SystemTime::now();
        for h in [
            headers(&[("retry-after", "1e20")]),
            headers(&[("retry-after-ms", "1e300")]),
            headers(&[("retry-after", "18446744073709551616")]),
        ] {
            let wait = retry_after(&h, now);
            assert_eq!(wait, Some(Duration::MAX));
            assert_eq!(policy.backoff(1, wait), policy.max_backoff);
        }
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_http_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3")]), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(10));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &later)]), now),
            Some(Duration::from_secs(10))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(10));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &earlier)]), now),
            Some(Duration::ZERO)
        );
        for junk in ["-1", "NaN", "inf", "soon"] {
            assert_eq!(
                retry_after(&headers(&[("retry-after", junk)]), now),
                None,
                "{junk}"
            );
        }
    }
}
