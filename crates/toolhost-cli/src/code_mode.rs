//! Code mode (`--code-mode on`, or `[code] mode = "on"` in the config
//! file): the program runner `run-code` is loaded beside the plugins and
//! may call every tool, so a model (in the agent loop, through `host
//! call`, or as an MCP client of `host mcp` / `host serve`) can write one
//! program that calls the tools instead of calling them one message at a
//! time (docs/guide/code-mode.md).
//!
//! This module only wires the runner in. What its programs may reach is
//! decided where every call is decided: each call from a program goes
//! through the runtime's whole gate as a call of whoever ran the program
//! (`crates/toolhost-runtime/src/call/nested.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toolhost_runtime::{PluginSettings, Runtime};

/// The runner's plugin name (its `plugin.toml`).
pub const RUNNER: &str = "run-code";

/// The runner's tool that runs a program.
pub const PROGRAM_TOOL: &str = "run_code";

/// Whether code mode is on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CodeMode {
    /// The runner, if loaded, is a plugin like any other: it calls only
    /// what `[plugins.run-code] call-tools` names (nothing by default).
    #[default]
    Off,
    /// The runner is loaded (from `[code] runner` or a plugins directory)
    /// and may call every tool unless `[plugins.run-code] call-tools` says
    /// which; the host does not start without it.
    On,
}

/// The config file's `[code]` table.
///
/// ```toml
/// [code]
/// mode = "on"              # or --code-mode on; "off" by default
/// runner = "target/code"   # the runner's directory or .wasm file
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CodeConfig {
    /// Whether code mode is on (`--code-mode` wins).
    #[serde(default)]
    pub mode: CodeMode,
    /// Where the runner is: a directory holding `run-code.wasm`, or the
    /// file itself; loaded beside the plugins when code mode is on. Not
    /// needed when a plugins directory holds the runner.
    #[serde(default)]
    pub runner: Option<PathBuf>,
}

impl CodeConfig {
    /// The mode in effect: `flag`'s (`--code-mode`), else the file's.
    pub fn mode(&self, flag: Option<CodeMode>) -> CodeMode {
        flag.unwrap_or(self.mode)
    }

    /// With code mode on: the runner's path joins `paths` (the plugin
    /// paths), and the runner may call every tool (`call-tools = ["*"]`)
    /// unless its settings name the tools already.
    pub fn wire(
        &self,
        mode: CodeMode,
        paths: &mut Vec<PathBuf>,
        settings: &mut BTreeMap<String, PluginSettings>,
    ) {
        if mode == CodeMode::Off {
            return;
        }
        if let Some(runner) = &self.runner
            && !paths.contains(runner)
        {
            paths.push(runner.clone());
        }
        let runner = settings.entry(RUNNER.to_owned()).or_default();
        if runner.call_tools.is_empty() {
            runner.call_tools.push("*".to_owned());
        }
    }
}

/// With code mode on, the runner must have loaded: the error says where
/// to get it.
pub fn check_loaded(runtime: &Runtime, mode: CodeMode) -> anyhow::Result<()> {
    if mode == CodeMode::Off || runtime.tools().iter().any(|t| t.name == PROGRAM_TOOL) {
        return Ok(());
    }
    anyhow::bail!(
        "code mode is on but the program runner (`{RUNNER}`, tool `{PROGRAM_TOOL}`) is not \
         loaded: set `[code] runner` to its directory or .wasm file, or pass its directory \
         with --plugins (`cargo xtask plugins` builds it into target/code/)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_loads_the_runner_and_grants_it_every_tool_unless_told_which() {
        let file: CodeConfig = toml::from_str("mode = \"on\"\nrunner = \"code\"").unwrap();
        assert_eq!(file.mode(None), CodeMode::On);
        assert_eq!(
            file.mode(Some(CodeMode::Off)),
            CodeMode::Off,
            "the flag wins"
        );
        let mut paths = vec![PathBuf::from("plugins")];
        let mut settings = BTreeMap::new();
        file.wire(CodeMode::On, &mut paths, &mut settings);
        assert_eq!(paths, [PathBuf::from("plugins"), PathBuf::from("code")]);
        assert_eq!(settings[RUNNER].call_tools, ["*"]);

        let mut named = BTreeMap::from([(
            RUNNER.to_owned(),
            PluginSettings {
                call_tools: vec!["calculate".into()],
                ..PluginSettings::default()
            },
        )]);
        file.wire(CodeMode::On, &mut paths, &mut named);
        assert_eq!(
            named[RUNNER].call_tools,
            ["calculate"],
            "the config's grant stays"
        );
        assert_eq!(paths.len(), 2, "the runner is added once");
    }

    #[test]
    fn off_changes_nothing() {
        let file: CodeConfig = toml::from_str("runner = \"code\"").unwrap();
        assert_eq!(file.mode(None), CodeMode::Off);
        let mut paths = Vec::new();
        let mut settings = BTreeMap::new();
        file.wire(CodeMode::Off, &mut paths, &mut settings);
        assert!(paths.is_empty() && settings.is_empty());
        assert!(toml::from_str::<CodeConfig>("mode = \"maybe\"").is_err());
        assert!(toml::from_str::<CodeConfig>("enabled = true").is_err());
    }
}
