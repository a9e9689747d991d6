//! Getting a plugin out of a registry (or a file), verified, into a
//! temporary file beside where it will be installed.

use std::io::Write;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::Digest;
use tempfile::NamedTempFile;
use toolhost_runtime::manifest::Manifest;

use crate::signature::{self, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE};
use crate::{
    MAX_COMPONENT_BYTES, MAX_OCI_MANIFEST_BYTES, MAX_PLUGIN_MANIFEST_BYTES, NAME_ANNOTATION,
    OCI_MANIFEST_MEDIA_TYPE, OciError, PLUGIN_MANIFEST_MEDIA_TYPE, PublicKey, Source,
    WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};
use crate::{MAX_SKILLS_LAYER_BYTES, SKILLS_LAYER_MEDIA_TYPE};

/// A user name and password for a registry (HTTP Basic, or the token
/// exchange the registry asks for). Without them access is anonymous.
#[derive(Clone)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password or token.
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, ***)", self.username)
    }
}

/// How [`fetch`] reaches the registry and what it requires.
#[derive(Debug, Clone)]
pub struct FetchOptions {
    /// Plain HTTP to a registry that is not on loopback (loopback
    /// registries are always reached over plain HTTP).
    pub insecure: bool,
    /// Registry credentials; `None` is anonymous.
    pub credentials: Option<Credentials>,
    /// The public keys whose signatures are accepted.
    pub trusted_keys: Vec<PublicKey>,
    /// Refuse a plugin that no trusted key signed.
    pub require_signature: bool,
    /// The largest component accepted ([`MAX_COMPONENT_BYTES`] by default).
    pub max_component_bytes: u64,
    /// The name the plugin must have (`host install --name`).
    pub expected_name: Option<String>,
}

impl Default for FetchOptions {
    fn default() -> Self {
        FetchOptions {
            insecure: false,
            credentials: None,
            trusted_keys: Vec::new(),
            require_signature: false,
            max_component_bytes: MAX_COMPONENT_BYTES,
            expected_name: None,
        }
    }
}

/// A verified plugin in a temporary file, ready to [`install`](Fetched::install).
#[derive(Debug)]
pub struct Fetched {
    /// Its name: the files are installed as `NAME.wasm` and `NAME.toml`.
    pub name: String,
    /// The version its manifest declares.
    pub version: Option<semver::Version>,
    /// `sha256:` of the component: what the lock file binds grants to.
    pub digest: String,
    /// The digest of the OCI manifest (`None` for a file).
    pub manifest_digest: Option<String>,
    /// Where it came from, pinned: `oci://REGISTRY/REPO@sha256:…`, or `file://PATH`.
    pub source: String,
    /// The fingerprint of the trusted key whose signature verified, if any.
    pub signer: Option<String>,
    pub(crate) wasm: NamedTempFile,
    pub(crate) manifest: Option<String>,
    /// Its skills, a tar (`skills.rs`), verified as the other layers.
    pub(crate) skills: Option<NamedTempFile>,
}

/// Fetches and verifies the plugin `source` into a temporary file in
/// `staging` (the directory it will be installed into, so that installing
/// is a rename). Nothing is written under a plugin's name here.
pub async fn fetch(
    source: &Source,
    options: &FetchOptions,
    staging: &Path,
) -> Result<Fetched, OciError> {
    std::fs::create_dir_all(staging).map_err(|e| OciError::io(staging, e))?;
    match source {
        Source::Registry(reference) => fetch_registry(reference, options, staging).await,
        Source::File(path) => fetch_file(path, options, staging),
    }
}

/// An OCI client for `registry`: plain HTTP on loopback or when insecure,
/// else HTTPS (rustls with ring).
pub(crate) fn client(registry: &str, insecure: bool) -> Result<Client, OciError> {
    // HTTPS through rustls with ring; a provider installed before stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let protocol = if insecure || crate::reference::is_loopback(registry) {
        ClientProtocol::Http
    } else {
        ClientProtocol::Https
    };
    let config = ClientConfig {
        protocol,
        connect_timeout: Some(std::time::Duration::from_secs(10)),
        read_timeout: Some(std::time::Duration::from_secs(60)),
        ..ClientConfig::default()
    };
    Client::try_from(config).map_err(|e| OciError::registry(&registry, e))
}

pub(crate) fn auth(credentials: Option<&Credentials>) -> RegistryAuth {
    match credentials {
        Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
        None => RegistryAuth::Anonymous,
    }
}

