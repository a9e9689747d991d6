// What the hook worlds of contracts 0.3.0 and 0.4.0 share: the conversions
// of decisions and outcomes. Included into each version's `hook` module,
// after its `bindgen!`.

use toolhost_content::Content;

use crate::api::types::{RawAfter, RawBefore, RawContext, RawOutcome};
use crate::sandbox::SandboxState;


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

/// Calls `after-execute` with the call's outcome. A replacement whose
/// content is the content the hook was shown leaves the content to the
/// runtime (`None`): the hook changed the text only.
pub(crate) async fn after(
    plugin: &HookPlugin,
    store: &mut wasmtime::Store<SandboxState>,
    cx: RawContext<'_>,
    tool: &str,
    args: &str,
    outcome: RawOutcome,
) -> wasmtime::Result<RawAfter> {
    let mut shown: Vec<Content> = Vec::new();
    let outcome: Result<hooks::ToolOutput, hooks::ToolError> = match outcome {
        RawOutcome::Ok {
            output,
            details,
            structured,
            content,
        } => {
            let blocks: Vec<_> = content.iter().map(super::block_to_wit).collect();
            // What the hook saw, as it would give it back.
            shown = super::content_from_wit(blocks.clone()).unwrap_or_default();
            Ok(hooks::ToolOutput {
                output,
                details,
                structured,
                content: blocks,
            })
        }
        RawOutcome::InvalidArguments(m) => Err(hooks::ToolError::InvalidArguments(m)),
        RawOutcome::Failed(m) => Err(hooks::ToolError::Failed(m)),
        RawOutcome::InvalidContent(e) => Err(hooks::ToolError::Failed(e.to_string())),
    };
    let decision = plugin
        .toolhost_plugin_hooks()
        .call_after_execute(store, &cx.into(), tool, args, outcome.as_ref())
        .await?;
    Ok(match decision {
        hooks::AfterDecision::Keep => RawAfter::Keep,
        hooks::AfterDecision::Replace(out) => match super::content_from_wit(out.content) {
            Ok(content) => RawAfter::Replace {
                output: out.output,
                details: out.details,
                structured: out.structured,
                content: (content != shown).then_some(content),
            },
            Err(e) => RawAfter::InvalidContent(e),
        },
        hooks::AfterDecision::Fail(message) => RawAfter::Fail(message),
    })
}
