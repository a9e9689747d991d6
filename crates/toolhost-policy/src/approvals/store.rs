//! Where saved approvals are kept: the [`Store`] trait. One machine keeps
//! them in a file (`disk.rs`, the default); replicas of one gate keep them
//! in a database they share (`toolhost-state`'s PostgreSQL store), so an
//! approval saved or revoked through one replica holds on every other.
//!
//! [`Approvals`](super::Approvals) stays in front of every store: it keeps
//! the bounds, the quota per caller, the ids and the expiries, and a copy
//! of the entries that it reads again only when the store says they
//! changed ([`Store::unchanged_since`], asked on every lookup, so it must
//! be cheap).

use std::path::Path;

use super::{ApprovalsError, SavedApproval};

/// What a copy of the entries was read at: the store tells by it whether
/// they changed since, without reading them.
///
/// ```
/// use toolhost_policy::approvals::Stamp;
///
/// assert_eq!(Stamp::version(7).as_version(), Some(7));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp(pub(super) Kind);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// The file's (see `disk.rs`).
    Disk(FileStamp),
    /// A version number that every change raises (a database row's).
    Version(u64),
}

/// What a copy of the file was read at (see `disk.rs`'s module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileStamp {
    /// The lock file's generation (none: no lock file, or not a number).
    pub(super) generation: Option<u64>,
    /// The file's identity (none: no file).
    pub(super) file: Option<FileIdentity>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileIdentity {
    pub(super) dev: u64,
    pub(super) ino: u64,
    pub(super) len: u64,
    pub(super) modified: (i64, i64),
    pub(super) changed: (i64, i64),
}

impl Stamp {
    /// A stamp that is a version number, raised by every change.
    pub fn version(version: u64) -> Stamp {
        Stamp(Kind::Version(version))
    }

    /// The version number of a stamp made by [`Stamp::version`].
    pub fn as_version(&self) -> Option<u64> {
        match self.0 {
            Kind::Version(v) => Some(v),
            Kind::Disk(_) => None,
        }
    }
}

/// The function [`Store::change`] applies to the entries.
pub type Change<'a> = &'a mut dyn FnMut(&mut Vec<SavedApproval>) -> Result<(), ApprovalsError>;

/// A place that keeps the saved approvals of a gate: every process that
/// opens the same place sees the same approvals.
///
/// A store that cannot be reached answers with an error
/// ([`ApprovalsError::Unavailable`]): the lookup that needed it finds no
/// approval (the call is asked, never allowed), and a save or a revocation
/// fails with the reason. Nothing else of the gate depends on it.
///
/// **Lookups never wait.** [`unchanged_since`](Store::unchanged_since)
/// and [`read`](Store::read) run on every lookup, on whatever thread asks,
/// an async runtime's workers included: they may read a local file, never
/// wait for a network. A store kept elsewhere keeps a copy that its own
/// thread brings up to date, answers from it, and answers with an error at
/// once while it cannot tell that the copy is current. Only
/// [`change`](Store::change) may wait for the store (a bounded time): an
/// async caller runs it off its workers.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Where it is, for messages: a file's path, a database and the name
    /// of the store in it.
    fn describe(&self) -> String;

    /// The file, for a store that is one.
    fn path(&self) -> Option<&Path> {
        None
    }

    /// Whether the entries are still as they were at `seen`. Asked on
    /// every lookup: cheap, and `false` when it cannot tell.
    fn unchanged_since(&self, seen: &Stamp) -> bool;

    /// The entries, and the stamp they were read at. It does not wait
    /// (see the trait's docs): a store that cannot answer now says why.
    fn read(&self) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError>;

    /// Applies `f` to the entries as the store holds them now and keeps
    /// what it leaves, atomically: two changes, from two processes or two
    /// machines, never lose one another. `f` may be called more than once
    /// (a store that tries again after a concurrent change), each time on
    /// the entries as they are then; when it fails, nothing is written.
    /// Returns the entries after the change and their stamp. It may wait
    /// for the store, a bounded time.
    fn change(&self, f: Change<'_>) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError>;
}
