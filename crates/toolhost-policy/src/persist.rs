//! Writing "allow always" answers back into the policy file, keeping its comments and
//! formatting, atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

use toml_edit::{Array, DocumentMut, Item, Value};

use crate::error::PolicyError;
use crate::pattern::name_glob;
use crate::policy::Policy;

/// The key "allow always" answers are appended to.
const KEY: &str = "always-allow";

/// Appends `tool_glob` to the `always-allow` array of the policy file at `path`.
///
/// Comments and the formatting of the rest of the file are kept; the array is created if
/// it is missing, and the file too. A glob already listed is not added again (the file is
/// then left untouched). The file must be a valid policy before, and is checked to be one
/// after, so this never turns a good policy into a broken one. The new file is written
/// to a temporary file in the same directory and renamed over the old one, so an
/// interrupted write leaves the old file whole. A symbolic link is followed and its target
/// replaced; the file keeps its permissions.
///
/// This changes the file only: the running [`Policy`] picks the glob up through
/// [`Policy::with_always_allow`] (or by loading the file again). Two processes persisting
/// at the same moment may lose one of the two additions.
///
/// ```
/// use toolhost_policy::{persist_always_allow, Policy};
///
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("policy.toml");
/// std::fs::write(&path, "# my rules\ndefault = \"ask\"\n").unwrap();
/// persist_always_allow(&path, "read_file").unwrap();
/// let text = std::fs::read_to_string(&path).unwrap();
/// assert_eq!(text, "# my rules\ndefault = \"ask\"\nalways-allow = [\"read_file\"]\n");
/// assert!(Policy::load(&path).unwrap().always_allowed("read_file"));
/// ```
pub fn persist_always_allow(path: &Path, tool_glob: &str) -> Result<(), PolicyError> {
    name_glob(tool_glob).map_err(|message| PolicyError::Invalid {
        message: format!("always-allow: {message}"),
    })?;
    let target = resolve(path);
    let text = match std::fs::read_to_string(&target) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(PolicyError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let old = text.as_deref().unwrap_or("");
    // Refuse to edit a file that is not a valid policy: the error says where it is wrong.
    Policy::from_toml(old, path)?;
    let Some(new) = append(old, tool_glob, path)? else {
        tracing::debug!(path = %path.display(), glob = tool_glob, "already in always-allow");
        return Ok(());
    };
    Policy::from_toml(&new, path)?;
    write_atomically(&target, &new).map_err(|source| PolicyError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    tracing::info!(path = %path.display(), glob = tool_glob, "added to always-allow");
    Ok(())
}

/// The file a write to `path` should replace: the target of a symbolic link.
fn resolve(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    }
}

/// `text` with `glob` appended to `always-allow`, or `None` when it is already there.
/// `text` must be a valid policy.
fn append(text: &str, glob: &str, path: &Path) -> Result<Option<String>, PolicyError> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        PolicyError::in_file_span(path, text, e.span(), e.message().trim_end().to_owned())
    })?;
    match doc.get_mut(KEY) {
        None => {
            let mut array = Array::new();
            array.push(glob);
            doc.insert(KEY, Item::Value(Value::Array(array)));
        }
        Some(item) => {
            let Some(array) = item.as_array_mut() else {
                // Not reachable for a valid policy: it was checked to be an array.
                return Err(PolicyError::Invalid {
                    message: format!("{}: `{KEY}` is not an array", path.display()),
                });
            };
            if array.iter().any(|v| v.as_str() == Some(glob)) {
                return Ok(None);
            }
            push_like_last(array, glob);
        }
    }
    let mut out = doc.to_string();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(Some(out))
}

