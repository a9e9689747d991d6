//! Skills over MCP (SEP-2640, the `io.modelcontextprotocol/skills`
//! extension): the instructions and files plugins ship beside their tools.
//!
//! A plugin's skills are the folder `NAME.skills/` beside its component
//! `NAME.wasm` (and its manifest `NAME.toml`): each folder in it with a
//! `SKILL.md` is a skill, as the Agent Skills format has it. They are data,
//! not code: no sandbox runs to serve them, and their bytes, digests and
//! sizes stay what the listing says (rmcp's [`SkillCatalog`] holds a
//! snapshot of each plugin's, bounded: 512 files and 16 MiB a skill,
//! [`MAX_PLUGIN_SKILL_BYTES`] a plugin).
//!
//! A skill of plugin `calc` in `calc.skills/arithmetic/` is served at
//! `skill://calc/arithmetic/SKILL.md`: the plugin's name is the first
//! segment, so two plugins' skills never clash, and the policy's
//! `resource = "skill://calc/*"` rules name them as they name an upstream
//! server's resources.
//!
//! - `skills/list`, `skills/get`, `resources/list` (each skill's
//!   `SKILL.md`), `resources/read` and `resources/directory/read` list
//!   and serve them.
//! - A caller sees only the skills of the plugins that offer it at least
//!   one tool (as a plugin's usage rules reach only such callers), and
//!   only those the policy lets it read (`Runtime::may_access`, a
//!   `resource` rule on the URI). For it, the others are not there:
//!   `skills/get` answers `-32602`, `resources/read` as for any unknown
//!   URI (`-32602` on 2026-07-28, `-32002` before).
//! - A skill's files are read again at most every [`REFRESH`] (an edit
//!   shows up without a reload); a snapshot that cannot be read keeps
//!   the last one serving.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::handler::server::skill_catalog::SkillCatalog;
use rmcp::model::{
    GetSkillResult, ListSkillsResult, ReadResourceDirectoryResult, ReadResourceResult, Resource,
    ResourceContents, Skill, SkillResources,
};
use rmcp::service::{RequestContext, RoleServer};
use toolhost_runtime::{Access, PluginInfo, Runtime};

use super::McpServer;

/// The scheme of a skill's URI.
const SCHEME: &str = "skill://";
/// How often a plugin's skills are read again from its folder, at most.
pub const REFRESH: Duration = Duration::from_secs(2);
/// The most bytes of skills one plugin serves (all its skills together);
/// a plugin with more serves none, and the log says why.
pub const MAX_PLUGIN_SKILL_BYTES: u64 = 64 << 20;

/// The skills of one server's plugins.
#[derive(Default)]
pub(crate) struct Skills {
    /// Each plugin's snapshot, by plugin name.
    held: Mutex<HashMap<String, Held>>,
    /// Whether any plugin has skills, and when that was looked at (the
    /// server's capabilities are asked for often: never a file system walk
    /// each time).
    present: Mutex<Option<(Instant, bool)>>,
}

/// One plugin's skills, as last read.
struct Held {
    dir: PathBuf,
    catalog: Arc<SkillCatalog>,
    read: Instant,
}

/// The folder of `plugin`'s skills, when it has one.
pub(crate) fn dir_of(plugin: &PluginInfo) -> Option<PathBuf> {
    let dir = plugin.path.with_extension("skills");
    (plugin.source.is_none() && dir.is_dir()).then_some(dir)
}

/// `uri` of a plugin's catalog as the caller sees it: under the plugin.
fn outward(plugin: &str, uri: &str) -> String {
    match uri.strip_prefix(SCHEME) {
        Some(rest) => format!("{SCHEME}{plugin}/{rest}"),
        None => uri.to_owned(),
    }
}

/// The plugin a caller's `uri` names, and the URI its catalog knows.
fn inward(uri: &str) -> Option<(&str, String)> {
    let (plugin, rest) = uri.strip_prefix(SCHEME)?.split_once('/')?;
    (!plugin.is_empty() && !rest.is_empty()).then(|| (plugin, format!("{SCHEME}{rest}")))
}

fn skill_outward(plugin: &str, mut skill: Skill) -> Skill {
    skill.uri = outward(plugin, &skill.uri);
    if let SkillResources::Files(files) = &mut skill.resources {
        for file in files {
            file.uri = outward(plugin, &file.uri);
        }
    }
    skill
}

