//! toolhost plugin `fs`: reads files and lists directories, only inside the
//! directories the host grants.
//!
//! The host preopens each granted host directory at the same absolute path
//! in the guest. An absolute path argument is used as it is; a relative one
//! is resolved against the first preopened directory. WASI itself keeps the
//! plugin inside its grants (`..` escapes and symbolic links pointing out
//! fail); this plugin only turns such failures into clear messages.

mod errors;
mod list;
mod paths;
mod read;

use std::path::PathBuf;

use toolhost_sdk::prelude::*;

/// Default number of lines `read_file` returns.
const DEFAULT_LIMIT: usize = 2000;
/// Most text `read_file` returns in one call.
const MAX_READ_BYTES: usize = 256 * 1024;
/// Most entries `list_dir` shows in its output.
const MAX_LIST_ENTRIES: usize = 5000;

/// Reads a UTF-8 text file and returns its lines. By default returns the
/// first 2000 lines; use offset and limit to page through longer files. At
/// most 256 KiB of text is returned per call. A relative path is resolved
/// against the first directory granted to the plugin.
#[derive(Deserialize, JsonSchema)]
struct ReadFile {
    /// The file to read: absolute, or relative to the first granted
    /// directory.
    path: String,
    /// The first line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    offset: Option<u64>,
    /// How many lines to return at most (default 2000).
    #[schemars(range(min = 1))]
    limit: Option<u64>,
}

fn read_file(_cx: &Context, args: ReadFile) -> Result<Output, ToolError> {
    read_file_in(&granted_dirs(), args)
}

fn read_file_in(grants: &[PathBuf], args: ReadFile) -> Result<Output, ToolError> {
    let path = paths::resolve(&args.path, grants)?;
    let offset = args.offset.unwrap_or(1);
    let limit = to_usize(args.limit.unwrap_or(DEFAULT_LIMIT as u64));
    let slice = read::read_lines(&path, offset, limit, MAX_READ_BYTES)?;

    let mut text = if slice.total_lines == 0 {
        "(empty file)".to_string()
    } else {
        slice.text.clone()
    };
    if slice.truncated {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let why = if slice.byte_capped {
            format!("output capped at {} KiB", MAX_READ_BYTES / 1024)
        } else {
            format!(
                "limit of {limit} line{} reached",
                if limit == 1 { "" } else { "s" }
            )
        };
        text.push_str(&format!(
            "[showing lines {}-{} of {}; {why}. To read more, call read_file with offset={}.]",
            slice.first_line,
            slice.last_line,
            slice.total_lines,
            slice.last_line + 1
        ));
    }
    Ok(Output::new(text).with_details(json!({
        "path": path.display().to_string(),
        "total_lines": slice.total_lines,
        "first_line": slice.first_line,
        "last_line": slice.last_line,
        "bytes": slice.text.len(),
        "truncated": slice.truncated,
    })))
}

/// Lists a directory: one entry per line, sorted by name, directories
/// marked with a trailing '/', symbolic links shown as 'name -> target' (or
/// 'name@' when the target cannot be read). A
/// relative path (or '.') is resolved against the first directory granted
/// to the plugin.
#[derive(Deserialize, JsonSchema)]
struct ListDir {
    /// The directory to list: absolute, or relative to the first granted
    /// directory ('.' for that directory itself).
    path: String,
}

fn list_dir(_cx: &Context, args: ListDir) -> Result<Output, ToolError> {
    list_dir_in(&granted_dirs(), args)
}

fn list_dir_in(grants: &[PathBuf], args: ListDir) -> Result<Output, ToolError> {
    let path = paths::resolve(&args.path, grants)?;
    let entries = list::list(&path)?;
    let shown = entries.len().min(MAX_LIST_ENTRIES);
    let mut text: String = entries[..shown]
        .iter()
        .map(|e| e.display() + "\n")
        .collect();
    if entries.is_empty() {
        text.push_str("(empty directory)");
    } else if shown < entries.len() {
        text.push_str(&format!(
            "[showing the first {shown} of {} entries]",
            entries.len()
        ));
    } else {
        text.pop(); // the last newline
    }
    let details: Vec<Value> = entries[..shown]
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "kind": e.kind.as_str(),
                "size": e.size,
                "target": e.target,
            })
        })
        .collect();
    Ok(Output::new(text).with_details(json!({
        "path": path.display().to_string(),
        "count": entries.len(),
        "truncated": shown < entries.len(),
        "entries": details,
    })))
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The directories the host preopened for this plugin, in its order.
#[cfg(target_arch = "wasm32")]
fn granted_dirs() -> Vec<PathBuf> {
    wasi::filesystem::preopens::get_directories()
        .into_iter()
        .map(|(_descriptor, path)| PathBuf::from(path))
        .collect()
}

