//! W3C trace context (`traceparent`, `tracestate`) in and out of the
//! current `tracing` span.
//!
//! The context is the one toolhost's export layer keeps
//! ([`crate::Telemetry::layer`]), or, in a subscriber without it, an
//! embedder's own `tracing-opentelemetry` layer's. Without either,
//! [`traceparent`] is `None` and [`adopt`] does nothing: nothing is sent
//! or parsed.
//!
//! A caller's context is outside input at a trust boundary. By default
//! ([`CallerTrace::Link`], as OpenTelemetry advises for untrusted callers)
//! it becomes a **link** of the span that serves the call: the span starts
//! a trace of its own, with an id the caller did not pick, sampled by the
//! operator's sampler (`OTEL_TRACES_SAMPLER`) as any new trace; so a
//! caller that sends the sampled flag `-00` cannot hide its calls from the
//! operator's traces. [`CallerTrace::Parent`] joins the caller's trace
//! instead, for callers the operator trusts (a gateway in front of its own
//! services): then the sampler decides with the caller's span as parent,
//! which for the default `parentbased_always_on` follows the caller's
//! flag (`OTEL_TRACES_SAMPLER=always_on` does not).
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
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::context::{Access, SpanContext};

/// The W3C header and `_meta` key of the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The W3C header and `_meta` key of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

/// Longest `traceparent` / `tracestate` accepted from outside (the W3C
/// limits are 55 and 512 characters); longer values are ignored.
const MAX_TRACESTATE: usize = 512;
const MAX_TRACEPARENT: usize = 128;

pub use crate::context::CallerTrace;

/// Whether callers' traces are joined ([`CallerTrace::Parent`]); linked
/// when not. One setting per process, as the exporter is.
static JOIN_CALLERS: AtomicBool = AtomicBool::new(false);

/// Sets what a caller's `traceparent` does from now on, in this process
/// ([`Telemetry::start`](crate::Telemetry::start) sets it from its
/// settings; an embedder with a layer of its own calls this).
pub fn set_caller_trace(mode: CallerTrace) {
    JOIN_CALLERS.store(mode == CallerTrace::Parent, Ordering::Relaxed);
}

/// What a caller's `traceparent` does now in this process.
pub fn caller_trace() -> CallerTrace {
    if JOIN_CALLERS.load(Ordering::Relaxed) {
        CallerTrace::Parent
    } else {
        CallerTrace::Link
    }
}

/// The current span's context as a `traceparent` value, to send with an
/// outgoing request; `None` when there is no sampled-or-not OpenTelemetry
/// span (no exporter installed).
pub fn traceparent() -> Option<String> {
    headers().remove(TRACEPARENT)
}

/// The current span's W3C headers (`traceparent`, and `tracestate` when
/// there is one); empty without an OpenTelemetry span.
pub fn headers() -> HashMap<String, String> {
    let current = Span::current();
    let ours = current.with_subscriber(|(id, dispatch)| {
        Access::of(dispatch).map(|access| (access.context)(dispatch, id))
    });
    let mut carrier = HashMap::new();
    match ours.flatten() {
        Some(Some(cx)) => {
            carrier.insert(TRACEPARENT.to_owned(), cx.traceparent());
            if !cx.state.is_empty() {
                carrier.insert(TRACESTATE.to_owned(), cx.state);
            }
        }
        // Toolhost's layer, and no span of it here.
        Some(None) => {}
        None => {
            let cx = current.context();
            if cx.span().span_context().is_valid() {
                TraceContextPropagator::new().inject_context(&cx, &mut carrier);
            }
        }
    }
    carrier
}

/// Ties `span` to the remote span that `traceparent` names (an MCP
/// request's `_meta.traceparent`, SEP-414), as [`caller_trace`] says: a
/// link (by default), or its parent. Call it before the span is entered. A
/// missing, over-long or malformed value leaves the span where it was (a
/// new trace, or a child of the current span).
pub fn adopt(span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    adopt_as(caller_trace(), span, traceparent, tracestate);
}

