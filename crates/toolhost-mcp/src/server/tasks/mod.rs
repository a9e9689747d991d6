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
//! A task runs in the process that took it (rmcp's [`TaskManager`]).
//! Without a store it lives there only, and a replica that stops loses
//! its tasks. With one ([`ServerOptions::task_store`](super::ServerOptions::task_store),
//! `[state]`), it is also a record replicas share (`replicas.rs`): polled,
//! answered and cancelled through any replica, its caller's bound counted
//! across them, and, when its replica stops, run again elsewhere if its
//! tool is idempotent, else failed with the reason.
//!
//! - `approver.rs`: a call's questions as the task's input requests.
//! - `board.rs`: the operator's view (the console lists and stops tasks).
//! - `replicas.rs`: what a replica does for the tasks it shares.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CreateTaskResult, DetailedTask, Task};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use serde_json::Value;
use toolhost_patterns::NameGlob;
use toolhost_runtime::tasks::{TaskBounds, TaskRecord, TaskStore, TaskStoreError};
use toolhost_runtime::{Approver, CallContext};
use tracing::Instrument;

use super::{Asks, McpServer};

mod approver;
mod board;
pub(crate) mod replicas;

pub(crate) use approver::TaskApprover;

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

/// The tasks of one server: rmcp's [`TaskManager`], whose each is, and,
/// with a [`TaskStore`], the record replicas share (`replicas.rs`).
pub(crate) struct Tasks {
    manager: TaskManager,
    kept: Mutex<HashMap<String, Kept>>,
    settings: TaskSettings,
    store: Option<Arc<dyn TaskStore>>,
}

/// What toolhost keeps of a task beside rmcp's state: whose it is, and
/// when it ended with how large a result. Read without asking the
/// manager, whose `get_task` copies the result.
struct Kept {
    caller: String,
    /// The tool it calls.
    tool: String,
    /// The manager's id of the call running here: the task's own id,
    /// unless the task was taken over from another replica.
    local: String,
    created: Instant,
    ended: Arc<OnceLock<Ended>>,
    /// What the store was last given of it (`replicas.rs`); `None` until
    /// then.
    saved: Option<String>,
    /// Whether its end is in the store (nothing more to save).
    settled: bool,
}

impl Kept {
    /// Whether the manager has let it go by now (or will at once): a
    /// task that ended is kept one TTL past its end, one that did not
    /// is failed at its TTL and then kept one more.
    fn forgotten(&self, ttl: Duration) -> bool {
        match self.ended.get() {
            Some(ended) => ended.at.elapsed() > ttl,
            None => self.created.elapsed() > ttl.saturating_mul(2),
        }
    }

    fn open(&self, ttl: Duration) -> bool {
        self.ended.get().is_none() && self.created.elapsed() <= ttl
    }

    fn result_bytes(&self) -> usize {
        self.ended.get().map_or(0, |ended| ended.bytes)
    }
}

/// How a task's call ended, as it ended (so that no one asks the manager,
/// which copies the result).
struct Ended {
    at: Instant,
    /// Its result's size, as JSON.
    bytes: usize,
    state: toolhost_runtime::tasks::TaskState,
}

/// What a task calls, as its record keeps it (to run it again elsewhere).
pub(crate) struct Origin {
    pub(crate) tool: String,
    pub(crate) args: Value,
    pub(crate) agent: Option<String>,
    pub(crate) idempotent: bool,
    /// Who answers its questions: whoever answers them when it runs again.
    pub(crate) asks: Asks,
}

impl Tasks {
    pub(crate) fn new(settings: TaskSettings, store: Option<Arc<dyn TaskStore>>) -> Tasks {
        Tasks {
            manager: TaskManager::new(),
            kept: Mutex::new(HashMap::new()),
            settings,
            store,
        }
    }

    pub(crate) fn settings(&self) -> &TaskSettings {
        &self.settings
    }

    pub(crate) fn store(&self) -> Option<&Arc<dyn TaskStore>> {
        self.store.as_ref()
    }

