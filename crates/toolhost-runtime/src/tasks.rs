//! Where calls that outlive their request are kept when replicas share
//! them: [`TaskStore`].
//!
//! A call that runs as a task (MCP's Tasks extension, served by
//! `toolhost_mcp`) runs in the process that took it, its *holder*. With a
//! shared store, the task is also a record every replica reads: a caller
//! may poll, answer or cancel it through any of them, and a task whose
//! holder stopped is taken over by another replica, which runs it again
//! only when its tool says it is idempotent, and otherwise ends it as
//! failed, saying why. A task is never run twice at once: taking one over
//! is one statement that only one replica wins.
//!
//! Two kinds:
//!
//! - none (the default): a server's tasks live in its process, and end
//!   with it.
//! - `toolhost_state::PostgresTasks`: replicas behind a load balancer
//!   share one PostgreSQL database.
//!
//! A store tells its holder what happened elsewhere (answers, a cancel, a
//! task taken over) through the [`TaskEvents`] it is
//! [attached](TaskStore::attach) to. Records are bounded:
//! [`MAX_TASK_BYTES`] each, as JSON.
//!
//! The operator sees a server's tasks through a [`TaskBoard`] (the
//! console lists them and stops one).
//!
//! ```
//! use toolhost_runtime::tasks::{TaskRecord, TaskState};
//!
//! let record = TaskRecord::new("t-1", "ana", "build", serde_json::json!({"target": "all"}));
//! assert_eq!(record.state, TaskState::Working);
//! assert!(!record.idempotent);
//! assert_eq!(record.asks, toolhost_runtime::policy::AskRoute::Deny);
//! ```

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

pub use crate::operator::StoreFuture;

/// The largest record a store keeps, as JSON (its arguments, its status
/// and its result together); a task whose result is larger ends as failed
/// in the store, saying so.
pub const MAX_TASK_BYTES: usize = 8 << 20;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskState {
    /// Running.
    Working,
    /// Waiting for its caller's answers.
    InputRequired,
    /// Ended with a result (the tool's answer, which may be an error).
    Completed,
    /// Ended with an error that is not the tool's answer.
    Failed,
    /// Stopped when asked.
    Cancelled,
}

impl TaskState {
    /// Its name as MCP's task status: `working`, `input_required`,
    /// `completed`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Working => "working",
            TaskState::InputRequired => "input_required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled
        )
    }
}

/// One task as a store keeps it.
#[derive(Debug, Clone)]
pub struct TaskRecord {
    /// Its id, as its caller knows it.
    pub id: String,
    /// The caller whose it is (its identity, as the audit names it).
    pub owner: String,
    /// The tool it calls.
    pub tool: String,
    /// The policy profile it runs under.
    pub agent: Option<String>,
    /// Its arguments (to run it again on another replica).
    pub args: Value,
    /// Whether its tool says running it twice does no harm: only such a
    /// task is run again when its holder stops.
    pub idempotent: bool,
    /// Who answers its questions (its caller, the operator, nobody), as
    /// its request said: a task run again on another replica asks them,
    /// and no one else.
    pub asks: crate::policy::AskRoute,
    /// How long it is kept after it was made.
    pub ttl: Duration,
    /// Where it stands.
    pub state: TaskState,
    /// What the protocol shows of it (`tasks/get`'s answer), as JSON.
    pub detail: Value,
}

impl TaskRecord {
    /// A task just made: working, kept an hour, not idempotent, asking no
    /// one.
    pub fn new(id: &str, owner: &str, tool: &str, args: Value) -> TaskRecord {
        TaskRecord {
            id: id.to_owned(),
            owner: owner.to_owned(),
            tool: tool.to_owned(),
            agent: None,
            args,
            idempotent: false,
            asks: crate::policy::AskRoute::Deny,
            ttl: Duration::from_secs(3600),
            state: TaskState::Working,
            detail: Value::Null,
        }
    }
}

/// What a store tells the holder of a task about it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TaskEvent {
    /// Its caller answered, through another replica.
    Answered {
        /// The task's id.
        id: String,
        /// The answers, by the key they were asked under.
        responses: Map<String, Value>,
    },
    /// Its caller asked for it to stop, through another replica.
    CancelAsked {
        /// The task's id.
        id: String,
    },
    /// A task whose holder stopped, now held here: run it again
    /// ([`TaskRecord::idempotent`]) or end it as failed.
    TakenOver(TaskRecord),
}

/// Where a store's events go (an unbounded channel: each event is small,
/// and a store sends at most a bounded number per poll).
pub type TaskEvents = tokio::sync::mpsc::UnboundedSender<TaskEvent>;

/// Why a store could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskStoreError {
    /// The caller has as many unfinished tasks as it may (across every
    /// replica).
    #[error(
        "too many unfinished tasks (at most {0} for one caller); wait for one to finish or cancel one"
    )]
    TooMany(usize),
    /// The caller's ended tasks kept take as many bytes as they may
    /// (across every replica): a new one waits until older ones are let
    /// go.
    #[error(
        "the results of your earlier tasks take {bytes} bytes across the replicas, and at most {limit} are kept for one caller; wait for older ones to be let go"
    )]
    TooMuchKept {
        /// What they take.
        bytes: u64,
        /// What they may.
        limit: usize,
    },
    /// The record is over [`MAX_TASK_BYTES`] as JSON.
    #[error("a task of {0} bytes is over the {MAX_TASK_BYTES} a shared store keeps")]
    TooLarge(usize),
    /// The store cannot be reached now.
    #[error("the shared task store ({store}) is not reachable: {message}")]
    Unreachable {
        /// Which store (never a password).
        store: String,
        /// Why.
        message: String,
    },
}

