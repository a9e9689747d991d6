//! `[[hooks]]` entries of the host's configuration file.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::chain::{DEFAULT_TIMEOUT, FailurePolicy, HookChain, HookEntry, OnError};
use crate::command::CommandHook;
use crate::hook::Hook;
use crate::matcher::{Matcher, MatcherError};
use crate::stage::{Stage, Stages};

/// One `[[hooks]]` entry of the host's configuration file.
///
/// Exactly one of `command` (an argv list), `shell` (a script for `sh -c`)
/// and `plugin-hook` (the name of a sandboxed hook plugin, which the runtime
/// resolves) says what runs.
///
/// ```
/// use toolhost_hooks::{HookConfig, HookKind};
///
/// #[derive(serde::Deserialize)]
/// struct File {
///     hooks: Vec<HookConfig>,
/// }
/// let file: File = toml::from_str(r#"
///     [[hooks]]
///     name = "audit"
///     command = ["./examples/hooks/audit.sh"]
///     tools = ["read_*", "http_get"]
///     plugins = ["fs"]
///     stages = ["before", "after"]
///     timeout-ms = 2000
///     on-error = "closed"
///
///     [[hooks]]
///     plugin-hook = "redact-secrets"
///     tools = ["*"]
/// "#)?;
/// assert_eq!(file.hooks[0].display_name(), "audit");
/// assert_eq!(file.hooks[1].kind()?, HookKind::Plugin("redact-secrets"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct HookConfig {
    /// The name in traces, logs and block reasons. Defaults to the command,
    /// the script or the plugin's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A program and its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// A shell script, run with `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell: Option<String>,
    /// The name of a hook plugin (a WebAssembly component), resolved by the
    /// runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin_hook: Option<String>,
    /// Globs on tool names; empty: every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// Globs on plugin names; empty: every plugin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<String>,
    /// When it runs; default both stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<Stage>>,
    /// How long one stage may take, in milliseconds; default 5000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// What a failure or timeout does: `closed` blocks the call (before) or
    /// fails it (after); `open` continues or keeps. Default: closed before,
    /// open after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_error: Option<FailurePolicy>,
    /// The working directory of a command or script; default the host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Extra environment variables for a command or script.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

