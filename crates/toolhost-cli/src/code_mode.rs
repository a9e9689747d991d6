//! Code mode (`--code-mode on|auto|off`, or `[code] mode` in the config
//! file): the program runner `run-code` is loaded beside the plugins and
//! may call every tool, so a model (in the agent loop, through `host
//! call`, or as an MCP client of `host mcp` / `host serve`) can write one
//! program that calls the tools instead of calling them one message at a
//! time (docs/guide/code-mode.md).
//!
//! - `on`: the runner must load, or the host does not start.
//! - `auto`: code mode is on when the runner is there (`[code] runner` or a
//!   plugins directory), and off (said once at info level, `-v`) when it
//!   is not; in the agent loop the program tools are offered only when the
//!   catalog the caller may see is past the tool search budget
//!   ([`program_tools_pay`]), where one program replaces many rounds.
//! - `off` (the default): a runner in a plugins directory is a plugin like
//!   any other, granted no tools.
//!
//! This module only wires the runner in. What its programs may reach is
//! decided where every call is decided: each call from a program goes
//! through the runtime's whole gate as a call of whoever ran the program
//! (`crates/toolhost-runtime/src/call/nested.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toolhost_agent::AgentOptions;
use toolhost_runtime::{PluginSettings, Runtime};
use toolhost_search::ToolSearch;

/// The runner's plugin name (its `plugin.toml`).
pub const RUNNER: &str = "run-code";

/// The runner's tool that runs a program.
pub const PROGRAM_TOOL: &str = "run_code";

/// The runner's tool that declares what a program may call.
pub const API_TOOL: &str = "code_api";

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
    /// As `on` when the runner is there, as `off` (never an error) when it
    /// is not; the agent loop offers the program tools only past the tool
    /// search budget ([`program_tools_pay`]).
    Auto,
}

/// The config file's `[code]` table.
///
/// ```toml
/// [code]
/// mode = "auto"            # or --code-mode on|auto|off; "off" by default
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

    /// With code mode on (or auto): the runner's path joins `paths` (the
    /// plugin paths; with auto, only when it exists), and the runner may
    /// call every tool (`call-tools = ["*"]`) unless its settings name the
    /// tools already.
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
            && (mode == CodeMode::On || runner.exists())
        {
            paths.push(runner.clone());
        }
        let runner = settings.entry(RUNNER.to_owned()).or_default();
        if runner.call_tools.is_empty() {
            runner.call_tools.push("*".to_owned());
        }
    }
}

/// Whether the runner loaded (its `run_code` tool is in the catalog).
fn loaded(runtime: &Runtime) -> bool {
    runtime.tools().iter().any(|t| t.name == PROGRAM_TOOL)
}

/// What code mode comes to once the plugins loaded: with `on`, the runner
/// must have loaded (the error says where to get it); with `auto`, a
/// missing runner turns code mode off, said once at info level (`-v`).
pub fn check_loaded(runtime: &Runtime, mode: CodeMode) -> anyhow::Result<CodeMode> {
    match mode {
        CodeMode::Off => Ok(CodeMode::Off),
        _ if loaded(runtime) => Ok(mode),
        CodeMode::Auto => {
            tracing::info!(
                "code mode (auto) is off: the program runner (`{RUNNER}`) is not loaded; \
                 set `[code] runner` or pass its directory with --plugins to turn it on"
            );
            Ok(CodeMode::Off)
        }
        CodeMode::On => anyhow::bail!(
            "code mode is on but the program runner (`{RUNNER}`, tool `{PROGRAM_TOOL}`) is not \
             loaded: set `[code] runner` to its directory or .wasm file, or pass its directory \
             with --plugins (`cargo xtask plugins` builds it into target/code/)"
        ),
    }
}

/// Whether a tool is one of the runner's two program tools.
fn is_program_tool(name: &str) -> bool {
    name == PROGRAM_TOOL || name == API_TOOL
}

/// Whether, with `--code-mode auto`, the agent loop offers the program
/// tools beside `tools` (the other tools the caller may see, whose
/// definitions take `bytes()`, asked only when the count does not decide):
/// when they are past the tool search budget
/// (`[tool-search] max-tools`, default 32, or `max-bytes` of definitions,
/// default 24 KiB, or a quarter of the model's context window `window`),
/// whatever tool search's own mode. A smaller catalog is offered as
/// without code mode: the model reads every tool there, and a program
/// costs a sandbox start (about 49 direct calls) to save rounds a small
/// catalog seldom needs.
fn program_tools_pay(
    budget: &ToolSearch,
    tools: usize,
    bytes: impl FnOnce() -> usize,
    window: Option<u32>,
) -> bool {
    budget.over_budget(tools, bytes, window)
}

