//! One span as OTLP protobuf, written straight from the SDK's `SpanData`.
//!
//! The official message types (`opentelemetry-proto`) build a `Span` of
//! owned strings and vectors first, then encode it, then free it: on a
//! traced call that was half of the export queue's work on the call's
//! thread. [`span`] writes the same bytes (the tests compare the decoded
//! messages) from the `SpanData` as it is, with lengths computed ahead, so
//! nothing is allocated. Field numbers are OTLP's
//! (`opentelemetry/proto/trace/v1/trace.proto`, `common/v1/common.proto`).

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::SpanData;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

/// `SpanFlags`: the flags say whether the parent is remote.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

/// Writes `span` as the body of an OTLP `Span` message (no tag or length).
pub(crate) fn span(span: &SpanData, out: &mut Vec<u8>) {
    let context = &span.span_context;
    bytes(1, &context.trace_id().to_bytes(), out);
    bytes(2, &context.span_id().to_bytes(), out);
    string(3, &context.trace_state().header(), out);
    if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
        bytes(4, &span.parent_span_id.to_bytes(), out);
    }
    string(5, &span.name, out);
    let kind = match span.span_kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    };
    uint(6, kind, out);
    fixed64(7, nanos(span.start_time), out);
    fixed64(8, nanos(span.end_time), out);
    for kv in &span.attributes {
        key_value(9, kv, out);
    }
    uint(10, u64::from(span.dropped_attributes_count), out);
    for event in span.events.iter() {
        let len = fixed64_len(nanos(event.timestamp))
            + string_len(2, &event.name)
            + event
                .attributes
                .iter()
                .map(|kv| nested_len(9, kv_len(kv)))
                .sum::<usize>()
            + uint_len(4, u64::from(event.dropped_attributes_count));
        header(11, len, out);
        fixed64(1, nanos(event.timestamp), out);
        string(2, &event.name, out);
        for kv in &event.attributes {
            key_value(3, kv, out);
        }
        uint(4, u64::from(event.dropped_attributes_count), out);
    }
    uint(12, u64::from(span.events.dropped_count), out);
    for link in span.links.iter() {
        let context = &link.span_context;
        let state = context.trace_state().header();
        let len = 18
            + 10
            + string_len(3, &state)
            + link
                .attributes
                .iter()
                .map(|kv| nested_len(9, kv_len(kv)))
                .sum::<usize>()
            + uint_len(5, u64::from(link.dropped_attributes_count))
            + 5;
        header(13, len, out);
        bytes(1, &context.trace_id().to_bytes(), out);
        bytes(2, &context.span_id().to_bytes(), out);
        string(3, &state, out);
        for kv in &link.attributes {
            key_value(4, kv, out);
        }
        uint(5, u64::from(link.dropped_attributes_count), out);
        let flags =
            u32::from(context.trace_flags().to_u8()) | HAS_IS_REMOTE | remote(context.is_remote());
        fixed32(6, flags, out);
    }
    uint(14, u64::from(span.links.dropped_count), out);
    let (message, code) = match &span.status {
        Status::Unset => ("", 0),
        Status::Ok => ("", 1),
        Status::Error { description } => (description.as_ref(), 2),
    };
    header(15, string_len(2, message) + uint_len(3, code), out);
    string(2, message, out);
    uint(3, code, out);
    let flags = u32::from(context.trace_flags().to_u8())
        | HAS_IS_REMOTE
        | remote(span.parent_span_is_remote);
    fixed32(16, flags, out);
}

fn remote(is: bool) -> u32 {
    if is { IS_REMOTE } else { 0 }
}

fn nanos(time: std::time::SystemTime) -> u64 {
    time.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A tag and length, for a nested message of `len` bytes.
fn header(tag: u32, len: usize, out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// The bytes a nested field of `len` bytes takes, tag and length included
/// (tags here are all below 16: one byte).
fn nested_len(_tag: u32, len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

fn bytes(tag: u32, value: &[u8], out: &mut Vec<u8>) {
    if !value.is_empty() {
        header(tag, value.len(), out);
        out.extend_from_slice(value);
    }
}

fn string(tag: u32, value: &str, out: &mut Vec<u8>) {
    bytes(tag, value.as_bytes(), out);
}

fn string_len(tag: u32, value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        nested_len(tag, value.len())
    }
}

fn uint(tag: u32, value: u64, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::Varint, out);
        encode_varint(value, out);
    }
}

fn uint_len(_tag: u32, value: u64) -> usize {
    if value == 0 {
        0
    } else {
        1 + encoded_len_varint(value)
    }
}

