//! Where the operator's queue is kept: [`QueueStore`].
//!
//! A call waits in the process that holds it (its caller's connection is
//! there, and so is the reply the answer goes to); the store is where the
//! other replicas of one gate see it and answer it. Two kinds:
//!
//! - [`MemoryQueue`] (the default): this process only. Every ask is held
//!   here, the console lists only those, and nothing is shared.
//! - `toolhost_state::PostgresQueue`: replicas behind a load balancer
//!   share one PostgreSQL database; an ask held on any replica is listed
//!   on every replica's console, and an answer given on any of them
//!   reaches the replica that holds the call.
//!
//! A store hands answers given elsewhere to the queue through the
//! [`Inbox`] it is [attached](QueueStore::attach) to. What it lists from
//! elsewhere is bounded by its capacity, each ask by [`MAX_ASK_BYTES`].
//!
//! ```
//! use std::sync::Arc;
//! use toolhost_runtime::operator::{MemoryQueue, OperatorQueue, QueueSettings};
//!
//! // What `OperatorQueue::new` does: this process only.
//! let queue = OperatorQueue::with_store(QueueSettings::default(), Arc::new(MemoryQueue));
//! assert!(queue.trouble().is_none());
//! ```

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;

use super::{Answer, Inner, Pending, QueueError};

/// The largest ask a store keeps, as JSON: a question's parts are each
/// bounded where it is made (at most 32 arguments of 2,000 characters,
/// a 2,000-character result, 8 reasons, 4 scopes, names of 200), so a
/// real question is far below this; anything over it is outside input
/// and refused.
pub const MAX_ASK_BYTES: usize = 512 << 10;

/// A store's future (its answers come from elsewhere).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why an ask could not be shown on the other replicas.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The shared queue holds its capacity already: the ask is denied at
    /// once, as when this replica's own queue is full.
    #[error(
        "the operator's approvals queue is full ({0} calls wait across the replicas); try again later"
    )]
    Full(usize),
    /// The ask is over [`MAX_ASK_BYTES`] as JSON.
    #[error("an ask of {0} bytes is over the {MAX_ASK_BYTES} a shared queue keeps")]
    TooLarge(usize),
    /// The store cannot be reached: the ask waits on this replica only,
    /// answerable here.
    #[error("the shared queue ({store}) is not reachable: {message}")]
    Unreachable {
        /// Which store (never a password).
        store: String,
        /// Why.
        message: String,
    },
}

/// Where the operator's queue is kept (see the module docs).
///
/// Ids: a replica numbers its asks from [`QueueStore::first_id`] up, so
/// replicas sharing a store never give one id twice.
pub trait QueueStore: Send + Sync + fmt::Debug {
    /// Where, for messages (never a password).
    fn describe(&self) -> String;

    /// The first id of this replica's asks (1 for a store of one
    /// process; a shared store gives each replica a range of its own).
    fn first_id(&self) -> u64 {
        1
    }

    /// Called once, by [`OperatorQueue::with_store`](super::OperatorQueue::with_store):
    /// where answers given elsewhere, and changes made elsewhere, go.
    fn attach(&self, inbox: Inbox);

    /// Ask `ask`, held here, is waiting: show it to the other replicas.
    /// [`StoreError::Full`] denies it; any other error leaves it waiting
    /// here only.
    fn hold<'a>(&'a self, ask: &'a Pending) -> StoreFuture<'a, Result<(), StoreError>>;

    /// Ask `id`, held here, no longer waits (answered, timed out, its
    /// caller gone): take it back. Never waits.
    fn release(&self, id: u64);

    /// The asks held by other replicas, as last seen, oldest first, each
    /// [`Place::Elsewhere`](super::Place::Elsewhere) or
    /// [`Place::Gone`](super::Place::Gone). Never waits.
    fn elsewhere(&self) -> Vec<Pending>;

    /// Answers ask `id`, held by another replica.
    fn answer<'a>(&'a self, id: u64, answer: &'a Answer)
    -> StoreFuture<'a, Result<(), QueueError>>;

    /// Why the store cannot be reached now (`None`: it can, or there is
    /// nothing to reach). The console shows it.
    fn trouble(&self) -> Option<String>;
}

/// The operator's queue in this process only: the default store. It shows
/// nothing from elsewhere and answers nothing held elsewhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryQueue;

impl QueueStore for MemoryQueue {
    fn describe(&self) -> String {
        "this process's memory".to_owned()
    }

    fn attach(&self, _: Inbox) {}

    fn hold<'a>(&'a self, _: &'a Pending) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }

    fn release(&self, _: u64) {}

    fn elsewhere(&self) -> Vec<Pending> {
        Vec::new()
    }

    fn answer<'a>(&'a self, id: u64, _: &'a Answer) -> StoreFuture<'a, Result<(), QueueError>> {
        Box::pin(async move { Err(QueueError::NotWaiting(id)) })
    }

    fn trouble(&self) -> Option<String> {
        None
    }
}

/// Where a store delivers what happened elsewhere: an answer to an ask
/// held here, or a change the console should show. Holds the queue
/// weakly (a store outliving its queue delivers to nobody).
#[derive(Clone)]
pub struct Inbox {
    pub(super) queue: Weak<Inner>,
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

impl Inbox {
    /// An answer given on another replica to ask `id`, held here: the
    /// waiting call has it. The same checks as an answer given here
    /// ("allow always" only where offered).
    pub fn answer(&self, id: u64, answer: Answer) -> Result<(), QueueError> {
        let Some(inner) = self.queue.upgrade() else {
            return Err(QueueError::NotWaiting(id));
        };
        super::deliver(&inner, id, answer)
    }

    /// Something changed elsewhere (an ask added, answered, gone): the
    /// consoles refresh.
    pub fn changed(&self) {
        if let Some(inner) = self.queue.upgrade() {
            let _ = inner.changed.send(());
        }
    }
}
