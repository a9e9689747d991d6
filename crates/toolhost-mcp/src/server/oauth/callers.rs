//! Who a token's caller is (its subject, client, scopes and groups, from
//! the claims), and which profile the configured rules give it.
//!
//! A rule names one or more of `subject`, `client`, `group`, `scope`; it
//! matches a caller that has every one it names. Rules are read in order
//! and the first that matches wins, as an operator reads them top down:
//!
//! ```toml
//! [[oauth.callers]]
//! subject = "alice@example.com"   # this person ...
//! profile = "reviewer"            # ... runs under `reviewer`
//!
//! [[oauth.callers]]
//! group = "sre"                   # anyone in the group `sre` ...
//! profile = "ops"
//! ask = "operator"                # ... whose asks the operator answers
//! ```

use serde::Deserialize;
use serde_json::{Map, Value};

use super::TokenProblem;
use crate::server::Asks;

/// The longest subject, client id, scope or group name taken from a token.
pub(crate) const MAX_NAME_CHARS: usize = 256;
/// The most scopes or groups taken from a token.
pub(crate) const MAX_LISTED: usize = 256;

/// Who called, as the token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The subject (`sub`): a person, or a client acting for itself.
    pub subject: String,
    /// The client the token was issued to (`client_id`, else `azp`).
    pub client: Option<String>,
    /// The scopes granted (`scope`, space-separated, or `scp`).
    pub scopes: Vec<String>,
    /// The groups (the configured claim, `groups` by default).
    pub groups: Vec<String>,
}

impl Caller {
    /// The caller of a token with `claims`; `groups_claim` names the claim
    /// with its groups. Refuses a token without a subject, and names that
    /// are too long or carry control characters (they would show in the
    /// audit and the console).
    pub(crate) fn from_claims(
        claims: &Map<String, Value>,
        groups_claim: &str,
    ) -> Result<Caller, TokenProblem> {
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .filter(|s| is_name(s))
            .ok_or(TokenProblem::Claims)?
            .to_owned();
        let client = ["client_id", "azp"]
            .iter()
            .find_map(|c| claims.get(*c).and_then(Value::as_str))
            .map(|c| {
                if is_name(c) {
                    Ok(c.to_owned())
                } else {
                    Err(TokenProblem::Claims)
                }
            })
            .transpose()?;
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => names(s.split_whitespace())?,
            (Some(_), _) => return Err(TokenProblem::Claims),
            (None, Some(v)) => list(v)?,
            (None, None) => Vec::new(),
        };
        let groups = match claims.get(groups_claim) {
            Some(v) => list(v)?,
            None => Vec::new(),
        };
        Ok(Caller {
            subject,
            client,
            scopes,
            groups,
        })
    }

    /// Its identity in the audit, the traces, the console, the result
    /// cache and saved approvals: `oauth:SUBJECT`.
    pub(crate) fn identity(&self) -> String {
        format!("oauth:{}", self.subject)
    }
}

/// Whether `s` may be a name from a token: not empty, bounded, no control
/// characters.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= MAX_NAME_CHARS && !s.chars().any(char::is_control)
}

fn names<'a>(items: impl Iterator<Item = &'a str>) -> Result<Vec<String>, TokenProblem> {
    let mut out = Vec::new();
    for item in items {
        if out.len() == MAX_LISTED || !is_name(item) {
            return Err(TokenProblem::Claims);
        }
        out.push(item.to_owned());
    }
    Ok(out)
}

/// A claim that is a list of names (or one name, or space-separated names).
fn list(value: &Value) -> Result<Vec<String>, TokenProblem> {
    match value {
        Value::String(s) => names(s.split_whitespace()),
        Value::Array(items) => names(
            items
                .iter()
                .map(|v| v.as_str().ok_or(TokenProblem::Claims))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter(),
        ),
        _ => Err(TokenProblem::Claims),
    }
}

/// One `[[oauth.callers]]` rule: whom it matches, and how their calls run.
///
/// ```
/// let rule: toolhost_mcp::server::CallerRule = toml::from_str(
///     "group = \"sre\"\nprofile = \"ops\"\nask = \"operator\"\n",
/// ).unwrap();
/// assert_eq!(rule.profile.as_deref(), Some("ops"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CallerRule {
    /// The token's subject (`sub`) is this.
    #[serde(default)]
    pub subject: Option<String>,
    /// The token was issued to this client (`client_id` or `azp`).
    #[serde(default)]
    pub client: Option<String>,
    /// The caller is in this group.
    #[serde(default)]
    pub group: Option<String>,
    /// The token grants this scope.
    #[serde(default)]
    pub scope: Option<String>,
    /// The profile its calls run under (`None`: the server's, `--agent`).
    #[serde(default)]
    pub profile: Option<String>,
    /// Who answers its calls' asks (`None`: its profile's, else the
    /// server's `--asks`).
    #[serde(default, deserialize_with = "asks")]
    pub ask: Option<Asks>,
}

