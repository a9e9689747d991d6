//! The export queue: each span is encoded into OTLP bytes on the thread that
//! ends it (`layer.rs`), and only those bytes wait for the exporter's thread.
//!
//! The SDK's batch processor handed every ended span to its exporter
//! thread as a `SpanData`: a name, a vector of attributes, strings, each
//! its own allocation, made on one core and read and freed on the other.
//! On a traced call of about 20 µs that hand-over cost more than
//! everything else the traces added (docs/log.md, "traces").
//! Here [`Queue::push_span`] writes the span's OTLP message at once, in a
//! scratch buffer of the calling thread (protobuf; for `http/json` the
//! protobuf is read back into the official types and written as JSON),
//! and appends the bytes to the queue: what crosses to the exporter is
//! one growing buffer.
//!
//! The queue is bounded as the SDK's is (`OTEL_BSP_MAX_QUEUE_SIZE`
//! spans, 2,048 by default, and [`MAX_QUEUED_BYTES`]): a span that finds
//! it full is dropped and counted, never waited for. Once
//! `OTEL_BSP_MAX_EXPORT_BATCH_SIZE` spans (512) are queued the exporter is
//! woken; otherwise it sends what is queued every `OTEL_BSP_SCHEDULE_DELAY`
//! (5 s). [`Queue::bodies`] wraps the queued spans into
//! `ExportTraceServiceRequest`s with the resource and scope, a batch each.

use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, SyncSender};
use std::time::Duration;

use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource as ResourceProto;
use opentelemetry_proto::tonic::trace::v1::Span as SpanProto;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_sdk::Resource;
use prost::Message;

use crate::protocol::Protocol;

/// Why the exporter's thread is woken.
#[derive(Debug)]
pub(crate) enum Wake {
    /// A batch is full: send it.
    Batch,
    /// Send what is queued, answer, and stop.
    Shutdown(Sender<()>),
}

/// At most this many bytes of encoded spans wait (with the span count's
/// bound, whichever comes first): a span is bounded by what toolhost
/// records, so this only guards against a span made far larger than that.
pub(crate) const MAX_QUEUED_BYTES: usize = 32 << 20;

/// The shortest wait between two sends the variables may ask for.
pub(crate) const MIN_DELAY: Duration = Duration::from_millis(10);

/// The instrumentation scope of every span: the layer's.
pub(crate) const SCOPE: &str = "toolhost";

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
    /// Where each span starts in `bytes` (JSON: its object, after the
    /// comma), so that a request carries at most a batch of them.
    pub(crate) starts: Vec<usize>,
    /// Spans dropped because the queue was full, since the last take.
    pub(crate) dropped: u64,
}

/// The resource and scope every body carries, encoded once.
#[derive(Debug, Clone, Default)]
struct Frame {
    resource: Vec<u8>,
    resource_schema: String,
    scope: Vec<u8>,
}

/// The queue the layer fills and the exporter's thread empties.
#[derive(Debug)]
pub(crate) struct Queue {
    protocol: Protocol,
    limits: Limits,
    queued: Mutex<Queued>,
    frame: Frame,
    /// Whether the exporter was woken for a full batch and has not yet
    /// taken it (so a burst wakes it once).
    woken: AtomicBool,
}

