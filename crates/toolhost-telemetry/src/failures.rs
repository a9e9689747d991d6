//! A collector that cannot be reached, said once. A batch that could not
//! be sent is dropped (the queue must stay bounded), so a wrong endpoint or
//! a collector that is down would leave a user with no traces and no
//! reason, even with `-v`. [`Failures`] tells the first failure at `warn`
//! with the endpoint and the cause, and nothing more until an export works
//! again (told at `info`), so a dead collector costs one line, not one per
//! batch. Spans dropped because the queue was full are told the same way.

/// What the exporter's thread has told about its failures.
#[derive(Debug)]
pub(crate) struct Failures {
    /// Where the traces go, for the message.
    endpoint: String,
    /// Whether the last export failed.
    failing: bool,
    /// Whether the queue was full at the last look.
    dropping: bool,
}

impl Failures {
    pub(crate) fn new(endpoint: String) -> Self {
        Failures {
            endpoint,
            failing: false,
            dropping: false,
        }
    }

    /// After a request of `spans` spans: its outcome.
    pub(crate) fn sent(&mut self, spans: usize, outcome: Result<(), String>) {
        match outcome {
            Ok(()) => {
                if std::mem::replace(&mut self.failing, false) {
                    tracing::info!(endpoint = %self.endpoint, "traces are exported again");
                }
            }
            Err(e) => {
                if !std::mem::replace(&mut self.failing, true) {
                    tracing::warn!(
                        "traces are not exported: the collector at {} did not take {spans} \
                         spans ({}); check OTEL_EXPORTER_OTLP_ENDPOINT or [telemetry] endpoint \
                         (said once until an export works again)",
                        self.endpoint,
                        in_words(&e)
                    );
                }
            }
        }
    }

    /// After taking the queue: how many spans it dropped since the last take.
    pub(crate) fn dropped(&mut self, dropped: u64) {
        let dropping = dropped > 0;
        if dropping && !self.dropping {
            tracing::warn!(
                "{dropped} spans were dropped: more ended than the collector at {} took in \
                 time (OTEL_BSP_MAX_QUEUE_SIZE; said once until the queue has room again)",
                self.endpoint
            );
        }
        self.dropping = dropping;
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
