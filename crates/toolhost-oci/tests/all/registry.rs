//! Publishing to and installing from a real registry (Debian's
//! `docker-registry`, started on loopback by each test), with every check
//! that refuses a plugin exercised by an artifact crafted to fail it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_client::Reference;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use toolhost_oci::{
    FetchOptions, NAME_ANNOTATION, OciError, PLUGIN_MANIFEST_MEDIA_TYPE, PublishOptions, Published,
    SigningKey, Source, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE, fetch, publish,
};
use toolhost_test_support::{Registry, copy_plugin, plugins_dir};

/// `calc` (its .wasm, .toml and skills) in a fresh directory.
fn calc() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let wasm = dir.path().join("calc.wasm");
    (dir, wasm)
}

fn reference(registry: &Registry, repo_tag: &str) -> Reference {
    format!("{}/{repo_tag}", registry.address).parse().unwrap()
}

/// Publishes `wasm` unsigned as `repo_tag` on `registry`.
async fn publish_unsigned(registry: &Registry, wasm: &Path, repo_tag: &str) -> Published {
    publish(
        wasm,
        &reference(registry, repo_tag),
        &PublishOptions::default(),
    )
    .await
    .unwrap()
}

fn source(published: &str) -> Source {
    Source::parse(published).unwrap()
}

fn trusting(keys: &[&SigningKey], require: bool) -> FetchOptions {
    FetchOptions {
        trusted_keys: keys.iter().map(|k| k.public_key()).collect(),
        require_signature: require,
        ..FetchOptions::default()
    }
}

async fn fetch_err(source: &Source, options: &FetchOptions) -> OciError {
    let staging = tempfile::tempdir().unwrap();
    let err = fetch(source, options, staging.path()).await.unwrap_err();
    let left: Vec<_> = std::fs::read_dir(staging.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "a refused plugin left files behind: {left:?}"
    );
    err
}

/// Pushes a hand-made artifact: `layers` as given, annotations as given.
async fn push_crafted(
    registry: &Registry,
    repo_tag: &str,
    config_media_type: &str,
    layers: Vec<ImageLayer>,
    annotations: BTreeMap<String, String>,
    edit: impl FnOnce(&mut OciImageManifest),
) -> String {
    let client = http_client();
    let reference = reference(registry, repo_tag);
    let config = Config::new(b"{}".to_vec(), config_media_type.to_owned(), None);
    let mut manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    edit(&mut manifest);
    for layer in &layers {
        client
            .push_blob(&reference, layer.data.clone(), &layer.sha256_digest())
            .await
            .unwrap();
    }
    client
        .push_blob(&reference, config.data.clone(), &config.sha256_digest())
        .await
        .unwrap();
    let body = serde_json::to_vec(&manifest).unwrap();
    let digest = toolhost_oci::sha256_digest(&body);
    client
        .push_manifest_raw(
            &reference,
            body,
            http::HeaderValue::from_static(toolhost_oci::OCI_MANIFEST_MEDIA_TYPE),
        )
        .await
        .unwrap();
    format!(
        "oci://{}/{}@{digest}",
        registry.address,
        reference.repository()
    )
}

/// An OCI client of the test's own, over plain HTTP (rustls needs a
/// process-wide provider even then).
fn http_client() -> oci_client::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    oci_client::Client::new(ClientConfig {
        protocol: ClientProtocol::Http,
        ..ClientConfig::default()
    })
}

fn wasm_layer(bytes: &[u8]) -> ImageLayer {
    ImageLayer::new(bytes.to_vec(), WASM_LAYER_MEDIA_TYPE.to_owned(), None)
}

fn toml_layer(text: &str) -> ImageLayer {
    ImageLayer::new(
        text.as_bytes().to_vec(),
        PLUGIN_MANIFEST_MEDIA_TYPE.to_owned(),
        None,
    )
}

fn named(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_ANNOTATION.to_owned(), name.to_owned())])
}