/// The agent loop's side of code mode `mode` (as [`check_loaded`] left it):
/// the program tools are pinned (offered in full even when tool search
/// hides the rest), and with `auto` they are left out of a request whose
/// catalog is within the budget ([`program_tools_pay`]). Call it once the
/// options' model, context window and tool search are set.
pub fn agent_options(mode: CodeMode, mut options: AgentOptions) -> AgentOptions {
    if mode == CodeMode::Off {
        return options;
    }
    for name in [PROGRAM_TOOL, API_TOOL] {
        if !options.tool_search.is_pinned(name) {
            options.tool_search.pinned.push(name.to_owned());
        }
    }
    if mode == CodeMode::Auto {
        let budget = options.tool_search.clone();
        // The window as it is at each request (a window learned from a
        // server's refusal counts from then on).
        let (context, model) = (options.context.clone(), options.model.clone());
        let inner = options.tool_filter.clone();
        options = options.tool_filter(move |tools| {
            let tools = match &inner {
                Some(filter) => filter(tools),
                None => tools.to_vec(),
            };
            // Asked before every request: the other tools are counted and
            // measured in place, copied only when the program tools go.
            let others = || tools.iter().filter(|t| !is_program_tool(&t.name));
            let bytes = || toolhost_agent::context::definitions_bytes(others());
            if program_tools_pay(&budget, others().count(), bytes, context.window_for(&model)) {
                tools
            } else {
                tracing::debug!(
                    tools = others().count(),
                    "code mode (auto): the catalog is within the budget, no program tools"
                );
                others().cloned().collect()
            }
        });
    }
    options
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_agent::ToolSpec;

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
    fn auto_loads_a_runner_that_is_there_and_leaves_out_one_that_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file: CodeConfig = toml::from_str(&format!(
            "mode = \"auto\"\nrunner = {}",
            toml::Value::String(dir.path().display().to_string())
        ))
        .unwrap();
        assert_eq!(file.mode(None), CodeMode::Auto);
        let mut paths = Vec::new();
        let mut settings = BTreeMap::new();
        file.wire(CodeMode::Auto, &mut paths, &mut settings);
        assert_eq!(paths, [dir.path().to_path_buf()]);
        assert_eq!(settings[RUNNER].call_tools, ["*"]);

        let missing = CodeConfig {
            mode: CodeMode::Auto,
            runner: Some(dir.path().join("nowhere")),
        };
        let mut paths = Vec::new();
        missing.wire(CodeMode::Auto, &mut paths, &mut BTreeMap::new());
        assert!(paths.is_empty(), "auto never loads what is not there");
        missing.wire(CodeMode::On, &mut paths, &mut BTreeMap::new());
        assert_eq!(paths.len(), 1, "on does, and fails to start saying why");
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            // About 150 bytes a definition.
            description: format!("The tool {name}. {}", "It does one thing well. ".repeat(5)),
            input_schema: serde_json::json!({"type": "object"}).into(),
            read_only: true,
        }
    }

    /// The names `options`' filter lets through of a catalog of `others`
    /// tools plus the two program tools.
    fn offered(options: &AgentOptions, others: usize) -> Vec<String> {
        let mut tools: Vec<ToolSpec> = (0..others).map(|i| spec(&format!("tool_{i}"))).collect();
        tools.push(spec(PROGRAM_TOOL));
        tools.push(spec(API_TOOL));
        let kept = match &options.tool_filter {
            Some(filter) => filter(&tools),
            None => tools,
        };
        kept.into_iter().map(|t| t.name).collect()
    }

    #[test]
    fn auto_offers_the_program_tools_only_past_the_tool_search_budget() {
        let options = agent_options(CodeMode::Auto, AgentOptions::new("m"));
        let small = offered(&options, 10);
        assert_eq!(small.len(), 10, "{small:?}");
        assert!(!small.iter().any(|n| is_program_tool(n)), "{small:?}");
        let large = offered(&options, 40);
        assert_eq!(large.len(), 42, "past max-tools (32)");
        assert!(large.contains(&PROGRAM_TOOL.to_owned()) && large.contains(&API_TOOL.to_owned()));
        assert!(
            options.tool_search.is_pinned(PROGRAM_TOOL) && options.tool_search.is_pinned(API_TOOL),
            "not hidden behind tool search"
        );

        // The budget is the config's; the window counts too.
        let mut lower = AgentOptions::new("m");
        lower.tool_search.max_tools = 5;
        assert_eq!(offered(&agent_options(CodeMode::Auto, lower), 10).len(), 12);
        let small_window = AgentOptions::new("m").context_window(1024);
        assert_eq!(
            offered(&agent_options(CodeMode::Auto, small_window), 10).len(),
            12,
            "10 definitions (1.5 KB) take more than a quarter of 1024 tokens"
        );

        // On offers them always; off leaves the options alone.
        let on = agent_options(CodeMode::On, AgentOptions::new("m"));
        assert_eq!(offered(&on, 10).len(), 12);
        assert!(on.tool_search.is_pinned(PROGRAM_TOOL));
        let off = agent_options(CodeMode::Off, AgentOptions::new("m"));
        assert!(off.tool_filter.is_none() && off.tool_search.pinned.is_empty());
    }

    #[test]
    fn auto_keeps_an_embedders_filter() {
        let options = AgentOptions::new("m").tool_filter(|tools| {
            tools
                .iter()
                .filter(|t| t.name != "tool_0")
                .cloned()
                .collect()
        });
        let mut budget = options;
        budget.tool_search.max_tools = 2;
        let kept = offered(&agent_options(CodeMode::Auto, budget), 4);
        assert_eq!(kept, ["tool_1", "tool_2", "tool_3", PROGRAM_TOOL, API_TOOL]);
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
        assert_eq!(
            toml::from_str::<CodeConfig>("mode = \"auto\"")
                .unwrap()
                .mode,
            CodeMode::Auto
        );
        assert!(toml::from_str::<CodeConfig>("enabled = true").is_err());
    }
}
