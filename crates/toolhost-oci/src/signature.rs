//! cosign-compatible key-based signatures (the cosign "signature spec").
//!
//! A signed artifact `REPO@sha256:HEX` has a signature artifact at the tag
//! `REPO:sha256-HEX.sig`: an OCI image manifest whose layers each hold a
//! "simple signing" payload ([`SIMPLE_SIGNING_MEDIA_TYPE`]):
//!
//! ```json
//! {"critical":{"identity":{"docker-reference":"registry.example.com/tools/calc"},
//!  "image":{"docker-manifest-digest":"sha256:HEX"},
//!  "type":"cosign container image signature"},"optional":null}
//! ```
//!
//! and carry, in the [`SIGNATURE_ANNOTATION`] annotation, the base64 of an
//! ECDSA P-256 signature (ASN.1 DER) over SHA-256 of the payload's bytes. A
//! signature verifies when one trusted key verifies it, the payload's type
//! is cosign's and its `docker-manifest-digest` is the digest of the
//! manifest being installed. The `docker-reference` is not compared: a copy
//! in another registry or repository keeps its signatures, as with `cosign
//! verify`. Several signers append layers to the same artifact.
//!
//! Not supported: keyless signatures (Fulcio certificates and Rekor
//! transparency-log entries need the Sigstore services), and cosign's
//! encrypted private-key files (sign with a PEM key; `cosign
//! import-key-pair` makes a cosign key of the same key).

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::PublicKey;

/// The media type of a cosign "simple signing" payload layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";
/// The largest payload read.
pub const MAX_PAYLOAD_BYTES: u64 = 64 * 1024;
/// The most signature layers looked at.
pub const MAX_SIGNATURES: usize = 32;

/// The tag of the signature artifact of the manifest with `digest`
/// (`sha256:HEX` → `sha256-HEX.sig`), `None` for a malformed digest.
///
/// ```
/// let d = toolhost_oci::sha256_digest(b"m");
/// let tag = toolhost_oci::signature::signature_tag(&d).unwrap();
/// assert_eq!(tag, format!("sha256-{}.sig", &d[7..]));
/// ```
pub fn signature_tag(digest: &str) -> Option<String> {
    crate::is_sha256_digest(digest).then(|| format!("{}.sig", digest.replacen(':', "-", 1)))
}

#[derive(Debug, Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The simple-signing payload cosign signs for the manifest `digest` in
/// `docker_reference` (`REGISTRY/REPO`, without tag).
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    let payload = Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: docker_reference.to_owned(),
            },
            image: Image {
                docker_manifest_digest: digest.to_owned(),
            },
            kind: SIGNATURE_TYPE.to_owned(),
        },
        optional: None,
    };
    // Serialising these plain structs cannot fail.
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// The value of [`SIGNATURE_ANNOTATION`] for a DER signature.
pub fn encode_signature(der: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(der)
}

/// Checks one signature layer: returns the fingerprint of the trusted key
/// that verifies `annotation` over `payload` when the payload is about the
/// manifest `digest`, else why not.
pub fn verify(
    payload: &[u8],
    annotation: &str,
    digest: &str,
    keys: &[PublicKey],
) -> Result<String, String> {
    let signature = base64::engine::general_purpose::STANDARD
        .decode(annotation.trim())
        .map_err(|e| format!("the signature is not base64: {e}"))?;
    let Some(key) = keys.iter().find(|k| k.verifies(payload, &signature)) else {
        return Err("no trusted key verifies the signature".into());
    };
    let parsed: Payload = serde_json::from_slice(payload)
        .map_err(|e| format!("the signed payload is not a cosign simple-signing payload: {e}"))?;
    if parsed.critical.kind != SIGNATURE_TYPE {
        return Err(format!(
            "the signed payload's type is `{}`, not `{SIGNATURE_TYPE}`",
            parsed.critical.kind
        ));
    }
    if parsed.critical.image.docker_manifest_digest != digest {
        return Err(format!(
            "the signature is for manifest {}, not {digest}",
            parsed.critical.image.docker_manifest_digest
        ));
    }
    Ok(key.fingerprint())
}

/// The config blob of a signature artifact (an OCI image config listing
/// the payload layers, as cosign writes it).
pub(crate) fn config_blob(layer_digests: &[String]) -> Vec<u8> {
    let config = serde_json::json!({
        "architecture": "",
        "created": "0001-01-01T00:00:00Z",
        "history": [{ "created": "0001-01-01T00:00:00Z" }],
        "os": "",
        "rootfs": { "type": "layers", "diff_ids": layer_digests },
        "config": {}
    });
    serde_json::to_vec(&config).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SigningKey;

    #[test]
    fn the_payload_is_cosigns_simple_signing_json() {
        let d = crate::sha256_digest(b"m");
        let p = String::from_utf8(payload("127.0.0.1:5000/calc", &d)).unwrap();
        assert_eq!(
            p,
            format!(
                "{{\"critical\":{{\"identity\":{{\"docker-reference\":\"127.0.0.1:5000/calc\"}},\
                 \"image\":{{\"docker-manifest-digest\":\"{d}\"}},\
                 \"type\":\"cosign container image signature\"}},\"optional\":null}}"
            )
        );
    }

    #[test]
    fn a_signature_verifies_only_for_its_manifest_and_a_trusted_key() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let d = crate::sha256_digest(b"m");
        let p = payload("r/calc", &d);
        let sig = encode_signature(&key.sign_der(&p));
        assert_eq!(
            verify(&p, &sig, &d, &[other.public_key(), key.public_key()]),
            Ok(key.public_key().fingerprint())
        );
        assert!(verify(&p, &sig, &d, &[other.public_key()]).is_err());
        let other_manifest = crate::sha256_digest(b"n");
        let err = verify(&p, &sig, &other_manifest, &[key.public_key()]).unwrap_err();
        assert!(err.contains("not sha256:"), "{err}");
        assert!(verify(&p, "%%%", &d, &[key.public_key()]).is_err());
    }
}
