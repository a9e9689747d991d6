//! Why publishing or installing failed.

use std::path::PathBuf;

/// Why a plugin could not be published, fetched or installed. Every check
/// that refuses a plugin has its own variant, so a caller (and a test) can
/// tell a tampered blob from a missing signature.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference is neither `oci://REGISTRY/REPO[:TAG|@DIGEST]`,
    /// `REGISTRY/REPO…` nor a file.
    #[error("`{reference}` is not a plugin reference: {message}")]
    InvalidReference {
        /// What was given.
        reference: String,
        /// What is wrong.
        message: String,
    },
    /// The registry could not be reached or answered with an error.
    #[error("registry {reference}: {message}")]
    Registry {
        /// The reference being pushed or pulled.
        reference: String,
        /// What the client or the registry said.
        message: String,
    },
    /// The artifact is not a toolhost plugin in the expected layout.
    #[error("{reference} is not a toolhost plugin: {message}")]
    NotAPlugin {
        /// The reference.
        reference: String,
        /// What is missing or unexpected.
        message: String,
    },
    /// Content does not hash to the digest it was asked for or declared
    /// with: it was changed on the way or in the registry.
    #[error("{what}: digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// What was checked (the OCI manifest, the component layer …).
        what: String,
        /// The digest it should have.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// Content is larger than the limit, or than it was declared.
    #[error("{what} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// What was checked.
        what: String,
        /// Its size (declared, or received so far).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A layer's bytes are not as many as its descriptor says.
    #[error("{what}: declared as {declared} bytes, received {received}")]
    SizeMismatch {
        /// What was checked.
        what: String,
        /// The size in its descriptor.
        declared: u64,
        /// The bytes received.
        received: u64,
    },
    /// The plugin manifest (`NAME.toml`) does not parse.
    #[error("the plugin manifest is invalid: {0}")]
    Manifest(String),
    /// The plugin's name is not a valid one (`^[a-zA-Z0-9_-]{1,64}$`).
    #[error("plugin name `{0}` is invalid: it must match ^[a-zA-Z0-9_-]{{1,64}}$")]
    InvalidName(String),
    /// Two places that name the plugin disagree.
    #[error(
        "the plugin calls itself `{found}` in {place}, but `{expected}` was expected (the name \
         the reference gives, or --name); a plugin is never installed under a name its \
         reference does not give it: use --name {found} if this is the plugin you mean"
    )]
    NameMismatch {
        /// The expected name (the reference's, or `--name`).
        expected: String,
        /// The name found.
        found: String,
        /// Where it was found.
        place: String,
    },
    /// A signature was required and none verified.
    #[error("{reference} is not signed by a trusted key: {reason}")]
    Unsigned {
        /// The reference.
        reference: String,
        /// Why (no signature artifact, only signatures by other keys, a
        /// payload about another manifest, a local file …).
        reason: String,
    },
    /// A signature is required but no trusted key is configured.
    #[error(
        "a signature is required but no trusted public key is configured (--key FILE or trusted-keys in the config file)"
    )]
    NoTrustedKeys,
    /// A key file could not be read or is not a P-256 key.
    #[error("key {what}: {message}")]
    Key {
        /// The key file, or which key.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

impl OciError {
    pub(crate) fn io(path: &std::path::Path, e: impl std::fmt::Display) -> OciError {
        OciError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }

    pub(crate) fn registry(reference: &impl std::fmt::Display, e: impl std::fmt::Display) -> Self {
        OciError::Registry {
            reference: reference.to_string(),
            message: e.to_string(),
        }
    }
}
