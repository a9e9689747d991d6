//! Bindings for `toolhost:plugin@0.4.0` (`wit/`, the current contract):
//! 0.3.0 plus the `tools` import, through which a plugin the operator
//! grants it calls other tools (`call/nested.rs`). Its types are 0.3.0's:
//! the conversions are shared (`since_v0_3.rs`).

version_bindings! {
    path: "wit",
    version: (0, 4, 0),
    imports: { "toolhost:plugin/tools": async },
}

include!("since_v0_3.rs");

/// The `tools` import: a plugin's calls to other tools, answered by the
/// call's [`PluginCalls`](crate::plugin_calls::PluginCalls) (`call/nested.rs`) when the operator lets
/// the plugin call tools, refused otherwise.
impl toolhost::plugin::tools::Host for crate::sandbox::SandboxState {
    async fn list_tools(&mut self) -> Vec<wit::ToolSpec> {
        let tools = self.caller.as_ref().map(|c| c.tools()).unwrap_or_default();
        tools.iter().map(spec_to_wit).collect()
    }

    async fn search_tools(&mut self, query: String, limit: u32) -> Vec<wit::ToolSpec> {
        let tools = self
            .caller
            .as_ref()
            .map(|c| c.search(&query, limit))
            .unwrap_or_default();
        tools.iter().map(spec_to_wit).collect()
    }

    async fn call_tool(
        &mut self,
        name: String,
        args_json: String,
    ) -> Result<wit::ToolOutput, toolhost::plugin::tools::CallError> {
        use crate::plugin_calls::NestedError;
        use toolhost::plugin::tools::CallError as E;
        let Some(caller) = self.caller.as_mut() else {
            return Err(E::NotGranted(
                "this plugin may not call tools: the operator has not granted it `call-tools`"
                    .into(),
            ));
        };
        match caller.call(&name, &args_json).await {
            Ok(result) => Ok(wit::ToolOutput {
                output: result.output,
                details: result.details.map(|d| d.to_string()),
                structured: result.structured.map(|s| s.to_string()),
                content: result.content.iter().map(block_to_wit).collect(),
            }),
            Err(e) => Err(match e {
                NestedError::NotGranted(m) => E::NotGranted(m),
                NestedError::NotFound(m) => E::NotFound(m),
                NestedError::InvalidArguments(m) => E::InvalidArguments(m),
                NestedError::Denied(m) => E::Denied(m),
                NestedError::Failed(m) => E::Failed(m),
                NestedError::Limit(m) => E::Limit(m),
            }),
        }
    }
}

/// A tool as a plugin sees it listed.
fn spec_to_wit(tool: &crate::tool::ToolInfo) -> wit::ToolSpec {
    let a = &tool.annotations;
    wit::ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: tool.input_schema.to_string(),
        annotations: wit::Annotations {
            read_only: a.read_only,
            idempotent: a.idempotent,
            destructive: a.destructive,
            open_world: a.open_world,
        },
        output_schema: tool.output_schema.as_ref().map(ToString::to_string),
    }
}

/// The `hook-plugin` world of this version: a component that exports
/// `hooks` (`before-execute`, `after-execute`), whose outcomes carry
/// content blocks. It imports the same `host` interface as a tool plugin,
/// whose bindings above it reuses.
pub(crate) mod hook {
    wasmtime::component::bindgen!({
        world: "hook-plugin",
        path: "wit",
        exports: { default: async },
        with: {
            "toolhost:plugin/types": super::toolhost::plugin::types,
            "toolhost:plugin/host": super::toolhost::plugin::host,
        },
    });

    include!("since_v0_3_hook.rs");
}
