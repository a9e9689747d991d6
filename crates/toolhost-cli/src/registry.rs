//! What `host publish` and `host install` share: the registry's
//! credentials.

use toolhost_oci::Credentials;

/// Registry credentials from `TOOLHOST_REGISTRY_USERNAME` and
/// `TOOLHOST_REGISTRY_PASSWORD`; anonymous without them.
pub fn credentials() -> Option<Credentials> {
    let username = std::env::var("TOOLHOST_REGISTRY_USERNAME").ok()?;
    let password = std::env::var("TOOLHOST_REGISTRY_PASSWORD").unwrap_or_default();
    Some(Credentials { username, password })
}
