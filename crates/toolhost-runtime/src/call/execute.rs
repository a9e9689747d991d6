//! Step 4 of a call: running it. A sandbox slot from the pool (waiting in
//! the queue, or `busy`), the guest in a fresh sandbox (or a reused
//! instance, `reuse.rs`) under the plugin's limits, and the checks of what
//! it returned: sizes (`max-output-bytes`), `details` as JSON, structured
//! content against the tool's output schema.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tracing::Instrument;

use wasmtime::Store;

use crate::api::{PluginInstance, RawContext, RawOutcome};
use crate::call::admit::Admitted;
use crate::call::{Call, ToolResult, narrow};
use crate::error::{CallError, SandboxFault, ToolErrorKind};
use crate::pool::Pool;
use crate::refill;
use crate::sandbox::{Sandbox, SandboxState};
use crate::source::{SourceCall, SourceError, SourceOutcome, SourceProgress, ToolSource};
use toolhost_content::ContentLimits;

/// Runs an admitted call in a fresh sandbox: one made ready before the
/// call when the plugin keeps them and has one (`ready.rs`), else one set
/// up now; one that reaches only the call's path when its tool names one
/// (a per-call grant, `narrow.rs`).
pub(crate) async fn fresh(
    pool: &Pool,
    call: &Call<'_>,
    admitted: &Admitted,
) -> Result<ToolResult, CallError> {
    let plugin = &call.target.plugin;
    let args = admitted.args_text.as_str();
    // A plugin that may call tools holds a caller permit while it runs
    // (`pool.rs`: the calls it makes must find free slots). Waiting for it
    // is a step like the slot's `queue` below: a debug span, exported only
    // with `[telemetry] steps`.
    let _caller = match plugin.sandbox.call_tools {
        Some(_) => Some(
            pool.caller()
                .instrument(tracing::debug_span!("queue"))
                .await?,
        ),
        None => None,
    };
    let narrowed = narrow::narrow(
        call,
        &admitted.args,
        admitted.opened.as_ref(),
        pool.scratches(),
    )?;
    let started = Instant::now();
    let result = if narrowed.is_none()
        && let Some(mut ready) = plugin.ready.take()
    {
        let result = on_instance(&mut ready.sandbox, &ready.instance, call, args)
            .instrument(tracing::debug_span!("sandbox", toolhost.instance = "ready"))
            .await;
        refill::after_call(pool, plugin, Some(ready));
        result
    } else {
        let result = fresh_instance(pool, call, narrowed.as_ref(), args).await;
        if plugin.ready.enabled() {
            refill::after_call(pool, plugin, None);
        }
        result
    };
    // The instance and its slot are back in the pool: the tasks queued on
    // this worker get their turn (`fair_share.rs`).
    super::fair_share::after(started.elapsed()).await;
    result
}

/// Runs `call` in a fresh instance, in a slot of `pool` (under the
/// narrowed grant when the call has one).
async fn fresh_instance(
    pool: &Pool,
    call: &Call<'_>,
    narrowed: Option<&narrow::Narrowed>,
    args: &str,
) -> Result<ToolResult, CallError> {
    let plugin = &call.target.plugin;
    let _slot = pool
        .acquire(plugin.quota())
        .instrument(tracing::debug_span!("queue"))
        .await?;
    let spec = narrowed.map_or(&plugin.sandbox, |n| &n.spec);
    let mut sandbox = pool.sandbox(spec).map_err(|message| CallError::Host {
        tool: call.target.tool.to_owned(),
        message,
    })?;
    let pre = &plugin.pre;
    run(
        &mut sandbox,
        call,
        args,
        async |store, raw_cx, name, args| {
            let instance = pre.instantiate(&mut *store).await?;
            instance.execute(store, raw_cx, name, args).await
        },
    )
    .instrument(tracing::debug_span!("sandbox", toolhost.instance = "fresh"))
    .await
}

