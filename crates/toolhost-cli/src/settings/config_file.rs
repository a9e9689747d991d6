//! The configuration file (`--config FILE`, TOML): its tables, read once
//! per command.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;
use toolhost_agent::provider::select::ProviderConfig;
use toolhost_runtime::hooks::HookConfig;
use toolhost_runtime::{PluginSettings, grants::LimitOverrides};

use super::{StateConfig, TelemetryConfig};
use crate::shared_flags::Global;

/// The configuration file.
///
/// ```toml
/// cache-dir = "/var/cache/toolhost"
/// policy = "policy.toml"
/// system-prompt-file = "prompt.md"
/// trusted-keys = ["keys/publisher.pub"]   # host install: signers it accepts
/// require-signed = true                   # host install: refuse unsigned plugins
/// [limits]
/// timeout-ms = 10000
/// [plugins.fs]
/// dirs = [{ path = ".", access = "read-only" }]
/// [plugins.http]
/// hosts = ["api.example.com", "127.0.0.1:8080"]
/// [plugins.calc.config]
/// precision = "6"
/// [versions]
/// calc = "^1.2"
/// [tool-owners]
/// read_file = "fs"
/// [[hooks]]
/// command = ["sh", "examples/hooks/block-secrets.sh"]
/// tools = ["read_file"]
/// [[hooks]]
/// plugin-hook = "redact-secrets"
/// [[mcp-servers]]
/// name = "git"
/// command = ["mcp-server-git", "--repository", "."]
/// [model.options]
/// temperature = 0.2
/// [agents.reviewer.options]
/// reasoning-effort = "high"
/// [variants.creative]
/// temperature = 1.1
/// [[request-hooks]]
/// command = ["./hooks/params.sh"]
/// [code]                                  # code mode (docs/guide/code-mode.md)
/// mode = "on"
/// runner = "target/code"
/// [oauth]                                 # host serve: OAuth access tokens
/// issuer = "https://login.example.com"
/// resource = "https://tools.example.com/mcp"
/// [[oauth.callers]]
/// group = "sre"
/// profile = "ops"
/// [state]                                 # replicas: approvals and asks in PostgreSQL
/// postgres-env = "TOOLHOST_STATE_URL"
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    #[serde(default)]
    pub plugins_dirs: Vec<PathBuf>,
    #[serde(default)]
    pub limits: LimitOverrides,
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginSettings>,
    /// The model provider (`[model]`).
    #[serde(default)]
    pub model: Option<ProviderConfig>,
    /// Most tool rounds per turn.
    #[serde(default)]
    pub max_rounds: Option<u32>,
    /// Version requirements by plugin name (`calc = "^1.2"`); by default the
    /// highest version found wins.
    #[serde(default)]
    pub versions: BTreeMap<String, semver::VersionReq>,
    /// Which plugin gets a tool name several plugins declare
    /// (`read_file = "fs"`); without it such a name goes to none of them.
    #[serde(default)]
    pub tool_owners: BTreeMap<String, String>,
    /// The permission policy file (`--policy` wins).
    #[serde(default)]
    pub policy: Option<PathBuf>,
    /// Hooks before and after every call, in order (`[[hooks]]`).
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    /// External MCP servers whose tools join the plugins' (`[[mcp-servers]]`,
    /// see `mcp_servers.rs`).
    #[serde(default)]
    pub mcp_servers: Vec<crate::mcp_servers::ServerEntry>,
    /// Replaces the base system prompt (`--system-prompt FILE` wins; see
    /// `model_options.rs`).
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// A file whose text replaces the base system prompt.
    #[serde(default)]
    pub system_prompt_file: Option<PathBuf>,
    /// Agent profiles (`[agents.NAME]`), chosen with `--agent NAME`.
    #[serde(default)]
    pub agents: BTreeMap<String, AgentProfile>,
    /// Named sets of model options (`[variants.NAME]`), chosen with `--variant NAME`.
    #[serde(default)]
    pub variants: BTreeMap<String, toolhost_agent::provider::options::ModelOptions>,
    /// Programs run before each model request (`[[request-hooks]]`).
    #[serde(default)]
    pub request_hooks: Vec<toolhost_agent::request::RequestHookConfig>,
    /// Public keys (PEM files) whose signatures `host install` accepts
    /// (`--key` adds more; see `commands/install.rs`).
    #[serde(default)]
    pub trusted_keys: Vec<PathBuf>,
    /// `host install` refuses a plugin no trusted key signed (as `--require-signature`).
    #[serde(default)]
    pub require_signed: bool,
    /// Tool search for large catalogs (`--tool-search` wins over `mode`).
    #[serde(default)]
    pub tool_search: toolhost_search::ToolSearch,
    /// OpenTelemetry traces (`[telemetry]`; the `OTEL_*` variables win).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// `host serve` takes OAuth access tokens from this authorization
    /// server, beside the static tokens (`[oauth]`, docs/guide/oauth.md).
    #[serde(default)]
    pub oauth: Option<toolhost_mcp::server::OAuthOptions>,
    /// Where what replicas of one gate share is kept (`[state]`): saved
    /// approvals in PostgreSQL instead of the file beside the lock file,
    /// and the operator's queue of asks (with `--console`).
    #[serde(default)]
    pub state: Option<StateConfig>,
    /// Code mode (`[code]`; `--code-mode` wins over its `mode`).
    #[serde(default)]
    pub code: crate::code_mode::CodeConfig,
    /// Which tools `host serve` runs as MCP tasks, and their bounds
    /// (`[tasks]`, docs/guide/long-running.md).
    #[serde(default)]
    pub tasks: super::TasksConfig,
}

/// One `[agents.NAME]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AgentProfile {
    /// Model options laid over `[model.options]`.
    #[serde(default)]
    pub options: toolhost_agent::provider::options::ModelOptions,
}

impl ConfigFile {
    pub fn load(path: &Path) -> anyhow::Result<ConfigFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))
    }
}

/// Reads the config file named by `--config`, or the default (empty) one.
pub fn config_file(global: &Global) -> anyhow::Result<ConfigFile> {
    match &global.config {
        Some(p) => ConfigFile::load(p),
        None => Ok(ConfigFile::default()),
    }
}

/// The tool search settings: the config file's, with `--tool-search`'s mode.
pub fn tool_search(global: &Global, file: &ConfigFile) -> toolhost_search::ToolSearch {
    let mut search = file.tool_search.clone();
    if let Some(mode) = global.tool_search {
        search.mode = mode;
    }
    search
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_errors_name_the_file_and_line() {
        let dir = std::env::temp_dir().join(format!("toolhost-cli-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.toml");
        std::fs::write(&path, "[limits]\ntimeout = 3\n").unwrap();
        let err = ConfigFile::load(&path).unwrap_err().to_string();
        assert!(err.contains("bad.toml"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }
}
