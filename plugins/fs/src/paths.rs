//! Turning a path argument into a path inside the granted directories.

use std::path::{Component, Path, PathBuf};

use toolhost_sdk::ToolError;

/// The message when the host granted no directory.
pub const NO_GRANT: &str = "no directory is granted to this plugin";

/// Resolves `path` against the granted directories (`grants`, in the host's
/// order): an absolute path is used as it is, a relative path is taken
/// relative to the first granted directory.
///
/// The result must lie inside one of the grants, judged lexically (`.` and
/// `..` resolved without looking at the file system); symbolic links are
/// left to WASI, which refuses to follow them out of a grant.
pub fn resolve(path: &str, grants: &[PathBuf]) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Err(ToolError::invalid_arguments("`path` must not be empty"));
    }
    if path.contains('\0') {
        return Err(ToolError::invalid_arguments(
            "`path` must not contain NUL characters",
        ));
    }
    let Some(first) = grants.first() else {
        return Err(ToolError::failed(NO_GRANT));
    };
    let requested = Path::new(path);
    let joined = if requested.is_absolute() {
        requested.to_path_buf()
    } else {
        first.join(requested)
    };
    // Rebuilding from the components drops `.` and doubled slashes (always
    // safe), but keeps `..` for WASI to resolve.
    let full: PathBuf = joined.components().collect();
    let normal = normalize(&full);
    if grants.iter().any(|g| normal.starts_with(normalize(g))) {
        Ok(full)
    } else {
        let granted: Vec<String> = grants.iter().map(|g| g.display().to_string()).collect();
        Err(ToolError::failed(format!(
            "'{path}' is outside the directories granted to this plugin ({})",
            granted.join(", ")
        )))
    }
}

/// Resolves `.` and `..` lexically; `..` never climbs above the root.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                // `pop` refuses to remove the root, which is what we want.
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(paths: &[&str]) -> Vec<PathBuf> {
        paths.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn relative_paths_use_the_first_grant() {
        let g = grants(&["/work/project", "/data"]);
        assert_eq!(
            resolve("src/main.rs", &g).unwrap(),
            PathBuf::from("/work/project/src/main.rs")
        );
        assert_eq!(resolve(".", &g).unwrap(), PathBuf::from("/work/project"));
        assert_eq!(
            resolve("./a//b/./c", &g).unwrap(),
            PathBuf::from("/work/project/a/b/c")
        );
        assert_eq!(
            resolve("sub/../x", &g).unwrap(),
            PathBuf::from("/work/project/sub/../x")
        );
    }

    #[test]
    fn absolute_paths_are_used_as_is() {
        let g = grants(&["/work/project", "/data"]);
        assert_eq!(
            resolve("/data/a.csv", &g).unwrap(),
            PathBuf::from("/data/a.csv")
        );
        assert_eq!(
            resolve("/work/project", &g).unwrap(),
            PathBuf::from("/work/project")
        );
    }

    #[test]
    fn escapes_are_refused() {
        let g = grants(&["/work/project"]);
        for p in [
            "../secret",
            "/etc/passwd",
            "/work/project/../other",
            "/work/projectX/a",
            "a/../../b",
        ] {
            let err = resolve(p, &g).unwrap_err();
            assert_eq!(
                err,
                ToolError::Failed(format!(
                    "'{p}' is outside the directories granted to this plugin (/work/project)"
                )),
            );
        }
    }

    #[test]
    fn no_grant_and_bad_input() {
        assert_eq!(resolve("a", &[]).unwrap_err(), ToolError::failed(NO_GRANT));
        assert_eq!(resolve("/a", &[]).unwrap_err(), ToolError::failed(NO_GRANT));
        assert!(
            resolve("", &grants(&["/x"]))
                .unwrap_err()
                .is_invalid_arguments()
        );
        assert!(
            resolve("a\0b", &grants(&["/x"]))
                .unwrap_err()
                .is_invalid_arguments()
        );
    }

    #[test]
    fn root_grant_allows_everything() {
        let g = grants(&["/"]);
        assert_eq!(
            resolve("etc/hosts", &g).unwrap(),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(resolve("/../../x", &g).unwrap(), PathBuf::from("/../../x"));
    }

    #[test]
    fn normalize_rules() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../..")), PathBuf::from("/"));
        assert_eq!(normalize(Path::new("/a/b/")), PathBuf::from("/a/b"));
    }
}
