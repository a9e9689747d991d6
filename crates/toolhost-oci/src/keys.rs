//! ECDSA P-256 keys in PEM, as cosign writes public keys and as OpenSSL
//! writes private ones.

use std::path::Path;

use p256::ecdsa;
use p256::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};

use crate::OciError;

/// The most bytes a key file may have (a P-256 key in PEM is under 300).
const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// A private key that signs plugins (ECDSA P-256).
///
/// ```
/// use toolhost_oci::{PublicKey, SigningKey};
///
/// let key = SigningKey::generate()?;
/// let public = PublicKey::from_pem(&key.public_key().to_pem()?, "new key")?;
/// assert_eq!(public.fingerprint(), key.public_key().fingerprint());
/// # Ok::<(), toolhost_oci::OciError>(())
/// ```
#[derive(Clone)]
pub struct SigningKey(ecdsa::SigningKey);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.public_key().fingerprint())
    }
}

impl SigningKey {
    /// A new random key (from the operating system's generator).
    pub fn generate() -> Result<SigningKey, OciError> {
        use p256::elliptic_curve::Generate;
        ecdsa::SigningKey::try_generate()
            .map(SigningKey)
            .map_err(|e| OciError::Key {
                what: "generation".into(),
                message: e.to_string(),
            })
    }

    /// Reads a PEM private key: PKCS#8 (`BEGIN PRIVATE KEY`, what `openssl
    /// genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256` writes) or
    /// SEC1 (`BEGIN EC PRIVATE KEY`). cosign's encrypted key files are not
    /// read (`cosign import-key-pair` goes the other way).
    pub fn from_pem(pem: &str, what: &str) -> Result<SigningKey, OciError> {
        let key = if pem.contains("BEGIN EC PRIVATE KEY") {
            p256::SecretKey::from_sec1_pem(pem)
                .map(ecdsa::SigningKey::from)
                .map_err(|e| e.to_string())
        } else {
            p256::SecretKey::from_pkcs8_pem(pem)
                .map(ecdsa::SigningKey::from)
                .map_err(|e| e.to_string())
        };
        key.map(SigningKey).map_err(|e| OciError::Key {
            what: what.to_owned(),
            message: format!("not a P-256 private key in PEM (PKCS#8 or SEC1): {e}"),
        })
    }

    /// Reads [`SigningKey::from_pem`] from a file.
    pub fn from_file(path: &Path) -> Result<SigningKey, OciError> {
        SigningKey::from_pem(&read_key_file(path)?, &path.display().to_string())
    }

    /// The key in PKCS#8 PEM.
    pub fn to_pem(&self) -> Result<String, OciError> {
        self.0
            .to_pkcs8_pem(LineEnding::LF)
            .map(|s| s.to_string())
            .map_err(|e| OciError::Key {
                what: "private key".into(),
                message: e.to_string(),
            })
    }

    /// Its public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(*self.0.verifying_key())
    }

    /// An ASN.1 DER ECDSA signature over SHA-256 of `payload` (what cosign
    /// stores, base64, in its signature annotation).
    pub fn sign_der(&self, payload: &[u8]) -> Vec<u8> {
        use p256::ecdsa::signature::Signer;
        let signature: ecdsa::Signature = self.0.sign(payload);
        signature.to_der().as_bytes().to_vec()
    }
}

/// A public key that plugins' signatures are verified against (ECDSA P-256,
/// PEM `BEGIN PUBLIC KEY`: what `cosign generate-key-pair` writes as
/// `cosign.pub`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(ecdsa::VerifyingKey);

impl PublicKey {
    /// Reads a PEM public key (SubjectPublicKeyInfo). `what` names it in errors.
    pub fn from_pem(pem: &str, what: &str) -> Result<PublicKey, OciError> {
        ecdsa::VerifyingKey::from_public_key_pem(pem.trim())
            .map(PublicKey)
            .map_err(|e| OciError::Key {
                what: what.to_owned(),
                message: format!("not a P-256 public key in PEM: {e}"),
            })
    }