/// Runs `call` on `instance`, kept across calls (see `reuse.rs`).
pub(crate) async fn on_instance(
    sandbox: &mut Sandbox,
    instance: &PluginInstance,
    call: &Call<'_>,
    args: &str,
) -> Result<ToolResult, CallError> {
    run(sandbox, call, args, async |store, raw_cx, name, args| {
        instance.execute(store, raw_cx, name, args).await
    })
    .await
}

/// Runs the guest's `execute` (through `guest`) in `sandbox`, then checks
/// and converts what it returned.
async fn run(
    sandbox: &mut Sandbox,
    call: &Call<'_>,
    args: &str,
    guest: impl AsyncFnOnce(
        &mut Store<SandboxState>,
        RawContext<'_>,
        &str,
        &str,
    ) -> wasmtime::Result<RawOutcome>,
) -> Result<ToolResult, CallError> {
    let (plugin, spec, cx) = (&call.target.plugin, call.target.spec(), call.cx);
    let limits = &plugin.sandbox.limits;
    let started = sandbox.begin(
        call.target.tool,
        cx.progress.clone(),
        call.hops.get().cloned(),
    );
    let raw_cx = RawContext {
        call_id: &call.id,
        session_id: cx.session_id.as_deref(),
        agent: cx.agent.as_deref(),
    };
    // The calls it may make to other tools, for this call only.
    sandbox.store.data_mut().caller = plugin.sandbox.call_tools.as_ref().map(|grant| {
        Box::new(crate::call::nested::Caller::new(call, grant.clone()))
            as Box<dyn crate::plugin_calls::PluginCalls>
    });
    let outcome = sandbox
        .call(async |store| guest(store, raw_cx, &spec.name, args).await)
        .await;
    sandbox.store.data_mut().caller = None;
    let duration = started.elapsed();
    let fault = |fault: SandboxFault| CallError::Sandbox {
        tool: call.target.tool.to_owned(),
        plugin: plugin.id(),
        fault,
    };
    let outcome = outcome.map_err(fault)?;
    tracing::debug!(tool = call.target.tool, plugin = %plugin.id(), call_id = %call.id, us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX), "call finished");
    // The tool's name for an error (a result names it in `result`).
    let tool = || call.target.tool.to_owned();
    match outcome {
        RawOutcome::Ok {
            output,
            details,
            structured,
            content,
        } => {
            let max = limits.max_output_bytes;
            if output.len() > max {
                return Err(fault(SandboxFault::OutputTooLarge {
                    what: "output",
                    size: output.len(),
                    limit: max,
                }));
            }
            let details = match details {
                None => None,
                Some(d) if d.len() > max => {
                    return Err(fault(SandboxFault::OutputTooLarge {
                        what: "details",
                        size: d.len(),
                        limit: max,
                    }));
                }
                Some(d) => Some(serde_json::from_str(&d).map_err(|e| {
                    fault(SandboxFault::InvalidDetails {
                        message: e.to_string(),
                    })
                })?),
            };
            let structured = spec.check_structured(structured, max).map_err(fault)?;
            ContentLimits::within(max)
                .check(&content)
                .map_err(|e| fault(SandboxFault::Content(e)))?;
            let parts = Parts {
                output,
                details,
                structured,
                content,
                meta: None,
            };
            Ok(result(call, parts, duration))
        }
        RawOutcome::InvalidArguments(message) => {
            Err(tool_error(tool(), ToolErrorKind::InvalidArguments, message))
        }
        RawOutcome::Failed(message) => Err(tool_error(tool(), ToolErrorKind::Failed, message)),
        RawOutcome::InvalidContent(e) => Err(fault(SandboxFault::Content(e))),
    }
}

