//! The agent loop's spans, for OpenTelemetry (exported by
//! `toolhost-telemetry` when the `OTEL_*` variables ask; free when nothing
//! listens), in OpenTelemetry's GenAI conventions: a run is
//! `invoke_agent`, each round `round N`, each model request
//! `chat {model}` (usage and finish reason recorded), and each tool call
//! the runtime's `execute_tool {tool}` under its round. No prompt, answer,
//! argument or result text is recorded.

use tracing::field::Empty;

use super::result::ToolChainResult;
use crate::provider::{Completion, ProviderError};

/// The span of one run ([`record_run`] when it ends).
pub(super) fn run_span(model: &str, provider: &str) -> tracing::Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.request.model = model,
        gen_ai.provider.name = provider,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        toolhost.status = Empty,
        toolhost.rounds = Empty,
    )
}

/// Records the run's usage and how it ended.
pub(super) fn record_run(span: &tracing::Span, result: &ToolChainResult) {
    span.record("gen_ai.usage.input_tokens", result.usage.input_tokens)
        .record("gen_ai.usage.output_tokens", result.usage.output_tokens)
        .record("toolhost.status", result.status.to_string())
        .record("toolhost.rounds", result.stats.rounds);
}

/// The span of `round` (a trace's `round N`): the one in `kept` while the
/// round goes on, a new one when the next starts; none once the run is over.
pub(super) fn round_span(
    kept: &mut Option<(u32, tracing::Span)>,
    round: Option<u32>,
) -> tracing::Span {
    let Some(round) = round else {
        *kept = None;
        return tracing::Span::none();
    };
    match kept {
        Some((r, span)) if *r == round => span.clone(),
        _ => {
            let span = tracing::info_span!(
                "round",
                otel.name = format_args!("round {round}"),
                toolhost.round = round
            );
            *kept = Some((round, span.clone()));
            span
        }
    }
}

/// The span of one model request (OpenTelemetry GenAI: `chat {model}`);
/// usage and finish reason are recorded when it answers
/// ([`record_chat`]). No prompt or answer text is recorded.
pub(super) fn chat_span(model: &str, provider: &str) -> tracing::Span {
    tracing::info_span!(
        "chat",
        otel.name = format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.request.model = model,
        gen_ai.provider.name = provider,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.response.finish_reasons = Empty,
        error.type = Empty,
    )
}

/// Records a model request's usage and finish reason, or its failure.
pub(super) fn record_chat(span: &tracing::Span, result: &Result<Completion, ProviderError>) {
    match result {
        Ok(c) => {
            span.record("gen_ai.usage.input_tokens", c.usage.input_tokens)
                .record("gen_ai.usage.output_tokens", c.usage.output_tokens)
                .record(
                    "gen_ai.response.finish_reasons",
                    format!("{:?}", c.finish_reason).to_lowercase(),
                );
        }
        Err(e) => {
            span.record("otel.status_code", "ERROR")
                .record("error.type", provider_error_type(e));
        }
    }
}

/// A short, stable name for a provider failure (`error.type`).
fn provider_error_type(e: &ProviderError) -> &'static str {
    use ProviderError as E;
    match e {
        E::Status { .. } => "http-status",
        E::Connect { .. } => "connect",
        E::Timeout { .. } => "timeout",
        E::InvalidResponse { .. } => "invalid-response",
        E::Cancelled => "cancelled",
    }
}
