//! Where the tokens of one server are kept: a JSON file per server in a
//! directory only the user can enter (0700), the file readable by the user
//! only (0600), written whole (a temporary file renamed over it), and bound
//! to the server's URL (tokens for another URL are never sent). Without a
//! directory the tokens live in memory for the life of the process (an
//! unattended gateway's client credentials need no more).
//!
//! rmcp's OAuth client reads and writes it through its
//! [`CredentialStore`] trait; the client secret a dynamic registration
//! issued rides along, since refreshing a confidential client's token
//! needs it, and so does the issuer of the authorization server the tokens
//! came from, which they are refreshed at and nowhere else.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// The largest token file read (a token response is a few KiB).
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// What one file holds.
#[derive(Clone, Serialize, Deserialize)]
struct TokenFile {
    /// The server's name (for a person who opens the directory).
    server: String,
    /// The URL the tokens are for.
    url: String,
    /// The secret of a client registered dynamically, for refreshes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_secret: Option<String>,
    /// The issuer identifier of the authorization server that issued the
    /// tokens (and the secret): the one they are refreshed at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    issuer: Option<String>,
    /// The secret of the DPoP key the tokens are bound to (`dpop.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dpop_key: Option<String>,
    /// rmcp's credentials: client id, token response, scopes, issuer.
    credentials: Option<StoredCredentials>,
}

/// The tokens of one server (cheap to clone: every clone is the same store).
#[derive(Clone)]
pub(crate) struct TokenStore {
    inner: Arc<Inner>,
}

struct Inner {
    server: String,
    url: String,
    /// `None`: in memory only.
    path: Option<PathBuf>,
    /// What was last read or written.
    cache: parking_lot::Mutex<Option<TokenFile>>,
    /// Held across a refresh and its save (within this process).
    refresh: Arc<tokio::sync::Mutex<()>>,
}

/// The file of server `name`'s tokens in `dir`.
pub(crate) fn token_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

impl TokenStore {
    /// The store of server `server` at `url`, in `dir` (or in memory).
    pub(crate) fn new(server: &str, url: &str, dir: Option<&Path>) -> TokenStore {
        TokenStore {
            inner: Arc::new(Inner {
                server: server.to_owned(),
                url: url.to_owned(),
                path: dir.map(|d| token_path(d, server)),
                cache: parking_lot::Mutex::new(None),
                refresh: Arc::new(tokio::sync::Mutex::new(())),
            }),
        }
    }

    /// Its file, if it has one.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// What the file holds now for this URL (`None` when absent, for
    /// another URL, or unreadable: a broken file is a sign-in away from
    /// being replaced, and says why in the log).
    fn read(&self) -> Option<TokenFile> {
        let Some(path) = &self.inner.path else {
            return self.inner.cache.lock().clone();
        };
        let file = match read_file(path) {
            Ok(Some(file)) => file,
            Ok(None) => return None,
            Err(why) => {
                tracing::warn!(server = %self.inner.server, "ignoring the token file {}: {why}", path.display());
                return None;
            }
        };
        (file.url == self.inner.url).then_some(file)
    }

    fn write(&self, file: TokenFile) -> Result<(), AuthError> {
        if let Some(path) = &self.inner.path {
            write_file(path, &file)
                .map_err(|e| AuthError::CredentialStoreError(format!("{}: {e}", path.display())))?;
        }
        *self.inner.cache.lock() = Some(file);
        Ok(())
    }

    fn current(&self) -> TokenFile {
        self.read().unwrap_or_else(|| TokenFile {
            server: self.inner.server.clone(),
            url: self.inner.url.clone(),
            client_secret: None,
            issuer: None,
            dpop_key: None,
            credentials: None,
        })
    }

    /// The stored credentials, if any.
    pub(crate) fn credentials(&self) -> Option<StoredCredentials> {
        self.read().and_then(|f| f.credentials)
    }

    /// The secret kept for the stored client.
    pub(crate) fn client_secret(&self) -> Option<String> {
        self.read().and_then(|f| f.client_secret)
    }

    /// Keeps `secret` (a dynamic registration's) with the tokens.
    pub(crate) fn set_client_secret(&self, secret: Option<String>) -> Result<(), AuthError> {
        let mut file = self.current();
        file.client_secret = secret;
        self.write(file)
    }

    /// The issuer the kept tokens (or secret) came from, if known: the
    /// one recorded here, else the one rmcp recorded with them (a file
    /// of an older version). `None` when nothing is kept.
    pub(crate) fn issuer(&self) -> Option<String> {
        let file = self.read()?;
        let kept = file.client_secret.is_some()
            || file
                .credentials
                .as_ref()
                .is_some_and(|c| c.token_response.is_some());
        if !kept {
            return None;
        }
        file.issuer
            .or_else(|| file.credentials.and_then(|c| c.issuer))
    }

    /// The DPoP key kept with the tokens (its secret, as `dpop.rs` keeps it).
    pub(crate) fn dpop_key(&self) -> Option<String> {
        self.read().and_then(|f| f.dpop_key)
    }

    /// Keeps `key` as the DPoP key of the tokens.
    pub(crate) fn set_dpop_key(&self, key: Option<String>) -> Result<(), AuthError> {
        let mut file = self.current();
        file.dpop_key = key;
        self.write(file)
    }

    /// Keeps `issuer` as the one the tokens came from.
    pub(crate) fn set_issuer(&self, issuer: Option<String>) -> Result<(), AuthError> {
        let mut file = self.current();
        file.issuer = issuer;
        self.write(file)
    }
}

