//! Which version's bindings serve a component, and the dispatch of each
//! call to them: the version is read from the component's exports
//! (`toolhost:plugin/tool@0.1.0`), and the first compatible version of the
//! host's (newest first) links it.

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::plain::{PlainExports, PlainInstance, PlainPre};
use super::types::{RawAfter, RawBefore, RawContext, RawOutcome, RawToolSpec};
use super::{v0_1, v0_2, v0_3, v0_4};
use crate::error::LoadError;
use crate::sandbox::SandboxState;

/// The package name every contract version shares.
pub const PACKAGE: &str = "toolhost:plugin";

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
        /// version, and the hook plugins' linkers.
        pub(crate) struct Linkers {
            $($module: Linker<SandboxState>,)+
            pub(crate) hooks: HookLinkers,
        }

        impl Linkers {
            pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Linkers> {
                Ok(Linkers {
                    $($module: $module::linker(engine)?,)+
                    hooks: HookLinkers::new(engine)?,
                })
            }
        }

        /// A plugin component linked and ready to instantiate, for its contract version.
        pub(crate) enum PluginPre {
            $($variant($module::ToolPluginPre<SandboxState>),)+
            /// A plain component (`plain/`), of no contract version.
            Plain(PlainPre),
        }

        /// An instantiated plugin, for its contract version.
        pub(crate) enum PluginInstance {
            $($variant($module::ToolPlugin),)+
            Plain(PlainInstance),
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

            /// Links a plain component (WASI only) with its functions as tools.
            pub(crate) fn plain(
                engine: &Engine,
                component: &Component,
                exports: PlainExports,
            ) -> Result<PluginPre, LoadError> {
                Ok(PluginPre::Plain(PlainPre::new(engine, component, exports)?))
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
                    PluginPre::Plain(pre) => PluginInstance::Plain(pre.instantiate(store).await?),
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
                    PluginInstance::Plain(p) => Ok(p.describe()),
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
                    // A plain component's functions take no call context.
                    PluginInstance::Plain(p) => p.execute(store, name, args).await,
                }
            }
        }
    };
}

contract_versions! {
    V0_4 => v0_4,
    V0_3 => v0_3,
    V0_2 => v0_2,
    V0_1 => v0_1,
}

/// Generates, from the versions that have a hook world (newest first),
/// [`HookPre`] with one variant per version and its dispatch, like
/// [`contract_versions!`] does for tool plugins. Hook plugins are loaded
/// from contract 0.2.0 on (0.1.0 defined the world; no host loaded it).
macro_rules! hook_versions {
    ($($variant:ident => $module:ident),+ $(,)?) => {
        /// One linker per contract version with a hook world.
        pub(crate) struct HookLinkers {
            $($module: Linker<SandboxState>,)+
        }

        impl HookLinkers {
            fn new(engine: &Engine) -> wasmtime::Result<HookLinkers> {
                Ok(HookLinkers {
                    $($module: $module::hook::linker(engine)?,)+
                })
            }
        }

        /// A hook plugin linked and ready to instantiate, for its contract version.
        pub(crate) enum HookPre {
            $($variant($module::hook::HookPluginPre<SandboxState>),)+
        }

        impl HookPre {
            /// Links a hook plugin built against `version`.
            pub(crate) fn new(
                linkers: &HookLinkers,
                component: &Component,
                version: &semver::Version,
            ) -> Result<HookPre, LoadError> {
                let link = |e: wasmtime::Error| LoadError::Link(format!("{e:#}"));
                $(
                    if compatible(&$module::VERSION, version) {
                        let pre = linkers.$module.instantiate_pre(component).map_err(link)?;
                        return Ok(HookPre::$variant(
                            $module::hook::HookPluginPre::new(pre).map_err(link)?,
                        ));
                    }
                )+
                Err(LoadError::UnsupportedVersion {
                    found: version.to_string(),
                    supported: [$(format!("{PACKAGE}@{}", $module::VERSION)),+].join(", ")
                        + " (hook plugins)",
                })
            }

            /// Instantiates the hook plugin and calls `before-execute`.
            pub(crate) async fn before(
                &self,
                store: &mut wasmtime::Store<SandboxState>,
                cx: RawContext<'_>,
                tool: &str,
                args: &str,
            ) -> wasmtime::Result<RawBefore> {
                match self {
                    $(HookPre::$variant(pre) => {
                        let instance = pre.instantiate_async(&mut *store).await?;
                        $module::hook::before(&instance, store, cx, tool, args).await
                    })+
                }
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
                match self {
                    $(HookPre::$variant(pre) => {
                        let instance = pre.instantiate_async(&mut *store).await?;
                        $module::hook::after(&instance, store, cx, tool, args, outcome).await
                    })+
                }
            }
        }
    };
}

hook_versions! {
    V0_4 => v0_4,
    V0_3 => v0_3,
    V0_2 => v0_2,
}

/// Which world a component targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ComponentKind {
    /// Exports `tool`: a tool plugin.
    Tool,
    /// Exports `hooks` only: a hook plugin.
    Hook,
    /// Exports functions and no `toolhost:plugin` interface: a plain
    /// component, its functions the tools (`plain/`).
    Plain,
}

/// Whether `component` is a tool plugin or a hook plugin, from its exports.
pub(crate) fn detect_kind(engine: &Engine, component: &Component) -> ComponentKind {
    let ty = component.component_type();
    let mut exports = ty.exports(engine).map(|(n, _)| n.to_owned());
    let tool = format!("{PACKAGE}/tool@");
    let hooks = format!("{PACKAGE}/hooks@");
    let names: Vec<String> = exports.by_ref().collect();
    if super::plain::is_plain(engine, component) {
        return ComponentKind::Plain;
    }
    if !names.iter().any(|n| n.starts_with(&tool)) && names.iter().any(|n| n.starts_with(&hooks)) {
        ComponentKind::Hook
    } else {
        ComponentKind::Tool
    }
}

/// What a plugin's calls run on: a linked component of either kind, or a
/// tool source outside the engine (`source.rs`).
pub(crate) enum Linked {
    Tool(PluginPre),
    Hook(HookPre),
    Source(std::sync::Arc<dyn crate::source::ToolSource>),
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
            Linked::Source(_) => Err(wasmtime::Error::msg(
                "a tool source has no WebAssembly instance",
            )),
        }
    }
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
        assert_eq!(
            supported,
            vec![v("0.4.0"), v("0.3.0"), v("0.2.0"), v("0.1.0")]
        );
        assert_eq!(
            supported[0],
            crate::api::latest::VERSION,
            "`latest` is the newest"
        );
        for theirs in &supported {
            let serving: Vec<_> = supported
                .iter()
                .filter(|ours| compatible(ours, theirs))
                .collect();
            assert_eq!(serving, vec![theirs], "bindings serving {theirs}");
        }
    }
}
