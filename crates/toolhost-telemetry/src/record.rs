//! What the export layer keeps of one open span: its name, kind and
//! status, its start, and its attributes, events and links already
//! encoded as OTLP protobuf fields, written as `tracing` records them.
//!
//! `tracing-opentelemetry`, which this replaces, built an SDK span
//! builder per span, a `KeyValue` (and usually a `String`) per field, and
//! on close an SDK span and its `SpanData`: on a traced call that was
//! most of what traces cost the call's thread (docs/log.md).
//! Here a field's value goes straight into the span's buffer, and the
//! span is written once, when it ends (`encode.rs`).
//!
//! The fields follow `tracing-opentelemetry`'s conventions: `otel.name`
//! renames the span, `otel.kind` sets its kind, `otel.status_code`
//! (`ok`, `error`) and `otel.status_description` its status; any other
//! field is an attribute of its type (`i64`, `f64`, `bool`, string), and
//! anything else (an unsigned or 128-bit number, a formatted value) is
//! written as text. An event's `message` is its name,
//! with `level`, `target` and its other fields as attributes. As in the
//! SDK, a span keeps at most 128 attributes, 128 events and 128 links,
//! and counts the rest as dropped.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;

use tracing::field::{Field, Visit};

use crate::context::SpanContext;
use crate::encode::{self, Value};

/// The most attributes, events and links a span keeps (the SDK's default
/// span limits).
pub(crate) const MAX_ATTRIBUTES: u32 = 128;
pub(crate) const MAX_EVENTS: u32 = 128;
pub(crate) const MAX_LINKS: u32 = 128;

/// Room for a call span's attributes (about 600 bytes) without growing.
const ATTRIBUTES_CAPACITY: usize = 1024;

/// OTLP's `Span.attributes` and `Event.attributes` fields.
const SPAN_ATTRIBUTES: u32 = 9;
const EVENT_ATTRIBUTES: u32 = 3;

/// OTLP's `SpanKind` values.
const KIND_INTERNAL: u64 = 1;
/// OTLP's `Status.code` values.
const STATUS_OK: u64 = 1;
const STATUS_ERROR: u64 = 2;

/// A span's ids once they are fixed: its own context, and its parent's
/// span id (0: a root) and whether that parent is a remote caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fixed {
    pub(crate) own: SpanContext,
    pub(crate) parent_span_id: u64,
    pub(crate) parent_remote: bool,
}

/// One open span, as the layer records it ([module doc](self)).
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) name: Cow<'static, str>,
    /// OTLP's `SpanKind` (internal unless `otel.kind` says).
    pub(crate) kind: u64,
    pub(crate) status_code: u64,
    pub(crate) status_message: String,
    /// Nanoseconds since the Unix epoch.
    pub(crate) start: u64,
    /// `Span.attributes` fields, encoded.
    pub(crate) attributes: Vec<u8>,
    attribute_count: u32,
    pub(crate) dropped_attributes: u32,
    /// `Span.events` fields, encoded.
    pub(crate) events: Vec<u8>,
    event_count: u32,
    pub(crate) dropped_events: u32,
    /// `Span.links` fields, encoded.
    pub(crate) links: Vec<u8>,
    link_count: u32,
    pub(crate) dropped_links: u32,
    /// A caller's span this span continues (`propagate::adopt`, trusted
    /// callers only), until the ids are fixed.
    pub(crate) remote_parent: Option<SpanContext>,
    /// The ids, once something needed them (a child, an outgoing
    /// request's `traceparent`, the span's end).
    pub(crate) fixed: Option<Fixed>,
}

impl Recording {
    /// A span named `name` that started at `start` (nanoseconds since the
    /// epoch), with no field yet.
    pub(crate) fn new(name: &'static str, start: u64) -> Recording {
        Recording {
            name: Cow::Borrowed(name),
            kind: KIND_INTERNAL,
            status_code: 0,
            status_message: String::new(),
            start,
            attributes: Vec::with_capacity(ATTRIBUTES_CAPACITY),
            attribute_count: 0,
            dropped_attributes: 0,
            events: Vec::new(),
            event_count: 0,
            dropped_events: 0,
            links: Vec::new(),
            link_count: 0,
            dropped_links: 0,
            remote_parent: None,
            fixed: None,
        }
    }

