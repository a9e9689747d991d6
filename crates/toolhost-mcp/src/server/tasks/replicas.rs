//! Tasks that replicas share ([`TaskStore`], `[state]`): what this
//! replica does for them in the background, one loop per server.
//!
//! - Every [`SAVE_EVERY`], each task running here whose state changed
//!   (its status, its message, its questions, its end) is saved, so a
//!   caller polling another replica sees what this one sees. A result
//!   larger than a record may be ([`MAX_TASK_BYTES`]) is saved as a
//!   failure that says so (this replica still has it).
//! - Answers and cancels given through another replica reach the call here.
//! - A task whose replica stopped, now held here, is run again when its
//!   tool says it is idempotent (`idempotentHint`), from its arguments,
//!   under its caller's identity; any other ends as failed, saying why:
//!   it is never run twice. A task run again asks whom its request asked
//!   (the record keeps the route): its caller, as the task's input; the
//!   operator, in the shared queue; or no one. An answer given before
//!   approved the run that stopped, not this one: its questions are asked
//!   again, and never of someone its request did not name (a caller whose
//!   asks go to the operator cannot approve its own task run again).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{DetailedTask, TaskPayload, TaskStatus};
use serde_json::json;
use toolhost_runtime::tasks::{MAX_TASK_BYTES, TaskEvent, TaskRecord, TaskState};

use super::{TaskRun, Tasks};
use crate::server::Asks;

/// How often the state of the tasks running here is saved.
pub const SAVE_EVERY: Duration = Duration::from_millis(100);

/// Why a task that was not run again ended.
pub const NOT_RUN_AGAIN: &str = "the replica that ran this task stopped, and its tool does not \
     say it is idempotent, so it was not run again: call it again if you are sure";

/// What the loop needs to run a task taken over.
pub(crate) struct Runner {
    pub(crate) runtime: toolhost_runtime::Runtime,
    pub(crate) in_flight: crate::server::parallel::InFlight,
    /// Where the questions of a task whose caller's asks go to the
    /// operator wait (`None`: such a task is denied, saying why).
    pub(crate) operator_queue: Option<toolhost_runtime::operator::OperatorQueue>,
}

/// Starts the loop of `tasks` (within a Tokio runtime; nothing when the
/// server has no store, or is made outside one). It ends with the server.
pub(crate) fn start(tasks: &Arc<Tasks>, runner: Runner) {
    let Some(store) = tasks.store().cloned() else {
        return;
    };
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("tasks are not shared: the MCP server was made outside a Tokio runtime");
        return;
    };
    let (events, mut inbox) = tokio::sync::mpsc::unbounded_channel();
    store.attach(events);
    let tasks = Arc::downgrade(tasks);
    handle.spawn(async move {
        let mut tick = tokio::time::interval(SAVE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                event = inbox.recv() => {
                    let (Some(event), Some(tasks)) = (event, tasks.upgrade()) else { return };
                    tasks.heard(event, &runner);
                }
                _ = tick.tick() => {
                    let Some(tasks) = tasks.upgrade() else { return };
                    tasks.save_changed();
                }
            }
        }
    });
}

impl Tasks {
    /// Saves the tasks running here whose state changed since last saved.
    fn save_changed(&self) {
        let Some(store) = self.store() else { return };
        let running: Vec<(String, String)> = self
            .kept
            .lock()
            .iter()
            .filter(|(_, k)| !k.settled)
            .map(|(id, k)| (id.clone(), k.local.clone()))
            .collect();
        for (id, local) in running {
            let Ok(task) = self.local_task(&id, &local) else {
                continue;
            };
            let state = state_of(task.status());
            let task = bounded(task);
            let Ok(detail) = serde_json::to_string(&task) else {
                continue;
            };
            let mut kept = self.kept.lock();
            let Some(k) = kept.get_mut(&id) else { continue };
            if k.saved.as_deref() == Some(detail.as_str()) {
                continue;
            }
            k.settled = state.is_terminal();
            let value = serde_json::from_str(&detail).unwrap_or_default();
            k.saved = Some(detail);
            drop(kept);
            store.save(&id, state, value);
        }
    }

    /// What the store says happened elsewhere.
    fn heard(&self, event: TaskEvent, runner: &Runner) {
        match event {
            TaskEvent::Answered { id, responses } => {
                if let Some(local) = self.local_id(&id) {
                    let _ = self.manager.update_task(&local, responses);
                }
            }
            TaskEvent::CancelAsked { id } => {
                if let Some(local) = self.local_id(&id) {
                    let _ = self.manager.cancel_task(&local);
                }
            }
            TaskEvent::TakenOver(record) => self.take_over(&record, runner),
            _ => {}
        }
    }

    fn local_id(&self, id: &str) -> Option<String> {
        self.kept.lock().get(id).map(|k| k.local.clone())
    }

