//! DPoP (RFC 9449; the MCP extension of SEP-1932): tokens bound to a key
//! the client holds, so a stolen token is worthless without it.
//!
//! When the MCP server's challenge offers the `DPoP` scheme and its
//! authorization server lists `ES256` in its
//! `dpop_signing_alg_values_supported`, a sign-in makes a P-256 key (kept
//! with the tokens, in the same file only the user can read, dropped with
//! them), sends a proof signed with it on each token request (the code
//! exchange and every refresh), and an access token the server issues as
//! `token_type: DPoP` is presented as `Authorization: DPoP …` with a fresh
//! proof on each request to the MCP server (`htm`, `htu`, `ath`, a new
//! `jti`). A server that asks for a nonce (`use_dpop_nonce` with a
//! `DPoP-Nonce` header) gets the request again once with it; the last
//! nonce of each server is kept for its next proofs. A token issued as
//! `Bearer` despite the proof is sent as `Bearer`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use rmcp::transport::auth::AuthorizationMetadata;
use sha2::{Digest, Sha256};
use url::Url;

use super::token_store::TokenStore;

/// The header a proof travels in, and the one a server's nonce does.
pub(super) const DPOP: &str = "dpop";
pub(super) const DPOP_NONCE: &str = "dpop-nonce";
/// The error a server answers when a proof lacks its nonce.
pub(super) const USE_DPOP_NONCE: &str = "use_dpop_nonce";
/// The only signing algorithm toolhost's proofs use.
const ALGORITHM: &str = "ES256";
/// The longest nonce kept (RFC 9449 sets no limit; a server's nonce is an
/// opaque handful of characters).
const MAX_NONCE_BYTES: usize = 512;
/// The most servers whose nonce is kept at once (an authorization server
/// and an MCP server: a few).
const MAX_NONCES: usize = 16;

/// Whether the authorization server of `metadata` takes DPoP proofs
/// signed with ES256.
pub(super) fn offered(metadata: &AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("dpop_signing_alg_values_supported")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|algs| algs.iter().any(|a| a.as_str() == Some(ALGORITHM)))
}

/// Whether the MCP server's `challenge` (its `WWW-Authenticate`) offers
/// the DPoP scheme (RFC 9449, 7.1): a resource server that does not take
/// DPoP tokens would refuse one, so a sign-in asks for them only where the
/// server says it takes them.
pub(super) fn taken_by(challenge: Option<&str>) -> bool {
    challenge.is_some_and(|c| {
        c.split(',').any(|part| {
            part.split_whitespace()
                .next()
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("dpop"))
        })
    })
}

/// A P-256 key proofs are signed with.
pub(super) struct DpopKey {
    signing: SigningKey,
    /// The public key as a JWK (`kty`, `crv`, `x`, `y`: no private part).
    jwk: serde_json::Value,
}

impl DpopKey {
    /// A new random key.
    pub(super) fn generate() -> Result<DpopKey, String> {
        loop {
            let mut secret = [0u8; 32];
            getrandom::fill(&mut secret).map_err(|e| format!("no randomness for a key: {e}"))?;
            // A 32-byte string is a valid scalar but with odds of 2^-128.
            if let Ok(key) = DpopKey::from_secret(&secret) {
                return Ok(key);
            }
        }
    }

    /// The key whose secret scalar is `secret` (32 bytes, big-endian).
    fn from_secret(secret: &[u8]) -> Result<DpopKey, String> {
        let signing =
            SigningKey::from_slice(secret).map_err(|e| format!("not a P-256 key: {e}"))?;
        let point = signing.verifying_key().to_encoded_point(false);
        let (Some(x), Some(y)) = (point.x(), point.y()) else {
            return Err("not a P-256 key".into());
        };
        let jwk = serde_json::json!({
            "crv": "P-256",
            "kty": "EC",
            "x": URL_SAFE_NO_PAD.encode(x),
            "y": URL_SAFE_NO_PAD.encode(y),
        });
        Ok(DpopKey { signing, jwk })
    }

