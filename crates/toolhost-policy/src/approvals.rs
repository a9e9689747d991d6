//! Saved approvals: the "allow always" answers, kept narrow, bound to
//! whom they answer, listed and revocable.
//!
//! An approval is saved for one tool of one plugin **build** (its content
//! digest: an upgrade asks again), scoped by default to the exact
//! arguments that were approved, or, when the person said so, to any
//! arguments. It is **bound** to the policy profile the call ran under and
//! to whom it answers ([`Answers`]: the user at the host, one client, or,
//! given by the operator, every caller): a call under another profile, or
//! from another caller, is asked. It records who approved, when, from
//! which prompt, and an optional expiry. It only ever answers an `ask`: a
//! `deny` rule is decided before any approval is looked up, so a saved
//! approval can never lift one.
//!
//! The store is a JSON file shared by every process that opens it: changed
//! under a lock, written atomically, read again only when another process
//! changed it, bounded in size and in approvals per caller
//! (`approvals/disk.rs`). Replicas of one gate share a database instead,
//! behind the same [`Store`] trait (`approvals/store.rs`).
//!
//! ```
//! use serde_json::json;
//! use toolhost_policy::approvals::{Answers, Approvals, Lookup, NewApproval, Scope};
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
//!         profile: None,
//!         answers: Answers::User,
//!         who: "ana".into(),
//!         from: "terminal".into(),
//!         expires: None,
//!     })
//!     .unwrap();
//! let call = Lookup::new("read_file", "sha256:ab", &args);
//! assert_eq!(store.find(&call).as_deref(), Some(id.as_str()));
//! // Other arguments, another build of the plugin, another caller or
//! // another profile: asked again.
//! let other = json!({"path": "x"});
//! assert!(store.find(&Lookup::new("read_file", "sha256:ab", &other)).is_none());
//! assert!(store.find(&Lookup::new("read_file", "sha256:cd", &args)).is_none());
//! assert!(store.find(&call.client(Some("token:3f5a"))).is_none());
//! assert!(store.find(&call.profile(Some("reviewer"))).is_none());
//! assert!(store.revoke(&id).unwrap());
//! assert!(store.find(&call).is_none());
//! ```

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolhost_patterns::HostPattern;

use crate::PathContext;

mod disk;
mod store;

pub use store::{Change, Stamp, Store};

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

/// Whom a saved approval answers: the caller it was given for.
///
/// A call names its caller with [`Lookup::client`]: no client is the user
/// running the host (its terminal, `host call`, the chat, an embedder's own
/// calls); a client is an identity the entry point gives (an MCP token's
/// `token:…`, `mcp-stdio`, `mcp-http`).
///
/// ```
/// use toolhost_policy::approvals::Answers;
///
/// assert!(Answers::User.answers(None));
/// assert!(!Answers::User.answers(Some("token:ab")));
/// assert!(Answers::Client("token:ab".into()).answers(Some("token:ab")));
/// assert!(!Answers::Client("token:ab".into()).answers(None));
/// assert!(Answers::Everyone.answers(Some("token:cd")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answers {
    /// The user running the host: calls that name no client. What an
    /// approval given at the terminal answers, and what an approval from
    /// a file written before approvals were bound answers.
    User,
    /// One client: calls that name this identity.
    Client(String),
    /// Every caller: an approval the operator gave (the operator speaks
    /// for the host's policy).
    Everyone,
}

impl Answers {
    /// The approval a call from `client` (none: the user) saves.
    pub fn caller(client: Option<&str>) -> Answers {
        client.map_or(Answers::User, |c| Answers::Client(c.to_owned()))
    }

    /// Whether it answers a call from `client` (none: the user).
    pub fn answers(&self, client: Option<&str>) -> bool {
        match self {
            Answers::User => client.is_none(),
            Answers::Client(id) => client == Some(id.as_str()),
            Answers::Everyone => true,
        }
    }
}

impl std::fmt::Display for Answers {
    /// `the user`, `client token:ab`, `every caller`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answers::User => f.write_str("the user"),
            Answers::Client(id) => write!(f, "client {id}"),
            Answers::Everyone => f.write_str("every caller"),
        }
    }
}

