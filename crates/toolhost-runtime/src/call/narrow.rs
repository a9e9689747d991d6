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
//!
//! A tool whose manifest names its URL argument (`[tools.http_get] url-arg
//! = "/url"`) reaches that URL's host alone (on the schemes and ports its
//! grant allows), when the plugin's granted hosts cover the URL; a
//! redirect to another host fails in the guest as a request to a host not
//! granted.
//!
//! The same arguments give the narrower scopes a person may save an
//! approval for ([`scopes`]): the directory of the path, the host of the URL.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolhost_policy::approvals::Scope;

use crate::call::Call;
use crate::error::CallError;
use crate::grants::DirAccess;
use crate::grants::HostPattern;
use crate::sandbox::SandboxSpec;

/// The largest file copied into a call's scratch directory when a hard
/// link cannot be made (64 MiB).
pub(crate) const MAX_COPY_BYTES: u64 = 64 * 1024 * 1024;

/// A call's own sandbox spec, and the scratch directory it needs for as
/// long as the call runs.
pub(crate) struct Narrowed {
    pub spec: Arc<SandboxSpec>,
    _scratch: Option<tempfile::TempDir>,
}

/// The call's narrowed sandbox, when its tool names a path argument (and
/// its plugin has directories granted) or a URL argument; `None` otherwise.
pub(crate) fn narrow(call: &Call<'_>, args: &Value) -> Result<Option<Narrowed>, CallError> {
    let plugin = &call.target.plugin;
    let Some(declared) = plugin.manifest.tools.get(&call.target.spec().name) else {
        return Ok(None);
    };
    let path = declared
        .path_arg
        .as_deref()
        .filter(|_| !plugin.sandbox.dirs.is_empty());
    if path.is_none() && declared.url_arg.is_none() {
        return Ok(None);
    }
    let mut spec = (*plugin.sandbox).clone();
    let mut scratch = None;
    if let Some(pointer) = path {
        let (dirs, dir) = narrow_dirs(call, args, pointer)?;
        spec.dirs = dirs;
        scratch = Some(dir);
    }
    if let Some(pointer) = &declared.url_arg {
        spec.only_host = Some(only_host(call, args, pointer)?);
    }
    Ok(Some(Narrowed {
        spec: Arc::new(spec),
        _scratch: scratch,
    }))
}

/// The one host a call with a URL argument reaches (any scheme and port
/// the grant allows for it), when the plugin's grant covers the URL;
/// `Err` when it does not. A missing argument, or one that is not a URL,
/// reaches no host.
fn only_host(call: &Call<'_>, args: &Value, pointer: &str) -> Result<HostPattern, CallError> {
    let requested = args.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let refused = || CallError::Denied {
        tool: call.target.tool.to_owned(),
        reason: format!(
            "`{}` is not a URL on a host granted to {}",
            toolhost_text::line(requested, 200),
            call.target.plugin.name
        ),
    };
    let host = HostPattern::of_url(requested, false).ok_or_else(refused)?;
    if call
        .target
        .plugin
        .sandbox
        .hosts
        .iter()
        .any(|g| g.matches_url(requested))
    {
        Ok(host)
    } else {
        Err(refused())
    }
}

/// The scopes narrower than "any arguments" and wider than "these
/// arguments" that an approval of this call may be saved for: the
/// directory its path argument names (or lies in), inside the plugin's
/// granted directories; the host its URL argument names. Empty for a tool
/// whose manifest names neither.
pub(crate) fn scopes(call: &Call<'_>, args: &Value) -> Vec<Scope> {
    let plugin = &call.target.plugin;
    let Some(declared) = plugin.manifest.tools.get(&call.target.spec().name) else {
        return Vec::new();
    };
    let mut scopes = Vec::new();
    if let Some(pointer) = &declared.path_arg
        && let Some(raw) = args.pointer(pointer).and_then(Value::as_str)
        && let Some((base, _, _)) = plugin.sandbox.dirs.first()
        && let Some(lexical) = toolhost_policy::approvals::resolve_path(raw, Some(base))
    {
        let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let directory = match std::fs::canonicalize(&lexical) {
            Ok(found) if found.is_dir() => Some(found),
            Ok(found) => found.parent().map(Path::to_path_buf),
            Err(_) => lexical.parent().map(real),
        };
        if let Some(directory) = directory
            && plugin
                .sandbox
                .dirs
                .iter()
                .any(|(granted, _, _)| directory.starts_with(real(granted)))
        {
            scopes.push(Scope::Directory {
                argument: pointer.clone(),
                directory,
            });
        }
    }
    if let Some(pointer) = &declared.url_arg
        && let Some(host) = args
            .pointer(pointer)
            .and_then(Value::as_str)
            .and_then(|url| HostPattern::of_url(url, false))
    {
        scopes.push(Scope::Host {
            argument: pointer.clone(),
            host,
        });
    }
    scopes
}

/// A sandbox's directories: `(host path, guest path, access)`.
type Dirs = Vec<(PathBuf, String, DirAccess)>;

/// The directories a call with a path argument reaches (see the module's
/// text), and the scratch directory that stands for its grant.
fn narrow_dirs(
    call: &Call<'_>,
    args: &Value,
    pointer: &str,
) -> Result<(Dirs, tempfile::TempDir), CallError> {
    let plugin = &call.target.plugin;
    let tool = call.target.spec();
    let spec = &plugin.sandbox;
    let Some((_, root_guest, _)) = spec.dirs.first() else {
        return Err(host_error(call, "no directory is granted".to_owned()));
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
    Ok((dirs, scratch))
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