    /// The form it is kept in (its secret, base64url).
    pub(super) fn to_kept(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.signing.to_bytes())
    }

    /// The key kept as `kept` ([`DpopKey::to_kept`]).
    pub(super) fn from_kept(kept: &str) -> Result<DpopKey, String> {
        let secret = URL_SAFE_NO_PAD
            .decode(kept.trim())
            .map_err(|e| format!("the kept DPoP key is not base64url: {e}"))?;
        DpopKey::from_secret(&secret)
    }

    /// The JWK thumbprint (RFC 7638) of the public key, base64url: what a
    /// bound token's `cnf.jkt` names.
    #[cfg(test)]
    pub(super) fn thumbprint(&self) -> String {
        // The required members in lexicographic order, no whitespace,
        // which is how `serde_json` writes this object.
        let canonical = self.jwk.to_string();
        URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
    }

    /// A proof (RFC 9449, 4.2) for a `method` request to `url` (its query
    /// and fragment left out), bound to `access_token` when one is
    /// presented with it (`ath`), carrying the server's `nonce` if any.
    pub(super) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> String {
        let header = serde_json::json!({"typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.jwk});
        let mut claims = serde_json::json!({
            "jti": uuid::Uuid::new_v4().to_string(),
            "htm": method,
            "htu": target(url),
            "iat": SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        });
        if let Some(token) = access_token {
            claims["ath"] = URL_SAFE_NO_PAD
                .encode(Sha256::digest(token.as_bytes()))
                .into();
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature: Signature = self.signing.sign(signed.as_bytes());
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.to_bytes()))
    }
}

/// `url` without its query and fragment (a proof's `htu`).
fn target(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut url) => {
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or(url).to_owned(),
    }
}

/// The server of `url`, that a nonce belongs to.
fn origin(url: &str) -> String {
    Url::parse(url).map_or_else(|_| url.to_owned(), |u| u.origin().ascii_serialization())
}

/// The DPoP state of one MCP server's sign-in: its key (kept with its
/// tokens) and the nonces its servers asked for; shared by the client of
/// its authorization server and that of its MCP requests.
pub(crate) struct Dpop {
    store: TokenStore,
    /// The key last read from the store, with the form it was kept in.
    key: parking_lot::Mutex<Option<(String, Arc<DpopKey>)>>,
    /// Whether the last access token seen was issued bound to the key.
    bound: parking_lot::Mutex<Option<([u8; 32], bool)>>,
    nonces: parking_lot::Mutex<HashMap<String, String>>,
}

impl Dpop {
    pub(super) fn new(store: TokenStore) -> Arc<Dpop> {
        Arc::new(Dpop {
            store,
            key: parking_lot::Mutex::new(None),
            bound: parking_lot::Mutex::new(None),
            nonces: parking_lot::Mutex::new(HashMap::new()),
        })
    }

    /// The key kept with the tokens, if any.
    pub(super) fn key(&self) -> Option<Arc<DpopKey>> {
        let kept = self.store.dpop_key()?;
        let mut cached = self.key.lock();
        if let Some((form, key)) = cached.as_ref()
            && *form == kept
        {
            return Some(key.clone());
        }
        match DpopKey::from_kept(&kept) {
            Ok(key) => {
                let key = Arc::new(key);
                *cached = Some((kept, key.clone()));
                Some(key)
            }
            Err(why) => {
                tracing::warn!("ignoring the DPoP key kept: {why}");
                None
            }
        }
    }

    /// The key kept with the tokens, made (and kept) if there is none.
    pub(super) fn key_or_new(&self) -> Result<Arc<DpopKey>, String> {
        if let Some(key) = self.key() {
            return Ok(key);
        }
        let key = DpopKey::generate()?;
        self.store
            .set_dpop_key(Some(key.to_kept()))
            .map_err(|e| e.to_string())?;
        Ok(self.key().unwrap_or_else(|| Arc::new(key)))
    }