    /// A task whose replica stopped: run again here, or ended as failed.
    fn take_over(&self, record: &TaskRecord, runner: &Runner) {
        let mut why = NOT_RUN_AGAIN.to_owned();
        if record.idempotent {
            let run = TaskRun {
                runtime: runner.runtime.clone(),
                in_flight: runner.in_flight.clone(),
                name: record.tool.clone(),
                args: record.args.clone(),
                agent: record.agent.clone(),
                client: record.owner.clone(),
                call_id: format!("mcp-task-{}", toolhost_text::line(&record.id, 64)),
                // Whom its request named: the caller (the task's input,
                // `None`), the operator, or no one.
                approver: match Asks::from(record.asks) {
                    Asks::Client => None,
                    elsewhere => Some(crate::server::not_the_callers(
                        elsewhere,
                        runner.operator_queue.as_ref(),
                        &record.owner,
                        None,
                    )),
                },
                version: Some(rmcp::model::ProtocolVersion::V_2026_07_28),
            };
            match self.adopt(record, run.work()) {
                Ok(_) => {
                    audit(
                        record,
                        "task-resumed",
                        "a task whose replica stopped runs again here (its tool is idempotent)",
                    );
                    return;
                }
                Err(e) => {
                    why = format!(
                        "the replica that ran this task stopped, and it could not run again \
                         on another: {}",
                        e.message
                    );
                }
            }
        }
        let Some(store) = self.store() else { return };
        store.save(&record.id, TaskState::Failed, failed(record, &why));
        audit(record, "task-failed-replica-lost", &why);
    }
}

/// The audit's line of `outcome` for the task `record`, taken over here.
fn audit(record: &TaskRecord, outcome: &'static str, what: &str) {
    tracing::info!(
        target: "toolhost::audit",
        tool = %toolhost_runtime::shown::shown_name(&record.tool),
        task = %toolhost_text::line(&record.id, 64),
        client = %toolhost_runtime::shown::shown_name(&record.owner),
        outcome,
        "{what}"
    );
}

/// The store's state of a task of `status`.
pub(super) fn state_of(status: TaskStatus) -> TaskState {
    match status {
        TaskStatus::InputRequired => TaskState::InputRequired,
        TaskStatus::Completed => TaskState::Completed,
        TaskStatus::Failed => TaskState::Failed,
        TaskStatus::Cancelled => TaskState::Cancelled,
        _ => TaskState::Working,
    }
}

/// `task`, or, when its result is larger than a record may be, a failure
/// that says so.
fn bounded(task: DetailedTask) -> DetailedTask {
    let TaskPayload::Completed { result } = &task.payload else {
        return task;
    };
    let bytes = serde_json::to_vec(result).map_or(usize::MAX, |v| v.len());
    if bytes < MAX_TASK_BYTES - 64 * 1024 {
        return task;
    }
    let error = json!({
        "code": rmcp::model::ErrorCode::INTERNAL_ERROR.0,
        "message": format!(
            "the result is {bytes} bytes, over the {MAX_TASK_BYTES} that replicas share; \
             only the replica that ran it has it"
        ),
    });
    let serde_json::Value::Object(error) = error else {
        return task;
    };
    DetailedTask::new(task.task, TaskPayload::Failed { error })
}

/// The record's task, failed with `why`.
fn failed(record: &TaskRecord, why: &str) -> serde_json::Value {
    let mut detail = record.detail.clone();
    if let Some(task) = detail.as_object_mut() {
        task.remove("inputRequests");
        task.remove("result");
        task.insert("status".into(), json!("failed"));
        task.insert("statusMessage".into(), json!(why));
        task.insert(
            "lastUpdatedAt".into(),
            json!(rmcp::task_manager::current_timestamp()),
        );
        task.insert(
            "error".into(),
            json!({"code": rmcp::model::ErrorCode::INTERNAL_ERROR.0, "message": why}),
        );
        detail
    } else {
        json!({
            "taskId": record.id,
            "status": "failed",
            "statusMessage": why,
            "createdAt": rmcp::task_manager::current_timestamp(),
            "lastUpdatedAt": rmcp::task_manager::current_timestamp(),
            "error": {"code": rmcp::model::ErrorCode::INTERNAL_ERROR.0, "message": why},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_not_run_again_reads_back_as_failed_with_the_reason() {
        let task = rmcp::model::Task::new(
            String::from("t-1"),
            TaskStatus::Working,
            String::from("2026-12-03T00:00:00Z"),
            String::from("2026-12-03T00:00:00Z"),
        );
        let working = DetailedTask::new(task, TaskPayload::Working);
        let record = TaskRecord {
            detail: serde_json::to_value(&working).unwrap(),
            ..TaskRecord::new("t-1", "ana", "build", json!({}))
        };
        let read: DetailedTask = serde_json::from_value(failed(&record, NOT_RUN_AGAIN)).unwrap();
        assert_eq!(read.status(), TaskStatus::Failed);
        assert_eq!(read.task.task_id, "t-1");
        assert_eq!(read.task.status_message.as_deref(), Some(NOT_RUN_AGAIN));
    }

    #[test]
    fn a_result_too_large_to_share_is_saved_as_a_failure_that_says_so() {
        let task = rmcp::model::Task::new(
            String::from("t-2"),
            TaskStatus::Completed,
            String::from("2026-12-03T00:00:00Z"),
            String::from("2026-12-03T00:00:00Z"),
        );
        let result = rmcp::model::CallToolResult::success(vec![rmcp::model::ContentBlock::text(
            "x".repeat(MAX_TASK_BYTES),
        )]);
        let serde_json::Value::Object(result) = serde_json::to_value(result).unwrap() else {
            unreachable!()
        };
        let saved = bounded(DetailedTask::new(task, TaskPayload::Completed { result }));
        assert_eq!(saved.status(), TaskStatus::Failed);
    }
}
