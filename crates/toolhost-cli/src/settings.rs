//! The host's settings: the configuration file and the command-line grants,
//! turned into a runtime builder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use toolhost_runtime::hooks::HookConfig;
use toolhost_runtime::policy::Policy;
use toolhost_runtime::{
    DirGrant, Limits, PluginSettings, RuntimeBuilder, grants::DirAccess, grants::HostPattern,
    grants::LimitOverrides,
};

use toolhost_agent::provider::select::ProviderConfig;

use crate::args::Global;

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
    pub variants: BTreeMap<String, toolhost_agent::provider::ModelOptions>,
    /// Programs run before each model request (`[[request-hooks]]`).
    #[serde(default)]
    pub request_hooks: Vec<toolhost_agent::request::RequestHookConfig>,
    /// Public keys (PEM files) whose signatures `host install` accepts
    /// (`--key` adds more; see `install.rs`).
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
}

/// The `[state]` table: the database that replicas share.
///
/// ```toml
/// [state]
/// postgres-env = "TOOLHOST_STATE_URL"   # or postgres = "postgresql://toolhost@db/toolhost"
/// store = "prod"                        # default "default": one gate's approvals
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StateConfig {
    /// The connection string (`postgresql://…` or `key=value` pairs).
    /// One with a password belongs in `postgres-env`.
    #[serde(default)]
    pub postgres: Option<String>,
    /// The environment variable that holds the connection string.
    #[serde(default)]
    pub postgres_env: Option<String>,
    /// The store's name: replicas of one gate share one (its approvals
    /// and its operator's queue); another gate in the same database takes
    /// another.
    #[serde(default)]
    pub store: Option<String>,
}

impl StateConfig {
    /// The saved-approvals store it names (connecting in the background).
    pub fn approvals(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::policy::approvals::Store>> {
        Ok(std::sync::Arc::new(self.postgres_approvals()?))
    }

    /// The saved-approvals store it names, once its first connection
    /// attempt ended: a lookup never waits for the database, so a command
    /// that reads once (`host approvals`) waits here instead, at most the
    /// database's answer time (a store still out of reach then says why
    /// when read).
    pub fn approvals_connected(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::policy::approvals::Store>> {
        let approvals = self.postgres_approvals()?;
        let _ = approvals.wait_connected(toolhost_state::connection::ANSWER_WAIT);
        Ok(std::sync::Arc::new(approvals))
    }

    fn postgres_approvals(&self) -> anyhow::Result<toolhost_state::PostgresApprovals> {
        toolhost_state::PostgresApprovals::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))
    }

    /// The operator's queue it names (connecting in the background):
    /// every replica's console lists and answers the asks of all.
    pub fn queue(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::operator::QueueStore>> {
        let queue = toolhost_state::PostgresQueue::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))?;
        Ok(std::sync::Arc::new(queue))
    }

    /// The console's recent failures, shared (connecting in the
    /// background): every replica's console lists the others' too.
    pub fn failures(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::failures::FailureLog>> {
        let failures = toolhost_state::PostgresFailures::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))?;
        Ok(std::sync::Arc::new(failures))
    }

    fn store(&self) -> &str {
        self.store.as_deref().unwrap_or("default")
    }

    fn url(&self) -> anyhow::Result<String> {
        Ok(match (&self.postgres, &self.postgres_env) {
            (Some(url), None) => url.clone(),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                anyhow::anyhow!(
                    "[state] postgres-env = \"{var}\", but {var} is not set (or not UTF-8)"
                )
            })?,
            (Some(_), Some(_)) => {
                anyhow::bail!("[state] takes `postgres` or `postgres-env`, not both")
            }
            (None, None) => anyhow::bail!(
                "[state] needs `postgres-env = \"VAR\"` (or `postgres = \"URL\"`): the \
                 database that replicas share"
            ),
        })
    }
}

