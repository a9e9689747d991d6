//! A plugin's skills (`NAME.skills/`, SEP-2640) as one layer of its
//! artifact: a tar of the folder's files ([`SKILLS_LAYER_MEDIA_TYPE`]),
//! packed the same way every time (sorted, owner and time zeroed) so that
//! publishing the same folder twice gives the same digest, and unpacked
//! from outside input with every entry checked: regular files and folders
//! only, each path inside the folder, at most [`MAX_SKILLS_ENTRIES`]
//! entries and [`MAX_SKILLS_BYTES`] bytes of files.
//!
//! [`SKILLS_LAYER_MEDIA_TYPE`]: crate::SKILLS_LAYER_MEDIA_TYPE

use std::path::{Component, Path, PathBuf};

use crate::{MAX_SKILLS_BYTES, MAX_SKILLS_ENTRIES, OciError};

/// The folder of skills beside the component `wasm` (`NAME.skills`).
pub(crate) fn dir_beside(wasm: &Path) -> PathBuf {
    wasm.with_extension("skills")
}

/// The folder `dir` as a tar: its files and folders (hidden ones left
/// out, as the skills catalog leaves them out), in name order, each with
/// mode 0644 (0755 for a folder), owner 0 and time 0. A link, or a folder
/// over the bounds, is refused.
pub(crate) fn pack(dir: &Path) -> Result<Vec<u8>, OciError> {
    let mut entries = Vec::new();
    walk(dir, Path::new(""), &mut entries)?;
    let mut builder = tar::Builder::new(Vec::new());
    let mut bytes: u64 = 0;
    for (relative, is_dir) in entries {
        let path = dir.join(&relative);
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if is_dir {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            builder
                .append_data(&mut header, &relative, std::io::empty())
                .map_err(|e| OciError::io(&path, e))?;
        } else {
            let data = std::fs::read(&path).map_err(|e| OciError::io(&path, e))?;
            bytes = bytes.saturating_add(data.len() as u64);
            if bytes > MAX_SKILLS_BYTES {
                return Err(OciError::TooLarge {
                    what: dir.display().to_string(),
                    size: bytes,
                    limit: MAX_SKILLS_BYTES,
                });
            }
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(data.len() as u64);
            builder
                .append_data(&mut header, &relative, data.as_slice())
                .map_err(|e| OciError::io(&path, e))?;
        }
    }
    builder.into_inner().map_err(|e| OciError::io(dir, e))
}

