//! What a command prints on stdout, and a reader that went away.
//!
//! `host tools --json | head -1` closes the pipe after one line; the next
//! write fails with `EPIPE` (the host ignores `SIGPIPE`, as Rust programs
//! do, since a child's closed pipe must not kill it). Other Unix tools die
//! quietly of `SIGPIPE` there; `host` ends as quietly, with the exit code a
//! shell shows for that death ([`crate::exit::STDOUT_CLOSED`]). Every line
//! meant for stdout goes through [`outln!`] or a `write!` on
//! [`std::io::stdout`], never `println!`, which panics on a closed pipe.

/// `writeln!` on stdout: an `io::Result` to pass on with `?`, so that a
/// closed stdout ends the command quietly ([`closed`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use outln;

/// `write!` on stdout, flushed (streamed text).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        write!(stdout, $($arg)*).and_then(|()| stdout.flush())
    }};
}
pub(crate) use out;

/// Whether `error` is a write to a stdout whose reader went away: the
/// command ends without a word.
pub fn closed(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
