//! OpenTelemetry for toolhost.
//!
//! The libraries (runtime, agent, MCP) describe their work with `tracing`
//! spans whose fields follow OpenTelemetry's GenAI semantic conventions
//! (`gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.usage.input_tokens`,
//! …) plus toolhost's own (`toolhost.plugin`, `toolhost.decision`, …); they
//! never record argument values or results. This crate turns those spans
//! into OpenTelemetry traces:
//!
//! - [`export`]: the OTLP/HTTP exporter and its `tracing` layer, on only
//!   when the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`,
//!   `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or the embedder's [`Settings`]
//!   name an endpoint. The layer is toolhost's own (not
//!   `tracing-opentelemetry` and the SDK's spans): each span's fields are
//!   written as OTLP as they are recorded, the span is encoded on the
//!   thread that ends it and leaves through a bounded queue on the
//!   exporter's own thread: a slow or dead collector drops spans, never
//!   delays a call.
//! - [`propagate`]: W3C trace context. An MCP request's
//!   `_meta.traceparent` is linked from the spans of the call it starts, or
//!   parents them when the operator trusts its callers
//!   ([`propagate::adopt`], [`CallerTrace`]); requests to upstream MCP
//!   servers and to the model carry the current span's `traceparent`
//!   onward ([`propagate::traceparent`]).
//!
//! Only spans and their attributes leave the host: never an argument value
//! or a result, never a log line or a plugin's output (unless the operator
//! names plugin output: [`Settings::plugin_output`]).
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let telemetry = toolhost_telemetry::Telemetry::start(&Default::default()).unwrap();
//! tracing_subscriber::registry()
//!     .with(telemetry.as_ref().map(|t| t.layer()))
//!     .init();
//! // … serve; then, before the process ends:
//! if let Some(t) = telemetry {
//!     t.shutdown();
//! }
//! ```

mod context;
#[cfg(feature = "otlp")]
mod encode;
pub mod export;
#[cfg(feature = "otlp")]
mod failures;
#[cfg(feature = "otlp")]
mod layer;
pub mod propagate;
mod protocol;
#[cfg(feature = "otlp")]
mod queue;
#[cfg(feature = "otlp")]
mod record;
#[cfg(feature = "otlp")]
mod sampler;
#[cfg(feature = "otlp")]
mod send;
#[cfg(all(test, feature = "otlp"))]
mod testing;

pub use export::{PLUGIN_OUTPUT_TARGET, Protocol, Settings, Telemetry, TelemetryError};
pub use propagate::CallerTrace;
