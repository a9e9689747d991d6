//! Which lock file binds the plugins' grants to their code, and which
//! plugins directory it belongs to.

use std::path::{Path, PathBuf};

use super::ConfigFile;
use crate::shared_flags::Global;

/// The plugins directory `host install` installs into, and whose lock file
/// the host uses: the first `--plugins`, else the config file's first.
pub fn primary_plugins_dir<'a>(global: &'a Global, file: &'a ConfigFile) -> Option<&'a Path> {
    global
        .plugins
        .first()
        .or(file.plugins_dirs.first())
        .map(PathBuf::as_path)
}

/// The lock file: `--lock` (or `TOOLHOST_LOCK`); else the one of the
/// primary plugins directory ([`primary_plugins_dir`], a file's own
/// directory for a plugin file), in the user's state directory
/// ([`toolhost_runtime::lockfile::default_lock_file`]); else `toolhost.lock` here.
pub fn lock_file(global: &Global, file: &ConfigFile) -> PathBuf {
    if let Some(lock) = &global.lock {
        return lock.clone();
    }
    primary_plugins_dir(global, file)
        .map(|dir| match dir.extension() {
            Some(e) if e == "wasm" => dir.parent().unwrap_or(Path::new(".")),
            _ => dir,
        })
        .and_then(toolhost_runtime::lockfile::default_lock_file)
        .unwrap_or_else(|| PathBuf::from("toolhost.lock"))
}