/// Every entry under `dir`/`at`, folders before what they hold, in name
/// order; at most [`MAX_SKILLS_ENTRIES`]; a link is refused.
fn walk(dir: &Path, at: &Path, entries: &mut Vec<(PathBuf, bool)>) -> Result<(), OciError> {
    let here = dir.join(at);
    let mut names: Vec<_> = std::fs::read_dir(&here)
        .map_err(|e| OciError::io(&here, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| OciError::io(&here, e))?;
    names.sort_by_key(std::fs::DirEntry::file_name);
    for entry in names {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let relative = at.join(&name);
        let kind = entry
            .file_type()
            .map_err(|e| OciError::io(&entry.path(), e))?;
        if entries.len() >= MAX_SKILLS_ENTRIES {
            return Err(OciError::TooLarge {
                what: format!("{} (entries)", dir.display()),
                size: entries.len() as u64 + 1,
                limit: MAX_SKILLS_ENTRIES as u64,
            });
        }
        if kind.is_dir() {
            entries.push((relative.clone(), true));
            walk(dir, &relative, entries)?;
        } else if kind.is_file() {
            entries.push((relative, false));
        } else {
            return Err(OciError::NotAPlugin {
                reference: entry.path().display().to_string(),
                message: "a skill's file is a link or a special file: only files and folders \
                          are published"
                    .into(),
            });
        }
    }
    Ok(())
}

/// Checks every entry of the skills tar `archive` (outside input) as
/// [`unpack`] does, writing nothing: what [`fetch`](crate::fetch) does
/// before it hands the plugin over.
pub(crate) fn check(archive: &Path, reference: &str) -> Result<(), OciError> {
    walk_archive(archive, None, reference)
}

/// Unpacks the skills tar `archive` (outside input) into the new folder
/// `into`, checking every entry first: a folder or a regular file, its
/// path relative and inside (no `..`, no root), within the bounds.
pub(crate) fn unpack(archive: &Path, into: &Path, reference: &str) -> Result<(), OciError> {
    std::fs::create_dir_all(into).map_err(|e| OciError::io(into, e))?;
    walk_archive(archive, Some(into), reference)
}

/// Each entry of `archive` checked, and unpacked into `into` if given.
fn walk_archive(archive: &Path, into: Option<&Path>, reference: &str) -> Result<(), OciError> {
    let refused = |message: String| OciError::NotAPlugin {
        reference: reference.to_owned(),
        message: format!("its skills layer {message}"),
    };
    let file = std::fs::File::open(archive).map_err(|e| OciError::io(archive, e))?;
    let mut tar = tar::Archive::new(file);
    tar.set_preserve_permissions(false);
    tar.set_preserve_mtime(false);
    tar.set_unpack_xattrs(false);
    let (mut count, mut bytes) = (0usize, 0u64);
    let entries = tar
        .entries()
        .map_err(|e| refused(format!("is not a tar: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| refused(format!("is not a tar: {e}")))?;
        count += 1;
        if count > MAX_SKILLS_ENTRIES {
            return Err(refused(format!(
                "has more than {MAX_SKILLS_ENTRIES} entries"
            )));
        }
        let path = entry
            .path()
            .map_err(|e| refused(format!("has an entry without a path: {e}")))?
            .into_owned();
        let inside = !path.as_os_str().is_empty()
            && path
                .components()
                .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !inside {
            return Err(refused(format!(
                "has an entry outside its folder: `{}`",
                toolhost_text::line(&path.display().to_string(), 200)
            )));
        }
        match entry.header().entry_type() {
            tar::EntryType::Directory => {}
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                bytes = bytes.saturating_add(entry.size());
                if bytes > MAX_SKILLS_BYTES {
                    return Err(OciError::TooLarge {
                        what: "the skills layer's files".into(),
                        size: bytes,
                        limit: MAX_SKILLS_BYTES,
                    });
                }
            }
            other => {
                return Err(refused(format!(
                    "has `{}`, a {other:?} entry: only files and folders are installed",
                    toolhost_text::line(&path.display().to_string(), 200)
                )));
            }
        }
        let Some(into) = into else { continue };
        let unpacked = entry
            .unpack_in(into)
            .map_err(|e| OciError::io(&into.join(&path), e))?;
        if !unpacked {
            return Err(refused(format!(
                "has an entry outside its folder: `{}`",
                toolhost_text::line(&path.display().to_string(), 200)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) {
        std::fs::create_dir_all(root.join("pdf/references")).unwrap();
        std::fs::write(root.join("pdf/SKILL.md"), "---\nname: pdf\n---\nHi\n").unwrap();
        std::fs::write(root.join("pdf/references/FORMS.md"), "forms").unwrap();
        std::fs::write(root.join(".hidden"), "no").unwrap();
    }

    #[test]
    fn a_folder_packs_the_same_every_time_and_unpacks_to_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        let skills = dir.path().join("calc.skills");
        tree(&skills);
        let once = pack(&skills).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(skills.join("pdf/SKILL.md"), "---\nname: pdf\n---\nHi\n").unwrap();
        assert_eq!(pack(&skills).unwrap(), once, "the same digest each time");
        let archive = dir.path().join("skills.tar");
        std::fs::write(&archive, &once).unwrap();
        let into = dir.path().join("out");
        unpack(&archive, &into, "test").unwrap();
        assert_eq!(
            std::fs::read_to_string(into.join("pdf/references/FORMS.md")).unwrap(),
            "forms"
        );
        assert!(
            !into.join(".hidden").exists(),
            "hidden entries are left out"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_link_in_the_folder_is_not_published() {
        let dir = tempfile::tempdir().unwrap();
        let skills = dir.path().join("calc.skills");
        tree(&skills);
        std::os::unix::fs::symlink("/etc/passwd", skills.join("pdf/passwd")).unwrap();
        assert!(matches!(pack(&skills), Err(OciError::NotAPlugin { .. })));
    }

    /// A tar with one entry at `path` of `kind`, written by hand (the
    /// builder refuses such paths).
    fn crafted(path: &str, kind: tar::EntryType, link: Option<&str>) -> Vec<u8> {
        let mut header = tar::Header::new_old();
        {
            let old = header.as_old_mut();
            old.name[..path.len()].copy_from_slice(path.as_bytes());
            if let Some(link) = link {
                old.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
        }
        header.set_entry_type(kind);
        header.set_mode(0o644);
        header.set_size(if kind == tar::EntryType::Regular {
            2
        } else {
            0
        });
        header.set_cksum();
        let mut bytes = header.as_bytes().to_vec();
        if kind == tar::EntryType::Regular {
            let mut block = [0u8; 512];
            block[..2].copy_from_slice(b"hi");
            bytes.extend_from_slice(&block);
        }
        bytes.extend_from_slice(&[0u8; 1024]);
        bytes
    }

    #[test]
    fn an_entry_outside_the_folder_a_link_or_a_device_is_refused_and_nothing_lands_outside() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("../escape.md", tar::EntryType::Regular, None),
            ("/etc/escape.md", tar::EntryType::Regular, None),
            ("pdf/../../escape.md", tar::EntryType::Regular, None),
            ("pdf/link", tar::EntryType::Symlink, Some("/etc/passwd")),
            ("pdf/hard", tar::EntryType::Link, Some("../../escape.md")),
            ("pdf/dev", tar::EntryType::Char, None),
        ];
        for (i, (path, kind, link)) in cases.into_iter().enumerate() {
            let archive = dir.path().join(format!("{i}.tar"));
            std::fs::write(&archive, crafted(path, kind, link)).unwrap();
            let into = dir.path().join(format!("out-{i}/calc.skills"));
            for refused in [check(&archive, "test"), unpack(&archive, &into, "test")] {
                assert!(
                    matches!(refused, Err(OciError::NotAPlugin { .. })),
                    "{path}: {refused:?}"
                );
            }
        }
        assert!(!dir.path().join("escape.md").exists());
        assert!(!Path::new("/etc/escape.md").exists());
    }

    #[test]
    fn a_layer_that_is_not_a_tar_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("x.tar");
        std::fs::write(&archive, vec![0x41u8; 700]).unwrap();
        let refused = unpack(&archive, &dir.path().join("out"), "test");
        assert!(
            matches!(refused, Err(OciError::NotAPlugin { .. })),
            "{refused:?}"
        );
    }
}