/// One saved approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", from = "Stored")]
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
    /// The policy profile it was given under (none: the policy's
    /// defaults): it answers calls under that profile only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Whom it answers.
    pub answers: Answers,
    /// Who approved it.
    pub who: String,
    /// Which prompt it was given at (`terminal`, `mcp-elicitation`, …).
    pub from: String,
    /// When (seconds since the Unix epoch).
    pub when: u64,
    /// When it stops applying (seconds since the Unix epoch), if ever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
}

impl SavedApproval {
    /// Whom it answers under which profile, in a few words: `the user,
    /// with no profile`, `client token:ab, under profile reviewer`.
    pub fn binding(&self) -> String {
        match &self.profile {
            Some(p) => format!("{}, under profile {p}", self.answers),
            None => format!("{}, with no profile", self.answers),
        }
    }

    /// Whether it covers the call `lookup` describes.
    fn covers(&self, lookup: &Lookup<'_>) -> bool {
        self.tool == lookup.tool
            && self.digest == lookup.digest
            && self.profile.as_deref() == lookup.profile
            && self.answers.answers(lookup.client)
            && self.expires.is_none_or(|t| lookup.now < t)
            && self.scope.covers(lookup.args, lookup.paths)
    }
}

/// A saved approval as files hold it, old ones included: before approvals
/// were bound, an entry had no `profile` nor `answers`, and `client` for
/// one given by a client. Such an entry answers that client, or else the
/// user only, with no profile.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Stored {
    id: String,
    tool: String,
    plugin: String,
    digest: String,
    scope: Scope,
    #[serde(default)]
    profile: Option<String>,
    #[serde(default)]
    answers: Option<Answers>,
    #[serde(default)]
    client: Option<String>,
    who: String,
    from: String,
    when: u64,
    #[serde(default)]
    expires: Option<u64>,
}

impl From<Stored> for SavedApproval {
    fn from(s: Stored) -> SavedApproval {
        SavedApproval {
            answers: s
                .answers
                .unwrap_or_else(|| Answers::caller(s.client.as_deref())),
            id: s.id,
            tool: s.tool,
            plugin: s.plugin,
            digest: s.digest,
            scope: s.scope,
            profile: s.profile,
            who: s.who,
            from: s.from,
            when: s.when,
            expires: s.expires,
        }
    }
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
    /// The profile the call ran under.
    pub profile: Option<String>,
    /// Whom it answers.
    pub answers: Answers,
    /// Who approved it.
    pub who: String,
    /// Which prompt.
    pub from: String,
    /// When it stops applying, if ever.
    pub expires: Option<u64>,
}

/// A call, as [`Approvals::find`] looks for an approval of it.
///
/// ```
/// use serde_json::json;
/// use toolhost_policy::approvals::Lookup;
///
/// let args = json!({"expression": "1+1"});
/// let lookup = Lookup::new("calculate", "sha256:ab", &args)
///     .profile(Some("reviewer"))
///     .client(Some("token:3f5a"));
/// assert_eq!(lookup.client, Some("token:3f5a"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    /// The tool's exposed name.
    pub tool: &'a str,
    /// The digest of the plugin build (or MCP server) that would run it.
    pub digest: &'a str,
    /// Its arguments.
    pub args: &'a Value,
    /// How its path arguments resolve (see [`Scope::covers`]).
    pub paths: PathContext<'a>,
    /// The policy profile it runs under (none: the policy's defaults).
    pub profile: Option<&'a str>,
    /// Who calls (none: the user running the host; see [`Answers`]).
    pub client: Option<&'a str>,
    /// Now, in seconds since the Unix epoch.
    pub now: u64,
}

impl<'a> Lookup<'a> {
    /// A call of `tool` of the build `digest` with `args`, by the user, with
    /// no profile and no path base, now.
    pub fn new(tool: &'a str, digest: &'a str, args: &'a Value) -> Self {
        Lookup {
            tool,
            digest,
            args,
            paths: PathContext::default(),
            profile: None,
            client: None,
            now: now(),
        }
    }

