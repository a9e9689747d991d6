//! A span's trace context (its trace and span ids, sampled flag and W3C
//! trace state) as the export layer keeps it, and the door
//! [`crate::propagate`] reaches it through.
//!
//! The layer (`layer.rs`) sits somewhere in the embedder's subscriber;
//! [`Access`] is found from a `tracing::Span` with
//! `Dispatch::downcast_ref`, as `tracing-opentelemetry` finds its own.
//! Without the layer there is no `Access`, and propagation falls back to
//! a `tracing-opentelemetry` layer, if the embedder has one.

use tracing::Dispatch;
use tracing::span::Id;

/// The ids and flag of one span, the host's or a remote caller's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanContext {
    pub(crate) trace_id: u128,
    pub(crate) span_id: u64,
    pub(crate) sampled: bool,
    /// The W3C `tracestate` value carried along the trace (empty: none).
    pub(crate) state: String,
}

impl SpanContext {
    /// The W3C `traceparent` value (version 00) naming this span.
    pub(crate) fn traceparent(&self) -> String {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }
}

/// What a caller's `traceparent` does to the span that serves its call
/// (see [`crate::propagate`]'s docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CallerTrace {
    /// A link to the caller's span; the call's trace is the host's own,
    /// sampled as a new trace.
    #[default]
    Link,
    /// The caller's span is the parent: one trace end to end, the caller's
    /// trace id and, for a parent-based sampler, its sampling decision.
    Parent,
}

impl std::str::FromStr for CallerTrace {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "link" => Ok(CallerTrace::Link),
            "parent" => Ok(CallerTrace::Parent),
            other => Err(format!(
                "unknown caller-trace `{}` (link or parent)",
                other.chars().take(64).collect::<String>()
            )),
        }
    }
}

/// What [`crate::propagate`] asks of the export layer, for the span `Id`
/// of the subscriber `Dispatch` the layer is in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    /// The context of the span, or of its nearest ancestor the layer
    /// records (`None`: none is). Its ids are fixed from then on.
    pub(crate) context: fn(&Dispatch, &Id) -> Option<SpanContext>,
    /// Ties the span to a caller's span, as `CallerTrace` says; `false`
    /// when the layer does not record the span.
    pub(crate) adopt: fn(&Dispatch, &Id, SpanContext, CallerTrace) -> bool,
}

impl Access {
    /// The `Access` of the layer in `dispatch`, if there is one.
    pub(crate) fn of(dispatch: &Dispatch) -> Option<&Access> {
        dispatch.downcast_ref::<Access>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_is_lower_hex_with_the_sampled_flag() {
        let cx = SpanContext {
            trace_id: 0x0af7_6519_16cd_43dd_8448_eb21_1c80_319c,
            span_id: 0xb7ad_6b71_6920_3331,
            sampled: true,
            state: String::new(),
        };
        assert_eq!(
            cx.traceparent(),
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
        let unsampled = SpanContext {
            trace_id: 1,
            span_id: 2,
            sampled: false,
            ..cx
        };
        assert_eq!(
            unsampled.traceparent(),
            "00-00000000000000000000000000000001-0000000000000002-00"
        );
    }
}
