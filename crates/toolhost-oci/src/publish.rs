//! Pushing a plugin (and its signature) to a registry.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use toolhost_runtime::manifest::Manifest;

use crate::fetch::{Credentials, auth, classify, client, pull_manifest};
use crate::signature::{self, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use crate::{
    MAX_COMPONENT_BYTES, MAX_PLUGIN_MANIFEST_BYTES, NAME_ANNOTATION, OCI_MANIFEST_MEDIA_TYPE,
    OciError, PLUGIN_MANIFEST_MEDIA_TYPE, SKILLS_LAYER_MEDIA_TYPE, SigningKey,
    WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};

/// How [`publish`] reaches the registry, and the key it signs with.
#[derive(Debug, Clone, Default)]
pub struct PublishOptions {
    /// Plain HTTP to a registry that is not on loopback.
    pub insecure: bool,
    /// Registry credentials; `None` is anonymous.
    pub credentials: Option<Credentials>,
    /// Sign the pushed manifest with this key (a cosign signature).
    pub key: Option<SigningKey>,
}

/// What [`publish`] pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The plugin's name.
    pub name: String,
    /// Its version, from its manifest.
    pub version: Option<semver::Version>,
    /// `oci://REGISTRY/REPO@sha256:…`: the pushed manifest, pinned.
    pub reference: String,
    /// The digest of the OCI manifest.
    pub manifest_digest: String,
    /// `sha256:` of the component.
    pub digest: String,
    /// The fingerprint of the key it was signed with.
    pub signer: Option<String>,
}

/// Pushes the component `wasm` (and the `NAME.toml` and `NAME.skills/`
/// beside it) to
/// `reference` (`REGISTRY/REPO:TAG`) in the Wasm OCI artifact layout, and
/// signs the pushed manifest when [`PublishOptions::key`] is set.
pub async fn publish(
    wasm: &Path,
    reference: &Reference,
    options: &PublishOptions,
) -> Result<Published, OciError> {
    let component = read_bounded(wasm, MAX_COMPONENT_BYTES)?;
    if !component.starts_with(b"\0asm") {
        return Err(OciError::NotAPlugin {
            reference: wasm.display().to_string(),
            message: "it is not WebAssembly".into(),
        });
    }
    let toml_path = Manifest::path_for(wasm);
    let manifest_text = match read_bounded(&toml_path, MAX_PLUGIN_MANIFEST_BYTES) {
        Ok(bytes) => Some(
            String::from_utf8(bytes)
                .map_err(|_| OciError::Manifest(format!("{} is not UTF-8", toml_path.display())))?,
        ),
        Err(OciError::Io { .. }) if !toml_path.exists() => None,
        Err(e) => return Err(e),
    };
    let plugin_manifest = match &manifest_text {
        Some(text) => {
            Manifest::parse(text, &toml_path).map_err(|e| OciError::Manifest(e.to_string()))?
        }
        None => Manifest::default(),
    };
    let name = plugin_manifest.name.clone().unwrap_or_else(|| {
        wasm.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned()
    });
    if !toolhost_runtime::contract::is_valid_tool_name(&name) {
        return Err(OciError::InvalidName(name));
    }

    let digest = crate::sha256_digest(&component);
    let mut layers = vec![ImageLayer::new(
        component,
        WASM_LAYER_MEDIA_TYPE.to_owned(),
        None,
    )];
    if let Some(text) = manifest_text {
        layers.push(ImageLayer::new(
            text.into_bytes(),
            PLUGIN_MANIFEST_MEDIA_TYPE.to_owned(),
            None,
        ));
    }
    let skills = crate::skills::dir_beside(wasm);
    if skills.is_dir() {
        layers.push(ImageLayer::new(
            crate::skills::pack(&skills)?,
            SKILLS_LAYER_MEDIA_TYPE.to_owned(),
            None,
        ));
    }
    let created = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    // The CNCF Wasm OCI config (`wkg` reads `component` when present; this
    // host does not need it).
    let config = serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [digest],
    });
    let config = Config::new(
        serde_json::to_vec(&config).unwrap_or_default(),
        WASM_CONFIG_MEDIA_TYPE.to_owned(),
        None,
    );
    let mut annotations = BTreeMap::from([
        (NAME_ANNOTATION.to_owned(), name.clone()),
        ("org.opencontainers.image.title".to_owned(), name.clone()),
        ("org.opencontainers.image.created".to_owned(), created),
    ]);
    if let Some(v) = &plugin_manifest.version {
        annotations.insert("org.opencontainers.image.version".into(), v.to_string());
    }
    if let Some(d) = &plugin_manifest.description {
        annotations.insert("org.opencontainers.image.description".into(), d.clone());
    }
    let mut manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    manifest.media_type = Some(OCI_MANIFEST_MEDIA_TYPE.to_owned());

    let client = client(reference.registry(), options.insecure)?;
    let auth = auth(options.credentials.as_ref());
    let manifest_digest = push(&client, &auth, reference, &layers, &config, &manifest).await?;

    let signer = match &options.key {
        Some(key) => {
            sign(&client, &auth, reference, &manifest_digest, key).await?;
            Some(key.public_key().fingerprint())
        }
        None => None,
    };
    Ok(Published {
        name,
        version: plugin_manifest.version,
        reference: format!(
            "oci://{}/{}@{manifest_digest}",
            reference.registry(),
            reference.repository()
        ),
        manifest_digest,
        digest,
        signer,
    })
}

