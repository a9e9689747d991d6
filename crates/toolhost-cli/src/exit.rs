//! Exit codes: one per kind of failure, so scripts can tell them apart.

use toolhost_runtime::{CallError, error::ToolErrorKind};

/// Success.
pub const OK: u8 = 0;
/// Anything else: bad config, a plugin file that does not load, I/O.
pub const FAILURE: u8 = 1;
/// No tool has that name.
pub const NOT_FOUND: u8 = 3;
/// The arguments are not JSON, do not match the schema, or the tool rejected them.
pub const INVALID_ARGUMENTS: u8 = 4;
/// The tool ran and reported a failure.
pub const TOOL_FAILED: u8 = 5;
/// The plugin faulted or hit a limit (trap, panic, timeout, memory).
pub const SANDBOX_FAULT: u8 = 6;
/// The host was busy or could not set up the sandbox.
pub const HOST_ERROR: u8 = 7;
/// The policy or the user denied the call, a hook blocked or failed it, or
/// the user rejected its result.
pub const DENIED: u8 = 8;
/// The reader of stdout went away (`host tools | head -1`): the command
/// ends without a word, with the code a shell shows for a command that
/// `SIGPIPE` ended (128 + 13), as other Unix tools do.
pub const STDOUT_CLOSED: u8 = 141;

/// The exit code for a call error.
pub fn for_call_error(e: &CallError) -> u8 {
    match e {
        CallError::NotFound { .. } => NOT_FOUND,
        CallError::InvalidArguments { .. } => INVALID_ARGUMENTS,
        CallError::Tool {
            kind: ToolErrorKind::InvalidArguments,
            ..
        } => INVALID_ARGUMENTS,
        CallError::Tool { .. } => TOOL_FAILED,
        CallError::Sandbox { .. } => SANDBOX_FAULT,
        CallError::Busy { .. } | CallError::Host { .. } => HOST_ERROR,
        CallError::Denied { .. }
        | CallError::Blocked { .. }
        | CallError::HookFailed { .. }
        | CallError::Rejected { .. }
        | CallError::Stopped { .. } => DENIED,
    }
}