#[async_trait::async_trait]
impl CredentialStore for TokenStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.credentials())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut file = self.current();
        // A secret belongs to the client it was issued to.
        if file
            .credentials
            .as_ref()
            .is_some_and(|c| c.client_id != credentials.client_id)
        {
            file.client_secret = None;
        }
        // So does the issuer, when rmcp names one (a refresh does, the
        // one it refreshed at); a sign-in records its own after.
        if credentials.issuer.is_some() {
            file.issuer.clone_from(&credentials.issuer);
        }
        file.credentials = Some(credentials);
        self.write(file)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        *self.inner.cache.lock() = None;
        if let Some(path) = &self.inner.path {
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(AuthError::CredentialStoreError(format!(
                        "{}: {e}",
                        path.display()
                    )));
                }
            }
        }
        Ok(())
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let guard = self.inner.refresh.clone().lock_owned().await;
        Ok(Some(CredentialRefreshGuard::new(guard)))
    }
}

/// Reads a token file: `Ok(None)` when there is none.
fn read_file(path: &Path) -> Result<Option<TokenFile>, String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("larger than {MAX_FILE_BYTES} bytes"));
    }
    // serde's message names the place, never the value.
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("not a token file ({e})"))
}

/// Writes a token file readable by the user only, in a directory only the
/// user can enter, replacing the old one whole.
fn write_file(path: &Path, file: &TokenFile) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let text = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("tokens"),
        std::process::id()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut out = options.open(&tmp)?;
    // A file left by an older version with wider permissions is narrowed.
    #[cfg(unix)]
    out.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    out.write_all(&text)?;
    out.sync_all()?;
    drop(out);
    std::fs::rename(&tmp, path)
}

/// Creates `dir` (and its parents) as only the user may enter it.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    #[cfg(unix)]
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    Ok(())
}

/// Removes server `name`'s tokens from `dir`; whether there were any.
pub(crate) fn remove(dir: &Path, name: &str) -> std::io::Result<bool> {
    match std::fs::remove_file(token_path(dir, name)) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credentials(client: &str) -> StoredCredentials {
        StoredCredentials::new(client.to_owned(), None, vec!["a".into()], Some(1))
    }

    #[tokio::test]
    async fn tokens_are_kept_readable_by_the_user_alone() {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("oauth");
        let store = TokenStore::new("docs", "https://h/mcp", Some(&tokens));
        store.save(credentials("c1")).await.unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&tokens), 0o700);
            assert_eq!(mode(&tokens.join("docs.json")), 0o600);
        }
        let again = TokenStore::new("docs", "https://h/mcp", Some(&tokens));
        assert_eq!(again.credentials().unwrap().client_id, "c1");
    }

    #[tokio::test]
    async fn tokens_for_another_url_are_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new("docs", "https://h/mcp", Some(dir.path()));
        store.save(credentials("c1")).await.unwrap();
        let moved = TokenStore::new("docs", "https://elsewhere/mcp", Some(dir.path()));
        assert!(moved.credentials().is_none());
    }

    #[tokio::test]
    async fn a_secret_stays_with_its_client_only() {
        let store = TokenStore::new("docs", "https://h/mcp", None);
        store.save(credentials("c1")).await.unwrap();
        store.set_client_secret(Some("s1".into())).unwrap();
        store.save(credentials("c1")).await.unwrap();
        assert_eq!(store.client_secret().as_deref(), Some("s1"));
        store.save(credentials("c2")).await.unwrap();
        assert_eq!(store.client_secret(), None);
    }

    fn with_token(client: &str, issuer: Option<&str>) -> StoredCredentials {
        let token = serde_json::from_value(serde_json::json!({
            "access_token": "a", "token_type": "bearer", "refresh_token": "r",
        }))
        .unwrap();
        StoredCredentials::new(client.to_owned(), Some(token), vec![], Some(1))
            .with_issuer(issuer.map(str::to_owned))
    }

    #[tokio::test]
    async fn the_issuer_is_kept_with_the_tokens_it_issued() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new("docs", "https://h/mcp", Some(dir.path()));
        assert_eq!(store.issuer(), None, "nothing kept");
        // A file of an older version: rmcp's record stands.
        store
            .save(with_token("c1", Some("https://as.example")))
            .await
            .unwrap();
        assert_eq!(store.issuer().as_deref(), Some("https://as.example"));
        // A sign-in records its own (a server without metadata: its origin).
        store.save(with_token("c1", None)).await.unwrap();
        store.set_issuer(Some("https://h".into())).unwrap();
        let again = TokenStore::new("docs", "https://h/mcp", Some(dir.path()));
        assert_eq!(again.issuer().as_deref(), Some("https://h"));
        // A refresh at the issuer rmcp names keeps it in step.
        again
            .save(with_token("c1", Some("https://as.example")))
            .await
            .unwrap();
        assert_eq!(again.issuer().as_deref(), Some("https://as.example"));
        // Without tokens nothing is pinned.
        again.save(credentials("c1")).await.unwrap();
        assert_eq!(again.issuer(), None);
    }

    #[tokio::test]
    async fn removing_tokens_says_whether_there_were_any() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new("docs", "https://h/mcp", Some(dir.path()));
        store.save(credentials("c1")).await.unwrap();
        assert!(remove(dir.path(), "docs").unwrap());
        assert!(!remove(dir.path(), "docs").unwrap());
        assert!(store.credentials().is_none());
    }
}
