//! Grants and plugin settings from the command line and the policy file,
//! and the warning about grants for plugins that are not loaded.

use std::collections::BTreeMap;

use anyhow::bail;
use toolhost_runtime::policy::Policy;
use toolhost_runtime::{DirGrant, PluginSettings, grants::DirAccess, grants::HostPattern};

use super::ConfigFile;
use crate::shared_flags::Global;

fn split_plugin<'a>(flag: &str, value: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    match value.split_once('=') {
        Some((p, rest)) if !p.is_empty() && !rest.is_empty() => Ok((p, rest)),
        _ => bail!("{flag} expects PLUGIN=VALUE, got `{value}`"),
    }
}

/// Adds the grants and config values of `--allow-dir`, `--allow-host`,
/// `--allow-env` and `--set` to `settings`.
pub fn add_flag_grants(
    global: &Global,
    settings: &mut BTreeMap<String, PluginSettings>,
) -> anyhow::Result<()> {
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
    Ok(())
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

/// The capability grants in a policy file's `[plugins.NAME]` tables.
pub fn policy_grants(policy: &Policy) -> anyhow::Result<Vec<(String, PluginSettings)>> {
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