    /// Sets what relative paths resolve against.
    #[must_use]
    pub fn path_base(mut self, base: Option<&'a Path>) -> Self {
        self.paths.base = base;
        self
    }

    /// Sets how the call's path arguments resolve, the argument a per-call
    /// grant opened included ([`PathContext`]).
    #[must_use]
    pub fn paths(mut self, paths: PathContext<'a>) -> Self {
        self.paths = paths;
        self
    }

    /// Sets the profile.
    #[must_use]
    pub fn profile(mut self, profile: Option<&'a str>) -> Self {
        self.profile = profile;
        self
    }

    /// Sets the caller.
    #[must_use]
    pub fn client(mut self, client: Option<&'a str>) -> Self {
        self.client = client;
        self
    }

    /// Sets the time (seconds since the Unix epoch).
    #[must_use]
    pub fn at(mut self, now: u64) -> Self {
        self.now = now;
        self
    }
}

/// Why the store could not be read or written, or an approval not saved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalsError {
    /// The file (or its lock file) could not be read or written.
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
    /// Another process held the store's lock for longer than
    /// [`LOCK_WAIT`].
    #[error("{}: another process holds the saved approvals' lock (waited {} s)", path.display(), LOCK_WAIT.as_secs())]
    Busy {
        /// The lock file.
        path: PathBuf,
    },
    /// The store holds [`MAX_APPROVALS`] already.
    #[error(
        "the saved approvals are full ({MAX_APPROVALS}): revoke some (`host approvals list`, `host approvals revoke ID`)"
    )]
    Full,
    /// The caller holds its quota of approvals already.
    #[error(
        "{answers} holds {max} saved approvals already, the most one caller may: revoke some (`host approvals list`, `host approvals revoke ID`)"
    )]
    Quota {
        /// Whom the approvals answer.
        answers: Answers,
        /// The quota.
        max: usize,
    },
    /// The store (a database that replicas share) cannot be reached, or
    /// refused the change.
    #[error("saved approvals in {store}: {message}")]
    Unavailable {
        /// Which store ([`Store::describe`]).
        store: String,
        /// Why, in words.
        message: String,
    },
    /// The scope is over [`MAX_ARGUMENT_BYTES`]: such an approval is for
    /// this call only.
    #[error("a scope over {MAX_ARGUMENT_BYTES} bytes is not saved")]
    TooLarge,
}

/// The most approvals a file may hold, and its largest size.
pub const MAX_APPROVALS: usize = 10_000;
const MAX_FILE_BYTES: u64 = 8 << 20;
/// The most approvals that answer one caller ([`Answers`]), by default:
/// one client answering its own asks cannot fill the store.
pub const DEFAULT_PER_CALLER: usize = 1_000;
/// The largest scope (its arguments, directory or host, as JSON) an
/// approval keeps (bigger ones are for this call only, i.e. not saved).
pub const MAX_ARGUMENT_BYTES: usize = 64 << 10;
/// How long a change waits for another process to release the store's
/// lock before it gives up ([`ApprovalsError::Busy`]).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The saved approvals as a file holds them (and a database's document).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct File {
    /// Every approval, oldest first.
    #[serde(default)]
    pub approvals: Vec<SavedApproval>,
}

/// The saved approvals of one host (a file next to its lock file), shared
/// by every process that opens the same file (see `approvals/disk.rs`), or
/// of replicas that share a [`Store`].
#[derive(Debug)]
pub struct Approvals {
    store: Option<std::sync::Arc<dyn Store>>,
    /// How long a new approval lasts at most (seconds), if bounded.
    lasting: Option<u64>,
    /// The most approvals one caller may hold.
    per_caller: usize,
    cache: Mutex<Cache>,
}

/// The entries as last read, and the stamp of the file they were read from.
///
/// Its lock is held only to copy or replace these two (the entries are
/// shared, so a copy costs a reference count), never while the store is
/// asked anything: a store that is slow to answer holds up the caller
/// that asked it, never another lookup.
#[derive(Debug, Default)]
struct Cache {
    entries: std::sync::Arc<Vec<SavedApproval>>,
    stamp: Option<Stamp>,
}

