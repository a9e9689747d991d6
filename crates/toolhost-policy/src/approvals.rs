//! Saved approvals: the "allow always" answers, kept narrow, listed and
//! revocable.
//!
//! An approval is saved for one tool of one plugin **build** (its content
//! digest: an upgrade asks again), scoped by default to the exact
//! arguments that were approved, or, when the person said so, to any
//! arguments. It records who approved, when, from which prompt, and an
//! optional expiry. It only ever answers an `ask`: a `deny` rule is
//! decided before any approval is looked up, so a saved approval can never
//! lift one.
//!
//! The store is a JSON file written atomically (a temporary file renamed
//! over it), read again when it changes on disk, bounded in size.
//!
//! ```
//! use serde_json::json;
//! use toolhost_policy::approvals::{Approvals, NewApproval, Scope};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Approvals::open(dir.path().join("toolhost.approvals.json"));
//! let args = json!({"path": "notes.txt"});
//! let id = store
//!     .save(NewApproval {
//!         tool: "read_file".into(),
//!         plugin: "fs".into(),
//!         digest: "sha256:ab".into(),
//!         scope: Scope::Arguments(args.clone()),
//!         who: "ana".into(),
//!         from: "terminal".into(),
//!         client: None,
//!         expires: None,
//!     })
//!     .unwrap();
//! assert_eq!(store.find("read_file", "sha256:ab", &args, Default::default(), None, 0).as_deref(), Some(id.as_str()));
//! // Other arguments, or another build of the plugin: asked again.
//! assert!(store.find("read_file", "sha256:ab", &json!({"path": "x"}), Default::default(), None, 0).is_none());
//! assert!(store.find("read_file", "sha256:cd", &args, Default::default(), None, 0).is_none());
//! assert!(store.revoke(&id).unwrap());
//! assert!(store.find("read_file", "sha256:ab", &args, Default::default(), None, 0).is_none());
//! ```

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_patterns::HostPattern;

use crate::PathContext;

/// What a saved approval covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "arguments")]
pub enum Scope {
    /// Exactly these arguments (compared as JSON values: key order and
    /// spacing do not matter).
    Arguments(Value),
    /// Any arguments of the tool.
    AnyArguments,
    /// Calls whose path argument (at the JSON pointer `argument`) names a
    /// file or directory inside `directory` (an absolute path on the host,
    /// symbolic links resolved): "this directory". The path counts as the
    /// tool resolves it (against its first granted directory) and, when it
    /// exists, with symbolic links followed: both must be inside, so a
    /// link inside the directory that leads out is not covered.
    Directory {
        /// The JSON pointer of the path argument (`/path`).
        argument: String,
        /// The directory.
        directory: PathBuf,
    },
    /// Calls whose URL argument (at the JSON pointer `argument`) is a
    /// request to `host` ("this host"; a [`HostPattern`] of one host, any
    /// port and scheme). The URL's real host counts.
    Host {
        /// The JSON pointer of the URL argument (`/url`).
        argument: String,
        /// The host.
        host: HostPattern,
    },
}

impl Scope {
    /// Whether a call with `args`, whose path arguments resolve as `paths`
    /// says, is covered.
    pub fn covers(&self, args: &Value, paths: PathContext<'_>) -> bool {
        match self {
            Scope::AnyArguments => true,
            Scope::Arguments(saved) => saved == args,
            Scope::Directory {
                argument,
                directory,
            } => args
                .pointer(argument)
                .and_then(Value::as_str)
                .is_some_and(|raw| path_inside(raw, paths, argument, directory)),
            Scope::Host { argument, host } => args
                .pointer(argument)
                .and_then(Value::as_str)
                .is_some_and(|url| host.matches_url(url)),
        }
    }
}

impl std::fmt::Display for Scope {
    /// What the scope covers, in a few words (`these arguments: {…}`,
    /// `any arguments`, `/path inside /srv/notes`, `/url on example.com`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Arguments(args) => write!(f, "these arguments: {args}"),
            Scope::AnyArguments => f.write_str("any arguments"),
            Scope::Directory {
                argument,
                directory,
            } => write!(f, "{argument} inside {}", directory.display()),
            Scope::Host { argument, host } => write!(f, "{argument} on {host}"),
        }
    }
}

