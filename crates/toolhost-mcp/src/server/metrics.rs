//! Prometheus metrics of an MCP server, served at `/metrics` by `http.rs`
//! (the text exposition format, through `prometheus-client`).
//!
//! | metric | what |
//! |---|---|
//! | `toolhost_mcp_calls_total{outcome}` | calls by outcome: `ok`, `task` (answered with a task that goes on), or the error's kind (`denied`, `timeout`, …) |
//! | `toolhost_mcp_call_duration_seconds` | time from the request to the answer (histogram) |
//! | `toolhost_mcp_calls_in_flight` | calls running or waiting for a sandbox now |
//! | `toolhost_plugin_events_total{event}` | plugins loaded, reloaded, unloaded, failed to load |
//!
//! Labels never carry tool, plugin or client names: what a client sends
//! cannot grow the set of series.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use toolhost_runtime::load::PluginEvent;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Outcome {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Event {
    event: &'static str,
}

/// The server's counters; cheap to update from any task.
pub(crate) struct Metrics {
    registry: Registry,
    calls: Family<Outcome, Counter>,
    duration: Histogram,
    in_flight: Gauge,
    events: Family<Event, Counter>,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        let mut registry = Registry::with_prefix("toolhost");
        let calls = Family::<Outcome, Counter>::default();
        // 50 µs to ~26 s.
        let duration = Histogram::new(exponential_buckets(50e-6, 2.0, 20));
        let in_flight = Gauge::default();
        let events = Family::<Event, Counter>::default();
        registry.register("mcp_calls", "MCP tool calls by outcome", calls.clone());
        registry.register(
            "mcp_call_duration_seconds",
            "Time from an MCP tools/call request to its answer",
            duration.clone(),
        );
        registry.register(
            "mcp_calls_in_flight",
            "MCP tool calls running or waiting for a sandbox",
            in_flight.clone(),
        );
        registry.register(
            "plugin_events",
            "Plugins loaded, reloaded, unloaded or failed to load",
            events.clone(),
        );
        Metrics {
            registry,
            calls,
            duration,
            in_flight,
            events,
        }
    }

    /// A call started; the guard records its end.
    pub(crate) fn call(&self) -> CallGuard<'_> {
        self.in_flight.inc();
        CallGuard {
            metrics: self,
            started: std::time::Instant::now(),
            outcome: "cancelled",
        }
    }

    pub(crate) fn plugin_event(&self, event: &PluginEvent) {
        let event = match event {
            PluginEvent::Loaded { .. } => "loaded",
            PluginEvent::Reloaded { .. } => "reloaded",
            PluginEvent::Unloaded { .. } => "unloaded",
            PluginEvent::Failed { .. } => "failed",
        };
        self.events.get_or_create(&Event { event }).inc();
    }

    /// The text exposition of every metric.
    pub(crate) fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            tracing::warn!("cannot encode the metrics: {e}");
        }
        text
    }
}

/// The label for an error of `kind`: its name when it is one this version
/// knows, else `other` (so the set of series stays fixed).
pub(crate) fn kind_label(kind: &toolhost_runtime::error::ErrorKind) -> &'static str {
    kind.known_name().unwrap_or("other")
}

/// Records one call's outcome and duration when dropped.
pub(crate) struct CallGuard<'a> {
    metrics: &'a Metrics,
    started: std::time::Instant,
    outcome: &'static str,
}

impl CallGuard<'_> {
    /// Sets the outcome recorded (default: `cancelled`).
    pub(crate) fn outcome(&mut self, outcome: &'static str) {
        self.outcome = outcome;
    }
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        let m = self.metrics;
        m.in_flight.dec();
        m.duration
            .observe(Duration::as_secs_f64(&self.started.elapsed()));
        m.calls
            .get_or_create(&Outcome {
                outcome: self.outcome,
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_counted_by_outcome_and_in_flight_returns_to_zero() {
        let m = Metrics::new();
        {
            let mut call = m.call();
            call.outcome("ok");
        }
        drop(m.call());
        let text = m.encode();
        assert!(
            text.contains("toolhost_mcp_calls_total{outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("toolhost_mcp_calls_total{outcome=\"cancelled\"} 1"),
            "{text}"
        );
        assert!(text.contains("toolhost_mcp_calls_in_flight 0"), "{text}");
        assert!(
            text.contains("toolhost_mcp_call_duration_seconds_count 2"),
            "{text}"
        );
    }
}
