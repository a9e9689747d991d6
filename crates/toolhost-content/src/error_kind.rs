//! What kind of failure a tool call ended in, typed: one enum, serialized
//! as the short kebab-case text every format uses (the CLI's JSON, the
//! agent's history, command hooks' payloads, MCP's `_meta`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What kind of failure a tool call ended in, the same on every path.
///
/// Serialized as its kebab-case name (`not-found`, `sandbox-fault`, …).
/// A kind this version does not know (from a command hook or hook plugin
/// written against a newer host) parses as [`ErrorKind::Other`], never
/// fails.
///
/// ```
/// use toolhost_content::ErrorKind;
///
/// let kind: ErrorKind = "permission-denied".parse().unwrap();
/// assert_eq!(kind, ErrorKind::PermissionDenied);
/// assert_eq!(kind.to_string(), "permission-denied");
/// assert!(ErrorKind::ToolInvalidArguments.is_invalid_arguments());
/// assert_eq!("new-kind".parse::<ErrorKind>().unwrap(), ErrorKind::Other("new-kind".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No tool has this name.
    NotFound,
    /// The arguments are not JSON or do not match the tool's schema.
    InvalidArguments,
    /// The tool ran and said its arguments are unusable.
    ToolInvalidArguments,
    /// The tool ran and failed.
    ToolFailed,
    /// The sandbox stopped the tool: a limit, a trap, bad output.
    SandboxFault,
    /// Too many calls wait for a sandbox.
    Busy,
    /// The host could not set up the call.
    HostError,
    /// The policy or the user did not allow the call.
    PermissionDenied,
    /// A before-hook blocked the call.
    BlockedByHook,
    /// An after-hook turned the result into an error (as the caller sees it).
    HookFailed,
    /// The user rejected the result.
    Rejected,
    /// An after-hook failed the call, as later hooks see it in the chain
    /// (`hook`).
    Hook,
    /// The agent loop did not run the call (another call of the same
    /// response was rejected, or the loop stopped first).
    NotRun,
    /// The agent loop's time limit for the call passed.
    Timeout,
    /// The run was aborted while the call ran.
    Aborted,
    /// A kind this version does not know.
    Other(String),
}

impl ErrorKind {
    /// The kebab-case name.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorKind::Other(other) => other,
            known => known.known_name().unwrap_or_default(),
        }
    }

    /// The kebab-case name of a kind this version knows; `None` for
    /// [`ErrorKind::Other`]. For labels that must come from a fixed set
    /// (metrics), whatever a peer sends.
    ///
    /// ```
    /// use toolhost_content::ErrorKind;
    /// assert_eq!(ErrorKind::Timeout.known_name(), Some("timeout"));
    /// assert_eq!(ErrorKind::Other("x".into()).known_name(), None);
    /// ```
    pub fn known_name(&self) -> Option<&'static str> {
        Some(match self {
            ErrorKind::NotFound => "not-found",
            ErrorKind::InvalidArguments => "invalid-arguments",
            ErrorKind::ToolInvalidArguments => "tool-invalid-arguments",
            ErrorKind::ToolFailed => "tool-failed",
            ErrorKind::SandboxFault => "sandbox-fault",
            ErrorKind::Busy => "busy",
            ErrorKind::HostError => "host-error",
            ErrorKind::PermissionDenied => "permission-denied",
            ErrorKind::BlockedByHook => "blocked-by-hook",
            ErrorKind::HookFailed => "hook-failed",
            ErrorKind::Rejected => "rejected",
            ErrorKind::Hook => "hook",
            ErrorKind::NotRun => "not-run",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Aborted => "aborted",
            ErrorKind::Other(_) => return None,
        })
    }

    /// Whether the model should change the arguments: schema errors and a
    /// tool's own rejection of them.
    pub fn is_invalid_arguments(&self) -> bool {
        matches!(
            self,
            ErrorKind::InvalidArguments | ErrorKind::ToolInvalidArguments
        )
    }
}

impl FromStr for ErrorKind {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "not-found" => ErrorKind::NotFound,
            "invalid-arguments" => ErrorKind::InvalidArguments,
            "tool-invalid-arguments" => ErrorKind::ToolInvalidArguments,
            "tool-failed" => ErrorKind::ToolFailed,
            "sandbox-fault" => ErrorKind::SandboxFault,
            "busy" => ErrorKind::Busy,
            "host-error" => ErrorKind::HostError,
            "permission-denied" => ErrorKind::PermissionDenied,
            "blocked-by-hook" => ErrorKind::BlockedByHook,
            "hook-failed" => ErrorKind::HookFailed,
            "rejected" => ErrorKind::Rejected,
            "hook" => ErrorKind::Hook,
            "not-run" => ErrorKind::NotRun,
            "timeout" => ErrorKind::Timeout,
            "aborted" => ErrorKind::Aborted,
            other => ErrorKind::Other(other.to_owned()),
        })
    }
}

impl From<&str> for ErrorKind {
    fn from(s: &str) -> Self {
        match s.parse() {
            Ok(kind) => kind,
            Err(never) => match never {},
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(ErrorKind::from(text.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_kind_round_trips_through_its_text() {
        for kind in [
            ErrorKind::NotFound,
            ErrorKind::InvalidArguments,
            ErrorKind::ToolInvalidArguments,
            ErrorKind::ToolFailed,
            ErrorKind::SandboxFault,
            ErrorKind::Busy,
            ErrorKind::HostError,
            ErrorKind::PermissionDenied,
            ErrorKind::BlockedByHook,
            ErrorKind::HookFailed,
            ErrorKind::Rejected,
            ErrorKind::Hook,
            ErrorKind::NotRun,
            ErrorKind::Timeout,
            ErrorKind::Aborted,
        ] {
            let text = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<ErrorKind>(&text).unwrap(), kind);
            assert!(!matches!(
                ErrorKind::from(kind.as_str()),
                ErrorKind::Other(_)
            ));
        }
    }

    #[test]
    fn an_unknown_kind_from_outside_is_kept_not_refused() {
        let kind: ErrorKind = serde_json::from_str("\"quota-exceeded\"").unwrap();
        assert_eq!(kind, ErrorKind::Other("quota-exceeded".into()));
        assert_eq!(serde_json::to_string(&kind).unwrap(), "\"quota-exceeded\"");
    }
}