/// Whether the path `raw`, the argument at `pointer` (relative ones
/// against the base of `paths`), lies inside `directory`, lexically and,
/// when it exists, where it really is: for the argument a per-call grant
/// opened, where what it opened is; for another, with links followed now.
fn path_inside(raw: &str, paths: PathContext<'_>, pointer: &str, directory: &Path) -> bool {
    let Some(lexical) = resolve_path(raw, paths.base) else {
        return false;
    };
    if !toolhost_patterns::within(&lexical, directory) {
        return false;
    }
    let real = match paths.opened.filter(|o| o.pointer == pointer) {
        Some(opened) => opened.real.map(Path::to_path_buf),
        None => std::fs::canonicalize(&lexical).ok(),
    };
    // Not there: nothing to follow.
    real.is_none_or(|real| toolhost_patterns::within(&real, directory))
}

/// The path a tool opens for the argument `raw`, as a [`Scope::Directory`]
/// compares it: an absolute path as it is, a relative one against `base`
/// (canonical, as the guest sees its grant), normalised lexically (`.`,
/// `..` and repeated `/` resolved); `None` for a relative path without a
/// base, or one with a NUL byte.
///
/// ```
/// use std::path::Path;
/// use toolhost_policy::approvals::resolve_path;
///
/// assert_eq!(resolve_path("/srv/a/../b.txt", None).unwrap(), Path::new("/srv/b.txt"));
/// assert!(resolve_path("b.txt", None).is_none());
/// ```
pub fn resolve_path(raw: &str, base: Option<&Path>) -> Option<PathBuf> {
    let base = base.map(|b| std::fs::canonicalize(b).unwrap_or_else(|_| b.to_path_buf()));
    toolhost_patterns::resolve(raw, base.as_deref())
}

/// One saved approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SavedApproval {
    /// Its id, for `host approvals revoke ID`.
    pub id: String,
    /// The tool's exposed name.
    pub tool: String,
    /// The plugin (or MCP server) that provides it.
    pub plugin: String,
    /// The plugin's content digest when it was approved.
    pub digest: String,
    /// What it covers.
    pub scope: Scope,
    /// Who approved it.
    pub who: String,
    /// Which prompt it was given at (`terminal`, `mcp-elicitation`, …).
    pub from: String,
    /// The client it was given by, when it came from one (an MCP client's
    /// token identity): it then applies to that client's calls only, so
    /// one caller's "remember" never approves another's calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// When (seconds since the Unix epoch).
    pub when: u64,
    /// When it stops applying (seconds since the Unix epoch), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
}

/// An approval to save ([`Approvals::save`] adds the id and the time).
#[derive(Debug, Clone, PartialEq)]
pub struct NewApproval {
    /// The tool's exposed name.
    pub tool: String,
    /// The plugin that provides it.
    pub plugin: String,
    /// The plugin's content digest.
    pub digest: String,
    /// What it covers.
    pub scope: Scope,
    /// Who approved it.
    pub who: String,
    /// Which prompt.
    pub from: String,
    /// The client it applies to (none: every caller of this host).
    pub client: Option<String>,
    /// When it stops applying, if ever.
    pub expires: Option<u64>,
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalsError {
    /// The file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a list of saved approvals, or is over the bounds.
    #[error("{}: not a saved-approvals file: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// The most approvals a file may hold, and its largest size.
pub const MAX_APPROVALS: usize = 10_000;
const MAX_FILE_BYTES: u64 = 8 << 20;
/// The largest scope (its arguments, directory or host, as JSON) an
/// approval keeps (bigger ones are for this call only, i.e. not saved).
pub const MAX_ARGUMENT_BYTES: usize = 64 << 10;

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    #[serde(default)]
    approvals: Vec<SavedApproval>,
}

/// The saved approvals of one host (a file next to its lock file).
#[derive(Debug)]
pub struct Approvals {
    path: Option<PathBuf>,
    /// How long a new approval lasts at most (seconds), if bounded.
    lasting: Option<u64>,
    /// The entries, and the file's modification time they were read at.
    cache: Mutex<(Vec<SavedApproval>, Option<SystemTime>)>,
}

/// Seconds since the Unix epoch, now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Approvals {
    /// The store in `path` (a missing file is an empty store).
    pub fn open(path: PathBuf) -> Approvals {
        Approvals {
            path: Some(path),
            lasting: None,
            cache: Mutex::new((Vec::new(), None)),
        }
    }