    /// Reads [`PublicKey::from_pem`] from a file.
    pub fn from_file(path: &Path) -> Result<PublicKey, OciError> {
        PublicKey::from_pem(&read_key_file(path)?, &path.display().to_string())
    }

    /// The key in PEM.
    pub fn to_pem(&self) -> Result<String, OciError> {
        self.0
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| OciError::Key {
                what: "public key".into(),
                message: e.to_string(),
            })
    }

    /// `sha256:` and the hex of the key's DER SubjectPublicKeyInfo: what the
    /// lock file records as a plugin's signer (the same as
    /// `openssl pkey -pubin -in KEY.pub -outform DER | sha256sum`).
    pub fn fingerprint(&self) -> String {
        match self.0.to_public_key_der() {
            Ok(der) => crate::sha256_digest(der.as_bytes()),
            // Encoding a valid point cannot fail; keep a stable answer anyway.
            Err(_) => crate::sha256_digest(self.0.to_sec1_point(false).as_bytes()),
        }
    }

    /// Whether `signature` (ASN.1 DER, or the fixed 64-byte form) is this
    /// key's ECDSA signature over SHA-256 of `payload`.
    pub fn verifies(&self, payload: &[u8], signature: &[u8]) -> bool {
        use p256::ecdsa::signature::Verifier;
        let parsed = ecdsa::Signature::from_der(signature)
            .or_else(|_| ecdsa::Signature::from_slice(signature));
        parsed.is_ok_and(|s| self.0.verify(payload, &s).is_ok())
    }
}

fn read_key_file(path: &Path) -> Result<String, OciError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| OciError::Key {
        what: path.display().to_string(),
        message: e.to_string(),
    })?;
    let mut text = String::new();
    file.take(MAX_KEY_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| OciError::Key {
            what: path.display().to_string(),
            message: e.to_string(),
        })?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_with_its_key_only_and_over_its_payload_only() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let sig = key.sign_der(b"payload");
        assert!(key.public_key().verifies(b"payload", &sig));
        assert!(!key.public_key().verifies(b"payloaD", &sig));
        assert!(!other.public_key().verifies(b"payload", &sig));
        assert!(!key.public_key().verifies(b"payload", b"garbage"));
    }

    #[test]
    fn keys_round_trip_through_pem_in_both_private_formats() {
        let key = SigningKey::generate().unwrap();
        let again = SigningKey::from_pem(&key.to_pem().unwrap(), "k").unwrap();
        assert_eq!(again.public_key(), key.public_key());
        let sec1 = p256::SecretKey::from(&key.0)
            .to_sec1_pem(LineEnding::LF)
            .unwrap();
        let from_sec1 = SigningKey::from_pem(&sec1, "k").unwrap();
        assert_eq!(from_sec1.public_key(), key.public_key());
        assert!(PublicKey::from_pem("-----BEGIN PUBLIC KEY-----\nAA==\n", "k").is_err());
        assert!(SigningKey::from_pem("not pem", "k").is_err());
    }

    #[test]
    fn a_public_key_written_by_openssl_parses_and_verifies_a_fixed_signature() {
        // `openssl ecparam -name prime256v1 -genkey | openssl pkey -pubout`
        // and `printf payload | openssl dgst -sha256 -sign KEY | base64`.
        let pem = "-----BEGIN PUBLIC KEY-----\n\
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEDdekCPHd4uh9L8V3D+osSmkNsqW3\n\
l2Ju0tbehx+zxrH92OQd5NyJp41liqRekUgPV4gL6A6ijZ+eRGj19deB3g==\n\
-----END PUBLIC KEY-----\n";
        let key = PublicKey::from_pem(pem, "openssl").unwrap();
        use base64::Engine;
        let sig = base64::engine::general_purpose::STANDARD
            .decode("MEQCIFpCH9S1J4Rerdmh53vYFg4MnN5JV40A50qpbbfuaj33AiBD/NYnVTDmhTp4sRPPCcT0XS+FJ8d/69Qz6I4PwhabIA==")
            .unwrap();
        assert!(key.verifies(b"payload", &sig));
        assert!(!key.verifies(b"payloaf", &sig));
    }
}