    /// Starts `run` as a task of `caller`'s; refused past the caller's
    /// bounds (unfinished tasks, bytes of the results kept) or the
    /// server's. With a store, the task is in it (readable through every
    /// replica, and within the caller's bound across them) before it
    /// starts and before this returns.
    pub(crate) async fn spawn(
        &self,
        caller: &str,
        origin: Origin,
        run: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Result<Task, McpError> {
        let (go, started) = tokio::sync::oneshot::channel::<()>();
        let task = self.start(caller, &origin.tool, None, move |context| {
            let work = run(context);
            Box::pin(async move {
                // Not before the store has it: a task it refuses never runs.
                if started.await.is_err() {
                    return Err(TaskExit::Cancelled);
                }
                work.await
            })
        })?;
        if let Some(store) = &self.store {
            let record = TaskRecord {
                ttl: self.settings.ttl,
                agent: origin.agent,
                idempotent: origin.idempotent,
                asks: origin.asks.into(),
                detail: self
                    .manager
                    .get_task(&task.task_id)
                    .ok()
                    .and_then(|d| serde_json::to_value(&d).ok())
                    .unwrap_or_default(),
                ..TaskRecord::new(&task.task_id, caller, &origin.tool, origin.args)
            };
            if let Err(e) = store
                .create(
                    &record,
                    TaskBounds::open(self.settings.max_open_per_caller)
                        .kept_bytes(self.settings.max_result_bytes_per_caller),
                )
                .await
            {
                let _ = self.manager.cancel_task(&task.task_id);
                self.kept.lock().remove(&task.task_id);
                return Err(match e {
                    TaskStoreError::Unreachable { .. } => {
                        McpError::internal_error(e.to_string(), None)
                    }
                    other => McpError::invalid_request(other.to_string(), None),
                });
            }
        }
        let _ = go.send(());
        Ok(task)
    }

    /// Runs `run` here as the task `record` of another replica's, taken
    /// over (its record stays as it is in the store).
    pub(crate) fn adopt(
        &self,
        record: &TaskRecord,
        run: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Result<Task, McpError> {
        self.start(&record.owner, &record.tool, Some(&record.id), run)
    }

    /// Starts `run`, a call of `tool`, under the manager, kept as `public`
    /// (its own id when `None`), within the bounds.
    fn start(
        &self,
        caller: &str,
        tool: &str,
        public: Option<&str>,
        run: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Result<Task, McpError> {
        let ttl = self.settings.ttl;
        let mut kept = self.kept.lock();
        kept.retain(|_, k| !k.forgotten(ttl));
        let theirs = || kept.values().filter(|k| k.caller == caller);
        let refused = |why: String| Err(McpError::invalid_request(why, None));
        if theirs().filter(|k| k.open(ttl)).count() >= self.settings.max_open_per_caller {
            return refused(TaskStoreError::TooMany(self.settings.max_open_per_caller).to_string());
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
        let mut task = self.manager.spawn(options, move |context| {
            let work = run(context);
            Box::pin(async move {
                let outcome = work.await;
                use toolhost_runtime::tasks::TaskState;
                let (bytes, state) = match &outcome {
                    Ok(result) => (
                        serde_json::to_vec(result).map_or(0, |v| v.len()),
                        TaskState::Completed,
                    ),
                    Err(TaskExit::Cancelled) => (0, TaskState::Cancelled),
                    Err(_) => (0, TaskState::Failed),
                };
                let _ = record.set(Ended {
                    at: Instant::now(),
                    bytes,
                    state,
                });
                outcome
            })
        });
        let local = task.task_id.clone();
        if let Some(public) = public {
            public.clone_into(&mut task.task_id);
        }
        kept.insert(
            task.task_id.clone(),
            Kept {
                caller: caller.to_owned(),
                tool: tool.to_owned(),
                local,
                created: Instant::now(),
                ended,
                saved: None,
                settled: false,
            },
        );
        Ok(task)
    }

    /// The task `id`, when it is `caller`'s: from the manager when it runs
    /// here, else from the store.
    pub(crate) async fn get(&self, caller: &str, id: &str) -> Result<DetailedTask, McpError> {
        if let Some(local) = self.here(caller, id)? {
            return self.local_task(id, &local);
        }
        let record = self.load(caller, id).await?;
        serde_json::from_value(record.detail).map_err(|e| {
            McpError::internal_error(format!("the stored task cannot be read: {e}"), None)
        })
    }

    /// Delivers `caller`'s answers to the task `id`.
    pub(crate) async fn update(
        &self,
        caller: &str,
        id: &str,
        responses: impl IntoIterator<Item = (String, Value)>,
    ) -> Result<(), McpError> {
        if let Some(local) = self.here(caller, id)? {
            return self.manager.update_task(&local, responses);
        }
        self.load(caller, id).await?;
        let store = self.store.as_ref().ok_or_else(|| unknown(id))?;
        store
            .answer(id, responses.into_iter().collect())
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    /// Asks the task `id` of `caller`'s to stop.
    pub(crate) async fn cancel(&self, caller: &str, id: &str) -> Result<(), McpError> {
        if let Some(local) = self.here(caller, id)? {
            return self.manager.cancel_task(&local);
        }
        self.load(caller, id).await?;
        let store = self.store.as_ref().ok_or_else(|| unknown(id))?;
        store
            .cancel(id)
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))
    }

    /// The manager's id of the task `id` when it runs here and is
    /// `caller`'s; `None` when it may be elsewhere (there is a store);
    /// unknown otherwise.
    fn here(&self, caller: &str, id: &str) -> Result<Option<String>, McpError> {
        match self.kept.lock().get(id) {
            Some(kept) if kept.caller == caller => Ok(Some(kept.local.clone())),
            None if self.store.is_some() => Ok(None),
            _ => Err(unknown(id)),
        }
    }

    /// The manager's state of a task that runs here, under its own id.
    fn local_task(&self, id: &str, local: &str) -> Result<DetailedTask, McpError> {
        let mut task = self.manager.get_task(local)?;
        id.clone_into(&mut task.task.task_id);
        Ok(task)
    }

    /// The record of `caller`'s task `id`, from the store.
    async fn load(&self, caller: &str, id: &str) -> Result<TaskRecord, McpError> {
        let store = self.store.as_ref().ok_or_else(|| unknown(id))?;
        match store.load(id).await {
            Ok(Some(record)) if record.owner == caller => Ok(record),
            Ok(_) => Err(unknown(id)),
            Err(e) => Err(McpError::internal_error(e.to_string(), None)),
        }
    }
}

/// An error naming `id` unknown, as rmcp's own for an id it does not know
/// (also for another caller's).
fn unknown(id: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown task: {}", toolhost_text::line(id, 100)),
        None,
    )
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
    /// Whether its tool says running it twice does no harm.
    pub(super) idempotent: bool,
}

/// What a task's call runs with, wherever it starts.
pub(crate) struct TaskRun {
    pub(crate) runtime: toolhost_runtime::Runtime,
    pub(crate) in_flight: super::parallel::InFlight,
    pub(crate) name: String,
    pub(crate) args: Value,
    pub(crate) agent: Option<String>,
    pub(crate) client: String,
    pub(crate) call_id: String,
    /// Where its questions go; the task's input when `None`.
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) version: Option<rmcp::model::ProtocolVersion>,
}

impl TaskRun {
    /// The task's work: the same pipeline as any call, its questions the
    /// task's `input_required` state (unless another approver takes them),
    /// its progress the task's status message, its cancellation the end of
    /// its sandbox.
    pub(crate) fn work(self) -> impl FnOnce(TaskContext) -> TaskFuture {
        let span = tracing::Span::current();
        move |task| {
            let TaskRun {
                runtime,
                in_flight,
                name,
                args,
                agent,
                client,
                call_id,
                approver,
                version,
            } = self;
            let approver: Arc<dyn Approver> =
                approver.unwrap_or_else(|| TaskApprover::new(task.clone()));
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
        }
    }
}

impl McpServer {
    /// Starts `call` as a task of its caller's and answers with the task
    /// (see the module docs and [`TaskRun::work`]); with `--asks operator`
    /// its questions go to the operator's queue, as any call's.
    pub(super) async fn call_as_task(
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
            idempotent,
        } = call;
        let approver = (asks != Asks::Client).then(|| self.approver(context, asks, &client, None));
        let shown = toolhost_runtime::shown::shown_name(&name).into_owned();
        let owner = client.clone();
        let origin = Origin {
            tool: name.clone(),
            args: args.clone(),
            agent: agent.clone(),
            idempotent,
            asks,
        };
        let run = TaskRun {
            runtime: self.runtime.clone(),
            in_flight: self.in_flight.clone(),
            name,
            args,
            agent,
            client,
            call_id: format!("mcp-{}", super::request_id(context)),
            approver,
            version: context.protocol_version(),
        };
        let task = self.tasks.spawn(&owner, origin, run.work()).await?;
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