    /// The key `access_token` is bound to, when it was issued as a DPoP
    /// token (`token_type: DPoP`) and the key is kept.
    pub(super) fn binding(&self, access_token: &str) -> Option<Arc<DpopKey>> {
        let digest: [u8; 32] = Sha256::digest(access_token.as_bytes()).into();
        let known = *self.bound.lock();
        let bound = match known {
            Some((seen, bound)) if seen == digest => bound,
            _ => {
                let bound = self.store.credentials().is_some_and(|c| {
                    c.token_response.is_some_and(|t| {
                        oauth2::TokenResponse::access_token(&t).secret() == access_token
                            && oauth2::TokenResponse::token_type(&t)
                                .as_ref()
                                .eq_ignore_ascii_case("dpop")
                    })
                });
                *self.bound.lock() = Some((digest, bound));
                bound
            }
        };
        if bound { self.key() } else { None }
    }

    /// The nonce the server of `url` last asked for.
    pub(super) fn nonce(&self, url: &str) -> Option<String> {
        self.nonces.lock().get(&origin(url)).cloned()
    }

    /// Keeps the nonce a response from `url` carries (`DPoP-Nonce`), if
    /// it has one of a sane form; whether it had.
    pub(super) fn learn(&self, url: &str, headers: &http::HeaderMap) -> bool {
        let Some(nonce) = headers
            .get(DPOP_NONCE)
            .and_then(|v| v.to_str().ok())
            .filter(|n| !n.is_empty() && n.len() <= MAX_NONCE_BYTES)
            .filter(|n| n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'"'))
        else {
            return false;
        };
        let mut nonces = self.nonces.lock();
        if nonces.len() >= MAX_NONCES && !nonces.contains_key(&origin(url)) {
            nonces.clear();
        }
        nonces.insert(origin(url), nonce.to_owned());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use p256::ecdsa::VerifyingKey;
    use p256::ecdsa::signature::Verifier;

    fn decode(part: &str) -> serde_json::Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    #[test]
    fn a_proof_is_signed_by_the_key_its_header_names_and_binds_the_token_and_nonce() {
        let key = DpopKey::generate().unwrap();
        let proof = key.proof(
            "POST",
            "https://mcp.example/mcp?x=1#f",
            Some("tok"),
            Some("n-1"),
        );
        let parts: Vec<&str> = proof.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header = decode(parts[0]);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        let claims = decode(parts[1]);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example/mcp");
        assert_eq!(claims["nonce"], "n-1");
        assert_eq!(
            claims["ath"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(b"tok"))
        );
        // Verified with the public key of the header alone.
        let x = URL_SAFE_NO_PAD
            .decode(header["jwk"]["x"].as_str().unwrap())
            .unwrap();
        let y = URL_SAFE_NO_PAD
            .decode(header["jwk"]["y"].as_str().unwrap())
            .unwrap();
        let point = p256::EncodedPoint::from_affine_coordinates(
            x.as_slice().into(),
            y.as_slice().into(),
            false,
        );
        let public = VerifyingKey::from_encoded_point(&point).unwrap();
        let signature = Signature::from_slice(&URL_SAFE_NO_PAD.decode(parts[2]).unwrap()).unwrap();
        let signed = format!("{}.{}", parts[0], parts[1]);
        public.verify(signed.as_bytes(), &signature).unwrap();
        assert!(public.verify(b"other", &signature).is_err());
    }

    #[test]
    fn each_proof_has_its_own_jti_and_a_kept_key_is_the_same_key() {
        let key = DpopKey::generate().unwrap();
        let jti = |p: String| decode(p.split('.').nth(1).unwrap())["jti"].clone();
        assert_ne!(
            jti(key.proof("GET", "https://a/", None, None)),
            jti(key.proof("GET", "https://a/", None, None))
        );
        let again = DpopKey::from_kept(&key.to_kept()).unwrap();
        assert_eq!(again.thumbprint(), key.thumbprint());
        assert_ne!(DpopKey::generate().unwrap().thumbprint(), key.thumbprint());
        assert!(DpopKey::from_kept("not a key").is_err());
    }

