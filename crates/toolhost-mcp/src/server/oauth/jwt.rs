//! A JWT access token checked against the issuer's keys (`jsonwebtoken`
//! does the cryptography): the header's algorithm must be on the
//! allowlist (`keys::ALLOWED`: asymmetric, never `none` nor HMAC) and its
//! key the issuer's, picked by `kid` and of the algorithm's kind; then
//! the signature, the issuer, the audience (this server's resource URL),
//! expiry and not-before (with the configured leeway) must all hold.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::{Map, Value};

use super::keys::{ALLOWED, KeyError};
use super::{Caller, ResourceServer, TokenProblem, Verified};

/// Whether `token` has a JWS's shape: three base64url parts.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    let mut parts = token.split('.');
    let shaped = |p: Option<&str>| {
        p.is_some_and(|p| {
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
    };
    shaped(parts.next()) && shaped(parts.next()) && shaped(parts.next()) && parts.next().is_none()
}

/// The caller of a good JWT, and when it expires.
pub(crate) async fn verify(
    server: &ResourceServer,
    token: &str,
) -> Result<(Caller, Option<u64>), Verified> {
    let invalid = |p| Verified::Invalid(p);
    // `alg: none` and unknown algorithms fail here: the header's `alg`
    // must be one jsonwebtoken knows, which `none` is not.
    let header = decode_header(token).map_err(|_| invalid(TokenProblem::Malformed))?;
    if !ALLOWED.contains(&header.alg) {
        return Err(invalid(TokenProblem::Algorithm));
    }
    // A critical extension this server does not understand (RFC 7515, 4.1.11).
    if header.crit.is_some() {
        return Err(invalid(TokenProblem::Malformed));
    }
    let key = server
        .keys
        .key(&server.fetcher, header.kid.as_deref(), header.alg)
        .await
        .map_err(|e| match e {
            KeyError::Token(p) => invalid(p),
            KeyError::Unavailable(e) => Verified::Unavailable(e),
        })?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&server.issuer]);
    validation.set_audience(&server.audiences().collect::<Vec<_>>());
    validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.validate_aud = true;
    validation.leeway = server.leeway;
    let data = decode::<Map<String, Value>>(token, &key, &validation).map_err(|e| {
        invalid(match e.kind() {
            ErrorKind::InvalidSignature => TokenProblem::Signature,
            ErrorKind::InvalidIssuer => TokenProblem::Issuer,
            ErrorKind::InvalidAudience => TokenProblem::Audience,
            ErrorKind::ExpiredSignature => TokenProblem::Expired,
            ErrorKind::ImmatureSignature => TokenProblem::NotYetValid,
            ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => TokenProblem::Algorithm,
            ErrorKind::MissingRequiredClaim(_) | ErrorKind::InvalidClaimFormat(_) => {
                TokenProblem::Claims
            }
            _ => TokenProblem::Malformed,
        })
    })?;
    let expires = data.claims.get("exp").and_then(Value::as_u64);
    let caller = Caller::from_claims(&data.claims, &server.groups_claim).map_err(invalid)?;
    Ok((caller, expires))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_base64url_parts_look_like_a_jwt() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(
            looks_like_jwt("eyJh.eyJz."),
            "an empty signature still reads as one"
        );
        assert!(!looks_like_jwt("opaque-token-123"));
        assert!(!looks_like_jwt("a.b"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt("a.b+.c"));
    }
}
