//! The issuer's signing keys (its JWKS), fetched and cached: a token
//! names its key by `kid`; a `kid` the cache does not know (the issuer
//! rotated its keys) fetches the set again, at most once per
//! [`MIN_REFETCH`], so tokens with made-up `kid`s cannot make the server
//! hammer the issuer. A set older than [`MAX_AGE`] is fetched again on
//! use; when that fails the old keys keep serving.
//!
//! A key is picked for a token only when it fits the token's algorithm:
//! its `kty` (and curve) must be the algorithm's family, its `alg`, when
//! it names one, must be the token's, its `use`, when given, `sig`. So an
//! RSA key never verifies an HMAC token (`HS256` is not on the allowlist
//! anyway), whatever the token's header says.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use serde_json::Value;

use super::fetch::Fetcher;
use super::{OAuthError, TokenProblem};

/// The least time between two fetches of the key set.
pub(crate) const MIN_REFETCH: Duration = Duration::from_secs(30);
/// How long a fetched key set is used before it is fetched again.
pub(crate) const MAX_AGE: Duration = Duration::from_secs(3600);
/// The most keys kept from one set (more are ignored).
pub(crate) const MAX_KEYS: usize = 64;

/// The algorithms a token may be signed with: asymmetric only. Never
/// `none`, never an HMAC (`HS*`), whose key a verifier would have to share.
pub(crate) const ALLOWED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// One usable key of the set.
struct Key {
    kid: Option<String>,
    /// The algorithm the key is for, when the set says.
    alg: Option<KeyAlgorithm>,
    family: AlgorithmFamily,
    curve: Option<EllipticCurve>,
    decoding: DecodingKey,
}

impl Key {
    /// A key from one JWK of the set; `None` for a key that verifies no
    /// token here (an encryption key, a symmetric one, a kind unknown).
    fn from_jwk(jwk: &Jwk) -> Option<Key> {
        if jwk
            .common
            .public_key_use
            .as_ref()
            .is_some_and(|u| *u != PublicKeyUse::Signature)
        {
            return None;
        }
        let (family, curve) = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => (AlgorithmFamily::Rsa, None),
            AlgorithmParameters::EllipticCurve(p) => (AlgorithmFamily::Ec, Some(p.curve.clone())),
            AlgorithmParameters::OctetKeyPair(p) => (AlgorithmFamily::Ed, Some(p.curve.clone())),
            // A symmetric key is never taken from a published set.
            _ => return None,
        };
        let decoding = DecodingKey::from_jwk(jwk).ok()?;
        Some(Key {
            kid: jwk.common.key_id.clone(),
            alg: jwk.common.key_algorithm,
            family,
            curve,
            decoding,
        })
    }

    /// Whether this key may verify a token signed with `alg`.
    fn fits(&self, alg: Algorithm) -> bool {
        if alg.family() != self.family {
            return false;
        }
        if let Some(named) = self.alg
            && key_algorithm(alg) != Some(named)
        {
            return false;
        }
        match alg {
            Algorithm::ES256 => self.curve == Some(EllipticCurve::P256),
            Algorithm::ES384 => self.curve == Some(EllipticCurve::P384),
            Algorithm::EdDSA => self.curve == Some(EllipticCurve::Ed25519),
            _ => true,
        }
    }
}

/// The JWK `alg` value of a token algorithm.
fn key_algorithm(alg: Algorithm) -> Option<KeyAlgorithm> {
    Some(match alg {
        Algorithm::RS256 => KeyAlgorithm::RS256,
        Algorithm::RS384 => KeyAlgorithm::RS384,
        Algorithm::RS512 => KeyAlgorithm::RS512,
        Algorithm::PS256 => KeyAlgorithm::PS256,
        Algorithm::PS384 => KeyAlgorithm::PS384,
        Algorithm::PS512 => KeyAlgorithm::PS512,
        Algorithm::ES256 => KeyAlgorithm::ES256,
        Algorithm::ES384 => KeyAlgorithm::ES384,
        Algorithm::EdDSA => KeyAlgorithm::EdDSA,
        _ => return None,
    })
}

