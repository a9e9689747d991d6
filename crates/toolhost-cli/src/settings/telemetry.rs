//! The `[telemetry]` table: where OpenTelemetry traces go.

use anyhow::Context;
use serde::Deserialize;

/// The `[telemetry]` table: where OpenTelemetry traces go when the
/// standard `OTEL_EXPORTER_OTLP_*` variables do not say.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `http/json`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// `service.name` (`toolhost` by default).
    #[serde(default)]
    pub service_name: Option<String>,
    /// Export plugins' log lines, stdout and stderr as span events (off:
    /// they may hold arguments, results or secrets).
    #[serde(default)]
    pub plugin_output: bool,
    /// Export each call's steps (validate, admit, policy, execute, queue,
    /// sandbox, conclude) as child spans (off: a call is one span).
    #[serde(default)]
    pub steps: bool,
    /// What an MCP caller's `traceparent` does: `link` (the default: a
    /// link, the call's trace is the host's own) or `parent` (join the
    /// caller's trace, for callers the operator trusts).
    #[serde(default)]
    pub caller_trace: Option<String>,
}

impl TelemetryConfig {
    /// The exporter's settings.
    pub fn settings(&self) -> anyhow::Result<toolhost_telemetry::Settings> {
        Ok(toolhost_telemetry::Settings {
            endpoint: self.endpoint.clone(),
            protocol: self
                .protocol
                .as_deref()
                .map(str::parse)
                .transpose()
                .context("[telemetry] protocol")?,
            service_name: self.service_name.clone(),
            plugin_output: self.plugin_output,
            steps: self.steps,
            caller_trace: self
                .caller_trace
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(anyhow::Error::msg)
                .context("[telemetry] caller-trace")?
                .unwrap_or_default(),
        })
    }
}