#[tokio::test]
async fn a_published_plugin_installs_byte_for_byte_with_its_manifest() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let published = publish_unsigned(&registry, &wasm, "tools/calc:0.1.0").await;
    assert_eq!(published.name, "calc");
    assert_eq!(published.signer, None);

    // By tag and by the pinned digest.
    for r in [
        format!("oci://{}/tools/calc:0.1.0", registry.address),
        published.reference.clone(),
    ] {
        let plugins = tempfile::tempdir().unwrap();
        let fetched = fetch(&source(&r), &FetchOptions::default(), plugins.path())
            .await
            .unwrap();
        assert_eq!(fetched.digest, published.digest);
        assert_eq!(fetched.source, published.reference);
        assert_eq!(fetched.version, Some(semver::Version::new(0, 1, 0)));
        let files = fetched.install(plugins.path()).unwrap();
        assert_eq!(
            std::fs::read(&files.wasm).unwrap(),
            std::fs::read(&wasm).unwrap()
        );
        assert_eq!(
            std::fs::read_to_string(files.manifest.unwrap()).unwrap(),
            std::fs::read_to_string(wasm.with_extension("toml")).unwrap()
        );
        let mut names: Vec<_> = std::fs::read_dir(plugins.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["calc.skills", "calc.toml", "calc.wasm"]);
        // Its skills, file for file.
        let shipped = wasm.with_extension("skills");
        let installed = files.skills.expect("its skills");
        let skill = "arithmetic/SKILL.md";
        assert_eq!(
            std::fs::read(installed.join(skill)).unwrap(),
            std::fs::read(shipped.join(skill)).unwrap()
        );
        assert_eq!(files_under(&installed), files_under(&shipped));
    }
}

/// The media types and digests of the layers of manifest `digest` of
/// `calc` on `registry`.
async fn layers_of(registry: &Registry, digest: &str) -> Vec<(String, String)> {
    let reference: Reference = format!("{}/calc@{digest}", registry.address)
        .parse()
        .unwrap();
    let (raw, _) = http_client()
        .pull_manifest_raw(
            &reference,
            &oci_client::secrets::RegistryAuth::Anonymous,
            &[toolhost_oci::OCI_MANIFEST_MEDIA_TYPE],
        )
        .await
        .unwrap();
    let manifest: OciImageManifest = serde_json::from_slice(&raw).unwrap();
    manifest
        .layers
        .into_iter()
        .map(|l| (l.media_type, l.digest))
        .collect()
}

/// Every file under `dir`, relative, with its bytes.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(dir).unwrap().to_owned();
                found.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

#[tokio::test]
async fn a_plugin_published_again_without_skills_takes_its_old_skills_away_and_the_same_folder_gives_the_same_digest()
 {
    let registry = Registry::start();
    let (dir, wasm) = calc();
    let first = publish_unsigned(&registry, &wasm, "calc:1").await;
    let again = publish_unsigned(&registry, &wasm, "calc:1b").await;
    assert_eq!(first.manifest_digest.len(), again.manifest_digest.len());
    let one = layers_of(&registry, &first.manifest_digest).await;
    let two = layers_of(&registry, &again.manifest_digest).await;
    assert_eq!(one, two, "the same files, the same layers");
    assert!(
        one.iter()
            .any(|(m, _)| m == toolhost_oci::SKILLS_LAYER_MEDIA_TYPE),
        "{one:?}"
    );

    let plugins = tempfile::tempdir().unwrap();
    let fetched = fetch(
        &source(&first.reference),
        &FetchOptions::default(),
        plugins.path(),
    )
    .await
    .unwrap();
    assert!(fetched.install(plugins.path()).unwrap().skills.is_some());
    std::fs::remove_dir_all(wasm.with_extension("skills")).unwrap();
    let bare = publish_unsigned(&registry, &wasm, "calc:2").await;
    let fetched = fetch(
        &source(&bare.reference),
        &FetchOptions::default(),
        plugins.path(),
    )
    .await
    .unwrap();
    assert_eq!(fetched.install(plugins.path()).unwrap().skills, None);
    assert!(!plugins.path().join("calc.skills").exists());
    let left: Vec<_> = std::fs::read_dir(plugins.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        left.iter().all(|n| !n.starts_with(".toolhost")),
        "nothing left over: {left:?}"
    );
    drop(dir);
}

