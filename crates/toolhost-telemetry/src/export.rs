//! The OTLP/HTTP trace exporter and the `tracing` layer that feeds it.
//!
//! On only when an endpoint is named: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! or `OTEL_EXPORTER_OTLP_ENDPOINT` (the variables win), else
//! [`Settings::endpoint`] (a config file's `[telemetry] endpoint`).
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off.
//! The SDK's resource reads `OTEL_SERVICE_NAME` and
//! `OTEL_RESOURCE_ATTRIBUTES`; toolhost's own layer (`layer.rs`) reads
//! `OTEL_TRACES_SAMPLER(_ARG)` (`sampler.rs`), its exporter
//! `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` and `…_TIMEOUT` (`send.rs`)
//! and the queue's `OTEL_BSP_MAX_QUEUE_SIZE`, `…_MAX_EXPORT_BATCH_SIZE` and
//! `…_SCHEDULE_DELAY` (`queue.rs`). Each span is written as OTLP as its
//! fields are recorded and queued as bytes where it ends: see `layer.rs`
//! and `queue.rs` for why.
//!
//! What leaves the host is spans and their attributes, nothing else
//! ([`Telemetry::layer`]): no log line, warning or plugin output becomes a
//! span event, unless the operator names plugin output
//! ([`Settings::plugin_output`]). A caller's trace context starts no trace
//! of the caller's choosing ([`Settings::caller_trace`]).
//!
//! ```
//! use toolhost_telemetry::{Settings, Telemetry};
//! // No endpoint anywhere: nothing is exported, and no thread is started.
//! # // SAFETY of the test: this process sets no OTEL_* variable.
//! # if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_none()
//! #     && std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_none() {
//! assert!(Telemetry::start(&Settings::default()).unwrap().is_none());
//! # }
//! ```

use tracing::level_filters::LevelFilter;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{FilterExt, Targets, filter_fn};
use tracing_subscriber::layer::Filter;
use tracing_subscriber::registry::LookupSpan;

pub use crate::protocol::Protocol;

impl std::str::FromStr for Protocol {
    type Err = TelemetryError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Ok(Protocol::HttpJson),
            "grpc" => Err(TelemetryError::Grpc),
            other => Err(TelemetryError::UnknownProtocol(
                other.chars().take(64).collect(),
            )),
        }
    }
}

/// What the embedder or config file says; the standard variables win.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The collector's base URL (`http://127.0.0.1:4318`); `/v1/traces` is
    /// added as the OTLP variables do.
    pub endpoint: Option<String>,
    /// The transport (`http/protobuf` when unset).
    pub protocol: Option<Protocol>,
    /// `service.name` when `OTEL_SERVICE_NAME` is unset (`toolhost` by default).
    pub service_name: Option<String>,
    /// Export what plugins write (their `log()` lines, stdout and stderr,
    /// target `toolhost::plugin`) as events of the call's span. Off by
    /// default: a plugin's output may hold its arguments, results or
    /// secrets, and leaves the host only when the operator says so
    /// (`[telemetry] plugin-output = true`).
    pub plugin_output: bool,
    /// Export the steps of every call (`validate`, `admit`, `policy`,
    /// `execute`, `queue`, `sandbox`, `conclude`: toolhost's spans from
    /// `debug`) as children of its `execute_tool` span. Off by default: a
    /// call is one span (with its hooks, approvals and upstream requests
    /// when it has them), since the steps cost more than the call itself
    /// (`[telemetry] steps = true`).
    pub steps: bool,
    /// What a caller's `traceparent` does (an MCP request's
    /// `_meta.traceparent`): [`CallerTrace::Link`] by default.
    pub caller_trace: crate::propagate::CallerTrace,
}

