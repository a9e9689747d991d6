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
//! - A caller sees only the skills of the plugins (and upstream servers)
//!   that offer it at least one tool (as a plugin's usage rules reach only
//!   such callers; a server with no tools at all is judged by the policy
//!   alone), and
//!   only those the policy lets it read (`Runtime::may_access`, a
//!   `resource` rule on the URI). For it, the others are not there:
//!   `skills/get` answers `-32602`, `resources/read` as for any unknown
//!   URI (`-32602` on 2026-07-28, `-32002` before).
//! - A plugin's folder is looked at again at most every [`REFRESH`]
//!   (its metadata only) and read again when it changed: an edit shows
//!   up without a reload. A folder over [`MAX_PLUGIN_SKILL_ENTRIES`]
//!   entries or [`MAX_PLUGIN_SKILL_BYTES`] bytes is refused from its
//!   metadata, before a byte of it is read.
//!
//! The gateway passes on the skills of its upstream servers too, their
//! URIs as the servers serve them (as for their other resources; a
//! plugin's skill wins a URI both have). Each is listed to a caller offered
//! one of that server's tools whom the policy lets read it (`resource` rules on the URI, the server's name as
//! the rule's `server`); a read goes to the server that listed the file,
//! through the runtime's steps, and its bytes are verified against that
//! listing before they are passed on (size, digest, and a `SKILL.md`'s
//! front matter, as `client/skills.rs` checks them): a server that lists
//! one file and serves another gets an error to the caller and a line in
//! the audit (`outcome = "skill-file-refused"`), never the bytes.
//! `resources/directory/read` of a folder of theirs goes to the server
//! that listed files under it, judged as a read of the folder, and passes
//! on only the entries it listed (files, and folders they are in) that
//! the caller may read.

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
use super::upstream::{UpstreamServer, Upstreams};

/// The scheme of a skill's URI.
const SCHEME: &str = "skill://";
/// How often a plugin's skills are read again from its folder, at most.
pub const REFRESH: Duration = Duration::from_secs(2);
/// The most bytes of skills one plugin serves (all its skills together);
/// a plugin with more serves none, and the log says why.
pub const MAX_PLUGIN_SKILL_BYTES: u64 = 64 << 20;

/// The most files of upstream servers' skills kept to verify reads
/// against (past it, a file listed later is not passed on).
const MAX_UPSTREAM_FILES: usize = 100_000;

/// The skills of one server's plugins, and what its upstream servers
/// last listed of theirs.
#[derive(Default)]
pub(crate) struct Skills {
    /// Each plugin's snapshot, by plugin name.
    held: Mutex<HashMap<String, Held>>,
    /// Each file of an upstream server's skill, by URI, as last listed.
    listed: Mutex<HashMap<String, Listed>>,
    /// Whether any plugin has skills, and when that was looked at (the
    /// server's capabilities are asked for often: never a file system walk
    /// each time).
    present: Mutex<Option<(Instant, bool)>>,
}

/// A file of an upstream server's skill, as its server listed it.
struct Listed {
    server: String,
    entry: rmcp::model::SkillResource,
    /// Its skill's front matter, when it is the skill's `SKILL.md`.
    front_matter: Option<rmcp::model::SkillFrontmatter>,
}

/// One plugin's skills, as last read.
struct Held {
    dir: PathBuf,
    /// `None`: its folder is over the bounds, or cannot be read.
    catalog: Option<Arc<SkillCatalog>>,
    /// What [`survey`] found when it was read.
    print: Option<u64>,
    /// When the folder was last looked at.
    read: Instant,
}

/// The most entries (files and folders) a plugin's skills folder may
/// have to be read at all: [`SKILL_FILE_LIMIT`](rmcp::handler::server::skill_catalog::SKILL_FILE_LIMIT)
/// files for each of 64 skills.
pub const MAX_PLUGIN_SKILL_ENTRIES: usize = 64 * 512;

