//! The operator's view of this server's tasks ([`TaskBoard`]): the
//! console lists them, newest first, and stops one.

use std::time::Instant;

use toolhost_runtime::tasks::{TaskBoard, TaskSummary};

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
}

impl Listed {
    fn of(id: &str, kept: &Kept) -> Listed {
        Listed {
            id: id.to_owned(),
            local: kept.local.clone(),
            caller: kept.caller.clone(),
            tool: kept.tool.clone(),
            created: kept.created,
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
            .map(|(id, k)| Listed::of(id, k))
            .collect();
        listed.sort_by_key(|l| std::cmp::Reverse(l.created));
        listed
            .into_iter()
            .filter_map(|l| {
                // (Gone from the manager: forgotten past its time to live.)
                let task = self.manager.get_task(&l.local).ok()?;
                Some(TaskSummary {
                    state: state_of(task.status()),
                    message: task.task.status_message.clone(),
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
        let unfinished = self
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
