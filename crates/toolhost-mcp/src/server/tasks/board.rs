//! The operator's view of this server's tasks ([`TaskBoard`]): the
//! console lists them, newest first, and stops one; with `[state]`, those
//! of every replica (read from the shared store, stopped through it).

use std::collections::HashSet;
use std::time::Instant;

use toolhost_runtime::tasks::{
    StoreFuture, TaskBoard, TaskListing, TaskState, TaskStore, TaskSummary,
};

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

impl Tasks {
    /// The tasks run here, newest first, at most `limit`.
    fn listed_here(&self, limit: usize) -> Vec<TaskSummary> {
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
                    owner: l.caller,
                    tool: l.tool,
                    id: l.id,
                    replica: None,
                })
            })
            .take(limit)
            .collect()
    }

    /// Stops task `id` run here; whether there was one unfinished.
    fn cancel_here(&self, id: &str) -> Option<Audited> {
        let task = self.kept.lock().get(id).map(|k| Listed::of(id, k))?;
        let unfinished = task.ended.is_none()
            && self
                .manager
                .get_task(&task.local)
                .is_ok_and(|t| !state_of(t.status()).is_terminal());
        (unfinished && self.manager.cancel_task(&task.local).is_ok()).then_some(Audited {
            tool: task.tool,
            caller: task.caller,
            replica: None,
        })
    }

    /// Asks the replica that holds task `id` to stop it, through the
    /// shared store; whether it was unfinished there.
    async fn cancel_elsewhere(&self, store: &dyn TaskStore, id: &str) -> Option<Audited> {
        let record = match store.load(id).await {
            Ok(Some(record)) if !record.state.is_terminal() => record,
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(task = %toolhost_text::line(id, 64), "the console could not stop a task: {e}");
                return None;
            }
        };
        if let Err(e) = store.cancel(id).await {
            tracing::warn!(task = %toolhost_text::line(id, 64), "the console could not stop a task: {e}");
            return None;
        }
        Some(Audited {
            tool: record.tool,
            caller: record.owner,
            replica: Some("another"),
        })
    }
}

/// A task the operator stopped, for the audit.
struct Audited {
    tool: String,
    caller: String,
    /// Where it ran: here (`None`), or on another replica.
    replica: Option<&'static str>,
}

/// `task` as the console shows it: names made safe to show.
fn shown(mut task: TaskSummary) -> TaskSummary {
    task.owner = toolhost_runtime::shown::shown_name(&task.owner).into_owned();
    task.tool = toolhost_runtime::shown::shown_name(&task.tool).into_owned();
    task.message = task.message.map(|m| toolhost_text::line(&m, 300));
    task
}

impl TaskBoard for Tasks {
    /// This replica's tasks as it knows them (fresher than the store),
    /// and with a shared store the other replicas' as it keeps them.
    fn tasks(&self, limit: usize) -> StoreFuture<'_, TaskListing> {
        Box::pin(async move {
            let here = self.listed_here(limit);
            let Some(store) = &self.store else {
                return TaskListing {
                    tasks: here.into_iter().map(shown).collect(),
                    trouble: None,
                };
            };
            let (shared, trouble) = match store.list(limit).await {
                Ok(shared) => (shared, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            let ids: HashSet<String> = here.iter().map(|t| t.id.clone()).collect();
            let mut tasks: Vec<TaskSummary> = here
                .into_iter()
                .chain(shared.into_iter().filter(|t| !ids.contains(&t.id)))
                .collect();
            tasks.sort_by_key(|t| t.age);
            tasks.truncate(limit);
            TaskListing {
                tasks: tasks.into_iter().map(shown).collect(),
                trouble,
            }
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let stopped = match (self.cancel_here(id), &self.store) {
                (Some(here), _) => Some(here),
                (None, Some(store)) if !self.kept.lock().contains_key(id) => {
                    self.cancel_elsewhere(store.as_ref(), id).await
                }
                (None, _) => None,
            };
            let Some(task) = stopped else {
                return false;
            };
            tracing::info!(
                target: "toolhost::audit",
                tool = %toolhost_runtime::shown::shown_name(&task.tool),
                task = %toolhost_text::line(id, 64),
                client = %toolhost_runtime::shown::shown_name(&task.caller),
                replica = task.replica.unwrap_or("here"),
                by = "operator",
                outcome = "task-cancelled",
                "the operator stopped a task from the console"
            );
            true
        })
    }
}
