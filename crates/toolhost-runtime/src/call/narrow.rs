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
//! The path is opened once, when the call is admitted (`opened.rs`): it
//! must lie in a granted directory after `..` and symbolic links are
//! resolved on the host, otherwise the call is refused before anything
//! else is decided; and what is handed to the guest here is the object
//! opened then (a directory through its descriptor, a file linked from
//! it), never the path looked up again. Access is read-only unless the
//! tool is not annotated read-only and the grant is read-write.
//!
//! A tool whose manifest names its URL argument (`[tools.http_get] url-arg
//! = "/url"`) reaches that URL's host alone (on the schemes and ports its
//! grant allows), when the plugin's granted hosts cover the URL; a
//! redirect to another host fails in the guest as a request to a host not
//! granted.
//!
//! The same arguments give the narrower scopes a person may save an
//! approval for ([`scopes`]): the directory of the path, the host of the URL.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use toolhost_policy::approvals::Scope;

use crate::call::Call;
use crate::call::opened::{Found, Kind, Located, OpenedPath};
use crate::error::CallError;
use crate::grants::{DirAccess, HostPattern};
use crate::sandbox::{HostDir, Preopen, SandboxSpec};
use crate::scratch::{Scratch, Scratches};

/// The largest file copied into a call's scratch directory when a hard
/// link cannot be made (64 MiB).
pub(crate) const MAX_COPY_BYTES: u64 = 64 * 1024 * 1024;

/// A call's own sandbox spec, and the scratch directory it needs for as
/// long as the call runs (`scratch.rs`).
pub(crate) struct Narrowed {
    pub spec: Arc<SandboxSpec>,
    _scratch: Option<Scratch>,
}

