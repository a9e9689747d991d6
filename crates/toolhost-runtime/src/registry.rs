//! The set of tools the model can call: names resolved across plugins,
//! clashes reported and resolved deterministically.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::Serialize;

use crate::manifest::Capabilities;
use crate::plugin::{Plugin, is_valid_tool_name};
use crate::tool::ToolInfo;

/// What a plugin provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    /// Tools the model can call (world `tool-plugin`).
    Tool,
    /// A hook run before and after calls (world `hook-plugin`), when the
    /// host's hook configuration names it.
    Hook,
    /// A tool source outside the engine, such as an MCP server
    /// ([`ToolSource`](crate::ToolSource)).
    Source,
    /// A component of another host's WIT world (no `toolhost:plugin`
    /// contract): each function it exports is a tool.
    Plain,
}

/// A loaded plugin as users see it.
#[derive(Debug, Clone, Serialize)]
pub struct PluginInfo {
    /// Its name.
    pub name: String,
    /// Tool plugin or hook plugin.
    pub kind: PluginKind,
    /// Its version.
    pub version: semver::Version,
    /// The component file.
    pub path: std::path::PathBuf,
    /// The `toolhost:plugin` version it was built against.
    pub api_version: semver::Version,
    /// From its manifest.
    pub description: Option<String>,
    /// Rules for the model, from its manifest.
    pub usage: Option<String>,
    /// What its manifest asks for.
    pub requested: Capabilities,
    /// What the host granted (empty while its grants are withheld).
    pub granted: Granted,
    /// Its identity: `sha256:` of the component's bytes.
    pub digest: String,
    /// Whether the user's grants for its name apply to this code (see
    /// [`RuntimeBuilder::lock_file`](crate::RuntimeBuilder::lock_file)).
    pub grants: crate::lockfile::GrantState,
    /// The names its tools are exposed under.
    pub tools: Vec<String>,
    /// The limits its calls run under (defaults, its manifest, the host's settings).
    pub limits: crate::limits::Limits,
    /// For a tool source: what it is and how it is doing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::source::SourceStatus>,
    /// Why this version was chosen, when several were found or the host pins a
    /// version requirement (e.g. "pinned to ^1.2: the highest match among 2.0.0, 1.3.0").
    pub selection: Option<String>,
    /// Instances it keeps instantiated ahead of its calls, and how many
    /// are ready now (both 0 unless its instantiation is costly; see
    /// [`RuntimeBuilder::ready_instances`](crate::RuntimeBuilder::ready_instances)).
    pub ready_instances: ReadyInfo,
}

/// A plugin's ready instances (see [`PluginInfo::ready_instances`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadyInfo {
    /// How many it keeps ready.
    pub kept: usize,
    /// How many are ready right now.
    pub ready: usize,
    /// How many calls ran in one of them so far.
    pub served: u64,
}

/// Capabilities a plugin was granted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Granted {
    /// Directories, with `:ro` or `:rw`.
    pub dirs: Vec<String>,
    /// Host patterns.
    pub hosts: Vec<String>,
    /// Environment variable names.
    pub env: Vec<String>,
    /// Globs on the tools it may call (`call-tools`, contract 0.4.0).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub call_tools: Vec<String>,
}

/// Tool names reserved for the host's built-in tools (`read_var`, the agent
/// loop's reader of stored results). A plugin that declares one keeps its
/// tool, exposed as `plugin__name` like any other clash, so a plugin can
/// never stand in for a built-in.
///
/// ```
/// assert!(toolhost_runtime::contract::RESERVED_TOOL_NAMES.contains(&"read_var"));
/// ```
pub const RESERVED_TOOL_NAMES: &[&str] = &["read_var"];

/// Tools by exposed name, and the plugins behind them.
#[derive(Default)]
pub(crate) struct Registry {
    pub tools: BTreeMap<String, (Arc<Plugin>, usize)>,
    pub plugins: Vec<Arc<Plugin>>,
    /// Why a version was chosen, for plugins present in several versions or pinned.
    pub selection: BTreeMap<String, String>,
}