/// The `[telemetry]` table: where OpenTelemetry traces go when the
/// standard `OTEL_EXPORTER_OTLP_*` variables do not say.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's base URL, e.g. `http://127.0.0.1:4318`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `http/json`.
    #[serde(default)]
    pub protocol: Option<String>,
    /// `service.name` (`toolhost` by default).
    #[serde(default)]
    pub service_name: Option<String>,
    /// Export plugins' log lines, stdout and stderr as span events (off:
    /// they may hold arguments, results or secrets).
    #[serde(default)]
    pub plugin_output: bool,
    /// Export each call's steps (validate, admit, policy, execute, queue,
    /// sandbox, conclude) as child spans (off: a call is one span).
    #[serde(default)]
    pub steps: bool,
    /// What an MCP caller's `traceparent` does: `link` (the default: a
    /// link, the call's trace is the host's own) or `parent` (join the
    /// caller's trace, for callers the operator trusts).
    #[serde(default)]
    pub caller_trace: Option<String>,
}

impl TelemetryConfig {
    /// The exporter's settings.
    pub fn settings(&self) -> anyhow::Result<toolhost_telemetry::Settings> {
        Ok(toolhost_telemetry::Settings {
            endpoint: self.endpoint.clone(),
            protocol: self
                .protocol
                .as_deref()
                .map(str::parse)
                .transpose()
                .context("[telemetry] protocol")?,
            service_name: self.service_name.clone(),
            plugin_output: self.plugin_output,
            steps: self.steps,
            caller_trace: self
                .caller_trace
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(anyhow::Error::msg)
                .context("[telemetry] caller-trace")?
                .unwrap_or_default(),
        })
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

/// One `[agents.NAME]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AgentProfile {
    /// Model options laid over `[model.options]`.
    #[serde(default)]
    pub options: toolhost_agent::provider::ModelOptions,
}

impl ConfigFile {
    pub fn load(path: &Path) -> anyhow::Result<ConfigFile> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read config file {}", path.display()))?;
        toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim_end()))
    }
}

fn split_plugin<'a>(flag: &str, value: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    match value.split_once('=') {
        Some((p, rest)) if !p.is_empty() && !rest.is_empty() => Ok((p, rest)),
        _ => bail!("{flag} expects PLUGIN=VALUE, got `{value}`"),
    }
}

/// Reads the config file named by `--config`, or the default (empty) one.
pub fn config_file(global: &Global) -> anyhow::Result<ConfigFile> {
    match &global.config {
        Some(p) => ConfigFile::load(p),
        None => Ok(ConfigFile::default()),
    }
}

/// The provider configuration from the config file's `[model]` and the flags
/// (flags win); `None` when neither says anything (auto-detect).
pub fn provider_config(
    global: &Global,
    file: &ConfigFile,
) -> anyhow::Result<Option<ProviderConfig>> {
    let from_str = |what: &str, v: &str| -> anyhow::Result<serde_json::Value> {
        let _ = what;
        Ok(serde_json::Value::String(v.to_owned()))
    };
    let mut config = file.model.clone();
    if let Some(kind) = &global.provider {
        let kind = serde_json::from_value(from_str("provider", kind)?).map_err(|_| {
            anyhow::anyhow!("--provider must be openai, anthropic or ollama, got `{kind}`")
        })?;
        config = Some(match config {
            Some(mut c) => {
                c.kind = kind;
                c
            }
            None => ProviderConfig::new(kind),
        });
    }
    let any_flag = global.model.is_some()
        || global.base_url.is_some()
        || global.api_key_env.is_some()
        || global.protocol.is_some();
    if config.is_none() && any_flag {
        anyhow::bail!(
            "--model, --base-url, --api-key-env and --protocol need --provider (or [model] in the config file)"
        );
    }
    if let Some(c) = config.as_mut() {
        if let Some(m) = &global.model {
            c.model = Some(m.clone());
        }
        if let Some(u) = &global.base_url {
            c.base_url = Some(u.clone());
        }
        if let Some(k) = &global.api_key_env {
            c.api_key_env = Some(k.clone());
        }
        if let Some(p) = &global.protocol {
            c.protocol = serde_json::from_value(from_str("protocol", p)?).map_err(|_| {
                anyhow::anyhow!("--protocol must be native, json or xml, got `{p}`")
            })?;
        }
    }
    Ok(config)
}

