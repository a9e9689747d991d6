//! Calls as tasks: the `io.modelcontextprotocol/tasks` extension
//! (SEP-2663).
//!
//! A call of a tool the operator lets run as a task ([`TaskSettings`]),
//! from a caller that declared the extension, is answered at once with a
//! task (`resultType: "task"`) and goes on in the background, through the
//! same pipeline as any call (policy, hooks, limits, audit, traces). The
//! caller polls `tasks/get` for its state and, once it is over, its result
//! inlined; answers its questions with `tasks/update`; and may stop it
//! with `tasks/cancel`, which stops its sandbox (or cancels it upstream).
//!
//! - A question the call meets on its way is the task's `input_required`
//!   state: a policy `ask` answered by the caller (the approval form, as an
//!   `elicitation/create` input request) and an upstream server's
//!   elicitation (its own form). The call waits for the answer where it
//!   stands (nothing runs again); an answer approves the one call it was
//!   asked about, once.
//! - A tool the operator marks `required` runs only as a task: a caller
//!   that cannot take one is told so (`-32021`, the extension named).
//! - A tool error is a `completed` task whose result has `isError`; a
//!   protocol error (unknown tool, a 2025-11-25 revision's invalid
//!   arguments) is a `failed` task with the error inlined; a cancelled call
//!   is `cancelled`.
//! - Tasks are the caller's own: another caller's id is unknown (`-32602`)
//!   to everyone else. Bounded: a caller has at most
//!   [`TaskSettings::max_open_per_caller`] unfinished tasks and
//!   [`TaskSettings::max_result_bytes_per_caller`] of results kept; a task
//!   runs at most [`TaskSettings::ttl`] (rmcp's [`TaskManager`] marks one
//!   still running past it `failed`) and its result is kept one more.
//!
//! Tasks live in this process (rmcp's [`TaskManager`]): a task of a
//! replica that stops is lost with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CreateTaskResult, DetailedTask, InputRequest, Task};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use serde_json::Value;
use toolhost_patterns::NameGlob;
use toolhost_runtime::CallContext;
use toolhost_runtime::{
    Approver, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::FormAnswer, permission::FormRequest,
    permission::ResultApproval, permission::ResultApprovalRequest,
};
use tracing::Instrument;

use super::elicit::{approval_answer, approval_request, call_question, result_question};
use super::{Asks, McpServer};

/// The default [`TaskSettings::ttl`]: an hour.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// The default [`TaskSettings::poll_interval`].
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// The default [`TaskSettings::max_open_per_caller`].
pub const DEFAULT_MAX_OPEN_PER_CALLER: usize = 16;
/// The default [`TaskSettings::max_result_bytes_per_caller`]: 64 MiB.
pub const DEFAULT_MAX_RESULT_BYTES_PER_CALLER: usize = 64 * 1024 * 1024;
/// The most tasks one server keeps track of, finished or not.
const MAX_TASKS: usize = 10_000;
/// The most bytes of results one server keeps, all callers together.
const MAX_KEPT_BYTES: usize = 1024 * 1024 * 1024;

/// Which tools run as tasks, and the bounds (`[tasks]` in the config
/// file). None by default: every call is answered when it is over.
///
/// ```
/// use toolhost_mcp::server::tasks::{TaskSettings, TaskSupport};
/// use toolhost_patterns::NameGlob;
///
/// let settings = TaskSettings {
///     tools: vec![NameGlob::new("build_*").unwrap()],
///     required: vec![NameGlob::new("build_release").unwrap()],
///     ..TaskSettings::default()
/// };
/// assert_eq!(settings.support("build_docs"), TaskSupport::Optional);
/// assert_eq!(settings.support("build_release"), TaskSupport::Required);
/// assert_eq!(settings.support("greet"), TaskSupport::Never);
/// ```
#[derive(Debug, Clone)]
pub struct TaskSettings {
    /// Tools (by the names callers see) that run as a task for a caller
    /// that declared the extension, and at once for any other.
    pub tools: Vec<NameGlob>,
    /// Tools that run only as a task: a caller that did not declare the
    /// extension gets `-32021`.
    pub required: Vec<NameGlob>,
    /// How long a task and its result are kept (its `ttlMs`).
    pub ttl: Duration,
    /// How often a caller is asked to poll (its `pollIntervalMs`).
    pub poll_interval: Duration,
    /// The most unfinished tasks one caller may have; one more is refused.
    pub max_open_per_caller: usize,
    /// The most bytes of finished tasks' results kept for one caller; past
    /// them a new task is refused until older results are let go.
    pub max_result_bytes_per_caller: usize,
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            tools: Vec::new(),
            required: Vec::new(),
            ttl: DEFAULT_TASK_TTL,
            poll_interval: DEFAULT_POLL_INTERVAL,
            max_open_per_caller: DEFAULT_MAX_OPEN_PER_CALLER,
            max_result_bytes_per_caller: DEFAULT_MAX_RESULT_BYTES_PER_CALLER,
        }
    }
}