    fn origin() -> Origin {
        Origin {
            tool: "t".into(),
            args: Value::Null,
            agent: None,
            idempotent: false,
            asks: Asks::Client,
        }
    }

    fn forever() -> impl FnOnce(TaskContext) -> TaskFuture {
        |_| Box::pin(std::future::pending())
    }

    #[tokio::test]
    async fn a_task_is_its_callers_alone() {
        let tasks = Tasks::new(settings(4), None);
        let task = tasks.spawn("alice", origin(), forever()).await.unwrap();
        assert!(tasks.get("alice", &task.task_id).await.is_ok());
        let other = tasks.get("bob", &task.task_id).await.unwrap_err();
        assert_eq!(other.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(tasks.cancel("bob", &task.task_id).await.is_err());
        assert!(tasks.update("bob", &task.task_id, []).await.is_err());
        assert!(tasks.cancel("alice", &task.task_id).await.is_ok());
    }

    #[tokio::test]
    async fn a_caller_past_its_open_tasks_is_refused_and_others_are_not() {
        let tasks = Tasks::new(settings(2), None);
        tasks.spawn("alice", origin(), forever()).await.unwrap();
        tasks.spawn("alice", origin(), forever()).await.unwrap();
        assert!(tasks.spawn("alice", origin(), forever()).await.is_err());
        assert!(tasks.spawn("bob", origin(), forever()).await.is_ok());
    }

    #[tokio::test]
    async fn a_caller_whose_kept_results_are_too_large_is_refused_and_others_are_not() {
        let tasks = Tasks::new(
            TaskSettings {
                max_result_bytes_per_caller: 10_000,
                ..settings(8)
            },
            None,
        );
        let big = || {
            |_: TaskContext| -> TaskFuture {
                Box::pin(async {
                    Ok(rmcp::model::CallToolResult::success(vec![
                        rmcp::model::ContentBlock::text("x".repeat(6_000)),
                    ]))
                })
            }
        };
        let first = tasks.spawn("alice", origin(), big()).await.unwrap();
        let second = tasks.spawn("alice", origin(), big()).await.unwrap();
        for task in [&first, &second] {
            for _ in 0..100 {
                if tasks
                    .get("alice", &task.task_id)
                    .await
                    .unwrap()
                    .status()
                    .is_terminal()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let refused = tasks.spawn("alice", origin(), forever()).await.unwrap_err();
        assert!(refused.message.contains("bytes"), "{refused:?}");
        assert!(tasks.spawn("bob", origin(), forever()).await.is_ok());
    }

    #[tokio::test]
    async fn the_board_lists_tasks_newest_first_and_the_operator_stops_one_once() {
        use toolhost_runtime::tasks::{TaskBoard, TaskState};
        let tasks = Tasks::new(settings(4), None);
        // Stopped as a call is: when the task's context is cancelled.
        let stoppable = |task: TaskContext| -> TaskFuture {
            Box::pin(async move {
                task.cancelled().await;
                Err(TaskExit::Cancelled)
            })
        };
        let first = tasks.spawn("alice", origin(), stoppable).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = tasks.spawn("bob", origin(), forever()).await.unwrap();
        let listed = tasks.tasks(10).await;
        assert_eq!(listed.trouble, None);
        let listed = listed.tasks;
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0].id, second.task_id);
        assert_eq!(
            (listed[1].owner.as_str(), listed[1].tool.as_str()),
            ("alice", "t")
        );
        assert_eq!(listed[1].state, TaskState::Working);
        assert!(!listed[1].taken_over);
        assert_eq!(listed[1].replica, None);
        assert_eq!(tasks.tasks(1).await.tasks.len(), 1);

        assert!(!TaskBoard::cancel(&tasks, "no-such-task").await);
        assert!(TaskBoard::cancel(&tasks, &first.task_id).await);
        let mut state = TaskState::Working;
        for _ in 0..100 {
            state = tasks
                .tasks(10)
                .await
                .tasks
                .into_iter()
                .find(|t| t.id == first.task_id)
                .map_or(TaskState::Working, |t| t.state);
            if state.is_terminal() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(state, TaskState::Cancelled);
        assert!(
            !TaskBoard::cancel(&tasks, &first.task_id).await,
            "an ended task is not stopped again"
        );
    }
}