/// Where tasks are kept when replicas share them (see the module docs).
pub trait TaskStore: Send + Sync + fmt::Debug {
    /// Where, for messages (never a password).
    fn describe(&self) -> String;

    /// Called once: where events about the tasks held here go.
    fn attach(&self, events: TaskEvents);

    /// A task made here, held here: refused past the `bounds` of its
    /// owner across the replicas (unfinished tasks, bytes of ended ones
    /// kept). The task is readable through every replica once this
    /// returns.
    fn create<'a>(
        &'a self,
        record: &'a TaskRecord,
        bounds: TaskBounds,
    ) -> StoreFuture<'a, Result<(), TaskStoreError>>;

    /// The task `id`, held here, now stands at `state`, shown as
    /// `detail`. Never waits: saved in order, in the background; a task
    /// this replica no longer holds (another took it over) is left as it
    /// is.
    fn save(&self, id: &str, state: TaskState, detail: Value);

    /// The task `id`, wherever it is held (`None`: no such task, or it
    /// was let go).
    fn load<'a>(
        &'a self,
        id: &'a str,
    ) -> StoreFuture<'a, Result<Option<TaskRecord>, TaskStoreError>>;

    /// Answers to the task `id`, held by another replica (delivered to it
    /// as [`TaskEvent::Answered`]).
    fn answer<'a>(
        &'a self,
        id: &'a str,
        responses: Map<String, Value>,
    ) -> StoreFuture<'a, Result<(), TaskStoreError>>;

    /// Asks the task `id`, held by another replica, to stop (delivered to
    /// it as [`TaskEvent::CancelAsked`]).
    fn cancel<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<(), TaskStoreError>>;

    /// The tasks of every replica, newest first, at most `limit`: what the
    /// operator's console lists ([`TaskSummary::replica`] names the
    /// holder of another replica's).
    fn list(&self, limit: usize) -> StoreFuture<'_, Result<Vec<TaskSummary>, TaskStoreError>>;
}

/// What one owner may have in a store across the replicas, checked as a
/// task of theirs is made ([`TaskStore::create`]).
///
/// ```
/// use toolhost_runtime::tasks::TaskBounds;
/// let bounds = TaskBounds::open(8).kept_bytes(64 << 20);
/// assert_eq!((bounds.open, bounds.kept_bytes), (8, 64 << 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskBounds {
    /// Unfinished tasks ([`TaskStoreError::TooMany`] past them).
    pub open: usize,
    /// Bytes of the records of their ended tasks still kept (their
    /// results; [`TaskStoreError::TooMuchKept`] past them).
    pub kept_bytes: usize,
}

impl TaskBounds {
    /// At most `open` unfinished tasks, kept bytes unbounded.
    pub fn open(open: usize) -> TaskBounds {
        TaskBounds {
            open,
            kept_bytes: usize::MAX,
        }
    }

    /// At most `bytes` of ended tasks kept.
    pub fn kept_bytes(mut self, bytes: usize) -> TaskBounds {
        self.kept_bytes = bytes;
        self
    }
}

/// A task as the operator sees it ([`TaskBoard`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSummary {
    /// Its id, as its caller knows it.
    pub id: String,
    /// The caller whose it is.
    pub owner: String,
    /// The tool it calls.
    pub tool: String,
    /// Where it stands.
    pub state: TaskState,
    /// Its status message (a progress report, a reason), when it has one.
    pub message: Option<String>,
    /// How long ago it was made (here, when it was taken over).
    pub age: Duration,
    /// Whether it runs where it does because its own replica stopped.
    pub taken_over: bool,
    /// The replica that holds it, when another than this one (with a
    /// shared [`TaskStore`]); `None`: this one.
    pub replica: Option<String>,
}

/// The tasks a [`TaskBoard`] lists, and why those of other replicas are
/// missing when they are (their shared store cannot be read now).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskListing {
    /// Newest first.
    pub tasks: Vec<TaskSummary>,
    /// Why only this replica's are listed, when that is so.
    pub trouble: Option<String>,
}

/// The tasks one server runs, for its operator: listed on the console,
/// and stopped from there; with a shared [`TaskStore`], those of every
/// replica. The MCP server implements it; the console holds one without
/// knowing the server.
///
/// ```
/// use std::time::Duration;
/// use toolhost_runtime::tasks::{StoreFuture, TaskBoard, TaskListing, TaskState, TaskSummary};
///
/// #[derive(Debug)]
/// struct One;
/// impl TaskBoard for One {
///     fn tasks(&self, _limit: usize) -> StoreFuture<'_, TaskListing> {
///         Box::pin(async {
///             TaskListing {
///                 tasks: vec![TaskSummary {
///                     id: "t-1".into(),
///                     owner: "ana".into(),
///                     tool: "build".into(),
///                     state: TaskState::Working,
///                     message: Some("compiling".into()),
///                     age: Duration::from_secs(3),
///                     taken_over: false,
///                     replica: None,
///                 }],
///                 trouble: None,
///             }
///         })
///     }
///     fn cancel<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
///         Box::pin(async move { id == "t-1" })
///     }
/// }
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// assert_eq!(One.tasks(10).await.tasks[0].tool, "build");
/// assert!(!One.cancel("t-2").await);
/// # });
/// ```
pub trait TaskBoard: Send + Sync + fmt::Debug {
    /// The tasks this server (and, shared, every replica) runs or ran of
    /// late, newest first, at most `limit`.
    fn tasks(&self, limit: usize) -> StoreFuture<'_, TaskListing>;
    /// Stops the unfinished task `id`, here or (shared) on the replica
    /// that holds it, as its caller's `tasks/cancel` would (the
    /// operator's doing, in the audit); whether there was one.
    fn cancel<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool>;
}
