//! A plugin instance kept across calls: no instantiation per call, but
//! state (memory, globals) carries over from one call to the next. For
//! plugins that opt into it, and to measure what a fresh instance costs.
//! Its calls go through the same steps as every call (`call/`); only the
//! execution differs.

use std::sync::Arc;
use tracing::Instrument;

use serde_json::Value;

use crate::api::PluginInstance;
use crate::call::named::Named;
use crate::call::{
    Call, CallContext, ToolResult, execute, timed_admit, timed_conclude, timed_refusal, watch,
};
use crate::error::CallError;
use crate::parts::Parts;
use crate::plugin::Plugin;
use crate::pool::Slot;
use crate::runtime::Runtime;
use crate::sandbox::Sandbox;

/// A plugin instance kept across calls; see [`Runtime::reused_instance`].
/// After a fault the instance is discarded and the next call gets a new one.
pub struct ReusedInstance {
    runtime: Runtime,
    plugin: Arc<Plugin>,
    instance: Option<(Sandbox, PluginInstance)>,
    _slot: Slot,
}

impl ReusedInstance {
    pub(crate) fn new(runtime: Runtime, plugin: Arc<Plugin>, slot: Slot) -> Self {
        ReusedInstance {
            runtime,
            plugin,
            instance: None,
            _slot: slot,
        }
    }

    /// Calls one of this plugin's tools (by its exposed name) on the kept
    /// instance, through the same permission checks and hooks as every call.
    pub async fn call(
        &mut self,
        tool: &str,
        args: Value,
        cx: CallContext,
    ) -> Result<ToolResult, CallError> {
        let inner = self.runtime.inner.clone();
        let named = Named::of(tool, &cx, |given| inner.call_id(given));
        let span = crate::call::trace::call_span(&named, &cx);
        let recorder = watch::start(&inner.feed, &named, &cx);
        let result = self
            .steps(&inner, tool, named, args, &cx, recorder.as_ref())
            .instrument(span.clone())
            .await;
        crate::call::trace::finished(&span, &result);
        watch::finished(recorder, &result);
        result
    }

    async fn steps(
        &mut self,
        inner: &Parts,
        tool: &str,
        named: Named<'_>,
        args: Value,
        cx: &CallContext,
        recorder: Option<&watch::Recorder>,
    ) -> Result<ToolResult, CallError> {
        let call = Call::resolve(inner, tool, named, cx, recorder)?;
        if !Arc::ptr_eq(&call.target.plugin, &self.plugin) {
            return Err(CallError::NotFound {
                name: tool.to_owned(),
                suggestions: Vec::new(),
                available: self.plugin.tools.iter().map(|t| t.name.clone()).collect(),
                unavailable: None,
            });
        }
        let admitted = match timed_admit(&inner.gate, &call, args).await {
            Ok(admitted) => admitted,
            Err(refused) => return timed_refusal(&inner.gate, &call, refused).await,
        };
        let executing = watch::begin(&call, "execute");
        let result = self
            .execute(&call, &admitted.args_text)
            .instrument(tracing::debug_span!("execute"))
            .await;
        // Not answered from the result cache (the instance's state is the
        // point of keeping it), but a write still clears what reads cached.
        crate::call::cached::after_uncached(&inner.results, &call);
        watch::executed(&call, executing, &result);
        timed_conclude(&inner.gate, &call, &admitted.args, result).await
    }

    /// Runs the call on the kept instance, instantiating it first if there is none.
    async fn execute(&mut self, call: &Call<'_>, args: &str) -> Result<ToolResult, CallError> {
        let host_err = |message: String| CallError::Host {
            tool: call.target.tool.to_owned(),
            message,
        };
        let (mut sandbox, instance) = match self.instance.take() {
            Some(kept) => kept,
            None => {
                let plugin = &self.plugin;
                let mut sandbox = self
                    .runtime
                    .inner
                    .pool
                    .sandbox(&plugin.sandbox)
                    .map_err(host_err)?;
                sandbox.begin(call.target.tool, None, None);
                let instance = sandbox
                    .call(async |store| plugin.pre.instantiate(store).await)
                    .await
                    .map_err(|fault| host_err(fault.to_string()))?;
                (sandbox, instance)
            }
        };
        let started = std::time::Instant::now();
        let result = execute::on_instance(&mut sandbox, &instance, call, args)
            .instrument(tracing::debug_span!(
                "sandbox",
                toolhost.instance = "reused"
            ))
            .await;
        // Other tasks on this worker get their turn (`fair_share.rs`).
        crate::call::fair_share::after(started.elapsed()).await;
        if !matches!(result, Err(CallError::Sandbox { .. })) {
            self.instance = Some((sandbox, instance));
        }
        result
    }
}

impl Runtime {
    /// An instance of `plugin` kept for many calls: no instantiation per call,
    /// but state (memory, globals) carries over from one call to the next. For
    /// plugins that opt into it, and to measure what a fresh instance costs.
    /// It holds one sandbox slot until dropped.
    pub async fn reused_instance(&self, plugin: &str) -> Result<ReusedInstance, CallError> {
        let registry = self.inner.catalog.registry();
        let Some(p) = registry.plugins.iter().find(|p| p.name == plugin).cloned() else {
            return Err(CallError::NotFound {
                name: plugin.to_owned(),
                suggestions: crate::registry::suggest(
                    plugin,
                    registry.plugins.iter().map(|p| p.name.as_str()),
                ),
                available: registry.plugins.iter().map(|p| p.name.clone()).collect(),
                unavailable: None,
            });
        };
        let slot = self.inner.pool.acquire(p.quota()).await?;
        Ok(ReusedInstance::new(self.clone(), p, slot))
    }
}