/// Seconds since the Unix epoch, now.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Approvals {
    /// The store in `path` (a missing file is an empty store). Its lock
    /// file is `path` with `.lock` added.
    pub fn open(path: PathBuf) -> Approvals {
        Approvals::with_store(std::sync::Arc::new(disk::Disk::new(path)))
    }

    /// The store `store` keeps (e.g. a database that replicas share).
    pub fn with_store(store: std::sync::Arc<dyn Store>) -> Approvals {
        Approvals {
            store: Some(store),
            lasting: None,
            per_caller: DEFAULT_PER_CALLER,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// A store that lives in memory only (an embedder without a file).
    pub fn in_memory() -> Approvals {
        Approvals {
            store: None,
            lasting: None,
            per_caller: DEFAULT_PER_CALLER,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// The same store, where every approval saved from now on lasts at
    /// most `bound` (an operator's rule: "allow always" means for 30 days
    /// here). An approval given with an earlier expiry keeps it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolhost_policy::approvals::{Answers, Approvals, NewApproval, Scope, now};
    ///
    /// let store = Approvals::in_memory().lasting(Some(Duration::from_secs(3600)));
    /// store.save(NewApproval {
    ///     tool: "read_file".into(),
    ///     plugin: "fs".into(),
    ///     digest: "sha256:ab".into(),
    ///     scope: Scope::AnyArguments,
    ///     profile: None,
    ///     answers: Answers::User,
    ///     who: "ana".into(),
    ///     from: "terminal".into(),
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

    /// The same store, where one caller ([`Answers`]) may hold at most
    /// `max` approvals ([`DEFAULT_PER_CALLER`] unless set); one more is
    /// [`ApprovalsError::Quota`].
    #[must_use]
    pub fn per_caller(mut self, max: usize) -> Approvals {
        self.per_caller = max;
        self
    }

    /// Where the store is kept, if on disk.
    pub fn path(&self) -> Option<&Path> {
        self.store.as_deref().and_then(Store::path)
    }

    /// Where the store is kept, for messages (`in memory` when nowhere).
    pub fn describe(&self) -> String {
        self.store
            .as_deref()
            .map_or_else(|| "memory".to_owned(), Store::describe)
    }

    /// Every saved approval, oldest first. It never waits for a store
    /// that is out of reach (see [`Store::read`]).
    pub fn list(&self) -> Result<Vec<SavedApproval>, ApprovalsError> {
        Ok(self.current()?.to_vec())
    }

    /// The id of an approval that covers the call `lookup` describes, if
    /// one does: the same tool, plugin build, profile and caller (see
    /// [`Answers`]), not expired, and a scope that covers its arguments.
    /// A file that cannot be read answers none (and logs why): the call is
    /// asked.
    ///
    /// It reads the file again only when another process changed it since
    /// (see `approvals/disk.rs`); a call the policy does not ask about
    /// never gets here. It never waits for a store that is out of reach: a
    /// database that replicas share answers from what it last read, and
    /// at once with none while that is not known to be current (see
    /// [`Store::read`]); safe to call from an async task.
    pub fn find(&self, lookup: &Lookup<'_>) -> Option<String> {
        match self.current() {
            Ok(entries) => entries
                .iter()
                .find(|a| a.covers(lookup))
                .map(|a| a.id.clone()),
            Err(e) => {
                tracing::warn!("saved approvals not consulted: {e}");
                None
            }
        }
    }

    /// Saves `new` and returns its id. Approvals past their expiry are
    /// dropped on the way.
    ///
    /// A change waits for the store, a bounded time (another process's
    /// lock on the file, a database's answer: seconds at most): from an
    /// async task, call it on a blocking thread
    /// (`tokio::task::spawn_blocking`), as the runtime does. The same
    /// holds for [`revoke`](Self::revoke) and [`clear`](Self::clear).
    pub fn save(&self, new: NewApproval) -> Result<String, ApprovalsError> {
        // Every scope holds text from the call (arguments, a path, a
        // host): bounded alike.
        if serde_json::to_string(&new.scope).map_or(usize::MAX, |t| t.len()) > MAX_ARGUMENT_BYTES {
            return Err(ApprovalsError::TooLarge);
        }
        let when = now();
        let bounded = self.lasting.map(|secs| when.saturating_add(secs));
        let expires = match (new.expires, bounded) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let per_caller = self.per_caller;
        self.change(|entries| {
            entries.retain(|a| a.expires.is_none_or(|t| when < t));
            if entries.len() >= MAX_APPROVALS {
                return Err(ApprovalsError::Full);
            }
            if entries.iter().filter(|a| a.answers == new.answers).count() >= per_caller {
                return Err(ApprovalsError::Quota {
                    answers: new.answers.clone(),
                    max: per_caller,
                });
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
                tool: new.tool.clone(),
                plugin: new.plugin.clone(),
                digest: new.digest.clone(),
                scope: new.scope.clone(),
                profile: new.profile.clone(),
                answers: new.answers.clone(),
                who: new.who.clone(),
                from: new.from.clone(),
                when,
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

    /// The copy's lock (`parking_lot`'s, which a panic does not poison:
    /// a panic while it was held leaves whole entries).
    fn lock(&self) -> parking_lot::MutexGuard<'_, Cache> {
        self.cache.lock()
    }

    /// Applies `f` to the entries, read fresh under the store's lock (or
    /// in its transaction), and writes them back when `f` changed them.
    /// `f` may run more than once (see [`Store::change`]). The cache's
    /// lock is not held meanwhile: the store orders changes itself.
    fn change<T>(
        &self,
        mut f: impl FnMut(&mut Vec<SavedApproval>) -> Result<T, ApprovalsError>,
    ) -> Result<T, ApprovalsError> {
        let Some(store) = &self.store else {
            // In memory: the cache is the store, changed under its lock
            // (no I/O), and kept as it was when `f` fails.
            let mut cache = self.lock();
            let mut entries = cache.entries.to_vec();
            let out = f(&mut entries)?;
            cache.entries = std::sync::Arc::new(entries);
            return Ok(out);
        };
        let mut out = None;
        let (entries, stamp) = store.change(&mut |entries| {
            out = Some(f(entries)?);
            Ok(())
        })?;
        self.keep(std::sync::Arc::new(entries), stamp);
        out.ok_or_else(|| ApprovalsError::Unavailable {
            store: store.describe(),
            message: "the store kept no change".to_owned(),
        })
    }

    /// The entries now: the copy, when the store says they did not change
    /// since it was read, else read again (outside the cache's lock).
    ///
    /// Two lookups reading at once may keep their copies in either order:
    /// an older copy kept last has an older stamp, which the store no
    /// longer calls unchanged, so the next lookup reads again; no lookup
    /// ever answers from a copy the store did not vouch for.
    fn current(&self) -> Result<std::sync::Arc<Vec<SavedApproval>>, ApprovalsError> {
        let (entries, stamp) = {
            let cache = self.lock();
            (std::sync::Arc::clone(&cache.entries), cache.stamp)
        };
        let Some(store) = &self.store else {
            return Ok(entries);
        };
        if stamp.is_some_and(|seen| store.unchanged_since(&seen)) {
            return Ok(entries);
        }
        let (entries, stamp) = store.read()?;
        let entries = std::sync::Arc::new(entries);
        self.keep(std::sync::Arc::clone(&entries), stamp);
        Ok(entries)
    }

    /// Keeps `entries`, read or written at `stamp`, as the copy.
    fn keep(&self, entries: std::sync::Arc<Vec<SavedApproval>>, stamp: Stamp) {
        let mut cache = self.lock();
        cache.entries = entries;
        cache.stamp = Some(stamp);
    }
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
            profile: None,
            answers: Answers::User,
            who: "test".into(),
            from: "terminal".into(),
            expires,
        }
    }

    /// Whether `store` has an approval of `tool` (build `sha256:1`) with
    /// `args`, for the user, with no profile, at time 0.
    fn found(store: &Approvals, tool: &str, args: &Value) -> bool {
        store
            .find(&Lookup::new(tool, "sha256:1", args).at(0))
            .is_some()
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
        assert!(found(&store, "read_file", &reordered));
        for other in [
            json!({"a": 1}),
            json!({"a": 1, "b": [2], "c": 0}),
            json!(null),
        ] {
            assert!(!found(&store, "read_file", &other), "{other}");
        }
        assert!(!found(&store, "write_file", &reordered));
    }

    #[test]
    fn an_approval_answers_only_its_caller_under_its_profile() {
        let store = Approvals::in_memory();
        let args = json!({});
        let call = |tool: &'static str| Lookup::new(tool, "sha256:1", &args).at(0);
        // Given by a client: that client's calls only.
        let mut by_client = new("t", Scope::AnyArguments, None);
        by_client.answers = Answers::Client("token:aa".into());
        store.save(by_client).unwrap();
        assert!(store.find(&call("t").client(Some("token:aa"))).is_some());
        assert!(store.find(&call("t").client(Some("token:bb"))).is_none());
        assert!(store.find(&call("t")).is_none(), "not the user's");
        // Given at the terminal: the user's calls only, never a client's.
        store.save(new("u", Scope::AnyArguments, None)).unwrap();
        assert!(store.find(&call("u")).is_some());
        assert!(store.find(&call("u").client(Some("token:bb"))).is_none());
        assert!(store.find(&call("u").client(Some("mcp-stdio"))).is_none());
        // Given by the operator: every caller.
        let mut by_operator = new("v", Scope::AnyArguments, None);
        by_operator.answers = Answers::Everyone;
        by_operator.profile = Some("reviewer".into());
        store.save(by_operator).unwrap();
        for client in [None, Some("token:aa"), Some("token:cc")] {
            let under = call("v").profile(Some("reviewer")).client(client);
            assert!(store.find(&under).is_some(), "{client:?}");
        }
        // Under another profile, or none: asked.
        assert!(store.find(&call("v")).is_none());
        assert!(store.find(&call("v").profile(Some("admin"))).is_none());
        assert!(store.find(&call("u").profile(Some("reviewer"))).is_none());
    }

    #[test]
    fn an_approval_from_a_file_before_bindings_answers_the_user_with_no_profile_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        // As a host before the bindings wrote it: no profile, no
        // `answers`; the second one came from a client.
        std::fs::write(
            &path,
            r#"{"approvals": [
                {"id": "1", "tool": "t", "plugin": "p", "digest": "sha256:1",
                 "scope": {"kind": "any-arguments"}, "who": "ana", "from": "terminal", "when": 5},
                {"id": "2", "tool": "u", "plugin": "p", "digest": "sha256:1",
                 "scope": {"kind": "any-arguments"}, "who": "token:aa",
                 "from": "mcp-elicitation", "client": "token:aa", "when": 6}
            ]}"#,
        )
        .unwrap();
        let store = Approvals::open(path.clone());
        let list = store.list().unwrap();
        assert_eq!(list[0].answers, Answers::User);
        assert_eq!(list[0].profile, None);
        assert_eq!(list[0].binding(), "the user, with no profile");
        assert_eq!(list[1].answers, Answers::Client("token:aa".into()));
        let args = json!({});
        let call = |tool: &'static str| Lookup::new(tool, "sha256:1", &args).at(0);
        assert!(store.find(&call("t")).is_some());
        assert!(store.find(&call("t").client(Some("token:aa"))).is_none());
        assert!(store.find(&call("t").profile(Some("reviewer"))).is_none());
        assert!(store.find(&call("u").client(Some("token:aa"))).is_some());
        assert!(store.find(&call("u").client(Some("token:bb"))).is_none());
        // Written back in the new form.
        store.save(new("w", Scope::AnyArguments, None)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""answers": "user""#), "{text}");
        assert_eq!(Approvals::open(path).list().unwrap(), store.list().unwrap());
    }

    #[test]
    fn one_caller_holds_at_most_its_quota_and_others_still_save() {
        let store = Approvals::in_memory().per_caller(2);
        let from = |client: &str, tool: &str| NewApproval {
            answers: Answers::Client(client.into()),
            ..new(tool, Scope::AnyArguments, None)
        };
        store.save(from("token:aa", "t1")).unwrap();
        store.save(from("token:aa", "t2")).unwrap();
        let over = store.save(from("token:aa", "t3")).unwrap_err();
        assert!(
            matches!(&over, ApprovalsError::Quota { answers, max: 2 } if *answers == Answers::Client("token:aa".into())),
            "{over}"
        );
        assert!(
            over.to_string().contains("client token:aa holds 2"),
            "{over}"
        );
        store.save(from("token:bb", "t1")).unwrap();
        store.save(new("t1", Scope::AnyArguments, None)).unwrap();
        assert_eq!(store.list().unwrap().len(), 4);
        // An expired approval makes room.
        let dir = tempfile::tempdir().unwrap();
        let file = Approvals::open(dir.path().join("a.json")).per_caller(1);
        file.save(new("old", Scope::AnyArguments, Some(1))).unwrap();
        file.save(new("new", Scope::AnyArguments, None)).unwrap();
        let left: Vec<String> = file.list().unwrap().into_iter().map(|a| a.tool).collect();
        assert_eq!(left, ["new"]);
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
        let within = |args: &Value, base: Option<&Path>| {
            store
                .find(
                    &Lookup::new("read_file", "sha256:1", args)
                        .path_base(base)
                        .at(0),
                )
                .is_some()
        };
        let covered = |path: &str| within(&json!({ "path": path }), Some(&base));
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
        assert!(!within(&json!({"path": "notes/a.txt"}), None));
        for args in [json!({}), json!({"path": 7})] {
            assert!(!within(&args, Some(&base)));
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
        let covered = |url: &str| found(&store, "fetch", &json!({ "url": url }));
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
                profile: a.profile,
                answers: a.answers,
                who: a.who,
                from: a.from,
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
        let later = now() + 50;
        store
            .save(new("t", Scope::AnyArguments, Some(later)))
            .unwrap();
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
        assert_eq!(expires[0], later);
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
            .save(new("t", Scope::AnyArguments, Some(u64::MAX - 1)))
            .unwrap();
        let args = json!({});
        let at = |t: u64| store.find(&Lookup::new("t", "sha256:1", &args).at(t));
        assert!(at(u64::MAX - 2).is_some());
        assert!(at(u64::MAX - 1).is_none());
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
        assert!(!found(&store, "u", &json!({})));
    }

    #[test]
    fn a_revocation_by_another_store_is_seen_even_when_the_file_keeps_its_times() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let server = Approvals::open(path.clone());
        let id = server.save(new("t", Scope::AnyArguments, None)).unwrap();
        let args = json!({});
        assert!(found(&server, "t", &args), "cached now");
        let times = std::fs::metadata(&path).unwrap();
        // `host approvals revoke` in another process, within the same
        // tick of the file system's clock: the file's times stay.
        let cli = Approvals::open(path.clone());
        assert!(cli.revoke(&id).unwrap());
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_times(
            std::fs::FileTimes::new()
                .set_modified(times.modified().unwrap())
                .set_accessed(times.accessed().unwrap()),
        )
        .unwrap();
        drop(file);
        assert!(
            !found(&server, "t", &args),
            "a revoked approval is not honoured"
        );
    }

    #[test]
    fn two_stores_saving_at_once_lose_nothing_and_never_share_an_id() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        const EACH: usize = 40;
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    // A store of its own: a process of its own, as far as
                    // the file and its lock can tell.
                    let store = Approvals::open(path);
                    for i in 0..EACH {
                        store
                            .save(new(&format!("w{w}-{i}"), Scope::AnyArguments, None))
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let all = Approvals::open(path).list().unwrap();
        assert_eq!(all.len(), 2 * EACH, "every save is kept");
        let mut ids: Vec<&str> = all.iter().map(|a| a.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 2 * EACH, "no id twice");
    }

    #[test]
    fn a_revocation_racing_saves_in_another_store_is_never_written_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        let server = Approvals::open(path.clone());
        let ids: Vec<String> = (0..20)
            .map(|i| {
                server
                    .save(new(&format!("t{i}"), Scope::AnyArguments, None))
                    .unwrap()
            })
            .collect();
        let saving = {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = Approvals::open(path);
                for i in 0..40 {
                    store
                        .save(new(&format!("s{i}"), Scope::AnyArguments, None))
                        .unwrap();
                }
            })
        };
        let cli = Approvals::open(path.clone());
        for id in &ids {
            assert!(cli.revoke(id).unwrap(), "{id}");
        }
        saving.join().unwrap();
        let left = Approvals::open(path).list().unwrap();
        assert!(left.iter().all(|a| a.tool.starts_with('s')), "{left:?}");
        assert_eq!(left.len(), 40);
    }

    #[test]
    fn a_broken_or_huge_file_is_an_error_and_finds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, "{not json").unwrap();
        let store = Approvals::open(path.clone());
        assert!(matches!(store.list(), Err(ApprovalsError::Invalid { .. })));
        assert!(!found(&store, "t", &json!({})));
        assert!(store.save(new("t", Scope::AnyArguments, None)).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{not json");
        let big = json!({"x": "y".repeat(MAX_ARGUMENT_BYTES)});
        let mem = Approvals::in_memory();
        assert!(matches!(
            mem.save(new("t", Scope::Arguments(big), None)),
            Err(ApprovalsError::TooLarge)
        ));
        // A directory from a model's path is bounded the same way.
        let deep = Scope::Directory {
            argument: "/path".into(),
            directory: PathBuf::from("/d").join("x".repeat(MAX_ARGUMENT_BYTES)),
        };
        assert!(mem.save(new("t", deep, None)).is_err());
        assert!(mem.list().unwrap().is_empty());
    }

    /// A store whose changes wait until the test lets them go on, as a
    /// database that is slow to answer.
    #[derive(Debug)]
    struct Slow {
        entries: Mutex<(Vec<SavedApproval>, u64)>,
        entered: std::sync::mpsc::SyncSender<()>,
        go: Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Store for Slow {
        fn describe(&self) -> String {
            "slow".into()
        }
        fn unchanged_since(&self, seen: &Stamp) -> bool {
            seen.as_version() == Some(self.entries.lock().1)
        }
        fn read(&self) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
            let (entries, version) = &*self.entries.lock();
            Ok((entries.clone(), Stamp::version(*version)))
        }
        fn change(&self, f: Change<'_>) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
            self.entered.send(()).unwrap();
            self.go.lock().recv().unwrap();
            let (entries, version) = &mut *self.entries.lock();
            f(entries)?;
            *version += 1;
            Ok((entries.clone(), Stamp::version(*version)))
        }
    }

    #[test]
    fn a_change_waiting_for_its_store_holds_up_no_lookup() {
        let (entered, on_entry) = std::sync::mpsc::sync_channel(1);
        let (go, gone) = std::sync::mpsc::channel();
        let store = std::sync::Arc::new(Approvals::with_store(std::sync::Arc::new(Slow {
            entries: Mutex::new((Vec::new(), 1)),
            entered,
            go: Mutex::new(gone),
        })));
        assert!(!found(&store, "t", &json!({})), "read once: cached");
        let saving = {
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || store.save(new("t", Scope::AnyArguments, None)))
        };
        on_entry.recv().unwrap();
        // The save waits inside the store: a lookup and a listing on
        // another thread answer meanwhile, from the copy.
        let (answered, answer) = std::sync::mpsc::channel();
        {
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                let _ = answered.send((
                    found(&store, "t", &json!({})),
                    store.list().ok().map(|l| l.len()),
                ));
            });
        }
        // (A guard against a test that hangs, not a measure of speed.)
        let looked_up = answer.recv_timeout(std::time::Duration::from_secs(60));
        go.send(()).unwrap();
        assert_eq!(
            looked_up.expect("a lookup waited for a change in another thread"),
            (false, Some(0))
        );
        saving.join().unwrap().unwrap();
        assert!(found(&store, "t", &json!({})), "the change is kept");
    }
}
