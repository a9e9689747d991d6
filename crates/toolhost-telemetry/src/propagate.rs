//! W3C trace context (`traceparent`, `tracestate`) in and out of the
//! current `tracing` span.
//!
//! Without an OpenTelemetry layer in the subscriber, [`traceparent`] is
//! `None` and [`adopt`] does nothing: nothing is sent or parsed.
//!
//! ```
//! let span = tracing::info_span!("tools/call");
//! toolhost_telemetry::propagate::adopt(
//!     &span,
//!     Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
//!     None,
//! );
//! let _inside = span.enter();
//! // No OpenTelemetry layer here, so there is nothing to pass on.
//! assert_eq!(toolhost_telemetry::propagate::traceparent(), None);
//! ```

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The W3C header and `_meta` key of the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header and `_meta` key of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

/// Longest `traceparent` / `tracestate` accepted from outside (the W3C
/// limits are 55 and 512 characters); longer values are ignored.
const MAX_TRACESTATE: usize = 512;
const MAX_TRACEPARENT: usize = 128;

/// The current span's context as a `traceparent` value, to send with an
/// outgoing request; `None` when there is no sampled-or-not OpenTelemetry
/// span (no exporter installed).
pub fn traceparent() -> Option<String> {
    headers().remove(TRACEPARENT)
}

/// The current span's W3C headers (`traceparent`, and `tracestate` when
/// there is one); empty without an OpenTelemetry span.
pub fn headers() -> HashMap<String, String> {
    let cx = Span::current().context();
    let mut carrier = HashMap::new();
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    }
    carrier
}

/// Makes `span` a child of the remote span that `traceparent` names (an MCP
/// request's `_meta.traceparent`, SEP-414). Call it before the span is
/// entered. A missing, over-long or malformed value leaves the span where
/// it was (a new trace, or a child of the current span).
pub fn adopt(span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    let Some(parent) = traceparent.filter(|t| t.len() <= MAX_TRACEPARENT) else {
        return;
    };
    let mut carrier = HashMap::from([(TRACEPARENT.to_owned(), parent.to_owned())]);
    if let Some(state) = tracestate.filter(|s| s.len() <= MAX_TRACESTATE) {
        carrier.insert(TRACESTATE.to_owned(), state.to_owned());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if !cx.span().span_context().is_remote() {
        tracing::debug!("an invalid traceparent was ignored");
        return;
    }
    if let Err(e) = span.set_parent(cx) {
        tracing::debug!(error = %e, "the remote parent could not be set");
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn with_otel(f: impl FnOnce()) {
        let provider = SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, f);
    }

    #[test]
    fn an_adopted_traceparent_parents_the_span_and_goes_on_to_the_next_request() {
        with_otel(|| {
            let span = tracing::info_span!("tools/call");
            adopt(&span, Some(PARENT), Some("vendor=1"));
            let _in = span.enter();
            let child = tracing::info_span!("execute_tool");
            let _in_child = child.enter();
            let sent = headers();
            let out = &sent[TRACEPARENT];
            assert!(
                out.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
                "same trace: {out}"
            );
            assert!(!out.contains("b7ad6b7169203331"), "a new span id: {out}");
            assert_eq!(sent[TRACESTATE], "vendor=1");
        });
    }

    #[test]
    fn a_malformed_or_huge_traceparent_starts_a_new_trace() {
        with_otel(|| {
            for bad in [
                "garbage".to_owned(),
                "00-00000000000000000000000000000000-b7ad6b7169203331-01".to_owned(),
                format!("{PARENT}{}", "x".repeat(10_000)),
            ] {
                let span = tracing::info_span!("tools/call");
                adopt(&span, Some(&bad), Some(&"s".repeat(100_000)));
                let _in = span.enter();
                let out = traceparent().expect("a span of its own");
                assert!(!out.contains("0af7651916cd43dd8448eb211c80319c"), "{out}");
            }
        });
    }

    #[test]
    fn without_an_opentelemetry_layer_nothing_is_sent() {
        let span = tracing::info_span!("tools/call");
        adopt(&span, Some(PARENT), None);
        let _in = span.enter();
        assert_eq!(traceparent(), None);
        assert!(headers().is_empty());
    }
}
