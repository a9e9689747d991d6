//! Bindings for each version of the `toolhost:plugin` contract.
//!
//! Every supported version has one module (`v0_1`, ...) that runs `bindgen!`
//! on that version's WIT and converts its generated types into the
//! version-neutral types below. Supporting a new contract version means adding
//! one module and one arm to [`PluginPre`]; nothing else in the runtime
//! changes.

use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::error::LoadError;
use crate::sandbox::SandboxState;

pub(crate) mod v0_1;

/// The package name every contract version shares.
pub const PACKAGE: &str = "toolhost:plugin";

/// The contract versions this host has bindings for.
pub fn supported_versions() -> Vec<semver::Version> {
    vec![v0_1::VERSION]
}

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
    },
    InvalidArguments(String),
    Failed(String),
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

/// One linker per contract version, shared by all plugins of that version.
pub(crate) struct Linkers {
    v0_1: Linker<SandboxState>,
}

impl Linkers {
    pub(crate) fn new(engine: &Engine) -> wasmtime::Result<Linkers> {
        Ok(Linkers {
            v0_1: v0_1::linker(engine)?,
        })
    }
}

/// A plugin component linked and ready to instantiate, for its contract version.
pub(crate) enum PluginPre {
    V0_1(v0_1::ToolPluginPre<SandboxState>),
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

impl PluginPre {
    /// Links `component` for the contract version it was built against.
    pub(crate) fn new(
        linkers: &Linkers,
        component: &Component,
        version: &semver::Version,
    ) -> Result<PluginPre, LoadError> {
        let link = |e: wasmtime::Error| LoadError::Link(format!("{e:#}"));
        if compatible(&v0_1::VERSION, version) {
            let pre = linkers.v0_1.instantiate_pre(component).map_err(link)?;
            return Ok(PluginPre::V0_1(
                v0_1::ToolPluginPre::new(pre).map_err(link)?,
            ));
        }
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
        match self {
            PluginPre::V0_1(pre) => Ok(PluginInstance::V0_1(pre.instantiate_async(store).await?)),
        }
    }
}

/// An instantiated plugin, for its contract version.
pub(crate) enum PluginInstance {
    V0_1(v0_1::ToolPlugin),
}

impl PluginInstance {
    pub(crate) async fn describe(
        &self,
        store: &mut wasmtime::Store<SandboxState>,
    ) -> wasmtime::Result<Vec<RawToolSpec>> {
        match self {
            PluginInstance::V0_1(p) => v0_1::describe(p, store).await,
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
            PluginInstance::V0_1(p) => v0_1::execute(p, store, cx, name, args).await,
        }
    }
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
    }
}
