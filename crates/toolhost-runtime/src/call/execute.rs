//! Step 4 of a call: running it. A sandbox slot from the pool (waiting in
//! the queue, or `busy`), the guest in a fresh sandbox (or a reused
//! instance, `reuse.rs`) under the plugin's limits, and the checks of what
//! it returned: sizes (`max-output-bytes`), `details` as JSON, structured
//! content against the tool's output schema.

use wasmtime::Store;

use crate::api::{PluginInstance, RawContext, RawOutcome};
use crate::call::{Call, ToolResult};
use crate::error::{CallError, SandboxFault, ToolErrorKind};
use crate::pool::Pool;
use crate::sandbox::{Sandbox, SandboxState};

/// Runs an admitted call in a fresh sandbox.
pub(crate) async fn fresh(
    pool: &Pool,
    call: &Call<'_>,
    args: &str,
) -> Result<ToolResult, CallError> {
    let _slot = pool.acquire(&call.target.plugin).await?;
    let mut sandbox = pool
        .sandbox(&call.target.plugin.sandbox)
        .map_err(|message| CallError::Host {
            tool: call.target.tool.to_owned(),
            message,
        })?;
    let pre = &call.target.plugin.pre;
    run(
        &mut sandbox,
        call,
        args,
        async |store, raw_cx, name, args| {
            let instance = pre.instantiate(&mut *store).await?;
            instance.execute(store, raw_cx, name, args).await
        },
    )
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
    let outcome = sandbox
        .call(async |store| guest(store, raw_cx, &spec.name, args).await)
        .await;
    let duration = started.elapsed();
    let fault = |fault: SandboxFault| CallError::Sandbox {
        tool: call.target.tool.to_owned(),
        plugin: plugin.id(),
        fault,
    };
    let outcome = outcome.map_err(fault)?;
    tracing::debug!(tool = call.target.tool, plugin = %plugin.id(), call_id = %call.id, us = u64::try_from(duration.as_micros()).unwrap_or(u64::MAX), "call finished");
    let tool = call.target.tool.to_owned();
    match outcome {
        RawOutcome::Ok {
            output,
            details,
            structured,
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
            Ok(ToolResult {
                output,
                details,
                structured,
                tool,
                plugin: plugin.name.clone(),
                plugin_version: plugin.version.clone(),
                duration,
            })
        }
        RawOutcome::InvalidArguments(message) => Err(CallError::Tool {
            tool,
            kind: ToolErrorKind::InvalidArguments,
            message,
        }),
        RawOutcome::Failed(message) => Err(CallError::Tool {
            tool,
            kind: ToolErrorKind::Failed,
            message,
        }),
    }
}
