//! Bindings for each version of the `toolhost:plugin` contract.
//!
//! Every supported version has one module (`v0_1`, `v0_2`, ...) that invokes
//! [`version_bindings!`] with that version's WIT directory (`wit/0.1.0/`, ...,
//! and `wit/` for the current one): it runs `bindgen!` there, converts the
//! generated types into the version-neutral types below, and implements the
//! version's `host` interface by delegating to [`SandboxState`]. Supporting a
//! new contract version means adding one module and one line to
//! [`contract_versions!`]; nothing else in the runtime changes.

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::error::LoadError;
use crate::sandbox::SandboxState;

/// The body of a version module: `bindgen!` on the version's WIT directory
/// (`path`, relative to this crate), its `VERSION`, the linker, `describe` and
/// `execute` with their conversions to the version-neutral types, and the
/// `host` interface, delegating to [`SandboxState`] (where its logic lives,
/// once for every version).
///
/// The last arguments say how to read what a version added to the records it
/// converts, with the generated record bound to the given name:
/// `|spec| output_schema: EXPR` (an `Option<String>` from the `tool-spec`)
/// and `|out| structured: EXPR` (an `Option<String>` from the `tool-output`).
/// A version without the field passes `None`.
macro_rules! version_bindings {
    (
        path: $path:tt,
        version: ($major:expr, $minor:expr, $patch:expr),
        |$spec:ident| output_schema: $output_schema:expr,
        |$out:ident| structured: $structured:expr $(,)?
    ) => {
        wasmtime::component::bindgen!({
            world: "tool-plugin",
            path: $path,
            exports: { default: async },
        });

        /// The contract version these bindings are for.
        pub(crate) const VERSION: semver::Version = semver::Version::new($major, $minor, $patch);

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
            Ok(specs
                .into_iter()
                .map(|$spec| $crate::api::RawToolSpec {
                    output_schema: $output_schema,
                    name: $spec.name,
                    description: $spec.description,
                    input_schema: $spec.input_schema,
                    annotations: $crate::api::Annotations {
                        read_only: $spec.annotations.read_only,
                        idempotent: $spec.annotations.idempotent,
                        destructive: $spec.annotations.destructive,
                        open_world: $spec.annotations.open_world,
                    },
                })
                .collect())
        }

        /// Calls `execute` and converts its outcome.
        pub(crate) async fn execute(
            plugin: &ToolPlugin,
            store: &mut wasmtime::Store<$crate::sandbox::SandboxState>,
            cx: $crate::api::RawContext<'_>,
            name: &str,
            args: &str,
        ) -> wasmtime::Result<$crate::api::RawOutcome> {
            use exports::toolhost::plugin::tool;
            use $crate::api::RawOutcome;
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
                Ok($out) => RawOutcome::Ok {
                    structured: $structured,
                    output: $out.output,
                    details: $out.details,
                },
                Err(tool::ToolError::InvalidArguments(m)) => RawOutcome::InvalidArguments(m),
                Err(tool::ToolError::Failed(m)) => RawOutcome::Failed(m),
            })
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

pub(crate) mod v0_1;
pub(crate) mod v0_2;