/// A fingerprint of the skills folder `dir` (each entry's path, size and
/// time of change), from its metadata alone, without following links or
/// reading a byte; an error when it has more than
/// [`MAX_PLUGIN_SKILL_ENTRIES`] entries or [`MAX_PLUGIN_SKILL_BYTES`]
/// bytes of files (a plugin's folder is outside input: it is never read
/// into memory past the bounds), or its root cannot be listed. Hidden
/// entries are left out, as the catalog leaves them out.
fn survey(dir: &Path) -> Result<u64, String> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let (mut entries, mut bytes) = (0usize, 0u64);
    let mut todo = vec![dir.to_path_buf()];
    while let Some(folder) = todo.pop() {
        let listed =
            std::fs::read_dir(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        for entry in listed.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            entries += 1;
            if entries > MAX_PLUGIN_SKILL_ENTRIES {
                return Err(format!("more than {MAX_PLUGIN_SKILL_ENTRIES} entries"));
            }
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            entry.path().hash(&mut hasher);
            meta.len().hash(&mut hasher);
            meta.modified().ok().hash(&mut hasher);
            if meta.is_dir() {
                todo.push(entry.path());
            } else if meta.is_file() {
                bytes = bytes.saturating_add(meta.len());
                if bytes > MAX_PLUGIN_SKILL_BYTES {
                    return Err(format!("over {MAX_PLUGIN_SKILL_BYTES} bytes"));
                }
            }
        }
    }
    Ok(hasher.finish())
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

fn offers_skills(source: &dyn UpstreamServer) -> bool {
    source.capabilities().is_some_and(|c| c.supports_skills())
}

fn unknown_skill(uri: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown skill: {}", toolhost_text::line(uri, 300)),
        None,
    )
}

impl Skills {
    /// Whether any plugin has skills, or any upstream server offers some
    /// (looked at again at most every [`REFRESH`]; an upstream server's
    /// capabilities are kept by its source: no request).
    pub(crate) fn any(&self, runtime: &Runtime, upstreams: &dyn Upstreams) -> bool {
        let mut present = self.present.lock();
        if let Some((at, any)) = *present
            && at.elapsed() < REFRESH
        {
            return any;
        }
        let any = runtime.plugins().iter().any(|p| dir_of(p).is_some())
            || upstreams
                .of(runtime)
                .iter()
                .any(|u| offers_skills(u.as_ref()));
        *present = Some((Instant::now(), any));
        any
    }

    /// Keeps what `server` now lists of its skills' files (forgetting what
    /// it listed before).
    fn record(&self, server: &str, skills: &[Skill]) {
        let mut listed = self.listed.lock();
        listed.retain(|_, l| l.server != server);
        for skill in skills {
            let SkillResources::Files(files) = &skill.resources else {
                continue;
            };
            for file in files {
                if listed.len() >= MAX_UPSTREAM_FILES {
                    tracing::warn!(
                        server,
                        "more skill files than the {MAX_UPSTREAM_FILES} kept: the rest are not passed on"
                    );
                    return;
                }
                listed.insert(
                    file.uri.clone(),
                    Listed {
                        server: server.to_owned(),
                        entry: file.clone(),
                        front_matter: (file.uri == skill.uri).then(|| skill.frontmatter.clone()),
                    },
                );
            }
        }
    }

    /// The server that listed the file `uri`, with its entry and, for a
    /// `SKILL.md`, its front matter.
    fn listed(
        &self,
        uri: &str,
    ) -> Option<(
        String,
        rmcp::model::SkillResource,
        Option<rmcp::model::SkillFrontmatter>,
    )> {
        self.listed
            .lock()
            .get(uri)
            .map(|l| (l.server.clone(), l.entry.clone(), l.front_matter.clone()))
    }

    /// The server that listed a file under the directory `uri`
    /// (`skill://pdf/` or `skill://pdf/references`), if one did.
    fn lister_of_directory(&self, uri: &str) -> Option<String> {
        let dir = format!("{}/", uri.trim_end_matches('/'));
        self.listed
            .lock()
            .iter()
            .find(|(file, _)| file.starts_with(&dir))
            .map(|(_, l)| l.server.clone())
    }

    /// Whether `uri` is a file `server` listed, or a directory one of its
    /// listed files is under.
    fn lists_entry(&self, server: &str, uri: &str) -> bool {
        let dir = format!("{}/", uri.trim_end_matches('/'));
        self.listed
            .lock()
            .iter()
            .any(|(file, l)| l.server == server && (file == uri || file.starts_with(&dir)))
    }