/// What a [`HookConfig`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind<'a> {
    /// A program and its arguments.
    Command(&'a [String]),
    /// A shell script.
    Shell(&'a str),
    /// A hook plugin's name.
    Plugin(&'a str),
}

/// A `[[hooks]]` entry that cannot be used. Each names the entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// None or several of `command`, `shell`, `plugin-hook`.
    #[error("hook #{index} ({name}): set exactly one of `command`, `shell` or `plugin-hook`")]
    Kind {
        /// Its position in the list, from 1.
        index: usize,
        /// Its name.
        name: String,
    },
    /// `command = []` or `shell = ""`.
    #[error("hook #{index} ({name}): the command is empty")]
    EmptyCommand {
        /// Its position in the list, from 1.
        index: usize,
        /// Its name.
        name: String,
    },
    /// `plugin-hook` names no hook plugin the runtime knows.
    #[error("hook #{index} ({name}): no hook plugin named \"{plugin}\"")]
    UnknownPlugin {
        /// Its position in the list, from 1.
        index: usize,
        /// Its name.
        name: String,
        /// The plugin it names.
        plugin: String,
    },
    /// A glob in `tools` or `plugins` does not compile.
    #[error("hook #{index} ({name}): {source}")]
    Glob {
        /// Its position in the list, from 1.
        index: usize,
        /// Its name.
        name: String,
        /// The glob and why.
        source: MatcherError,
    },
    /// `timeout-ms = 0` or `stages = []`.
    #[error("hook #{index} ({name}): {message}")]
    Invalid {
        /// Its position in the list, from 1.
        index: usize,
        /// Its name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

impl HookConfig {
    /// What it runs, or why that is unclear.
    pub fn kind(&self) -> Result<HookKind<'_>, ConfigError> {
        self.kind_at(1)
    }

    fn kind_at(&self, index: usize) -> Result<HookKind<'_>, ConfigError> {
        let kind = match (&self.command, &self.shell, &self.plugin_hook) {
            (Some(argv), None, None) => HookKind::Command(argv),
            (None, Some(script), None) => HookKind::Shell(script),
            (None, None, Some(plugin)) => HookKind::Plugin(plugin),
            _ => {
                return Err(ConfigError::Kind {
                    index,
                    name: self.display_name(),
                });
            }
        };
        let empty = match kind {
            HookKind::Command(argv) => argv.first().is_none_or(|p| p.trim().is_empty()),
            HookKind::Shell(script) => script.trim().is_empty(),
            HookKind::Plugin(name) => name.trim().is_empty(),
        };
        if empty {
            return Err(ConfigError::EmptyCommand {
                index,
                name: self.display_name(),
            });
        }
        Ok(kind)
    }

    /// Its name: `name`, or else the command line, the script or the
    /// plugin's name.
    pub fn display_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        if let Some(argv) = &self.command {
            return argv.join(" ");
        }
        if let Some(script) = &self.shell {
            return script.clone();
        }
        if let Some(plugin) = &self.plugin_hook {
            return plugin.clone();
        }
        "unnamed".to_owned()
    }

    /// Its stages (default both).
    pub fn stages(&self) -> Stages {
        match &self.stages {
            None => Stages::BOTH,
            Some(list) => Stages {
                before: list.contains(&Stage::Before),
                after: list.contains(&Stage::After),
                permission: list.contains(&Stage::Permission),
            },
        }
    }

    /// Its timeout (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(&self) -> Duration {
        self.timeout_ms
            .map_or(DEFAULT_TIMEOUT, Duration::from_millis)
    }

    /// Its failure policy per stage.
    pub fn on_error(&self) -> OnError {
        self.on_error.map_or_else(OnError::default, OnError::both)
    }

    /// Turns it into a chain entry; `resolve_plugin` finds `plugin-hook`
    /// names. `index` (from 1) is only used in errors.
    fn entry<R>(&self, index: usize, resolve_plugin: &R) -> Result<HookEntry, ConfigError>
    where
        R: Fn(&str) -> Option<Arc<dyn Hook>>,
    {
        let name = self.display_name();
        let invalid = |message: &str| ConfigError::Invalid {
            index,
            name: name.clone(),
            message: message.to_owned(),
        };
        if self.timeout_ms == Some(0) {
            return Err(invalid("`timeout-ms` must be more than 0"));
        }
        let stages = self.stages();
        if !stages.before && !stages.after && !stages.permission {
            return Err(invalid("`stages` is empty: the hook would never run"));
        }
        if stages.permission && self.plugin_hook.is_some() {
            return Err(invalid(
                "hook plugins do not take part in the `permission` stage (a command or Rust hook does)",
            ));
        }
        let matcher =
            Matcher::new(&self.tools, &self.plugins).map_err(|source| ConfigError::Glob {
                index,
                name: name.clone(),
                source,
            })?;
        let hook: Arc<dyn Hook> = match self.kind_at(index)? {
            HookKind::Plugin(plugin) => {
                resolve_plugin(plugin).ok_or_else(|| ConfigError::UnknownPlugin {
                    index,
                    name: name.clone(),
                    plugin: plugin.to_owned(),
                })?
            }
            HookKind::Command(argv) => Arc::new(
                self.command_options(CommandHook::argv(name.clone(), argv.iter().cloned())),
            ),
            HookKind::Shell(script) => {
                Arc::new(self.command_options(CommandHook::shell(name.clone(), script)))
            }
        };
        Ok(HookEntry {
            hook,
            matcher,
            stages,
            timeout: self.timeout(),
            on_error: self.on_error(),
        })
    }

    fn command_options(&self, mut hook: CommandHook) -> CommandHook {
        if let Some(dir) = &self.cwd {
            hook = hook.current_dir(dir);
        }
        for (key, value) in &self.env {
            hook = hook.env(key, value);
        }
        hook
    }
}

/// Builds the chain of `configs`, in order. `resolve_plugin` turns a
/// `plugin-hook` name into its hook (the runtime passes its hook plugins);
/// an unknown name is an error.
///
/// ```
/// use std::sync::Arc;
/// use toolhost_hooks::{build_chain, ConfigError, HookConfig};
///
/// let config = HookConfig {
///     shell: Some("cat >/dev/null".into()),
///     tools: vec!["write_*".into()],
///     ..HookConfig::default()
/// };
/// let chain = build_chain(&[config], |_| None)?;
/// assert_eq!(chain.entries()[0].hook.name(), "cat >/dev/null");
///
/// let plugin = HookConfig { plugin_hook: Some("redact".into()), ..HookConfig::default() };
/// let err = build_chain(&[plugin], |_| None).unwrap_err();
/// assert!(matches!(err, ConfigError::UnknownPlugin { .. }));
/// # Ok::<(), ConfigError>(())
/// ```
pub fn build_chain<R>(configs: &[HookConfig], resolve_plugin: R) -> Result<HookChain, ConfigError>
where
    R: Fn(&str) -> Option<Arc<dyn Hook>>,
{
    let mut chain = HookChain::empty();
    for (i, config) in configs.iter().enumerate() {
        chain.push(config.entry(i + 1, &resolve_plugin)?);
    }
    Ok(chain)
}

impl HookChain {
    /// [`build_chain`] as a constructor.
    pub fn from_config<R>(configs: &[HookConfig], resolve_plugin: R) -> Result<Self, ConfigError>
    where
        R: Fn(&str) -> Option<Arc<dyn Hook>>,
    {
        build_chain(configs, resolve_plugin)
    }
}