#[tokio::test]
async fn a_skills_layer_with_an_entry_outside_its_folder_is_refused_and_nothing_is_written() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let component = std::fs::read(&wasm).unwrap();
    // A tar whose one file climbs out of the skills folder.
    let mut header = tar::Header::new_old();
    let path = b"../../escaped.md";
    header.as_old_mut().name[..path.len()].copy_from_slice(path);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(0o644);
    header.set_size(2);
    header.set_cksum();
    let mut archive = header.as_bytes().to_vec();
    let mut block = [0u8; 512];
    block[..2].copy_from_slice(b"hi");
    archive.extend_from_slice(&block);
    archive.extend_from_slice(&[0u8; 1024]);
    let skills = ImageLayer::new(
        archive,
        toolhost_oci::SKILLS_LAYER_MEDIA_TYPE.to_owned(),
        None,
    );
    let crafted = push_crafted(
        &registry,
        "calc:evil",
        WASM_CONFIG_MEDIA_TYPE,
        vec![wasm_layer(&component), skills],
        named("calc"),
        |_| {},
    )
    .await;
    let plugins = tempfile::tempdir().unwrap();
    let staging = plugins.path().join("a/b");
    let refused = fetch(&source(&crafted), &FetchOptions::default(), &staging)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, OciError::NotAPlugin { message, .. } if message.contains("outside")),
        "{refused:?}"
    );
    assert!(!plugins.path().join("escaped.md").exists());
    assert!(!plugins.path().join("a/escaped.md").exists());
    let left: Vec<_> = std::fs::read_dir(&staging)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "nothing written: {left:?}");
}

#[tokio::test]
async fn the_artifact_uses_the_wasm_oci_layout_that_wkg_reads() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let published = publish_unsigned(&registry, &wasm, "calc:1").await;
    let response = registry
        .get(&format!("/v2/calc/manifests/{}", published.manifest_digest))
        .unwrap();
    let body = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let manifest: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");
    assert_eq!(manifest["layers"][0]["digest"], published.digest.as_str());
    assert_eq!(
        manifest["layers"][1]["mediaType"],
        PLUGIN_MANIFEST_MEDIA_TYPE
    );
    assert_eq!(manifest["annotations"][NAME_ANNOTATION], "calc");
}

#[tokio::test]
async fn a_tampered_component_blob_in_the_registry_is_refused() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let published = publish_unsigned(&registry, &wasm, "calc:1").await;
    let blob = registry.blob_path(&published.digest);
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let err = fetch_err(&source(&published.reference), &FetchOptions::default()).await;
    assert!(
        matches!(&err, OciError::DigestMismatch { what, .. } if what.contains("component")),
        "{err}"
    );
}

#[tokio::test]
async fn a_manifest_whose_bytes_do_not_match_its_digest_is_refused() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let published = publish_unsigned(&registry, &wasm, "calc:1").await;
    // The registry now serves other manifest bytes under the same digest
    // (a compromised registry or a man in the middle).
    let blob = registry.blob_path(&published.manifest_digest);
    let text = std::fs::read_to_string(&blob).unwrap();
    std::fs::write(&blob, text.replace("\"calc\"", "\"calx\"")).unwrap();
    for r in [
        published.reference.clone(),
        format!("oci://{}/calc:1", registry.address),
    ] {
        let err = fetch_err(&source(&r), &FetchOptions::default()).await;
        assert!(matches!(err, OciError::DigestMismatch { .. }), "{r}: {err}");
    }
}

