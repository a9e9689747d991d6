//! The call's spans, for OpenTelemetry (exported by `toolhost-telemetry`
//! when the `OTEL_*` variables ask; free when nothing listens).
//!
//! One `execute_tool {tool}` span per call (OpenTelemetry's GenAI
//! convention: `gen_ai.operation.name`, `gen_ai.tool.name`,
//! `gen_ai.tool.call.id`), with toolhost's own attributes: the plugin, its
//! version and digest, the policy's decision and the rule that made it,
//! whether the result came from the cache, the outcome (`ok` or the
//! error kind), and who called (`toolhost.client`: an MCP caller's
//! identity, `token:…` or `oauth:SUBJECT`, never a secret). Its children are the steps, in order: `validate`, `admit`
//! (with `policy`, `hooks.before` and `approval`), `execute` (with `queue`
//! and `sandbox`, or the MCP server's `tools/call`) and `conclude`. The
//! steps are `debug` spans, exported only when the operator asks
//! (`[telemetry] steps`): each costs about as much as the call's own work.
//! `hooks.before`, `approval` and an upstream `tools/call` stay `info`:
//! they happen only on some calls and are where such a call's time goes.
//! Argument values and results are never recorded, and the tool's name
//! and the call's id are the caller's as `named.rs` bounds them: what a
//! caller sends cannot make a span long.

use tracing::Span;
use tracing::field::Empty;

use crate::call::named::Named;
use crate::call::{Call, CallContext, ToolResult};
use crate::error::CallError;

/// The span of one call (of `named.tool`), entered by the caller around
/// every step.
pub(crate) fn call_span(named: &Named<'_>, cx: &CallContext) -> Span {
    let tool: &str = &named.tool;
    tracing::info_span!(
        "execute_tool",
        otel.name = format_args!("execute_tool {tool}"),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = Empty,
        toolhost.agent = cx.agent.as_deref(),
        toolhost.client = cx.client.as_deref(),
        toolhost.plugin = Empty,
        toolhost.plugin.version = Empty,
        toolhost.plugin.digest = Empty,
        toolhost.decision = Empty,
        toolhost.rule = Empty,
        toolhost.cached = Empty,
        toolhost.outcome = Empty,
        error.type = Empty,
    )
}

/// Records what lookup found on the call's span (one record for the four
/// fields: each record costs the exporter's layer a lookup of the span).
pub(crate) fn resolved(call: &Call<'_>) {
    let (span, plugin) = (&call.span, &call.target.plugin);
    if span.is_disabled() {
        return;
    }
    tracing::record_all!(
        span,
        gen_ai.tool.call.id = call.id.as_str(),
        toolhost.plugin = plugin.name.as_str(),
        toolhost.plugin.version = plugin.version_text.as_str(),
        toolhost.plugin.digest = plugin.digest.as_str(),
    );
}

/// Records the policy's decision and the rule that made it on the call's
/// span.
pub(crate) fn decided(span: &Span, decision: &dyn std::fmt::Display, rule: &dyn std::fmt::Display) {
    if span.is_disabled() {
        return;
    }
    tracing::record_all!(span, toolhost.decision = %decision, toolhost.rule = %rule);
}

/// Records the outcome on the call's span (`ok`, or the error kind, which
/// marks the span as failed).
pub(crate) fn finished(span: &Span, result: &Result<ToolResult, CallError>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(r) => {
            tracing::record_all!(span, toolhost.outcome = "ok", toolhost.cached = r.cached);
        }
        Err(e) => {
            let kind = e.kind();
            let kind = kind.as_str();
            tracing::record_all!(
                span,
                toolhost.outcome = kind,
                otel.status_code = "ERROR",
                error.type = kind,
            );
        }
    }
}