/// The plugins directory `host install` installs into, and whose lock file
/// the host uses: the first `--plugins`, else the config file's first.
pub fn primary_plugins_dir<'a>(global: &'a Global, file: &'a ConfigFile) -> Option<&'a Path> {
    global
        .plugins
        .first()
        .or(file.plugins_dirs.first())
        .map(PathBuf::as_path)
}

/// The lock file: `--lock` (or `TOOLHOST_LOCK`); else the one of the
/// primary plugins directory ([`primary_plugins_dir`], a file's own
/// directory for a plugin file), in the user's state directory
/// ([`toolhost_runtime::lockfile::default_lock_file`]); else `toolhost.lock` here.
pub fn lock_file(global: &Global, file: &ConfigFile) -> PathBuf {
    if let Some(lock) = &global.lock {
        return lock.clone();
    }
    primary_plugins_dir(global, file)
        .map(|dir| match dir.extension() {
            Some(e) if e == "wasm" => dir.parent().unwrap_or(Path::new(".")),
            _ => dir,
        })
        .and_then(toolhost_runtime::lockfile::default_lock_file)
        .unwrap_or_else(|| PathBuf::from("toolhost.lock"))
}

/// Checks a profile name given to the host (`--agent`, a token file's
/// line, named by `what`) against the profiles that exist: the policy's,
/// and the config file's `[agents.NAME]`. An unknown name stops the start,
/// since its calls would run under the base policy rather than the
/// profile meant (a typo such as `reviewr` would widen what a client may do).
pub fn check_profile(
    name: &str,
    what: &str,
    policy: &Policy,
    file: &ConfigFile,
) -> anyhow::Result<()> {
    let mut known: Vec<&str> = policy.profile_names();
    known.extend(file.agents.keys().map(String::as_str));
    known.sort_unstable();
    known.dedup();
    if known.contains(&name) {
        return Ok(());
    }
    bail!(
        "{what} names the profile `{}`, which neither the policy nor the config file defines \
         (profiles: {}); the host does not start with calls under a profile that does not exist",
        crate::shown::printable(name),
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    );
}

/// Where "allow always" answers are saved: beside the lock file, named
/// after it (`toolhost.lock` → `toolhost.approvals.json`), so each lock
/// file has its own.
pub fn approvals_file(lock: &Path) -> PathBuf {
    lock.with_extension("approvals.json")
}

/// The saved-approvals stores `host approvals` reads.
#[derive(Debug)]
pub struct ApprovalStores {
    /// The files.
    pub paths: Vec<PathBuf>,
    /// The database that replicas share (`[state]`), which then holds them
    /// all instead of the files.
    pub shared: Option<std::sync::Arc<dyn toolhost_runtime::policy::approvals::Store>>,
    /// Whether they are every store found, since no plugins directory (nor
    /// `--lock`) said which one.
    pub every_store: bool,
}

