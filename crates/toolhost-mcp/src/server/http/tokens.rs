//! The static bearer tokens: whose each is and what its holder may do
//! ([`ClientToken`], [`TokenRole`]), read from a token file, and found
//! among the configured ones in constant time.

use super::super::Asks;

/// A bearer token: whose it is, and what its holder may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientToken {
    /// The secret.
    pub token: String,
    /// The agent profile its calls run under (`None`: the server's).
    pub agent: Option<String>,
    /// A caller's (calls `/mcp`) or the operator's (signs in to the
    /// console, and nothing else).
    pub role: TokenRole,
    /// Who answers its calls' `ask`s (`None`: the server's `--asks`).
    pub asks: Option<Asks>,
}

/// What a token's holder may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TokenRole {
    /// Calls tools over `/mcp`; never opens the console.
    #[default]
    Caller,
    /// Signs in to the console (`/console`); never calls `/mcp`.
    Operator,
}

/// A line of a token file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token file line {line}: {problem}")]
pub struct TokenFileError {
    /// Its number (from 1).
    pub line: usize,
    /// What is wrong (the secret is never quoted).
    pub problem: String,
}

impl ClientToken {
    /// A caller's token, under `agent`'s profile.
    pub fn caller(token: impl Into<String>, agent: Option<String>) -> ClientToken {
        ClientToken {
            token: token.into(),
            agent,
            role: TokenRole::Caller,
            asks: None,
        }
    }

    /// Reads a token file: one token per line, optionally followed by the
    /// profile its client's calls run under (`s3cret reviewer`), then
    /// settings: `role=operator` (an operator's token, for the console) and
    /// `ask=client|operator|deny` (who answers its calls' asks). Blank
    /// lines and lines starting with `#` are skipped, and a `#` after the
    /// token starts a comment to the end of the line.
    ///
    /// ```
    /// use toolhost_mcp::ClientToken;
    /// use toolhost_mcp::server::{Asks, TokenRole};
    /// let tokens = ClientToken::parse(
    ///     "# team\nabc reviewer ask=operator  # Ada's laptop\nxyz\nop1 role=operator #ops\n",
    /// )
    /// .unwrap();
    /// assert_eq!(tokens[0].agent.as_deref(), Some("reviewer"));
    /// assert_eq!(tokens[0].asks, Some(Asks::Operator));
    /// assert_eq!(tokens[1].agent, None);
    /// assert_eq!(tokens[2].role, TokenRole::Operator);
    /// assert!(ClientToken::parse("abc colour=blue").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Vec<ClientToken>, TokenFileError> {
        let mut tokens = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let problem = |problem: String| TokenFileError {
                line: i + 1,
                problem,
            };
            // A word that starts with `#` starts a comment (the token is
            // the first word: a line that starts with `#` is one already).
            let mut words = l.split_whitespace().take_while(|w| !w.starts_with('#'));
            let mut token = ClientToken::caller(words.next().unwrap_or_default(), None);
            for word in words {
                match word.split_once('=') {
                    None if token.agent.is_none() => token.agent = Some(word.to_owned()),
                    None => return Err(problem("more than one profile named".to_owned())),
                    Some(("role", "operator")) => token.role = TokenRole::Operator,
                    Some(("role", "caller")) => token.role = TokenRole::Caller,
                    Some(("ask", value)) => {
                        token.asks = Some(match value {
                            "client" => Asks::Client,
                            "operator" => Asks::Operator,
                            "deny" => Asks::Deny,
                            _ => {
                                return Err(problem("ask must be client, operator or deny".into()));
                            }
                        });
                    }
                    Some((key, _)) => {
                        return Err(problem(format!(
                            "unknown setting `{}` (role=operator, ask=client|operator|deny)",
                            toolhost_text::line(key, 40)
                        )));
                    }
                }
            }
            if token.role == TokenRole::Operator && (token.agent.is_some() || token.asks.is_some())
            {
                return Err(problem(
                    "an operator's token makes no calls: it takes no profile or ask".to_owned(),
                ));
            }
            tokens.push(token);
        }
        Ok(tokens)
    }
}

/// The static token `given` is, if any.
pub(super) fn client_of<'a>(tokens: &'a [ClientToken], given: &str) -> Option<&'a ClientToken> {
    // Every token is compared, so the time taken does not tell which matched.
    tokens.iter().fold(None, |found, t| {
        if same(given.as_bytes(), t.token.as_bytes()) {
            Some(t)
        } else {
            found
        }
    })
}

/// Compares two secrets in time that depends only on their lengths.
fn same(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret", b"secret"));
        assert!(!same(b"secret", b"secreT"));
        assert!(!same(b"secret", b"secret2"));
        assert!(!same(b"", b"x"));
    }
}