/// A client error as a typed one: digest failures stay digest failures.
pub(crate) fn classify(
    what: &str,
    reference: &impl std::fmt::Display,
    e: oci_client::errors::OciDistributionError,
) -> OciError {
    use oci_client::errors::{DigestError, OciDistributionError};
    match e {
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            OciError::DigestMismatch {
                what: what.to_owned(),
                expected,
                actual,
            }
        }
        // The cause in words (`connection refused`), not the client's
        // "error sending request for url (…)".
        e => OciError::registry(reference, format!("{what}: {}", toolhost_text::cause(&e))),
    }
}

/// Pulls the raw OCI manifest of `reference`, bounded and digest-checked.
pub(crate) async fn pull_manifest(
    client: &Client,
    auth: &RegistryAuth,
    reference: &Reference,
) -> Result<(Vec<u8>, String), OciError> {
    let (raw, _) = client
        .pull_manifest_raw(
            reference,
            auth,
            &[
                OCI_MANIFEST_MEDIA_TYPE,
                oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
            ],
        )
        .await
        .map_err(|e| classify("the OCI manifest", &reference.whole(), e))?;
    if raw.len() > MAX_OCI_MANIFEST_BYTES {
        return Err(OciError::TooLarge {
            what: "the OCI manifest".into(),
            size: raw.len() as u64,
            limit: MAX_OCI_MANIFEST_BYTES as u64,
        });
    }
    let digest = crate::sha256_digest(&raw);
    if let Some(expected) = reference.digest()
        && expected != digest
    {
        return Err(OciError::DigestMismatch {
            what: "the OCI manifest".into(),
            expected: expected.to_owned(),
            actual: digest,
        });
    }
    Ok((raw.to_vec(), digest))
}

async fn fetch_registry(
    reference: &Reference,
    options: &FetchOptions,
    staging: &Path,
) -> Result<Fetched, OciError> {
    let whole = reference.whole();
    let not_a_plugin = |message: String| OciError::NotAPlugin {
        reference: whole.clone(),
        message,
    };
    let client = client(reference.registry(), options.insecure)?;
    let auth = auth(options.credentials.as_ref());
    let (raw, digest) = pull_manifest(&client, &auth, reference).await?;
    let manifest: OciImageManifest = serde_json::from_slice(&raw)
        .map_err(|e| not_a_plugin(format!("its manifest is not an OCI image manifest: {e}")))?;
    if manifest.schema_version != 2
        || manifest
            .media_type
            .as_deref()
            .is_some_and(|m| m != OCI_MANIFEST_MEDIA_TYPE)
    {
        return Err(not_a_plugin(
            "its manifest is not an OCI image manifest".into(),
        ));
    }
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(not_a_plugin(format!(
            "its config media type is `{}`, not `{WASM_CONFIG_MEDIA_TYPE}`",
            manifest.config.media_type
        )));
    }
    let name = manifest
        .annotations
        .as_ref()
        .and_then(|a| a.get(NAME_ANNOTATION))
        .ok_or_else(|| {
            not_a_plugin(format!(
                "its manifest has no `{NAME_ANNOTATION}` annotation"
            ))
        })?
        .clone();
    check_name(&name, options.expected_name.as_deref(), "the OCI manifest")?;

    // The signature first: nothing large is downloaded for an artifact that
    // will be refused.
    let signer = check_signature(&client, &auth, reference, &digest, options).await?;

    let mut wasm_layers = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER_MEDIA_TYPE);
    let (Some(wasm_layer), None) = (wasm_layers.next(), wasm_layers.next()) else {
        return Err(not_a_plugin(format!(
            "it must have exactly one `{WASM_LAYER_MEDIA_TYPE}` layer"
        )));
    };
    let mut manifest_layers = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == PLUGIN_MANIFEST_MEDIA_TYPE);
    let manifest_layer = manifest_layers.next();
    if manifest_layers.next().is_some() {
        return Err(not_a_plugin(format!(
            "it has more than one `{PLUGIN_MANIFEST_MEDIA_TYPE}` layer"
        )));
    }

    let plugin_manifest = match manifest_layer {
        Some(layer) => {
            let mut bytes = Vec::new();
            download(
                &client,
                reference,
                layer,
                "the plugin manifest layer",
                MAX_PLUGIN_MANIFEST_BYTES,
                |chunk| {
                    bytes.extend_from_slice(chunk);
                    Ok(())
                },
            )
            .await?;
            let text = String::from_utf8(bytes)
                .map_err(|_| OciError::Manifest("it is not UTF-8".into()))?;
            Some(text)
        }
        None => None,
    };
    let version = check_plugin_manifest(plugin_manifest.as_deref(), &name)?;

    let mut skills_layers = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == SKILLS_LAYER_MEDIA_TYPE);
    let skills_layer = skills_layers.next();
    if skills_layers.next().is_some() {
        return Err(not_a_plugin(format!(
            "it has more than one `{SKILLS_LAYER_MEDIA_TYPE}` layer"
        )));
    }
    let skills = match skills_layer {
        Some(layer) => {
            let mut tar = NamedTempFile::with_prefix_in(".toolhost-install-", staging)
                .map_err(|e| OciError::io(staging, e))?;
            let path = tar.path().to_owned();
            let file = tar.as_file_mut();
            download(
                &client,
                reference,
                layer,
                "the skills layer",
                MAX_SKILLS_LAYER_BYTES,
                |chunk| file.write_all(chunk).map_err(|e| OciError::io(&path, e)),
            )
            .await?;
            file.flush().map_err(|e| OciError::io(&path, e))?;
            crate::skills::check(&path, &reference.whole())?;
            Some(tar)
        }
        None => None,
    };

    let mut wasm = NamedTempFile::with_prefix_in(".toolhost-install-", staging)
        .map_err(|e| OciError::io(staging, e))?;
    let path = wasm.path().to_owned();
    let mut head: Vec<u8> = Vec::with_capacity(4);
    {
        let file = wasm.as_file_mut();
        download(
            &client,
            reference,
            wasm_layer,
            "the component layer",
            options.max_component_bytes,
            |chunk| {
                if head.len() < 4 {
                    head.extend(chunk.iter().take(4 - head.len()));
                }
                file.write_all(chunk).map_err(|e| OciError::io(&path, e))
            },
        )
        .await?;
        file.flush().map_err(|e| OciError::io(&path, e))?;
    }
    if head.as_slice() != b"\0asm" {
        return Err(not_a_plugin(
            "its component layer is not WebAssembly".into(),
        ));
    }
    Ok(Fetched {
        name,
        version,
        digest: wasm_layer.digest.clone(),
        source: format!(
            "oci://{}/{}@{digest}",
            reference.registry(),
            reference.repository()
        ),
        manifest_digest: Some(digest),
        signer,
        wasm,
        manifest: plugin_manifest,
        skills,
    })
}