impl ApprovalStores {
    /// Where they are, for a message.
    pub fn described(&self) -> String {
        if let Some(store) = &self.shared {
            return store.describe();
        }
        if self.every_store {
            let dir = self.paths.first().and_then(|p| p.parent()).map_or_else(
                || "the state directory".to_owned(),
                |d| d.display().to_string(),
            );
            format!(
                "in any plugins directory's store under {dir}; `host --plugins DIR approvals …` \
                 names one"
            )
        } else {
            self.paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

/// The stores `host approvals` reads: the one beside the lock file when a
/// plugins directory or `--lock` says which (as the commands that call
/// tools use); with neither, every store in the state directory (approvals
/// are kept per plugins directory, and a listing that read one other file
/// would say there are none while there are), and a `./toolhost.approvals.json`
/// left from before the lock file moved.
pub fn approval_stores(global: &Global, file: &ConfigFile) -> anyhow::Result<ApprovalStores> {
    if let Some(state) = &file.state {
        return Ok(ApprovalStores {
            paths: Vec::new(),
            shared: Some(state.approvals_connected()?),
            every_store: false,
        });
    }
    if let Some(path) = &global.approvals_file {
        return Ok(ApprovalStores {
            paths: vec![path.clone()],
            shared: None,
            every_store: false,
        });
    }
    if global.lock.is_some() || primary_plugins_dir(global, file).is_some() {
        return Ok(ApprovalStores {
            paths: vec![approvals_file(&lock_file(global, file))],
            shared: None,
            every_store: false,
        });
    }
    let mut paths = Vec::new();
    if let Some(dir) = toolhost_runtime::lockfile::default_lock_file(Path::new("."))
        .as_deref()
        .and_then(Path::parent)
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        paths.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.to_string_lossy().ends_with(".approvals.json")),
        );
        paths.sort();
        if paths.is_empty() {
            // Named for the messages; nothing is read from it.
            paths.push(dir.join("*.approvals.json"));
        }
    }
    let old = approvals_file(Path::new("toolhost.lock"));
    if old.is_file() {
        paths.push(old);
    }
    Ok(ApprovalStores {
        paths,
        shared: None,
        every_store: true,
    })
}

/// Warns about each grant or setting (a flag, the config file's or the
/// policy's `[plugins.NAME]`) for a plugin that is not loaded: `--allow-dir
/// fss=.` (a typo) would give nothing to anyone, and the call that then
/// finds no directory would not say why. A plugin whose file failed to
/// load is reported as such already.
pub fn warn_unknown_grants(
    global: &Global,
    file: &ConfigFile,
    runtime: &toolhost_runtime::Runtime,
) {
    let loaded: Vec<String> = runtime.plugins().into_iter().map(|p| p.name).collect();
    let failed: Vec<String> = runtime
        .load_report()
        .failures
        .iter()
        .filter_map(|f| f.path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|stem| stem.split('@').next().unwrap_or_default().to_owned())
        .collect();
    let mut named: Vec<(String, String)> = Vec::new();
    for (flag, values) in [
        ("--allow-dir", &global.allow_dir),
        ("--allow-host", &global.allow_host),
        ("--allow-env", &global.allow_env),
    ] {
        for v in values {
            if let Some((plugin, _)) = v.split_once('=') {
                named.push((plugin.to_owned(), format!("{flag} {v}")));
            }
        }
    }
    for v in &global.set {
        if let Some((plugin, _)) = v.split_once('.') {
            named.push((plugin.to_owned(), format!("--set {v}")));
        }
    }
    let config = global
        .config
        .as_deref()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    for name in file.plugins.keys() {
        named.push((name.clone(), format!("[plugins.{name}] in {config}")));
    }
    let policy = runtime.policy();
    if let Some(table) = policy.raw_plugins() {
        let at = policy
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        for name in table.keys() {
            named.push((name.clone(), format!("[plugins.{name}] in {at}")));
        }
    }
    let mut warned = std::collections::BTreeSet::new();
    for (plugin, what) in named {
        if loaded.contains(&plugin) || failed.contains(&plugin) || !warned.insert(what.clone()) {
            continue;
        }
        let closest = loaded
            .iter()
            .map(|l| (strsim::jaro_winkler(&plugin, l), l))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, l)| format!("; did you mean `{l}`?"))
            .unwrap_or_default();
        eprintln!(
            "warning: {}: no plugin named `{}` is loaded, so this goes to no plugin{closest} \
             (loaded: {})",
            crate::shown::printable(&what),
            crate::shown::printable(&plugin),
            if loaded.is_empty() {
                "none".to_owned()
            } else {
                loaded.join(", ")
            }
        );
    }
}

