//! Bindings for `toolhost:plugin@0.2.0` (`wit/`, the current contract):
//! 0.1.0 plus structured output (`tool-spec.output-schema`,
//! `tool-output.structured`).

version_bindings! {
    path: "../../wit",
    version: (0, 2, 0),
    |spec| output_schema: spec.output_schema,
    |out| structured: out.structured,
}

/// The `hook-plugin` world of this version: a component that exports
/// `hooks` (`before-execute`, `after-execute`). It imports the same `host`
/// interface as a tool plugin, whose bindings above it reuses.
pub(crate) mod hook {
    use super::super::{RawAfter, RawBefore, RawContext, RawOutcome};
    use crate::sandbox::SandboxState;

    wasmtime::component::bindgen!({
        world: "hook-plugin",
        path: "../../wit",
        exports: { default: async },
        with: {
            "toolhost:plugin/types": super::toolhost::plugin::types,
            "toolhost:plugin/host": super::toolhost::plugin::host,
        },
    });

    use exports::toolhost::plugin::hooks;

    /// A linker with WASI p2, wasi:http and the `host` interface, for hook plugins.
    pub(crate) fn linker(
        engine: &wasmtime::Engine,
    ) -> wasmtime::Result<wasmtime::component::Linker<SandboxState>> {
        let mut linker = crate::api::wasi_linker(engine)?;
        HookPlugin::add_to_linker::<SandboxState, wasmtime::component::HasSelf<SandboxState>>(
            &mut linker,
            |s| s,
        )?;
        Ok(linker)
    }

    fn context(cx: &RawContext<'_>) -> hooks::CallContext {
        hooks::CallContext {
            call_id: cx.call_id.to_owned(),
            session_id: cx.session_id.map(str::to_owned),
            agent: cx.agent.map(str::to_owned),
        }
    }

    /// Calls `before-execute`.
    pub(crate) async fn before(
        plugin: &HookPlugin,
        store: &mut wasmtime::Store<SandboxState>,
        cx: RawContext<'_>,
        tool: &str,
        args: &str,
    ) -> wasmtime::Result<RawBefore> {
        let decision = plugin
            .toolhost_plugin_hooks()
            .call_before_execute(store, &context(&cx), tool, args)
            .await?;
        Ok(match decision {
            hooks::BeforeDecision::Proceed => RawBefore::Proceed,
            hooks::BeforeDecision::Rewrite(args) => RawBefore::Rewrite(args),
            hooks::BeforeDecision::Block(reason) => RawBefore::Block(reason),
            hooks::BeforeDecision::Ask(reason) => RawBefore::Ask(reason),
        })
    }

    /// Calls `after-execute` with the call's outcome.
    pub(crate) async fn after(
        plugin: &HookPlugin,
        store: &mut wasmtime::Store<SandboxState>,
        cx: RawContext<'_>,
        tool: &str,
        args: &str,
        outcome: RawOutcome,
    ) -> wasmtime::Result<RawAfter> {
        let outcome = match outcome {
            RawOutcome::Ok {
                output,
                details,
                structured,
            } => Ok(hooks::ToolOutput {
                output,
                details,
                structured,
            }),
            RawOutcome::InvalidArguments(m) => Err(hooks::ToolError::InvalidArguments(m)),
            RawOutcome::Failed(m) => Err(hooks::ToolError::Failed(m)),
        };
        let decision = plugin
            .toolhost_plugin_hooks()
            .call_after_execute(store, &context(&cx), tool, args, outcome.as_ref())
            .await?;
        Ok(match decision {
            hooks::AfterDecision::Keep => RawAfter::Keep,
            hooks::AfterDecision::Replace(out) => RawAfter::Replace {
                output: out.output,
                details: out.details,
                structured: out.structured,
            },
            hooks::AfterDecision::Fail(message) => RawAfter::Fail(message),
        })
    }
}