fn adopt_as(mode: CallerTrace, span: &Span, traceparent: Option<&str>, tracestate: Option<&str>) {
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
    let caller = {
        let span_ref = cx.span();
        let remote = span_ref.span_context();
        SpanContext {
            trace_id: u128::from_be_bytes(remote.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(remote.span_id().to_bytes()),
            sampled: remote.is_sampled(),
            state: remote.trace_state().header(),
        }
    };
    let ours = span.with_subscriber(|(id, dispatch)| {
        Access::of(dispatch).map(|access| (access.adopt)(dispatch, id, caller, mode))
    });
    if ours.flatten().is_some() {
        return;
    }
    // An embedder's `tracing-opentelemetry` layer.
    match mode {
        CallerTrace::Link => span.add_link(cx.span().span_context().clone()),
        CallerTrace::Parent => {
            if let Err(e) = span.set_parent(cx) {
                tracing::debug!(error = %e, "the remote parent could not be set");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    /// `f` under toolhost's export layer.
    #[cfg(feature = "otlp")]
    fn with_ours(f: impl FnOnce()) {
        let (exporter, _kept) = crate::testing::exporter(Default::default());
        let layer = crate::export::layer_of(&exporter, false, true);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, f);
    }

    /// `f` under an embedder's own `tracing-opentelemetry` layer.
    fn with_theirs(f: impl FnOnce()) {
        let provider = SdkTracerProvider::builder().build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("test"));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, f);
    }

    fn joins_and_carries_on() {
        let span = tracing::info_span!(target: "toolhost::mcp", "tools/call");
        adopt_as(CallerTrace::Parent, &span, Some(PARENT), Some("vendor=1"));
        let _in = span.enter();
        let child = tracing::info_span!(target: "toolhost::mcp", "execute_tool");
        let _in_child = child.enter();
        let sent = headers();
        let out = &sent[TRACEPARENT];
        assert!(
            out.starts_with("00-0af7651916cd43dd8448eb211c80319c-") && out.ends_with("-01"),
            "same trace: {out}"
        );
        assert!(!out.contains("b7ad6b7169203331"), "a new span id: {out}");
        assert_eq!(sent[TRACESTATE], "vendor=1");
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn a_trusted_callers_traceparent_parents_the_span_and_goes_on_to_the_next_request() {
        with_ours(joins_and_carries_on);
    }

    #[test]
    fn an_embedders_tracing_opentelemetry_layer_still_joins_and_carries_the_trace() {
        with_theirs(joins_and_carries_on);
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn a_span_the_layer_leaves_out_carries_its_nearest_recorded_ancestors_context() {
        let (exporter, _kept) = crate::testing::exporter(Default::default());
        // Steps (debug) are not exported here.
        let layer = crate::export::layer_of(&exporter, false, false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let call = tracing::info_span!(target: "toolhost::call", "execute_tool");
            let _in = call.enter();
            let outer = traceparent().expect("the call's context");
            let _step = tracing::debug_span!(target: "toolhost::call", "execute").entered();
            assert_eq!(traceparent().as_deref(), Some(outer.as_str()));
        });
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn a_malformed_or_huge_traceparent_starts_a_new_trace() {
        with_ours(|| {
            for bad in [
                "garbage".to_owned(),
                "00-00000000000000000000000000000000-b7ad6b7169203331-01".to_owned(),
                format!("{PARENT}{}", "x".repeat(10_000)),
            ] {
                let span = tracing::info_span!(target: "toolhost::mcp", "tools/call");
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

    /// The spans `emit` makes (with `mode`) that are sampled and ended.
    #[cfg(feature = "otlp")]
    fn sampled(
        mode: CallerTrace,
        traceparent: &str,
    ) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
        let (exporter, kept) = crate::testing::exporter(Default::default());
        let layer = crate::export::layer_of(&exporter, false, false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "toolhost::mcp", "tools/call");
            adopt_as(mode, &span, Some(traceparent), None);
            let _in = span.enter();
            let _child = tracing::info_span!(target: "toolhost::call", "execute_tool").entered();
        });
        kept.spans()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// OTLP's `SpanFlags`: the parent (or linked span) is remote.
    const IS_REMOTE: u32 = 0x200;

    #[cfg(feature = "otlp")]
    #[test]
    fn a_callers_unsampled_traceparent_neither_hides_its_call_nor_picks_its_trace() {
        assert_eq!(caller_trace(), CallerTrace::Link, "the default");
        let unsampled = PARENT.replace("-01", "-00");
        let spans = sampled(CallerTrace::Link, &unsampled);
        assert_eq!(spans.len(), 2, "the operator's sampler decided: {spans:?}");
        let served = spans.iter().find(|s| s.name == "tools/call").unwrap();
        let trace = hex(&served.trace_id);
        assert_ne!(
            trace, "0af7651916cd43dd8448eb211c80319c",
            "a trace of its own"
        );
        assert!(served.parent_span_id.is_empty(), "a root");
        assert_eq!(served.flags & IS_REMOTE, 0);
        // The caller's span is kept as a link.
        let link = &served.links[0];
        assert_eq!(hex(&link.trace_id), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(hex(&link.span_id), "b7ad6b7169203331");
        assert_eq!(link.flags & 0x01, 0, "not sampled");
        assert_ne!(link.flags & IS_REMOTE, 0);
        let child = spans.iter().find(|s| s.name == "execute_tool").unwrap();
        assert_eq!(child.trace_id, served.trace_id);
        assert_eq!(child.parent_span_id, served.span_id);

        // Joined on purpose, a parent-based sampler follows the caller.
        assert!(sampled(CallerTrace::Parent, &unsampled).is_empty());
        let joined = sampled(CallerTrace::Parent, PARENT);
        let served = joined.iter().find(|s| s.name == "tools/call").unwrap();
        assert_eq!(hex(&served.trace_id), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(hex(&served.parent_span_id), "b7ad6b7169203331");
        assert_ne!(served.flags & IS_REMOTE, 0, "a remote parent");
    }

    #[test]
    fn caller_trace_reads_link_or_parent_and_refuses_others_briefly() {
        assert_eq!("link".parse::<CallerTrace>(), Ok(CallerTrace::Link));
        assert_eq!(" parent ".parse::<CallerTrace>(), Ok(CallerTrace::Parent));
        let long = "x".repeat(10_000).parse::<CallerTrace>().unwrap_err();
        assert!(long.len() < 200, "{long}");
    }
}