impl Queue {
    /// An empty queue whose requests carry `resource`.
    pub(crate) fn new(protocol: Protocol, limits: Limits, resource: &Resource) -> Queue {
        let attributes = ResourceAttributesWithSchema::from(resource);
        let resource = ResourceProto {
            attributes: attributes.attributes.0,
            dropped_attributes_count: 0,
            entity_refs: vec![],
        };
        let scope = InstrumentationScope {
            name: SCOPE.to_owned(),
            ..Default::default()
        };
        let json = |v: Result<Vec<u8>, serde_json::Error>| v.unwrap_or_else(|_| b"{}".to_vec());
        let (resource, scope) = match protocol {
            Protocol::HttpProtobuf => (resource.encode_to_vec(), scope.encode_to_vec()),
            Protocol::HttpJson => (
                json(serde_json::to_vec(&resource)),
                json(serde_json::to_vec(&scope)),
            ),
        };
        let frame = Frame {
            resource,
            resource_schema: attributes.schema_url.unwrap_or_default(),
            scope,
        };
        Queue {
            protocol,
            limits,
            queued: Mutex::new(Queued::default()),
            frame,
            woken: AtomicBool::new(false),
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    /// Takes what is queued, leaving `spare`'s buffers (emptied) in its
    /// place so they are reused.
    pub(crate) fn take(&self, spare: Queued) -> Queued {
        let (mut bytes, mut starts) = (spare.bytes, spare.starts);
        bytes.clear();
        starts.clear();
        self.woken.store(false, Ordering::Relaxed);
        let mut queued = self.queued.lock();
        std::mem::replace(
            &mut *queued,
            Queued {
                bytes,
                spans: 0,
                starts,
                dropped: 0,
            },
        )
    }

    /// The request bodies for `queued`'s spans, each with how many spans
    /// it carries: one `ExportTraceServiceRequest` (one resource, one
    /// scope, in the queue's protocol) per `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`
    /// spans, as the SDK sent them.
    pub(crate) fn bodies<'q>(
        &'q self,
        queued: &'q Queued,
    ) -> impl Iterator<Item = (usize, Vec<u8>)> + 'q {
        let batch = self.limits.batch.max(1);
        (0..queued.starts.len()).step_by(batch).map(move |first| {
            let after = first.saturating_add(batch).min(queued.starts.len());
            let start = queued.starts[first];
            let end = queued
                .starts
                .get(after)
                .map_or(queued.bytes.len(), |&next| {
                    match self.protocol {
                        Protocol::HttpProtobuf => next,
                        // Without the comma that leads the next object.
                        Protocol::HttpJson => next.saturating_sub(1),
                    }
                });
            let spans = &queued.bytes[start..end];
            let body = match self.protocol {
                Protocol::HttpProtobuf => protobuf_body(&self.frame, spans),
                Protocol::HttpJson => json_body(&self.frame, spans),
            };
            (after - first, body)
        })
    }

    /// Queues one span, which `write` writes as the body of a protobuf
    /// `Span` message; `true` when the exporter should be woken for a
    /// full batch ([`Queue::wake`]).
    pub(crate) fn push_span(&self, write: impl FnOnce(&mut Vec<u8>)) -> bool {
        SCRATCH.with(|scratch| {
            let Ok(mut scratch) = scratch.try_borrow_mut() else {
                // Only a span ended from inside another's encoding finds
                // the buffer taken: it is dropped and counted.
                self.dropped_one();
                return false;
            };
            scratch.clear();
            write(&mut scratch);
            let full = match self.protocol {
                Protocol::HttpProtobuf => self.push(&scratch),
                Protocol::HttpJson => {
                    let json = SpanProto::decode(scratch.as_slice())
                        .ok()
                        .and_then(|span| serde_json::to_vec(&span).ok());
                    match json {
                        Some(json) => self.push(&json),
                        None => {
                            self.dropped_one();
                            false
                        }
                    }
                }
            };
            if scratch.capacity() > SCRATCH_KEPT {
                // One unusually large span does not keep its buffer.
                *scratch = Vec::new();
            }
            full
        })
    }

    /// Wakes the exporter for a full batch, once per batch.
    pub(crate) fn wake(&self, wake: &SyncSender<Wake>) {
        if !self.woken.swap(true, Ordering::Relaxed) {
            // A full channel means a wake is already waiting.
            let _ = wake.try_send(Wake::Batch);
        }
    }

    fn dropped_one(&self) {
        let mut queued = self.queued.lock();
        queued.dropped = queued.dropped.saturating_add(1);
    }