/// A fetched set.
#[derive(Default)]
struct KeySet {
    keys: Vec<Key>,
    fetched: Option<Instant>,
}

impl KeySet {
    fn parse(doc: &Value) -> Result<KeySet, String> {
        let listed = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("the key set has no `keys` list")?;
        // Each key on its own: one this crate cannot read (an encryption
        // key of a kind it does not know) does not hide the others.
        let keys: Vec<Key> = listed
            .iter()
            .take(MAX_KEYS)
            .filter_map(|k| serde_json::from_value::<Jwk>(k.clone()).ok())
            .filter_map(|jwk| Key::from_jwk(&jwk))
            .collect();
        Ok(KeySet {
            keys,
            fetched: Some(Instant::now()),
        })
    }

    /// The key that verifies a token signed with `alg` naming `kid`: the
    /// one with that `kid`; without a `kid`, the only key that fits.
    fn find(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, TokenProblem> {
        match kid {
            Some(kid) => {
                let key = self
                    .keys
                    .iter()
                    .find(|k| k.kid.as_deref() == Some(kid))
                    .ok_or(TokenProblem::UnknownKey)?;
                if key.fits(alg) {
                    Ok(key.decoding.clone())
                } else {
                    Err(TokenProblem::KeyMismatch)
                }
            }
            None => {
                let mut fitting = self.keys.iter().filter(|k| k.fits(alg));
                match (fitting.next(), fitting.next()) {
                    (Some(key), None) => Ok(key.decoding.clone()),
                    _ => Err(TokenProblem::UnknownKey),
                }
            }
        }
    }
}

/// Where the keys come from, and the cache of them.
pub(crate) struct Keys {
    source: KeySource,
    set: parking_lot::RwLock<Arc<KeySet>>,
    /// Held while fetching (one fetch at a time).
    fetching: tokio::sync::Mutex<Tries>,
}

/// The fetches tried.
#[derive(Default)]
struct Tries {
    /// The last fetch of a set that was already there (a rotation, an old
    /// set): at most one per [`MIN_REFETCH`].
    refetched: Option<Instant>,
    /// The last failure while no set was there yet, and why: tried again
    /// only after [`RETRY_FIRST`].
    failed: Option<(Instant, OAuthError)>,
}

/// How long a failed first fetch is remembered before it is tried again.
pub(crate) const RETRY_FIRST: Duration = Duration::from_secs(5);

/// Where the key set is.
pub(crate) enum KeySource {
    /// At this URL.
    Url(url::Url),
    /// At the URL the issuer's metadata names (found on first use).
    Discover(Arc<super::Discovery>),
}

impl Keys {
    pub(crate) fn new(source: KeySource) -> Keys {
        Keys {
            source,
            set: parking_lot::RwLock::new(Arc::new(KeySet::default())),
            fetching: tokio::sync::Mutex::new(Tries::default()),
        }
    }

