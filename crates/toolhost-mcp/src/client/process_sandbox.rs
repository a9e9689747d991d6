//! The process sandbox of a stdio server: bubblewrap's arguments for a
//! [`ProcessSandbox`], with the server's own files mounted back where the
//! sandbox's empty `/tmp` or a `hide` would cover them, and the seccomp
//! filter bubblewrap applies to everything in the sandbox (its own pid 1
//! included).
//!
//! The filter promises that no process in the sandbox gets a Unix-domain
//! socket that can reach outside it, unless [`ProcessSandbox::unix_sockets`]
//! allows them: a socket is made only by `socket` and `socketpair`, which
//! it allows for listed families and kinds only ([`seccomp_filter`]);
//! io_uring, which makes sockets its own way, is refused; so are x32
//! system call numbers, which a filter on the plain numbers would miss.
//! What is left: a connected `AF_UNIX` pair (stream or seqpacket), which
//! reaches only its own other end; `open` of a socket's path fails
//! (`ENXIO`); the sandbox's PID namespace shows no process outside it
//! (no `pidfd_getfd` or `/proc/PID/fd` of one); and the server inherits
//! no descriptor but its stdin, stdout and stderr (pipes) and the
//! filter's (`connect.rs` marks every other close-on-exec), so there is
//! no socket to `accept` on or to receive `SCM_RIGHTS` from.

use std::path::{Component, Path, PathBuf};

use super::config::{ProcessSandbox, StdioServer};

/// bubblewrap's arguments for `sandbox`: see [`ProcessSandbox`].
///
/// After the fixed base (`/` read-only, `/tmp` and `/dev/shm` empty), the
/// sandbox's own mounts go shallowest first, so the most specific path
/// wins: a `hide` inside a granted directory stays hidden, a `write`
/// inside a hidden one stays writable. Among them are the server's own
/// files that an empty `/tmp` or a `hide` would cover (see [`OwnFiles`]),
/// read-only, or writable where a `write` grant covers them.
pub(crate) fn bwrap_args(
    sandbox: &ProcessSandbox,
    server: &StdioServer,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/dev/shm",
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if sandbox.network {
        args.push("--share-net".into());
    }
    let cwd = server.cwd.clone().or_else(|| std::env::current_dir().ok());
    // Resolved, as bubblewrap does not follow a symlink that the sandbox
    // leaves dangling (one into `/tmp`); one that cannot be resolved is
    // kept as given, and bubblewrap refuses to start.
    let resolved = |dir: &PathBuf| dir.canonicalize().unwrap_or_else(|_| dir.clone());
    // A `hide` that does not exist hides nothing (`~/.ssh` on a machine
    // without one): bubblewrap could not make its mount point in the
    // read-only tree, and would refuse to start.
    let hide: Vec<&PathBuf> = sandbox.hide.iter().filter(|dir| dir.exists()).collect();
    let mut mounts: Vec<Mount> = hide
        .iter()
        .copied()
        .map(resolved)
        .map(Mount::Hide)
        .collect();
    let writable = |path: &Path| {
        sandbox
            .write
            .iter()
            .flat_map(|dir| forms(dir))
            .any(|dir| path.starts_with(dir))
    };
    for mount in OwnFiles::new(sandbox, server).find(server, cwd.as_deref()) {
        mounts.push(match mount {
            Mount::ReadOnly { src, dest } if writable(&src) || writable(&dest) => {
                Mount::Write { src, dest }
            }
            other => other,
        });
    }
    mounts.extend(sandbox.write.iter().map(resolved).map(|dir| Mount::Write {
        src: dir.clone(),
        dest: dir,
    }));
    if !sandbox.git_writable {
        // `.git/hooks/*` and `.git/config` run outside the sandbox at the
        // user's next `git` command: read-only inside a writable directory.
        mounts.extend(
            sandbox
                .write
                .iter()
                .map(resolved)
                .map(|dir| dir.join(".git"))
                .filter(|git| git.exists())
                .map(|git| Mount::ReadOnly {
                    src: git.clone(),
                    dest: git,
                }),
        );
    }
    // A hidden directory inside a directory mounted (back) is hidden there
    // again: deeper, so after it.
    let hidden: Vec<PathBuf> = hide.iter().copied().map(resolved).collect();
    let again: Vec<Mount> = mounts
        .iter()
        .filter_map(Mount::bind)
        .flat_map(|(src, dest)| {
            hidden
                .iter()
                .filter_map(move |h| h.strip_prefix(src).ok().map(|rel| (rel, dest)))
                .filter(|(rel, _)| !rel.as_os_str().is_empty())
                .map(|(rel, dest)| Mount::Hide(dest.join(rel)))
        })
        .collect();
    mounts.extend(again);
    let mut unique: Vec<Mount> = Vec::with_capacity(mounts.len());
    for mount in mounts {
        if !unique.contains(&mount) {
            unique.push(mount);
        }
    }
    // Stable: the same depth keeps hide (and new directories), read-only,
    // write, in config order.
    unique.sort_by_key(|m| (m.dest().components().count(), m.rank()));
    for mount in unique {
        match mount {
            Mount::Hide(dir) => args.extend(["--tmpfs".into(), dir.into_os_string()]),
            Mount::Dir(dir) => args.extend(["--dir".into(), dir.into_os_string()]),
            Mount::ReadOnly { src, dest } => args.extend([
                "--ro-bind".into(),
                src.into_os_string(),
                dest.into_os_string(),
            ]),
            Mount::Write { src, dest } => {
                args.extend(["--bind".into(), src.into_os_string(), dest.into_os_string()]);
            }
        }
    }
    if let Some(cwd) = cwd {
        args.extend(["--chdir".into(), cwd.into_os_string()]);
    }
    args.extend(["--seccomp".into(), SECCOMP_FD.to_string().into()]);
    args
}

