//! The kind of a hook's decision, typed: one enum, serialized as the short
//! text its trace records. (A failed call's kind, [`ErrorKind`](toolhost_content::ErrorKind), is
//! `toolhost_content`'s, shared by every crate that speaks of tool results.)

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What one hook decided, as its trace records it. Serialized as short
/// text: `continue`, `rewrite`, `block: REASON`, `ask: REASON`, `keep`,
/// `replace`, `fail: MESSAGE`.
///
/// ```
/// use toolhost_hooks::TraceDecision;
///
/// let d = TraceDecision::Block { reason: "no keys".into() };
/// assert_eq!(d.to_string(), "block: no keys");
/// assert_eq!(serde_json::to_value(&d).unwrap(), "block: no keys");
/// assert_eq!("replace".parse::<TraceDecision>().unwrap(), TraceDecision::Replace);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceDecision {
    /// Before: the call goes on unchanged.
    Continue,
    /// Before: the arguments were rewritten.
    Rewrite,
    /// Before: the call is blocked.
    Block {
        /// Why.
        reason: String,
    },
    /// Before: the user must approve the call.
    Ask {
        /// Why.
        reason: String,
    },
    /// After: the result is kept.
    Keep,
    /// After: (part of) the result was replaced.
    Replace,
    /// After: the call was turned into a failure.
    Fail {
        /// The failure's message.
        message: String,
    },
    /// Permission: the call is allowed without asking anyone.
    Allow {
        /// Why, if the hook said.
        reason: Option<String>,
    },
    /// Permission: the call is denied without asking anyone.
    Deny {
        /// Why.
        reason: String,
    },
    /// Permission: the hook leaves it to the next hook, then the person.
    Pass,
}

impl fmt::Display for TraceDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceDecision::Continue => f.write_str("continue"),
            TraceDecision::Rewrite => f.write_str("rewrite"),
            TraceDecision::Block { reason } => write!(f, "block: {reason}"),
            TraceDecision::Ask { reason } => write!(f, "ask: {reason}"),
            TraceDecision::Keep => f.write_str("keep"),
            TraceDecision::Replace => f.write_str("replace"),
            TraceDecision::Fail { message } => write!(f, "fail: {message}"),
            TraceDecision::Allow { reason: None } => f.write_str("allow"),
            TraceDecision::Allow {
                reason: Some(reason),
            } => write!(f, "allow: {reason}"),
            TraceDecision::Deny { reason } => write!(f, "deny: {reason}"),
            TraceDecision::Pass => f.write_str("pass"),
        }
    }
}

/// Text that is not one of the decisions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a hook decision: {0:?}")]
pub struct UnknownDecision(String);

impl FromStr for TraceDecision {
    type Err = UnknownDecision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let with = |prefix: &str| s.strip_prefix(prefix).map(str::to_owned);
        Ok(match s {
            "continue" => TraceDecision::Continue,
            "rewrite" => TraceDecision::Rewrite,
            "keep" => TraceDecision::Keep,
            "replace" => TraceDecision::Replace,
            "allow" => TraceDecision::Allow { reason: None },
            "pass" => TraceDecision::Pass,
            _ => {
                if let Some(reason) = with("allow: ") {
                    TraceDecision::Allow {
                        reason: Some(reason),
                    }
                } else if let Some(reason) = with("deny: ") {
                    TraceDecision::Deny { reason }
                } else if let Some(reason) = with("block: ") {
                    TraceDecision::Block { reason }
                } else if let Some(reason) = with("ask: ") {
                    TraceDecision::Ask { reason }
                } else if let Some(message) = with("fail: ") {
                    TraceDecision::Fail { message }
                } else {
                    return Err(UnknownDecision(s.to_owned()));
                }
            }
        })
    }
}

impl Serialize for TraceDecision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TraceDecision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trace_decision_round_trips_through_its_text() {
        for d in [
            TraceDecision::Continue,
            TraceDecision::Rewrite,
            TraceDecision::Block { reason: "r".into() },
            TraceDecision::Ask {
                reason: "a: b".into(),
            },
            TraceDecision::Keep,
            TraceDecision::Replace,
            TraceDecision::Fail {
                message: "m".into(),
            },
        ] {
            assert_eq!(d.to_string().parse::<TraceDecision>().unwrap(), d);
        }
        assert!("maybe".parse::<TraceDecision>().is_err());
    }
}
