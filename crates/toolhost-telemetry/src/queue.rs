//! The export queue: each span is encoded into OTLP bytes on the thread that
//! ends it, and only those bytes wait for the exporter's thread.
//!
//! The SDK's batch processor hands every ended span to its exporter thread
//! as a `SpanData`: a name, a vector of attributes, strings, each its own
//! allocation, made on one core and read and freed on the other. On a
//! traced call of about 20 µs that hand-over cost more than everything
//! else the traces add (2–3 µs a call, measured with a processor that
//! dropped spans at once against one that handed them to another thread
//! unencoded; docs/benchmarks-log.md, "traces"). Here [`Encoding::on_end`]
//! turns the span into its OTLP message (protobuf, written by
//! [`crate::encode`] without allocating, or JSON) at once, in a scratch
//! buffer of the calling thread, and appends the bytes to the queue: the `SpanData` is freed where it was made, and what crosses to
//! the exporter is one growing buffer.
//!
//! The queue is bounded as the SDK's is (`OTEL_BSP_MAX_QUEUE_SIZE`
//! spans, 2,048 by default, and [`MAX_QUEUED_BYTES`]): a span that finds
//! it full is dropped and counted, never waited for. Once
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans (512) are queued the exporter is
//! woken; otherwise it sends what is queued every `OTEL_BSP_SCHEDULE_DELAY`
//! (5 s). [`Queue::body`] wraps the queued spans into one
//! `ExportTraceServiceRequest` with the resource and scope.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource as ResourceProto;
use opentelemetry_proto::tonic::trace::v1::Span as SpanProto;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
use prost::Message;

use crate::export::Protocol;
use crate::send::Wake;

/// At most this many bytes of encoded spans wait (with the span count's
/// bound, whichever comes first): a span is bounded by what toolhost
/// records, so this only guards against a span made far larger than that.
pub(crate) const MAX_QUEUED_BYTES: usize = 32 << 20;

/// The shortest wait between two sends the variables may ask for.
pub(crate) const MIN_DELAY: Duration = Duration::from_millis(10);

/// The queue's bounds and when to wake the exporter, from the
/// `OTEL_BSP_*` variables (the SDK's defaults when unset or malformed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Spans that may wait (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub(crate) max_queued: usize,
    /// Spans queued that wake the exporter (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`).
    pub(crate) batch: usize,
    /// How often the exporter sends what is queued (`OTEL_BSP_SCHEDULE_DELAY`).
    pub(crate) delay: Duration,
}

impl Limits {
    /// The limits the variables name, read through `var`.
    pub(crate) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Limits {
        let number = |name: &str| var(name).and_then(|v| v.trim().parse::<u64>().ok());
        let max_queued = number("OTEL_BSP_MAX_QUEUE_SIZE")
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .unwrap_or(2048);
        let batch = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE")
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0)
            .unwrap_or(512)
            .min(max_queued);
        // At least MIN_DELAY: a delay of 0 would have the exporter's
        // thread wake without pause, a core spent on nothing.
        let delay =
            Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY").unwrap_or(5000)).max(MIN_DELAY);
        Limits {
            max_queued,
            batch,
            delay,
        }
    }
}

/// What waits for the exporter: the encoded spans, and what was dropped.
#[derive(Debug, Default)]
pub(crate) struct Queued {
    /// The spans, each an encoded `Span` message (protobuf: as field 2 of
    /// `ScopeSpans`, tag and length included; JSON: an object, comma-led
    /// after the first).
    pub(crate) bytes: Vec<u8>,
    /// How many spans `bytes` holds.
    pub(crate) spans: usize,
    /// Spans dropped because the queue was full, since the last take.
    pub(crate) dropped: u64,
}

/// The resource every body carries, encoded once.
#[derive(Debug, Clone, Default)]
struct Frame {
    resource: Vec<u8>,
    resource_schema: String,
}

/// The queue the processor fills and the exporter's thread empties.
#[derive(Debug)]
pub(crate) struct Queue {
    protocol: Protocol,
    limits: Limits,
    queued: Mutex<Queued>,
    frame: Mutex<Frame>,
    /// The scope every body carries, encoded from the first span's.
    scope: OnceLock<Vec<u8>>,
    /// Whether the exporter was woken for a full batch and has not yet
    /// taken it (so a burst wakes it once).
    woken: AtomicBool,
}