/// Pushes `glob`, laid out like the element before it (one per line stays one per line),
/// leaving any comment after the last element where it was.
fn push_like_last(array: &mut Array, glob: &str) {
    let trailing_comma = array.trailing_comma();
    let trailing = array.trailing().as_str().unwrap_or("").to_owned();
    let Some(last) = array.iter_mut().last() else {
        // An empty array spread over lines (`[ # comment` newline `]`): one per line.
        match trailing.rfind('\n') {
            Some(nl) => {
                let value = Value::from(glob).decorated(format!("{}    ", &trailing[..=nl]), "");
                array.push_formatted(value);
                array.set_trailing(format!("\n{}", &trailing[nl + 1..]));
                array.set_trailing_comma(true);
            }
            None => array.push(glob),
        }
        return;
    };
    let raw =
        |s: Option<&toml_edit::RawString>| s.and_then(|s| s.as_str()).unwrap_or("").to_owned();
    let last_prefix = raw(last.decor().prefix());
    // What stands between the last element and `]`: after its comma if it has one, else
    // its own suffix. It moves behind the new element, except for the end of its line
    // (a comment), which stays with the last element.
    let after_last = if trailing_comma {
        trailing.clone()
    } else {
        let suffix = raw(last.decor().suffix());
        last.decor_mut().set_suffix("");
        suffix
    };
    let (prefix, closing) = match after_last.rfind('\n') {
        Some(nl) => {
            let indent = last_prefix
                .rfind('\n')
                .map_or("", |i| &last_prefix[i + 1..]);
            (
                format!("{}{indent}", &after_last[..=nl]),
                format!("\n{}", &after_last[nl + 1..]),
            )
        }
        None => (" ".to_owned(), after_last),
    };
    if trailing_comma {
        array.push_formatted(Value::from(glob).decorated(prefix, ""));
        array.set_trailing(closing);
    } else {
        array.push_formatted(Value::from(glob).decorated(prefix, closing));
    }
}