/// The child's file descriptor bubblewrap reads the seccomp filter from.
pub(crate) const SECCOMP_FD: i32 = 3;

/// Why the seccomp filter could not be built: an architecture seccompiler
/// does not know (it knows x86_64, aarch64 and riscv64).
#[cfg(target_os = "linux")]
#[derive(Debug, thiserror::Error)]
#[error("cannot build the process sandbox's seccomp filter: {0}")]
pub(crate) struct FilterError(#[from] seccompiler::BackendError);

/// The socket families a sandboxed server may open, besides `AF_UNIX` when
/// [`ProcessSandbox::unix_sockets`] allows it: IP (the network when it is
/// granted, else the sandbox's own loopback) and netlink, only
/// `NETLINK_ROUTE` (read by `getaddrinfo`'s `AI_ADDRCONFIG` and
/// `getifaddrs`; changing it needs privileges the sandbox does not have).
#[cfg(target_os = "linux")]
const FAMILIES: [libc::c_int; 3] = [libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

/// The kinds of `AF_UNIX` socket pair a sandboxed server may make: the
/// connected ones, which the kernel never lets point elsewhere (`connect`
/// and `sendto` to an address fail with `EISCONN`, or the address is
/// ignored), as runtimes make for their own pipes (Python's asyncio,
/// libuv's child processes). A datagram pair can be re-connected: refused.
#[cfg(target_os = "linux")]
const PAIR_KINDS: [libc::c_int; 2] = [libc::SOCK_STREAM, libc::SOCK_SEQPACKET];

/// The bits of a socket's type that say its kind (the kernel's
/// `SOCK_TYPE_MASK`; the others are `SOCK_NONBLOCK` and `SOCK_CLOEXEC`).
#[cfg(target_os = "linux")]
const SOCK_TYPE_MASK: u64 = 0xf;

/// The seccomp filter of every process sandbox, as the cBPF program
/// bubblewrap's `--seccomp FD` takes. For sockets it says what is allowed,
/// not what is refused; every call it refuses fails with `EACCES`:
///
/// - `socket` only for the [`FAMILIES`] (netlink only `NETLINK_ROUTE`),
///   and `AF_UNIX` when `unix_sockets`;
/// - `socketpair` only for `AF_UNIX`, and only the [`PAIR_KINDS`] unless
///   `unix_sockets`;
/// - no io_uring (`io_uring_setup`, `_enter`, `_register`): its
///   operations are not system calls, so no rule sees them, and its
///   `IORING_OP_SOCKET` makes a socket without `socket()`; no
///   `pidfd_getfd`;
/// - on x86_64, no system call numbered with the x32 bit ([`x32_prologue`]);
///   and a call made for another architecture (i386's `int 0x80`) kills
///   the process (seccompiler's architecture check).
///
/// Arguments are compared as the kernel reads them, as an `int` (the low
/// 32 bits), so high bits cannot hide a family. Every other call is
/// allowed.
#[cfg(target_os = "linux")]
pub(crate) fn seccomp_filter(unix_sockets: bool) -> Result<Vec<u8>, FilterError> {
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    // Argument `index` of the call, compared as an `int`.
    let arg = |index: u8, op: SeccompCmpOp, value: libc::c_int| {
        SeccompCondition::new(
            index,
            SeccompCmpArgLen::Dword,
            op,
            value.unsigned_abs().into(),
        )
    };
    let mut families = FAMILIES.to_vec();
    if unix_sockets {
        families.push(libc::AF_UNIX);
    }
    // A rule refuses the call when all its conditions hold; a call with
    // several rules is refused when any holds.
    let socket = vec![
        // A family not listed.
        SeccompRule::new(
            families
                .iter()
                .map(|&family| arg(0, SeccompCmpOp::Ne, family))
                .collect::<Result<_, _>>()?,
        )?,
        // Netlink other than the routing tables.
        SeccompRule::new(vec![
            arg(0, SeccompCmpOp::Eq, libc::AF_NETLINK)?,
            arg(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE)?,
        ])?,
    ];
    let mut socketpair = vec![SeccompRule::new(vec![arg(
        0,
        SeccompCmpOp::Ne,
        libc::AF_UNIX,
    )?])?];
    if !unix_sockets {
        // A kind not listed: every other value of the kind's bits.
        let allowed: Vec<u64> = PAIR_KINDS
            .iter()
            .map(|kind| u64::from(kind.unsigned_abs()))
            .collect();
        for kind in (0..=SOCK_TYPE_MASK).filter(|kind| !allowed.contains(kind)) {
            socketpair.push(SeccompRule::new(vec![SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
                kind,
            )?])?);
        }
    }
    let rules = [
        (libc::SYS_socket, socket),
        (libc::SYS_socketpair, socketpair),
        (libc::SYS_io_uring_setup, Vec::new()),
        (libc::SYS_io_uring_enter, Vec::new()),
        (libc::SYS_io_uring_register, Vec::new()),
        (libc::SYS_pidfd_getfd, Vec::new()),
    ];
    let eacces = libc::EACCES.unsigned_abs();
    let filter = SeccompFilter::new(
        rules.into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(eacces),
        TargetArch::try_from(std::env::consts::ARCH)?,
    )?;
    let mut program: BpfProgram = Vec::new();
    #[cfg(target_arch = "x86_64")]
    program.extend(x32_prologue(eacces));
    program.extend(BpfProgram::try_from(filter)?);
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for op in program {
        bytes.extend_from_slice(&op.code.to_ne_bytes());
        bytes.push(op.jt);
        bytes.push(op.jf);
        bytes.extend_from_slice(&op.k.to_ne_bytes());
    }
    Ok(bytes)
}

/// On x86_64, the bit that marks a system call number as x32's.
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// cBPF that refuses (`errno`) every system call numbered at or above the
/// x32 bit, put before seccompiler's program, which cannot say it: an x32
/// call passes its architecture check (it is `AUDIT_ARCH_X86_64` too),
/// and its number matches none of its rules, so on a kernel with x32 it
/// would reach `socket` unfiltered. (libseccomp's filters do the same.)
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn x32_prologue(errno: u32) -> [seccompiler::sock_filter; 3] {
    use seccompiler::sock_filter;
    // linux/bpf_common.h: BPF_LD | BPF_W | BPF_ABS, BPF_JMP | BPF_JGE |
    // BPF_K, BPF_RET | BPF_K; `seccomp_data.nr` is at offset 0.
    const LOAD_WORD: u16 = 0x20;
    const JUMP_IF_AT_LEAST: u16 = 0x35;
    const RETURN: u16 = 0x06;
    [
        sock_filter {
            code: LOAD_WORD,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: JUMP_IF_AT_LEAST,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: RETURN,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | errno,
        },
    ]
}

/// One of the sandbox's own mounts, after the fixed base.
#[derive(Debug, PartialEq, Eq)]
enum Mount {
    /// An empty directory over `dest`.
    Hide(PathBuf),
    /// An empty directory at `dest` if there is none (one that a path
    /// with `..` goes through).
    Dir(PathBuf),
    /// `src` at `dest`, read-only.
    ReadOnly { src: PathBuf, dest: PathBuf },
    /// `src` at `dest`, writable.
    Write { src: PathBuf, dest: PathBuf },
}

impl Mount {
    fn dest(&self) -> &Path {
        match self {
            Mount::Hide(dest)
            | Mount::Dir(dest)
            | Mount::ReadOnly { dest, .. }
            | Mount::Write { dest, .. } => dest,
        }
    }

    /// A bind mount's source and destination.
    fn bind(&self) -> Option<(&Path, &Path)> {
        match self {
            Mount::ReadOnly { src, dest } | Mount::Write { src, dest } => Some((src, dest)),
            Mount::Hide(_) | Mount::Dir(_) => None,
        }
    }

    /// At the same depth: hide, then read-only, then writable.
    fn rank(&self) -> u8 {
        match self {
            Mount::Hide(_) | Mount::Dir(_) => 0,
            Mount::ReadOnly { .. } => 1,
            Mount::Write { .. } => 2,
        }
    }
}

/// `path` as given and, when it differs, with its symlinks resolved.
fn forms(path: &Path) -> Vec<PathBuf> {
    let mut all = vec![path.to_path_buf()];
    if let Ok(real) = path.canonicalize()
        && real != path
    {
        all.push(real);
    }
    all
}

/// How many `#!` lines are followed from the program (a script run by a
/// script run by a binary).
const SHEBANG_DEPTH: u8 = 2;
/// The most of a `#!` line read.
const SHEBANG_BYTES: u64 = 256;
/// The most of a venv's `pyvenv.cfg` read.
const PYVENV_CFG_BYTES: u64 = 64 * 1024;

/// The server's own files that the sandbox's empty `/tmp` or a `hide`
/// would cover, to mount back read-only: its program's tree (a `bin/` or
/// `.bin/` directory's parent — a venv, a prefix, `node_modules` — else
/// its directory), the same for the file its symlinks lead to, for the
/// interpreter of its `#!` line and for a venv's base interpreter; the
/// directory of its script (the first argument that is a file), other
/// files named in its arguments, and its working directory.
///
/// Paths come from a configuration: ones that do not exist are ignored.
/// Never mounted back: `/tmp`, `HOME`, a directory holding either, or a
/// hidden directory itself; a narrower path is taken instead (the
/// program's directory, then the file alone). A hidden directory inside
/// one mounted back is hidden again ([`bwrap_args`]).
struct OwnFiles {
    /// The directories the sandbox covers, as given and resolved.
    covered: Vec<PathBuf>,
    /// Paths never mounted back whole, nor any directory above them.
    too_wide: Vec<PathBuf>,
    /// Found so far: read-only mounts and directories to make.
    found: Vec<Mount>,
}

impl OwnFiles {
    fn new(sandbox: &ProcessSandbox, server: &StdioServer) -> Self {
        let covered: Vec<PathBuf> = [Path::new("/tmp"), Path::new("/dev/shm")]
            .into_iter()
            .chain(sandbox.hide.iter().map(PathBuf::as_path))
            .flat_map(forms)
            .collect();
        let homes = std::env::var_os("HOME")
            .map(PathBuf::from)
            .into_iter()
            .chain(
                server
                    .env
                    .iter()
                    .filter(|(k, _)| k == "HOME")
                    .map(|(_, v)| PathBuf::from(v)),
            );
        let too_wide = homes
            .chain([PathBuf::from("/tmp")])
            .flat_map(|p| forms(&p))
            .collect();
        OwnFiles {
            covered,
            too_wide,
            found: Vec::new(),
        }
    }

    /// What to mount back for `server`, run in `cwd`.
    fn find(mut self, server: &StdioServer, cwd: Option<&Path>) -> Vec<Mount> {
        let path_var = server
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsString::from(v))
            .or_else(|| std::env::var_os("PATH"));
        let search = Search {
            path_var: path_var.as_deref(),
            cwd,
        };
        if let Some(program) = search.program(&server.command) {
            self.walkable(&program);
            self.program(&program, &search, SHEBANG_DEPTH);
        }
        let mut script = true;
        for arg in &server.args {
            if arg.starts_with('-') {
                continue;
            }
            let Some(path) = search.absolute(Path::new(arg)).filter(|p| p.exists()) else {
                continue;
            };
            self.walkable(&path);
            if !path.is_file() {
                continue;
            }
            let file = path;
            match (script, file.parent()) {
                (true, Some(dir)) => self.first_fitting(&[dir, &file]),
                _ => self.first_fitting(&[&file]),
            }
            script = false;
        }
        if let Some(cwd) = cwd.filter(|c| c.is_dir()) {
            self.walkable(cwd);
            self.first_fitting(&[cwd]);
        }
        self.found
    }

    /// A program's tree, its symlinks' target's, its venv's base
    /// interpreter's and its `#!` interpreter's (`depth` levels deep).
    fn program(&mut self, program: &Path, search: &Search<'_>, depth: u8) {
        let mut files = vec![program.to_path_buf()];
        if let Ok(real) = program.canonicalize()
            && real != program
        {
            files.push(real);
        }
        for file in &files {
            let Some(dir) = file.parent() else { continue };
            match prefix_of(dir) {
                Some(prefix) => self.first_fitting(&[prefix, dir, file]),
                None => self.first_fitting(&[dir, file]),
            }
            if let Some(home) = prefix_of(dir).and_then(venv_home) {
                match prefix_of(&home) {
                    Some(prefix) => self.first_fitting(&[prefix, &home]),
                    None => self.first_fitting(&[&home]),
                }
            }
        }
        if depth > 0
            && let Some(interpreter) = files.last().and_then(|real| search.interpreter(real))
        {
            self.program(&interpreter, search, depth - 1);
        }
    }

    /// Mounts back the first of `candidates` that is not too wide, when
    /// the sandbox covers it.
    fn first_fitting(&mut self, candidates: &[&Path]) {
        let fits = |c: &&&Path| {
            forms(c).iter().all(|form| {
                !self.too_wide.iter().any(|wide| wide.starts_with(form))
                    && !self.covered.contains(form)
            })
        };
        if let Some(chosen) = candidates.iter().find(fits) {
            self.mount_back(chosen);
        }
    }

    /// `path` (resolved) at its resolved place and at the place it is
    /// named by, for each of them the sandbox covers.
    fn mount_back(&mut self, path: &Path) {
        let Ok(real) = path.canonicalize() else {
            return;
        };
        let mut dests = Vec::new();
        if self.covers(&real) {
            dests.push(real.clone());
        }
        let plain = !path.components().any(|c| c == Component::ParentDir);
        if path != real && path.is_absolute() && plain && self.covers(path) {
            dests.push(path.to_path_buf());
        }
        for dest in dests {
            self.add(Mount::ReadOnly {
                src: real.clone(),
                dest,
            });
        }
    }

    /// Makes each directory that `path` goes up from with `..` where the
    /// sandbox covers it: the kernel walks `..` through real directories.
    fn walkable(&mut self, path: &Path) {
        let mut walked = PathBuf::new();
        for part in path.components() {
            if part == Component::ParentDir
                && let Ok(real) = walked.canonicalize()
                && self.covers(&real)
            {
                self.add(Mount::Dir(real));
            }
            walked.push(part);
        }
    }

    /// Whether the sandbox covers `path` (a path inside one it empties).
    fn covers(&self, path: &Path) -> bool {
        self.covered
            .iter()
            .any(|c| path != c && path.starts_with(c))
    }

    fn add(&mut self, mount: Mount) {
        if !self.found.contains(&mount) {
            self.found.push(mount);
        }
    }
}