/// The plugin's name must be valid (it becomes a file name) and what was
/// expected.
fn check_name(name: &str, expected: Option<&str>, place: &str) -> Result<(), OciError> {
    if !toolhost_runtime::contract::is_valid_tool_name(name) {
        return Err(OciError::InvalidName(name.to_owned()));
    }
    match expected {
        Some(expected) if expected != name => Err(OciError::NameMismatch {
            expected: expected.to_owned(),
            found: name.to_owned(),
            place: place.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Parses the plugin manifest with the runtime's parser; the name it
/// declares (if any) must be `name`. Returns its version.
fn check_plugin_manifest(
    text: Option<&str>,
    name: &str,
) -> Result<Option<semver::Version>, OciError> {
    let Some(text) = text else {
        return Ok(None);
    };
    let manifest = Manifest::parse(text, Path::new(&format!("{name}.toml")))
        .map_err(|e| OciError::Manifest(e.to_string()))?;
    if let Some(declared) = &manifest.name
        && declared != name
    {
        return Err(OciError::NameMismatch {
            expected: name.to_owned(),
            found: declared.clone(),
            place: "its manifest (NAME.toml)".into(),
        });
    }
    Ok(manifest.version)
}

/// Streams the blob `layer` of `reference` into `sink`, refusing it as soon
/// as it passes `limit` or its declared size, and unless its bytes hash to
/// its digest.
pub(crate) async fn download(
    client: &Client,
    reference: &Reference,
    layer: &OciDescriptor,
    what: &str,
    limit: u64,
    mut sink: impl FnMut(&[u8]) -> Result<(), OciError>,
) -> Result<(), OciError> {
    if !crate::is_sha256_digest(&layer.digest) {
        return Err(OciError::NotAPlugin {
            reference: reference.whole(),
            message: format!("{what} has digest `{}`, not a sha256 digest", layer.digest),
        });
    }
    let declared = u64::try_from(layer.size).map_err(|_| OciError::NotAPlugin {
        reference: reference.whole(),
        message: format!("{what} declares a negative size"),
    })?;
    if declared > limit {
        return Err(OciError::TooLarge {
            what: what.to_owned(),
            size: declared,
            limit,
        });
    }
    let mut stream = client
        .pull_blob_stream(reference, layer)
        .await
        .map_err(|e| classify(what, &reference.whole(), e))?;
    let mut hasher = sha2::Sha256::new();
    let mut received: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                let digest_error = e
                    .get_ref()
                    .and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>());
                if let Some(oci_client::errors::DigestError::VerificationError {
                    expected,
                    actual,
                }) = digest_error
                {
                    return Err(OciError::DigestMismatch {
                        what: what.to_owned(),
                        expected: expected.clone(),
                        actual: actual.clone(),
                    });
                }
                return Err(OciError::registry(
                    &reference.whole(),
                    format!("{what}: {e}"),
                ));
            }
        };
        received = received.saturating_add(chunk.len() as u64);
        if received > declared {
            return Err(OciError::SizeMismatch {
                what: what.to_owned(),
                declared,
                received,
            });
        }
        hasher.update(&chunk);
        sink(&chunk)?;
    }
    if received != declared {
        return Err(OciError::SizeMismatch {
            what: what.to_owned(),
            declared,
            received,
        });
    }
    let actual = format!("sha256:{}", hex::encode(hasher.finalize()));
    if actual != layer.digest {
        return Err(OciError::DigestMismatch {
            what: what.to_owned(),
            expected: layer.digest.clone(),
            actual,
        });
    }
    Ok(())
}

