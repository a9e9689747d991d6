//! # toolhost-oci
//!
//! One job: put toolhost plugins into OCI registries and get them out
//! again, verified. A plugin is stored the way wasm-pkg-tools (`wkg`) and
//! Wassette store a WebAssembly component (the CNCF TAG Runtime "Wasm OCI
//! artifact" layout), with the plugin's manifest beside it:
//!
//! | part | media type |
//! |------|------------|
//! | manifest | `application/vnd.oci.image.manifest.v1+json` |
//! | config | [`WASM_CONFIG_MEDIA_TYPE`] (`application/vnd.wasm.config.v0+json`) |
//! | layer 1: the component | [`WASM_LAYER_MEDIA_TYPE`] (`application/wasm`) |
//! | layer 2 (optional): `NAME.toml` | [`PLUGIN_MANIFEST_MEDIA_TYPE`] |
//! | layer 3 (optional): `NAME.skills/`, a tar | [`SKILLS_LAYER_MEDIA_TYPE`] |
//!
//! and the annotations [`NAME_ANNOTATION`] (the plugin's name, required),
//! `org.opencontainers.image.title`, `org.opencontainers.image.version` and
//! `org.opencontainers.image.created`. Tools that know only the Wasm layout
//! (`wkg oci pull`) take the `application/wasm` layer and ignore the rest.
//! The manifest TOML is a layer, not an annotation: it can be long, and as a
//! layer its digest is in the OCI manifest, so a signature covers it.
//!
//! Signatures are cosign's key-based ones ([`signature`]): a signature
//! artifact at the tag `sha256-<manifest hex>.sig`, whose layers are
//! "simple signing" payloads naming the manifest digest, each signed (ECDSA
//! P-256, SHA-256) in the `dev.cosignproject.cosign/signature` annotation.
//! `cosign verify --key KEY.pub` accepts what [`publish`] signs, and
//! [`fetch`] accepts what `cosign sign --key` signs.
//!
//! What [`fetch`] verifies, before anything is written where the runtime
//! loads plugins: the manifest's digest (against the reference's digest,
//! when it has one), the signature when asked, the media types, each
//! layer's declared size against the limits, each layer's bytes against its
//! digest and size while it streams into a temporary file, the manifest TOML
//! with the runtime's parser, and the plugin's name.
//!
//! ```no_run
//! # async fn run() -> Result<(), toolhost_oci::OciError> {
//! use toolhost_oci::{FetchOptions, Source, fetch};
//!
//! let source = Source::parse("oci://127.0.0.1:5000/calc:1.0.0")?;
//! let options = FetchOptions::default();
//! let fetched = fetch(&source, &options, "plugins".as_ref()).await?;
//! let files = fetched.install("plugins".as_ref())?;
//! println!("installed {}", files.wasm.display());
//! # Ok(()) }
//! ```

mod error;
mod fetch;
mod install;
mod keys;
mod publish;
mod reference;
pub mod signature;
mod skills;

pub use error::OciError;
pub use fetch::{Credentials, FetchOptions, Fetched, fetch};
pub use install::InstalledFiles;
pub use keys::{PublicKey, SigningKey};
pub use publish::{PublishOptions, Published, publish};
pub use reference::Source;

/// The media type of the layer of a plugin's skills (SEP-2640): its
/// `NAME.skills/` folder as a tar of files and folders (`skills.rs`).
pub const SKILLS_LAYER_MEDIA_TYPE: &str = "application/vnd.toolhost.plugin.skills.v1.tar";
/// The most bytes of skills' files one artifact carries (as a plugin's
/// skills folder may hold: the MCP server's own bound).
pub const MAX_SKILLS_BYTES: u64 = 64 << 20;
/// The most files and folders in one artifact's skills.
pub const MAX_SKILLS_ENTRIES: usize = 64 * 512;
/// The largest skills layer taken (its files and a tar's headers).
pub const MAX_SKILLS_LAYER_BYTES: u64 = MAX_SKILLS_BYTES + (MAX_SKILLS_ENTRIES as u64) * 1024;

/// The config media type of a WebAssembly component artifact (CNCF Wasm OCI
/// artifact layout, as `wkg` and Wassette write it).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of the layer that holds the component.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The media type of the layer that holds the plugin's `NAME.toml`.
pub const PLUGIN_MANIFEST_MEDIA_TYPE: &str = "application/vnd.toolhost.plugin.manifest.v1+toml";
/// The OCI manifest annotation that names the plugin (its files are
/// installed as `NAME.wasm` and `NAME.toml`).
pub const NAME_ANNOTATION: &str = "dev.toolhost.plugin.name";
/// The media type of an OCI image manifest.
pub const OCI_MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// The largest component [`fetch`] accepts by default (64 MiB; a Python
/// component built with componentize-py is about 18 MB). The runtime itself
/// reads a component whole into memory to compile it.
pub const MAX_COMPONENT_BYTES: u64 = 64 * 1024 * 1024;
/// The largest plugin manifest (`NAME.toml`) accepted.
pub const MAX_PLUGIN_MANIFEST_BYTES: u64 = 1024 * 1024;
/// The largest OCI manifest accepted (the limit the OCI distribution
/// specification lets registries enforce).
pub const MAX_OCI_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// `sha256:` and the hex of `bytes`: the digest OCI and the runtime's lock
/// file use.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Whether `digest` is `sha256:` and 64 lowercase hex digits (the only
/// algorithm accepted).
pub(crate) fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_sha256_digests_are_accepted() {
        assert!(is_sha256_digest(&sha256_digest(b"x")));
        assert!(!is_sha256_digest("sha512:00"));
        assert!(!is_sha256_digest(&format!("sha256:{}", "A".repeat(64))));
        assert!(!is_sha256_digest(&format!("sha256:{}/..", "a".repeat(61))));
    }
}
