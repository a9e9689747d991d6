//! The `tracing` layer that turns toolhost's spans into OTLP spans
//! ([`crate::Telemetry::layer`]).
//!
//! Each span the layer's filter lets through gets a [`Recording`] in the
//! registry's extensions; its fields go into it as they are recorded
//! (`record.rs`). Its ids are fixed the first time something needs them
//! (a child's, a `traceparent` for an outgoing request, its end): a new
//! trace id for a root, its parent's otherwise (the nearest ancestor the
//! layer records, or the caller's span a trusted caller named), a random
//! span id, and the sampler's decision ([`Sampler`]). Until then a trusted
//! caller's `traceparent` may still become its parent
//! ([`crate::propagate::adopt`]). When the span closes it is encoded,
//! if sampled, and its bytes queued for the exporter's thread
//! ([`Queue`]); nothing waits for the collector.
//!
//! It replaces `tracing-opentelemetry` with the SDK behind it, which
//! cost a traced call more than the rest of its tracing together
//! (docs/log.md, "Performance round 4: an export layer of our
//! own"). The shapes stay theirs: the same span names, kinds, status,
//! attributes, events and links (the tests compare the two).

use std::any::TypeId;
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::mpsc::SyncSender;

use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use crate::context::{Access, SpanContext};
use crate::propagate::CallerTrace;
use crate::queue::Queue;
use crate::queue::Wake;
use crate::record::{Fixed, Recording, now};
use crate::sampler::Sampler;

/// The export layer over subscriber `S` ([module doc](self)).
pub(crate) struct SpanLayer<S> {
    queue: Arc<Queue>,
    wake: SyncSender<Wake>,
    sampler: Sampler,
    access: Access,
    _subscriber: PhantomData<fn(S)>,
}

impl<S> SpanLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    /// A layer that queues its sampled spans in `queue`, waking the
    /// exporter through `wake` when a batch is full.
    pub(crate) fn new(queue: Arc<Queue>, wake: SyncSender<Wake>, sampler: Sampler) -> Self {
        SpanLayer {
            queue,
            wake,
            sampler,
            access: Access {
                context: context_of::<S>,
                adopt: adopt_in::<S>,
            },
            _subscriber: PhantomData,
        }
    }
}

impl<S> Layer<S> for SpanLayer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut recording = Recording::new(attrs.metadata().name(), now());
        attrs.record(&mut recording.fields());
        span.extensions_mut().insert(recording);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        if let Some(recording) = span.extensions_mut().get_mut::<Recording>() {
            values.record(&mut recording.fields());
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        if let Some(recording) = span.extensions_mut().get_mut::<Recording>() {
            recording.event(event, now());
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(fixed) = fixed(&span, &self.sampler) else {
            return;
        };
        if !fixed.own.sampled {
            return;
        }
        let end = now();
        let extensions = span.extensions();
        let Some(recording) = extensions.get::<Recording>() else {
            return;
        };
        let full = self
            .queue
            .push_span(|out| crate::record::encode_span(recording, &fixed, end, out));
        if full {
            self.queue.wake(&self.wake);
        }
    }

    // SAFETY: each pointer returned is to a value of exactly the type
    // `id` names (this layer, or its `Access`), and lives as long as
    // `self`, which is what `downcast_raw`'s callers rely on.
    #[allow(unsafe_code)]
    unsafe fn downcast_raw(&self, id: TypeId) -> Option<*const ()> {
        if id == TypeId::of::<Self>() {
            Some(std::ptr::from_ref(self).cast())
        } else if id == TypeId::of::<Access>() {
            Some(std::ptr::from_ref(&self.access).cast())
        } else {
            None
        }
    }
}

/// `span`'s ids, fixed now if they were not yet (its ancestors' first);
/// `None` when the layer does not record it.
fn fixed<'a, R>(span: &SpanRef<'a, R>, sampler: &Sampler) -> Option<Fixed>
where
    R: LookupSpan<'a>,
{
    let remote_parent = {
        let extensions = span.extensions();
        let recording = extensions.get::<Recording>()?;
        if let Some(fixed) = &recording.fixed {
            return Some(fixed.clone());
        }
        recording.remote_parent.clone()
    };
    let (parent, parent_remote) = match remote_parent {
        Some(remote) => (Some(remote), true),
        None => (
            span.scope()
                .skip(1)
                .find_map(|ancestor| fixed(&ancestor, sampler))
                .map(|f| f.own),
            false,
        ),
    };
    let ids = RandomIdGenerator::default();
    let trace_id = parent.as_ref().map_or_else(
        || nonzero(|| u128::from_be_bytes(ids.new_trace_id().to_bytes())),
        |p| p.trace_id,
    );
    let span_id = nonzero(|| u64::from_be_bytes(ids.new_span_id().to_bytes()));
    let sampled = sampler.sampled(parent.as_ref().map(|p| p.sampled), trace_id);
    let fixed = Fixed {
        own: SpanContext {
            trace_id,
            span_id,
            sampled,
            state: parent.as_ref().map(|p| p.state.clone()).unwrap_or_default(),
        },
        parent_span_id: parent.as_ref().map_or(0, |p| p.span_id),
        parent_remote,
    };
    let mut extensions = span.extensions_mut();
    let recording = extensions.get_mut::<Recording>()?;
    // Another thread may have fixed them meanwhile (two children ending
    // at once): the first ids stay, so every child names the same parent.
    Some(recording.fixed.get_or_insert(fixed).clone())
}