/// Looks for a cosign signature of the manifest `digest` that a trusted key
/// verifies. `Ok(None)`: not signed (or not checked) and not required.
async fn check_signature(
    client: &Client,
    auth: &RegistryAuth,
    reference: &Reference,
    digest: &str,
    options: &FetchOptions,
) -> Result<Option<String>, OciError> {
    if options.trusted_keys.is_empty() {
        return if options.require_signature {
            Err(OciError::NoTrustedKeys)
        } else {
            Ok(None)
        };
    }
    let unsigned = |reason: String| {
        if options.require_signature {
            Err(OciError::Unsigned {
                reference: reference.whole(),
                reason,
            })
        } else {
            tracing::warn!(reference = %reference.whole(), %reason, "installing a plugin no trusted key signed");
            Ok(None)
        }
    };
    let Some(tag) = signature::signature_tag(digest) else {
        return unsigned(format!("`{digest}` is not a sha256 digest"));
    };
    let sig_ref = Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        tag.clone(),
    );
    let raw = match pull_manifest(client, auth, &sig_ref).await {
        Ok((raw, _)) => raw,
        Err(e) => return unsigned(format!("no signature found at tag {tag} ({e})")),
    };
    let sig_manifest: OciImageManifest = match serde_json::from_slice(&raw) {
        Ok(m) => m,
        Err(e) => return unsigned(format!("the signature artifact is malformed: {e}")),
    };
    let mut reasons = Vec::new();
    for layer in sig_manifest
        .layers
        .iter()
        .filter(|l| l.media_type == SIMPLE_SIGNING_MEDIA_TYPE)
        .take(signature::MAX_SIGNATURES)
    {
        let Some(annotation) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            reasons.push("a payload without a signature annotation".to_owned());
            continue;
        };
        let mut payload = Vec::new();
        let got = download(
            client,
            &sig_ref,
            layer,
            "a signature payload",
            signature::MAX_PAYLOAD_BYTES,
            |chunk| {
                payload.extend_from_slice(chunk);
                Ok(())
            },
        )
        .await;
        if let Err(e) = got {
            reasons.push(e.to_string());
            continue;
        }
        match signature::verify(&payload, annotation, digest, &options.trusted_keys) {
            Ok(fingerprint) => return Ok(Some(fingerprint)),
            Err(reason) => reasons.push(reason),
        }
    }
    if reasons.is_empty() {
        reasons.push("the signature artifact has no signatures".into());
    }
    reasons.dedup();
    unsigned(reasons.join("; "))
}