    /// The key for a token signed with `alg` naming `kid`, fetching the
    /// set when there is none yet, or when it has no such key or is old
    /// (within the rate limit).
    pub(crate) async fn key(
        &self,
        fetcher: &Fetcher,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, KeyError> {
        let set = self.set.read().clone();
        let stale = set.fetched.is_some_and(|t| t.elapsed() > MAX_AGE);
        match set.find(kid, alg) {
            Ok(key) if !stale => return Ok(key),
            Err(TokenProblem::KeyMismatch) if !stale => {
                return Err(KeyError::Token(TokenProblem::KeyMismatch));
            }
            _ => {}
        }
        let before = set.fetched;
        let mut tries = self.fetching.lock().await;
        // Someone else fetched while this waited.
        let current = self.set.read().clone();
        if current.fetched != before {
            return current.find(kid, alg).map_err(KeyError::Token);
        }
        let first = current.fetched.is_none();
        if first {
            if let Some((at, e)) = &tries.failed
                && at.elapsed() < RETRY_FIRST
            {
                return Err(KeyError::Unavailable(e.clone()));
            }
        } else if tries.refetched.is_some_and(|t| t.elapsed() < MIN_REFETCH) {
            return current.find(kid, alg).map_err(KeyError::Token);
        } else {
            tries.refetched = Some(Instant::now());
        }
        match self.fetch(fetcher).await {
            Ok(fresh) => {
                tracing::info!(target: "toolhost::mcp::oauth", keys = fresh.keys.len(), "fetched the issuer's signing keys");
                tries.failed = None;
                let fresh = Arc::new(fresh);
                *self.set.write() = fresh.clone();
                fresh.find(kid, alg).map_err(KeyError::Token)
            }
            Err(e) if first => {
                tracing::warn!(target: "toolhost::mcp::oauth", "cannot fetch the issuer's signing keys: {e}");
                tries.failed = Some((Instant::now(), e.clone()));
                Err(KeyError::Unavailable(e))
            }
            // The old keys keep serving while the issuer cannot be reached.
            Err(e) => {
                tracing::warn!(target: "toolhost::mcp::oauth", "cannot fetch the issuer's signing keys again (the ones fetched before stay): {e}");
                current.find(kid, alg).map_err(KeyError::Token)
            }
        }
    }

    async fn fetch(&self, fetcher: &Fetcher) -> Result<KeySet, OAuthError> {
        let url = match &self.source {
            KeySource::Url(url) => url.clone(),
            KeySource::Discover(discovery) => discovery.get(fetcher).await?.jwks_uri.clone(),
        };
        let doc = fetcher.get_json(&url).await?;
        KeySet::parse(&doc).map_err(|why| OAuthError::Unreachable {
            url: super::fetch::shown_url(&url),
            why,
        })
    }
}

/// Why no key was found for a token.
#[derive(Debug)]
pub(crate) enum KeyError {
    /// The token names no key the issuer has, or one that does not fit.
    Token(TokenProblem),
    /// The keys cannot be had at all (never fetched, and the issuer does
    /// not answer).
    Unavailable(OAuthError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rsa_jwk(kid: &str, alg: Option<&str>) -> Value {
        // A 2048-bit modulus's shape is not checked when reading; any
        // base64url value does for these tests of selection.
        let mut k = json!({"kty": "RSA", "kid": kid, "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"});
        if let Some(alg) = alg {
            k["alg"] = json!(alg);
        }
        k
    }

    #[test]
    fn a_key_is_picked_by_kid_only_for_an_algorithm_of_its_kind() {
        let set = KeySet::parse(&json!({"keys": [
            rsa_jwk("r1", Some("RS256")),
            rsa_jwk("r2", None),
            {"kty": "oct", "kid": "h1", "k": "c2VjcmV0"},
            {"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
        ]}))
        .unwrap();
        assert_eq!(
            set.keys.len(),
            2,
            "the symmetric and the encryption key are dropped"
        );
        assert!(set.find(Some("r1"), Algorithm::RS256).is_ok());
        assert!(matches!(
            set.find(Some("r1"), Algorithm::PS256),
            Err(TokenProblem::KeyMismatch)
        ));
        assert!(matches!(
            set.find(Some("r1"), Algorithm::ES256),
            Err(TokenProblem::KeyMismatch)
        ));
        assert!(set.find(Some("r2"), Algorithm::PS384).is_ok());
        assert!(matches!(
            set.find(Some("h1"), Algorithm::RS256),
            Err(TokenProblem::UnknownKey)
        ));
        assert!(matches!(
            set.find(Some("nope"), Algorithm::RS256),
            Err(TokenProblem::UnknownKey)
        ));
        // No kid: only when exactly one key fits.
        assert!(matches!(
            set.find(None, Algorithm::RS256),
            Err(TokenProblem::UnknownKey)
        ));
        let one = KeySet::parse(&json!({"keys": [rsa_jwk("r1", Some("RS256"))]})).unwrap();
        assert!(one.find(None, Algorithm::RS256).is_ok());
    }

    #[test]
    fn hmac_and_none_are_never_allowed() {
        for alg in ALLOWED {
            assert_ne!(alg.family(), AlgorithmFamily::Hmac);
        }
    }
}
