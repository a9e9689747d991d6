//! The process's crypto providers, chosen once for both sides.

/// Selects jsonwebtoken's RustCrypto provider for the process (once): with
/// both its `rust_crypto` (ours) and `aws_lc_rs` (rmcp's client-credentials
/// JWT) features on, it picks none by itself and panics at first use.
pub(crate) fn jwt_crypto() {
    let _ = jsonwebtoken::crypto::CryptoProvider::install_default(
        &jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER,
    );
}