impl Queue {
    pub(crate) fn new(protocol: Protocol, limits: Limits) -> Queue {
        Queue {
            protocol,
            limits,
            queued: Mutex::new(Queued::default()),
            frame: Mutex::new(Frame::default()),
            scope: OnceLock::new(),
            woken: AtomicBool::new(false),
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Takes what is queued, leaving `spare` (emptied) in its place so the
    /// buffers are reused.
    pub(crate) fn take(&self, mut spare: Vec<u8>) -> Queued {
        spare.clear();
        self.woken.store(false, Ordering::Relaxed);
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(
            &mut *queued,
            Queued {
                bytes: spare,
                spans: 0,
                dropped: 0,
            },
        )
    }

    /// The request body for `queued`'s spans: one `ExportTraceServiceRequest`
    /// with one resource and one scope, in the queue's protocol.
    pub(crate) fn body(&self, queued: &Queued) -> Vec<u8> {
        let frame = self
            .frame
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let scope = self.scope.get().map_or(&[][..], Vec::as_slice);
        match self.protocol {
            Protocol::HttpProtobuf => protobuf_body(&frame, scope, &queued.bytes),
            Protocol::HttpJson => json_body(&frame, scope, &queued.bytes),
        }
    }

    /// Appends one encoded span (protobuf: a `Span` message's body; JSON:
    /// its object), or counts it dropped when the queue is full; `true`
    /// when the exporter should be woken for a full batch.
    fn push(&self, encoded: &[u8]) -> bool {
        let mut queued = self.queued.lock().unwrap_or_else(PoisonError::into_inner);
        let room = queued.spans < self.limits.max_queued
            && queued.bytes.len().saturating_add(encoded.len()) <= MAX_QUEUED_BYTES;
        if !room {
            queued.dropped = queued.dropped.saturating_add(1);
            return false;
        }
        match self.protocol {
            Protocol::HttpProtobuf => {
                field_header(SCOPE_SPANS_SPANS, encoded.len(), &mut queued.bytes);
            }
            Protocol::HttpJson if queued.spans > 0 => queued.bytes.push(b','),
            Protocol::HttpJson => {}
        }
        queued.bytes.extend_from_slice(encoded);
        queued.spans += 1;
        queued.spans >= self.limits.batch
    }
}

/// The most a thread's scratch buffer keeps between spans.
const SCRATCH_KEPT: usize = 64 << 10;

thread_local! {
    /// The calling thread's scratch buffer for one span's bytes.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The span processor: encodes each sampled span as it ends and queues
/// the bytes ([module doc](self)).
#[derive(Debug)]
pub(crate) struct Encoding {
    queue: Arc<Queue>,
    wake: SyncSender<Wake>,
}

impl Encoding {
    pub(crate) fn new(queue: Arc<Queue>, wake: SyncSender<Wake>) -> Encoding {
        Encoding { queue, wake }
    }
}

impl SpanProcessor for Encoding {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        self.set_scope_once(&span);
        let full = SCRATCH.with(|scratch| {
            let Ok(mut scratch) = scratch.try_borrow_mut() else {
                return false;
            };
            scratch.clear();
            match self.queue.protocol {
                Protocol::HttpProtobuf => crate::encode::span(&span, &mut scratch),
                Protocol::HttpJson => {
                    if serde_json::to_writer(&mut *scratch, &SpanProto::from(span)).is_err() {
                        return false;
                    }
                }
            }
            let full = self.queue.push(&scratch);
            if scratch.capacity() > SCRATCH_KEPT {
                // One unusually large span does not keep its buffer.
                *scratch = Vec::new();
            }
            full
        });
        if full && !self.queue.woken.swap(true, Ordering::Relaxed) {
            // A full channel means a wake is already waiting.
            let _ = self.wake.try_send(Wake::Batch);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        crate::send::ask(&self.wake, Wake::Flush, FLUSH_WAIT)
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        crate::send::ask(&self.wake, Wake::Shutdown, timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        let attributes = ResourceAttributesWithSchema::from(resource);
        let proto = ResourceProto {
            attributes: attributes.attributes.0,
            dropped_attributes_count: 0,
            entity_refs: vec![],
        };
        let mut frame = self
            .queue
            .frame
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        frame.resource = match self.queue.protocol {
            Protocol::HttpProtobuf => proto.encode_to_vec(),
            Protocol::HttpJson => serde_json::to_vec(&proto).unwrap_or_else(|_| b"{}".to_vec()),
        };
        frame.resource_schema = attributes.schema_url.unwrap_or_default();
    }
}

/// How long [`Encoding::force_flush`] waits for the exporter.
const FLUSH_WAIT: Duration = Duration::from_secs(5);

impl Encoding {
    /// Encodes the scope of the first span: every span comes from the one
    /// tracer `Telemetry` makes (`toolhost`).
    fn set_scope_once(&self, span: &SpanData) {
        self.queue.scope.get_or_init(|| {
            let scope = InstrumentationScope::from((&span.instrumentation_scope, None));
            match self.queue.protocol {
                Protocol::HttpProtobuf => scope.encode_to_vec(),
                Protocol::HttpJson => serde_json::to_vec(&scope).unwrap_or_else(|_| b"{}".to_vec()),
            }
        });
    }
}

/// Field numbers of OTLP's trace messages (opentelemetry/proto/trace/v1,
/// collector/trace/v1).
const REQUEST_RESOURCE_SPANS: u32 = 1;
const RESOURCE_SPANS_RESOURCE: u32 = 1;
const RESOURCE_SPANS_SCOPE_SPANS: u32 = 2;
const RESOURCE_SPANS_SCHEMA_URL: u32 = 3;
const SCOPE_SPANS_SCOPE: u32 = 1;
const SCOPE_SPANS_SPANS: u32 = 2;

/// Writes `bytes` as the length-delimited field `tag`.
fn field(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    field_header(tag, bytes.len(), out);
    out.extend_from_slice(bytes);
}

/// The tag and length of a length-delimited field of `len` bytes.
fn field_header(tag: u32, len: usize, out: &mut Vec<u8>) {
    prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(len as u64, out);
}

/// The bytes a length-delimited field of `len` bytes takes (all tags here
/// are below 16: one byte).
fn field_len(len: usize) -> usize {
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

/// The protobuf `ExportTraceServiceRequest` around `spans` (each already a
/// `ScopeSpans.spans` field), written once: the lengths are computed first.
fn protobuf_body(frame: &Frame, scope: &[u8], spans: &[u8]) -> Vec<u8> {
    let scope_spans = field_len(scope.len()) + spans.len();
    let schema = &frame.resource_schema;
    let resource_spans = field_len(frame.resource.len())
        + field_len(scope_spans)
        + if schema.is_empty() {
            0
        } else {
            field_len(schema.len())
        };
    let mut out = Vec::with_capacity(field_len(resource_spans));
    field_header(REQUEST_RESOURCE_SPANS, resource_spans, &mut out);
    field(RESOURCE_SPANS_RESOURCE, &frame.resource, &mut out);
    field_header(RESOURCE_SPANS_SCOPE_SPANS, scope_spans, &mut out);
    field(SCOPE_SPANS_SCOPE, scope, &mut out);
    out.extend_from_slice(spans);
    if !schema.is_empty() {
        field(RESOURCE_SPANS_SCHEMA_URL, schema.as_bytes(), &mut out);
    }
    out
}

/// The JSON `ExportTraceServiceRequest` around `spans` (span objects,
/// comma-separated).
fn json_body(frame: &Frame, scope: &[u8], spans: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(spans.len() + frame.resource.len() + scope.len() + 64);
    let or_empty = |b: &[u8]| {
        if b.is_empty() {
            b"{}".to_vec()
        } else {
            b.to_vec()
        }
    };
    out.extend_from_slice(b"{\"resourceSpans\":[{\"resource\":");
    out.extend_from_slice(&or_empty(&frame.resource));
    if !frame.resource_schema.is_empty() {
        out.extend_from_slice(b",\"schemaUrl\":");
        // A string serializes without fail.
        let _ = serde_json::to_writer(&mut out, &frame.resource_schema);
    }
    out.extend_from_slice(b",\"scopeSpans\":[{\"scope\":");
    out.extend_from_slice(&or_empty(scope));
    out.extend_from_slice(b",\"spans\":[");
    out.extend_from_slice(spans);
    out.extend_from_slice(b"]}]}]}");
    out
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{Tracer as _, TracerProvider as _};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    use super::*;

    /// A provider whose spans go to a queue of `protocol` (no exporter
    /// thread: the test takes the queue itself), and the queue.
    fn queued(protocol: Protocol, max_queued: usize) -> (SdkTracerProvider, Arc<Queue>) {
        let limits = Limits {
            max_queued,
            batch: 2,
            delay: Duration::from_secs(3600),
        };
        let queue = Arc::new(Queue::new(protocol, limits));
        let (wake, _woken) = std::sync::mpsc::sync_channel(WAKES_IN_TESTS);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(Encoding::new(queue.clone(), wake))
            .with_resource(
                Resource::builder()
                    .with_service_name("svc")
                    .with_schema_url([], "https://opentelemetry.io/schemas/1.36.0")
                    .build(),
            )
            .build();
        (provider, queue)
    }

    const WAKES_IN_TESTS: usize = 4;

    fn end_spans(provider: &SdkTracerProvider, names: &[&'static str]) {
        let tracer = provider.tracer("toolhost");
        for name in names {
            tracer.in_span(*name, |_| {});
        }
    }

    fn request(queue: &Queue) -> ExportTraceServiceRequest {
        let queued = queue.take(Vec::new());
        let body = queue.body(&queued);
        match queue.protocol {
            Protocol::HttpProtobuf => {
                ExportTraceServiceRequest::decode(body.as_slice()).expect("a protobuf request")
            }
            Protocol::HttpJson => serde_json::from_slice(&body).expect("a JSON request"),
        }
    }

    fn names_and_service(
        request: &ExportTraceServiceRequest,
    ) -> (Vec<String>, Vec<String>, String) {
        let [resource] = request.resource_spans.as_slice() else {
            panic!("one resource: {request:?}");
        };
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .filter(|kv| kv.key == "service.name")
            .map(|kv| format!("{:?}", kv.value))
            .collect();
        let scopes = resource
            .scope_spans
            .iter()
            .map(|s| s.scope.as_ref().map(|s| s.name.clone()).unwrap_or_default())
            .collect();
        let names = resource
            .scope_spans
            .iter()
            .flat_map(|s| &s.spans)
            .map(|s| s.name.clone())
            .collect();
        (names, scopes, service)
    }

    #[test]
    fn queued_spans_make_one_protobuf_request_with_the_resource_and_scope() {
        let (provider, queue) = queued(Protocol::HttpProtobuf, 16);
        end_spans(&provider, &["one", "two", "three"]);
        let request = request(&queue);
        assert_eq!(
            request.resource_spans[0].schema_url,
            "https://opentelemetry.io/schemas/1.36.0"
        );
        let (names, scopes, service) = names_and_service(&request);
        assert_eq!(names, ["one", "two", "three"]);
        assert_eq!(scopes, ["toolhost"]);
        assert!(service.contains("svc"), "{service}");
        // Taken: the next request is empty.
        assert_eq!(queue.take(Vec::new()).spans, 0);
    }

    #[test]
    fn queued_spans_make_one_json_request_the_official_types_read() {
        let (provider, queue) = queued(Protocol::HttpJson, 16);
        end_spans(&provider, &["one", "two"]);
        let (names, scopes, service) = names_and_service(&request(&queue));
        assert_eq!(names, ["one", "two"]);
        assert_eq!(scopes, ["toolhost"]);
        assert!(service.contains("svc"), "{service}");
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let (provider, queue) = queued(Protocol::HttpProtobuf, 2);
        end_spans(&provider, &["kept", "kept too", "dropped", "dropped too"]);
        let queued = queue.take(Vec::new());
        assert_eq!((queued.spans, queued.dropped), (2, 2));
        // Room again once taken.
        end_spans(&provider, &["after"]);
        assert_eq!(queue.take(Vec::new()).spans, 1);
    }

    #[test]
    fn the_limits_are_the_variables_and_the_sdks_defaults() {
        let none = Limits::from_vars(|_| None);
        assert_eq!(
            (none.max_queued, none.batch, none.delay),
            (2048, 512, Duration::from_secs(5))
        );
        let set = Limits::from_vars(|name| {
            match name {
                "OTEL_BSP_MAX_QUEUE_SIZE" => Some("100"),
                "OTEL_BSP_MAX_EXPORT_BATCH_SIZE" => Some("1000"),
                "OTEL_BSP_SCHEDULE_DELAY" => Some(" 100 "),
                _ => None,
            }
            .map(str::to_owned)
        });
        // A batch larger than the queue is the queue.
        assert_eq!(
            (set.max_queued, set.batch, set.delay),
            (100, 100, Duration::from_millis(100))
        );
        let junk = Limits::from_vars(|_| Some("-1e99".to_owned()));
        assert_eq!(junk, none);
        // No delay of 0: the exporter's thread would spin.
        let zero =
            Limits::from_vars(|name| (name == "OTEL_BSP_SCHEDULE_DELAY").then(|| "0".to_owned()));
        assert_eq!(zero.delay, MIN_DELAY);
    }
}
