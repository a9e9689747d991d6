//! The three outcomes of a permission check.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What the policy says about a tool call.
///
/// Ordered by strength: `Allow < Ask < Deny`. Among the rules that match a call the
/// strongest decision wins.
///
/// ```
/// use toolhost_policy::Decision;
///
/// assert_eq!("ask".parse::<Decision>().unwrap(), Decision::Ask);
/// assert_eq!(Decision::Deny.to_string(), "deny");
/// assert!(Decision::Deny > Decision::Ask && Decision::Ask > Decision::Allow);
/// ```
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Decision {
    /// Run the call.
    #[default]
    Allow,
    /// Ask the user first.
    Ask,
    /// Refuse the call; the model gets the reason.
    Deny,
}

impl Decision {
    /// The word used in policy files: `allow`, `ask` or `deny`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        }
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is not `allow`, `ask` or `deny`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown decision {word:?} (expected allow, ask or deny)")]
pub struct UnknownDecision {
    /// The word as written.
    pub word: String,
}

impl FromStr for Decision {
    type Err = UnknownDecision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Decision::Allow),
            "ask" => Ok(Decision::Ask),
            "deny" => Ok(Decision::Deny),
            _ => Err(UnknownDecision { word: s.to_owned() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_words_round_trip_through_display_parse_and_serde() {
        for d in [Decision::Allow, Decision::Ask, Decision::Deny] {
            assert_eq!(d.to_string().parse::<Decision>().unwrap(), d);
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{d}\""));
            assert_eq!(serde_json::from_str::<Decision>(&json).unwrap(), d);
        }
    }

    #[test]
    fn unknown_decision_word_is_rejected_with_the_expected_words() {
        let e = "maybe".parse::<Decision>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown decision \"maybe\" (expected allow, ask or deny)"
        );
    }
}

/// Who answers a profile's `ask`s when its calls come from a server's
/// callers (`[profiles.NAME] ask = "operator"`): the calling client, the
/// operator (in the console's approvals queue), or nobody (a denial).
///
/// ```
/// use toolhost_policy::AskRoute;
/// assert_eq!("operator".parse::<AskRoute>().unwrap(), AskRoute::Operator);
/// assert!("boss".parse::<AskRoute>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AskRoute {
    /// The client that made the call (MCP elicitation).
    Client,
    /// The operator, in the console's approvals queue.
    Operator,
    /// Nobody: the call is denied, saying so.
    Deny,
}

impl FromStr for AskRoute {
    type Err = UnknownAskRoute;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "client" => Ok(AskRoute::Client),
            "operator" => Ok(AskRoute::Operator),
            "deny" => Ok(AskRoute::Deny),
            other => Err(UnknownAskRoute(other.chars().take(64).collect())),
        }
    }
}

impl AskRoute {
    /// Its word in a policy file: `client`, `operator` or `deny`.
    ///
    /// ```
    /// use toolhost_policy::AskRoute;
    /// assert_eq!(AskRoute::Operator.as_str().parse::<AskRoute>(), Ok(AskRoute::Operator));
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            AskRoute::Client => "client",
            AskRoute::Operator => "operator",
            AskRoute::Deny => "deny",
        }
    }
}

/// A word that is not `client`, `operator` or `deny`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown ask route `{0}` (expected client, operator or deny)")]
pub struct UnknownAskRoute(pub String);