    /// A store that lives in memory only (an embedder without a file).
    pub fn in_memory() -> Approvals {
        Approvals {
            path: None,
            lasting: None,
            cache: Mutex::new((Vec::new(), None)),
        }
    }

    /// The same store, where every approval saved from now on lasts at
    /// most `bound` (an operator's rule: "allow always" means for 30 days
    /// here). An approval given with an earlier expiry keeps it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolhost_policy::approvals::{Approvals, NewApproval, Scope, now};
    ///
    /// let store = Approvals::in_memory().lasting(Some(Duration::from_secs(3600)));
    /// store.save(NewApproval {
    ///     tool: "read_file".into(),
    ///     plugin: "fs".into(),
    ///     digest: "sha256:ab".into(),
    ///     scope: Scope::AnyArguments,
    ///     who: "ana".into(),
    ///     from: "terminal".into(),
    ///     client: None,
    ///     expires: None,
    /// }).unwrap();
    /// let expires = store.list().unwrap()[0].expires.unwrap();
    /// assert!(expires <= now() + 3600 && expires + 60 > now() + 3600);
    /// ```
    #[must_use]
    pub fn lasting(mut self, bound: Option<std::time::Duration>) -> Approvals {
        self.lasting = bound.map(|d| d.as_secs());
        self
    }

    /// Where the store is kept, if on disk.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Every saved approval, oldest first.
    pub fn list(&self) -> Result<Vec<SavedApproval>, ApprovalsError> {
        let mut cache = self.lock();
        self.refresh(&mut cache)?;
        Ok(cache.0.clone())
    }

    /// The id of an approval that covers `tool` of the plugin build
    /// `digest` with `args` (path arguments resolved as `paths` says, see
    /// [`Scope::covers`]), for a call from `client`, at time `now`
    /// (seconds), if one does. An approval given by a client covers that
    /// client's calls only. A file that cannot be read answers none (and
    /// logs why): the call is asked.
    pub fn find(
        &self,
        tool: &str,
        digest: &str,
        args: &Value,
        paths: PathContext<'_>,
        client: Option<&str>,
        now: u64,
    ) -> Option<String> {
        let mut cache = self.lock();
        if let Err(e) = self.refresh(&mut cache) {
            tracing::warn!("saved approvals not consulted: {e}");
            return None;
        }
        cache
            .0
            .iter()
            .find(|a| {
                a.tool == tool
                    && a.digest == digest
                    && a.client.as_deref().is_none_or(|c| Some(c) == client)
                    && a.expires.is_none_or(|t| now < t)
                    && a.scope.covers(args, paths)
            })
            .map(|a| a.id.clone())
    }

    /// Saves `new` and returns its id.
    pub fn save(&self, new: NewApproval) -> Result<String, ApprovalsError> {
        // Every scope holds text from the call (arguments, a path, a
        // host): bounded alike.
        if serde_json::to_string(&new.scope).map_or(usize::MAX, |t| t.len()) > MAX_ARGUMENT_BYTES {
            return Err(self.invalid(format!(
                "a scope over {MAX_ARGUMENT_BYTES} bytes is not saved"
            )));
        }
        let bounded = self.lasting.map(|secs| now().saturating_add(secs));
        let expires = match (new.expires, bounded) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.change(|entries| {
            if entries.len() >= MAX_APPROVALS {
                return Err(format!("it holds {MAX_APPROVALS} approvals already"));
            }
            let next = entries
                .iter()
                .filter_map(|a| a.id.parse::<u64>().ok())
                .max()
                .unwrap_or(0)
                .saturating_add(1);
            let id = next.to_string();
            entries.push(SavedApproval {
                id: id.clone(),
                tool: new.tool,
                plugin: new.plugin,
                digest: new.digest,
                scope: new.scope,
                who: new.who,
                from: new.from,
                client: new.client,
                when: now(),
                expires,
            });
            Ok(id)
        })
    }

