//! The lock file: which code a plugin's grants were given to.
//!
//! A plugin's name is what its manifest says, so a grant given to a name
//! alone would follow any file that claims that name. With a lock file
//! ([`RuntimeBuilder::lock_file`](crate::RuntimeBuilder::lock_file)), the
//! first time a plugin loads *with grants* its content digest (SHA-256 of
//! the component) is recorded beside its name, like a package lock. Later
//! loads under that name get the grants only when the digest matches; a
//! different digest loads **without** its grants (directories, hosts,
//! environment) and says so, until the user accepts it
//! ([`Runtime::trust`](crate::Runtime::trust), `host trust NAME`) or the
//! runtime accepts new digests ([`RuntimeBuilder::accept_new_digests`](crate::RuntimeBuilder::accept_new_digests),
//! `host --dev`, for plugins being rebuilt).
//!
//! ```toml
//! # toolhost.lock
//! [plugins.fs]
//! digest = "sha256:3f5a…"
//! ```
//!
//! A plugin installed with `host install` ([`record_install`]) also records
//! where it came from and who signed it; the grants stay bound to the digest:
//!
//! ```toml
//! [plugins.calc]
//! digest = "sha256:9c1e…"
//! version = "1.2.0"
//! source = "oci://registry.example.com/tools/calc@sha256:77ab…"
//! signer = "sha256:0d4f…"   # fingerprint of the public key that verified it
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where the lock file of plugins directory `dir` lives by default: one
/// file per directory, in the user's state directory
/// (`$XDG_STATE_HOME/toolhost/locks/`, else `~/.local/state/toolhost/locks/`),
/// named after the directory and a digest of its canonical path. So trust
/// follows the plugins directory, not the directory `host` was started
/// from; and it lives outside the plugins directory, so whoever can change
/// a plugin there cannot also rewrite what it is trusted as. `None` when the
/// machine has no home directory.
///
/// ```
/// let a = toolhost_runtime::lockfile::default_lock_file(std::path::Path::new("/srv/tools"));
/// let b = toolhost_runtime::lockfile::default_lock_file(std::path::Path::new("/srv/tools/"));
/// assert_eq!(a, b);
/// if let Some(path) = a {
///     assert!(path.file_name().unwrap().to_str().unwrap().starts_with("tools-"));
/// }
/// ```
pub fn default_lock_file(dir: &Path) -> Option<PathBuf> {
    let dirs = directories::ProjectDirs::from("", "", "toolhost")?;
    let base = dirs
        .state_dir()
        .map_or_else(|| dirs.data_local_dir().to_owned(), Path::to_owned);
    // Resolved when it exists; else made absolute, and either way rebuilt
    // from its components (`/srv/tools/` and `/srv/tools` are one directory).
    let canonical: PathBuf = std::fs::canonicalize(dir)
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_owned())
        .components()
        .collect();
    let key = hex::encode(Sha256::digest(canonical.as_os_str().as_encoded_bytes()));
    let label: String = canonical
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("plugins")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    Some(
        base.join("locks")
            .join(format!("{label}-{}.lock", &key[..16])),
    )
}

/// The content digest of a component: `sha256:` and the hex of its bytes,
/// as the lock file records it.
///
/// ```
/// assert!(toolhost_runtime::lockfile::digest_of(b"\0asm").starts_with("sha256:"));
/// ```
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether a plugin got what the user granted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum GrantState {
    /// Nothing is granted to this plugin (nothing to bind).
    NoGrants,
    /// Its digest is the one in the lock file (or no lock file is used):
    /// its grants apply.
    Active,
    /// First load with grants (or a new digest in dev mode): its grants
    /// apply and its digest is recorded in the lock file once it is the
    /// version chosen for its name.
    FirstUse,
    /// Its digest differs from the one its grants were given to: it runs
    /// without them until the user accepts it.
    Withheld {
        /// The digest the lock file trusts for this name.
        trusted: String,
    },
    /// Its manifest gives it the name of a plugin with grants, but its file
    /// is named otherwise: grants for NAME go only to `NAME.wasm` or
    /// `NAME@VERSION.wasm` (the file the user put there), so it runs
    /// without them and is never recorded in the lock file as NAME.
    NotItsFile {
        /// The name of its file, without `.wasm`.
        file: String,
    },
    /// The lock file is locked ([`RuntimeBuilder::locked`](crate::RuntimeBuilder::locked),
    /// `host --locked`) and names no code for this plugin: it runs without
    /// its grants, and nothing is recorded (trust is prepared ahead, where
    /// the lock is made, never at a replica's first use).
    NotInLock,
}

impl GrantState {
    /// Whether the plugin's grants apply.
    pub fn is_active(&self) -> bool {
        matches!(self, GrantState::Active | GrantState::FirstUse)
    }
}