/// Generates, from the list of supported versions (newest first: the first
/// compatible one links a component), [`supported_versions`], [`Linkers`],
/// [`PluginPre`] and [`PluginInstance`], with one variant per version and the
/// dispatch to each version's module.
macro_rules! contract_versions {
    ($($variant:ident => $module:ident),+ $(,)?) => {
        /// The contract versions this host has bindings for, newest first.
        pub fn supported_versions() -> Vec<semver::Version> {
            vec![$($module::VERSION),+]
        }

        /// One linker per contract version, shared by all plugins of that
        /// version, and one for hook plugins.
        pub(crate) struct Linkers {
            $($module: Linker<SandboxState>,)+
            pub(crate) hooks: Linker<SandboxState>,
        }

        impl Linkers {
            pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Linkers> {
                Ok(Linkers {
                    $($module: $module::linker(engine)?,)+
                    hooks: v0_2::hook::linker(engine)?,
                })
            }
        }

        /// A plugin component linked and ready to instantiate, for its contract version.
        pub(crate) enum PluginPre {
            $($variant($module::ToolPluginPre<SandboxState>),)+
        }

        /// An instantiated plugin, for its contract version.
        pub(crate) enum PluginInstance {
            $($variant($module::ToolPlugin),)+
        }

        impl PluginPre {
            /// Links `component` for the contract version it was built against.
            pub(crate) fn new(
                linkers: &Linkers,
                component: &Component,
                version: &semver::Version,
            ) -> Result<PluginPre, LoadError> {
                let link = |e: wasmtime::Error| LoadError::Link(format!("{e:#}"));
                $(
                    if compatible(&$module::VERSION, version) {
                        let pre = linkers.$module.instantiate_pre(component).map_err(link)?;
                        return Ok(PluginPre::$variant(
                            $module::ToolPluginPre::new(pre).map_err(link)?,
                        ));
                    }
                )+
                Err(LoadError::UnsupportedVersion {
                    found: version.to_string(),
                    supported: supported_versions()
                        .iter()
                        .map(|v| format!("{PACKAGE}@{v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }

            /// Instantiates the component in `store`.
            pub(crate) async fn instantiate(
                &self,
                store: &mut wasmtime::Store<SandboxState>,
            ) -> wasmtime::Result<PluginInstance> {
                Ok(match self {
                    $(PluginPre::$variant(pre) => {
                        PluginInstance::$variant(pre.instantiate_async(store).await?)
                    })+
                })
            }
        }

        impl PluginInstance {
            pub(crate) async fn describe(
                &self,
                store: &mut wasmtime::Store<SandboxState>,
            ) -> wasmtime::Result<Vec<RawToolSpec>> {
                match self {
                    $(PluginInstance::$variant(p) => $module::describe(p, store).await,)+
                }
            }

            pub(crate) async fn execute(
                &self,
                store: &mut wasmtime::Store<SandboxState>,
                cx: RawContext<'_>,
                name: &str,
                args: &str,
            ) -> wasmtime::Result<RawOutcome> {
                match self {
                    $(PluginInstance::$variant(p) => $module::execute(p, store, cx, name, args).await,)+
                }
            }
        }
    };
}

contract_versions! {
    V0_2 => v0_2,
    V0_1 => v0_1,
}

/// The package name every contract version shares.
pub const PACKAGE: &str = "toolhost:plugin";

/// Behaviour hints of a tool (MCP's annotations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Does not change its environment.
    pub read_only: bool,
    /// Repeating a call has no further effect.
    pub idempotent: bool,
    /// May make destructive updates.
    pub destructive: bool,
    /// Talks to an open world of external entities.
    pub open_world: bool,
}

/// A tool as `describe()` declares it, before validation.
#[derive(Debug, Clone)]
pub(crate) struct RawToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: String,
    /// JSON Schema of the structured result (0.2.0 and later).
    pub output_schema: Option<String>,
    pub annotations: Annotations,
}

/// Call context passed to `execute`.
#[derive(Debug, Clone)]
pub(crate) struct RawContext<'a> {
    pub call_id: &'a str,
    pub session_id: Option<&'a str>,
    pub agent: Option<&'a str>,
}

/// What `execute` returned.
#[derive(Debug)]
pub(crate) enum RawOutcome {
    Ok {
        output: String,
        details: Option<String>,
        /// Structured result as JSON text (0.2.0 and later).
        structured: Option<String>,
    },
    InvalidArguments(String),
    Failed(String),
}

/// A linker with WASI p2 and wasi:http (sockets and grants are decided per
/// sandbox); each world adds its own `toolhost:plugin` interfaces.
pub(crate) fn wasi_linker(engine: &Engine) -> wasmtime::Result<Linker<SandboxState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    Ok(linker)
}

/// What a hook plugin's `before-execute` decided.
#[derive(Debug)]
pub(crate) enum RawBefore {
    Proceed,
    Rewrite(String),
    Block(String),
    Ask(String),
}

/// What a hook plugin's `after-execute` decided.
#[derive(Debug)]
pub(crate) enum RawAfter {
    Keep,
    Replace {
        output: String,
        details: Option<String>,
        structured: Option<String>,
    },
    Fail(String),
}

/// Which world a component targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComponentKind {
    /// Exports `tool`: a tool plugin.
    Tool,
    /// Exports `hooks` only: a hook plugin.
    Hook,
}

/// Whether `component` is a tool plugin or a hook plugin, from its exports.
pub(crate) fn detect_kind(engine: &Engine, component: &Component) -> ComponentKind {
    let ty = component.component_type();
    let mut exports = ty.exports(engine).map(|(n, _)| n.to_owned());
    let tool = format!("{PACKAGE}/tool@");
    let hooks = format!("{PACKAGE}/hooks@");
    let names: Vec<String> = exports.by_ref().collect();
    if !names.iter().any(|n| n.starts_with(&tool)) && names.iter().any(|n| n.starts_with(&hooks)) {
        ComponentKind::Hook
    } else {
        ComponentKind::Tool
    }
}

/// A hook plugin linked and ready to instantiate. Hook plugins are loaded
/// from contract 0.2.0 on (0.1.0 defined the world; no host loaded it).
pub(crate) struct HookPre(v0_2::hook::HookPluginPre<SandboxState>);