fn asks<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Asks>, D::Error> {
    let text = String::deserialize(d)?;
    match text.as_str() {
        "client" => Ok(Some(Asks::Client)),
        "operator" => Ok(Some(Asks::Operator)),
        "deny" => Ok(Some(Asks::Deny)),
        _ => Err(serde::de::Error::custom(
            "ask must be client, operator or deny",
        )),
    }
}

impl CallerRule {
    /// Refuses a rule that names nobody (it would match every caller;
    /// `unmapped` says that).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.subject.is_none()
            && self.client.is_none()
            && self.group.is_none()
            && self.scope.is_none()
        {
            return Err(
                "a [[oauth.callers]] rule names a subject, client, group or scope (for everyone \
                 else, set `unmapped`)"
                    .to_owned(),
            );
        }
        Ok(())
    }

    /// Whether the rule matches `caller`.
    fn matches(&self, caller: &Caller) -> bool {
        self.subject.as_ref().is_none_or(|s| *s == caller.subject)
            && self
                .client
                .as_ref()
                .is_none_or(|c| caller.client.as_ref() == Some(c))
            && self
                .group
                .as_ref()
                .is_none_or(|g| caller.groups.contains(g))
            && self
                .scope
                .as_ref()
                .is_none_or(|s| caller.scopes.contains(s))
    }
}

/// The first rule that matches `caller`.
pub(crate) fn map<'a>(rules: &'a [CallerRule], caller: &Caller) -> Option<&'a CallerRule> {
    rules.iter().find(|r| r.matches(caller))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller(claims: Value) -> Result<Caller, TokenProblem> {
        Caller::from_claims(claims.as_object().unwrap(), "groups")
    }

    #[test]
    fn a_caller_is_read_from_the_usual_claims() {
        let c = caller(json!({"sub": "alice", "client_id": "app", "scope": "tools read", "groups": ["sre", "dev"]})).unwrap();
        assert_eq!(c.subject, "alice");
        assert_eq!(c.client.as_deref(), Some("app"));
        assert_eq!(c.scopes, ["tools", "read"]);
        assert_eq!(c.groups, ["sre", "dev"]);
        assert_eq!(c.identity(), "oauth:alice");
        let c = caller(json!({"sub": "bob", "azp": "app2", "scp": ["tools"]})).unwrap();
        assert_eq!(c.client.as_deref(), Some("app2"));
        assert_eq!(c.scopes, ["tools"]);
        assert!(caller(json!({"client_id": "app"})).is_err(), "no subject");
        assert!(
            caller(json!({"sub": "a\nb"})).is_err(),
            "a control character"
        );
        assert!(caller(json!({"sub": "x".repeat(300)})).is_err(), "too long");
        assert!(caller(json!({"sub": "a", "groups": [1]})).is_err());
        assert!(caller(json!({"sub": "a", "scope": 3})).is_err());
    }

    #[test]
    fn the_first_rule_that_names_all_it_asks_for_wins() {
        let rules: Vec<CallerRule> = vec![
            CallerRule {
                subject: Some("alice".into()),
                profile: Some("reviewer".into()),
                ..CallerRule::default()
            },
            CallerRule {
                group: Some("sre".into()),
                scope: Some("admin".into()),
                profile: Some("ops".into()),
                ..CallerRule::default()
            },
            CallerRule {
                client: Some("ci".into()),
                profile: Some("bot".into()),
                ..CallerRule::default()
            },
        ];
        let who = |claims| map(&rules, &caller(claims).unwrap()).and_then(|r| r.profile.clone());
        assert_eq!(
            who(json!({"sub": "alice", "groups": ["sre"], "scope": "admin"})).as_deref(),
            Some("reviewer")
        );
        assert_eq!(
            who(json!({"sub": "bob", "groups": ["sre"], "scope": "admin"})).as_deref(),
            Some("ops")
        );
        assert_eq!(
            who(json!({"sub": "bob", "groups": ["sre"]})),
            None,
            "sre without the scope"
        );
        assert_eq!(
            who(json!({"sub": "x", "client_id": "ci"})).as_deref(),
            Some("bot")
        );
        assert_eq!(who(json!({"sub": "ci"})), None, "a subject is not a client");
        assert!(
            CallerRule::default().check().is_err(),
            "a rule for everyone"
        );
    }
}