impl std::fmt::Display for GrantState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GrantState::NoGrants => f.write_str("nothing granted"),
            GrantState::Active => f.write_str("active"),
            GrantState::FirstUse => {
                f.write_str("active (first use: digest recorded in the lock file)")
            }
            GrantState::Withheld { trusted } => write!(
                f,
                "WITHHELD: the grants were given to {trusted}; accept this code with `host trust`"
            ),
            GrantState::NotItsFile { file } => write!(
                f,
                "WITHHELD: its file is {file}.wasm, and grants go only to the file named for \
                 the plugin (NAME.wasm or NAME@VERSION.wasm)"
            ),
            GrantState::NotInLock => f.write_str(
                "WITHHELD: the lock file is locked and names no code for it; trust it with \
                 `host trust` where the lock file is prepared",
            ),
        }
    }
}

/// Why the lock file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Reading or writing it failed.
    #[error("lock file {path}: {message}")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// It is not a lock file.
    #[error("lock file {path} is malformed: {message}")]
    Malformed {
        /// The lock file.
        path: PathBuf,
        /// What is wrong, with line and column.
        message: String,
    },
    /// [`Runtime::trust`](crate::Runtime::trust) was asked about a plugin that is not loaded.
    #[error("no plugin named `{0}` is loaded")]
    UnknownPlugin(String),
    /// [`Runtime::trust`](crate::Runtime::trust) was asked about a plugin
    /// whose file is not named for it: grants never go to it (rename the
    /// file if it is the plugin meant).
    #[error(
        "`{name}` is loaded from {path}, a file not named for it: grants for `{name}` go only \
         to {name}.wasm or {name}@VERSION.wasm; rename the file if this is the plugin you mean"
    )]
    NotItsFile {
        /// The plugin's name.
        name: String,
        /// Its file.
        path: PathBuf,
    },
    /// [`Runtime::trust`](crate::Runtime::trust) without a lock file.
    #[error("this runtime has no lock file")]
    NoLockFile,
    /// A locked runtime's lock file is not there: it refuses to start
    /// rather than trust on first use.
    #[error(
        "lock file {0} is missing, and it is locked (--locked, TOOLHOST_LOCKED): prepare it \
         with `host trust NAME` and ship it read-only with the plugins"
    )]
    Missing(PathBuf),
    /// A locked lock file is never written.
    #[error(
        "lock file {0} is locked (--locked, TOOLHOST_LOCKED): trust plugins where it is prepared"
    )]
    Locked(PathBuf),
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    #[serde(default)]
    plugins: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    digest: String,
    /// Provenance of an installed plugin ([`record_install`]); absent for
    /// plugins trusted in place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signer: Option<String>,
}

/// What `host install` records about a plugin it installed: its identity
/// (name and content digest, to which grants are bound) and its provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallRecord {
    /// The plugin's name (its files are `NAME.wasm` and `NAME.toml`).
    pub name: String,
    /// `sha256:` and the hex of the component's bytes.
    pub digest: String,
    /// The version its manifest declares.
    pub version: Option<String>,
    /// Where it was installed from (a registry reference pinned to the
    /// manifest digest, or a file).
    pub source: String,
    /// Who signed it: the fingerprint of the trusted key that verified its
    /// signature; `None` when it was not verified.
    pub signer: Option<String>,
}

/// Records an installed plugin in the lock file at `path` (created when
/// missing): its digest becomes the code its grants are given to, as
/// `host trust` does, with its version, source and signer beside it.
///
/// ```no_run
/// use toolhost_runtime::{lockfile::InstallRecord, lockfile::record_install};
///
/// record_install(
///     std::path::Path::new("toolhost.lock"),
///     &InstallRecord {
///         name: "calc".into(),
///         digest: "sha256:9c1e…".into(),
///         version: Some("1.2.0".into()),
///         source: "oci://127.0.0.1:5000/calc@sha256:77ab…".into(),
///         signer: None,
///     },
/// )?;
/// # Ok::<(), toolhost_runtime::lockfile::LockError>(())
/// ```
pub fn record_install(path: &Path, record: &InstallRecord) -> Result<(), LockError> {
    let lock = Lock::open(path, false)?;
    let mut entries = lock.entries.lock();
    entries.plugins.insert(
        record.name.clone(),
        Entry {
            digest: record.digest.clone(),
            version: record.version.clone(),
            source: Some(record.source.clone()),
            signer: record.signer.clone(),
        },
    );
    write_lock(path, &entries)
}

/// What the lock file at `path` records for plugin `name` (see
/// [`LockEntry`]); `None` when nothing is (or there is no lock file yet).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let lock = dir.path().join("toolhost.lock");
/// assert!(toolhost_runtime::lockfile::lock_entry(&lock, "calc")?.is_none());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn lock_entry(path: &Path, name: &str) -> Result<Option<LockEntry>, LockError> {
    let lock = Lock::open(path, false)?;
    let entries = lock.entries.lock();
    Ok(entries.plugins.get(name).map(|e| LockEntry {
        digest: e.digest.clone(),
        version: e.version.clone(),
        source: e.source.clone(),
        signer: e.signer.clone(),
    }))
}

/// One plugin's entry in the lock file: the code its grants are given to,
/// and for an installed plugin where it came from and who signed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockEntry {
    /// `sha256:` of the component.
    pub digest: String,
    /// Its version, when installed.
    pub version: Option<String>,
    /// Where it was installed from (`None`: trusted in place).
    pub source: Option<String>,
    /// The fingerprint of the key that verified it.
    pub signer: Option<String>,
}

