//! For this crate's tests: toolhost's export layer over a queue the test
//! reads, and the spans it queued, decoded with the official types.

use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use opentelemetry_proto::tonic::trace::v1::{ScopeSpans, Span as SpanProto};
use opentelemetry_sdk::Resource;
use prost::Message;

use crate::export::{Exporter, Protocol};
use crate::queue::Wake;
use crate::queue::{Limits, Queue};
use crate::sampler::Sampler;

/// The spans an [`exporter`]'s layer queued.
#[derive(Debug)]
pub(crate) struct Kept {
    pub(crate) queue: Arc<Queue>,
    _woken: Receiver<Wake>,
}

impl Kept {
    /// The spans queued since the last call (the sampled ones), in the
    /// order they ended.
    pub(crate) fn spans(&self) -> Vec<SpanProto> {
        let queued = self.queue.take(crate::queue::Queued::default());
        ScopeSpans::decode(queued.bytes.as_slice())
            .expect("the queue holds ScopeSpans.spans fields")
            .spans
    }
}

/// An exporter with `sampler` whose spans stay in the [`Kept`] (protobuf,
/// room for 1,000 spans, no exporter thread).
pub(crate) fn exporter(sampler: Sampler) -> (Exporter, Kept) {
    exporter_of(Protocol::HttpProtobuf, 1000, sampler)
}

/// The same, in `protocol`, with room for `max_queued` spans.
pub(crate) fn exporter_of(
    protocol: Protocol,
    max_queued: usize,
    sampler: Sampler,
) -> (Exporter, Kept) {
    let limits = Limits {
        max_queued,
        batch: 2,
        delay: Duration::from_secs(3600),
    };
    let resource = Resource::builder()
        .with_service_name("svc")
        .with_schema_url([], "https://opentelemetry.io/schemas/1.36.0")
        .build();
    let queue = Arc::new(Queue::new(protocol, limits, &resource));
    let (wake, woken) = std::sync::mpsc::sync_channel(4);
    (
        Exporter {
            queue: queue.clone(),
            wake,
            sampler,
        },
        Kept {
            queue,
            _woken: woken,
        },
    )
}