/// A random id that is not zero (zero is W3C's invalid id).
fn nonzero<T: Default + PartialEq>(mut id: impl FnMut() -> T) -> T {
    loop {
        let v = id();
        if v != T::default() {
            return v;
        }
    }
}

/// [`Access::context`] for a layer over `S`.
fn context_of<S>(dispatch: &Dispatch, id: &Id) -> Option<SpanContext>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let layer = dispatch.downcast_ref::<SpanLayer<S>>()?;
    let subscriber = dispatch.downcast_ref::<S>()?;
    let span = subscriber.span(id)?;
    // The span itself may be one the layer's filter left out (a step
    // when steps are not exported): its nearest recorded ancestor is
    // what the trace shows.
    span.scope()
        .find_map(|s| fixed(&s, &layer.sampler))
        .map(|f| f.own)
}

/// [`Access::adopt`] for a layer over `S`.
fn adopt_in<S>(dispatch: &Dispatch, id: &Id, caller: SpanContext, mode: CallerTrace) -> bool
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(subscriber) = dispatch.downcast_ref::<S>() else {
        return false;
    };
    let Some(span) = subscriber.span(id) else {
        return false;
    };
    let late = {
        let mut extensions = span.extensions_mut();
        let Some(recording) = extensions.get_mut::<Recording>() else {
            return false;
        };
        match mode {
            CallerTrace::Link => {
                recording.link(&caller);
                false
            }
            CallerTrace::Parent if recording.fixed.is_none() => {
                recording.remote_parent = Some(caller);
                false
            }
            CallerTrace::Parent => true,
        }
    };
    // Said with the span's extensions let go: another layer may read them.
    if late {
        tracing::debug!("the remote parent came after the span's ids were fixed");
    }
    true
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_proto::tonic::common::v1::KeyValue;
    use opentelemetry_proto::tonic::trace::v1::Span as SpanProto;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanProcessor};
    use tracing::field::Empty;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;
    use crate::PLUGIN_OUTPUT_TARGET;

    /// Spans of every shape toolhost makes: renamed, of each kind, with
    /// fields of each type recorded at once and later, a failed one, one
    /// with plugin output (more events than a span keeps), and a step.
    fn emit() {
        let tool = "calculate";
        let call = tracing::info_span!(
            target: "toolhost_runtime::call",
            "execute_tool",
            otel.name = format_args!("execute_tool {tool}"),
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            toolhost.agent = Some("reviewer"),
            toolhost.client = Option::<&str>::None,
            toolhost.cached = Empty,
            toolhost.outcome = Empty,
            toolhost.decision = Empty,
            error.type = Empty,
            count = 3_i64,
            negative = -3_i64,
            big = u64::MAX,
            small = 7_u64,
            ratio = 0.5_f64,
            empty = "",
            long = "é".repeat(300).as_str(),
        );
        {
            let _in = call.enter();
            tracing::record_all!(call, toolhost.decision = %"allow", toolhost.cached = false);
            {
                let upstream = tracing::info_span!(
                    target: "toolhost_mcp::client",
                    "tools/call",
                    otel.name = "tools/call upstream",
                    otel.kind = "client",
                    otel.status_code = "ok",
                );
                let _in = upstream.enter();
            }
            {
                let step = tracing::debug_span!(target: "toolhost_runtime::call", "sandbox");
                let _in = step.enter();
                for line in 0..200 {
                    tracing::info!(target: PLUGIN_OUTPUT_TARGET, plugin = "p", tool = "t", stream = "stdout", line, "stdout line {line}");
                }
            }
            tracing::record_all!(
                call,
                toolhost.outcome = "tool_error",
                otel.status_code = "ERROR",
                error.type = "tool_error",
            );
        }
        drop(call);
        let _server =
            tracing::info_span!(target: "toolhost_mcp::server", "tools/call", otel.kind = "server")
                .entered();
    }

    /// What a span says, without its ids and times: name, parent's name,
    /// kind, attributes, events (name and attributes), status, flags and
    /// the dropped counts.
    fn shape(spans: &[SpanProto]) -> BTreeMap<String, String> {
        let name_of = |id: &[u8]| {
            spans
                .iter()
                .find(|s| s.span_id == id)
                .map_or_else(String::new, |s| s.name.clone())
        };
        let attrs = |kvs: &[KeyValue]| {
            let mut kvs: Vec<String> = kvs
                .iter()
                .map(|kv| format!("{}={:?}", kv.key, kv.value))
                .collect();
            kvs.sort();
            kvs
        };
        spans
            .iter()
            .map(|s| {
                let events: Vec<(String, Vec<String>)> = s
                    .events
                    .iter()
                    .map(|e| (e.name.clone(), attrs(&e.attributes)))
                    .collect();
                let said = format!(
                    "parent={:?} kind={} attributes={:?} dropped={} events={events:?} dropped_events={} links={} status={:?} flags={:#x} same_trace_as_parent={}",
                    name_of(&s.parent_span_id),
                    s.kind,
                    attrs(&s.attributes),
                    s.dropped_attributes_count,
                    s.dropped_events_count,
                    s.links.len(),
                    s.status,
                    s.flags,
                    spans
                        .iter()
                        .find(|p| p.span_id == s.parent_span_id)
                        .is_none_or(|p| p.trace_id == s.trace_id),
                );
                (s.name.clone(), said)
            })
            .collect()
    }

    #[derive(Debug, Clone, Default)]
    struct KeptData(Arc<Mutex<Vec<SpanData>>>);

    impl SpanProcessor for KeptData {
        fn on_start(&self, _: &mut opentelemetry_sdk::trace::Span, _: &opentelemetry::Context) {}
        fn on_end(&self, span: SpanData) {
            self.0.lock().unwrap().push(span);
        }
        fn force_flush(&self) -> OTelSdkResult {
            Ok(())
        }
        fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
            Ok(())
        }
    }

    /// `emit`'s spans as `tracing-opentelemetry` with the SDK made them,
    /// configured as toolhost's layer was before it replaced them.
    fn theirs(emit: impl FnOnce()) -> Vec<SpanProto> {
        let kept = KeptData::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(kept.clone())
            .build();
        let layer = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("toolhost"))
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_context_activation(false)
            .with_filter(crate::export::exported(true, true));
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit);
        let spans = kept.0.lock().unwrap().clone();
        spans.into_iter().map(SpanProto::from).collect()
    }

    fn ours(emit: impl FnOnce()) -> Vec<SpanProto> {
        let (exporter, kept) = crate::testing::exporter(Sampler::default());
        let layer = crate::export::layer_of(&exporter, true, true);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit);
        kept.spans()
    }

    #[test]
    fn spans_say_what_tracing_opentelemetry_and_the_sdk_said() {
        let (ours, theirs) = (ours(emit), theirs(emit));
        assert_eq!(ours.len(), 4, "{ours:?}");
        let (ours, theirs) = (shape(&ours), shape(&theirs));
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>()
        );
        for (name, said) in &theirs {
            assert_eq!(&ours[name], said, "{name}");
        }
    }

    #[test]
    fn ids_are_w3c_ones_and_times_are_now() {
        let before = now();
        let spans = ours(emit);
        let after = now();
        for span in &spans {
            assert_eq!(span.trace_id.len(), 16);
            assert_eq!(span.span_id.len(), 8);
            assert!(span.trace_id.iter().any(|b| *b != 0));
            assert!(before <= span.start_time_unix_nano, "{span:?}");
            assert!(span.start_time_unix_nano <= span.end_time_unix_nano);
            assert!(span.end_time_unix_nano <= after);
        }
        let call = spans
            .iter()
            .find(|s| s.name == "execute_tool calculate")
            .unwrap();
        let server = spans.iter().find(|s| s.name == "tools/call").unwrap();
        assert_ne!(call.trace_id, server.trace_id, "two roots, two traces");
    }

    #[test]
    fn children_ending_at_once_on_many_threads_all_name_their_parents_one_id() {
        let (exporter, kept) = crate::testing::exporter(Sampler::default());
        let layer = crate::export::layer_of(&exporter, false, false);
        let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
        for _ in 0..50 {
            tracing::dispatcher::with_default(&dispatch, || {
                let parent = tracing::info_span!(target: "toolhost", "parent");
                let start = Arc::new(std::sync::Barrier::new(4));
                let threads: Vec<_> = (0..4)
                    .map(|_| {
                        let (parent, start, dispatch) = (parent.clone(), start.clone(), dispatch.clone());
                        std::thread::spawn(move || {
                            tracing::dispatcher::with_default(&dispatch, || {
                                let child = tracing::info_span!(target: "toolhost", parent: &parent, "child");
                                start.wait();
                                drop(child);
                            });
                        })
                    })
                    .collect();
                for t in threads {
                    t.join().unwrap();
                }
            });
            let spans = kept.spans();
            let parent = spans.iter().find(|s| s.name == "parent").unwrap();
            let children: Vec<_> = spans.iter().filter(|s| s.name == "child").collect();
            assert_eq!(children.len(), 4);
            for child in children {
                assert_eq!(child.parent_span_id, parent.span_id);
                assert_eq!(child.trace_id, parent.trace_id);
            }
        }
    }

    #[test]
    fn an_unsampled_trace_is_not_queued() {
        let off =
            Sampler::from_vars(|n| (n == "OTEL_TRACES_SAMPLER").then(|| "always_off".to_owned()));
        let (exporter, kept) = crate::testing::exporter(off);
        let layer = crate::export::layer_of(&exporter, true, true);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), emit);
        assert!(kept.spans().is_empty());
    }
}
