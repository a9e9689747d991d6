//! The exporter's thread: posts the queued spans ([`crate::queue`]) to the
//! collector over OTLP/HTTP.
//!
//! It wakes when a batch is full, every `OTEL_BSP_SCHEDULE_DELAY`, and
//! when asked to stop; each time it sends everything queued, a batch
//! (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans) per request. It reads the exporter's standard variables itself:
//! `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` (`key=value,…`, values
//! URL-decoded) and `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` (milliseconds,
//! 10 s by default). A collector that is slow or down delays only this
//! thread: the queue stays bounded and drops what does not fit.
//! Failures are told once per failing spell ([`crate::failures`]).

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::time::Duration;

use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::failures::Failures;
use crate::protocol::Protocol;
use crate::queue::{Queue, Queued, Wake};

/// Wakes waiting at once: a wake finds the channel full only when the
/// thread has wakes enough to find the queue.
const WAKES: usize = 16;

/// How long a request may take when the variables do not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where and how the spans are posted.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The traces URL (`…/v1/traces`).
    pub(crate) url: String,
    pub(crate) protocol: Protocol,
    pub(crate) headers: HeaderMap,
    pub(crate) timeout: Duration,
}

impl Target {
    /// The target at `url`, with the headers and timeout the variables
    /// (read through `var`) name.
    pub(crate) fn new(
        url: String,
        protocol: Protocol,
        var: impl Fn(&str) -> Option<String>,
    ) -> Target {
        let either = |signal: &str, general: &str| var(signal).or_else(|| var(general));
        let headers = either(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        )
        .map(|text| headers(&text))
        .unwrap_or_default();
        let timeout = either(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        )
        .and_then(|ms| ms.trim().parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
        Target {
            url,
            protocol,
            headers,
            timeout,
        }
    }
}

/// The headers of an `OTEL_EXPORTER_OTLP_HEADERS` value: `key=value`
/// pairs separated by commas, values URL-decoded; a pair that is not a
/// valid header is skipped.
fn headers(text: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    for pair in text.split(',') {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy();
        if let (Ok(key), Ok(value)) = (
            HeaderName::from_bytes(key.trim().as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            map.append(key, value);
        }
    }
    map
}

/// `url` as messages show it: without a user name or password the
/// operator may have put in it (`https://user:key@collector/…`).
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut url) => {
            if !url.username().is_empty() || url.password().is_some() {
                // Only a URL that cannot be a base refuses these.
                let _ = url.set_username("");
                let _ = url.set_password(None);
            }
            url.into()
        }
        Err(_) => "the OTLP endpoint".to_owned(),
    }
}

/// Starts the exporter's thread for `queue`; the sender wakes it.
pub(crate) fn start(queue: Arc<Queue>, target: Target) -> std::io::Result<SyncSender<Wake>> {
    let (wake, woken) = std::sync::mpsc::sync_channel(WAKES);
    std::thread::Builder::new()
        .name("toolhost-otlp".to_owned())
        .spawn(move || run(&queue, &target, &woken))?;
    Ok(wake)
}

/// Asks the thread to flush or stop and waits at most `timeout` for it.
pub(crate) fn ask(
    wake: &SyncSender<Wake>,
    what: fn(Sender<()>) -> Wake,
    timeout: Duration,
) -> OTelSdkResult {
    let (done, answered) = std::sync::mpsc::channel();
    wake.send(what(done))
        .map_err(|_| OTelSdkError::AlreadyShutdown)?;
    match answered.recv_timeout(timeout) {
        Ok(()) => Ok(()),
        Err(RecvTimeoutError::Timeout) => Err(OTelSdkError::Timeout(timeout)),
        Err(RecvTimeoutError::Disconnected) => Err(OTelSdkError::AlreadyShutdown),
    }
}

fn run(queue: &Queue, target: &Target, woken: &Receiver<Wake>) {
    let client = match reqwest::blocking::Client::builder()
        .timeout(target.timeout)
        .build()
    {
        Ok(client) => client,
        Err(e) => {
            tracing::warn!(error = %e, "traces are not exported: no HTTP client");
            return;
        }
    };
    let content_type = HeaderValue::from_static(match target.protocol {
        Protocol::HttpProtobuf => "application/x-protobuf",
        Protocol::HttpJson => "application/json",
    });
    let mut failures = Failures::new(shown(&target.url));
    let mut spare = Queued::default();
    loop {
        let (answer, stop) = match woken.recv_timeout(queue.limits().delay) {
            Ok(Wake::Batch) | Err(RecvTimeoutError::Timeout) => (None, false),
            Ok(Wake::Shutdown(answer)) => (Some(answer), true),
            Err(RecvTimeoutError::Disconnected) => (None, true),
        };
        let queued = queue.take(spare);
        failures.dropped(queued.dropped);
        let mut left = queued.spans;
        for (spans, body) in queue.bodies(&queued) {
            let sent = client
                .post(&target.url)
                .headers(target.headers.clone())
                .header(CONTENT_TYPE, content_type.clone())
                .body(body)
                .send()
                .and_then(reqwest::blocking::Response::error_for_status);
            // The error without its URL: the endpoint is said once, shown.
            match sent {
                Ok(_) => failures.sent(spans, Ok(())),
                Err(e) => {
                    // The rest of this round is dropped with it: one
                    // timeout per round for a collector that is down.
                    failures.sent(left, Err(e.without_url().to_string()));
                    break;
                }
            }
            left -= spans;
        }
        spare = queued;
        if let Some(answer) = answer {
            let _ = answer.send(());
        }
        if stop {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_shown_in_messages_has_no_credentials() {
        assert_eq!(
            shown("https://user:s3cret@collector.example:4318/v1/traces"),
            "https://collector.example:4318/v1/traces"
        );
        assert_eq!(shown("http://h:4318/v1/traces"), "http://h:4318/v1/traces");
        assert!(!shown("not a url s3cret").contains("s3cret"));
    }

    #[test]
    fn headers_are_comma_separated_pairs_with_url_decoded_values() {
        let map = headers("api-key=secret%20one, x-team = a%2Cb ,broken,=nokey,bad header=x");
        assert_eq!(map.get("api-key").unwrap(), "secret one");
        assert_eq!(map.get("x-team").unwrap(), "a,b");
        assert_eq!(map.len(), 2, "{map:?}");
    }

    #[test]
    fn the_timeout_is_the_traces_variable_else_the_general_one_in_milliseconds() {
        let target = |vars: &'static [(&'static str, &'static str)]| {
            Target::new(
                "http://h/v1/traces".to_owned(),
                Protocol::HttpProtobuf,
                |n| {
                    vars.iter()
                        .find(|(k, _)| *k == n)
                        .map(|(_, v)| (*v).to_owned())
                },
            )
            .timeout
        };
        assert_eq!(target(&[]), DEFAULT_TIMEOUT);
        assert_eq!(
            target(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "250")]),
            Duration::from_millis(250)
        );
        assert_eq!(
            target(&[
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "250"),
                ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "50")
            ]),
            Duration::from_millis(50)
        );
    }
}