/// Where the server's program and files are looked for: its `PATH` and
/// working directory.
struct Search<'a> {
    path_var: Option<&'a std::ffi::OsStr>,
    cwd: Option<&'a Path>,
}

impl Search<'_> {
    /// `path`, absolute (relative to the working directory).
    fn absolute(&self, path: &Path) -> Option<PathBuf> {
        if path.is_absolute() {
            Some(path.to_path_buf())
        } else {
            self.cwd.map(|cwd| cwd.join(path))
        }
    }

    /// The file `command` runs, as `execvp` finds it.
    fn program(&self, command: &str) -> Option<PathBuf> {
        if command.is_empty() {
            return None;
        }
        if command.contains('/') {
            return self.absolute(Path::new(command)).filter(|p| p.is_file());
        }
        std::env::split_paths(self.path_var?)
            .filter_map(|dir| self.absolute(&dir.join(command)))
            .find(|p| p.is_file())
    }

    /// The interpreter of a script's `#!` line (through `env`, looked up
    /// on the `PATH`).
    fn interpreter(&self, script: &Path) -> Option<PathBuf> {
        let head = read_head(script, SHEBANG_BYTES)?;
        let line = head.strip_prefix(b"#!")?.split(|&b| b == b'\n').next()?;
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let first = Path::new(words.next()?);
        if first.file_name().is_some_and(|name| name == "env") {
            let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
            return self.program(name);
        }
        (first.is_absolute() && first.is_file()).then(|| first.to_path_buf())
    }
}

