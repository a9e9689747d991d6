//! The path a per-call grant hands a plugin (`narrow.rs`), opened once.
//!
//! A tool whose manifest names its path argument (`path-arg = "/path"`)
//! has that path resolved on the host exactly once, when the call is
//! admitted, before the policy decides. Everything after is about the
//! object found then, held open until the call ends: the policy's path
//! rules and saved approvals' "this directory" judge where it really is
//! (`toolhost_policy::PathContext`), the person is asked about it, and
//! the sandbox is given that very file or directory. A link swapped in
//! while the call waits for an answer changes nothing, since the name is
//! never looked up again.
//!
//! How: the path is opened with `O_PATH` (no reading, no side effects,
//! so a FIFO or a device is never opened for I/O), following links, as
//! the plugin would; where the object really is comes from the open
//! descriptor (`/proc/self/fd/N`), not from the name, and must lie inside
//! the grant the path names ([`toolhost_patterns::within`]). A link inside
//! a grant may lead elsewhere inside it; one that leads out is refused.
//! Only a regular file or a directory is handed on. The descriptor then
//! stands for the object: a directory is preopened through it, a file is
//! linked from it (`narrow.rs`).
//!
//! On systems other than Linux the path is resolved by name
//! (`canonicalize`) when the call is admitted and again when the sandbox
//! is made, as before; docs/security/plugins.md says so.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use toolhost_policy::PathContext;

use crate::call::Call;
use crate::error::CallError;
use crate::sandbox::HostDir;

/// A call's path argument, resolved once (see the module's text).
#[derive(Debug)]
pub(crate) struct OpenedPath {
    /// The argument's JSON pointer (`/path`).
    pub pointer: String,
    /// Where it points, when it names a path at all (a missing or empty
    /// argument names none: the plugin finds nothing).
    pub at: Option<Located>,
}

/// Where a path argument points: its grant, and what was there.
#[derive(Debug)]
pub(crate) struct Located {
    /// The path in the guest, normalised.
    pub guest: PathBuf,
    /// The index of the grant it lies in, in the plugin's directories.
    pub grant: usize,
    /// The path below that grant's root.
    pub below: PathBuf,
    /// What was there when it was opened; `None`: nothing (or nothing the
    /// host could open).
    pub found: Option<Found>,
}

/// The object a path argument named when it was opened.
#[derive(Debug)]
pub(crate) struct Found {
    /// Where it really is (links followed), from the descriptor.
    pub real: PathBuf,
    pub kind: Kind,
    /// The object itself, open (`O_PATH`) until the call ends.
    pub handle: Handle,
}

/// A regular file or a directory: nothing else is handed to a plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Directory,
}

/// The object, held: its descriptor on Linux, its real path elsewhere.
#[derive(Debug, Clone)]
pub(crate) struct Handle(HostDir);

impl Handle {
    /// The object as a directory to preopen.
    pub(crate) fn as_dir(&self) -> HostDir {
        self.0.clone()
    }

    /// A path that reaches the object itself (`/proc/self/fd/N` on Linux).
    pub(crate) fn path(&self) -> PathBuf {
        self.0.open_path()
    }
}

impl OpenedPath {
    /// How the call's path arguments resolve, for the policy and saved
    /// approvals: `base` for relative paths, and this argument as opened.
    pub(crate) fn context<'a>(
        this: Option<&'a OpenedPath>,
        base: Option<&'a Path>,
    ) -> PathContext<'a> {
        let mut paths = PathContext::default();
        if let Some(base) = base {
            paths = paths.base(base);
        }
        if let Some(opened) = this {
            let real = opened
                .at
                .as_ref()
                .and_then(|at| at.found.as_ref())
                .map(|f| f.real.as_path());
            paths = paths.opened(&opened.pointer, real);
        }
        paths
    }
}

