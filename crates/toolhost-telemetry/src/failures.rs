//! A collector that cannot be reached, said once. The OpenTelemetry SDK
//! drops a batch it could not send without a word (its own log is off in
//! this build), so a wrong endpoint or a collector that is down left a user
//! with no traces and no reason, even with `-v`. [`Reporting`] wraps the
//! OTLP exporter: the first failure is logged at `warn` with the endpoint
//! and the cause, and nothing more until an export works again (logged at
//! `info`), so a dead collector costs one line, not one per batch.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

/// An exporter whose failures are logged once per failing spell.
#[derive(Debug)]
pub(crate) struct Reporting<E> {
    inner: E,
    /// Where the traces go, for the message.
    endpoint: String,
    /// Whether the last export failed.
    failing: AtomicBool,
}

impl<E> Reporting<E> {
    pub(crate) fn new(inner: E, endpoint: String) -> Self {
        Reporting {
            inner,
            endpoint,
            failing: AtomicBool::new(false),
        }
    }
}

impl<E: SpanExporter> SpanExporter for Reporting<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(endpoint = %self.endpoint, "traces are exported again");
                }
            }
            Err(e) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "traces are not exported: the collector at {} did not take {spans} \
                         spans ({}); check OTEL_EXPORTER_OTLP_ENDPOINT or [telemetry] endpoint \
                         (said once until an export works again)",
                        self.endpoint,
                        in_words(&e.to_string())
                    );
                }
            }
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The exporter's message, on one line, without `(os error N)`, bounded.
fn in_words(message: &str) -> String {
    let mut text = message.split_whitespace().collect::<Vec<_>>().join(" ");
    while let Some(at) = text.find(" (os error ") {
        match text[at..].find(')') {
            Some(end) => text.replace_range(at..=at + end, ""),
            None => break,
        }
    }
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_message_is_one_line_without_os_codes() {
        assert_eq!(
            super::in_words(
                "Operation failed: tcp connect error: Connection refused (os error 111)\n"
            ),
            "Operation failed: tcp connect error: Connection refused"
        );
    }
}