    /// The visitor that records a span's fields into it.
    pub(crate) fn fields(&mut self) -> Fields<'_> {
        Fields(self)
    }

    /// Records `event` (at `time`) as one of the span's events.
    pub(crate) fn event(&mut self, event: &tracing::Event<'_>, time: u64) {
        if self.event_count >= MAX_EVENTS {
            self.dropped_events = self.dropped_events.saturating_add(1);
            return;
        }
        let meta = event.metadata();
        let mut fields = EventFields {
            name: None,
            attributes: Vec::new(),
        };
        encode::key_value(
            EVENT_ATTRIBUTES,
            "level",
            Value::Str(meta.level().as_str()),
            &mut fields.attributes,
        );
        encode::key_value(
            EVENT_ATTRIBUTES,
            "target",
            Value::Str(meta.target()),
            &mut fields.attributes,
        );
        event.record(&mut fields);
        let name = fields.name.as_deref().unwrap_or(meta.name());
        encode::event(time, name, &fields.attributes, &mut self.events);
        self.event_count += 1;
    }

    /// Records a link to a caller's span.
    pub(crate) fn link(&mut self, to: &SpanContext) {
        if self.link_count >= MAX_LINKS {
            self.dropped_links = self.dropped_links.saturating_add(1);
            return;
        }
        encode::link(to, &mut self.links);
        self.link_count += 1;
    }

    fn attribute(&mut self, key: &str, value: Value<'_>) {
        if self.attribute_count >= MAX_ATTRIBUTES {
            self.dropped_attributes = self.dropped_attributes.saturating_add(1);
            return;
        }
        encode::key_value(SPAN_ATTRIBUTES, key, value, &mut self.attributes);
        self.attribute_count += 1;
    }

    /// A field that is not an attribute but the span's name, kind or
    /// status; `false` for any other.
    fn special(&mut self, key: &str, value: &str) -> bool {
        match key {
            "otel.name" => self.name = Cow::Owned(value.to_owned()),
            "otel.kind" => self.kind = kind(value),
            "otel.status_code" => {
                self.status_code = if value.eq_ignore_ascii_case("ok") {
                    STATUS_OK
                } else if value.eq_ignore_ascii_case("error") {
                    STATUS_ERROR
                } else {
                    0
                };
                self.status_message.clear();
            }
            "otel.status_description" => {
                self.status_code = STATUS_ERROR;
                value.clone_into(&mut self.status_message);
            }
            _ => return false,
        }
        true
    }
}

/// OTLP's `SpanKind` for an `otel.kind` value (internal for any other).
fn kind(value: &str) -> u64 {
    ["internal", "server", "client", "producer", "consumer"]
        .iter()
        .zip(1..)
        .find(|(name, _)| value.eq_ignore_ascii_case(name))
        .map_or(KIND_INTERNAL, |(_, kind)| kind)
}