    #[test]
    fn the_thumbprint_is_rfc_7638s() {
        // RFC 7638's members, in its order and form, hashed as its example.
        let key = DpopKey::generate().unwrap();
        let jwk = &key.jwk;
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap(),
            jwk["y"].as_str().unwrap()
        );
        assert_eq!(
            key.thumbprint(),
            URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
        );
    }

    #[test]
    fn a_nonce_is_kept_per_server_and_only_of_a_sane_form() {
        let dpop = Dpop::new(TokenStore::new("s", "https://mcp.example/mcp", None));
        let mut headers = http::HeaderMap::new();
        headers.insert(DPOP_NONCE, "abc".parse().unwrap());
        assert!(dpop.learn("https://mcp.example/mcp", &headers));
        assert_eq!(
            dpop.nonce("https://mcp.example/other").as_deref(),
            Some("abc")
        );
        assert_eq!(dpop.nonce("https://as.example/token"), None);
        headers.insert(DPOP_NONCE, "a b".parse().unwrap());
        assert!(!dpop.learn("https://as.example/token", &headers));
        headers.insert(DPOP_NONCE, "x".repeat(MAX_NONCE_BYTES + 1).parse().unwrap());
        assert!(!dpop.learn("https://as.example/token", &headers));
        assert_eq!(dpop.nonce("https://as.example/token"), None);
    }

    #[tokio::test]
    async fn only_a_token_issued_as_dpop_goes_with_the_key_kept_beside_it_in_the_file() {
        use rmcp::transport::auth::{CredentialStore, StoredCredentials};
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new("s", "https://mcp.example/mcp", Some(dir.path()));
        let save = |token_type: &str, access: &str| {
            let token = serde_json::from_value(serde_json::json!({
                "access_token": access, "token_type": token_type,
            }))
            .unwrap();
            StoredCredentials::new("c".to_owned(), Some(token), vec![], Some(1))
        };
        let dpop = Dpop::new(store.clone());
        assert!(dpop.key().is_none());
        let key = dpop.key_or_new().unwrap();
        store.save(save("DPoP", "bound")).await.unwrap();
        assert!(dpop.binding("other").is_none(), "not the token kept");
        // A process started later reads the same key from the file.
        let later = Dpop::new(TokenStore::new(
            "s",
            "https://mcp.example/mcp",
            Some(dir.path()),
        ));
        let bound = later.binding("bound").expect("bound to the kept key");
        assert_eq!(bound.thumbprint(), key.thumbprint());
        store.save(save("Bearer", "plain")).await.unwrap();
        assert!(
            later.binding("plain").is_none(),
            "a Bearer token goes as Bearer"
        );
        store.clear().await.unwrap();
        assert!(
            Dpop::new(store).key().is_none(),
            "signing out drops the key"
        );
    }

    #[test]
    fn only_a_challenge_of_the_dpop_scheme_says_the_server_takes_dpop() {
        assert!(taken_by(Some(r#"DPoP resource_metadata="https://m/x""#)));
        assert!(taken_by(Some(r#"Bearer realm="m", DPoP algs="ES256""#)));
        assert!(!taken_by(Some(r#"Bearer resource_metadata="https://m/x""#)));
        assert!(!taken_by(Some(r#"Bearer error="x", scope=DPoP"#)));
        assert!(!taken_by(None));
    }

    #[test]
    fn dpop_is_used_only_where_es256_proofs_are_taken() {
        let mut metadata = AuthorizationMetadata::default();
        assert!(!offered(&metadata));
        metadata.additional_fields.insert(
            "dpop_signing_alg_values_supported".into(),
            serde_json::json!(["RS256"]),
        );
        assert!(!offered(&metadata));
        metadata.additional_fields.insert(
            "dpop_signing_alg_values_supported".into(),
            serde_json::json!(["RS256", "ES256"]),
        );
        assert!(offered(&metadata));
    }
}