/// The parent of a `bin/` or `.bin/` directory: the tree its programs
/// need (a venv, an installation prefix, `node_modules`).
fn prefix_of(dir: &Path) -> Option<&Path> {
    matches!(dir.file_name()?.to_str()?, "bin" | ".bin")
        .then(|| dir.parent())
        .flatten()
}

/// The `home` of a venv's `pyvenv.cfg` (the base interpreter's directory).
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let cfg = read_head(&venv.join("pyvenv.cfg"), PYVENV_CFG_BYTES)?;
    String::from_utf8_lossy(&cfg).lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        let home = PathBuf::from(value.trim());
        (key.trim() == "home" && home.is_absolute() && home.is_dir()).then_some(home)
    })
}

/// At most `limit` bytes from the start of `path`, a regular file.
fn read_head(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    if !path.is_file() {
        return None;
    }
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tempdir under /tmp, which the sandbox empties.
    fn under_tmp() -> tempfile::TempDir {
        tempfile::tempdir_in("/tmp").unwrap()
    }

    fn file(path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.canonicalize().unwrap()
    }

    fn real(path: &Path) -> PathBuf {
        path.canonicalize().unwrap()
    }

    fn server(command: &Path, args: &[&str], cwd: Option<&Path>) -> StdioServer {
        StdioServer {
            command: command.display().to_string(),
            args: args.iter().map(ToString::to_string).collect(),
            cwd: cwd.map(Path::to_path_buf),
            ..StdioServer::default()
        }
    }

    /// The bubblewrap arguments as strings.
    fn args(sandbox: &ProcessSandbox, server: &StdioServer) -> Vec<String> {
        bwrap_args(sandbox, server)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Where `flag path path` (`path` mounted at itself) is in `args`.
    fn mount(args: &[String], flag: &str, path: &Path) -> Option<usize> {
        let path = path.display().to_string();
        args.windows(3)
            .position(|w| w[0] == flag && w[1] == path && w[2] == path)
    }

    #[test]
    fn a_venv_and_script_under_tmp_are_mounted_back_read_only_but_not_tmp_or_their_siblings() {
        let dir = under_tmp();
        let base = under_tmp();
        let interpreter = file(&base.path().join("bin/python3"), "");
        let venv = dir.path().join("venv");
        file(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\n", base.path().join("bin").display()),
        );
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(&interpreter, venv.join("bin/python")).unwrap();
        let script = file(&dir.path().join("app/server.py"), "print()");
        file(&dir.path().join("sibling/secret"), "s");
        let missing = dir.path().join("missing.py").display().to_string();
        let config = server(
            &venv.join("bin/python"),
            &["-u", &script.display().to_string(), &missing],
            Some(Path::new("/")),
        );
        let args = args(&ProcessSandbox::default(), &config);

        let tmp = mount(&args, "--tmpfs", Path::new("/tmp"));
        let venv_at = mount(&args, "--ro-bind", &real(&venv)).expect("the venv");
        assert!(tmp < Some(venv_at), "after the empty /tmp: {args:?}");
        // The venv's base interpreter (its symlink's target, `home`).
        assert!(mount(&args, "--ro-bind", &real(base.path())).is_some());
        assert!(mount(&args, "--ro-bind", &real(&dir.path().join("app"))).is_some());
        assert!(mount(&args, "--ro-bind", &real(dir.path())).is_none());
        assert!(mount(&args, "--ro-bind", Path::new("/tmp")).is_none());
        assert!(
            !args
                .iter()
                .any(|a| a.contains("sibling") || a.contains("missing")),
            "{args:?}"
        );
    }

    #[test]
    fn a_write_grant_inside_or_around_the_servers_tree_stays_writable() {
        let dir = under_tmp();
        let program = file(&dir.path().join("srv/bin/server"), "");
        let out = dir.path().join("srv/out");
        std::fs::create_dir_all(&out).unwrap();
        let config = server(&program, &[], Some(&dir.path().join("srv")));
        let inside = ProcessSandbox {
            write: vec![out.clone()],
            ..ProcessSandbox::default()
        };
        let args1 = args(&inside, &config);
        let tree = mount(&args1, "--ro-bind", &real(&dir.path().join("srv"))).unwrap();
        let grant = mount(&args1, "--bind", &real(&out)).expect("the grant");
        assert!(
            tree < grant,
            "the grant shadows the read-only tree: {args1:?}"
        );

        let around = ProcessSandbox {
            write: vec![dir.path().to_path_buf()],
            ..ProcessSandbox::default()
        };
        let args2 = args(&around, &config);
        let srv = real(&dir.path().join("srv"));
        assert!(mount(&args2, "--ro-bind", &srv).is_none(), "{args2:?}");
        assert!(mount(&args2, "--bind", &srv).is_some(), "{args2:?}");
        assert!(mount(&args2, "--bind", &real(dir.path())).is_some());
    }

    #[test]
    fn a_hidden_directory_that_does_not_exist_is_left_out() {
        let home = under_tmp();
        let server_file = file(&home.path().join("server"), "");
        let config = server(&server_file, &[], Some(Path::new("/")));
        let missing = home.path().join(".ssh");
        let sandbox = ProcessSandbox {
            hide: vec![missing.clone()],
            ..ProcessSandbox::default()
        };
        let args = args(&sandbox, &config);
        assert!(
            !args.iter().any(|a| a == &missing.display().to_string()),
            "no mount point to make for it: {args:?}"
        );
    }

    #[test]
    fn home_and_hidden_directories_are_never_mounted_back_whole() {
        let home = under_tmp();
        let secrets = home.path().join("tools/.secrets");
        std::fs::create_dir_all(&secrets).unwrap();
        let in_home = file(&home.path().join("server"), "");
        let mut config = server(&in_home, &[], Some(Path::new("/")));
        config.env = vec![("HOME".into(), home.path().display().to_string())];
        let hide_home = ProcessSandbox {
            hide: vec![home.path().to_path_buf()],
            ..ProcessSandbox::default()
        };
        let args1 = args(&hide_home, &config);
        assert!(
            mount(&args1, "--ro-bind", &in_home).is_some(),
            "the file alone: {args1:?}"
        );
        assert!(mount(&args1, "--ro-bind", &real(home.path())).is_none());

        // `bin/`'s parent is HOME: its directory instead.
        let in_bin = file(&home.path().join("bin/server"), "");
        config.command = in_bin.display().to_string();
        let args2 = args(&hide_home, &config);
        assert!(
            mount(&args2, "--ro-bind", &real(&home.path().join("bin"))).is_some(),
            "{args2:?}"
        );
        assert!(mount(&args2, "--ro-bind", &real(home.path())).is_none());

        // A hidden directory inside a tree mounted back stays hidden.
        let in_tools = file(&home.path().join("tools/server"), "");
        config.command = in_tools.display().to_string();
        let hide_both = ProcessSandbox {
            hide: vec![home.path().to_path_buf(), secrets.clone()],
            ..ProcessSandbox::default()
        };
        let args3 = args(&hide_both, &config);
        let tools = mount(&args3, "--ro-bind", &real(&home.path().join("tools"))).unwrap();
        let hidden = args3
            .windows(2)
            .position(|w| w[0] == "--tmpfs" && w[1] == real(&secrets).display().to_string())
            .unwrap();
        assert!(tools < hidden, "{args3:?}");
    }

    #[test]
    fn odd_or_missing_paths_in_a_config_mount_nothing_back() {
        let dir = under_tmp();
        let nothing = dir.path().join("nothing");
        for command in ["", "no-such-program-here", "./nope", "\0", "/tmp/../tmp"] {
            let mut config = server(Path::new(command), &["\0", "", "../..", "/"], None);
            config.cwd = Some(nothing.clone());
            config.env = vec![("PATH".into(), "\0:/nonexistent:".into())];
            let args = args(&ProcessSandbox::default(), &config);
            let binds = args
                .iter()
                .filter(|a| ["--ro-bind", "--bind", "--dir"].contains(&a.as_str()));
            assert_eq!(binds.count(), 1, "only `/`: {command:?}: {args:?}");
        }
    }

    /// What `check` returns on a thread that runs under the sandbox's
    /// seccomp filter (a filter binds its thread and its children only).
    #[cfg(target_os = "linux")]
    fn under_filter<T: Send + 'static>(unix_sockets: bool, check: fn() -> T) -> T {
        let bytes = seccomp_filter(unix_sockets).unwrap();
        let program: Vec<seccompiler::sock_filter> = bytes
            .chunks_exact(8)
            .map(|op| seccompiler::sock_filter {
                code: u16::from_ne_bytes([op[0], op[1]]),
                jt: op[2],
                jf: op[3],
                k: u32::from_ne_bytes([op[4], op[5], op[6], op[7]]),
            })
            .collect();
        std::thread::spawn(move || {
            seccompiler::apply_filter(&program).unwrap();
            check()
        })
        .join()
        .unwrap()
    }

    /// The errno of a failed raw system call (`None` when it succeeded).
    #[cfg(target_os = "linux")]
    fn errno_of(result: libc::c_long) -> Option<i32> {
        (result < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap())
    }

    /// The errno of a failed call of the standard library.
    #[cfg(target_os = "linux")]
    fn errno<T>(result: std::io::Result<T>) -> Option<i32> {
        result.err().map(|e| e.raw_os_error().unwrap())
    }

    /// `socket(family, kind, protocol)` as the kernel sees it (64-bit
    /// arguments, so high bits can be tried): its errno, the socket closed.
    #[cfg(target_os = "linux")]
    fn raw_socket(family: i64, kind: i64, protocol: i64) -> Option<i32> {
        // SAFETY: integer arguments only; a descriptor made is closed here.
        #[allow(unsafe_code)]
        unsafe {
            let fd = libc::syscall(libc::SYS_socket, family, kind, protocol);
            let errno = errno_of(fd);
            if let Ok(fd) = i32::try_from(fd)
                && fd >= 0
            {
                libc::close(fd);
            }
            errno
        }
    }

    /// A raw system call with no pointer arguments: its errno.
    #[cfg(target_os = "linux")]
    fn raw(number: i64, a: i64, b: i64, c: i64) -> Option<i32> {
        // SAFETY: integer arguments only (calls that take pointers get
        // null, which the kernel checks).
        #[allow(unsafe_code)]
        let result = unsafe { libc::syscall(number, a, b, c, 0_i64) };
        errno_of(result)
    }

    /// The ways to a socket the filter must refuse, and those it must
    /// allow, as errnos.
    #[cfg(target_os = "linux")]
    #[derive(Debug, Clone, PartialEq)]
    struct Answers {
        unix_stream: Option<i32>,
        unix_datagram: Option<i32>,
        unix_hidden_in_high_bits: Option<i32>,
        stream_pair: Option<i32>,
        seqpacket_pair: Option<i32>,
        datagram_pair: Option<i32>,
        io_uring_setup: Option<i32>,
        io_uring_enter: Option<i32>,
        pidfd_getfd: Option<i32>,
        x32_getpid: Option<i32>,
        vsock: Option<i32>,
        packet: Option<i32>,
        netlink_route: Option<i32>,
        netlink_sock_diag: Option<i32>,
        inet_udp: Option<i32>,
        inet6: Option<i32>,
        getpid: Option<i32>,
    }

    #[cfg(target_os = "linux")]
    fn answers() -> Answers {
        use std::os::unix::net::{UnixDatagram, UnixStream};
        let af = |family: libc::c_int| i64::from(family);
        let stream = af(libc::SOCK_STREAM | libc::SOCK_CLOEXEC);
        Answers {
            unix_stream: errno(UnixStream::connect("/nonexistent/toolhost.sock")),
            unix_datagram: errno(UnixDatagram::unbound()),
            unix_hidden_in_high_bits: raw_socket((1 << 32) | af(libc::AF_UNIX), stream, 0),
            stream_pair: errno(UnixStream::pair()),
            seqpacket_pair: {
                let mut fds = [0; 2];
                // SAFETY: `fds` is two `int`s, as `socketpair` writes;
                // the descriptors it makes are closed here.
                #[allow(unsafe_code)]
                unsafe {
                    let made = libc::socketpair(
                        libc::AF_UNIX,
                        libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                        0,
                        fds.as_mut_ptr(),
                    );
                    if made == 0 {
                        libc::close(fds[0]);
                        libc::close(fds[1]);
                    }
                    errno_of(made.into())
                }
            },
            datagram_pair: errno(UnixDatagram::pair()),
            io_uring_setup: raw(libc::SYS_io_uring_setup, 1, 0, 0),
            io_uring_enter: raw(libc::SYS_io_uring_enter, -1, 0, 0),
            pidfd_getfd: raw(libc::SYS_pidfd_getfd, -1, 0, 0),
            x32_getpid: if cfg!(target_arch = "x86_64") {
                raw(libc::SYS_getpid | 0x4000_0000, 0, 0, 0)
            } else {
                Some(libc::EACCES)
            },
            vsock: raw_socket(af(libc::AF_VSOCK), stream, 0),
            packet: raw_socket(af(libc::AF_PACKET), af(libc::SOCK_RAW), 0),
            netlink_route: raw_socket(
                af(libc::AF_NETLINK),
                af(libc::SOCK_RAW),
                af(libc::NETLINK_ROUTE),
            ),
            netlink_sock_diag: raw_socket(
                af(libc::AF_NETLINK),
                af(libc::SOCK_RAW),
                af(libc::NETLINK_SOCK_DIAG),
            ),
            inet_udp: errno(std::net::UdpSocket::bind("127.0.0.1:0")),
            // A machine without IPv6 says so, not the filter.
            inet6: raw_socket(af(libc::AF_INET6), stream, 0).filter(|&e| e != libc::EAFNOSUPPORT),
            getpid: raw(libc::SYS_getpid, 0, 0, 0),
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_seccomp_filter_allows_ip_route_netlink_and_connected_pairs_and_refuses_every_other_socket()
     {
        let refused = Some(libc::EACCES);
        let without = under_filter(false, answers);
        assert_eq!(
            without,
            Answers {
                unix_stream: refused,
                unix_datagram: refused,
                unix_hidden_in_high_bits: refused,
                stream_pair: None,
                seqpacket_pair: None,
                datagram_pair: refused,
                io_uring_setup: refused,
                io_uring_enter: refused,
                pidfd_getfd: refused,
                x32_getpid: refused,
                vsock: refused,
                packet: refused,
                netlink_route: None,
                netlink_sock_diag: refused,
                inet_udp: None,
                inet6: None,
                getpid: None,
            }
        );
        // Unix sockets allowed: AF_UNIX joins, the rest stays.
        let allowed = under_filter(true, answers);
        assert_eq!(
            allowed,
            Answers {
                unix_stream: Some(libc::ENOENT),
                unix_datagram: None,
                unix_hidden_in_high_bits: None,
                datagram_pair: None,
                ..without
            }
        );
    }

    #[test]
    fn a_path_that_goes_up_through_tmp_finds_its_directories() {
        let dir = under_tmp();
        let program = file(&dir.path().join("tools/bin/server"), "");
        let via = dir.path().join("crates/support");
        std::fs::create_dir_all(&via).unwrap();
        let up = via.join("../../tools/bin/server");
        let args = args(
            &ProcessSandbox::default(),
            &server(&up, &[], Some(Path::new("/"))),
        );
        let made = args
            .windows(2)
            .position(|w| w[0] == "--dir" && w[1] == real(&via).display().to_string());
        assert!(made.is_some(), "{args:?}");
        assert!(mount(&args, "--ro-bind", &real(&dir.path().join("tools"))).is_some());
        assert!(program.is_file());
    }
}
