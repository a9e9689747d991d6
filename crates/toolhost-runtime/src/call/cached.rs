//! The execute step through the result cache (`result_cache.rs`): a
//! read-only, idempotent tool's call with the same arguments, from the same
//! caller, may be answered from a stored result; every other step of the
//! call runs as usual.

use std::time::Instant;

use serde_json::Value;

use super::{Call, ToolResult};
use crate::error::CallError;
use crate::permission::CallStep;
use crate::result_cache::{Args, Cacheable, ResultCache, key};

/// The execute step of `call` with `args` (as admitted; `args_text` is
/// their JSON text) through the cache: a hit answers from it (and is
/// reported as a [`CallStep::Cached`] step); a miss runs `execute` and
/// stores its result when it succeeded. A tool that cannot be cached
/// costs one branch here (and, when it may write, a clear).
pub(crate) async fn execute(
    cache: &ResultCache,
    call: &Call<'_>,
    args: &Value,
    args_text: &str,
    execute: impl AsyncFnOnce() -> Result<ToolResult, CallError>,
) -> Result<ToolResult, CallError> {
    let Some(default_ttl) = cache.enabled() else {
        return execute().await;
    };
    let spec = call.target.spec();
    let Some(ttl) = spec.cache.ttl(default_ttl) else {
        let result = execute().await;
        after_uncached(cache, call);
        return result;
    };
    let started = Instant::now();
    let key = key(
        &call.target.plugin.cache_identity,
        &spec.name,
        Args {
            value: args,
            text: args_text,
        },
        [
            call.cx.session_id.as_deref(),
            call.cx.agent.as_deref(),
            call.cx.client.as_deref(),
        ],
    );
    let generation = match cache.lookup(&key, started) {
        Ok(hit) => {
            let Some(hit) = hit else {
                return execute().await;
            };
            // A hit never waits for anything: without this, a task
            // making cached calls back to back would keep its worker
            // thread forever. It yields once its cooperative budget is
            // spent, as tokio's own resources do.
            tokio::task::coop::consume_budget().await;
            call.cx.step(|| CallStep::Cached);
            tracing::debug!(tool = call.target.tool, plugin = %call.target.plugin.id(), call_id = %call.id, "answered from the result cache");
            let plugin = &call.target.plugin;
            return Ok(ToolResult {
                output: hit.output,
                details: hit.details,
                structured: hit.structured,
                content: hit.content,
                meta: hit.meta,
                tool: call.target.tool.to_owned(),
                plugin: plugin.name.clone(),
                plugin_version: plugin.version.clone(),
                duration: started.elapsed(),
                cached: true,
            });
        }
        Err(generation) => generation,
    };
    let result = execute().await;
    if let Ok(r) = &result {
        let kept = Cacheable {
            tool: &r.tool,
            output: &r.output,
            details: &r.details,
            structured: &r.structured,
            content: &r.content,
            meta: &r.meta,
        };
        cache.store(key, generation, kept, ttl);
    }
    result
}

/// After a call of `call`'s tool that ran outside the cache (one that
/// cannot be cached, or a call on a reused instance, `reuse.rs`): a
/// tool that may write clears the cache (with `clear_after_writes`), so
/// no read answers from before the write.
pub(crate) fn after_uncached(cache: &ResultCache, call: &Call<'_>) {
    if !call.target.spec().annotations.read_only {
        cache.after_write();
    }
}
