//! OTLP protobuf, written by hand: the fields of a span (`record.rs` puts
//! one together from what the layer recorded), and the attributes, events
//! and links it records as they come.
//!
//! The official message types (`opentelemetry-proto`) build a `Span` of
//! owned strings and vectors first, then encode it, then free it. Here
//! each part is written where it is known, with lengths computed ahead,
//! and the span's bytes are the recorded parts put together. The layer's
//! tests decode what is written and compare it with what
//! `tracing-opentelemetry`, the SDK and the official conversion make of
//! the same `tracing` spans. Field numbers are OTLP's
//! (`opentelemetry/proto/trace/v1/trace.proto`, `common/v1/common.proto`).

use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use crate::context::SpanContext;

/// `SpanFlags`: the flags say whether the parent is remote.
pub(crate) const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;
/// `SpanFlags`' sampled bit (W3C trace flags).
const SAMPLED: u32 = 0x01;

/// An attribute's value, as `tracing` fields give them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Str(&'a str),
    Bool(bool),
    I64(i64),
    F64(f64),
}

/// Writes one `Span.events` field (11): at `time`, named `name`, with
/// `attributes` (already `Event.attributes` fields).
pub(crate) fn event(time: u64, name: &str, attributes: &[u8], out: &mut Vec<u8>) {
    let len = fixed64_len(time) + string_len(name) + attributes.len();
    header(11, len, out);
    fixed64(1, time, out);
    string(2, name, out);
    out.extend_from_slice(attributes);
}

/// Writes one `Span.links` field (13), to the remote span `to`.
pub(crate) fn link(to: &SpanContext, out: &mut Vec<u8>) {
    // The two ids (tag, length, 16 or 8 bytes) and the flags (tag, 4).
    let len = 18 + 10 + string_len(&to.state) + 5;
    header(13, len, out);
    bytes(1, &to.trace_id.to_be_bytes(), out);
    bytes(2, &to.span_id.to_be_bytes(), out);
    string(3, &to.state, out);
    let flags = sampled(to.sampled) | HAS_IS_REMOTE | IS_REMOTE;
    fixed32(6, flags, out);
}

/// Writes a `KeyValue` as field `tag`.
pub(crate) fn key_value(tag: u32, key: &str, value: Value<'_>, out: &mut Vec<u8>) {
    let any = any_len(value);
    header(tag, string_len(key) + nested_len(any), out);
    string(1, key, out);
    header(2, any, out);
    match value {
        Value::Str(text) => {
            // A oneof: written even when empty.
            header(1, text.len(), out);
            out.extend_from_slice(text.as_bytes());
        }
        Value::Bool(b) => {
            encode_key(2, WireType::Varint, out);
            encode_varint(u64::from(b), out);
        }
        Value::I64(i) => {
            encode_key(3, WireType::Varint, out);
            encode_varint(i.cast_unsigned(), out);
        }
        Value::F64(f) => {
            encode_key(4, WireType::SixtyFourBit, out);
            out.extend_from_slice(&f.to_le_bytes());
        }
    }
}

/// The body of an `AnyValue` (a oneof: written even when zero).
fn any_len(value: Value<'_>) -> usize {
    match value {
        Value::Str(text) => nested_len(text.len()),
        Value::Bool(_) => 2,
        Value::I64(i) => 1 + encoded_len_varint(i.cast_unsigned()),
        Value::F64(_) => 9,
    }
}

pub(crate) fn sampled(is: bool) -> u32 {
    if is { SAMPLED } else { 0 }
}

pub(crate) fn remote(is: bool) -> u32 {
    if is { IS_REMOTE } else { 0 }
}

/// A tag and length, for a nested message of `len` bytes.
pub(crate) fn header(tag: u32, len: usize, out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(len as u64, out);
}

/// The bytes a nested field of `len` bytes takes, tag and length included
/// (tags here are all below 16: one byte).
fn nested_len(len: usize) -> usize {
    1 + encoded_len_varint(len as u64) + len
}

pub(crate) fn bytes(tag: u32, value: &[u8], out: &mut Vec<u8>) {
    if !value.is_empty() {
        header(tag, value.len(), out);
        out.extend_from_slice(value);
    }
}

pub(crate) fn string(tag: u32, value: &str, out: &mut Vec<u8>) {
    bytes(tag, value.as_bytes(), out);
}

pub(crate) fn string_len(value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        nested_len(value.len())
    }
}

pub(crate) fn uint(tag: u32, value: u64, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::Varint, out);
        encode_varint(value, out);
    }
}

pub(crate) fn uint_len(value: u64) -> usize {
    if value == 0 {
        0
    } else {
        1 + encoded_len_varint(value)
    }
}

pub(crate) fn fixed64(tag: u32, value: u64, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::SixtyFourBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed64_len(value: u64) -> usize {
    if value == 0 { 0 } else { 9 }
}

pub(crate) fn fixed32(tag: u32, value: u32, out: &mut Vec<u8>) {
    if value != 0 {
        encode_key(tag, WireType::ThirtyTwoBit, out);
        out.extend_from_slice(&value.to_le_bytes());
    }
}
