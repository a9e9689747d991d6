//! The seccomp filter bubblewrap applies to everything in a process
//! sandbox (its own pid 1 included).
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
//! (no `pidfd_getfd` or `/proc/PID/fd` of one); and the program inherits
//! no descriptor but its stdin, stdout and stderr (pipes) and the
//! filter's (`command.rs` marks every other close-on-exec), so there is
//! no socket to `accept` on or to receive `SCM_RIGHTS` from.
//!
//! [`ProcessSandbox::unix_sockets`]: crate::ProcessSandbox::unix_sockets

#[cfg(target_os = "linux")]
use crate::SandboxError;

/// The child's file descriptor bubblewrap reads the seccomp filter from.
pub const SECCOMP_FD: i32 = 3;

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
pub fn seccomp_filter(unix_sockets: bool) -> Result<Vec<u8>, SandboxError> {
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

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    use super::*;

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
}
