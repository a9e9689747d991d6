//! Bindings for `toolhost:plugin@0.2.0` (`wit/0.2.0/`, frozen): 0.1.0 plus
//! structured output (`tool-spec.output-schema`, `tool-output.structured`);
//! no content blocks.

use super::types::{Annotations, RawContext, RawOutcome, RawToolSpec};

version_bindings! {
    path: "wit/0.2.0",
    version: (0, 2, 0),
}

use exports::toolhost::plugin::tool;

impl From<tool::ToolSpec> for RawToolSpec {
    fn from(spec: tool::ToolSpec) -> Self {
        RawToolSpec {
            name: spec.name,
            description: spec.description,
            input_schema: spec.input_schema,
            output_schema: spec.output_schema,
            annotations: spec.annotations.into(),
        }
    }
}

impl From<toolhost::plugin::types::Annotations> for Annotations {
    fn from(a: toolhost::plugin::types::Annotations) -> Self {
        Annotations {
            read_only: a.read_only,
            idempotent: a.idempotent,
            destructive: a.destructive,
            open_world: a.open_world,
        }
    }
}

impl From<RawContext<'_>> for tool::CallContext {
    fn from(cx: RawContext<'_>) -> Self {
        tool::CallContext {
            call_id: cx.call_id.to_owned(),
            session_id: cx.session_id.map(str::to_owned),
            agent: cx.agent.map(str::to_owned),
        }
    }
}

impl From<Result<tool::ToolOutput, tool::ToolError>> for RawOutcome {
    fn from(result: Result<tool::ToolOutput, tool::ToolError>) -> Self {
        match result {
            Ok(out) => RawOutcome::Ok {
                output: out.output,
                details: out.details,
                structured: out.structured,
                // 0.2.0 has no content blocks.
                content: Vec::new(),
            },
            Err(tool::ToolError::InvalidArguments(m)) => RawOutcome::InvalidArguments(m),
            Err(tool::ToolError::Failed(m)) => RawOutcome::Failed(m),
        }
    }
}

/// The `hook-plugin` world of this version: a component that exports
/// `hooks` (`before-execute`, `after-execute`). It imports the same `host`
/// interface as a tool plugin, whose bindings above it reuses.
pub(crate) mod hook {
    use crate::api::types::{RawAfter, RawBefore, RawContext, RawOutcome};
    use crate::sandbox::SandboxState;

    wasmtime::component::bindgen!({
        world: "hook-plugin",
        path: "wit/0.2.0",
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

    // `hooks::CallContext` is the `types` interface's record, shared with
    // the tool world above: its conversion is there.

    impl From<hooks::BeforeDecision> for RawBefore {
        fn from(decision: hooks::BeforeDecision) -> Self {
            match decision {
                hooks::BeforeDecision::Proceed => RawBefore::Proceed,
                hooks::BeforeDecision::Rewrite(args) => RawBefore::Rewrite(args),
                hooks::BeforeDecision::Block(reason) => RawBefore::Block(reason),
                hooks::BeforeDecision::Ask(reason) => RawBefore::Ask(reason),
            }
        }
    }

    impl From<RawOutcome> for Result<hooks::ToolOutput, hooks::ToolError> {
        fn from(outcome: RawOutcome) -> Self {
            match outcome {
                // A 0.2.0 hook sees no content blocks; what it replaces
                // leaves them as they are (`RawAfter::Replace`'s `None`).
                RawOutcome::Ok {
                    output,
                    details,
                    structured,
                    ..
                } => Ok(hooks::ToolOutput {
                    output,
                    details,
                    structured,
                }),
                RawOutcome::InvalidArguments(m) => Err(hooks::ToolError::InvalidArguments(m)),
                RawOutcome::Failed(m) => Err(hooks::ToolError::Failed(m)),
                RawOutcome::InvalidContent(e) => Err(hooks::ToolError::Failed(e.to_string())),
            }
        }
    }

    impl From<hooks::AfterDecision> for RawAfter {
        fn from(decision: hooks::AfterDecision) -> Self {
            match decision {
                hooks::AfterDecision::Keep => RawAfter::Keep,
                hooks::AfterDecision::Replace(out) => RawAfter::Replace {
                    output: out.output,
                    details: out.details,
                    structured: out.structured,
                    content: None,
                },
                hooks::AfterDecision::Fail(message) => RawAfter::Fail(message),
            }
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
            .call_before_execute(store, &cx.into(), tool, args)
            .await?;
        Ok(decision.into())
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
        let outcome: Result<hooks::ToolOutput, hooks::ToolError> = outcome.into();
        let decision = plugin
            .toolhost_plugin_hooks()
            .call_after_execute(store, &cx.into(), tool, args, outcome.as_ref())
            .await?;
        Ok(decision.into())
    }
}