/// Runs an admitted call on a tool source (`source.rs`) instead of a
/// sandbox: one of the plugin's `max-instances` permits, the source's call
/// under `timeout-ms` (dropped, so cancelled, past it), and the same checks
/// of what it returned as a plugin's.
pub(crate) async fn from_source(
    source: &dyn ToolSource,
    gate: &crate::gate::Gate,
    call: &Call<'_>,
    args: &serde_json::Value,
) -> Result<ToolResult, CallError> {
    let (plugin, spec, cx) = (&call.target.plugin, call.target.spec(), call.cx);
    let limits = &plugin.sandbox.limits;
    let fault = |fault: SandboxFault| CallError::Sandbox {
        tool: call.target.tool.to_owned(),
        plugin: plugin.id(),
        fault,
    };
    let started = std::time::Instant::now();
    let progress = cx.progress.clone().map(|sink| {
        let (tool, reports) = (call.target.tool.to_owned(), AtomicUsize::new(0));
        let forward: SourceProgress = Arc::new(move |message: &str, fraction: Option<f32>| {
            // As for a plugin: a bounded number of reports per call.
            if reports.fetch_add(1, Ordering::Relaxed) < MAX_PROGRESS_REPORTS {
                sink(&tool, message, fraction);
            }
        });
        forward
    });
    let request = SourceCall {
        tool: spec.remote_name.as_deref().unwrap_or(&spec.name),
        args,
        call_id: &call.id,
        session_id: cx.session_id.as_deref(),
        progress,
        max_output_bytes: limits.max_output_bytes,
        extensions: &cx.extensions,
        approver: cx.approver_or(gate).cloned(),
    };
    let outcome = tokio::time::timeout(limits.timeout, async {
        let _permit = plugin
            .instances
            .acquire()
            .instrument(tracing::debug_span!("queue"))
            .await
            .map_err(|e| SourceError::Unavailable(e.to_string()))?;
        source.call(request).await
    })
    .await
    .map_err(|_| {
        fault(SandboxFault::Timeout {
            limit: limits.timeout,
        })
    })?
    .map_err(|e| fault(SandboxFault::Source(e)))?;
    let duration = started.elapsed();
    tracing::debug!(tool = call.target.tool, source = %plugin.name, call_id = %call.id, us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX), "source call finished");
    let tool = call.target.tool.to_owned();
    match outcome {
        SourceOutcome::Ok {
            output,
            details,
            structured,
            content,
            meta,
        } => {
            let max = limits.max_output_bytes;
            let too_large = |what: &'static str, size: usize| {
                fault(SandboxFault::OutputTooLarge {
                    what,
                    size,
                    limit: max,
                })
            };
            if output.len() > max {
                return Err(too_large("output", output.len()));
            }
            for (what, value) in [("details", &details), ("structured", &structured)] {
                let size = value.as_ref().map_or(0, |v| v.to_string().len());
                if size > max {
                    return Err(too_large(what, size));
                }
            }
            let meta_size = meta.as_ref().map_or(0, toolhost_content::json_len);
            if meta_size > max {
                return Err(too_large("_meta", meta_size));
            }
            ContentLimits::within(max)
                .check(&content)
                .map_err(|e| fault(SandboxFault::Content(e)))?;
            spec.validate_structured(structured.as_ref())
                .map_err(fault)?;
            let parts = Parts {
                output,
                details,
                structured,
                content,
                meta,
            };
            Ok(result(call, parts, duration))
        }
        SourceOutcome::InvalidArguments(message) => {
            Err(tool_error(tool, ToolErrorKind::InvalidArguments, message))
        }
        SourceOutcome::Failed(message) => Err(tool_error(tool, ToolErrorKind::Failed, message)),
    }
}

/// How many progress reports of one call reach the caller.
const MAX_PROGRESS_REPORTS: usize = 64;

/// What a call returned, checked.
struct Parts {
    output: String,
    details: Option<serde_json::Value>,
    structured: Option<serde_json::Value>,
    content: Vec<toolhost_content::Content>,
    meta: Option<toolhost_content::JsonObject>,
}

fn result(call: &Call<'_>, parts: Parts, duration: std::time::Duration) -> ToolResult {
    let Parts {
        output,
        details,
        structured,
        content,
        meta,
    } = parts;
    ToolResult {
        output,
        details,
        structured,
        content,
        meta,
        tool: call.target.tool.to_owned(),
        plugin: call.target.plugin.name.clone(),
        plugin_version: call.target.plugin.version.clone(),
        duration,
        cached: false,
    }
}

fn tool_error(tool: String, kind: ToolErrorKind, message: String) -> CallError {
    CallError::Tool {
        tool,
        kind,
        message,
    }
}