/// The MCP servers of the config file and of `--mcp`.
pub fn mcp_servers(global: &Global) -> anyhow::Result<Vec<crate::mcp_servers::ServerEntry>> {
    mcp_servers_of(&config_file(global)?, global)
}

fn mcp_servers_of(
    file: &ConfigFile,
    global: &Global,
) -> anyhow::Result<Vec<crate::mcp_servers::ServerEntry>> {
    let mut servers = file.mcp_servers.clone();
    for flag in &global.mcp {
        servers.push(crate::mcp_servers::ServerEntry::from_flag(flag)?);
    }
    Ok(servers)
}

/// A runtime builder from the config file and the flags (flags win).
/// `only` replaces the plugin directories with these files (for `check`).
pub fn builder(
    global: &Global,
    only: Option<&[PathBuf]>,
    sign_in: &crate::mcp_servers::SignIn,
) -> anyhow::Result<RuntimeBuilder> {
    let file = config_file(global)?;
    let servers = mcp_servers_of(&file, global)?;
    let lock = lock_file(global, &file);
    // Before 2026-11-26 the lock file defaulted to the working directory.
    let old = Path::new("toolhost.lock");
    if global.lock.is_none() && old.is_file() && lock != old {
        tracing::warn!(
            "./toolhost.lock is not read any more: the lock file is now {} (one per plugins \
             directory); copy it there to keep what it trusts, or pass --lock toolhost.lock",
            lock.display()
        );
    }
    let mut settings: BTreeMap<String, PluginSettings> = file.plugins;
    let policy = match global.policy.as_ref().or(file.policy.as_ref()) {
        Some(path) => {
            let policy = Policy::load(path).map_err(|e| {
                anyhow::anyhow!("{e}\nthe host does not start with a policy it cannot read fully")
            })?;
            for (name, grants) in policy_grants(&policy)? {
                let entry = settings.entry(name).or_default();
                entry.dirs.extend(grants.dirs);
                entry.hosts.extend(grants.hosts);
                entry.env.extend(grants.env);
                entry.config.extend(grants.config);
            }
            Some(policy)
        }
        None => None,
    };
    for v in &global.allow_dir {
        let (plugin, spec) = split_plugin("--allow-dir", v)?;
        let grant = if let Some(p) = spec.strip_suffix(":rw") {
            DirGrant {
                path: p.into(),
                access: DirAccess::ReadWrite,
            }
        } else {
            DirGrant::read_only(spec.strip_suffix(":ro").unwrap_or(spec))
        };
        settings.entry(plugin.into()).or_default().dirs.push(grant);
    }
    for v in &global.allow_host {
        let (plugin, pattern) = split_plugin("--allow-host", v)?;
        let pattern: HostPattern = pattern.parse()?;
        settings
            .entry(plugin.into())
            .or_default()
            .hosts
            .push(pattern);
    }
    for v in &global.allow_env {
        let (plugin, env) = split_plugin("--allow-env", v)?;
        settings
            .entry(plugin.into())
            .or_default()
            .env
            .push(env.into());
    }
    for v in &global.set {
        let (key, value) = v
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set expects PLUGIN.KEY=VALUE, got `{v}`"))?;
        let (plugin, key) = key
            .split_once('.')
            .filter(|(p, k)| !p.is_empty() && !k.is_empty())
            .ok_or_else(|| anyhow::anyhow!("--set expects PLUGIN.KEY=VALUE, got `{v}`"))?;
        settings
            .entry(plugin.into())
            .or_default()
            .config
            .insert(key.into(), value.into());
    }

    let mut limits = Limits::default().with(&file.limits);
    if let Some(ms) = global.timeout_ms {
        limits.timeout = std::time::Duration::from_millis(ms);
    }
    if let Some(mb) = global.memory_mb {
        limits.memory_bytes = mb.saturating_mul(1024 * 1024);
    }

    let mut builder = toolhost_runtime::Runtime::builder()
        .limits(limits)
        .approvals_file(Some(
            global
                .approvals_file
                .clone()
                .unwrap_or_else(|| approvals_file(&lock)),
        ))
        .approvals_last(global.approvals_last)
        .lock_file(lock)
        .accept_new_digests(global.dev)
        .locked(global.locked);
    if let Some(state) = &file.state {
        builder = builder.approvals_store(state.approvals()?);
    }
    if global.no_result_cache {
        builder = builder.result_cache(toolhost_runtime::cache::CacheOptions::disabled());
    }
    if global.no_cache {
        builder = builder.cache_dir(None);
    } else if let Some(dir) = global.cache_dir.clone().or(file.cache_dir) {
        builder = builder.cache_dir(Some(dir));
    }
    // A secret the deployment holds (never an argument: it would show in
    // `ps`), sealing the compile cache entries replicas share.
    if let Some(secret) = std::env::var_os("TOOLHOST_CACHE_KEY") {
        let key = toolhost_runtime::cache::CacheKey::new(secret.into_encoded_bytes())
            .context("TOOLHOST_CACHE_KEY")?;
        builder = builder.cache_key(Some(key));
    }
    let mut paths: Vec<PathBuf> = match only {
        Some(files) => files.to_vec(),
        None => file
            .plugins_dirs
            .iter()
            .chain(&global.plugins)
            .cloned()
            .collect(),
    };
    if only.is_none() {
        let mode = file.code.mode(global.code_mode);
        file.code.wire(mode, &mut paths, &mut settings);
    }
    for p in paths {
        builder = builder.plugin_dir(p);
    }
    if only.is_none() {
        builder = crate::mcp_servers::add(builder, servers, &mut settings, sign_in)?;
    }
    for (name, s) in settings {
        builder = builder.plugin_settings(name, s);
    }
    for (name, req) in file.versions {
        builder = builder.require_version(name, req);
    }
    for (tool, plugin) in file.tool_owners {
        builder = builder.tool_owner(tool, plugin);
    }
    if let Some(policy) = policy {
        builder = builder.policy(policy);
    }
    builder = builder.hook_configs(file.hooks);
    builder = if global.yes {
        builder.allow_asks_without_approver(true)
    } else {
        builder.approver(std::sync::Arc::new(crate::approve::PromptApprover::new(
            global.answers_from_stdin,
        )))
    };
    Ok(builder)
}

