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
}

impl Fetched {
    /// The plugin manifest (`NAME.toml`) that came with it, as text.
    pub fn manifest_text(&self) -> Option<&str> {
        self.manifest.as_deref()
    }

    /// Installs the plugin into `dir` as `NAME.wasm` (and `NAME.toml`), each
    /// file renamed into place whole, so that a runtime watching `dir` never
    /// loads half a file. The manifest goes first: a watcher reloads when the
    /// component changes. A `NAME.toml` left from before is removed when the
    /// new plugin has none. `dir` must be the `staging` directory given to
    /// [`fetch`](crate::fetch) (or on the same file system).
    pub fn install(self, dir: &Path) -> Result<InstalledFiles, OciError> {
        if !toolhost_runtime::contract::is_valid_tool_name(&self.name) {
            return Err(OciError::InvalidName(self.name));
        }
        std::fs::create_dir_all(dir).map_err(|e| OciError::io(dir, e))?;
        let wasm_path = dir.join(format!("{}.wasm", self.name));
        let toml_path = dir.join(format!("{}.toml", self.name));
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
        })
    }
}
