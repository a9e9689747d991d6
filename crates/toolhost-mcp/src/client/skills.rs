//! The skills of an upstream MCP server (SEP-2640), as a host loads them:
//! [`list`] and [`load`].
//!
//! Listing reads `skills/list` and nothing else: no file of a skill is
//! read before the skill is loaded (the spec's "no prefetch"). Loading a
//! skill reads its files through the runtime's steps (each a
//! `resources/read` of that server, so the policy's `resource` rules,
//! the hooks and the audit apply) and verifies each against the listing
//! before it is used:
//!
//! - the size first, then the `sha256:` digest (rmcp's
//!   [`SkillResource::verify`]);
//! - the `SKILL.md`'s YAML front matter, field by field, against the
//!   listing's: a server that lists one description and serves another
//!   is refused, whatever the digest says;
//! - a skill that lists its files as `dynamic` has nothing to verify
//!   against and is not loaded; one over [`MAX_SKILL_FILES`] files or
//!   [`MAX_SKILL_BYTES`] bytes (as listed) is refused before any read.
//!
//! The first file that fails stops the load: no other file is read, and
//! nothing of the skill is used. `SKILL.md` is read first.
//!
//! ```no_run
//! # async fn demo(runtime: toolhost_runtime::Runtime) -> Result<(), toolhost_mcp::client::SkillError> {
//! let skills = toolhost_mcp::client::skills::list(&runtime, "docs").await?;
//! let loaded = toolhost_mcp::client::skills::load(
//!     &runtime,
//!     "docs",
//!     &skills[0].uri,
//!     toolhost_runtime::CallContext::new(),
//! )
//! .await?;
//! assert_eq!(loaded.files[0].path, "SKILL.md");
//! # Ok(()) }
//! ```

use std::sync::Arc;

use rmcp::model::{Skill, SkillResource, SkillResources};
use toolhost_runtime::{Access, CallContext, Runtime};

use super::McpSource;
pub use crate::skill_files::SkillError;
use crate::skill_files::{bytes_of, verify_file};

/// The bounds of a skill to be loaded.
pub use crate::skill_files::{MAX_SKILL_BYTES, MAX_SKILL_FILES};

/// A skill loaded: every file it lists, verified, `SKILL.md` first.
#[derive(Debug, Clone)]
pub struct LoadedSkill {
    /// Its listing.
    pub skill: Skill,
    /// Its files.
    pub files: Vec<SkillFile>,
}

/// One file of a [`LoadedSkill`].
#[derive(Debug, Clone)]
pub struct SkillFile {
    /// Its URI.
    pub uri: String,
    /// Its path inside the skill's folder (`/`-separated, never `..`).
    pub path: String,
    /// Its bytes, as verified.
    pub bytes: Vec<u8>,
}

/// The MCP server `server` among `runtime`'s sources.
fn source(runtime: &Runtime, server: &str) -> Result<Arc<McpSource>, SkillError> {
    crate::gateway::mcp_sources(runtime)
        .into_iter()
        .find(|s| toolhost_runtime::ToolSource::name(s.as_ref()) == server)
        .ok_or_else(|| SkillError::NoServer(toolhost_text::line(server, 100)))
}

/// The skills `server` lists (`skills/list`, every page, bounded); no
/// file of any is read.
pub async fn list(runtime: &Runtime, server: &str) -> Result<Vec<Skill>, SkillError> {
    let source = source(runtime, server)?;
    let _ = source.connected().await;
    source.offered().skills(server).await
}

/// Loads the skill whose `SKILL.md` is `uri` from `server`: every file it
/// lists, each read through the runtime's steps under `cx` and verified
/// (see the module docs).
pub async fn load(
    runtime: &Runtime,
    server: &str,
    uri: &str,
    cx: CallContext,
) -> Result<LoadedSkill, SkillError> {
    let skill = list(runtime, server)
        .await?
        .into_iter()
        .find(|s| s.uri == uri)
        .ok_or_else(|| SkillError::Unknown {
            server: server.to_owned(),
            uri: toolhost_text::line(uri, 300),
        })?;
    let files = match &skill.resources {
        SkillResources::Files(files) => files.clone(),
        _ => return Err(SkillError::Dynamic(skill.uri.clone())),
    };
    let bytes = files.iter().map(|f| f.size).fold(0u64, u64::saturating_add);
    if files.len() > MAX_SKILL_FILES || bytes > MAX_SKILL_BYTES {
        return Err(SkillError::TooLarge {
            uri: skill.uri.clone(),
            files: files.len(),
            bytes,
        });
    }
    let folder = skill.uri.strip_suffix("SKILL.md").unwrap_or_default();
    let listing = |why: String| SkillError::Listing {
        uri: skill.uri.clone(),
        why,
    };
    let manifest = files
        .iter()
        .find(|f| f.uri == skill.uri)
        .ok_or_else(|| listing("its files leave out its SKILL.md".into()))?;
    // SKILL.md first, then the others in the listing's order.
    let order = std::iter::once(manifest).chain(files.iter().filter(|f| f.uri != skill.uri));
    let mut loaded = Vec::with_capacity(files.len());
    for file in order {
        let path = inside(folder, &file.uri).ok_or_else(|| {
            listing(format!(
                "`{}` is not a file inside it",
                toolhost_text::line(&file.uri, 300)
            ))
        })?;
        let bytes = read(runtime, server, file, cx.clone()).await?;
        let manifest = (file.uri == skill.uri).then_some(&skill.frontmatter);
        verify_file(file, &bytes, manifest)?;
        loaded.push(SkillFile {
            uri: file.uri.clone(),
            path,
            bytes,
        });
    }
    Ok(LoadedSkill {
        skill,
        files: loaded,
    })
}

/// The bytes `server` serves for `file`, read through the runtime.
async fn read(
    runtime: &Runtime,
    server: &str,
    file: &SkillResource,
    cx: CallContext,
) -> Result<Vec<u8>, SkillError> {
    let failed = |message: String| SkillError::Read {
        uri: toolhost_text::line(&file.uri, 300),
        message: toolhost_text::line(&message, 500),
    };
    let access = Access::Resource {
        uri: file.uri.clone(),
    };
    let result = runtime
        .access(server, &access, cx)
        .await
        .map_err(|e| failed(e.to_string()))?;
    bytes_of(&result, &file.uri).map_err(failed)
}

/// `uri`'s path inside the skill folder `folder` (`skill://…/`): `None`
/// when it is not inside, or its path has an empty, `.` or `..` segment
/// (a path a loader could be made to write outside the skill's folder).
fn inside(folder: &str, uri: &str) -> Option<String> {
    let path = uri.strip_prefix(folder).filter(|_| !folder.is_empty())?;
    let fine = !path.is_empty()
        && path.len() <= 1024
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != ".." && !s.contains(['\\', '\0', ':']));
    fine.then(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_outside_the_skills_folder_has_no_path() {
        let folder = "skill://pdf/";
        assert_eq!(
            inside(folder, "skill://pdf/SKILL.md").as_deref(),
            Some("SKILL.md")
        );
        assert_eq!(
            inside(folder, "skill://pdf/references/FORMS.md").as_deref(),
            Some("references/FORMS.md")
        );
        for outside in [
            "skill://pdf/../etc/passwd",
            "skill://pdf//x",
            "skill://pdf/./x",
            "skill://other/SKILL.md",
            "skill://pdf/",
            "skill://pdf/a\\b",
        ] {
            assert_eq!(inside(folder, outside), None, "{outside}");
        }
    }
}
