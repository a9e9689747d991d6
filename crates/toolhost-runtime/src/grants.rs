//! Capabilities the host grants a plugin: directories, network hosts,
//! environment variables. Nothing is granted by default.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the host grants one plugin, plus its limit overrides and config values.
///
/// ```
/// use toolhost_runtime::{DirGrant, grants::HostPattern, PluginSettings};
///
/// let mut fs = PluginSettings::default();
/// fs.dirs.push(DirGrant::read_only("."));
/// let mut http = PluginSettings::default();
/// http.hosts.push("127.0.0.1:8080".parse::<HostPattern>().unwrap());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSettings {
    /// Directories the plugin may open.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Hosts the plugin may send HTTP requests to.
    #[serde(default)]
    pub hosts: Vec<HostPattern>,
    /// Environment variables the plugin may read: a name alone takes the value from the
    /// host's environment when the runtime starts; `NAME=value` sets it.
    #[serde(default)]
    pub env: Vec<String>,
    /// Limit overrides (they win over the manifest's).
    #[serde(default)]
    pub limits: LimitOverrides,
    /// Configuration values (they win over the manifest's defaults).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// The tools the plugin may call through the host (contract 0.4.0's
    /// `tools` import), as globs on their names (`call-tools = ["fs_*"]`):
    /// none by default. Each call goes through the whole gate as a call of
    /// whoever called the plugin (`call/nested.rs`).
    #[serde(default, rename = "call-tools", skip_serializing_if = "Vec::is_empty")]
    pub call_tools: Vec<String>,
    /// Bounds of the calls one call of the plugin makes
    /// (`[plugins.NAME.call-bounds]`; see [`CallBounds`](crate::grants::CallBounds)).
    #[serde(
        default,
        rename = "call-bounds",
        skip_serializing_if = "crate::plugin_calls::CallBounds::is_default"
    )]
    pub call_bounds: crate::plugin_calls::CallBounds,
    /// Caching of its results: opt-outs and TTLs, per plugin and per tool
    /// (`[plugins.NAME.cache]`; see [`CacheSettings`](crate::cache::CacheSettings)).
    #[serde(
        default,
        skip_serializing_if = "crate::cache_settings::CacheSettings::is_empty"
    )]
    pub cache: crate::cache_settings::CacheSettings,
}

/// A directory granted to a plugin. It appears in the plugin at the same absolute
/// path it has on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The directory on the host (relative paths are resolved against the current directory).
    pub path: PathBuf,
    /// Whether the plugin may write.
    #[serde(default)]
    pub access: DirAccess,
}

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirAccess {
    /// Read only (the default).
    #[default]
    ReadOnly,
    /// Read and write.
    ReadWrite,
}

impl DirGrant {
    /// A read-only grant of `path`.
    pub fn read_only(path: impl Into<PathBuf>) -> Self {
        DirGrant {
            path: path.into(),
            access: DirAccess::ReadOnly,
        }
    }

    /// A read-write grant of `path`.
    pub fn read_write(path: impl Into<PathBuf>) -> Self {
        DirGrant {
            path: path.into(),
            access: DirAccess::ReadWrite,
        }
    }
}

pub use crate::limits::{LimitOverrides, Limits};
pub use crate::plugin_calls::CallBounds;
pub use toolhost_patterns::{HostPattern, HostPatternError};