/// The capability grants in a policy file's `[plugins.NAME]` tables.
fn policy_grants(policy: &Policy) -> anyhow::Result<Vec<(String, PluginSettings)>> {
    let Some(table) = policy.raw_plugins() else {
        return Ok(Vec::new());
    };
    let origin = policy
        .path()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    table
        .iter()
        .map(|(name, value)| {
            let grants: PluginSettings = value.clone().try_into().map_err(|e| {
                anyhow::anyhow!("{origin}: [plugins.{name}]: {}", e.to_string().trim_end())
            })?;
            Ok((name.clone(), grants))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn global(args: &[&str]) -> Global {
        let mut all = vec!["host"];
        all.extend_from_slice(args);
        crate::args::Cli::parse_from(all).global
    }

    fn quiet() -> crate::mcp_servers::SignIn {
        crate::mcp_servers::SignIn {
            token_dir: PathBuf::from("/nonexistent/oauth"),
            prompt: None,
        }
    }

    #[test]
    fn malformed_grant_flags_are_errors() {
        assert!(builder(&global(&["--allow-dir", "nodir"]), None, &quiet()).is_err());
        assert!(builder(&global(&["--allow-host", "http=ftp://x"]), None, &quiet()).is_err());
        assert!(builder(&global(&["--set", "novalue"]), None, &quiet()).is_err());
    }

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
