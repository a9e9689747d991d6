//! Scratch directories for per-call grants (`call/narrow.rs`): a call that
//! reaches one file gets a private directory holding only the way down to
//! it, and gives the directory back empty when it ends.
//!
//! Making and removing a directory is a journaled metadata write on most
//! file systems, tens of microseconds each on a small machine, so an empty
//! scratch directory is kept for the next call instead ([`Scratches`]):
//! a call adds what it needs (the way down, a link) and removes exactly
//! that afterwards. A directory is reused only when everything the call
//! added came out again; otherwise it is removed whole. Nothing a guest
//! does can add to one: the sandbox sees it read-only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// Empty scratch directories kept for reuse: at most this many.
const MAX_IDLE: usize = 16;

/// A runtime's empty scratch directories, ready for the next call.
#[derive(Clone, Default)]
pub(crate) struct Scratches {
    idle: Arc<Mutex<Vec<tempfile::TempDir>>>,
}

impl Scratches {
    /// An empty scratch directory: a kept one, or a new one.
    pub(crate) fn take(&self) -> std::io::Result<Scratch> {
        let dir = match self.idle.lock().pop() {
            Some(dir) => dir,
            None => tempfile::Builder::new()
                .prefix("toolhost-call-")
                .tempdir()?,
        };
        Ok(Scratch {
            dir: Some(dir),
            added: Vec::new(),
            home: self.idle.clone(),
        })
    }
}

/// One call's scratch directory; given back (emptied) when dropped.
pub(crate) struct Scratch {
    dir: Option<tempfile::TempDir>,
    /// What this call added, in order: removed in reverse when it ends.
    added: Vec<Added>,
    home: Arc<Mutex<Vec<tempfile::TempDir>>>,
}

/// One entry a call added to its scratch directory.
enum Added {
    Directory(PathBuf),
    File(PathBuf),
}

impl Scratch {
    /// The scratch directory.
    pub(crate) fn path(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or(Path::new(""), tempfile::TempDir::path)
    }

    /// The mirror `n` inside it (made once, and kept empty across calls).
    pub(crate) fn mirror(&self, n: u8) -> std::io::Result<PathBuf> {
        let dir = self.path().join(n.to_string());
        match std::fs::create_dir(&dir) {
            Ok(()) => Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(dir),
            Err(e) => Err(e),
        }
    }

    /// Makes the directories from `base` (which exists) down to `base/below`,
    /// each one added by this call.
    pub(crate) fn make_dirs(&mut self, base: &Path, below: &Path) -> std::io::Result<()> {
        let mut at = base.to_path_buf();
        for part in below.components() {
            at.push(part);
            match std::fs::create_dir(&at) {
                Ok(()) => self.added.push(Added::Directory(at.clone())),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Records that a file was put at `path` (removed when the call ends).
    pub(crate) fn added_file(&mut self, path: PathBuf) {
        self.added.push(Added::File(path));
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let mut emptied = true;
        for added in self.added.drain(..).rev() {
            let removed = match &added {
                Added::File(path) => std::fs::remove_file(path),
                Added::Directory(path) => std::fs::remove_dir(path),
            };
            emptied &= removed.is_ok();
        }
        let Some(dir) = self.dir.take() else {
            return;
        };
        let mut idle = self.home.lock();
        if emptied && idle.len() < MAX_IDLE {
            idle.push(dir);
        }
        // Otherwise `dir` is dropped here: removed whole.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_directory_comes_back_empty_and_is_reused() {
        let scratches = Scratches::default();
        let first = {
            let mut s = scratches.take().unwrap();
            let mirror = s.mirror(0).unwrap();
            s.make_dirs(&mirror, Path::new("a/b")).unwrap();
            std::fs::write(mirror.join("a/b/f.txt"), "x").unwrap();
            s.added_file(mirror.join("a/b/f.txt"));
            s.path().to_path_buf()
        };
        assert!(first.join("0").is_dir());
        assert!(!first.join("0/a").exists(), "what the call added is gone");
        let again = scratches.take().unwrap();
        assert_eq!(again.path(), first, "the empty directory is reused");
    }

    #[test]
    fn a_scratch_directory_that_cannot_be_emptied_is_removed_whole() {
        let scratches = Scratches::default();
        let path = {
            let mut s = scratches.take().unwrap();
            let mirror = s.mirror(0).unwrap();
            s.make_dirs(&mirror, Path::new("a")).unwrap();
            // Something the call did not record: `a` cannot be removed.
            std::fs::write(mirror.join("a/stray"), "x").unwrap();
            s.path().to_path_buf()
        };
        assert!(!path.exists());
        let fresh = scratches.take().unwrap();
        assert_ne!(fresh.path(), path);
    }
}