/// Off the wasm target nothing is preopened.
#[cfg(not(target_arch = "wasm32"))]
fn granted_dirs() -> Vec<PathBuf> {
    Vec::new()
}

toolhost_sdk::plugin! {
    tools: [
        read_file(ReadFile) read_only idempotent,
        list_dir(ListDir) read_only idempotent,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sandbox {
        dir: tempfile::TempDir,
    }

    impl Sandbox {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
            std::fs::create_dir(dir.path().join("sub")).unwrap();
            std::fs::write(dir.path().join("sub/deep.txt"), "deep").unwrap();
            Sandbox { dir }
        }
        fn grants(&self) -> Vec<PathBuf> {
            vec![self.dir.path().to_path_buf()]
        }
        fn read(&self, args: Value) -> Result<Output, ToolError> {
            read_file_in(
                &self.grants(),
                toolhost_sdk::serde_json::from_value(args).unwrap(),
            )
        }
        fn list(&self, args: Value) -> Result<Output, ToolError> {
            list_dir_in(
                &self.grants(),
                toolhost_sdk::serde_json::from_value(args).unwrap(),
            )
        }
    }

    #[test]
    fn plugin_is_valid() {
        plugin().validate().unwrap();
        let names: Vec<String> = plugin().specs().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["read_file", "list_dir"]);
    }

    #[test]
    fn no_grant_natively() {
        let err = plugin()
            .call(&Context::default(), "read_file", r#"{"path":"a.txt"}"#)
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::failed("no directory is granted to this plugin")
        );
    }

    #[test]
    fn read_relative_and_absolute() {
        let sb = Sandbox::new();
        let out = sb.read(json!({"path": "a.txt"})).unwrap();
        assert_eq!(out.output(), "alpha\nbeta\ngamma\n");
        let d = out.details_json().unwrap();
        assert_eq!(d["total_lines"], 3);
        assert_eq!(d["first_line"], 1);
        assert_eq!(d["last_line"], 3);
        assert_eq!(d["truncated"], false);

        let abs = sb.dir.path().join("sub/deep.txt");
        let out = sb.read(json!({"path": abs.to_str().unwrap()})).unwrap();
        assert_eq!(out.output(), "deep");
    }

    #[test]
    fn read_window_says_how_to_continue() {
        let sb = Sandbox::new();
        let out = sb
            .read(json!({"path": "a.txt", "offset": 2, "limit": 1}))
            .unwrap();
        assert_eq!(
            out.output(),
            "beta\n[showing lines 2-2 of 3; limit of 1 line reached. To read more, call read_file with offset=3.]"
        );
        assert_eq!(out.details_json().unwrap()["truncated"], true);
    }

    #[test]
    fn read_errors() {
        let sb = Sandbox::new();
        let err = sb.read(json!({"path": "sub"})).unwrap_err();
        assert!(err.message().contains("is a directory"), "{err}");
        let err = sb.read(json!({"path": "../outside.txt"})).unwrap_err();
        assert!(
            err.message()
                .starts_with("'../outside.txt' is outside the directories granted"),
            "{err}"
        );
        let err = sb.read(json!({"path": "/etc/passwd"})).unwrap_err();
        assert!(
            err.message().contains("is outside the directories granted"),
            "{err}"
        );
        let err = sb.read(json!({"path": "nope"})).unwrap_err();
        assert!(err.message().ends_with("does not exist"), "{err}");
        let err = sb.read(json!({"path": "a.txt", "offset": 10})).unwrap_err();
        assert!(err.is_invalid_arguments());
    }

    #[test]
    fn empty_file() {
        let sb = Sandbox::new();
        std::fs::write(sb.dir.path().join("empty"), "").unwrap();
        let out = sb.read(json!({"path": "empty"})).unwrap();
        assert_eq!(out.output(), "(empty file)");
    }

    #[test]
    fn list_directory() {
        let sb = Sandbox::new();
        let out = sb.list(json!({"path": "."})).unwrap();
        assert_eq!(out.output(), "a.txt\nsub/");
        let d = out.details_json().unwrap();
        assert_eq!(d["path"], sb.dir.path().display().to_string());
        assert_eq!(d["count"], 2);
        assert_eq!(
            d["entries"][0],
            json!({"name": "a.txt", "kind": "file", "size": 17, "target": null})
        );
        assert_eq!(d["entries"][1]["kind"], "dir");

        std::fs::create_dir(sb.dir.path().join("void")).unwrap();
        assert_eq!(
            sb.list(json!({"path": "void"})).unwrap().output(),
            "(empty directory)"
        );
        let err = sb.list(json!({"path": "a.txt"})).unwrap_err();
        assert!(err.message().contains("is not a directory"), "{err}");
        let err = sb.list(json!({"path": ".."})).unwrap_err();
        assert!(
            err.message().contains("is outside the directories granted"),
            "{err}"
        );
    }
}
