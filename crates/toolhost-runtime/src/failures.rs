//! Recent failures that replicas share: [`FailureLog`], the place the
//! operator's console (`toolhost-console`) notes its replica's failed calls
//! and reads the others' (`toolhost-state` keeps them in PostgreSQL).
//! Without one, a console lists its own replica's failures only.
//!
//! ```
//! use std::sync::Mutex;
//! use toolhost_runtime::failures::{Failure, FailureLog};
//!
//! /// Every replica in one process: a list they share.
//! #[derive(Debug, Default)]
//! struct Shared(Mutex<Vec<Failure>>);
//!
//! impl FailureLog for Shared {
//!     fn record(&self, failure: Failure) {
//!         self.0.lock().unwrap().push(failure);
//!     }
//!     fn elsewhere(&self) -> Vec<Failure> {
//!         Vec::new()
//!     }
//!     fn trouble(&self) -> Option<String> {
//!         None
//!     }
//! }
//! ```

use crate::feed::{CallEvent, CallPhase};
use serde::{Deserialize, Serialize};

/// The longest tool name, outcome, rule or replica name a [`Failure`]
/// keeps (characters).
pub const MAX_FAILURE_TEXT: usize = 300;

/// One failed call, as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// When it ended, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The tool, as its caller named it.
    pub tool: String,
    /// The error kind.
    pub outcome: String,
    /// What decided, when the policy did.
    pub rule: Option<String>,
    /// The replica it failed on (`None`: this one).
    pub replica: Option<String>,
}

impl Failure {
    /// The failure a finished call's event tells of; `None` when the call
    /// did not fail (or has not finished).
    pub fn of(event: &CallEvent) -> Option<Failure> {
        let CallPhase::Finished { outcome, rule, .. } = &event.phase else {
            return None;
        };
        (outcome != "ok").then(|| Failure {
            at_ms: event.at_ms,
            tool: event.tool.clone(),
            outcome: outcome.clone(),
            rule: rule.clone(),
            replica: None,
        })
    }

    /// The same with every text at most [`MAX_FAILURE_TEXT`] characters:
    /// what is read back from elsewhere is bounded before it is kept.
    #[must_use]
    pub fn bounded(self) -> Failure {
        let cut = |s: String| s.chars().take(MAX_FAILURE_TEXT).collect::<String>();
        Failure {
            at_ms: self.at_ms,
            tool: cut(self.tool),
            outcome: cut(self.outcome),
            rule: self.rule.map(cut),
            replica: self.replica.map(cut),
        }
    }
}

/// Where replicas share their recent failures (a database): the console
/// notes each failed call of its replica and lists the others' beside its
/// own.
pub trait FailureLog: Send + Sync + std::fmt::Debug {
    /// Notes a failed call of this replica. Must not wait: a log that
    /// cannot take it now drops it.
    fn record(&self, failure: Failure);
    /// The failures other replicas noted lately, oldest first, each with
    /// its replica.
    fn elsewhere(&self) -> Vec<Failure>;
    /// Why the others' failures cannot be read now, if they cannot.
    fn trouble(&self) -> Option<String>;
}
