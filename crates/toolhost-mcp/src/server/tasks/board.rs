//! The operator's view of this server's tasks ([`TaskBoard`]): the
//! console lists them, newest first, and stops one.

use std::time::Instant;

use toolhost_runtime::tasks::{TaskBoard, TaskState, TaskSummary};

use super::replicas::state_of;
use super::{Kept, Tasks};

/// A task as `kept` has it, copied out of the lock before the manager is
/// asked about it.
struct Listed {
    id: String,
    local: String,
    caller: String,
    tool: String,
    created: Instant,
    /// How it ended, when it did: then the manager is not asked (it
    /// would copy the result).
    ended: Option<TaskState>,
}

impl Listed {
    fn of(id: &str, kept: &Kept) -> Listed {
        Listed {
            id: id.to_owned(),
            local: kept.local.clone(),
            caller: kept.caller.clone(),
            tool: kept.tool.clone(),
            created: kept.created,
            ended: kept.ended.get().map(|e| e.state),
        }
    }
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("kept", &self.kept.lock().len())
            .field("shared", &self.store.is_some())
            .finish_non_exhaustive()
    }
}

impl TaskBoard for Tasks {
    fn tasks(&self, limit: usize) -> Vec<TaskSummary> {
        let mut listed: Vec<Listed> = self
            .kept
            .lock()
            .iter()
            .filter(|(_, k)| !k.forgotten(self.settings.ttl))
            .map(|(id, k)| Listed::of(id, k))
            .collect();
        listed.sort_by_key(|l| std::cmp::Reverse(l.created));
        listed
            .into_iter()
            .filter_map(|l| {
                let (state, message) = match l.ended {
                    Some(state) => (state, None),
                    // (Gone from the manager: forgotten past its time to live.)
                    None => {
                        let task = self.manager.get_task(&l.local).ok()?;
                        (state_of(task.status()), task.task.status_message)
                    }
                };
                Some(TaskSummary {
                    state,
                    message,
                    age: l.created.elapsed(),
                    taken_over: l.local != l.id,
                    owner: toolhost_runtime::shown::shown_name(&l.caller).into_owned(),
                    tool: toolhost_runtime::shown::shown_name(&l.tool).into_owned(),
                    id: l.id,
                })
            })
            .take(limit)
            .collect()
    }

    fn cancel(&self, id: &str) -> bool {
        let Some(task) = self.kept.lock().get(id).map(|k| Listed::of(id, k)) else {
            return false;
        };
        let unfinished = task.ended.is_none()
            && self
                .manager
                .get_task(&task.local)
                .is_ok_and(|t| !state_of(t.status()).is_terminal());
        if !unfinished || self.manager.cancel_task(&task.local).is_err() {
            return false;
        }
        tracing::info!(
            target: "toolhost::audit",
            tool = %toolhost_runtime::shown::shown_name(&task.tool),
            task = %toolhost_text::line(id, 64),
            client = %toolhost_runtime::shown::shown_name(&task.caller),
            by = "operator",
            outcome = "task-cancelled",
            "the operator stopped a task from the console"
        );
        true
    }
}