    /// Appends one encoded span (protobuf: a `Span` message's body; JSON:
    /// its object), or counts it dropped when the queue is full; `true`
    /// when the exporter should be woken for a full batch.
    fn push(&self, encoded: &[u8]) -> bool {
        let mut queued = self.queued.lock();
        let room = queued.spans < self.limits.max_queued
            && queued.bytes.len().saturating_add(encoded.len()) <= MAX_QUEUED_BYTES;
        if !room {
            queued.dropped = queued.dropped.saturating_add(1);
            return false;
        }
        match self.protocol {
            Protocol::HttpProtobuf => {
                let start = queued.bytes.len();
                queued.starts.push(start);
                field_header(SCOPE_SPANS_SPANS, encoded.len(), &mut queued.bytes);
            }
            Protocol::HttpJson => {
                if queued.spans > 0 {
                    queued.bytes.push(b',');
                }
                let start = queued.bytes.len();
                queued.starts.push(start);
            }
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
fn protobuf_body(frame: &Frame, spans: &[u8]) -> Vec<u8> {
    let scope = frame.scope.as_slice();
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
fn json_body(frame: &Frame, spans: &[u8]) -> Vec<u8> {
    let scope = frame.scope.as_slice();
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
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::testing::{Kept, exporter_of};

    /// Spans named `names`, ended one after the other under the export
    /// layer with a queue of `protocol` holding at most `max_queued`.
    fn ended(protocol: Protocol, max_queued: usize, names: &[&str]) -> Kept {
        let (exporter, kept) = exporter_of(protocol, max_queued, Default::default());
        let layer = crate::export::layer_of(&exporter, false, false);
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            for name in names {
                let _span =
                    tracing::info_span!(target: "toolhost", "span", otel.name = *name).entered();
            }
        });
        kept
    }

    /// The requests the queued spans make, each with the count it says
    /// it carries.
    fn requests(queue: &Queue) -> Vec<(usize, ExportTraceServiceRequest)> {
        let queued = queue.take(Queued::default());
        queue
            .bodies(&queued)
            .map(|(spans, body)| {
                let request = match queue.protocol {
                    Protocol::HttpProtobuf => ExportTraceServiceRequest::decode(body.as_slice())
                        .expect("a protobuf request"),
                    Protocol::HttpJson => serde_json::from_slice(&body).expect("a JSON request"),
                };
                (spans, request)
            })
            .collect()
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

    /// The names each request carries (the batch is 2 spans here), after
    /// checking each has the resource and scope and says its count.
    fn names_by_request(kept: &Kept) -> Vec<Vec<String>> {
        requests(&kept.queue)
            .iter()
            .map(|(spans, request)| {
                assert_eq!(
                    request.resource_spans[0].schema_url,
                    "https://opentelemetry.io/schemas/1.36.0"
                );
                let (names, scopes, service) = names_and_service(request);
                assert_eq!(scopes, ["toolhost"]);
                assert!(service.contains("svc"), "{service}");
                assert_eq!(*spans, names.len());
                names
            })
            .collect()
    }

    #[test]
    fn queued_spans_make_protobuf_requests_of_a_batch_each_with_the_resource_and_scope() {
        let kept = ended(Protocol::HttpProtobuf, 16, &["one", "two", "three"]);
        assert_eq!(names_by_request(&kept), [vec!["one", "two"], vec!["three"]]);
        // Taken: the next take is empty.
        assert_eq!(kept.queue.take(Queued::default()).spans, 0);
    }

    #[test]
    fn queued_spans_make_json_requests_of_a_batch_each_the_official_types_read() {
        let kept = ended(
            Protocol::HttpJson,
            16,
            &["one", "two", "three", "four", "five"],
        );
        assert_eq!(
            names_by_request(&kept),
            [vec!["one", "two"], vec!["three", "four"], vec!["five"]]
        );
        let kept = ended(Protocol::HttpJson, 16, &["one"]);
        let requests = requests(&kept.queue);
        let span = &requests[0].1.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.trace_id.len(), 16, "ids survive JSON's hex: {span:?}");
        assert!(span.end_time_unix_nano >= span.start_time_unix_nano);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let kept = ended(
            Protocol::HttpProtobuf,
            2,
            &["kept", "kept too", "dropped", "dropped too"],
        );
        let queued = kept.queue.take(Queued::default());
        assert_eq!((queued.spans, queued.dropped), (2, 2));
        // Room again once taken.
        kept.queue.push_span(|_| {});
        assert_eq!(kept.queue.take(queued).spans, 1);
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
