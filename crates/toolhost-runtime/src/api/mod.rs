//! Bindings for each version of the `toolhost:plugin` contract, one module
//! per version (Zed's `since_v0_X_Y` shape):
//!
//! - `types.rs`: the version-neutral types the rest of the runtime sees
//!   (`RawToolSpec`, `RawOutcome`, `RawBefore`, …);
//! - `v0_1.rs` … `v0_4.rs`: one version each (0.3.0 and 0.4.0 share their
//!   conversions, `since_v0_3.rs`, as their types are the same) — the generated bindings (the
//!   [`version_bindings!`] macro: `bindgen!`, linker, host interface) and
//!   that version's conversions to and from the neutral types, as plain
//!   `impl From`; a version with a hook world has a `hook` module too;
//! - `dispatch.rs`: which version's bindings link a component (read from
//!   its exports), and the enums that dispatch each call to them;
//! - `plain/`: a component of another host's world (no contract), its
//!   exported functions as tools, their schemas from the WIT types;
//! - `latest` names the newest version module.
//!
//! Adding contract 0.5.0 (as 0.4.0 was added):
//! 1. copy the current `wit/plugin.wit` to `wit/0.4.0/` (frozen) and point
//!    `v0_4.rs`'s `path` (and its hook module's) there;
//! 2. add `v0_5.rs`: `version_bindings! { path: "wit", version: (0, 5, 0) }`
//!    plus its `impl From` conversions (or an `include!` of the previous
//!    version's when the types did not change) and a `hook` module;
//! 3. add `V0_5 => v0_5` first in `contract_versions!` and in
//!    `hook_versions!` in `dispatch.rs`, and point `latest` at it.

use wasmtime::Engine;
use wasmtime::component::Linker;

use crate::sandbox::SandboxState;

macro_rules! version_bindings {
    (
        path: $path:tt,
        version: ($major:expr, $minor:expr, $patch:expr)
        $(, imports: $imports:tt)? $(,)?
    ) => {
        wasmtime::component::bindgen!({
            world: "tool-plugin",
            path: $path,
            $(imports: $imports,)?
            exports: { default: async },
        });

        /// The contract version these bindings are for.
        pub const VERSION: semver::Version = semver::Version::new($major, $minor, $patch);

        /// A linker with WASI p2, wasi:http and this version's host interface.
        pub(crate) fn linker(
            engine: &wasmtime::Engine,
        ) -> wasmtime::Result<wasmtime::component::Linker<$crate::sandbox::SandboxState>> {
            use $crate::sandbox::SandboxState;
            let mut linker = $crate::api::wasi_linker(engine)?;
            ToolPlugin::add_to_linker::<SandboxState, wasmtime::component::HasSelf<SandboxState>>(
                &mut linker,
                |s| s,
            )?;
            Ok(linker)
        }

        /// Calls `describe` and converts the specs.
        pub(crate) async fn describe(
            plugin: &ToolPlugin,
            store: &mut wasmtime::Store<$crate::sandbox::SandboxState>,
        ) -> wasmtime::Result<Vec<$crate::api::RawToolSpec>> {
            let specs = plugin.toolhost_plugin_tool().call_describe(store).await?;
            Ok(specs.into_iter().map($crate::api::RawToolSpec::from).collect())
        }

        /// Calls `execute` and converts its outcome.
        pub(crate) async fn execute(
            plugin: &ToolPlugin,
            store: &mut wasmtime::Store<$crate::sandbox::SandboxState>,
            cx: $crate::api::RawContext<'_>,
            name: &str,
            args: &str,
        ) -> wasmtime::Result<$crate::api::RawOutcome> {
            let context = exports::toolhost::plugin::tool::CallContext::from(cx);
            let result = plugin
                .toolhost_plugin_tool()
                .call_execute(store, &context, name, args)
                .await?;
            Ok($crate::api::RawOutcome::from(result))
        }

        impl toolhost::plugin::types::Host for $crate::sandbox::SandboxState {}

        impl toolhost::plugin::host::Host for $crate::sandbox::SandboxState {
            fn log(&mut self, level: toolhost::plugin::types::LogLevel, message: String) {
                use toolhost::plugin::types::LogLevel;
                use $crate::api::Level;
                let level = match level {
                    LogLevel::Trace => Level::Trace,
                    LogLevel::Debug => Level::Debug,
                    LogLevel::Info => Level::Info,
                    LogLevel::Warn => Level::Warn,
                    LogLevel::Error => Level::Error,
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
    };
}

/// A linker with WASI p2 and wasi:http (sockets and grants are decided per
/// sandbox); each world adds its own `toolhost:plugin` interfaces.
pub(crate) fn wasi_linker(engine: &Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    Ok(linker)
}

mod dispatch;
pub(crate) mod plain;
pub(crate) mod types;
pub(crate) mod v0_1;
pub(crate) mod v0_2;
pub(crate) mod v0_3;
pub(crate) mod v0_4;

/// The newest contract version's bindings.
pub(crate) use v0_4 as latest;

pub(crate) use dispatch::{
    ComponentKind, HookPre, Linked, Linkers, PluginInstance, PluginPre, detect_kind, detect_version,
};
pub use dispatch::{PACKAGE, supported_versions};
pub use types::Annotations;
pub(crate) use types::{Level, RawAfter, RawBefore, RawContext, RawOutcome, RawToolSpec};