    /// Removes the approval `id`; `false` when there was none.
    pub fn revoke(&self, id: &str) -> Result<bool, ApprovalsError> {
        self.change(|entries| {
            let before = entries.len();
            entries.retain(|a| a.id != id);
            Ok(entries.len() != before)
        })
    }

    /// Removes every approval; returns how many there were.
    pub fn clear(&self) -> Result<usize, ApprovalsError> {
        self.change(|entries| Ok(std::mem::take(entries).len()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<SavedApproval>, Option<SystemTime>)> {
        // A panic while it was held leaves whole entries: go on with them.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn invalid(&self, message: String) -> ApprovalsError {
        ApprovalsError::Invalid {
            path: self.path.clone().unwrap_or_default(),
            message,
        }
    }

    /// Applies `f` to the entries, read fresh, and writes them back.
    fn change<T>(
        &self,
        f: impl FnOnce(&mut Vec<SavedApproval>) -> Result<T, String>,
    ) -> Result<T, ApprovalsError> {
        let mut cache = self.lock();
        self.refresh(&mut cache)?;
        let mut entries = cache.0.clone();
        let out = f(&mut entries).map_err(|m| self.invalid(m))?;
        if let Some(path) = &self.path {
            write(path, &entries)?;
            cache.1 = modified(path);
        }
        cache.0 = entries;
        Ok(out)
    }

    /// Reads the file again when it changed since it was last read.
    fn refresh(
        &self,
        cache: &mut (Vec<SavedApproval>, Option<SystemTime>),
    ) -> Result<(), ApprovalsError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let stamp = modified(path);
        if stamp.is_some() && stamp == cache.1 {
            return Ok(());
        }
        cache.0 = read(path)?;
        cache.1 = stamp;
        Ok(())
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read(path: &Path) -> Result<Vec<SavedApproval>, ApprovalsError> {
    let io = |source| ApprovalsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let invalid = |message: String| ApprovalsError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
        Ok(m) if m.len() > MAX_FILE_BYTES => {
            return Err(invalid(format!("over {MAX_FILE_BYTES} bytes")));
        }
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    let file: File = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    if file.approvals.len() > MAX_APPROVALS {
        return Err(invalid(format!("over {MAX_APPROVALS} approvals")));
    }
    Ok(file.approvals)
}

fn write(path: &Path, entries: &[SavedApproval]) -> Result<(), ApprovalsError> {
    let io = |source| ApprovalsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let text = serde_json::to_string_pretty(&File {
        approvals: entries.to_vec(),
    })
    .map_err(|e| io(std::io::Error::other(e)))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".approvals-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(io)?;
    std::io::Write::write_all(&mut tmp, format!("{text}\n").as_bytes()).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn new(tool: &str, scope: Scope, expires: Option<u64>) -> NewApproval {
        NewApproval {
            tool: tool.into(),
            plugin: "fs".into(),
            digest: "sha256:1".into(),
            scope,
            who: "test".into(),
            from: "terminal".into(),
            client: None,
            expires,
        }
    }

    #[test]
    fn exact_arguments_match_as_json_values_and_nothing_wider() {
        let store = Approvals::in_memory();
        store
            .save(new(
                "read_file",
                Scope::Arguments(json!({"a": 1, "b": [2]})),
                None,
            ))
            .unwrap();
        let reordered: Value = serde_json::from_str(r#"{ "b": [2], "a": 1 }"#).unwrap();
        assert!(
            store
                .find(
                    "read_file",
                    "sha256:1",
                    &reordered,
                    Default::default(),
                    None,
                    0
                )
                .is_some()
        );
        for other in [
            json!({"a": 1}),
            json!({"a": 1, "b": [2], "c": 0}),
            json!(null),
        ] {
            assert!(
                store
                    .find("read_file", "sha256:1", &other, Default::default(), None, 0)
                    .is_none(),
                "{other}"
            );
        }
        assert!(
            store
                .find(
                    "write_file",
                    "sha256:1",
                    &reordered,
                    Default::default(),
                    None,
                    0
                )
                .is_none()
        );
    }

    #[test]
    fn a_clients_approval_covers_that_clients_calls_only() {
        let store = Approvals::in_memory();
        let mut given = new("t", Scope::AnyArguments, None);
        given.client = Some("token:aa".into());
        store.save(given).unwrap();
        let args = json!({});
        assert!(
            store
                .find(
                    "t",
                    "sha256:1",
                    &args,
                    Default::default(),
                    Some("token:aa"),
                    0
                )
                .is_some()
        );
        assert!(
            store
                .find(
                    "t",
                    "sha256:1",
                    &args,
                    Default::default(),
                    Some("token:bb"),
                    0
                )
                .is_none()
        );
        assert!(
            store
                .find("t", "sha256:1", &args, Default::default(), None, 0)
                .is_none()
        );
        // One given at the terminal covers every caller.
        store.save(new("u", Scope::AnyArguments, None)).unwrap();
        assert!(
            store
                .find(
                    "u",
                    "sha256:1",
                    &args,
                    Default::default(),
                    Some("token:bb"),
                    0
                )
                .is_some()
        );
    }

    #[test]
    fn a_directory_approval_covers_paths_inside_it_and_no_way_out() {
        let scene = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(scene.path()).unwrap();
        std::fs::create_dir_all(base.join("notes/deep")).unwrap();
        std::fs::create_dir_all(base.join("secret")).unwrap();
        std::fs::write(base.join("notes/a.txt"), "a").unwrap();
        std::fs::write(base.join("secret/key"), "k").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("notes/out")).unwrap();
        let store = Approvals::in_memory();
        store
            .save(new(
                "read_file",
                Scope::Directory {
                    argument: "/path".into(),
                    directory: base.join("notes"),
                },
                None,
            ))
            .unwrap();
        let covered = |path: &str| {
            store
                .find(
                    "read_file",
                    "sha256:1",
                    &json!({ "path": path }),
                    PathContext::default().base(&base),
                    None,
                    0,
                )
                .is_some()
        };
        for inside in [
            "notes/a.txt",
            "notes/deep/new.txt",
            "./notes//a.txt",
            "notes/deep/../a.txt",
            "notes",
            &base.join("notes/a.txt").display().to_string(),
        ] {
            assert!(covered(inside), "{inside}");
        }
        for outside in [
            "secret/key",
            "notes/../secret/key",
            "notesx/a.txt",
            "notes/out/key",
            "/etc/passwd",
            "notes/\0",
        ] {
            assert!(!covered(outside), "{outside}");
        }
        // No base for a relative path, a missing or non-string argument:
        // not covered.
        let args = json!({"path": "notes/a.txt"});
        assert!(
            store
                .find("read_file", "sha256:1", &args, Default::default(), None, 0)
                .is_none()
        );
        for args in [json!({}), json!({"path": 7})] {
            assert!(
                store
                    .find(
                        "read_file",
                        "sha256:1",
                        &args,
                        PathContext::default().base(&base),
                        None,
                        0
                    )
                    .is_none()
            );
        }
    }

    #[test]
    fn a_host_approval_covers_that_hosts_urls_and_no_lookalike() {
        let store = Approvals::in_memory();
        let host = HostPattern::of_url("https://api.example.com/v1", false).unwrap();
        store
            .save(new(
                "fetch",
                Scope::Host {
                    argument: "/url".into(),
                    host,
                },
                None,
            ))
            .unwrap();
        let covered = |url: &str| {
            store
                .find(
                    "fetch",
                    "sha256:1",
                    &json!({ "url": url }),
                    Default::default(),
                    None,
                    0,
                )
                .is_some()
        };
        assert!(covered("https://api.example.com/v2?q=1"));
        assert!(covered("http://API.example.com:8080/"));
        assert!(!covered("https://api.example.com@evil.net/"));
        assert!(!covered("https://x.api.example.com/"));
        assert!(!covered("https://example.com/"));
        assert!(!covered("not a url"));
        // Saved and read back as the same scope.
        let dir = tempfile::tempdir().unwrap();
        let file = Approvals::open(dir.path().join("a.json"));
        for a in store.list().unwrap() {
            file.save(NewApproval {
                tool: a.tool,
                plugin: a.plugin,
                digest: a.digest,
                scope: a.scope,
                who: a.who,
                from: a.from,
                client: a.client,
                expires: a.expires,
            })
            .unwrap();
        }
        let again = Approvals::open(dir.path().join("a.json")).list().unwrap();
        assert_eq!(again[0].scope.to_string(), "/url on api.example.com");
    }

    #[test]
    fn a_bounded_store_keeps_the_earlier_of_the_two_expiries() {
        let store = Approvals::in_memory().lasting(Some(std::time::Duration::from_secs(100)));
        store.save(new("t", Scope::AnyArguments, Some(5))).unwrap();
        store.save(new("u", Scope::AnyArguments, None)).unwrap();
        store
            .save(new("v", Scope::AnyArguments, Some(u64::MAX)))
            .unwrap();
        let expires: Vec<u64> = store
            .list()
            .unwrap()
            .iter()
            .map(|a| a.expires.unwrap())
            .collect();
        assert_eq!(expires[0], 5);
        assert!(
            expires[1] > now() && expires[1] <= now() + 100,
            "{expires:?}"
        );
        assert!(expires[2] <= now() + 100, "{expires:?}");
    }

    #[test]
    fn an_expired_approval_no_longer_applies() {
        let store = Approvals::in_memory();
        store
            .save(new("t", Scope::AnyArguments, Some(100)))
            .unwrap();
        assert!(
            store
                .find("t", "sha256:1", &json!({}), Default::default(), None, 99)
                .is_some()
        );
        assert!(
            store
                .find("t", "sha256:1", &json!({}), Default::default(), None, 100)
                .is_none()
        );
    }

    #[test]
    fn the_file_survives_a_new_store_and_ids_are_never_reused_while_listed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let store = Approvals::open(path.clone());
        let one = store.save(new("t", Scope::AnyArguments, None)).unwrap();
        let two = store.save(new("u", Scope::AnyArguments, None)).unwrap();
        assert_ne!(one, two);
        let again = Approvals::open(path.clone());
        assert_eq!(again.list().unwrap().len(), 2);
        assert!(again.revoke(&one).unwrap());
        assert!(!again.revoke(&one).unwrap());
        // The first store sees the other's change on disk.
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(again.clear().unwrap(), 1);
        assert!(
            store
                .find("u", "sha256:1", &json!({}), Default::default(), None, 0)
                .is_none()
        );
    }

    #[test]
    fn a_broken_or_huge_file_is_an_error_and_finds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "{not json").unwrap();
        let store = Approvals::open(path.clone());
        assert!(matches!(store.list(), Err(ApprovalsError::Invalid { .. })));
        assert!(
            store
                .find("t", "d", &json!({}), Default::default(), None, 0)
                .is_none()
        );
        assert!(store.save(new("t", Scope::AnyArguments, None)).is_err());
        std::fs::write(&path, "{not json").unwrap();
        let big = json!({"x": "y".repeat(MAX_ARGUMENT_BYTES)});
        let mem = Approvals::in_memory();
        assert!(mem.save(new("t", Scope::Arguments(big), None)).is_err());
        // A directory from a model's path is bounded the same way.
        let deep = Scope::Directory {
            argument: "/path".into(),
            directory: PathBuf::from("/d").join("x".repeat(MAX_ARGUMENT_BYTES)),
        };
        assert!(mem.save(new("t", deep, None)).is_err());
        assert!(mem.list().unwrap().is_empty());
    }
}
