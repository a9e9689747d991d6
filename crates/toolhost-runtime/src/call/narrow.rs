//! Per-call grants: a tool whose manifest names the argument that holds its
//! path (`[tools.read_file] path-arg = "/path"`) runs in a sandbox that
//! reaches that file or directory alone, not the plugin's whole grant. An
//! approval of `read_file {"path": "notes.txt"}` then means exactly that:
//! the guest cannot read `notes.txt`'s sibling, whatever path it tries.
//!
//! How, with WASI's directory preopens (a file cannot be preopened alone):
//! the grant's root is preopened at its usual guest path, but from a fresh
//! scratch directory that holds only the way down to the call's path, read
//! only, so relative paths resolve as they always do.
//!
//! - **A file**: a hard link to it sits in the scratch directory (a copy,
//!   when the scratch directory is on another file system and the tool is
//!   read-only; at most [`MAX_COPY_BYTES`]).
//! - **A directory**: it is preopened too, at its own path (the guest's
//!   path lookup takes the longest matching preopen).
//! - **A path that does not exist**: only the way down; the guest finds
//!   nothing there.
//!
//! The path must lie in a granted directory after `..` and symbolic links
//! are resolved on the host; otherwise the call is refused before the
//! guest runs. Access is read-only unless the tool is not annotated
//! read-only and the grant is read-write.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::call::Call;
use crate::error::CallError;
use crate::grants::DirAccess;
use crate::sandbox::SandboxSpec;

/// The largest file copied into a call's scratch directory when a hard
/// link cannot be made (64 MiB).
pub(crate) const MAX_COPY_BYTES: u64 = 64 * 1024 * 1024;

/// A call's own sandbox spec, and the scratch directory it needs for as
/// long as the call runs.
pub(crate) struct Narrowed {
    pub spec: Arc<SandboxSpec>,
    _scratch: tempfile::TempDir,
}

/// The call's narrowed sandbox, when its tool names a path argument and
/// its plugin has directories granted; `None` otherwise.
pub(crate) fn narrow(call: &Call<'_>, args: &Value) -> Result<Option<Narrowed>, CallError> {
    let plugin = &call.target.plugin;
    let tool = call.target.spec();
    let Some(pointer) = plugin
        .manifest
        .tools
        .get(&tool.name)
        .and_then(|t| t.path_arg.as_deref())
    else {
        return Ok(None);
    };
    let spec = &plugin.sandbox;
    let Some((_, root_guest, _)) = spec.dirs.first() else {
        return Ok(None);
    };
    let refuse = |reason: String| CallError::Denied {
        tool: call.target.tool.to_owned(),
        reason,
    };
    // A missing or non-string path argument reaches nothing.
    let requested = args.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let scratch = tempfile::Builder::new()
        .prefix("toolhost-call-")
        .tempdir()
        .map_err(|e| {
            host_error(
                call,
                format!("cannot make the call's scratch directory: {e}"),
            )
        })?;
    // The scratch directory standing for the first grant, so relative
    // paths resolve as always.
    let first = mirror(call, scratch.path(), 0)?;
    let mut dirs = vec![(first.clone(), root_guest.clone(), DirAccess::ReadOnly)];
    if !requested.is_empty() && !requested.contains('\0') {
        let joined = Path::new(root_guest).join(requested);
        let guest = PathBuf::from(
            toolhost_patterns::normalize_path(&joined.to_string_lossy()).into_owned(),
        );
        // The grant it lies in (the longest guest path that holds it).
        let Some((host_root, guest_root, access)) = spec
            .dirs
            .iter()
            .filter(|(_, g, _)| guest.starts_with(g))
            .max_by_key(|(_, g, _)| g.len())
        else {
            return Err(refuse(format!(
                "`{}` is outside the directories granted to {}",
                toolhost_text::line(requested, 200),
                plugin.name
            )));
        };
        let below = guest.strip_prefix(guest_root).unwrap_or(Path::new(""));
        let writes = !tool.annotations.read_only && *access == DirAccess::ReadWrite;
        let access = if writes {
            DirAccess::ReadWrite
        } else {
            DirAccess::ReadOnly
        };
        let host = host_root.join(below);
        // Not there (or not readable): the guest finds nothing.
        if let Ok(real) = std::fs::canonicalize(&host) {
            // Symbolic links are followed on the host: where they end must
            // be granted too.
            let host_root_real =
                std::fs::canonicalize(host_root).unwrap_or_else(|_| host_root.clone());
            if !real.starts_with(&host_root_real) {
                return Err(refuse(format!(
                    "`{}` leads outside the directories granted to {}",
                    toolhost_text::line(requested, 200),
                    plugin.name
                )));
            }
            let prepare = |e: std::io::Error| {
                host_error(call, format!("cannot prepare the call's directory: {e}"))
            };
            if real.is_dir() && real == host_root_real {
                // A whole granted directory: the grant itself.
                if guest_root == root_guest {
                    dirs[0] = (real, root_guest.clone(), access);
                } else {
                    dirs.push((real, guest_root.clone(), access));
                }
            } else {
                // The way down, inside the scratch directory that stands
                // for its grant (the first's, or one of its own).
                let base = if guest_root == root_guest {
                    first.clone()
                } else {
                    let base = mirror(call, scratch.path(), 1)?;
                    dirs.push((base.clone(), guest_root.clone(), DirAccess::ReadOnly));
                    base
                };
                let mirrored = base.join(below);
                if real.is_dir() {
                    std::fs::create_dir_all(&mirrored).map_err(prepare)?;
                    dirs.push((real, guest.display().to_string(), access));
                } else {
                    if let Some(parent) = mirrored.parent() {
                        std::fs::create_dir_all(parent).map_err(prepare)?;
                    }
                    place_file(&real, &mirrored, writes).map_err(|e| host_error(call, e))?;
                }
            }
        }
    }
    let narrowed = SandboxSpec {
        dirs,
        ..(**spec).clone()
    };
    Ok(Some(Narrowed {
        spec: Arc::new(narrowed),
        _scratch: scratch,
    }))
}

/// Puts the file `real` at `at`: a hard link, or (read-only, across file
/// systems) a bounded copy.
fn place_file(real: &Path, at: &Path, writes: bool) -> Result<(), String> {
    match std::fs::hard_link(real, at) {
        Ok(()) => Ok(()),
        Err(_) if !writes => {
            let size = std::fs::metadata(real)
                .map_err(|e| format!("cannot read the file's size: {e}"))?
                .len();
            if size > MAX_COPY_BYTES {
                return Err(format!(
                    "the file is on another file system than the call's scratch directory and \
                     larger than {} MiB, so it cannot be granted alone",
                    MAX_COPY_BYTES / (1024 * 1024)
                ));
            }
            std::fs::copy(real, at)
                .map(|_| ())
                .map_err(|e| format!("cannot copy the file for the call: {e}"))
        }
        Err(e) => Err(format!(
            "cannot grant the file alone to a tool that writes (no hard link: {e})"
        )),
    }
}

/// A fresh directory `n` inside the call's scratch directory.
fn mirror(call: &Call<'_>, scratch: &Path, n: u8) -> Result<PathBuf, CallError> {
    let dir = scratch.join(n.to_string());
    std::fs::create_dir(&dir)
        .map_err(|e| host_error(call, format!("cannot prepare the call's directory: {e}")))?;
    Ok(dir)
}

fn host_error(call: &Call<'_>, message: String) -> CallError {
    CallError::Host {
        tool: call.target.tool.to_owned(),
        message,
    }
}