fn resource_outward(plugin: &str, mut resource: Resource) -> Resource {
    resource.uri = outward(plugin, &resource.uri);
    resource
}

fn unknown_skill(uri: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown skill: {}", toolhost_text::line(uri, 300)),
        None,
    )
}

impl Skills {
    /// Whether any plugin has skills (looked at again at most every
    /// [`REFRESH`]).
    pub(crate) fn any(&self, runtime: &Runtime) -> bool {
        let mut present = self.present.lock();
        if let Some((at, any)) = *present
            && at.elapsed() < REFRESH
        {
            return any;
        }
        let any = runtime.plugins().iter().any(|p| dir_of(p).is_some());
        *present = Some((Instant::now(), any));
        any
    }

    /// `plugin`'s snapshot, read again when older than [`REFRESH`] (off
    /// the async threads); `None` when it has no skills, or too many.
    async fn catalog(&self, plugin: &str, dir: &Path) -> Option<Arc<SkillCatalog>> {
        let kept = {
            let held = self.held.lock();
            held.get(plugin)
                .filter(|h| h.dir == dir)
                .map(|h| (h.catalog.clone(), h.read.elapsed() < REFRESH))
        };
        let catalog = match kept {
            Some((catalog, true)) => return Some(catalog),
            Some((catalog, false)) => {
                let again = catalog.clone();
                let reread = tokio::task::spawn_blocking(move || again.reload()).await;
                if let Ok(Err(e)) = reread {
                    tracing::warn!(plugin, "its skills cannot be read again: {e}");
                }
                catalog
            }
            None => {
                let from = dir.to_owned();
                match tokio::task::spawn_blocking(move || SkillCatalog::from_dir(from)).await {
                    Ok(Ok(catalog)) => Arc::new(catalog),
                    Ok(Err(e)) => {
                        tracing::warn!(plugin, "its skills cannot be read: {e}");
                        return None;
                    }
                    Err(_) => return None,
                }
            }
        };
        self.held.lock().insert(
            plugin.to_owned(),
            Held {
                dir: dir.to_owned(),
                catalog: catalog.clone(),
                read: Instant::now(),
            },
        );
        let bytes = catalog
            .skills()
            .iter()
            .filter_map(|s| match &s.resources {
                SkillResources::Files(files) => Some(files.iter().map(|f| f.size).sum::<u64>()),
                _ => None,
            })
            .fold(0u64, u64::saturating_add);
        if bytes > MAX_PLUGIN_SKILL_BYTES {
            tracing::warn!(
                plugin,
                bytes,
                "its skills are not served: over the {MAX_PLUGIN_SKILL_BYTES} bytes a plugin may serve"
            );
            return None;
        }
        Some(catalog)
    }
}

impl McpServer {
    /// The plugins whose skills the caller of `context` may see: each one
    /// that offers it a tool and has skills, with its snapshot.
    async fn skill_plugins(
        &self,
        context: &RequestContext<RoleServer>,
        only: Option<&str>,
    ) -> Vec<(String, Arc<SkillCatalog>)> {
        let agent = self.agent(context);
        let offered: HashSet<String> = self
            .runtime
            .offered_tools(agent.as_deref(), None)
            .into_iter()
            .map(|t| t.plugin)
            .collect();
        let mut found = Vec::new();
        for plugin in self.runtime.plugins() {
            if only.is_some_and(|name| name != plugin.name) || !offered.contains(&plugin.name) {
                continue;
            }
            let Some(dir) = dir_of(&plugin) else { continue };
            if let Some(catalog) = self.skills.catalog(&plugin.name, &dir).await {
                found.push((plugin.name, catalog));
            }
        }
        found
    }