/// Whether a tool runs as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never: it is answered when it is over.
    Never,
    /// As a task for a caller that declared the extension.
    Optional,
    /// Only as a task.
    Required,
}

impl TaskSettings {
    /// Whether `tool` runs as a task.
    pub fn support(&self, tool: &str) -> TaskSupport {
        if self.required.iter().any(|g| g.is_match(tool)) {
            TaskSupport::Required
        } else if self.tools.iter().any(|g| g.is_match(tool)) {
            TaskSupport::Optional
        } else {
            TaskSupport::Never
        }
    }

    /// Whether any tool runs as a task (the server then declares the
    /// extension).
    pub fn enabled(&self) -> bool {
        !self.tools.is_empty() || !self.required.is_empty()
    }
}

/// The tasks of one server: rmcp's [`TaskManager`], and whose each is.
pub(crate) struct Tasks {
    manager: TaskManager,
    kept: Mutex<HashMap<String, Kept>>,
    settings: TaskSettings,
}

/// What toolhost keeps of a task beside rmcp's state: whose it is, and
/// when it ended with how large a result. Read without asking the
/// manager, whose `get_task` copies the result.
struct Kept {
    caller: String,
    created: Instant,
    ended: Arc<OnceLock<(Instant, usize)>>,
}

impl Kept {
    /// Whether the manager has let it go by now (or will at once): a
    /// task that ended is kept one TTL past its end, one that did not
    /// is failed at its TTL and then kept one more.
    fn forgotten(&self, ttl: Duration) -> bool {
        match self.ended.get() {
            Some((at, _)) => at.elapsed() > ttl,
            None => self.created.elapsed() > ttl.saturating_mul(2),
        }
    }

    fn open(&self, ttl: Duration) -> bool {
        self.ended.get().is_none() && self.created.elapsed() <= ttl
    }

    fn result_bytes(&self) -> usize {
        self.ended.get().map_or(0, |(_, bytes)| *bytes)
    }
}

impl Tasks {
    pub(crate) fn new(settings: TaskSettings) -> Tasks {
        Tasks {
            manager: TaskManager::new(),
            kept: Mutex::new(HashMap::new()),
            settings,
        }
    }

    pub(crate) fn settings(&self) -> &TaskSettings {
        &self.settings
    }