/// Writes the lock file atomically (a temporary file renamed over it).
fn write_lock(path: &Path, entries: &LockFile) -> Result<(), LockError> {
    let text = format!(
        "# toolhost.lock: the code each plugin's grants were given to.\n\
         # Written by toolhost; accept a changed plugin with `host trust NAME`.\n\n{}",
        toml::to_string(entries).map_err(|e| LockError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        })?
    );
    let io = |e: std::io::Error| LockError::Io {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// The lock file, loaded, and how new digests are treated.
#[derive(Debug)]
pub(crate) struct Lock {
    path: Option<PathBuf>,
    accept_new: bool,
    /// Read only: a plugin it does not name gets no grants, and nothing is
    /// recorded.
    locked: bool,
    entries: Mutex<LockFile>,
}

impl Lock {
    /// No lock file: grants go by name, as before locks existed.
    pub(crate) fn none() -> Lock {
        Lock {
            path: None,
            accept_new: false,
            locked: false,
            entries: Mutex::new(LockFile::default()),
        }
    }

    /// The lock file at `path` (created at the first grant when missing).
    pub(crate) fn open(path: &Path, accept_new: bool) -> Result<Lock, LockError> {
        let entries = match std::fs::read_to_string(path) {
            Ok(text) => toml::from_str(&text).map_err(|e| LockError::Malformed {
                path: path.to_owned(),
                message: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => LockFile::default(),
            Err(e) => {
                return Err(LockError::Io {
                    path: path.to_owned(),
                    message: e.to_string(),
                });
            }
        };
        Ok(Lock {
            path: Some(path.to_owned()),
            accept_new,
            locked: false,
            entries: Mutex::new(entries),
        })
    }

    /// The lock file at `path`, read only: it must exist, grants go only to
    /// the code it names, and it is never written.
    pub(crate) fn open_locked(path: &Path) -> Result<Lock, LockError> {
        if !path.is_file() {
            return Err(LockError::Missing(path.to_owned()));
        }
        let mut lock = Lock::open(path, false)?;
        lock.locked = true;
        Ok(lock)
    }

    /// Whether plugin `name` with `digest` gets its grants (`has_grants`:
    /// whether it has any). Writes nothing: the catalog records first uses
    /// for the versions it chooses ([`Lock::record`]).
    pub(crate) fn check(&self, name: &str, digest: &str, has_grants: bool) -> GrantState {
        if !has_grants {
            return GrantState::NoGrants;
        }
        if self.path.is_none() {
            return GrantState::Active;
        }
        match self.entries.lock().plugins.get(name) {
            Some(e) if e.digest == digest => GrantState::Active,
            Some(e) if !self.accept_new || self.locked => GrantState::Withheld {
                trusted: e.digest.clone(),
            },
            None if self.locked => GrantState::NotInLock,
            _ => GrantState::FirstUse,
        }
    }

    /// Trusts `digest` for `name` from now on, and writes the file.
    pub(crate) fn record(&self, name: &str, digest: &str) -> Result<(), LockError> {
        let Some(path) = &self.path else {
            return Err(LockError::NoLockFile);
        };
        if self.locked {
            return Err(LockError::Locked(path.clone()));
        }
        let mut entries = self.entries.lock();
        if entries
            .plugins
            .get(name)
            .is_some_and(|e| e.digest == digest)
        {
            // Already trusted (a plugin recorded at first use stays loaded
            // across later reloads): nothing to write.
            return Ok(());
        }
        entries.plugins.insert(
            name.to_owned(),
            Entry {
                digest: digest.to_owned(),
                ..Entry::default()
            },
        );
        write_lock(path, &entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, digest: &str) -> InstallRecord {
        InstallRecord {
            name: name.into(),
            digest: digest.into(),
            version: Some("1.2.0".into()),
            source: "oci://127.0.0.1:5000/calc@sha256:77".into(),
            signer: Some("sha256:0d4f".into()),
        }
    }

    #[test]
    fn an_install_records_provenance_that_trusting_the_same_digest_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolhost.lock");
        record_install(&path, &record("calc", "sha256:aa")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("signer = \"sha256:0d4f\""), "{text}");
        assert!(text.contains("version = \"1.2.0\""), "{text}");

        let lock = Lock::open(&path, false).unwrap();
        assert_eq!(lock.check("calc", "sha256:aa", true), GrantState::Active);
        lock.record("calc", "sha256:aa").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("source = \"oci://"), "{text}");
    }

    #[test]
    fn trusting_other_code_drops_the_provenance_of_the_installed_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toolhost.lock");
        record_install(&path, &record("calc", "sha256:aa")).unwrap();
        let lock = Lock::open(&path, false).unwrap();
        assert!(matches!(
            lock.check("calc", "sha256:bb", true),
            GrantState::Withheld { .. }
        ));
        lock.record("calc", "sha256:bb").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("sha256:bb"), "{text}");
        assert!(!text.contains("signer"), "{text}");
    }
}