/// The call's narrowed sandbox, when its path argument was opened
/// (`opened`, see `opened.rs`) or its tool names a URL argument; `None`
/// otherwise.
pub(crate) fn narrow(
    call: &Call<'_>,
    args: &Value,
    opened: Option<&OpenedPath>,
    scratches: &Scratches,
) -> Result<Option<Narrowed>, CallError> {
    let plugin = &call.target.plugin;
    let url_arg = plugin
        .manifest
        .tools
        .get(&call.target.spec().name)
        .and_then(|declared| declared.url_arg.as_deref());
    if opened.is_none() && url_arg.is_none() {
        return Ok(None);
    }
    let mut spec = (*plugin.sandbox).clone();
    let mut scratch = None;
    if let Some(opened) = opened {
        let (dirs, dir) = grant_path(call, opened, scratches)?;
        spec.dirs = dirs;
        scratch = Some(dir);
    }
    if let Some(pointer) = url_arg {
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
/// directory its opened path is (or lies in), inside its grant; the host
/// its URL argument names. Empty for a tool whose manifest names neither.
pub(crate) fn scopes(call: &Call<'_>, args: &Value, opened: Option<&OpenedPath>) -> Vec<Scope> {
    let plugin = &call.target.plugin;
    let mut scopes = Vec::new();
    if let Some(opened) = opened
        && let Some(at) = &opened.at
        && let Some(HostDir::Path(root)) = plugin.sandbox.dirs.get(at.grant).map(|d| &d.host)
    {
        let directory = match &at.found {
            Some(found) if found.kind == Kind::Directory => Some(found.real.clone()),
            Some(found) => found.real.parent().map(Path::to_path_buf),
            // Not there: the directory it would be in.
            None => root
                .join(&at.below)
                .parent()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())),
        };
        if let Some(directory) = directory
            && toolhost_patterns::within(&directory, root)
        {
            scopes.push(Scope::Directory {
                argument: opened.pointer.clone(),
                directory,
            });
        }
    }
    if let Some(pointer) = plugin
        .manifest
        .tools
        .get(&call.target.spec().name)
        .and_then(|declared| declared.url_arg.as_ref())
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

/// The directories a call whose path argument was opened reaches (see the
/// module's text), and the scratch directory that stands for its grant:
/// the first grant is always there, at its usual guest path, so relative
/// paths resolve as they always do.
fn grant_path(
    call: &Call<'_>,
    opened: &OpenedPath,
    scratches: &Scratches,
) -> Result<(Vec<Preopen>, Scratch), CallError> {
    let grants = &call.target.plugin.sandbox.dirs;
    let Some(first) = grants.first() else {
        return Err(host_error(call, "no directory is granted".to_owned()));
    };
    let mut scratch = scratches.take().map_err(|e| {
        host_error(
            call,
            format!("cannot make the call's scratch directory: {e}"),
        )
    })?;
    let first_mirror = scratch.mirror(0).map_err(|e| prepare(call, &e))?;
    let mut dirs = vec![Preopen {
        host: HostDir::Path(first_mirror.clone()),
        guest: first.guest.clone(),
        access: DirAccess::ReadOnly,
    }];
    // A missing argument, or a path with nothing there: the guest finds
    // nothing.
    let Some((at, found)) = opened
        .at
        .as_ref()
        .and_then(|at| Some((at, at.found.as_ref()?)))
    else {
        return Ok((dirs, scratch));
    };
    let Some(grant) = grants.get(at.grant) else {
        return Err(host_error(call, "the path's grant is gone".to_owned()));
    };
    let writes = !call.target.spec().annotations.read_only && grant.access == DirAccess::ReadWrite;
    let access = if writes {
        DirAccess::ReadWrite
    } else {
        DirAccess::ReadOnly
    };
    if found.kind == Kind::Directory && at.below.as_os_str().is_empty() {
        // A whole granted directory: the grant itself, as it was opened.
        let whole = Preopen {
            host: found.handle.as_dir(),
            guest: grant.guest.clone(),
            access,
        };
        if at.grant == 0 {
            dirs[0] = whole;
        } else {
            dirs.push(whole);
        }
        return Ok((dirs, scratch));
    }
    // The way down, inside the scratch directory that stands for its grant
    // (the first's, or one of its own).
    let base = if at.grant == 0 {
        first_mirror
    } else {
        let base = scratch.mirror(1).map_err(|e| prepare(call, &e))?;
        dirs.push(Preopen {
            host: HostDir::Path(base.clone()),
            guest: grant.guest.clone(),
            access: DirAccess::ReadOnly,
        });
        base
    };
    match found.kind {
        Kind::Directory => dirs.push(directory(call, &mut scratch, &base, at, found, access)?),
        Kind::File => file(call, &mut scratch, &base, at, found, writes)?,
    }
    Ok((dirs, scratch))
}

/// A directory below a grant: the way down to it in the mirror `base`, and
/// the directory itself, preopened at its guest path through the
/// descriptor it was opened with (the guest's path lookup takes the
/// longest matching preopen).
fn directory(
    call: &Call<'_>,
    scratch: &mut Scratch,
    base: &Path,
    at: &Located,
    found: &Found,
    access: DirAccess,
) -> Result<Preopen, CallError> {
    scratch
        .make_dirs(base, &at.below)
        .map_err(|e| prepare(call, &e))?;
    Ok(Preopen {
        host: found.handle.as_dir(),
        guest: at.guest.display().to_string(),
        access,
    })
}

/// A file below a grant: the way down to it in the mirror `base`, and the
/// file there, linked from the object that was opened.
fn file(
    call: &Call<'_>,
    scratch: &mut Scratch,
    base: &Path,
    at: &Located,
    found: &Found,
    writes: bool,
) -> Result<(), CallError> {
    if let Some(way) = at.below.parent() {
        scratch
            .make_dirs(base, way)
            .map_err(|e| prepare(call, &e))?;
    }
    let placed = base.join(&at.below);
    place_file(&found.handle.path(), &placed, writes).map_err(|e| host_error(call, e))?;
    scratch.added_file(placed);
    Ok(())
}

/// Puts the file `object` (a path that reaches the opened file itself) at
/// `at`: a hard link, or (read-only, across file systems) a bounded copy.
fn place_file(object: &Path, at: &Path, writes: bool) -> Result<(), String> {
    match link(object, at) {
        Ok(()) => Ok(()),
        Err(_) if !writes => {
            let mut from = std::fs::File::open(object)
                .map_err(|e| format!("cannot read the file for the call: {e}"))?;
            let size = from
                .metadata()
                .map_err(|e| format!("cannot read the file's size: {e}"))?
                .len();
            if size > MAX_COPY_BYTES {
                return Err(format!(
                    "the file is on another file system than the call's scratch directory and \
                     larger than {} MiB, so it cannot be granted alone",
                    MAX_COPY_BYTES / (1024 * 1024)
                ));
            }
            let mut to = std::fs::File::create(at)
                .map_err(|e| format!("cannot copy the file for the call: {e}"))?;
            // Bounded again: the file may grow while it is copied.
            std::io::copy(&mut std::io::Read::take(&mut from, MAX_COPY_BYTES), &mut to)
                .map(|_| ())
                .map_err(|e| format!("cannot copy the file for the call: {e}"))
        }
        Err(e) => Err(format!(
            "cannot grant the file alone to a tool that writes (no hard link: {e})"
        )),
    }
}

/// A hard link at `at` to the object `object` reaches: on Linux the
/// opened file itself (`/proc/self/fd/N`, followed).
#[cfg(target_os = "linux")]
fn link(object: &Path, at: &Path) -> std::io::Result<()> {
    use rustix::fs::{AtFlags, CWD};
    rustix::fs::linkat(CWD, object, CWD, at, AtFlags::SYMLINK_FOLLOW).map_err(Into::into)
}

#[cfg(not(target_os = "linux"))]
fn link(object: &Path, at: &Path) -> std::io::Result<()> {
    std::fs::hard_link(object, at)
}

fn prepare(call: &Call<'_>, e: &std::io::Error) -> CallError {
    host_error(call, format!("cannot prepare the call's directory: {e}"))
}

fn host_error(call: &Call<'_>, message: String) -> CallError {
    CallError::Host {
        tool: call.target.tool.to_owned(),
        message,
    }
}
