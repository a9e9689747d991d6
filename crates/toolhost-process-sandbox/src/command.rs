//! The sandboxed command: bubblewrap with the sandbox's mounts
//! (`mounts.rs`), the program after `--`, the seccomp filter
//! (`seccomp.rs`) handed over on a file descriptor, and no other
//! descriptor of the host's.

use tokio::process::Command;

use crate::mounts::bwrap_args;
#[cfg(target_os = "linux")]
use crate::seccomp::{SECCOMP_FD, seccomp_filter};
use crate::{ProcessSandbox, Program, SandboxError};

/// `program` inside `sandbox`: see [`crate::command`].
pub(crate) fn sandboxed(
    sandbox: &ProcessSandbox,
    program: &Program,
) -> Result<Command, SandboxError> {
    let mut bwrap = Command::new("bwrap");
    bwrap.args(bwrap_args(sandbox, program));
    bwrap.arg("--").arg(&program.command).args(&program.args);
    // Before the filter's descriptor is put in place.
    inherit_nothing(&mut bwrap);
    seccomp_fd(&mut bwrap, sandbox.unix_sockets)?;
    Ok(bwrap)
}

/// Hands bubblewrap the seccomp filter (`seccomp.rs`) on its file
/// descriptor [`SECCOMP_FD`]: a pipe
/// holding the program, read whole by bubblewrap before it starts the
/// server.
#[cfg(target_os = "linux")]
fn seccomp_fd(bwrap: &mut Command, unix_sockets: bool) -> Result<(), SandboxError> {
    use command_fds::{CommandFdExt, FdMapping};
    use std::io::Write;
    let program = seccomp_filter(unix_sockets)?;
    let (reader, mut writer) = std::io::pipe().map_err(SandboxError::Pipe)?;
    // A few hundred bytes: within a pipe's buffer, so this never blocks.
    writer.write_all(&program).map_err(SandboxError::Pipe)?;
    drop(writer);
    bwrap
        .fd_mappings(vec![FdMapping {
            parent_fd: reader.into(),
            child_fd: SECCOMP_FD,
        }])
        .map_err(|e| SandboxError::Handover(e.to_string()))?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn seccomp_fd(_: &mut Command, _: bool) -> Result<(), SandboxError> {
    Err(SandboxError::Unsupported)
}

/// Makes bubblewrap, and so the server, inherit none of the host's
/// descriptors but stdin, stdout and stderr (and the filter's, put in
/// place after this): descriptors the host holds without close-on-exec
/// (from the program that embeds it, or that started it) would pass
/// through bubblewrap into the sandbox, and a Unix socket among them
/// leads outside it. In the child, before `exec`: every descriptor above
/// stderr is marked close-on-exec.
#[cfg(target_os = "linux")]
fn inherit_nothing(bwrap: &mut Command) {
    // SAFETY: the closure runs in the forked child before `exec`, where
    // only async-signal-safe calls are sound: it makes system calls
    // (`close_range`, `getrlimit`, `fcntl`) and nothing else — no
    // allocation, no lock.
    #[allow(unsafe_code)]
    unsafe {
        bwrap.pre_exec(close_on_exec_above_stderr);
    }
}

#[cfg(not(target_os = "linux"))]
fn inherit_nothing(_: &mut Command) {}

/// The most descriptors marked one by one where `close_range` cannot
/// (Linux before 5.11): the kernel's default ceiling (`fs.nr_open`).
#[cfg(target_os = "linux")]
const MARKED_ONE_BY_ONE: libc::c_int = 1 << 20;

/// Marks every descriptor above stderr close-on-exec (async-signal-safe:
/// system calls only).
#[cfg(target_os = "linux")]
fn close_on_exec_above_stderr() -> std::io::Result<()> {
    // SAFETY: system calls on integers and on a local `rlimit`; none takes
    // ownership of a descriptor the program uses (close-on-exec changes
    // nothing before `exec`).
    #[allow(unsafe_code)]
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            libc::c_long::from(3_u32),
            libc::c_long::from(u32::MAX),
            libc::c_long::from(libc::CLOSE_RANGE_CLOEXEC),
        ) == 0
        {
            return Ok(());
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let top = libc::c_int::try_from(limit.rlim_cur)
            .unwrap_or(libc::c_int::MAX)
            .min(MARKED_ONE_BY_ONE);
        for fd in 3..top {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}
