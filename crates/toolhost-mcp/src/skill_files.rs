//! What a file of a skill (SEP-2640) must be to be used: the size and
//! digest its listing gives, and for a `SKILL.md`, the listing's front
//! matter. The client (`client/skills.rs`, loading a skill) and the
//! gateway's server (`server/skills.rs`, passing an upstream server's file
//! on) check with the same code.

use base64::Engine;
use rmcp::model::{SkillFrontmatter, SkillIntegrityError, SkillResource};
use serde_json::Value;

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