/// The target plugins' output is logged under (`toolhost-runtime`'s
/// sandbox): exported only with [`Settings::plugin_output`].
pub const PLUGIN_OUTPUT_TARGET: &str = "toolhost::plugin";

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`: only OTLP over HTTP is built in.
    #[error(
        "OTLP over gRPC is not built into toolhost: use http/protobuf (port 4318) or http/json"
    )]
    Grpc,
    /// A protocol name OTLP does not define.
    #[error("unknown OTLP protocol `{0}` (http/protobuf or http/json)")]
    UnknownProtocol(String),
    /// The endpoint is not a URL.
    #[cfg(feature = "otlp")]
    #[error("the OTLP endpoint is not a URL: {0}")]
    Endpoint(String),
    /// No endpoint after all (the variable was emptied meanwhile).
    #[cfg(feature = "otlp")]
    #[error("no OTLP endpoint is named")]
    NoEndpoint,
    /// The exporter's thread could not start.
    #[cfg(feature = "otlp")]
    #[error("the OTLP exporter's thread could not start")]
    Thread(#[source] std::io::Error),
    /// Built without the `otlp` feature, yet an endpoint was named.
    #[cfg(not(feature = "otlp"))]
    #[error("this build has no OTLP exporter (the `otlp` feature)")]
    NotBuilt,
}

/// How long [`Telemetry::shutdown`] waits for the last spans to leave.
#[cfg(feature = "otlp")]
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// A running exporter: put [`layer`](Self::layer) in the subscriber, and
/// call [`shutdown`](Self::shutdown) before the process ends so the last
/// batch is sent.
#[derive(Debug)]
pub struct Telemetry {
    #[cfg(feature = "otlp")]
    exporter: Exporter,
    plugin_output: bool,
    steps: bool,
}

/// Where the layer's spans go: the queue, the exporter's thread's wake,
/// and the sampler.
#[cfg(feature = "otlp")]
#[derive(Debug, Clone)]
pub(crate) struct Exporter {
    pub(crate) queue: std::sync::Arc<crate::queue::Queue>,
    pub(crate) wake: std::sync::mpsc::SyncSender<crate::queue::Wake>,
    pub(crate) sampler: crate::sampler::Sampler,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Telemetry {
    /// Starts the exporter when an endpoint is named (see the module doc);
    /// `Ok(None)` when none is, or when the variables turn it off.
    pub fn start(settings: &Settings) -> Result<Option<Telemetry>, TelemetryError> {
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
            || env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .is_some();
        if !from_env && settings.endpoint.is_none() {
            return Ok(None);
        }
        let protocol = match env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        {
            Some(p) => p.parse()?,
            None => settings.protocol.unwrap_or_default(),
        };
        let endpoint = (!from_env)
            .then(|| settings.endpoint.as_deref().map(traces_url))
            .flatten();
        #[cfg(feature = "otlp")]
        let exporter = exporter(protocol, endpoint, settings)?;
        // A `return`: the block after this one is the tail when `otlp` is on.
        #[cfg(not(feature = "otlp"))]
        #[allow(clippy::needless_return)]
        {
            let _ = (protocol, endpoint);
            return Err(TelemetryError::NotBuilt);
        }
        #[cfg(feature = "otlp")]
        {
            crate::propagate::set_caller_trace(settings.caller_trace);
            tracing::info!(?protocol, "OpenTelemetry traces are exported");
            Ok(Some(Telemetry {
                exporter,
                plugin_output: settings.plugin_output,
                steps: settings.steps,
            }))
        }
    }

    /// The layer that turns toolhost's spans (info and above, debug too
    /// with [`Settings::steps`]; other crates' from warn) into
    /// OpenTelemetry spans for this exporter, with
    /// their attributes and nothing else: no event becomes a span event
    /// but plugin output, when [`Settings::plugin_output`] names it.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        #[cfg(feature = "otlp")]
        let layer = layer_of(&self.exporter, self.plugin_output, self.steps);
        #[cfg(not(feature = "otlp"))]
        let layer = tracing_subscriber::layer::Identity::new()
            .with_filter(exported(self.plugin_output, self.steps));
        layer
    }

    /// Sends what is queued and stops the exporter (waiting at most 3 s for
    /// a slow collector).
    pub fn shutdown(self) {
        #[cfg(feature = "otlp")]
        if let Err(e) = crate::send::ask(
            &self.exporter.wake,
            crate::queue::Wake::Shutdown,
            SHUTDOWN_WAIT,
        ) {
            tracing::warn!(error = %e, "the last spans may not have been exported");
        }
    }
}

/// The layer of [`Telemetry::layer`], for `exporter`.
#[cfg(feature = "otlp")]
pub(crate) fn layer_of<S>(
    exporter: &Exporter,
    plugin_output: bool,
    steps: bool,
) -> impl Layer<S> + use<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    crate::layer::SpanLayer::new(
        exporter.queue.clone(),
        exporter.wake.clone(),
        exporter.sampler,
    )
    .with_filter(exported(plugin_output, steps))
}

/// What is exported: toolhost's spans from info up (from debug with
/// `steps`), others' from warn; no event, but plugin output from info up
/// when `plugin_output` says so.
pub(crate) fn exported<S>(
    plugin_output: bool,
    steps: bool,
) -> Box<dyn Filter<S> + Send + Sync + 'static>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let toolhost = if steps {
        LevelFilter::DEBUG
    } else {
        LevelFilter::INFO
    };
    let spans = Targets::new()
        .with_target("toolhost", toolhost)
        .with_default(LevelFilter::WARN)
        .and(filter_fn(|meta: &Metadata<'_>| meta.is_span()));
    if !plugin_output {
        return spans.boxed();
    }
    let output = Targets::new()
        .with_target(PLUGIN_OUTPUT_TARGET, LevelFilter::INFO)
        .and(filter_fn(|meta: &Metadata<'_>| meta.is_event()));
    spans.or(output).boxed()
}

/// `base` with OTLP's trace path, as the `OTEL_EXPORTER_OTLP_ENDPOINT`
/// variable is read.
fn traces_url(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    }
}

#[cfg(feature = "otlp")]
fn resource(settings: &Settings) -> opentelemetry_sdk::Resource {
    let builder = opentelemetry_sdk::Resource::builder();
    if env("OTEL_SERVICE_NAME").is_some() {
        builder.build()
    } else {
        builder
            .with_service_name(
                settings
                    .service_name
                    .clone()
                    .unwrap_or_else(|| "toolhost".to_owned()),
            )
            .build()
    }
}

#[cfg(feature = "otlp")]
fn exporter(
    protocol: Protocol,
    endpoint: Option<String>,
    settings: &Settings,
) -> Result<Exporter, TelemetryError> {
    use std::sync::Arc;
    // An https collector needs a TLS provider; another crate may have
    // installed one already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let url = endpoint
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT").map(|base| traces_url(&base)))
        .ok_or(TelemetryError::NoEndpoint)?;
    let url = url
        .parse::<reqwest::Url>()
        .map_err(|e| TelemetryError::Endpoint(e.to_string()))?;
    let queue = Arc::new(crate::queue::Queue::new(
        protocol,
        crate::queue::Limits::from_vars(env),
        &resource(settings),
    ));
    let target = crate::send::Target::new(url.into(), protocol, env);
    let wake = crate::send::start(queue.clone(), target).map_err(TelemetryError::Thread)?;
    Ok(Exporter {
        queue,
        wake,
        sampler: crate::sampler::Sampler::from_vars(env),
    })
}

#[cfg(test)]
mod tests {
    #[cfg(feature = "otlp")]
    use opentelemetry_proto::tonic::trace::v1::Span as SpanProto;

    use super::*;

    #[test]
    fn protocols_are_the_otlp_names_and_grpc_is_refused_by_name() {
        assert_eq!(
            "http/json".parse::<Protocol>().ok(),
            Some(Protocol::HttpJson)
        );
        assert_eq!(
            " http/protobuf ".parse::<Protocol>().ok(),
            Some(Protocol::HttpProtobuf)
        );
        assert!(matches!(
            "grpc".parse::<Protocol>(),
            Err(TelemetryError::Grpc)
        ));
        let long = "x"
            .repeat(10_000)
            .parse::<Protocol>()
            .unwrap_err()
            .to_string();
        assert!(long.len() < 200, "bounded: {long}");
    }

    #[test]
    fn the_trace_path_is_added_once() {
        assert_eq!(traces_url("http://h:4318"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h:4318/"), "http://h:4318/v1/traces");
        assert_eq!(traces_url("http://h/v1/traces"), "http://h/v1/traces");
    }

    /// The spans `emit` makes under the export layer, ended.
    #[cfg(feature = "otlp")]
    fn exported_by(plugin_output: bool, emit: impl FnOnce()) -> Vec<SpanProto> {
        exported_with(plugin_output, false, emit)
    }

    #[cfg(feature = "otlp")]
    fn exported_with(plugin_output: bool, steps: bool, emit: impl FnOnce()) -> Vec<SpanProto> {
        use tracing_subscriber::layer::SubscriberExt;
        let (exporter, kept) = crate::testing::exporter(Default::default());
        let subscriber =
            tracing_subscriber::registry().with(layer_of(&exporter, plugin_output, steps));
        tracing::subscriber::with_default(subscriber, emit);
        kept.spans()
    }

    fn emit_a_call() {
        let call = tracing::info_span!(target: "toolhost_runtime::call", "execute_tool", gen_ai.tool.name = "log_flood");
        let _in = call.enter();
        tracing::info!(target: "toolhost_runtime::call", "approval saved");
        tracing::warn!(target: "toolhost_runtime::sandbox", "something the host says");
        tracing::info!(target: PLUGIN_OUTPUT_TARGET, plugin = "p", tool = "t", "log line 0");
        tracing::info!(target: PLUGIN_OUTPUT_TARGET, plugin = "p", tool = "t", stream = "stdout", "stdout line 0");
        tracing::debug!(target: "toolhost_runtime::call", "debug");
        let _quiet = tracing::debug_span!(target: "toolhost_runtime::call", "detail").entered();
        let _other = tracing::info_span!(target: "hyper::client", "connect").entered();
        let _loud = tracing::warn_span!(target: "rmcp::service", "trouble").entered();
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn the_steps_leave_only_when_asked() {
        let names = |steps| {
            let mut n: Vec<String> = exported_with(false, steps, emit_a_call)
                .iter()
                .map(|s| s.name.clone())
                .collect();
            n.sort_unstable();
            n
        };
        assert_eq!(names(false), ["execute_tool", "trouble"]);
        assert_eq!(names(true), ["detail", "execute_tool", "trouble"]);
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn spans_and_their_attributes_leave_and_no_event_does() {
        let spans = exported_by(false, emit_a_call);
        let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        // toolhost's from info, other crates' from warn.
        assert_eq!(names, ["execute_tool", "trouble"]);
        let call = spans.iter().find(|s| s.name == "execute_tool").unwrap();
        assert!(
            call.attributes
                .iter()
                .any(|kv| kv.key == "gen_ai.tool.name"),
            "{:?}",
            call.attributes
        );
        for span in &spans {
            assert_eq!(span.events.len(), 0, "{}: {:?}", span.name, span.events);
        }
    }

    #[cfg(feature = "otlp")]
    #[test]
    fn plugin_output_leaves_only_when_the_operator_names_it() {
        let spans = exported_by(true, emit_a_call);
        let call = spans.iter().find(|s| s.name == "execute_tool").unwrap();
        let events: Vec<&str> = call.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            events,
            ["log line 0", "stdout line 0"],
            "the host's own events stay"
        );
    }
}
