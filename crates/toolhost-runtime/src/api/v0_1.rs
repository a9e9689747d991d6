//! Bindings for `toolhost:plugin@0.1.0`.

use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Engine, Store};

use super::{Annotations, Level, RawContext, RawOutcome, RawToolSpec};
use crate::sandbox::SandboxState;

wasmtime::component::bindgen!({
    world: "tool-plugin",
    path: "../../wit",
    exports: { default: async },
});

use exports::toolhost::plugin::tool;
use toolhost::plugin::types;

/// The contract version these bindings are for.
pub(crate) const VERSION: semver::Version = semver::Version::new(0, 1, 0);

/// A linker with WASI p2, wasi:http and this version's host interface.
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    ToolPlugin::add_to_linker::<SandboxState, HasSelf<SandboxState>>(&mut linker, |s| s)?;
    Ok(linker)
}

pub(crate) async fn describe(
    plugin: &ToolPlugin,
    store: &mut Store<SandboxState>,
) -> wasmtime::Result<Vec<RawToolSpec>> {
    let specs = plugin.toolhost_plugin_tool().call_describe(store).await?;
    Ok(specs
        .into_iter()
        .map(|s| RawToolSpec {
            name: s.name,
            description: s.description,
            input_schema: s.input_schema,
            annotations: Annotations {
                read_only: s.annotations.read_only,
                idempotent: s.annotations.idempotent,
                destructive: s.annotations.destructive,
                open_world: s.annotations.open_world,
            },
        })
        .collect())
}

pub(crate) async fn execute(
    plugin: &ToolPlugin,
    store: &mut Store<SandboxState>,
    cx: RawContext<'_>,
    name: &str,
    args: &str,
) -> wasmtime::Result<RawOutcome> {
    let context = tool::CallContext {
        call_id: cx.call_id.to_owned(),
        session_id: cx.session_id.map(str::to_owned),
        agent: cx.agent.map(str::to_owned),
    };
    let result = plugin
        .toolhost_plugin_tool()
        .call_execute(store, &context, name, args)
        .await?;
    Ok(match result {
        Ok(out) => RawOutcome::Ok {
            output: out.output,
            details: out.details,
        },
        Err(tool::ToolError::InvalidArguments(m)) => RawOutcome::InvalidArguments(m),
        Err(tool::ToolError::Failed(m)) => RawOutcome::Failed(m),
    })
}

impl types::Host for SandboxState {}

impl toolhost::plugin::host::Host for SandboxState {
    fn log(&mut self, level: types::LogLevel, message: String) {
        let level = match level {
            types::LogLevel::Trace => Level::Trace,
            types::LogLevel::Debug => Level::Debug,
            types::LogLevel::Info => Level::Info,
            types::LogLevel::Warn => Level::Warn,
            types::LogLevel::Error => Level::Error,
        };
        self.plugin_log(level, &message);
    }

    fn get_config(&mut self, key: String) -> Option<String> {
        self.plugin_config(&key)
    }

    fn config_keys(&mut self) -> Vec<String> {
        self.plugin_config_keys()
    }

    fn progress(&mut self, message: String, fraction: Option<f32>) {
        self.report_progress(&message, fraction);
    }
}