    /// Starts `run` as a task of `caller`'s; refused past the caller's
    /// bounds (unfinished tasks, bytes of the results kept) or the
    /// server's.
    pub(crate) fn spawn(
        &self,
        caller: &str,
        run: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Result<Task, McpError> {
        let ttl = self.settings.ttl;
        let mut kept = self.kept.lock();
        kept.retain(|_, k| !k.forgotten(ttl));
        let theirs = || kept.values().filter(|k| k.caller == caller);
        let refused = |why: String| Err(McpError::invalid_request(why, None));
        if theirs().filter(|k| k.open(ttl)).count() >= self.settings.max_open_per_caller {
            return refused(format!(
                "too many unfinished tasks (at most {} for one caller); wait for one to finish \
                 or cancel one",
                self.settings.max_open_per_caller
            ));
        }
        let bytes = theirs()
            .map(Kept::result_bytes)
            .fold(0, usize::saturating_add);
        if bytes >= self.settings.max_result_bytes_per_caller {
            return refused(format!(
                "the results of your earlier tasks take {bytes} bytes, and at most {} are kept \
                 for one caller: a result is let go {} s after its task ended",
                self.settings.max_result_bytes_per_caller,
                ttl.as_secs()
            ));
        }
        let all = kept
            .values()
            .map(Kept::result_bytes)
            .fold(0, usize::saturating_add);
        if kept.len() >= MAX_TASKS || all >= MAX_KEPT_BYTES {
            return refused("this server keeps too many tasks now; try again later".to_owned());
        }
        let options = TaskOptions::new()
            .with_ttl_ms(millis(ttl))
            .with_poll_interval_ms(millis(self.settings.poll_interval));
        let ended = Arc::new(OnceLock::new());
        let record = ended.clone();
        let task = self.manager.spawn(options, move |context| {
            let work = run(context);
            Box::pin(async move {
                let outcome = work.await;
                let bytes = match &outcome {
                    Ok(result) => serde_json::to_vec(result).map_or(0, |v| v.len()),
                    Err(_) => 0,
                };
                let _ = record.set((Instant::now(), bytes));
                outcome
            })
        });
        kept.insert(
            task.task_id.clone(),
            Kept {
                caller: caller.to_owned(),
                created: Instant::now(),
                ended,
            },
        );
        Ok(task)
    }

    /// The task `id`, when it is `caller`'s.
    pub(crate) fn get(&self, caller: &str, id: &str) -> Result<DetailedTask, McpError> {
        self.owned(caller, id)?;
        self.manager.get_task(id)
    }

    /// Delivers `caller`'s answers to the task `id`.
    pub(crate) fn update(
        &self,
        caller: &str,
        id: &str,
        responses: impl IntoIterator<Item = (String, Value)>,
    ) -> Result<(), McpError> {
        self.owned(caller, id)?;
        self.manager.update_task(id, responses)
    }

    /// Asks the task `id` of `caller`'s to stop.
    pub(crate) fn cancel(&self, caller: &str, id: &str) -> Result<(), McpError> {
        self.owned(caller, id)?;
        self.manager.cancel_task(id)
    }

    /// An error naming `id` unknown unless it is `caller`'s, as rmcp's own
    /// for an id it does not know.
    fn owned(&self, caller: &str, id: &str) -> Result<(), McpError> {
        match self.kept.lock().get(id) {
            Some(kept) if kept.caller == caller => Ok(()),
            _ => Err(McpError::invalid_params(
                format!("unknown task: {}", toolhost_text::line(id, 100)),
                None,
            )),
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.manager.shutdown();
    }
}

/// The longest status message a call's progress report sets.
pub(crate) const STATUS_CHARS: usize = 200;

/// How a task's call ended, as the task's terminal state: its result
/// (`completed`, with `isError` when the tool failed or the policy said
/// no); `failed`, with the error inlined, for what is not the tool's
/// answer (an unknown tool, arguments a 2025-11-25 caller gets as a
/// protocol error, a sandbox that crashed, a fault of the host);
/// `cancelled` when it was stopped (`None`).
pub(crate) fn settle(
    outcome: Option<Result<toolhost_runtime::ToolResult, toolhost_runtime::CallError>>,
    version: Option<&rmcp::model::ProtocolVersion>,
) -> Result<rmcp::model::CallToolResult, TaskExit> {
    use toolhost_runtime::error::ErrorKind;
    match outcome {
        None => Err(TaskExit::Cancelled),
        Some(Ok(result)) => Ok(crate::tools::success(result)),
        Some(Err(e)) => {
            if let Some(error) = super::revision::protocol_error(&e, version) {
                return Err(TaskExit::Error(error));
            }
            match e.kind() {
                ErrorKind::SandboxFault | ErrorKind::HostError => {
                    Err(TaskExit::Error(McpError::internal_error(
                        toolhost_text::line(&e.to_string(), super::revision::MESSAGE_CHARS),
                        Some(serde_json::json!({
                            crate::tools::ERROR_KIND_META_KEY: e.kind().as_str(),
                        })),
                    )))
                }
                _ => Ok(crate::tools::failure(&e)),
            }
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A call that runs as a task: what [`McpServer::call`] found out about it.
pub(super) struct TaskCall {
    pub(super) name: String,
    pub(super) args: Value,
    pub(super) agent: Option<String>,
    pub(super) client: String,
    pub(super) asks: Asks,
}

impl McpServer {
    /// Starts `call` as a task of its caller's and answers with the task
    /// (see the module docs): the same pipeline as any call, its questions the
    /// task's `input_required` state when the caller answers them (else
    /// the operator's queue, or nobody, as for any call), its progress the
    /// task's status message, its cancellation the end of its sandbox.
    pub(super) fn call_as_task(
        &self,
        call: TaskCall,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let TaskCall {
            name,
            args,
            agent,
            client,
            asks,
        } = call;
        let other_approver =
            (asks != Asks::Client).then(|| self.approver(context, asks, &client, None));
        let call_id = format!("mcp-{}", super::request_id(context));
        let version = context.protocol_version();
        let (runtime, in_flight) = (self.runtime.clone(), self.in_flight.clone());
        let shown = toolhost_runtime::shown::shown_name(&name).into_owned();
        let owner = client.clone();
        let span = tracing::Span::current();
        let task = self.tasks.spawn(&owner, move |task| {
            let approver: Arc<dyn toolhost_runtime::Approver> =
                other_approver.unwrap_or_else(|| TaskApprover::new(task.clone()));
            let status = task.clone();
            let mut cx = CallContext::new()
                .call_id(call_id)
                .approver(approver)
                .client(client)
                // No `Downstream`: a 2026-07-28 caller takes no requests, so
                // an upstream server's form is asked through the approver:
                // the task's input (`TaskApprover::answer_form`).
                .on_progress(move |_tool, message, _fraction| {
                    status.set_status_message(toolhost_text::line(message, STATUS_CHARS));
                });
            if let Some(agent) = agent {
                cx = cx.agent(agent);
            }
            Box::pin(
                async move {
                    let call = Box::pin(
                        async move { runtime.call(&name, args, cx).await }.in_current_span(),
                    );
                    // Cancelling the task drops the call, which stops its sandbox.
                    let never = tokio_util::sync::CancellationToken::new();
                    let outcome = tokio::select! {
                        outcome = in_flight.run(call, &never) => outcome,
                        () = task.cancelled() => None,
                    };
                    settle(outcome, version.as_ref())
                }
                .instrument(span),
            )
        })?;
        tracing::info!(
            target: "toolhost::audit",
            tool = %shown,
            task = %task.task_id,
            client = %toolhost_runtime::shown::shown_name(&owner),
            outcome = "task-created",
            "a call runs as a task"
        );
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }
}

/// The approver of a call that runs as a task: each question is an input
/// request of the task, and the call waits for its answer.
pub(crate) struct TaskApprover {
    task: TaskContext,
    asked: AtomicU32,
}

impl TaskApprover {
    pub(crate) fn new(task: TaskContext) -> Arc<TaskApprover> {
        Arc::new(TaskApprover {
            task,
            asked: AtomicU32::new(0),
        })
    }

    /// Asks `request` under a key of its own; `None` when the task was
    /// cancelled meanwhile.
    async fn ask(&self, kind: &str, request: InputRequest) -> Option<Value> {
        let n = self.asked.fetch_add(1, Ordering::Relaxed);
        self.task
            .request_input(format!("toolhost-{kind}-{n}"), request)
            .await
            .ok()
    }
}

impl Approver for TaskApprover {
    fn prompt_name(&self) -> &'static str {
        "mcp-task"
    }

    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            let question = call_question(request);
            let Ok(input) = approval_request(&question) else {
                return CallApproval::Deny {
                    message: Some("cannot write the question".to_owned()),
                };
            };
            match self.ask("approval", input).await {
                None => CallApproval::Deny {
                    message: Some("the task was cancelled".to_owned()),
                },
                Some(answer) => match approval_answer(&answer) {
                    (true, true) if question.remember => CallApproval::AllowAlways,
                    (true, _) => CallApproval::AllowOnce,
                    (false, _) => CallApproval::Deny {
                        message: Some("the user declined".to_owned()),
                    },
                },
            }
        })
    }

    fn approve_result<'a>(
        &'a self,
        request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move {
            let Ok(input) = approval_request(&result_question(request)) else {
                return ResultApproval::Reject {
                    message: Some("cannot write the question".to_owned()),
                };
            };
            match self.ask("result", input).await {
                Some(answer) if approval_answer(&answer).0 => ResultApproval::Accept,
                Some(_) => ResultApproval::Reject {
                    message: Some("the user declined".to_owned()),
                },
                None => ResultApproval::Reject {
                    message: Some("the task was cancelled".to_owned()),
                },
            }
        })
    }

    fn answer_form<'a>(&'a self, request: &'a FormRequest<'a>) -> ApprovalFuture<'a, FormAnswer> {
        Box::pin(async move {
            let input: Result<InputRequest, _> = serde_json::from_value(serde_json::json!({
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": request.message,
                    "requestedSchema": request.schema,
                },
            }));
            let Ok(input) = input else {
                return FormAnswer::Decline;
            };
            let Some(answer) = self.ask("form", input).await else {
                return FormAnswer::Cancel;
            };
            match answer.get("action").and_then(Value::as_str) {
                Some("accept") => FormAnswer::Accept(
                    answer
                        .get("content")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default(),
                ),
                Some("cancel") => FormAnswer::Cancel,
                _ => FormAnswer::Decline,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(max: usize) -> TaskSettings {
        TaskSettings {
            tools: vec![NameGlob::new("*").unwrap()],
            max_open_per_caller: max,
            ..TaskSettings::default()
        }
    }

    fn forever() -> impl FnOnce(TaskContext) -> TaskFuture {
        |_| Box::pin(std::future::pending())
    }

    #[tokio::test]
    async fn a_task_is_its_callers_alone() {
        let tasks = Tasks::new(settings(4));
        let task = tasks.spawn("alice", forever()).unwrap();
        assert!(tasks.get("alice", &task.task_id).is_ok());
        let other = tasks.get("bob", &task.task_id).unwrap_err();
        assert_eq!(other.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(tasks.cancel("bob", &task.task_id).is_err());
        assert!(tasks.update("bob", &task.task_id, []).is_err());
        assert!(tasks.cancel("alice", &task.task_id).is_ok());
    }

    #[tokio::test]
    async fn a_caller_past_its_open_tasks_is_refused_and_others_are_not() {
        let tasks = Tasks::new(settings(2));
        tasks.spawn("alice", forever()).unwrap();
        tasks.spawn("alice", forever()).unwrap();
        assert!(tasks.spawn("alice", forever()).is_err());
        assert!(tasks.spawn("bob", forever()).is_ok());
    }

    #[tokio::test]
    async fn a_caller_whose_kept_results_are_too_large_is_refused_and_others_are_not() {
        let tasks = Tasks::new(TaskSettings {
            max_result_bytes_per_caller: 10_000,
            ..settings(8)
        });
        let big = || {
            |_: TaskContext| -> TaskFuture {
                Box::pin(async {
                    Ok(rmcp::model::CallToolResult::success(vec![
                        rmcp::model::ContentBlock::text("x".repeat(6_000)),
                    ]))
                })
            }
        };
        let first = tasks.spawn("alice", big()).unwrap();
        let second = tasks.spawn("alice", big()).unwrap();
        for task in [&first, &second] {
            for _ in 0..100 {
                if tasks
                    .get("alice", &task.task_id)
                    .unwrap()
                    .status()
                    .is_terminal()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let refused = tasks.spawn("alice", forever()).unwrap_err();
        assert!(refused.message.contains("bytes"), "{refused:?}");
        assert!(tasks.spawn("bob", forever()).is_ok());
    }
}