/// Opens the path argument of `call` with `args`, when its tool names one
/// (`path-arg`) and its plugin has directories granted; `None` otherwise.
/// A path outside every grant, or one whose object lies outside the grant
/// it names (a link leading out), or that is neither a file nor a
/// directory, is refused before anything else is decided.
pub(crate) fn open(call: &Call<'_>, args: &Value) -> Result<Option<OpenedPath>, CallError> {
    let plugin = &call.target.plugin;
    let dirs = &plugin.sandbox.dirs;
    let Some(pointer) = plugin
        .manifest
        .tools
        .get(&call.target.spec().name)
        .and_then(|declared| declared.path_arg.as_deref())
    else {
        return Ok(None);
    };
    let Some(first) = dirs.first() else {
        return Ok(None);
    };
    let refuse = |what: &str, requested: &str| CallError::Denied {
        tool: call.target.tool.to_owned(),
        reason: format!(
            "`{}` {what} the directories granted to {}",
            toolhost_text::line(requested, 200),
            plugin.name
        ),
    };
    let requested = args.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    let Some(guest) = toolhost_patterns::resolve(requested, Some(Path::new(&first.guest)))
        .filter(|_| !requested.is_empty())
    else {
        return Ok(Some(OpenedPath {
            pointer: pointer.to_owned(),
            at: None,
        }));
    };
    // The grant it lies in: the longest guest path that holds it.
    let Some((grant, root)) = dirs
        .iter()
        .enumerate()
        .filter(|(_, d)| toolhost_patterns::within(&guest, Path::new(&d.guest)))
        .max_by_key(|(_, d)| d.guest.len())
    else {
        return Err(refuse("is outside", requested));
    };
    let below = guest
        .strip_prefix(&root.guest)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let HostDir::Path(host_root) = &root.host else {
        // A plugin's grants are always paths; only a call's are opened.
        return Err(refuse("is outside", requested));
    };
    let found = match open_object(&host_root.join(&below)) {
        None => None,
        Some((real, kind, handle)) => {
            if !toolhost_patterns::within(&real, host_root) {
                return Err(refuse("leads outside", requested));
            }
            let Some(kind) = kind else {
                return Err(CallError::Denied {
                    tool: call.target.tool.to_owned(),
                    reason: format!(
                        "`{}` is neither a regular file nor a directory",
                        toolhost_text::line(requested, 200)
                    ),
                });
            };
            Some(Found { real, kind, handle })
        }
    };
    Ok(Some(OpenedPath {
        pointer: pointer.to_owned(),
        at: Some(Located {
            guest,
            grant,
            below,
            found,
        }),
    }))
}

/// Opens what `path` names (links followed): where it really is, whether
/// it is a file or a directory (`None`: something else), and the object
/// held. `None` when nothing can be opened there.
#[cfg(target_os = "linux")]
fn open_object(path: &Path) -> Option<(PathBuf, Option<Kind>, Handle)> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::os::fd::AsRawFd;

    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let kind = match FileType::from_raw_mode(rustix::fs::fstat(&fd).ok()?.st_mode) {
        FileType::RegularFile => Some(Kind::File),
        FileType::Directory => Some(Kind::Directory),
        _ => None,
    };
    Some((real, kind, Handle(HostDir::Opened(Arc::new(fd)))))
}

/// Resolves what `path` names by name (see the module's text).
#[cfg(not(target_os = "linux"))]
fn open_object(path: &Path) -> Option<(PathBuf, Option<Kind>, Handle)> {
    let real = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    let kind = if meta.is_file() {
        Some(Kind::File)
    } else if meta.is_dir() {
        Some(Kind::Directory)
    } else {
        None
    };
    Some((real.clone(), kind, Handle(HostDir::Path(real))))
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_known_by_where_it_is_not_by_the_name_it_was_opened_by() {
        let scene = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(scene.path()).unwrap();
        std::fs::create_dir(root.join("secret")).unwrap();
        std::fs::write(root.join("secret/key.txt"), "k").unwrap();
        std::os::unix::fs::symlink(root.join("secret/key.txt"), root.join("todo.txt")).unwrap();
        let (real, kind, handle) = open_object(&root.join("todo.txt")).unwrap();
        assert_eq!(real, root.join("secret/key.txt"));
        assert_eq!(kind, Some(Kind::File));
        // The name now leads elsewhere; the object held is the same.
        std::fs::remove_file(root.join("todo.txt")).unwrap();
        std::fs::write(root.join("todo.txt"), "note").unwrap();
        let held = std::fs::read_link(handle.path()).unwrap();
        assert_eq!(held, root.join("secret/key.txt"));
        assert!(open_object(&root.join("missing")).is_none());
        let (_, kind, _) = open_object(&root.join("secret")).unwrap();
        assert_eq!(kind, Some(Kind::Directory));
    }

    #[test]
    fn a_fifo_is_opened_without_blocking_and_is_neither_file_nor_directory() {
        let scene = tempfile::tempdir().unwrap();
        let fifo = scene.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (_, kind, _) = open_object(&fifo).unwrap();
        assert_eq!(kind, None);
    }
}