/// Pushes the blobs, then the manifest as exact bytes; returns its digest.
pub(crate) async fn push(
    client: &oci_client::Client,
    auth: &RegistryAuth,
    reference: &Reference,
    layers: &[ImageLayer],
    config: &Config,
    manifest: &OciImageManifest,
) -> Result<String, OciError> {
    let whole = reference.whole();
    // Authenticates (when the registry asks) before the blob uploads.
    client
        .store_auth_if_needed(reference.resolve_registry(), auth)
        .await;
    for (layer, descriptor) in layers.iter().zip(&manifest.layers) {
        client
            .push_blob(reference, layer.data.clone(), &descriptor.digest)
            .await
            .map_err(|e| classify("pushing a layer", &whole, e))?;
    }
    client
        .push_blob(reference, config.data.clone(), &manifest.config.digest)
        .await
        .map_err(|e| classify("pushing the config", &whole, e))?;
    let body = serde_json::to_vec(manifest).map_err(|e| OciError::registry(&whole, e))?;
    let manifest_digest = crate::sha256_digest(&body);
    client
        .push_manifest_raw(reference, body, http_header(OCI_MANIFEST_MEDIA_TYPE))
        .await
        .map_err(|e| classify("pushing the manifest", &whole, e))?;
    Ok(manifest_digest)
}

fn http_header(value: &'static str) -> http::HeaderValue {
    http::HeaderValue::from_static(value)
}

/// Adds a cosign signature of `manifest_digest` by `key` to the signature
/// artifact at `sha256-HEX.sig` (keeping the signatures already there).
async fn sign(
    client: &oci_client::Client,
    auth: &RegistryAuth,
    reference: &Reference,
    manifest_digest: &str,
    key: &SigningKey,
) -> Result<(), OciError> {
    let tag = signature::signature_tag(manifest_digest).ok_or_else(|| OciError::Registry {
        reference: reference.whole(),
        message: format!("the pushed manifest digest `{manifest_digest}` is not sha256"),
    })?;
    let sig_ref = Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        tag,
    );
    let docker_reference = format!("{}/{}", reference.registry(), reference.repository());
    let payload = signature::payload(&docker_reference, manifest_digest);
    let annotation = signature::encode_signature(&key.sign_der(&payload));

    // Signatures by others stay (their payload blobs are in the registry
    // already); a payload identical to ours is replaced.
    let payload_digest = crate::sha256_digest(&payload);
    let mut existing: Vec<OciDescriptor> = match pull_manifest(client, auth, &sig_ref).await {
        Ok((raw, _)) => serde_json::from_slice::<OciImageManifest>(&raw)
            .map(|m| m.layers)
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    // (ECDSA here is deterministic, RFC 6979: signing again gives the same layer.)
    existing.retain(|l| {
        l.media_type == SIMPLE_SIGNING_MEDIA_TYPE
            && !(l.digest == payload_digest
                && l.annotations
                    .as_ref()
                    .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                    .is_some_and(|s| *s == annotation))
    });
    let ours = ImageLayer::new(
        payload,
        SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
        Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_owned(),
            annotation,
        )])),
    );
    let whole = sig_ref.whole();
    client
        .push_blob(&sig_ref, ours.data.clone(), &payload_digest)
        .await
        .map_err(|e| classify("pushing the signature payload", &whole, e))?;
    let mut descriptors = existing;
    descriptors.push(OciDescriptor {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.to_owned(),
        digest: payload_digest,
        size: i64::try_from(ours.data.len()).unwrap_or(i64::MAX),
        annotations: ours.annotations.clone(),
        ..OciDescriptor::default()
    });
    let diff_ids: Vec<String> = descriptors.iter().map(|d| d.digest.clone()).collect();
    let config = Config::oci_v1(signature::config_blob(&diff_ids), None);
    client
        .push_blob(&sig_ref, config.data.clone(), &config.sha256_digest())
        .await
        .map_err(|e| classify("pushing the signature config", &whole, e))?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST_MEDIA_TYPE.to_owned()),
        config: OciDescriptor {
            media_type: config.media_type.clone(),
            digest: config.sha256_digest(),
            size: i64::try_from(config.data.len()).unwrap_or(i64::MAX),
            ..OciDescriptor::default()
        },
        layers: descriptors,
        ..OciImageManifest::default()
    };
    let body = serde_json::to_vec(&manifest).map_err(|e| OciError::registry(&whole, e))?;
    client
        .push_manifest_raw(&sig_ref, body, http_header(OCI_MANIFEST_MEDIA_TYPE))
        .await
        .map_err(|e| classify("pushing the signature", &whole, e))?;
    Ok(())
}

fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, OciError> {
    let file = std::fs::File::open(path).map_err(|e| OciError::io(path, e))?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| OciError::io(path, e))?;
    if bytes.len() as u64 > limit {
        return Err(OciError::TooLarge {
            what: path.display().to_string(),
            size: bytes.len() as u64,
            limit,
        });
    }
    Ok(bytes)
}