/// A plugin from a local file (`NAME.toml` beside it). A file carries no
/// signature: with `require_signature` it is refused.
fn fetch_file(path: &Path, options: &FetchOptions, staging: &Path) -> Result<Fetched, OciError> {
    use std::io::Read;
    if options.require_signature {
        return Err(OciError::Unsigned {
            reference: path.display().to_string(),
            reason: "a local file carries no signature; install it from a registry".into(),
        });
    }
    let plugin_manifest = match std::fs::File::open(Manifest::path_for(path)) {
        Ok(f) => {
            let mut text = String::new();
            f.take(MAX_PLUGIN_MANIFEST_BYTES.saturating_add(1))
                .read_to_string(&mut text)
                .map_err(|e| OciError::io(&Manifest::path_for(path), e))?;
            if text.len() as u64 > MAX_PLUGIN_MANIFEST_BYTES {
                return Err(OciError::TooLarge {
                    what: Manifest::path_for(path).display().to_string(),
                    size: text.len() as u64,
                    limit: MAX_PLUGIN_MANIFEST_BYTES,
                });
            }
            Some(text)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(OciError::io(&Manifest::path_for(path), e)),
    };
    let declared_name = match &plugin_manifest {
        Some(text) => {
            Manifest::parse(text, &Manifest::path_for(path))
                .map_err(|e| OciError::Manifest(e.to_string()))?
                .name
        }
        None => None,
    };
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default()
        .to_owned();
    let name = declared_name.unwrap_or(stem);
    check_name(&name, options.expected_name.as_deref(), "its manifest")?;
    let version = check_plugin_manifest(plugin_manifest.as_deref(), &name)?;

    let file = std::fs::File::open(path).map_err(|e| OciError::io(path, e))?;
    let mut wasm = NamedTempFile::with_prefix_in(".toolhost-install-", staging)
        .map_err(|e| OciError::io(staging, e))?;
    let copied = std::io::copy(
        &mut file.take(options.max_component_bytes.saturating_add(1)),
        wasm.as_file_mut(),
    )
    .map_err(|e| OciError::io(path, e))?;
    if copied > options.max_component_bytes {
        return Err(OciError::TooLarge {
            what: path.display().to_string(),
            size: copied,
            limit: options.max_component_bytes,
        });
    }
    let digest = digest_file(wasm.path())?;
    let mut head = [0u8; 4];
    let is_wasm = std::fs::File::open(wasm.path())
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"\0asm";
    if !is_wasm {
        return Err(OciError::NotAPlugin {
            reference: path.display().to_string(),
            message: "it is not WebAssembly".into(),
        });
    }
    // Its skills folder beside it, packed as a registry would carry it
    // (the same checks at install).
    let folder = crate::skills::dir_beside(path);
    let skills = if folder.is_dir() {
        let mut tar = NamedTempFile::with_prefix_in(".toolhost-install-", staging)
            .map_err(|e| OciError::io(staging, e))?;
        tar.write_all(&crate::skills::pack(&folder)?)
            .map_err(|e| OciError::io(tar.path(), e))?;
        Some(tar)
    } else {
        None
    };
    let absolute = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
    Ok(Fetched {
        name,
        version,
        digest,
        manifest_digest: None,
        source: format!("file://{}", absolute.display()),
        signer: None,
        wasm,
        manifest: plugin_manifest,
        skills,
    })
}

fn digest_file(path: &Path) -> Result<String, OciError> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|e| OciError::io(path, e))?;
    let mut hasher = sha2::Sha256::new();
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buffer).map_err(|e| OciError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_are_not_file_names_are_refused() {
        assert!(matches!(
            check_name("../evil", None, "x"),
            Err(OciError::InvalidName(_))
        ));
        assert!(matches!(
            check_name("calc", Some("fs"), "x"),
            Err(OciError::NameMismatch { .. })
        ));
        assert!(check_name("calc", Some("calc"), "x").is_ok());
    }

    #[test]
    fn a_manifest_that_names_another_plugin_is_refused() {
        assert!(matches!(
            check_plugin_manifest(Some("name = \"fs\"\n"), "calc"),
            Err(OciError::NameMismatch { .. })
        ));
        assert!(matches!(
            check_plugin_manifest(Some("name = 3\n"), "calc"),
            Err(OciError::Manifest(_))
        ));
        assert_eq!(
            check_plugin_manifest(Some("name = \"calc\"\nversion = \"1.2.3\"\n"), "calc").unwrap(),
            Some(semver::Version::new(1, 2, 3))
        );
    }

    #[test]
    fn a_local_file_is_refused_when_a_signature_is_required() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("calc.wasm");
        std::fs::write(&wasm, b"\0asm\x0d\0\x01\0").unwrap();
        let options = FetchOptions {
            require_signature: true,
            ..FetchOptions::default()
        };
        assert!(matches!(
            fetch_file(&wasm, &options, dir.path()),
            Err(OciError::Unsigned { .. })
        ));
        let fetched = fetch_file(&wasm, &FetchOptions::default(), dir.path()).unwrap();
        assert_eq!(fetched.name, "calc");
        assert_eq!(fetched.digest, crate::sha256_digest(b"\0asm\x0d\0\x01\0"));
    }

    #[test]
    fn a_local_file_over_the_size_limit_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let wasm = dir.path().join("big.wasm");
        std::fs::write(&wasm, vec![0u8; 100]).unwrap();
        let options = FetchOptions {
            max_component_bytes: 99,
            ..FetchOptions::default()
        };
        assert!(matches!(
            fetch_file(&wasm, &options, dir.path()),
            Err(OciError::TooLarge { size: 100, .. })
        ));
    }
}
