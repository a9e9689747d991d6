//! The runtime builder made from the config file and the shared flags.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use toolhost_runtime::policy::Policy;
use toolhost_runtime::{Limits, PluginSettings, RuntimeBuilder};

use super::grants::{add_flag_grants, policy_grants};
use super::{ConfigFile, approvals_file, config_file, lock_file};
use crate::shared_flags::Global;

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
    add_flag_grants(global, &mut settings)?;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn global(args: &[&str]) -> Global {
        crate::commands::global_of(args)
    }

    fn quiet() -> crate::mcp_servers::SignIn {
        crate::mcp_servers::SignIn {
            token_dir: PathBuf::from("/nonexistent/oauth"),
            prompt: None,
            older_callers: true,
        }
    }

    #[test]
    fn malformed_grant_flags_are_errors() {
        assert!(builder(&global(&["--allow-dir", "nodir"]), None, &quiet()).is_err());
        assert!(builder(&global(&["--allow-host", "http=ftp://x"]), None, &quiet()).is_err());
        assert!(builder(&global(&["--set", "novalue"]), None, &quiet()).is_err());
    }
}
