//! A process sandbox for a program toolhost starts (a stdio MCP server,
//! a command hook): Linux, [bubblewrap](https://github.com/containers/bubblewrap)
//! and a seccomp filter. The whole file system read-only, `/tmp` and
//! `/dev/shm` empty and private, the granted directories writable, the
//! program's own files mounted back where the empty `/tmp` or a `hide`
//! would cover them (`mounts.rs`), no network unless granted, its own PID,
//! IPC and UTS namespaces, no Unix-domain sockets that lead outside
//! (`seccomp.rs`), none of the host's descriptors but its stdio
//! (`command.rs`), and it dies with the host.
//!
//! ```no_run
//! # fn run() -> Result<(), toolhost_process_sandbox::SandboxError> {
//! use toolhost_process_sandbox::{ProcessSandbox, Program};
//!
//! let sandbox = ProcessSandbox {
//!     write: vec!["/srv/work".into()],
//!     ..ProcessSandbox::default()
//! };
//! let program = Program {
//!     command: "mcp-server-git".into(),
//!     args: vec!["--repository".into(), "/srv/work".into()],
//!     env: Vec::new(),
//!     cwd: Some("/srv/work".into()),
//! };
//! // A `tokio::process::Command` that runs bwrap, and the program in it;
//! // set its environment and stdio, then spawn it.
//! let mut command = toolhost_process_sandbox::command(&sandbox, &program)?;
//! command.env_clear().kill_on_drop(true);
//! # Ok(()) }
//! ```

use std::path::PathBuf;

mod command;
mod mounts;
mod seccomp;

pub use mounts::bwrap_args;
pub use seccomp::SECCOMP_FD;
#[cfg(target_os = "linux")]
pub use seccomp::seccomp_filter;

/// A program's process sandbox (Linux, bubblewrap): the whole file
/// system read-only, `/tmp` and `/dev/shm` empty and private, the granted
/// directories writable (the most specific of `write` and `hide` wins),
/// the program's own files that `/tmp` or `hide` would cover mounted back
/// read-only (its program's tree, script and working directory; never
/// `/tmp` or `HOME` whole), no network unless granted, its own PID, IPC and
/// UTS namespaces, none of the host's descriptors but its stdio, a seccomp
/// filter that allows sockets of listed families only (see
/// `unix_sockets`), and it dies with the host. It does not hide files from
/// reading (mount a directory over them with `hide`), nor limit CPU or
/// memory.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessSandbox {
    /// Directories it may write to.
    pub write: Vec<PathBuf>,
    /// Directories replaced by an empty one (e.g. `~/.ssh`).
    pub hide: Vec<PathBuf>,
    /// Whether it keeps the host's network.
    pub network: bool,
    /// Whether it may open Unix-domain sockets. Off by default: a read-only
    /// mount does not stop `connect()`, and the sockets of the session bus,
    /// `systemd --user`, a container engine or an ssh/gpg agent lead to
    /// code outside the sandbox. A seccomp filter allows `socket` for IP
    /// and route netlink only, `socketpair` for connected `AF_UNIX` pairs
    /// only (stream, seqpacket: they reach nothing but each other), and
    /// no io_uring or x32 calls; what it refuses fails with `EACCES`,
    /// wherever the socket is. With this on, `AF_UNIX` joins the families
    /// and every kind of pair is allowed; the rest of the filter stays.
    pub unix_sockets: bool,
    /// Whether a `.git` directory inside a `write` directory is writable
    /// too. Off by default: `.git/hooks/*` and `.git/config` run
    /// unsandboxed at the user's next `git` command, so `.git` stays
    /// read-only inside writable directories.
    pub git_writable: bool,
}

/// The program a sandbox runs: what is started, with what, where (its
/// own files are found from these and mounted back).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Program {
    /// The program (a path, or a name looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it (`KEY`, `value`): its `HOME` and `PATH` are
    /// read from them (else the host's) to find its files.
    pub env: Vec<(String, String)>,
    /// Its working directory (the host's, if `None`).
    pub cwd: Option<PathBuf>,
}

/// Why a sandboxed command cannot be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// Not on Linux: bubblewrap and seccomp are Linux's.
    #[error("the process sandbox needs Linux (bubblewrap and seccomp)")]
    Unsupported,
    /// The seccomp filter could not be built: an architecture seccompiler
    /// does not know (it knows x86_64, aarch64 and riscv64).
    #[cfg(target_os = "linux")]
    #[error("cannot build the process sandbox's seccomp filter: {0}")]
    Filter(#[from] seccompiler::BackendError),
    /// The pipe that hands bubblewrap the filter could not be made or
    /// written.
    #[error("cannot hand the seccomp filter to bubblewrap: {0}")]
    Pipe(#[source] std::io::Error),
    /// The filter's descriptor could not be put in place in the child.
    #[error("cannot hand over the seccomp filter: {0}")]
    Handover(String),
}

/// The command that runs `program` inside `sandbox`: `bwrap` with the
/// sandbox's arguments ([`bwrap_args`]), `--`, the program and its
/// arguments; the seccomp filter handed to bubblewrap on [`SECCOMP_FD`];
/// every descriptor of the host's above stderr marked close-on-exec in
/// the child. Its environment, working directory and stdio are the
/// caller's to set. Fails on anything but Linux.
pub fn command(
    sandbox: &ProcessSandbox,
    program: &Program,
) -> Result<tokio::process::Command, SandboxError> {
    command::sandboxed(sandbox, program)
}