impl HookPre {
    /// Links a hook plugin built against `version`.
    pub(crate) fn new(
        linker: &Linker<SandboxState>,
        component: &Component,
        version: &semver::Version,
    ) -> Result<HookPre, LoadError> {
        if !compatible(&v0_2::VERSION, version) {
            return Err(LoadError::UnsupportedVersion {
                found: version.to_string(),
                supported: format!("{PACKAGE}@{} (hook plugins)", v0_2::VERSION),
            });
        }
        let link = |e: wasmtime::Error| LoadError::Link(format!("{e:#}"));
        let pre = linker.instantiate_pre(component).map_err(link)?;
        Ok(HookPre(v0_2::hook::HookPluginPre::new(pre).map_err(link)?))
    }

    /// Instantiates the hook plugin and calls `before-execute`.
    pub(crate) async fn before(
        &self,
        store: &mut wasmtime::Store<SandboxState>,
        cx: RawContext<'_>,
        tool: &str,
        args: &str,
    ) -> wasmtime::Result<RawBefore> {
        let instance = self.0.instantiate_async(&mut *store).await?;
        v0_2::hook::before(&instance, store, cx, tool, args).await
    }

    /// Instantiates the hook plugin and calls `after-execute`.
    pub(crate) async fn after(
        &self,
        store: &mut wasmtime::Store<SandboxState>,
        cx: RawContext<'_>,
        tool: &str,
        args: &str,
        outcome: RawOutcome,
    ) -> wasmtime::Result<RawAfter> {
        let instance = self.0.instantiate_async(&mut *store).await?;
        v0_2::hook::after(&instance, store, cx, tool, args, outcome).await
    }
}

/// A linked component of either kind.
pub(crate) enum Linked {
    Tool(PluginPre),
    Hook(HookPre),
}

impl Linked {
    /// Instantiates a tool plugin (a hook plugin has no tools to run).
    pub(crate) async fn instantiate(
        &self,
        store: &mut wasmtime::Store<SandboxState>,
    ) -> wasmtime::Result<PluginInstance> {
        match self {
            Linked::Tool(pre) => pre.instantiate(store).await,
            Linked::Hook(_) => Err(wasmtime::Error::msg("a hook plugin has no tools to run")),
        }
    }
}

/// Host-side log levels a plugin may use.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Reads the contract version a component was built against from the names
/// of its `toolhost:plugin` exports (e.g. `toolhost:plugin/tool@0.1.0`).
pub(crate) fn detect_version(
    engine: &Engine,
    component: &Component,
) -> Result<semver::Version, LoadError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    let prefix = format!("{PACKAGE}/");
    let Some(name) = exports.iter().find(|n| n.starts_with(&prefix)) else {
        return Err(LoadError::NotAPlugin(format!(
            "it exports no `{PACKAGE}` interface (exports: {})",
            if exports.is_empty() {
                "none".to_owned()
            } else {
                exports.join(", ")
            }
        )));
    };
    let Some((_, version)) = name.split_once('@') else {
        return Err(LoadError::NotAPlugin(format!(
            "export `{name}` carries no version"
        )));
    };
    semver::Version::parse(version)
        .map_err(|e| LoadError::NotAPlugin(format!("export `{name}` has a bad version: {e}")))
}

/// Whether bindings for `ours` can run a component built against `theirs`:
/// same major (same minor for 0.x), and not newer than ours.
fn compatible(ours: &semver::Version, theirs: &semver::Version) -> bool {
    let same_line = if ours.major == 0 {
        theirs.major == 0 && theirs.minor == ours.minor
    } else {
        theirs.major == ours.major
    };
    same_line && theirs <= ours
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        semver::Version::parse(s).unwrap()
    }

    #[test]
    fn compatibility_follows_semver_for_zero_versions() {
        assert!(compatible(&v("0.1.0"), &v("0.1.0")));
        assert!(!compatible(&v("0.1.0"), &v("0.2.0")));
        assert!(!compatible(&v("0.1.0"), &v("0.1.1")), "newer than ours");
        assert!(compatible(&v("0.1.3"), &v("0.1.1")));
        assert!(!compatible(&v("1.2.0"), &v("2.0.0")));
        assert!(compatible(&v("1.2.0"), &v("1.1.0")));
        assert!(
            !compatible(&v("0.2.0"), &v("0.1.0")),
            "0.1 has its own bindings"
        );
    }

    #[test]
    fn each_supported_version_is_served_by_its_own_bindings() {
        let supported = supported_versions();
        assert_eq!(supported, vec![v("0.2.0"), v("0.1.0")]);
        for theirs in &supported {
            let serving: Vec<_> = supported
                .iter()
                .filter(|ours| compatible(ours, theirs))
                .collect();
            assert_eq!(serving, vec![theirs], "bindings serving {theirs}");
        }
    }
}