    /// `plugin`'s snapshot. Its folder is looked at again when the last
    /// look is older than [`REFRESH`] (its metadata only, off the async
    /// threads, [`survey`]), and read again only when it changed; `None`
    /// when it has no skills, or is over the bounds.
    async fn catalog(&self, plugin: &str, dir: &Path) -> Option<Arc<SkillCatalog>> {
        let kept = {
            let held = self.held.lock();
            held.get(plugin)
                .filter(|h| h.dir == dir)
                .map(|h| (h.catalog.clone(), h.print, h.read.elapsed() < REFRESH))
        };
        let (previous, print) = match kept {
            Some((catalog, _, true)) => return catalog,
            Some((catalog, print, false)) => (catalog, print),
            None => (None, None),
        };
        let from = dir.to_owned();
        let looked = tokio::task::spawn_blocking(move || {
            let now = survey(&from)?;
            if previous.is_some() && print == Some(now) {
                return Ok((now, previous));
            }
            SkillCatalog::from_dir(&from)
                .map(|c| (now, Some(Arc::new(c))))
                .map_err(|e| e.to_string())
        })
        .await;
        let (print, catalog) = match looked {
            Ok(Ok(found)) => found,
            Ok(Err(why)) => {
                tracing::warn!(plugin, "its skills are not served: {why}");
                (0, None)
            }
            Err(_) => (0, None),
        };
        self.held.lock().insert(
            plugin.to_owned(),
            Held {
                dir: dir.to_owned(),
                catalog: catalog.clone(),
                print: catalog.is_some().then_some(print),
                read: Instant::now(),
            },
        );
        catalog
    }
}

/// The sources (plugins, upstream servers) whose skills a caller may see
/// before the policy's `resource` rules: each one that offers it a tool,
/// and one with no tools at all (a server of skills alone). A source all
/// of whose tools the caller is denied shows it none of its skills.
struct SkillSources {
    offered: HashSet<String>,
    with_tools: HashSet<String>,
}

impl SkillSources {
    fn admit(&self, source: &str) -> bool {
        self.offered.contains(source) || !self.with_tools.contains(source)
    }
}

impl McpServer {
    /// [`SkillSources`] for the caller of `context`.
    fn skill_sources(&self, context: &RequestContext<RoleServer>) -> SkillSources {
        let agent = self.agent(context);
        let of = |tools: Vec<toolhost_runtime::ToolInfo>| -> HashSet<String> {
            tools.into_iter().map(|t| t.plugin).collect()
        };
        SkillSources {
            offered: of(self.runtime.offered_tools(agent.as_deref(), None)),
            with_tools: of(self.runtime.tools()),
        }
    }

