//! Calls a plugin makes to other tools (contract 0.4.0's `tools` import),
//! when the operator lets it (`call-tools = ["fs_*"]` in its settings).
//!
//! A call from a plugin is a call like any other: it goes through every
//! step of `call/` (lookup, validate, admit, execute, conclude), as a call
//! of **whoever called the plugin** — their profile, session, client and
//! approver — never of the plugin itself. So a plugin reaches at most what
//! its caller could call directly, and of that only what its grant names.
//! Besides, here:
//!
//! - a tool whose plugin may itself call tools is refused (no recursion,
//!   so a call from a plugin is one level deep);
//! - the calls of one call of the plugin share bounds of their own
//!   ([`CallBounds`]: a number of calls, a total time, a total of result
//!   bytes), past which each is refused with `limit`;
//! - each is a child of the plugin's call in the traces (its parent is the
//!   plugin call's `sandbox` step, a debug span: exported with
//!   `[telemetry] steps = true`, else the exported parent is the plugin
//!   call's `execute_tool` span) and has its own call id, the outer one
//!   with `.N` added;
//! - the pool cannot deadlock: a plugin that may call tools takes one of
//!   the pool's *caller* permits besides its slot (half the pool, `pool.rs`),
//!   and the tools it calls cannot call tools, so the slots its calls wait
//!   for are never all held by callers waiting in turn.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::call::{CallContext, ToolResult};
use crate::parts::Parts;
use crate::plugin_calls::{CallGrant, NestedError, PluginCalls};
use crate::tool::ToolInfo;

/// The calls one call of a plugin may make: who is calling (the plugin's
/// caller), what the plugin may call, and what its calls have used so far.
pub(crate) struct Caller {
    parts: Weak<Parts>,
    /// The plugin's caller's context, for every call the plugin makes.
    cx: CallContext,
    /// The plugin call's id; its calls are `ID.1`, `ID.2`, ...
    outer_id: String,
    /// The calling plugin's name, for messages.
    plugin: String,
    grant: Arc<CallGrant>,
    calls: u32,
    spent: Duration,
    bytes: u64,
    /// The plugin call's span: its calls' spans are children of it.
    span: tracing::Span,
}

impl Caller {
    /// The calls `call` (of a plugin granted `grant`) may make, run from
    /// inside the call's span.
    pub(crate) fn new(call: &super::Call<'_>, grant: Arc<CallGrant>) -> Caller {
        let mut cx = call.cx.clone();
        // The plugin's caller listens to the plugin's call's steps, not to
        // those of the calls inside it (they have spans and the feed).
        cx.steps = None;
        Caller {
            parts: call.parts.me.clone(),
            cx,
            outer_id: call.id.clone(),
            plugin: call.target.plugin.name.clone(),
            grant,
            calls: 0,
            spent: Duration::ZERO,
            bytes: 0,
            span: tracing::Span::current(),
        }
    }

    /// Calls `tool` with `args` (JSON text) through the whole pipeline, as
    /// the plugin's caller, within the bounds.
    async fn call_tool(&mut self, tool: &str, args: &str) -> Result<ToolResult, NestedError> {
        let bounds = self.grant.bounds;
        if self.calls >= bounds.max_calls {
            return Err(NestedError::Limit(format!(
                "`{}` made its {} calls, the most one of its calls may make (call-bounds.max-calls)",
                self.plugin, bounds.max_calls
            )));
        }
        let budget = Duration::from_millis(bounds.max_time_ms);
        let Some(remaining) = budget.checked_sub(self.spent).filter(|r| !r.is_zero()) else {
            return Err(NestedError::Limit(format!(
                "`{}`'s calls took their {} ms (call-bounds.max-time-ms)",
                self.plugin, bounds.max_time_ms
            )));
        };
        let shown = crate::call::named::shown_name(tool);
        if !self.grant.allows(tool) {
            return Err(NestedError::NotGranted(format!(
                "`{}` may not call `{shown}`: the operator lets it call {} (call-tools)",
                self.plugin,
                self.grant.globs()
            )));
        }
        let Some(parts) = self.parts.upgrade() else {
            return Err(NestedError::Failed("the host is shutting down".into()));
        };
        if let Some((plugin, _)) = parts.catalog.registry().tools.get(tool)
            && plugin.sandbox.call_tools.is_some()
        {
            return Err(NestedError::NotGranted(format!(
                "`{shown}` calls tools itself: it cannot be called from `{}`",
                self.plugin
            )));
        }
        let args: serde_json::Value = serde_json::from_str(args).map_err(|e| {
            NestedError::InvalidArguments(format!("the arguments of `{shown}` are not JSON: {e}"))
        })?;
        self.calls += 1;
        let cx = self
            .cx
            .clone()
            .call_id(format!("{}.{}", self.outer_id, self.calls));
        let started = Instant::now();
        let run = Box::pin(super::run(&parts, tool, args, &cx));
        let result = tokio::time::timeout(
            remaining,
            tracing::Instrument::instrument(run, self.span.clone()),
        )
        .await;
        self.spent = self.spent.saturating_add(started.elapsed());
        let result = match result {
            Ok(result) => result?,
            Err(_) => {
                return Err(NestedError::Limit(format!(
                    "`{shown}` was stopped: `{}`'s calls took their {} ms (call-bounds.max-time-ms)",
                    self.plugin, bounds.max_time_ms
                )));
            }
        };
        self.bytes = self.bytes.saturating_add(result_bytes(&result));
        if self.bytes > bounds.max_result_bytes {
            return Err(NestedError::Limit(format!(
                "the results of `{}`'s calls came to more than {} bytes (call-bounds.max-result-bytes)",
                self.plugin, bounds.max_result_bytes
            )));
        }
        Ok(result)
    }
}