thread_local! {
    /// Where a formatted field is written before it is recorded.
    static FORMATTED: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The most a thread's formatting buffer keeps between fields.
const FORMATTED_KEPT: usize = 4 << 10;

/// Calls `f` with `value` formatted (`Debug`; for `%` fields and
/// `format_args!`, that is their `Display`).
fn formatted<R>(value: &dyn std::fmt::Debug, f: impl FnOnce(&str) -> R) -> R {
    FORMATTED.with(|buffer| {
        // A value whose formatting records a span field itself finds the
        // buffer taken, and gets one of its own.
        let Ok(mut buffer) = buffer.try_borrow_mut() else {
            return f(&format!("{value:?}"));
        };
        buffer.clear();
        let _ = write!(buffer, "{value:?}");
        let r = f(&buffer);
        if buffer.capacity() > FORMATTED_KEPT {
            *buffer = String::new();
        }
        r
    })
}

/// Records a span's fields ([`Recording::fields`]).
pub(crate) struct Fields<'a>(&'a mut Recording);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.0.special(field.name(), value) {
            self.0.attribute(field.name(), Value::Str(value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        formatted(value, |text| self.record_str(field, text));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.attribute(field.name(), Value::I64(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.attribute(field.name(), Value::F64(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.attribute(field.name(), Value::Bool(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_debug(field, &format_args!("{value}"));
    }
}

/// Records an event's fields: its `message` is its name, the others
/// attributes.
struct EventFields {
    name: Option<String>,
    attributes: Vec<u8>,
}

impl Visit for EventFields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.name = Some(value.to_owned());
        } else {
            encode::key_value(
                EVENT_ATTRIBUTES,
                field.name(),
                Value::Str(value),
                &mut self.attributes,
            );
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        self.record_str(field, &text);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        encode::key_value(
            EVENT_ATTRIBUTES,
            field.name(),
            Value::I64(value),
            &mut self.attributes,
        );
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        encode::key_value(
            EVENT_ATTRIBUTES,
            field.name(),
            Value::F64(value),
            &mut self.attributes,
        );
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        encode::key_value(
            EVENT_ATTRIBUTES,
            field.name(),
            Value::Bool(value),
            &mut self.attributes,
        );
    }
}

/// Now, in nanoseconds since the Unix epoch (0 before it).
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Writes the sampled span `recorded`, with ids `fixed`, that ended at
/// `end`, as the body of an OTLP `Span` message (no tag or length).
pub(crate) fn encode_span(recorded: &Recording, fixed: &Fixed, end: u64, out: &mut Vec<u8>) {
    use encode::{
        HAS_IS_REMOTE, bytes, fixed32, fixed64, header, remote, sampled, string, string_len, uint,
        uint_len,
    };
    let own = &fixed.own;
    bytes(1, &own.trace_id.to_be_bytes(), out);
    bytes(2, &own.span_id.to_be_bytes(), out);
    string(3, &own.state, out);
    if fixed.parent_span_id != 0 {
        bytes(4, &fixed.parent_span_id.to_be_bytes(), out);
    }
    string(5, &recorded.name, out);
    uint(6, recorded.kind, out);
    fixed64(7, recorded.start, out);
    fixed64(8, end, out);
    out.extend_from_slice(&recorded.attributes);
    uint(10, u64::from(recorded.dropped_attributes), out);
    out.extend_from_slice(&recorded.events);
    uint(12, u64::from(recorded.dropped_events), out);
    out.extend_from_slice(&recorded.links);
    uint(14, u64::from(recorded.dropped_links), out);
    let message = &recorded.status_message;
    header(
        15,
        string_len(message) + uint_len(recorded.status_code),
        out,
    );
    string(2, message, out);
    uint(3, recorded.status_code, out);
    let flags = sampled(own.sampled) | HAS_IS_REMOTE | remote(fixed.parent_remote);
    fixed32(16, flags, out);
}

#[cfg(test)]
mod tests {
    use opentelemetry_proto::tonic::trace::v1::Span as SpanProto;
    use prost::Message;

    use super::*;

    #[test]
    fn a_span_keeps_at_most_128_attributes_and_links_and_counts_the_rest() {
        let mut recording = Recording::new("many", 1);
        let caller = SpanContext {
            trace_id: 7,
            span_id: 8,
            sampled: true,
            state: String::new(),
        };
        for i in 0..200 {
            recording.attribute("n", Value::I64(i));
            recording.link(&caller);
        }
        let fixed = Fixed {
            own: SpanContext {
                trace_id: 1,
                span_id: 2,
                sampled: true,
                state: String::new(),
            },
            parent_span_id: 0,
            parent_remote: false,
        };
        let mut out = Vec::new();
        encode_span(&recording, &fixed, 2, &mut out);
        let span = SpanProto::decode(out.as_slice()).unwrap();
        assert_eq!(
            (span.attributes.len(), span.dropped_attributes_count),
            (128, 72)
        );
        assert_eq!((span.links.len(), span.dropped_links_count), (128, 72));
    }

    #[test]
    fn otel_kind_and_status_read_as_tracing_opentelemetry_reads_them() {
        assert_eq!(kind("server"), 2);
        assert_eq!(kind("CLIENT"), 3);
        assert_eq!(kind("consumer"), 5);
        assert_eq!(kind("sideways"), KIND_INTERNAL);
        let mut r = Recording::new("s", 1);
        assert!(r.special("otel.status_code", "Error"));
        assert_eq!(r.status_code, STATUS_ERROR);
        assert!(r.special("otel.status_code", "ok"));
        assert_eq!(r.status_code, STATUS_OK);
        assert!(r.special("otel.status_description", "broke"));
        assert_eq!(
            (r.status_code, r.status_message.as_str()),
            (STATUS_ERROR, "broke")
        );
        assert!(!r.special("otel.other", "x"));
    }
}