    /// The plugins whose skills the caller of `context` may see: each one
    /// [`SkillSources`] admits that has skills, with its snapshot.
    async fn skill_plugins(
        &self,
        context: &RequestContext<RoleServer>,
        only: Option<&str>,
    ) -> Vec<(String, Arc<SkillCatalog>)> {
        let sources = self.skill_sources(context);
        let mut found = Vec::new();
        for plugin in self.runtime.plugins() {
            if only.is_some_and(|name| name != plugin.name) || !sources.admit(&plugin.name) {
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
        self.seen(plugin, skill_outward(plugin, skill), context)
    }

    /// `source`'s `skill` as the caller of `context` sees it: without the
    /// files it may not read; `None` when it may not read its `SKILL.md`.
    fn seen(
        &self,
        source: &str,
        mut skill: Skill,
        context: &RequestContext<RoleServer>,
    ) -> Option<Skill> {
        if !self.may_read_skill(source, &skill.uri, context) {
            return None;
        }
        if let SkillResources::Files(files) = &mut skill.resources {
            files.retain(|f| self.may_read_skill(source, &f.uri, context));
        }
        Some(skill)
    }

    /// The upstream servers' skills the caller of `context` may see, each
    /// server [`SkillSources`] admits asked now (what they list is kept,
    /// to verify reads).
    async fn upstream_skills(&self, context: &RequestContext<RoleServer>) -> Vec<Skill> {
        let sources = self.skill_sources(context);
        let mut all = Vec::new();
        for source in self.upstreams.of(&self.runtime) {
            if !offers_skills(source.as_ref()) || !sources.admit(source.name()) {
                continue;
            }
            let name = source.name().to_owned();
            match source.skills().await {
                Ok(listed) => {
                    self.skills.record(&name, &listed);
                    all.extend(
                        listed
                            .into_iter()
                            .filter_map(|s| self.seen(&name, s, context)),
                    );
                }
                Err(e) => tracing::warn!(server = %name, "skills/list failed: {}", e.message),
            }
        }
        all
    }

    /// What `find` finds in what the upstream servers listed of their
    /// skills; when nothing (not listed yet, or listed before a change),
    /// they are asked again and it looks once more.
    async fn in_upstream_listing<T>(
        &self,
        context: &RequestContext<RoleServer>,
        find: impl Fn(&Skills) -> Option<T>,
    ) -> Option<T> {
        if let Some(found) = find(&self.skills) {
            return Some(found);
        }
        let _ = self.upstream_skills(context).await;
        find(&self.skills)
    }

    /// The upstream server `server`, when the caller of `context` may see
    /// its skills and read `uri` of them.
    fn upstream_for_skill(
        &self,
        server: &str,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<Arc<dyn UpstreamServer>> {
        if !self.skill_sources(context).admit(server) || !self.may_read_skill(server, uri, context)
        {
            return None;
        }
        self.upstreams
            .of(&self.runtime)
            .into_iter()
            .find(|s| s.name() == server)
    }

    /// An upstream server's skill file `uri`, read through the runtime's
    /// steps and verified against its listing; `None` when no upstream
    /// server lists such a file (another source may have it).
    pub(super) async fn read_upstream_skill_file(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<ReadResourceResult, McpError>> {
        if !uri.starts_with(SCHEME) {
            return None;
        }
        let (server, entry, front_matter) = self
            .in_upstream_listing(context, |skills| skills.listed(uri))
            .await?;
        let source = self
            .upstreams
            .of(&self.runtime)
            .into_iter()
            .find(|s| s.name() == server)?;
        if !self.skill_sources(context).admit(&server)
            || !self.may_read_skill(&server, uri, context)
        {
            return Some(Err(McpError::resource_not_found(
                "Resource not found",
                Some(serde_json::json!({ "uri": toolhost_text::line(uri, 300) })),
            )));
        }
        let access = Access::Resource {
            uri: uri.to_owned(),
        };
        let result = match self
            .run_access(source.as_ref(), &access, context, None)
            .await
        {
            Ok(result) => result,
            Err(e) => return Some(Err(e)),
        };
        let verified = crate::skill_files::bytes_of(&result, uri)
            .map_err(|why| {
                McpError::internal_error(
                    format!(
                        "the upstream server `{server}` did not serve {}: {why}",
                        toolhost_text::line(uri, 300)
                    ),
                    None,
                )
            })
            .and_then(|bytes| {
                crate::skill_files::verify_file(&entry, &bytes, front_matter.as_ref()).map_err(
                    |e| {
                        tracing::warn!(
                            target: "toolhost::audit",
                            server = %toolhost_runtime::shown::shown_name(&server),
                            uri = %toolhost_text::line(uri, 300),
                            outcome = "skill-file-refused",
                            "an upstream server's skill file is not what it listed: {e}"
                        );
                        McpError::internal_error(
                            format!("the upstream server `{server}`'s {e}"),
                            None,
                        )
                    },
                )
            });
        Some(verified.map(|()| super::resources::read_result(uri, result)))
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
        // A plugin's skill wins a URI an upstream server's has too.
        let plugins: HashSet<String> = all.iter().map(|s| s.uri.clone()).collect();
        all.extend(
            self.upstream_skills(context)
                .await
                .into_iter()
                .filter(|s| !plugins.contains(&s.uri)),
        );
        ListSkillsResult::with_all_items(all)
    }

    /// The skill at `uri`, when the caller of `context` may see it
    /// (`skills/get`; `-32602` otherwise).
    pub(super) async fn skill_for(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        if let Some((plugin, inner)) = inward(uri)
            && self.may_read_skill(plugin, uri, context)
        {
            for (name, catalog) in self.skill_plugins(context, Some(plugin)).await {
                if let Ok(mut found) = catalog.get_skill(&inner)
                    && let Some(skill) = self.skill_as_seen(&name, found.skill, context)
                {
                    found.skill = skill;
                    return Ok(found);
                }
            }
        }
        self.upstream_skills(context)
            .await
            .into_iter()
            .find(|s| s.uri == uri)
            .map(GetSkillResult::new)
            .ok_or_else(|| unknown_skill(uri))
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

    /// The children of the directory `uri` of an upstream server's skill,
    /// as that server lists them through the runtime's steps (judged as a
    /// read of `uri`), less the entries it did not list among its skills'
    /// files and those the caller may not read; `None` when no upstream
    /// server the caller may see listed files under it.
    async fn upstream_directory(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<ReadResourceDirectoryResult, McpError>> {
        if !uri.starts_with(SCHEME) {
            return None;
        }
        let server = self
            .in_upstream_listing(context, |skills| skills.lister_of_directory(uri))
            .await?;
        let source = self.upstream_for_skill(&server, uri, context)?;
        let access = Access::Directory {
            uri: uri.to_owned(),
        };
        let result = match self
            .run_access(source.as_ref(), &access, context, None)
            .await
        {
            Ok(result) => result,
            Err(e) => return Some(Err(e)),
        };
        let listed: ReadResourceDirectoryResult =
            match result.structured.map(serde_json::from_value) {
                Some(Ok(listed)) => listed,
                _ => {
                    return Some(Err(McpError::internal_error(
                        format!(
                            "the upstream server `{server}` did not list {}",
                            toolhost_text::line(uri, 300)
                        ),
                        None,
                    )));
                }
            };
        let resources = listed
            .resources
            .into_iter()
            .filter(|r| {
                self.skills.lists_entry(&server, &r.uri)
                    && self.may_read_skill(&server, &r.uri, context)
            })
            .collect();
        Some(Ok(ReadResourceDirectoryResult::with_all_items(resources)))
    }

    /// The children of the directory `uri` of a plugin's skill, or of an
    /// upstream server's (`resources/directory/read`; `-32602` when it is
    /// not one the caller may see).
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
        let plugin = inward(uri).filter(|(plugin, _)| self.may_read_skill(plugin, uri, context));
        let found = match plugin {
            Some((plugin, inner)) => self
                .skill_plugins(context, Some(plugin))
                .await
                .into_iter()
                .next()
                .map(|found| (found, inner)),
            None => None,
        };
        let Some(((name, catalog), inner)) = found else {
            return self
                .upstream_directory(uri, context)
                .await
                .ok_or_else(not_one)?;
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
    fn a_skills_folder_over_its_bounds_is_refused_from_its_metadata_and_an_edit_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("big");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: big\ndescription: d\n---\n",
        )
        .unwrap();
        let first = survey(dir.path()).unwrap();
        assert_eq!(survey(dir.path()).unwrap(), first, "nothing changed");
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: big\ndescription: e, longer\n---\n",
        )
        .unwrap();
        assert_ne!(survey(dir.path()).unwrap(), first, "an edit is seen");
        // Sparse files: the bytes are never there, only their length.
        for i in 0..5u64 {
            let f = std::fs::File::create(skill.join(format!("part{i}.bin"))).unwrap();
            f.set_len(15 << 20).unwrap();
        }
        let over = survey(dir.path()).unwrap_err();
        assert!(over.contains("bytes"), "{over}");
        // Hidden entries are not counted, as the catalog does not serve them.
        let many = tempfile::tempdir().unwrap();
        let hidden = many.path().join(".cache");
        std::fs::create_dir_all(&hidden).unwrap();
        let big = std::fs::File::create(hidden.join("blob")).unwrap();
        big.set_len(MAX_PLUGIN_SKILL_BYTES + 1).unwrap();
        assert!(survey(many.path()).is_ok());
        for i in 0..=MAX_PLUGIN_SKILL_ENTRIES {
            std::fs::File::create(many.path().join(format!("f{i}"))).unwrap();
        }
        let over = survey(many.path()).unwrap_err();
        assert!(over.contains("entries"), "{over}");
    }

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
