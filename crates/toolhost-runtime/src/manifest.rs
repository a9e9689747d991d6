//! The optional manifest `NAME.toml` that sits beside a plugin's `NAME.wasm`.
//!
//! ```toml
//! name = "fs"                  # defaults to the file stem
//! version = "0.1.0"            # semver; defaults to 0.0.0
//! description = "Read files."
//! usage = "Read a file before you describe it; page long files with offset and limit."
//!
//! [capabilities]               # what the plugin asks for; the host decides what to grant
//! dirs = "read-only"           # "none" | "read-only" | "read-write"
//! hosts = []                   # "host", "host:port" or "*"
//! env = []                     # environment variable names
//!
//! [limits]                     # overrides of the host's default limits
//! timeout-ms = 5000
//!
//! [config]                     # default config values, readable with `get-config`
//! max-bytes = "262144"
//!
//! [cache]                      # results of read-only, idempotent tools: only lower what the host allows
//! ttl-ms = 60000
//! tools.list_dir = { enabled = false }
//!
//! [tools.read_file]            # per tool: the argument that names the file or directory it works on
//! path-arg = "/path"           # a JSON pointer; its sandbox then gets that file or directory alone
//!
//! [tools.http_get]             # per tool: the argument that names the URL it requests
//! url-arg = "/url"             # its sandbox then reaches that URL's host alone
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::LoadError;
use crate::limits::LimitOverrides;

/// A plugin's manifest. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The plugin's name (defaults to the file stem).
    pub name: Option<String>,
    /// The plugin's version (defaults to `0.0.0`).
    pub version: Option<semver::Version>,
    /// What the plugin is for.
    pub description: Option<String>,
    /// Rules for the model on when and how to use this plugin's tools; an
    /// agent adds them to its system prompt.
    pub usage: Option<String>,
    /// What the plugin asks for. Granting is the host's decision.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// Overrides of the host's default limits.
    #[serde(default)]
    pub limits: LimitOverrides,
    /// Default configuration values.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Caching of its tools' results: a manifest may opt tools out or
    /// shorten their TTL, never more than the host allows (see
    /// [`CacheSettings`](crate::cache::CacheSettings)).
    #[serde(
        default,
        skip_serializing_if = "crate::cache_settings::CacheSettings::is_empty"
    )]
    pub cache: crate::cache_settings::CacheSettings,
    /// Per tool (by the name the plugin declares): what its arguments say
    /// about what a call reaches (see [`ToolManifest`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolManifest>,
}

/// What a tool's arguments say about what one call reaches, so its sandbox
/// gets that alone (a per-call grant, `call/narrow.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ToolManifest {
    /// A JSON pointer (`/path`) to the string argument naming the file or
    /// directory a call works on. The call's sandbox then gets only that
    /// file (or that directory), read-only unless the tool is not
    /// annotated read-only, inside the plugin's granted directories; a path
    /// outside them is refused before the guest runs.
    pub path_arg: Option<String>,
    /// A JSON pointer (`/url`) to the string argument naming the URL a
    /// call requests. The call's sandbox then reaches only that URL's
    /// host (on the schemes and ports the plugin's grant allows), and only
    /// when the plugin's granted hosts cover the URL; another URL is
    /// refused before the guest runs.
    pub url_arg: Option<String>,
}

/// Capabilities a plugin requests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// Access to directories it asks for.
    #[serde(default)]
    pub dirs: DirRequest,
    /// Network hosts it wants to reach.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Environment variables it wants to read.
    #[serde(default)]
    pub env: Vec<String>,
}

/// Directory access a plugin asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirRequest {
    /// No file system access.
    #[default]
    None,
    /// Read-only directories.
    ReadOnly,
    /// Read-write directories.
    ReadWrite,
}

/// `dirs=read-only hosts=[a, b] env=[KEY]`, as `host plugins` and the
/// console show it.
///
/// ```
/// let c = toolhost_runtime::manifest::Capabilities { hosts: vec!["example.com".into()], ..Default::default() };
/// assert_eq!(c.to_string(), "dirs=none hosts=[example.com] env=[]");
/// ```
impl std::fmt::Display for Capabilities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dirs = match self.dirs {
            DirRequest::None => "none",
            DirRequest::ReadOnly => "read-only",
            DirRequest::ReadWrite => "read-write",
        };
        write!(
            f,
            "dirs={dirs} hosts=[{}] env=[{}]",
            self.hosts.join(", "),
            self.env.join(", ")
        )
    }
}

impl Manifest {
    /// The manifest path for a component path: `dir/NAME.wasm` → `dir/NAME.toml`.
    pub fn path_for(component: &Path) -> PathBuf {
        component.with_extension("toml")
    }

    /// Reads the manifest beside `component`, or the default if there is none.
    pub fn load_for(component: &Path) -> Result<Manifest, LoadError> {
        let path = Self::path_for(component);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Manifest::default()),
            Err(e) => Err(LoadError::Manifest {
                path,
                message: e.to_string(),
            }),
        }
    }

    /// Parses manifest text; `path` is used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Manifest, LoadError> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| LoadError::Manifest {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        for (tool, t) in &manifest.tools {
            for (key, pointer, example) in [
                ("path-arg", &t.path_arg, "/path"),
                ("url-arg", &t.url_arg, "/url"),
            ] {
                if let Some(pointer) = pointer
                    && !pointer.starts_with('/')
                {
                    return Err(LoadError::Manifest {
                        path: path.to_owned(),
                        message: format!(
                            "tools.{tool}.{key} must be a JSON pointer such as {example:?}, not {:?}",
                            toolhost_text::line(pointer, 64)
                        ),
                    });
                }
            }
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_manifest_parses() {
        let m = Manifest::parse(
            r#"
name = "fs"
version = "1.2.3"
[capabilities]
dirs = "read-only"
hosts = ["example.com:443"]
[limits]
timeout-ms = 5
[config]
k = "v"
[cache]
ttl-ms = 10
tools.t = { enabled = false }
"#,
            Path::new("fs.toml"),
        )
        .unwrap();
        assert_eq!(m.name.as_deref(), Some("fs"));
        assert_eq!(m.version, Some(semver::Version::new(1, 2, 3)));
        assert_eq!(m.capabilities.dirs, DirRequest::ReadOnly);
        assert_eq!(m.limits.timeout_ms, Some(5));
        assert_eq!(m.config["k"], "v");
        assert_eq!(m.cache.ttl_ms, Some(10));
        assert_eq!(m.cache.tools["t"].enabled, Some(false));
    }

    #[test]
    fn bad_manifest_reports_file_and_position() {
        let err = Manifest::parse("version = \"one\"\n", Path::new("/p/x.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/p/x.toml"), "{msg}");
        assert!(msg.contains("line 1"), "{msg}");
    }

    #[test]
    fn missing_manifest_is_the_default() {
        let m = Manifest::load_for(Path::new("/nonexistent/dir/x.wasm")).unwrap();
        assert_eq!(m, Manifest::default());
    }
}