    /// Whether the caller of `context` may read `uri` of `plugin`'s (the
    /// policy's `resource` rules).
    fn may_read_skill(
        &self,
        plugin: &str,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> bool {
        let access = Access::Resource {
            uri: uri.to_owned(),
        };
        self.runtime
            .may_access(plugin, &access, self.agent(context).as_deref(), None)
    }

    /// `plugin`'s `skill` as the caller of `context` sees it: under the
    /// plugin's name, without the files it may not read; `None` when it
    /// may not read its `SKILL.md`.
    fn skill_as_seen(
        &self,
        plugin: &str,
        skill: Skill,
        context: &RequestContext<RoleServer>,
    ) -> Option<Skill> {
        let mut skill = skill_outward(plugin, skill);
        if !self.may_read_skill(plugin, &skill.uri, context) {
            return None;
        }
        if let SkillResources::Files(files) = &mut skill.resources {
            files.retain(|f| self.may_read_skill(plugin, &f.uri, context));
        }
        Some(skill)
    }

    /// The skills the caller of `context` may see (`skills/list`).
    pub(super) async fn list_skills_for(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> ListSkillsResult {
        let mut all = Vec::new();
        for (plugin, catalog) in self.skill_plugins(context, None).await {
            all.extend(
                catalog
                    .skills()
                    .into_iter()
                    .filter_map(|s| self.skill_as_seen(&plugin, s, context)),
            );
        }
        ListSkillsResult::with_all_items(all)
    }

    /// The skill at `uri`, when the caller of `context` may see it
    /// (`skills/get`; `-32602` otherwise).
    pub(super) async fn skill_for(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let (plugin, inner) = inward(uri).ok_or_else(|| unknown_skill(uri))?;
        if !self.may_read_skill(plugin, uri, context) {
            return Err(unknown_skill(uri));
        }
        for (name, catalog) in self.skill_plugins(context, Some(plugin)).await {
            if let Ok(mut found) = catalog.get_skill(&inner)
                && let Some(skill) = self.skill_as_seen(&name, found.skill, context)
            {
                found.skill = skill;
                return Ok(found);
            }
        }
        Err(unknown_skill(uri))
    }

    /// Each skill's `SKILL.md` the caller of `context` may read, for
    /// `resources/list`.
    pub(super) async fn skill_resources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Vec<Resource> {
        let mut all = Vec::new();
        for (plugin, catalog) in self.skill_plugins(context, None).await {
            all.extend(
                catalog
                    .resources()
                    .into_iter()
                    .map(|r| resource_outward(&plugin, r))
                    .filter(|r| self.may_read_skill(&plugin, &r.uri, context)),
            );
        }
        all
    }

    /// The file at `uri` of a plugin's skill, when the caller of `context`
    /// may read it; `None` when no plugin's skill has it (another source
    /// may).
    pub(super) async fn read_skill_file(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<ReadResourceResult> {
        let (plugin, inner) = inward(uri)?;
        if !self.may_read_skill(plugin, uri, context) {
            return None;
        }
        let (name, catalog) = self
            .skill_plugins(context, Some(plugin))
            .await
            .into_iter()
            .next()?;
        let mut read = catalog.read_resource(&inner)?;
        for contents in &mut read.contents {
            match contents {
                ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } => {
                    *uri = outward(&name, uri);
                }
                _ => {}
            }
        }
        Some(read)
    }

    /// The children of the directory `uri` of a plugin's skill
    /// (`resources/directory/read`; `-32602` when it is not one the caller
    /// may see).
    pub(super) async fn skill_directory(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        let not_one = || {
            McpError::invalid_params(
                format!("not a directory: {}", toolhost_text::line(uri, 300)),
                None,
            )
        };
        let (plugin, inner) = inward(uri).ok_or_else(not_one)?;
        if !self.may_read_skill(plugin, uri, context) {
            return Err(not_one());
        }
        let Some((name, catalog)) = self
            .skill_plugins(context, Some(plugin))
            .await
            .into_iter()
            .next()
        else {
            return Err(not_one());
        };
        let mut listed = catalog
            .read_resource_directory(&inner)
            .map_err(|_| not_one())?;
        listed.resources = std::mem::take(&mut listed.resources)
            .into_iter()
            .map(|r| resource_outward(&name, r))
            .filter(|r| self.may_read_skill(&name, &r.uri, context))
            .collect();
        Ok(listed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugins_skill_uris_are_under_its_name_and_back() {
        assert_eq!(
            outward("calc", "skill://arithmetic/SKILL.md"),
            "skill://calc/arithmetic/SKILL.md"
        );
        assert_eq!(
            inward("skill://calc/arithmetic/SKILL.md"),
            Some(("calc", "skill://arithmetic/SKILL.md".to_owned()))
        );
        for not_a_plugins in ["skill://calc", "skill:///x", "skill://calc/", "https://x/y"] {
            assert_eq!(inward(not_a_plugins), None, "{not_a_plugins}");
        }
    }
}
