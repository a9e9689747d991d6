//! Putting a verified plugin into a plugins directory.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Fetched, OciError};

/// The files [`Fetched::install`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledFiles {
    /// `DIR/NAME.wasm`.
    pub wasm: PathBuf,
    /// `DIR/NAME.toml`, when the plugin has a manifest.
    pub manifest: Option<PathBuf>,
    /// `DIR/NAME.skills/`, when the plugin has skills.
    pub skills: Option<PathBuf>,
}

impl Fetched {
    /// The plugin manifest (`NAME.toml`) that came with it, as text.
    pub fn manifest_text(&self) -> Option<&str> {
        self.manifest.as_deref()
    }

    /// Installs the plugin into `dir` as `NAME.wasm` (and `NAME.toml`, and
    /// its skills as the folder `NAME.skills/`), each renamed into place
    /// whole, so that a runtime watching `dir` never loads half a file. The
    /// skills and the manifest go first: a watcher reloads when the
    /// component changes. A `NAME.toml` or `NAME.skills/` left from before
    /// is removed when the new plugin has none. `dir` must be the `staging` directory given to
    /// [`fetch`](crate::fetch) (or on the same file system).
    pub fn install(self, dir: &Path) -> Result<InstalledFiles, OciError> {
        if !toolhost_runtime::contract::is_valid_tool_name(&self.name) {
            return Err(OciError::InvalidName(self.name));
        }
        std::fs::create_dir_all(dir).map_err(|e| OciError::io(dir, e))?;
        let wasm_path = dir.join(format!("{}.wasm", self.name));
        let toml_path = dir.join(format!("{}.toml", self.name));
        let skills = install_skills(
            self.skills.as_ref().map(tempfile::NamedTempFile::path),
            &crate::skills::dir_beside(&wasm_path),
            dir,
            &self.source,
        )?;
        let manifest = match &self.manifest {
            Some(text) => {
                let mut tmp = tempfile::NamedTempFile::with_prefix_in(".toolhost-install-", dir)
                    .map_err(|e| OciError::io(dir, e))?;
                tmp.write_all(text.as_bytes())
                    .and_then(|()| tmp.as_file().sync_all())
                    .map_err(|e| OciError::io(&toml_path, e))?;
                tmp.persist(&toml_path)
                    .map_err(|e| OciError::io(&toml_path, e.error))?;
                Some(toml_path)
            }
            None => {
                match std::fs::remove_file(&toml_path) {
                    Ok(()) => {
                        tracing::info!(path = %toml_path.display(), "removed the manifest of the plugin installed before");
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(OciError::io(&toml_path, e)),
                }
                None
            }
        };
        self.wasm
            .as_file()
            .sync_all()
            .map_err(|e| OciError::io(&wasm_path, e))?;
        self.wasm
            .persist(&wasm_path)
            .map_err(|e| OciError::io(&wasm_path, e.error))?;
        Ok(InstalledFiles {
            wasm: wasm_path,
            manifest,
            skills,
        })
    }
}

/// Unpacks the skills tar `archive` (if any) as the folder `target`: into
/// a new folder in `dir` first, every entry checked, then swapped in for
/// the one before (removed, as it is when the plugin has no skills now).
fn install_skills(
    archive: Option<&Path>,
    target: &Path,
    dir: &Path,
    reference: &str,
) -> Result<Option<PathBuf>, OciError> {
    let new = match archive {
        Some(archive) => {
            let unpacked = tempfile::Builder::new()
                .prefix(".toolhost-install-")
                .tempdir_in(dir)
                .map_err(|e| OciError::io(dir, e))?;
            crate::skills::unpack(archive, unpacked.path(), reference)?;
            Some(unpacked)
        }
        None => None,
    };
    // The old folder is set aside first (removed when `old` is dropped):
    // the folder is never half there.
    let old = tempfile::Builder::new()
        .prefix(".toolhost-old-")
        .tempdir_in(dir)
        .map_err(|e| OciError::io(dir, e))?;
    let aside = old.path().join("skills");
    let had = target.exists();
    if had {
        std::fs::rename(target, &aside).map_err(|e| OciError::io(target, e))?;
        if new.is_none() {
            tracing::info!(path = %target.display(), "removed the skills of the plugin installed before");
        }
    }
    let Some(new) = new else {
        return Ok(None);
    };
    if let Err(e) = std::fs::rename(new.path(), target) {
        // The plugin keeps the skills it had: nothing is lost.
        if had {
            let _ = std::fs::rename(&aside, target);
        }
        return Err(OciError::io(target, e));
    }
    // (Renamed away: nothing left for `new` to remove.)
    drop(new.keep());
    Ok(Some(target.to_owned()))
}