/// Writes `contents` to `target` through a temporary file in the same directory and a
/// rename, keeping the old file's permissions.
fn write_atomically(target: &Path, contents: &str) -> std::io::Result<()> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".policy-")
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(contents.as_bytes())?;
    tmp.as_file().sync_all()?;
    if let Ok(meta) = std::fs::metadata(target) {
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    tmp.persist(target).map_err(|e| e.error)?;
    // Make the rename itself durable; not every system can sync a directory.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::policy::CallRequest;
    use crate::session::SessionToggles;

    fn setup(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    const COMMENTED: &str = r#"# Project policy.
default = "ask"   # ask unless told

# Tools that need no asking.
always-allow = [
    "list_dir",   # harmless
]

[[rules]]
# never the network
tool = "http_get"
decision = "deny"
"#;

    #[test]
    fn persist_keeps_comments_and_formatting() {
        let (_dir, path) = setup(COMMENTED);
        persist_always_allow(&path, "read_file").unwrap();
        let want = COMMENTED.replace(
            "    \"list_dir\",   # harmless\n",
            "    \"list_dir\",   # harmless\n    \"read_file\",\n",
        );
        assert_eq!(read(&path), want);
    }

    #[test]
    fn persist_is_idempotent() {
        let (_dir, path) = setup(COMMENTED);
        persist_always_allow(&path, "list_dir").unwrap();
        assert_eq!(read(&path), COMMENTED);
        persist_always_allow(&path, "read_file").unwrap();
        let once = read(&path);
        persist_always_allow(&path, "read_file").unwrap();
        assert_eq!(read(&path), once);
        assert_eq!(once.matches("read_file").count(), 1);
    }

    #[test]
    fn persist_appends_to_single_line_and_multi_line_arrays() {
        let (_dir, path) = setup("always-allow = [\"a\", \"b\"]\n");
        persist_always_allow(&path, "c").unwrap();
        assert_eq!(read(&path), "always-allow = [\"a\", \"b\", \"c\"]\n");

        let (_dir, path) = setup("always-allow = []\n");
        persist_always_allow(&path, "c").unwrap();
        assert_eq!(read(&path), "always-allow = [\"c\"]\n");

        let (_dir, path) = setup("always-allow = [\n  \"a\"\n]\n");
        persist_always_allow(&path, "b").unwrap();
        assert_eq!(read(&path), "always-allow = [\n  \"a\",\n  \"b\"\n]\n");
    }

    #[test]
    fn persist_keeps_a_comment_after_the_last_element_on_its_line() {
        let (_dir, path) = setup("always-allow = [\n  \"a\" # c\n]\n");
        persist_always_allow(&path, "b").unwrap();
        assert_eq!(read(&path), "always-allow = [\n  \"a\", # c\n  \"b\"\n]\n");

        let (_dir, path) = setup("always-allow = [ # none yet\n]\n");
        persist_always_allow(&path, "b").unwrap();
        assert_eq!(read(&path), "always-allow = [ # none yet\n    \"b\",\n]\n");

        let text = "always-allow = [\n  # first\n  \"a\",\n  # more to come\n]\n";
        let (_dir, path) = setup(text);
        persist_always_allow(&path, "b").unwrap();
        assert_eq!(read(&path), text.replace("]", "  \"b\",\n]"));
    }

    #[test]
    fn persist_creates_the_array_before_the_tables() {
        let text = "# rules only\n[[rules]]\ntool = \"x\"\ndecision = \"ask\"\n";
        let (_dir, path) = setup(text);
        persist_always_allow(&path, "x").unwrap();
        let new = read(&path);
        assert!(new.contains("# rules only\n"), "{new}");
        assert!(
            new.find("always-allow = [\"x\"]").unwrap() < new.find("[[rules]]").unwrap(),
            "{new}"
        );
        let p = Policy::load(&path).unwrap();
        let args = serde_json::json!({});
        let e = p.evaluate(&CallRequest::new("x", &args), &SessionToggles::new());
        assert_eq!(e.decision, Decision::Allow);
    }

    #[test]
    fn persist_creates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        persist_always_allow(&path, "read_*").unwrap();
        assert_eq!(read(&path), "always-allow = [\"read_*\"]\n");
        assert!(Policy::load(&path).unwrap().always_allowed("read_file"));
    }

    #[test]
    fn persisted_file_reparses_to_the_same_policy_plus_the_glob() {
        let (_dir, path) = setup(COMMENTED);
        persist_always_allow(&path, "write_*").unwrap();
        let p = Policy::load(&path).unwrap();
        assert!(p.always_allowed("list_dir"));
        assert!(p.always_allowed("write_file"));
        assert_eq!(p.default_decision(), Decision::Ask);
        let args = serde_json::json!({});
        let e = p.evaluate(&CallRequest::new("http_get", &args), &SessionToggles::new());
        assert_eq!(e.decision, Decision::Deny);
    }

    #[test]
    fn persist_refuses_an_invalid_file_and_leaves_it_alone() {
        let bad = "default = \"maybe\"\n";
        let (_dir, path) = setup(bad);
        let e = persist_always_allow(&path, "x").unwrap_err();
        assert!(
            e.to_string().ends_with(
                "policy.toml:1:11: unknown decision \"maybe\" (expected allow, ask or deny)"
            ),
            "{e}"
        );
        assert_eq!(read(&path), bad);
        let (_dir, path) = setup("x = [\n");
        assert!(matches!(
            persist_always_allow(&path, "x"),
            Err(PolicyError::InFile { .. })
        ));
    }

    #[test]
    fn persist_refuses_a_bad_glob() {
        let (_dir, path) = setup(COMMENTED);
        let e = persist_always_allow(&path, "read_[").unwrap_err();
        assert!(matches!(e, PolicyError::Invalid { .. }), "{e}");
        assert_eq!(read(&path), COMMENTED);
    }

    #[test]
    fn persist_escapes_the_glob_as_a_toml_string() {
        let (_dir, path) = setup("");
        persist_always_allow(&path, "we\"ird*").unwrap();
        assert!(Policy::load(&path).unwrap().always_allowed("we\"irdo"));
    }

    #[test]
    fn persist_leaves_no_temporary_file_behind() {
        let (dir, path) = setup(COMMENTED);
        persist_always_allow(&path, "a").unwrap();
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from("policy.toml")]);
    }

    #[cfg(unix)]
    #[test]
    fn persist_follows_a_symlink_and_keeps_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, real) = setup("default = \"ask\"\n");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        persist_always_allow(&link, "a").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(read(&real).contains("always-allow = [\"a\"]"));
        let mode = std::fs::metadata(&real).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }
}