impl Registry {
    /// Builds the registry from every loaded plugin file: one version per
    /// plugin name (the highest, or the highest that meets the plugin's
    /// version requirement in `pins`), then tools by name (see
    /// [`assign_names`]; `names` says who held which name until now).
    /// Returns warnings for every plugin or tool that was renamed
    /// or left out, with the reason.
    pub(crate) fn build(
        candidates: impl IntoIterator<Item = Arc<Plugin>>,
        pins: &BTreeMap<String, semver::VersionReq>,
        names: &Holders,
    ) -> (Registry, Vec<String>) {
        let mut warnings = Vec::new();
        let mut by_name: BTreeMap<String, Vec<Arc<Plugin>>> = BTreeMap::new();
        for p in candidates {
            by_name.entry(p.name.clone()).or_default().push(p);
        }
        let mut plugins: Vec<Arc<Plugin>> = Vec::new();
        let mut selection = BTreeMap::new();
        for (name, mut versions) in by_name {
            // A configured tool source first (a plugin file never takes its
            // name), then a file named for the plugin (`NAME.wasm`,
            // `NAME@VERSION.wasm`: another file whose manifest merely says
            // NAME never displaces it), then the highest version, then by
            // path for a deterministic choice.
            versions.sort_by(|a, b| {
                (b.source().is_some().cmp(&a.source().is_some()))
                    .then_with(|| b.has_named_file().cmp(&a.has_named_file()))
                    .then_with(|| b.version.cmp(&a.version))
                    .then_with(|| a.path.cmp(&b.path))
            });
            let pin = pins.get(&name).filter(|_| versions[0].source().is_none());
            let listed = || {
                versions
                    .iter()
                    .map(|p| p.version.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let chosen = match pin {
                Some(req) => versions.iter().find(|p| req.matches(&p.version)),
                None => versions.first(),
            };
            let Some(chosen) = chosen.cloned() else {
                warnings.push(format!(
                    "plugin `{name}` is not loaded: no version meets the requirement {} (found {})",
                    pin.map(ToString::to_string).unwrap_or_default(),
                    listed()
                ));
                continue;
            };
            let reason = match pin {
                Some(req) => Some(format!(
                    "pinned to {req}: the highest match among {}",
                    listed()
                )),
                None if chosen.source().is_some() && versions.len() > 1 => {
                    Some("a configured tool source, whose name a plugin file never takes".into())
                }
                None if chosen.has_named_file()
                    && versions
                        .iter()
                        .any(|p| !p.has_named_file() && p.version > chosen.version) =>
                {
                    Some(format!(
                        "the file named for it ({name}.wasm or {name}@VERSION.wasm); a file \
                         named otherwise never takes its name, whatever its version (found {})",
                        listed()
                    ))
                }
                None if versions.len() > 1 => {
                    Some(format!("the highest version among {}", listed()))
                }
                None => None,
            };
            for other in versions.iter().filter(|p| !Arc::ptr_eq(p, &chosen)) {
                warnings.push(format!(
                    "{} ({}) is not used: {} ({}) is {}",
                    other.id(),
                    other.path.display(),
                    chosen.id(),
                    chosen.path.display(),
                    reason.as_deref().unwrap_or("preferred")
                ));
            }
            if let Some(reason) = reason {
                selection.insert(name.clone(), reason);
            }
            if let crate::lockfile::GrantState::NotItsFile { file } = &chosen.grants {
                warnings.push(format!(
                    "{} ({}) calls itself `{name}` but its file is {file}.wasm: it runs \
                     without the grants for `{name}`, which go only to {name}.wasm or \
                     {name}@VERSION.wasm",
                    chosen.id(),
                    chosen.path.display()
                ));
            }
            if let crate::lockfile::GrantState::Withheld { trusted } = &chosen.grants {
                warnings.push(format!(
                    "{} ({}) is not the code its grants were given to ({trusted} in the lock \
                     file): it runs without them. Accept it with `host trust {name}`",
                    chosen.id(),
                    chosen.digest
                ));
            }
            plugins.push(chosen);
        }
        let tools = assign_names(&plugins, names, &mut warnings);
        (
            Registry {
                tools,
                plugins,
                selection,
            },
            warnings,
        )
    }

    /// Which plugin holds each plain (declared) tool name now.
    pub(crate) fn owners(&self) -> BTreeMap<String, String> {
        self.tools
            .iter()
            .filter(|(name, (p, i))| p.tools[*i].name == **name)
            .map(|(name, (p, _))| (name.clone(), p.name.clone()))
            .collect()
    }

    /// The (plugin, declared name) pairs exposed as `plugin__tool` now.
    pub(crate) fn renamed(&self) -> BTreeSet<(String, String)> {
        self.tools
            .iter()
            .filter(|(name, (p, i))| p.tools[*i].name != **name)
            .map(|(_, (p, i))| (p.name.clone(), p.tools[*i].name.clone()))
            .collect()
    }

    pub(crate) fn tool_infos(&self) -> Vec<ToolInfo> {
        self.tools
            .iter()
            .map(|(name, (p, i))| {
                let t = &p.tools[*i];
                ToolInfo {
                    name: name.clone(),
                    declared_name: t.name.clone(),
                    plugin: p.name.clone(),
                    plugin_version: p.version.clone(),
                    description: t.description.clone(),
                    input_schema: t.schema.clone(),
                    annotations: t.annotations,
                    output_schema: t.output_schema.clone(),
                }
            })
            .collect()
    }

    pub(crate) fn plugin_infos(&self) -> Vec<PluginInfo> {
        self.plugins
            .iter()
            .map(|p| PluginInfo {
                name: p.name.clone(),
                kind: if p.is_hook() {
                    PluginKind::Hook
                } else if p.is_plain() {
                    PluginKind::Plain
                } else if p.source().is_some() {
                    PluginKind::Source
                } else {
                    PluginKind::Tool
                },
                source: p.source().map(|s| s.status()),
                version: p.version.clone(),
                path: p.path.clone(),
                api_version: p.api_version.clone(),
                description: p.description.clone(),
                usage: p.usage.clone(),
                requested: p.requested.clone(),
                granted: Granted {
                    dirs: p
                        .sandbox
                        .dirs
                        .iter()
                        .map(|d| {
                            let mode = match d.access {
                                crate::grants::DirAccess::ReadOnly => "ro",
                                crate::grants::DirAccess::ReadWrite => "rw",
                            };
                            format!("{}:{mode}", d.host)
                        })
                        .collect(),
                    hosts: p.sandbox.hosts.iter().map(ToString::to_string).collect(),
                    env: p.sandbox.env.iter().map(|(k, _)| k.clone()).collect(),
                    call_tools: p
                        .sandbox
                        .call_tools
                        .as_ref()
                        .map(|g| g.patterns())
                        .unwrap_or_default(),
                },
                digest: p.digest.clone(),
                grants: p.grants.clone(),
                limits: p.sandbox.limits.clone(),
                tools: self
                    .tools
                    .iter()
                    .filter(|(_, (q, _))| Arc::ptr_eq(p, q))
                    .map(|(n, _)| n.clone())
                    .collect(),
                selection: self.selection.get(&p.name).cloned(),
                ready_instances: ReadyInfo {
                    kept: p.ready.kept(),
                    ready: p.ready.count(),
                    served: p.ready.served(),
                },
            })
            .collect()
    }
}

/// Who held which tool name before a load: what keeps names where they are.
#[derive(Debug, Default)]
pub(crate) struct Holders {
    /// Plain tool name -> the plugin it belongs to: the user's
    /// `tool-owners`, and every name a plugin has held since start-up.
    pub owners: BTreeMap<String, String>,
    /// (plugin, declared name) pairs that were exposed as `plugin__tool`.
    pub renamed: BTreeSet<(String, String)>,
}

/// Gives every tool of `plugins` the name the model calls it by.
///
/// A declared name goes to the plugin that owns it (the one that held it
/// since start-up, or the one the user configured). While its owner is away
/// (being rebuilt, say), a plugin that was renamed because of it stays
/// renamed; a plugin that appeared meanwhile and alone declares the name (a
/// renamed file) gets it. A name no one owns goes to the one plugin that
/// declares it, and to none when several do (a tie). So a plugin never takes
/// a name from another because of how its name sorts, and a newcomer never
/// takes a name that is held. Every other claimant is exposed as
/// `plugin__tool`; a name reserved for a built-in ([`RESERVED_TOOL_NAMES`])
/// always is.
fn assign_names(
    plugins: &[Arc<Plugin>],
    names: &Holders,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, (Arc<Plugin>, usize)> {
    let mut claims: BTreeMap<&str, Vec<(&Arc<Plugin>, usize)>> = BTreeMap::new();
    for p in plugins {
        for (i, t) in p.tools.iter().enumerate() {
            claims.entry(t.name.as_str()).or_default().push((p, i));
        }
    }
    let mut tools: BTreeMap<String, (Arc<Plugin>, usize)> = BTreeMap::new();
    let mut renamed: Vec<(&Arc<Plugin>, usize, String)> = Vec::new();
    for (name, claimants) in &claims {
        let owner = names.owners.get(*name);
        let sole = match claimants.as_slice() {
            [only] => Some(only),
            _ => None,
        };
        let holder = if RESERVED_TOOL_NAMES.contains(name) {
            claimants.iter().find(|(p, _)| p.is_builtin())
        } else if let Some(owner) = owner {
            claimants
                .iter()
                .find(|(p, _)| &p.name == owner)
                .or(sole.filter(|(p, _)| {
                    !names
                        .renamed
                        .contains(&(p.name.clone(), (*name).to_owned()))
                }))
        } else {
            sole
        };
        if let Some((p, i)) = holder {
            tools.insert((*name).to_owned(), ((*p).clone(), *i));
        }
        let why = match (holder, owner) {
            (Some((p, _)), _) => format!("`{name}` is held by {}", p.id()),
            _ if RESERVED_TOOL_NAMES.contains(name) => {
                format!("`{name}` is reserved for a built-in tool of the host")
            }
            (None, Some(owner)) => format!(
                "`{name}` belongs to plugin `{owner}`, which is not loaded now or does not declare it"
            ),
            (None, None) => format!(
                "{} plugins declare `{name}` and none held it before, so none gets it \
                 (name its owner in the config's `[tool-owners]`, e.g. `{name} = \"{}\"`)",
                claimants.len(),
                claimants[0].0.name
            ),
        };
        for (p, i) in claimants {
            if holder.is_some_and(|(h, _)| Arc::ptr_eq(h, p)) {
                continue;
            }
            renamed.push((p, *i, why.clone()));
        }
    }
    for (p, i, why) in renamed {
        let declared = &p.tools[i].name;
        let alias = format!("{}__{declared}", p.name);
        if is_valid_tool_name(&alias)
            && !tools.contains_key(&alias)
            && !claims.contains_key(alias.as_str())
        {
            warnings.push(format!(
                "tool `{declared}` of {} is exposed as `{alias}`: {why}",
                p.id()
            ));
            tools.insert(alias, (p.clone(), i));
        } else {
            warnings.push(format!(
                "tool `{declared}` of {} cannot be renamed and is not available: {why}",
                p.id()
            ));
        }
    }
    tools
}

/// Ranks `candidates` by similarity to `name`: a match ignoring case and
/// `-`/`_` first, then by Jaro-Winkler similarity and substring containment.
pub(crate) fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let wanted = norm(name);
    let mut scored: Vec<(f64, &str)> = candidates
        .filter_map(|c| {
            let n = norm(c);
            let score = if n == wanted {
                2.0
            } else if !wanted.is_empty() && (n.contains(&wanted) || wanted.contains(&n)) {
                1.0 + strsim::jaro_winkler(&wanted, &n) / 10.0
            } else {
                strsim::jaro_winkler(&wanted, &n)
            };
            (score >= 0.8).then_some((score, c))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    scored
        .into_iter()
        .take(3)
        .map(|(_, c)| c.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_rank_case_and_separator_mismatches_first() {
        let names = ["read_file", "list_dir", "read_files_fast", "calculate"];
        assert_eq!(suggest("Read-File", names.into_iter())[0], "read_file");
        assert_eq!(suggest("calculator", names.into_iter()), vec!["calculate"]);
        assert!(suggest("zzz", names.into_iter()).is_empty());
    }
}
