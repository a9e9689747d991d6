//! Why no token could be obtained ([`SignInError`]): messages that say
//! what to run, and never hold a token or a secret.

use rmcp::transport::auth::AuthError;

/// Why no token could be obtained. Messages never hold a token or secret.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SignInError {
    /// A person must sign in, and nobody is there to ask.
    #[error("needs sign-in (the server answered {status}{}){}", scope_note(.scope.as_deref()), hint_note(.hint.as_deref()))]
    NeedsSignIn {
        /// 401, or 403 for more scope.
        status: u16,
        /// The scope the server asks for, if it says.
        scope: Option<String>,
        /// What to run (`host mcp login NAME`), when the embedder says.
        hint: Option<String>,
    },
    /// The server keeps refusing the tokens obtained for one request.
    #[error("the server still refuses after {attempts} sign-ins{}", scope_note(.scope.as_deref()))]
    StillRefused {
        /// How many.
        attempts: u32,
        /// The scope it asks for, if it says.
        scope: Option<String>,
    },
    /// The OAuth exchange failed (discovery, registration, token endpoint).
    #[error("OAuth sign-in failed: {0}")]
    Failed(String),
    /// The person did not finish, or the authorization server refused.
    #[error("sign-in did not complete: {0}")]
    Interrupted(String),
    /// The server does not ask for a token.
    #[error("the server answers without sign-in")]
    NotNeeded,
    /// The server names an authorization server other than the one
    /// trusted: the `issuer` configured, or the one its kept tokens came
    /// from. Nothing was sent to it.
    #[error("{}", wrong_issuer(.expected, .named.as_deref(), .pinned, .hint.as_deref()))]
    WrongIssuer {
        /// The issuer trusted.
        expected: String,
        /// The one the server's metadata names (`None`: none).
        named: Option<String>,
        /// Whether `expected` is the kept tokens' (pinned at their first
        /// sign-in) rather than configured.
        pinned: bool,
        /// What to run to sign in anew (`host mcp login NAME`).
        hint: Option<String>,
    },
}

fn wrong_issuer(expected: &str, named: Option<&str>, pinned: &bool, hint: Option<&str>) -> String {
    let named = named.map_or_else(
        || "an authorization server without an issuer".to_owned(),
        |n| format!("the authorization server `{}`", toolhost_text::line(n, 200)),
    );
    let expected = toolhost_text::line(expected, 200);
    if *pinned {
        format!(
            "the server names {named}, not `{expected}`, which issued the tokens kept for it: \
             nothing was sent there{}",
            hint.map(|h| format!("; to sign in there, run `{h}`"))
                .unwrap_or_default()
        )
    } else {
        format!(
            "the server names {named}, not the `issuer` configured (`{expected}`): nothing was \
             sent there (if the server has moved to it, change `issuer`)"
        )
    }
}

fn scope_note(scope: Option<&str>) -> String {
    scope
        .map(|s| format!(", scope `{}`", toolhost_text::line(s, 200)))
        .unwrap_or_default()
}

fn hint_note(hint: Option<&str>) -> String {
    hint.map(|h| format!(": run `{h}`")).unwrap_or_default()
}

/// An rmcp error as text, bounded (rmcp's messages hold no token).
pub(super) fn failed(e: AuthError) -> SignInError {
    SignInError::Failed(toolhost_text::line(&e.to_string(), 400))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::oauth::UpstreamOAuth;

    #[test]
    fn errors_say_what_to_run_and_hold_no_secret() {
        let e = SignInError::NeedsSignIn {
            status: 401,
            scope: Some("mcp:read".into()),
            hint: Some("host mcp login docs".into()),
        };
        assert_eq!(
            e.to_string(),
            "needs sign-in (the server answered 401, scope `mcp:read`): run `host mcp login docs`"
        );
        let settings = UpstreamOAuth {
            client_secret: Some("s3cret".into()),
            private_key_pem: Some("-----BEGIN".into()),
            ..UpstreamOAuth::default()
        };
        let shown = format!("{settings:?}");
        assert!(
            !shown.contains("s3cret") && !shown.contains("BEGIN"),
            "{shown}"
        );
    }
}
