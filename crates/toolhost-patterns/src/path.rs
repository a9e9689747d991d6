//! Paths as grants and rules compare them, lexically and without touching
//! the file system: [`normalize_path`] (`.`, `..` and repeated `/`
//! resolved), [`resolve`] (an argument as a tool resolves it against its
//! base) and [`within`] (is this path inside that directory). The policy's
//! path rules, saved approvals' "this directory" and per-call grants all ask
//! these, so "inside a grant" means one thing everywhere.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Resolves `.`, `..`, repeated `/` and a trailing `/` without touching the file system.
///
/// `..` at the root of an absolute path stays at the root; leading `..` of a relative path
/// are kept. Borrows when there is nothing to change.
pub fn normalize_path(path: &str) -> Cow<'_, str> {
    let absolute = path.starts_with('/');
    let body = if absolute { &path[1..] } else { path };
    let clean = !body.is_empty() && body.split('/').all(|s| !matches!(s, "" | "." | ".."))
        || (body.is_empty() && absolute);
    if clean {
        return Cow::Borrowed(path);
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in body.split('/') {
        match seg {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            s => parts.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    if absolute {
        out.push('/');
    }
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('.');
    }
    Cow::Owned(out)
}

/// Whether `path` is `dir` or lies below it, both normalised lexically
/// ([`normalize_path`]) and compared by whole components, so `/srv/a` is
/// within `/srv` but `/srv-other` is not. A relative path is never within an
/// absolute directory, nor an absolute one within a relative directory.
///
/// ```
/// use std::path::Path;
/// use toolhost_patterns::within;
///
/// assert!(within(Path::new("/srv/notes/a.txt"), Path::new("/srv/notes")));
/// assert!(within(Path::new("/srv/notes"), Path::new("/srv/notes/")));
/// assert!(!within(Path::new("/srv/notes/../secret"), Path::new("/srv/notes")));
/// assert!(!within(Path::new("/srv/notes-old"), Path::new("/srv/notes")));
/// ```
pub fn within(path: &Path, dir: &Path) -> bool {
    let (Some(path), Some(dir)) = (path.to_str(), dir.to_str()) else {
        // Not UTF-8: compare the components as they are (no `.` or `..`
        // can hide in them after the caller's own normalisation).
        return path.starts_with(dir);
    };
    Path::new(normalize_path(path).as_ref()).starts_with(normalize_path(dir).as_ref())
}

/// The path a tool opens for the argument `raw`: an absolute path as it is,
/// a relative one joined to `base`, normalised lexically; `None` for a
/// relative path without a base, or one with a NUL byte (which no file
/// system call takes).
///
/// ```
/// use std::path::Path;
/// use toolhost_patterns::resolve;
///
/// assert_eq!(resolve("notes/../a.txt", Some(Path::new("/srv"))).unwrap(), Path::new("/srv/a.txt"));
/// assert_eq!(resolve("/etc/x/../passwd", None).unwrap(), Path::new("/etc/passwd"));
/// assert!(resolve("a.txt", None).is_none());
/// ```
pub fn resolve(raw: &str, base: Option<&Path>) -> Option<PathBuf> {
    if raw.contains('\0') {
        return None;
    }
    let joined = match base {
        _ if Path::new(raw).is_absolute() => PathBuf::from(raw),
        Some(base) => base.join(raw),
        None => return None,
    };
    Some(PathBuf::from(
        normalize_path(&joined.to_string_lossy()).into_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_normalisation_resolves_dots_and_slashes() {
        for (input, want) in [
            ("/etc/passwd", "/etc/passwd"),
            ("/etc/x/../passwd", "/etc/passwd"),
            ("/etc/./passwd", "/etc/passwd"),
            ("//etc//passwd/", "/etc/passwd"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/", "/"),
            ("src/../../x", "../x"),
            ("./src/lib.rs", "src/lib.rs"),
            ("a/..", "."),
            ("", "."),
        ] {
            assert_eq!(normalize_path(input), want, "{input}");
        }
        assert!(matches!(normalize_path("/etc/passwd"), Cow::Borrowed(_)));
        assert!(matches!(normalize_path("src/lib.rs"), Cow::Borrowed(_)));
    }

    #[test]
    fn within_compares_whole_components_after_normalising() {
        let dir = Path::new("/srv/notes");
        for inside in [
            "/srv/notes",
            "/srv/notes/",
            "/srv/notes/a/b.txt",
            "/srv/x/../notes/a",
        ] {
            assert!(within(Path::new(inside), dir), "{inside}");
        }
        for outside in [
            "/srv/notes-old/a",
            "/srv",
            "/srv/notes/../secret",
            "notes/a",
            "/",
        ] {
            assert!(!within(Path::new(outside), dir), "{outside}");
        }
        assert!(within(Path::new("/anything"), Path::new("/")));
    }

    #[test]
    fn resolve_joins_relative_paths_to_the_base_and_refuses_nul() {
        let base = Path::new("/srv/grant");
        assert_eq!(
            resolve("a/./b", Some(base)).unwrap(),
            Path::new("/srv/grant/a/b")
        );
        assert_eq!(resolve("../x", Some(base)).unwrap(), Path::new("/srv/x"));
        assert_eq!(
            resolve("/etc/passwd", Some(base)).unwrap(),
            Path::new("/etc/passwd")
        );
        assert!(resolve("a\0b", Some(base)).is_none());
        assert!(resolve("rel", None).is_none());
    }
}
