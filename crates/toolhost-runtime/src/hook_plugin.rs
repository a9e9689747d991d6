//! Hook plugins: sandboxed components that export the `hooks` interface,
//! run as one more kind of [`Hook`] in the chain. Each call runs in a fresh
//! instance under the plugin's own limits and grants, like a tool call.

use std::sync::{Arc, Weak};

use serde_json::Value;
use toolhost_hooks::{
    AfterDecision, BeforeDecision, Hook, HookCall, HookError, HookFuture, HookOutcome,
};

use crate::api::{Linked, RawAfter, RawBefore, RawContext, RawOutcome};
use crate::parts::Parts;
use crate::plugin::Plugin;
use crate::pool::Slot;
use crate::sandbox::Sandbox;

/// The hook plugin called `name`, looked up in the registry at each call, so
/// a reloaded hook plugin takes effect on the next call.
pub(crate) struct PluginHook {
    runtime: Weak<Parts>,
    name: String,
}

impl PluginHook {
    /// The hook for the plugin `name`, as the chain holds it.
    pub(crate) fn shared(runtime: Weak<Parts>, name: &str) -> Arc<dyn Hook> {
        Arc::new(PluginHook {
            runtime,
            name: name.to_owned(),
        })
    }

    /// The runtime and the currently loaded hook plugin (see [`hook_pre`]).
    fn current(&self) -> Result<(Arc<Parts>, Arc<Plugin>), HookError> {
        let inner = self
            .runtime
            .upgrade()
            .ok_or_else(|| HookError::Failed("the runtime is shutting down".into()))?;
        let plugin = inner.catalog.hook_plugin(&self.name).ok_or_else(|| {
            HookError::Unavailable(format!(
                "hook plugin `{}` is not loaded (or the plugin of that name is not a hook plugin)",
                self.name
            ))
        })?;
        // The binding follows the plugin whose file carries the name, so a
        // plugin that merely calls itself so (a higher version in another
        // file) cannot stand in for the hook.
        if !plugin.has_named_file() {
            return Err(HookError::Unavailable(format!(
                "hook plugin `{}` is loaded from {}: a hook binding follows only a plugin \
                 whose file is named after it (`{}.wasm`, or `{}@VERSION.wasm`)",
                self.name,
                plugin.path.display(),
                self.name,
                self.name
            )));
        }
        Ok((inner, plugin))
    }
}

/// The linked hook of a plugin that `Catalog::hook_plugin` found.
fn hook_pre(plugin: &Plugin) -> Result<&crate::api::HookPre, HookError> {
    match &plugin.pre {
        Linked::Hook(pre) => Ok(pre),
        Linked::Tool(_) | Linked::Source(_) => Err(HookError::Unavailable(format!(
            "`{}` is not a hook plugin",
            plugin.name
        ))),
    }
}

fn json(what: &str, text: &str) -> Result<Value, HookError> {
    serde_json::from_str(text)
        .map_err(|e| HookError::InvalidReply(format!("{what} is not valid JSON: {e}")))
}

fn optional_json(what: &str, text: Option<String>) -> Result<Option<Value>, HookError> {
    text.map(|t| json(what, &t)).transpose()
}

fn context<'a>(call: &'a HookCall<'a>) -> RawContext<'a> {
    RawContext {
        call_id: call.call_id,
        session_id: call.session_id,
        agent: call.agent,
    }
}

impl Hook for PluginHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn before<'a>(&'a self, call: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
        Box::pin(async move {
            let (inner, plugin) = self.current()?;
            let pre = hook_pre(&plugin)?;
            let args = call.args.to_string();
            let (mut sandbox, _slot) = hook_sandbox(&inner, &plugin).await?;
            let raw = sandbox
                .call(async |store| pre.before(store, context(call), call.tool, &args).await)
                .await
                .map_err(|fault| HookError::Failed(fault.to_string()))?;
            Ok(match raw {
                RawBefore::Proceed => BeforeDecision::Continue,
                RawBefore::Rewrite(args) => {
                    BeforeDecision::Rewrite(json("rewritten arguments", &args)?)
                }
                RawBefore::Block(reason) => BeforeDecision::Block { reason },
                RawBefore::Ask(reason) => BeforeDecision::Ask { reason },
            })
        })
    }

    fn after<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        outcome: &'a HookOutcome,
    ) -> HookFuture<'a, AfterDecision> {
        Box::pin(async move {
            let (inner, plugin) = self.current()?;
            let pre = hook_pre(&plugin)?;
            let args = call.args.to_string();
            let raw_outcome = match outcome {
                HookOutcome::Ok {
                    output,
                    details,
                    structured,
                    content,
                } => RawOutcome::Ok {
                    output: output.clone(),
                    details: details.as_ref().map(Value::to_string),
                    structured: structured.as_ref().map(Value::to_string),
                    content: content.clone(),
                },
                HookOutcome::Err { kind, message } if kind.is_invalid_arguments() => {
                    RawOutcome::InvalidArguments(message.clone())
                }
                HookOutcome::Err { message, .. } => RawOutcome::Failed(message.clone()),
            };
            let (mut sandbox, _slot) = hook_sandbox(&inner, &plugin).await?;
            let raw = sandbox
                .call(async |store| {
                    pre.after(store, context(call), call.tool, &args, raw_outcome)
                        .await
                })
                .await
                .map_err(|fault| HookError::Failed(fault.to_string()))?;
            Ok(match raw {
                RawAfter::Keep => AfterDecision::Keep,
                RawAfter::Replace {
                    output,
                    details,
                    structured,
                    content,
                } => AfterDecision::Replace {
                    output: Some(output),
                    details: Some(optional_json("details", details)?),
                    structured: Some(optional_json("structured content", structured)?),
                    content,
                },
                RawAfter::Fail(message) => AfterDecision::Fail { message },
                RawAfter::InvalidContent(e) => {
                    return Err(HookError::InvalidReply(format!(
                        "the replaced content is refused: {e}"
                    )));
                }
            })
        })
    }
}

/// A fresh sandbox for one hook-plugin function under the plugin's limits
/// and grants, and the sandbox slot it holds, like a tool call.
async fn hook_sandbox(inner: &Parts, plugin: &Plugin) -> Result<(Sandbox, Slot), HookError> {
    let slot = inner
        .pool
        .acquire(plugin.quota())
        .await
        .map_err(|e| HookError::Failed(e.to_string()))?;
    let mut sandbox = inner
        .pool
        .sandbox(&plugin.sandbox)
        .map_err(HookError::Failed)?;
    sandbox.begin(&plugin.name, None, None);
    Ok((sandbox, slot))
}