#[tokio::test]
async fn signatures_missing_valid_and_by_another_key_are_told_apart() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let ours = SigningKey::generate().unwrap();
    let theirs = SigningKey::generate().unwrap();
    let unsigned = publish_unsigned(&registry, &wasm, "calc:unsigned").await;
    // Another build (the manifest differs by its creation time at least):
    // change a byte of the manifest TOML so the digest surely differs.
    std::fs::write(
        wasm.with_extension("toml"),
        std::fs::read_to_string(wasm.with_extension("toml")).unwrap() + "\n# signed\n",
    )
    .unwrap();
    let signed = publish(
        &wasm,
        &reference(&registry, "calc:signed"),
        &PublishOptions {
            key: Some(ours.clone()),
            ..PublishOptions::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(signed.signer, Some(ours.public_key().fingerprint()));

    // Missing: refused when required, installed unverified otherwise.
    let err = fetch_err(&source(&unsigned.reference), &trusting(&[&ours], true)).await;
    assert!(matches!(err, OciError::Unsigned { .. }), "{err}");
    let staging = tempfile::tempdir().unwrap();
    let fetched = fetch(
        &source(&unsigned.reference),
        &trusting(&[&ours], false),
        staging.path(),
    )
    .await
    .unwrap();
    assert_eq!(fetched.signer, None);

    // Valid.
    let fetched = fetch(
        &source(&signed.reference),
        &trusting(&[&ours], true),
        staging.path(),
    )
    .await
    .unwrap();
    assert_eq!(fetched.signer, Some(ours.public_key().fingerprint()));
    let by_tag = source(&format!("oci://{}/calc:signed", registry.address));
    let fetched = fetch(&by_tag, &trusting(&[&theirs, &ours], true), staging.path())
        .await
        .unwrap();
    assert_eq!(fetched.signer, Some(ours.public_key().fingerprint()));

    // Signed, but by a key that is not trusted.
    let err = fetch_err(&source(&signed.reference), &trusting(&[&theirs], true)).await;
    assert!(
        matches!(&err, OciError::Unsigned { reason, .. } if reason.contains("no trusted key")),
        "{err}"
    );
    // Required without any trusted key.
    let err = fetch_err(&source(&signed.reference), &trusting(&[], true)).await;
    assert!(matches!(err, OciError::NoTrustedKeys), "{err}");
}

#[tokio::test]
async fn a_signature_moved_onto_another_manifest_is_refused() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let key = SigningKey::generate().unwrap();
    let signed = publish(
        &wasm,
        &reference(&registry, "calc:good"),
        &PublishOptions {
            key: Some(key.clone()),
            ..PublishOptions::default()
        },
    )
    .await
    .unwrap();
    std::fs::write(wasm.with_extension("toml"), "name = \"calc\"\n# evil\n").unwrap();
    let evil = publish_unsigned(&registry, &wasm, "calc:evil").await;
    // Copy the good signature artifact to the evil manifest's signature tag.
    let sig_tag = |d: &str| toolhost_oci::signature::signature_tag(d).unwrap();
    let response = registry
        .get(&format!(
            "/v2/calc/manifests/{}",
            sig_tag(&signed.manifest_digest)
        ))
        .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let body = response[response.find("\r\n\r\n").unwrap() + 4..].to_owned();
    let client = http_client();
    client
        .push_manifest_raw(
            &reference(
                &registry,
                &format!("calc:{}", sig_tag(&evil.manifest_digest)),
            ),
            body.into_bytes(),
            http::HeaderValue::from_static(toolhost_oci::OCI_MANIFEST_MEDIA_TYPE),
        )
        .await
        .unwrap();
    let err = fetch_err(&source(&evil.reference), &trusting(&[&key], true)).await;
    assert!(
        matches!(&err, OciError::Unsigned { reason, .. } if reason.contains("is for manifest")),
        "{err}"
    );
}

