//! For this crate's tests: a tracer provider that keeps every span it
//! ends, in memory.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span, SpanData, SpanProcessor};

/// The spans a [`provider`] ended.
#[derive(Debug, Clone, Default)]
pub(crate) struct Kept(Arc<Mutex<Vec<SpanData>>>);

impl Kept {
    pub(crate) fn spans(&self) -> Vec<SpanData> {
        self.0.lock().unwrap().clone()
    }
}

impl SpanProcessor for Kept {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        self.0.lock().unwrap().push(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// A provider with the SDK's default sampler (`parentbased_always_on`)
/// that keeps the spans it ends (the sampled ones) in the [`Kept`].
pub(crate) fn provider() -> (SdkTracerProvider, Kept) {
    let kept = Kept::default();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(kept.clone())
        .build();
    (provider, kept)
}
