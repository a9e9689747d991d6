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

use base64::Engine;
use rmcp::model::{Skill, SkillFrontmatter, SkillIntegrityError, SkillResource, SkillResources};
use serde_json::Value;
use toolhost_runtime::{Access, CallContext, Runtime};

use super::McpSource;

/// The most files a skill may list to be loaded (as the spec bounds it).
pub const MAX_SKILL_FILES: usize = 512;
/// The most bytes a skill may list to be loaded, all its files together.
pub const MAX_SKILL_BYTES: u64 = 16 << 20;

/// Why a server's skills could not be listed, or a skill loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// No MCP server of that name is configured.
    #[error("no MCP server `{0}` is configured")]
    NoServer(String),
    /// The server does not declare the skills extension (or is not
    /// connected).
    #[error("the MCP server `{0}` offers no skills")]
    NotOffered(String),
    /// The server's answer to `skills/list` was an error.
    #[error("the MCP server `{server}` did not list its skills: {message}")]
    List {
        /// The server.
        server: String,
        /// Its error.
        message: String,
    },
    /// The server lists no skill at that URI.
    #[error("the MCP server `{server}` lists no skill `{uri}`")]
    Unknown {
        /// The server.
        server: String,
        /// The URI asked for.
        uri: String,
    },
    /// The skill's files are `dynamic`: nothing to verify them against.
    #[error(
        "the skill `{0}` lists its files as dynamic: with no digests to check, it is not loaded"
    )]
    Dynamic(String),
    /// The skill lists more files or bytes than a skill may have.
    #[error(
        "the skill `{uri}` lists {files} files and {bytes} bytes, over the {MAX_SKILL_FILES} \
         files and {MAX_SKILL_BYTES} bytes a skill may have: not loaded"
    )]
    TooLarge {
        /// The skill.
        uri: String,
        /// How many files it lists.
        files: usize,
        /// How many bytes they add up to (saturating).
        bytes: u64,
    },
    /// The listing has no entry for the skill's own `SKILL.md`, or names
    /// a file outside the skill's folder.
    #[error("the skill `{uri}` is listed wrongly: {why}")]
    Listing {
        /// The skill.
        uri: String,
        /// What is wrong.
        why: String,
    },
    /// A read was refused (by the policy, a hook) or failed.
    #[error("reading `{uri}` failed: {message}")]
    Read {
        /// The file.
        uri: String,
        /// Why.
        message: String,
    },
    /// A file's bytes are not what the listing says (size or digest).
    #[error("{0}: not loaded")]
    Integrity(SkillIntegrityError),
    /// The `SKILL.md`'s front matter is not the listing's.
    #[error("the front matter of `{uri}` is not the listing's ({field}): not loaded")]
    FrontMatter {
        /// The `SKILL.md`.
        uri: String,
        /// The first field that differs, or why it cannot be read.
        field: String,
    },
}

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

/// The bytes of `uri` in a read's `result` (its text, or its blob
/// decoded).
pub(crate) fn bytes_of(
    result: &toolhost_runtime::ToolResult,
    uri: &str,
) -> Result<Vec<u8>, String> {
    use toolhost_content::ResourceContents;
    for block in &result.content {
        let toolhost_content::Content::Resource(embedded) = block else {
            continue;
        };
        match &embedded.resource {
            ResourceContents::Text { uri: of, text, .. } if of == uri => {
                return Ok(text.as_bytes().to_vec());
            }
            ResourceContents::Blob { uri: of, blob, .. } if of == uri => {
                return base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .map_err(|e| format!("its contents are not base64: {e}"));
            }
            _ => {}
        }
    }
    Err("the answer has no contents for it".into())
}

/// Whether `bytes` are the file `file` lists: its size, its digest, and,
/// for a `SKILL.md` (`front_matter`: the listing's), its front matter.
pub(crate) fn verify_file(
    file: &SkillResource,
    bytes: &[u8],
    front_matter: Option<&SkillFrontmatter>,
) -> Result<(), SkillError> {
    file.verify(bytes).map_err(SkillError::Integrity)?;
    match front_matter {
        Some(listed) => same_front_matter(&file.uri, bytes, listed),
        None => Ok(()),
    }
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

/// Whether `bytes`, a `SKILL.md`, has `listed` as its front matter, field
/// by field.
fn same_front_matter(uri: &str, bytes: &[u8], listed: &SkillFrontmatter) -> Result<(), SkillError> {
    let refused = |field: String| SkillError::FrontMatter {
        uri: toolhost_text::line(uri, 300),
        field,
    };
    let text = std::str::from_utf8(bytes).map_err(|_| refused("it is not UTF-8".into()))?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let yaml = front_matter(text).ok_or_else(|| refused("it has no front matter".into()))?;
    let read: Value = yaml_serde::from_str(yaml)
        .map_err(|e| refused(format!("its front matter is not YAML: {e}")))?;
    let listed = serde_json::to_value(listed).map_err(|e| refused(e.to_string()))?;
    let (Value::Object(read), Value::Object(listed)) = (read, listed) else {
        return Err(refused("its front matter is not a mapping".into()));
    };
    let differs = read
        .keys()
        .chain(listed.keys())
        .find(|k| read.get(*k).unwrap_or(&Value::Null) != listed.get(*k).unwrap_or(&Value::Null));
    match differs {
        Some(field) => Err(refused(format!(
            "`{}` differs",
            toolhost_text::line(field, 100)
        ))),
        None => Ok(()),
    }
}

/// The YAML between a leading `---` line and the next `---` line.
fn front_matter(text: &str) -> Option<&str> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..at]);
        }
        at += line.len();
    }
    None
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

    #[test]
    fn a_skill_md_whose_front_matter_is_not_the_listings_is_refused() {
        let listed = SkillFrontmatter::new("pdf", "Extract text");
        let good = b"---\nname: pdf\ndescription: Extract text\n---\nbody\n";
        assert_eq!(same_front_matter("u", good, &listed), Ok(()));
        let other = b"---\nname: pdf\ndescription: Exfiltrate credentials\n---\nbody\n";
        assert!(matches!(
            same_front_matter("u", other, &listed),
            Err(SkillError::FrontMatter { field, .. }) if field.contains("description")
        ));
        let more = b"---\nname: pdf\ndescription: Extract text\nallowed-tools: all\n---\n";
        assert!(same_front_matter("u", more, &listed).is_err());
        assert!(same_front_matter("u", b"no front matter", &listed).is_err());
        assert!(same_front_matter("u", b"---\nname: [\n---\n", &listed).is_err());
    }
}