fn fixed64(tag: u32, value: u64, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::SixtyFourBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed64_len(value: u64) -> usize {
    if value == 0 { 0 } else { 9 }
}

fn fixed32(tag: u32, value: u32, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::ThirtyTwoBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

/// A `KeyValue` as field `tag`.
fn key_value(tag: u32, kv: &KeyValue, out: &mut Vec<u8>) {
    header(tag, kv_len(kv), out);
    string(1, kv.key.as_str(), out);
    let len = any_len(&kv.value);
    header(2, len, out);
    any(&kv.value, out);
}

/// The body of a `KeyValue`: its key and its `AnyValue`.
fn kv_len(kv: &KeyValue) -> usize {
    string_len(1, kv.key.as_str()) + nested_len(2, any_len(&kv.value))
}

/// The body of an `AnyValue` (a oneof: written even when zero).
fn any_len(value: &Value) -> usize {
    match value {
        Value::Bool(_) => 2,
        Value::I64(i) => 1 + encoded_len_varint(*i as u64),
        Value::F64(_) => 9,
        Value::String(s) => 1 + encoded_len_varint(s.as_str().len() as u64) + s.as_str().len(),
        Value::Array(array) => nested_len(5, array_len(array)),
        other => {
            let text = other.as_str();
            1 + encoded_len_varint(text.len() as u64) + text.len()
        }
    }
}

fn any(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Bool(b) => {
            encode_key(2, WireType::Varint, out);
            encode_varint(u64::from(*b), out);
        }
        Value::I64(i) => {
            encode_key(3, WireType::Varint, out);
            encode_varint(*i as u64, out);
        }
        Value::F64(f) => {
            encode_key(4, WireType::SixtyFourBit, out);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::String(s) => oneof_string(s.as_str(), out),
        Value::Array(array) => {
            header(5, array_len(array), out);
            array_values(array, out);
        }
        other => oneof_string(&other.as_str(), out),
    }
}

fn oneof_string(text: &str, out: &mut Vec<u8>) {
    header(1, text.len(), out);
    out.extend_from_slice(text.as_bytes());
}

/// The body of an `ArrayValue`: its values, each an `AnyValue` (field 1).
fn array_len(array: &Array) -> usize {
    let mut len = 0;
    each_value(array, |v| len += nested_len(1, any_len(&v)));
    len
}

fn array_values(array: &Array, out: &mut Vec<u8>) {
    each_value(array, |v| {
        header(1, any_len(&v), out);
        any(&v, out);
    });
}

/// Calls `f` with each element of `array` as a `Value` (strings are
/// reference-counted or static: cloning one does not copy the text).
fn each_value(array: &Array, mut f: impl FnMut(Value)) {
    match array {
        Array::Bool(v) => v.iter().for_each(|b| f(Value::Bool(*b))),
        Array::I64(v) => v.iter().for_each(|i| f(Value::I64(*i))),
        Array::F64(v) => v.iter().for_each(|x| f(Value::F64(*x))),
        Array::String(v) => v
            .iter()
            .for_each(|s: &StringValue| f(Value::String(s.clone()))),
        other => f(Value::String(other.to_string().into())),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::time::{Duration, SystemTime};

    use opentelemetry::trace::{Event, Link, SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry::{InstrumentationScope, KeyValue};
    use opentelemetry_proto::tonic::trace::v1::Span as SpanProto;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message;

    use super::*;

    fn context(trace: u128, span: u64, remote: bool) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            remote,
            TraceState::from_key_value([("vendor", "v1")]).unwrap(),
        )
    }

    fn every_kind_of_field() -> SpanData {
        let attributes = vec![
            KeyValue::new("gen_ai.tool.name", "calculate"),
            KeyValue::new("toolhost.cached", false),
            KeyValue::new("count", 0_i64),
            KeyValue::new("negative", -3_i64),
            KeyValue::new("ratio", 0.5_f64),
            KeyValue::new("empty", ""),
            KeyValue::new("long", "é".repeat(300)),
            KeyValue::new(
                "list",
                Value::Array(Array::String(vec!["a".into(), "".into()])),
            ),
            KeyValue::new("flags", Value::Array(Array::Bool(vec![true, false]))),
            KeyValue::new("numbers", Value::Array(Array::I64(vec![1, -1, 0]))),
            KeyValue::new("reals", Value::Array(Array::F64(vec![1.5]))),
        ];
        let mut events = SpanEvents::default();
        events.events.push(Event::new(
            "log line",
            SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_000_123),
            vec![KeyValue::new("plugin", "p")],
            2,
        ));
        events.dropped_count = 1;
        let mut links = SpanLinks::default();
        links.links.push(Link::new(
            context(7, 8, true),
            vec![KeyValue::new("why", "caller")],
            0,
        ));
        SpanData {
            span_context: context(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef, 42, false),
            parent_span_id: SpanId::from(41),
            parent_span_is_remote: true,
            span_kind: SpanKind::Server,
            name: Cow::Owned("execute_tool calculate".to_owned()),
            start_time: SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_000_000),
            end_time: SystemTime::UNIX_EPOCH + Duration::from_nanos(1_700_000_000_000_020_000),
            attributes,
            dropped_attributes_count: 3,
            events,
            links,
            status: Status::error("tool_error"),
            instrumentation_scope: InstrumentationScope::builder("toolhost").build(),
        }
    }

    /// What the official conversion and prost make of `data`, decoded
    /// beside what [`span`] wrote.
    fn both(data: SpanData) -> (SpanProto, SpanProto) {
        let mut ours = Vec::new();
        span(&data, &mut ours);
        let ours = SpanProto::decode(ours.as_slice()).expect("our bytes decode");
        let official = SpanProto::decode(SpanProto::from(data).encode_to_vec().as_slice())
            .expect("theirs decode");
        (ours, official)
    }

    #[test]
    fn a_span_with_every_kind_of_field_decodes_as_the_official_encoding_does() {
        let (ours, official) = both(every_kind_of_field());
        assert_eq!(ours, official);
    }

    #[test]
    fn a_bare_span_decodes_as_the_official_encoding_does() {
        let mut data = every_kind_of_field();
        data.attributes.clear();
        data.events = SpanEvents::default();
        data.links = SpanLinks::default();
        data.parent_span_id = SpanId::INVALID;
        data.parent_span_is_remote = false;
        data.span_kind = SpanKind::Internal;
        data.status = Status::Unset;
        data.dropped_attributes_count = 0;
        data.span_context = SpanContext::new(
            TraceId::from(1),
            SpanId::from(2),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        );
        let (ours, official) = both(data.clone());
        assert_eq!(ours, official);
        data.status = Status::Ok;
        data.span_kind = SpanKind::Client;
        let (ours, official) = both(data);
        assert_eq!(ours, official);
    }
}