impl PluginCalls for Caller {
    /// The tools the plugin may call now: those its caller may see (the
    /// policy's filter), that its grant names, and that do not call tools
    /// themselves; in catalog order.
    fn tools(&self) -> Vec<ToolInfo> {
        let Some(parts) = self.parts.upgrade() else {
            return Vec::new();
        };
        let registry = parts.catalog.registry();
        let offered = parts.gate.offered_tools(
            registry.tool_infos(),
            self.cx.agent.as_deref(),
            self.cx.session_id.as_deref(),
        );
        offered
            .into_iter()
            .filter(|t| self.grant.allows(&t.name))
            .filter(|t| {
                registry
                    .tools
                    .get(&t.name)
                    .is_some_and(|(p, _)| p.sandbox.call_tools.is_none())
            })
            .collect()
    }

    /// Of [`tools`](Self::tools), the `limit` that best match `query`
    /// (the same search as `search_tools`), best first.
    fn search(&self, query: &str, limit: u32) -> Vec<ToolInfo> {
        let tools = self.tools();
        let index = toolhost_search::ToolIndex::build(
            tools
                .iter()
                .map(|t| toolhost_search::ToolText::new(&t.name, &t.description, &t.input_schema)),
        );
        let limit = usize::try_from(limit)
            .unwrap_or(usize::MAX)
            .min(toolhost_search::MAX_RESULTS);
        index
            .search(query, limit)
            .into_iter()
            .filter_map(|hit| tools.get(hit.position).cloned())
            .collect()
    }

    fn call<'a>(
        &'a mut self,
        tool: &'a str,
        args: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<ToolResult, NestedError>> + Send + 'a>> {
        Box::pin(self.call_tool(tool, args))
    }
}

/// What a result weighs against `max-result-bytes`: its output, and its
/// structured result and content as JSON.
fn result_bytes(result: &ToolResult) -> u64 {
    let output = u64::try_from(result.output.len()).unwrap_or(u64::MAX);
    let structured = result.structured.as_ref().map_or(0, json_len);
    let content = result
        .content
        .iter()
        .map(json_len)
        .fold(0, u64::saturating_add);
    output.saturating_add(structured).saturating_add(content)
}

/// The size of `value` as JSON, counted as it is written out, never kept.
fn json_len<T: Serialize>(value: &T) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self
                .0
                .saturating_add(u64::try_from(buf.len()).unwrap_or(u64::MAX));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing into a counter does not fail; a value that does not
    // serialize counts what was written before it stopped.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_results_weight_counts_its_output_structured_result_and_content() {
        let result = ToolResult {
            output: "12345".into(),
            details: Some(serde_json::json!({"ignored": "details are not counted"})),
            structured: Some(serde_json::json!({"a": 1})),
            content: Vec::new(),
            meta: None,
            tool: "t".into(),
            plugin: "p".into(),
            plugin_version: semver::Version::new(0, 1, 0),
            duration: Duration::ZERO,
            cached: false,
        };
        assert_eq!(result_bytes(&result), 5 + r#"{"a":1}"#.len() as u64);
    }
}
