//! A call that an upstream server runs as a task (the
//! `io.modelcontextprotocol/tasks` extension, 2026-07-28): toolhost
//! declares the extension to every server (`requests::declare_tasks`),
//! and a call answered with a task is followed to its end here, as one
//! call of the pipeline. Its
//! status messages are the call's progress; a question of the task
//! (`input_required`) is answered here as a question during a call is
//! (`input.rs` `answer_here`: the operator's settings, the caller or the
//! person at the terminal) and sent with `tasks/update`; the call's result
//! is the task's; a call dropped before the task ends (cancelled, timed
//! out) cancels the task on the server.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, CancelTaskParams, GetTaskParams, InputRequests, Task, TaskPayload,
    UpdateTaskParams,
};
use rmcp::service::{Peer, RoleClient};
use serde_json::Value;
use toolhost_runtime::{source::SourceCall, source::SourceError, source::SourceOutcome};

use super::input::{MAX_INPUT_REQUESTS, answer_here};
use super::requests::Asker;
use super::state::Shared;
use crate::peer::Downstream;
use crate::tools;

/// The quickest and slowest polls, whatever the server asks.
const POLL: std::ops::RangeInclusive<Duration> = Duration::from_millis(50)..=Duration::from_secs(5);

/// The most polls of one task (the call's time limit ends it sooner).
const MAX_POLLS: u32 = 100_000;

/// The most questions one task may ask.
const MAX_QUESTIONS: usize = 64;

/// Cancels the task on the server unless it ended.
struct CancelTask {
    peer: Option<Peer<RoleClient>>,
    id: String,
}

impl Drop for CancelTask {
    fn drop(&mut self) {
        if let Some(peer) = self.peer.take() {
            let id = std::mem::take(&mut self.id);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(async move {
                    let _ = peer.cancel_task(CancelTaskParams::new(id)).await;
                });
            }
        }
    }
}

/// Follows the task `task` of `call` on `peer` to its end: the call's
/// outcome.
pub(crate) async fn follow(
    shared: &Shared,
    call: &SourceCall<'_>,
    peer: Peer<RoleClient>,
    task: Task,
) -> Result<SourceOutcome, SourceError> {
    let server = &shared.config.name;
    let mut cancel = CancelTask {
        peer: Some(peer.clone()),
        id: task.task_id.clone(),
    };
    let every = task
        .poll_interval_ms
        .map_or(*POLL.start(), Duration::from_millis)
        .clamp(*POLL.start(), *POLL.end());
    let asker = Asker {
        tool: call.tool.to_owned(),
        call_id: call.call_id.to_owned(),
        downstream: call.extensions.get::<Downstream>().cloned(),
        approver: call.approver.clone(),
    };
    let mut said = task.status_message.clone();
    let mut questions = 0usize;
    let mut answered = std::collections::HashSet::new();
    for _ in 0..MAX_POLLS {
        tokio::time::sleep(every).await;
        let now = peer
            .get_task(GetTaskParams::new(task.task_id.clone()))
            .await
            .map_err(|e| SourceError::Unavailable(format!("tasks/get of the call's task: {e}")))?
            .task;
        if now.task.status_message != said {
            said.clone_from(&now.task.status_message);
            if let (Some(progress), Some(message)) = (&call.progress, &said) {
                progress(&toolhost_text::line(message, 200), None);
            }
        }
        match now.payload {
            TaskPayload::Working => {}
            TaskPayload::InputRequired { input_requests } => {
                if input_requests.len() > MAX_INPUT_REQUESTS {
                    return Ok(SourceOutcome::Failed(format!(
                        "MCP server `{server}` asked {} questions at once; at most \
                         {MAX_INPUT_REQUESTS} are taken",
                        input_requests.len()
                    )));
                }
                // A question answered already is never asked again, however
                // long the server takes to take the answer.
                let new: InputRequests = input_requests
                    .into_iter()
                    .filter(|(key, _)| !answered.contains(key))
                    .collect();
                if new.is_empty() {
                    continue;
                }
                questions = questions.saturating_add(new.len());
                if questions > MAX_QUESTIONS {
                    return Ok(SourceOutcome::Failed(format!(
                        "MCP server `{server}` asked more than {MAX_QUESTIONS} questions in one task"
                    )));
                }
                answered.extend(new.keys().cloned());
                let responses = match answer_here(shared, &asker, new).await {
                    Ok(responses) => responses,
                    Err(why) => return Ok(SourceOutcome::Failed(why)),
                };
                peer.update_task(UpdateTaskParams::new(task.task_id.clone(), responses))
                    .await
                    .map_err(|e| {
                        SourceError::Unavailable(format!("tasks/update of the call's task: {e}"))
                    })?;
            }
            TaskPayload::Completed { result } => {
                cancel.peer = None;
                let result: CallToolResult = serde_json::from_value(Value::Object(result))
                    .map_err(|e| {
                        SourceError::Protocol(format!(
                            "the task's result is not a tool result: {e}"
                        ))
                    })?;
                return Ok(tools::source_outcome(result));
            }
            TaskPayload::Failed { error } => {
                cancel.peer = None;
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the task failed");
                return Ok(SourceOutcome::Failed(toolhost_text::line(message, 1000)));
            }
            TaskPayload::Cancelled => {
                cancel.peer = None;
                return Ok(SourceOutcome::Failed(format!(
                    "MCP server `{server}` cancelled the call's task"
                )));
            }
            _ => {
                return Err(SourceError::Protocol(
                    "the task is in a state this client does not know".into(),
                ));
            }
        }
    }
    Ok(SourceOutcome::Failed(format!(
        "MCP server `{server}` did not end the call's task within {MAX_POLLS} polls"
    )))
}