#[tokio::test]
async fn a_component_over_the_size_limit_is_refused_before_download() {
    let registry = Registry::start();
    let (_dir, wasm) = calc();
    let published = publish_unsigned(&registry, &wasm, "calc:1").await;
    let size = std::fs::metadata(&wasm).unwrap().len();
    let options = FetchOptions {
        max_component_bytes: size - 1,
        ..FetchOptions::default()
    };
    let err = fetch_err(&source(&published.reference), &options).await;
    assert!(
        matches!(err, OciError::TooLarge { size: s, .. } if s == size),
        "{err}"
    );
}

#[tokio::test]
async fn a_layer_larger_than_its_descriptor_says_is_cut_off() {
    let registry = Registry::start();
    let component = b"\0asm\x0d\0\x01\0 and much more than declared".to_vec();
    let r = push_crafted(
        &registry,
        "liar:1",
        WASM_CONFIG_MEDIA_TYPE,
        vec![wasm_layer(&component)],
        named("liar"),
        |m| m.layers[0].size = 8,
    )
    .await;
    let err = fetch_err(&source(&r), &FetchOptions::default()).await;
    assert!(
        matches!(err, OciError::SizeMismatch { declared: 8, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn a_manifest_toml_that_names_another_plugin_is_refused() {
    let registry = Registry::start();
    let component = std::fs::read(plugins_dir().join("calc.wasm")).unwrap();
    let r = push_crafted(
        &registry,
        "calc:lying",
        WASM_CONFIG_MEDIA_TYPE,
        vec![wasm_layer(&component), toml_layer("name = \"fs\"\n")],
        named("calc"),
        |_| {},
    )
    .await;
    let err = fetch_err(&source(&r), &FetchOptions::default()).await;
    assert!(
        matches!(&err, OciError::NameMismatch { expected, found, .. } if expected == "calc" && found == "fs"),
        "{err}"
    );
    // The name the user asked for is checked too.
    let r = push_crafted(
        &registry,
        "calc:honest",
        WASM_CONFIG_MEDIA_TYPE,
        vec![wasm_layer(&component)],
        named("calc"),
        |_| {},
    )
    .await;
    let options = FetchOptions {
        expected_name: Some("fs".into()),
        ..FetchOptions::default()
    };
    let err = fetch_err(&source(&r), &options).await;
    assert!(matches!(err, OciError::NameMismatch { .. }), "{err}");
}

#[tokio::test]
async fn a_name_that_is_a_path_and_foreign_artifacts_are_refused() {
    let registry = Registry::start();
    let component = std::fs::read(plugins_dir().join("calc.wasm")).unwrap();
    let r = push_crafted(
        &registry,
        "evil:1",
        WASM_CONFIG_MEDIA_TYPE,
        vec![wasm_layer(&component)],
        named("../../.bashrc"),
        |_| {},
    )
    .await;
    let err = fetch_err(&source(&r), &FetchOptions::default()).await;
    assert!(matches!(err, OciError::InvalidName(_)), "{err}");

    let r = push_crafted(
        &registry,
        "image:1",
        "application/vnd.oci.image.config.v1+json",
        vec![wasm_layer(&component)],
        named("image"),
        |_| {},
    )
    .await;
    let err = fetch_err(&source(&r), &FetchOptions::default()).await;
    assert!(matches!(err, OciError::NotAPlugin { .. }), "{err}");

    let r = push_crafted(
        &registry,
        "nolayer:1",
        WASM_CONFIG_MEDIA_TYPE,
        vec![toml_layer("name = \"nolayer\"\n")],
        named("nolayer"),
        |_| {},
    )
    .await;
    let err = fetch_err(&source(&r), &FetchOptions::default()).await;
    assert!(matches!(err, OciError::NotAPlugin { .. }), "{err}");
}

#[tokio::test]
async fn an_unreachable_registry_is_a_registry_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = fetch_err(
        &source(&format!("oci://127.0.0.1:{port}/calc:1")),
        &FetchOptions::default(),
    )
    .await;
    assert!(matches!(err, OciError::Registry { .. }), "{err}");
}
