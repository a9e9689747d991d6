//! Listing a directory.

use std::path::Path;

use toolhost_sdk::ToolError;

use crate::errors::io_error;

/// What kind of thing a directory entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (socket, device, …).
    Other,
}

impl Kind {
    /// The name used in details.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Dir => "dir",
            Kind::Symlink => "symlink",
            Kind::Other => "other",
        }
    }
}

/// One directory entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's file name (lossily converted when it is not UTF-8).
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Size in bytes, for files.
    pub size: Option<u64>,
    /// Where a symbolic link points, when it can be read.
    pub target: Option<String>,
}

impl Entry {
    /// The entry as shown to the model: directories end in `/`, symbolic
    /// links show their target (or end in `@` when it cannot be read, as
    /// for links that point outside the granted directories).
    pub fn display(&self) -> String {
        match (self.kind, &self.target) {
            (Kind::Dir, _) => format!("{}/", self.name),
            (Kind::Symlink, Some(t)) => format!("{} -> {t}", self.name),
            (Kind::Symlink, None) => format!("{}@", self.name),
            _ => self.name.clone(),
        }
    }
}

/// Lists the entries of the directory at `path`, sorted by name.
pub fn list(path: &Path) -> Result<Vec<Entry>, ToolError> {
    let meta = std::fs::metadata(path).map_err(|e| io_error(&e, path, "list"))?;
    if !meta.is_dir() {
        return Err(ToolError::failed(format!(
            "'{}' is not a directory (use read_file to read a file)",
            path.display()
        )));
    }
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| io_error(&e, path, "list"))? {
        let entry = entry.map_err(|e| io_error(&e, path, "list"))?;
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => Kind::Dir,
            Ok(t) if t.is_file() => Kind::File,
            Ok(t) if t.is_symlink() => Kind::Symlink,
            _ => Kind::Other,
        };
        let size = match kind {
            Kind::File => entry.metadata().ok().map(|m| m.len()),
            _ => None,
        };
        let target = match kind {
            Kind::Symlink => std::fs::read_link(entry.path())
                .ok()
                .map(|t| t.display().to_string()),
            _ => None,
        };
        entries.push(Entry {
            name: entry.file_name().to_string_lossy().into_owned(),
            kind,
            size,
            target,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_sorted_with_kinds() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.txt"), "hello").unwrap();
        std::fs::create_dir(dir.path().join("a_dir")).unwrap();
        std::fs::write(dir.path().join("C.md"), "").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("b.txt", dir.path().join("link")).unwrap();

        let entries = list(dir.path()).unwrap();
        let shown: Vec<String> = entries.iter().map(Entry::display).collect();
        let mut expected = vec!["C.md", "a_dir/", "b.txt"];
        if cfg!(unix) {
            expected.push("link -> b.txt");
        }
        assert_eq!(shown, expected);
        let b = entries.iter().find(|e| e.name == "b.txt").unwrap();
        assert_eq!((b.kind, b.size), (Kind::File, Some(5)));
        let a = entries.iter().find(|e| e.name == "a_dir").unwrap();
        assert_eq!((a.kind, a.size), (Kind::Dir, None));
    }

    #[test]
    fn unreadable_symlinks_end_in_at() {
        let e = Entry {
            name: "out".into(),
            kind: Kind::Symlink,
            size: None,
            target: None,
        };
        assert_eq!(e.display(), "out@");
    }

    #[test]
    fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let err = list(&file).unwrap_err();
        assert!(
            err.message()
                .ends_with("is not a directory (use read_file to read a file)")
        );
        let err = list(&dir.path().join("missing")).unwrap_err();
        assert!(err.message().ends_with("does not exist"), "{err}");
        assert!(list(dir.path()).unwrap().iter().all(|e| e.name == "f"));
    }
}
