//! Long-running tasks shared by replicas through PostgreSQL:
//! [`PostgresTasks`], a [`TaskStore`] for the MCP gateway's tasks.
//!
//! A task runs in the replica that took its call, its holder; the
//! database is where the others read, answer and cancel it. The table
//! `toolhost_tasks` (made when missing) has one row per task: its store
//! name and id, its owner, tool and profile, its arguments and status as
//! JSON (bounded, with its owner, tool and profile: [`MAX_TASK_BYTES`]),
//! who answers its questions, how long it is kept, the replica that holds it and the generation it
//! holds it at, a heartbeat, and what was asked of it elsewhere (answers,
//! a cancel).
//!
//! - Making a task is a transaction that counts its owner's unfinished
//!   tasks in the store under an advisory lock (at most the `max_open`
//!   asked, else [`TaskStoreError::TooMany`]) and inserts the row, held
//!   here at generation 1.
//! - The holder saves its task's status in the background, in order, and
//!   only while the row is still its own (its replica, its generation): a
//!   task another replica took over is left alone.
//! - Answering or cancelling a task is written to its row while it is
//!   unfinished, and the replicas are notified (`NOTIFY toolhost_tasks`).
//!   The holder takes what was written (and clears it, in one statement)
//!   at the notification, or at its next [`POLL`](crate::POLL) when one
//!   is lost, and tells its [`TaskEvents`].
//! - Every [`POLL`](crate::POLL) the holder renews its tasks' heartbeat.
//!   An unfinished task whose heartbeat is older than [`LEASE`] (its
//!   replica stopped, or lost the database) is taken over by a replica
//!   that polls: one statement locks the rows it takes and skips those
//!   another replica is taking, so exactly one wins. It holds the task at
//!   the next generation and is told ([`TaskEvent::TakenOver`]). A
//!   replica takes over nothing until it is
//!   [attached](TaskStore::attach).
//! - A task is deleted twice its time to live after it was made.
//!
//! A replica that loses the database cannot make, read, answer or cancel
//! a task (the error says why); the tasks it holds go on here, and the
//! last status of each is saved when it is back (unless another replica
//! took it over meanwhile).
//!
//! ```no_run
//! use toolhost_runtime::tasks::TaskStore;
//! use toolhost_state::PostgresTasks;
//!
//! let store = PostgresTasks::connect("host=db.internal user=toolhost dbname=toolhost", "main")?;
//! let (events, _received) = tokio::sync::mpsc::unbounded_channel();
//! store.attach(events);
//! # Ok::<(), toolhost_state::DatabaseError>(())
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::oneshot;
use tokio_postgres::{Client, Row};
use toolhost_runtime::tasks::{
    MAX_TASK_BYTES, StoreFuture, TaskBounds, TaskEvent, TaskEvents, TaskRecord, TaskState,
    TaskStore, TaskStoreError, TaskSummary,
};

use crate::connection::{self, ANSWER_WAIT, DatabaseError, Link, Lost, Session, Target, cause};

/// The notification channel (its payload: the store's name).
pub const CHANNEL: &str = "toolhost_tasks";
/// How long a task stays with its replica after it last renewed its
/// heartbeat (every [`POLL`](crate::POLL)); then another replica takes it
/// over.
pub const LEASE: Duration = Duration::from_secs(5);
/// The most tasks one replica takes over at one poll.
pub const TAKEN_PER_POLL: i64 = 16;

/// The largest status (as JSON) whose message the operator's listing
/// reads; a larger one (a large result inlined) is listed without it.
const LISTED_DETAIL_BYTES: i32 = 64 * 1024;

/// The size of a row, as [`record_bytes`] counts it.
const ROW_BYTES: &str = "(octet_length(owner)::bigint + octet_length(tool)
     + coalesce(octet_length(agent), 0) + octet_length(args) + octet_length(detail))";

/// What the connection's thread and the store share.
#[derive(Default)]
struct Shared {
    events: Mutex<Option<TaskEvents>>,
}

impl Shared {
    /// Where events go, while someone receives them.
    fn events(&self) -> Option<TaskEvents> {
        self.events.lock().clone().filter(|e| !e.is_closed())
    }
}

/// A task being made, as the database keeps it.
struct NewTask {
    id: String,
    owner: String,
    tool: String,
    agent: Option<String>,
    /// Its arguments as JSON.
    args: String,
    idempotent: bool,
    /// Who answers its questions (`client`, `operator`, `deny`).
    asks: &'static str,
    ttl_ms: i64,
    state: TaskState,
    /// Its status as JSON.
    detail: String,
}

/// A request to the connection's thread.
enum Request {
    Create {
        task: Box<NewTask>,
        bounds: TaskBounds,
        reply: oneshot::Sender<Result<(), TaskStoreError>>,
    },
    Save {
        id: String,
        state: TaskState,
        /// As JSON.
        detail: String,
    },
    Load {
        id: String,
        reply: oneshot::Sender<Result<Option<TaskRecord>, TaskStoreError>>,
    },
    Answer {
        id: String,
        /// As JSON (an object).
        responses: String,
        reply: oneshot::Sender<Result<(), TaskStoreError>>,
    },
    Cancel {
        id: String,
        reply: oneshot::Sender<Result<(), TaskStoreError>>,
    },
    List {
        limit: i64,
        reply: oneshot::Sender<Result<Vec<TaskSummary>, TaskStoreError>>,
    },
}

/// Long-running tasks in a PostgreSQL database that replicas share (see
/// the module docs). Each is one replica, with an id of its own. Its
/// connection runs on a thread of its own, which ends when this is
/// dropped.
pub struct PostgresTasks {
    link: Link<Request>,
    shared: Arc<Shared>,
    store: String,
    describe: String,
    replica: String,
}

impl std::fmt::Debug for PostgresTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresTasks")
            .field("store", &self.store)
            .field("database", &self.describe)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl PostgresTasks {
    /// The tasks of `store` in the database `url` names (`postgres://…`
    /// or `host=… user=… dbname=…`, TLS as [`crate::tls`] reads it). It
    /// connects in the background and returns at once; until connected,
    /// tasks cannot be made, read, answered or cancelled here (the error
    /// says why).
    pub fn connect(url: &str, store: &str) -> Result<PostgresTasks, DatabaseError> {
        let target = Target::parse(url)?;
        let describe = target.describe().to_owned();
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes).map_err(|e| {
            DatabaseError::Unreachable(Lost::Failed(format!("no random replica id: {e}")))
        })?;
        let replica = format!("{:016x}", u64::from_le_bytes(bytes));
        let shared = Arc::new(Shared::default());
        let session = Tasks {
            store: store.to_owned(),
            replica: replica.clone(),
            describe: describe_store(store, &describe),
            shared: Arc::clone(&shared),
            held: BTreeMap::new(),
            unsaved: BTreeMap::new(),
        };
        Ok(PostgresTasks {
            link: connection::start(target, session)?,
            shared,
            store: store.to_owned(),
            describe,
            replica,
        })
    }

    /// Whether the connection is up now.
    pub fn connected(&self) -> bool {
        self.link.health().connected()
    }

    /// This replica's id in the table (its column `replica`).
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// Stops at once, as a replica that died: the connection is dropped,
    /// nothing more is saved, and this replica's tasks are left for their
    /// lease to run out and another replica to take them over. (For tests
    /// of a replica lost.)
    pub fn halt(&self) {
        self.link.halt();
    }

    fn unreachable(&self, message: String) -> TaskStoreError {
        TaskStoreError::Unreachable {
            store: self.describe(),
            message,
        }
    }

    /// Sends the request `make` builds and waits for its answer (at most
    /// twice [`ANSWER_WAIT`]: the thread answers within one once
    /// connected, at once otherwise).
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, TaskStoreError>>) -> Request,
    ) -> Result<T, TaskStoreError> {
        let (reply, answer) = oneshot::channel();
        self.link
            .send(make(reply))
            .map_err(|why| self.unreachable(why.to_string()))?;
        match tokio::time::timeout(2 * ANSWER_WAIT, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(self.unreachable(format!(
                "no answer within {} s",
                (2 * ANSWER_WAIT).as_secs()
            ))),
        }
    }
}

impl TaskStore for PostgresTasks {
    fn describe(&self) -> String {
        describe_store(&self.store, &self.describe)
    }

    fn attach(&self, events: TaskEvents) {
        *self.shared.events.lock() = Some(events);
    }

    fn create<'a>(
        &'a self,
        record: &'a TaskRecord,
        bounds: TaskBounds,
    ) -> StoreFuture<'a, Result<(), TaskStoreError>> {
        Box::pin(async move {
            let args =
                serde_json::to_string(&record.args).map_err(|e| self.unreachable(e.to_string()))?;
            let detail = serde_json::to_string(&record.detail)
                .map_err(|e| self.unreachable(e.to_string()))?;
            let task = Box::new(NewTask {
                id: record.id.clone(),
                owner: record.owner.clone(),
                tool: record.tool.clone(),
                agent: record.agent.clone(),
                args,
                idempotent: record.idempotent,
                asks: record.asks.as_str(),
                ttl_ms: i64::try_from(record.ttl.as_millis()).unwrap_or(i64::MAX),
                state: record.state,
                detail,
            });
            let bytes = task.bytes();
            if bytes > MAX_TASK_BYTES {
                return Err(TaskStoreError::TooLarge(bytes));
            }
            self.ask(|reply| Request::Create {
                task,
                bounds,
                reply,
            })
            .await
        })
    }

    fn save(&self, id: &str, state: TaskState, detail: Value) {
        let detail = match serde_json::to_string(&detail) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!(task = id, "a task's status was not saved: {e}");
                return;
            }
        };
        // (Its owner, tool and arguments count too: the thread knows them.)
        if detail.len() > MAX_TASK_BYTES {
            tracing::warn!(
                task = id,
                "a task's status of {} bytes was not saved: over the {MAX_TASK_BYTES} a shared store keeps",
                detail.len()
            );
            return;
        }
        let request = Request::Save {
            id: id.to_owned(),
            state,
            detail,
        };
        if let Err(why) = self.link.send(request) {
            tracing::warn!(task = id, "a task's status was not saved: {why}");
        }
    }

    fn load<'a>(
        &'a self,
        id: &'a str,
    ) -> StoreFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        Box::pin(async move {
            self.ask(|reply| Request::Load {
                id: id.to_owned(),
                reply,
            })
            .await
        })
    }

    fn answer<'a>(
        &'a self,
        id: &'a str,
        responses: Map<String, Value>,
    ) -> StoreFuture<'a, Result<(), TaskStoreError>> {
        Box::pin(async move {
            let responses =
                serde_json::to_string(&responses).map_err(|e| self.unreachable(e.to_string()))?;
            if responses.len() > MAX_TASK_BYTES {
                return Err(TaskStoreError::TooLarge(responses.len()));
            }
            self.ask(|reply| Request::Answer {
                id: id.to_owned(),
                responses,
                reply,
            })
            .await
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Result<(), TaskStoreError>> {
        Box::pin(async move {
            self.ask(|reply| Request::Cancel {
                id: id.to_owned(),
                reply,
            })
            .await
        })
    }

    fn list(&self, limit: usize) -> StoreFuture<'_, Result<Vec<TaskSummary>, TaskStoreError>> {
        Box::pin(async move {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.ask(|reply| Request::List { limit, reply }).await
        })
    }
}

/// `tasks `main` of postgresql://host:port/db`.
fn describe_store(store: &str, database: &str) -> String {
    format!("tasks `{store}` of {database}")
}

/// A task held here.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The generation it is held at: its row is changed only while it
    /// has this one (and this replica).
    generation: i64,
    /// The bytes of its owner, tool, profile and arguments (with its
    /// status, at most [`MAX_TASK_BYTES`]).
    fixed_bytes: usize,
}

/// The tasks' side of the connection, and what only it keeps.
struct Tasks {
    store: String,
    replica: String,
    /// [`TaskStore::describe`].
    describe: String,
    shared: Arc<Shared>,
    /// The tasks held here, by id.
    held: BTreeMap<String, Held>,
    /// The last status of a task held here that the database could not
    /// be told (it was lost), saved when it is back.
    unsaved: BTreeMap<String, (TaskState, String)>,
}

impl Session for Tasks {
    type Request = Request;
    const NAME: &'static str = "shared tasks";
    const THREAD: &'static str = "toolhost-tasks";

    /// Makes the table when missing, listens, and saves what could not be
    /// saved while the database was lost.
    async fn setup(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        // Replicas starting at once make the table once: the advisory
        // lock (the approvals' own) orders them.
        client
            .batch_execute(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(7262718);
                 CREATE TABLE IF NOT EXISTS toolhost_tasks (
                     store text NOT NULL,
                     id text NOT NULL,
                     owner text NOT NULL,
                     tool text NOT NULL,
                     agent text,
                     args text NOT NULL,
                     idempotent bool NOT NULL,
                     ttl_ms bigint NOT NULL,
                     state text NOT NULL,
                     detail text NOT NULL,
                     replica text NOT NULL,
                     generation bigint NOT NULL,
                     heartbeat timestamptz NOT NULL,
                     created timestamptz NOT NULL,
                     responses jsonb NOT NULL DEFAULT '{}',
                     cancel bool NOT NULL DEFAULT false,
                     asks text NOT NULL DEFAULT 'deny',
                     PRIMARY KEY (store, id)
                 );
                 -- A table made before tasks kept their ask route: theirs
                 -- ask no one when run again.
                 ALTER TABLE toolhost_tasks ADD COLUMN IF NOT EXISTS asks text NOT NULL DEFAULT 'deny';
                 COMMIT;
                 LISTEN toolhost_tasks;",
            )
            .await?;
        let unsaved: Vec<String> = self.unsaved.keys().cloned().collect();
        for id in unsaved {
            let Some((state, detail)) = self.unsaved.get(&id).cloned() else {
                continue;
            };
            match self.write(client, &id, state, &detail).await {
                Err(e) if client.is_closed() => return Err(e),
                Err(e) => tracing::warn!(task = id, "a task's status was not saved: {}", cause(&e)),
                Ok(()) => {}
            }
            self.unsaved.remove(&id);
        }
        Ok(())
    }

    /// One request. A statement's failure is the request's answer; the
    /// error is returned too, so a broken connection ends.
    async fn serve(
        &mut self,
        client: &mut Client,
        request: Request,
    ) -> Result<(), tokio_postgres::Error> {
        match request {
            Request::Create {
                task,
                bounds,
                reply,
            } => {
                let result = self.create(client, &task, bounds).await;
                self.reply(reply, result)
            }
            Request::Save { id, state, detail } => {
                // A newer status than one kept from an outage.
                self.unsaved.remove(&id);
                if let Err(e) = self.write(client, &id, state, &detail).await {
                    if client.is_closed() {
                        self.unsaved.insert(id, (state, detail));
                    }
                    return Err(e);
                }
                Ok(())
            }
            Request::Load { id, reply } => {
                let result = self.load(client, &id).await;
                self.reply(reply, result)
            }
            Request::Answer {
                id,
                responses,
                reply,
            } => {
                let result = self.answer(client, &id, &responses).await;
                self.reply(reply, result)
            }
            Request::Cancel { id, reply } => {
                let result = self.cancel(client, &id).await;
                self.reply(reply, result)
            }
            Request::List { limit, reply } => {
                let result = self.list(client, limit).await;
                self.reply(reply, result)
            }
        }
    }

    /// Another replica answered or cancelled a task of this store: the
    /// holder takes it.
    async fn notified(
        &mut self,
        client: &mut Client,
        payload: String,
    ) -> Result<(), tokio_postgres::Error> {
        if payload == self.store
            && let Some(events) = self.shared.events()
        {
            self.take_asked(client, &events).await?;
        }
        Ok(())
    }

    /// Takes what was asked of the tasks held here (a notification may be
    /// lost), renews their heartbeat, takes over tasks whose replica is
    /// gone, and deletes tasks past twice their time to live.
    async fn poll(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        let events = self.shared.events();
        if let Some(events) = &events {
            self.take_asked(client, events).await?;
        }
        self.renew(client).await?;
        if let Some(events) = &events {
            self.take_over(client, events).await?;
        }
        self.expire(client).await
    }

    /// Disconnected: nothing is made, read, answered or cancelled; a
    /// status is saved when back.
    fn refuse(&mut self, request: Request, why: &Lost) {
        let unreachable = || TaskStoreError::Unreachable {
            store: self.describe.clone(),
            message: why.to_string(),
        };
        match request {
            Request::Create { reply, .. }
            | Request::Answer { reply, .. }
            | Request::Cancel { reply, .. } => {
                let _ = reply.send(Err(unreachable()));
            }
            Request::Load { reply, .. } => {
                let _ = reply.send(Err(unreachable()));
            }
            Request::List { reply, .. } => {
                let _ = reply.send(Err(unreachable()));
            }
            Request::Save { id, state, detail } => {
                if self.held.contains_key(&id) {
                    tracing::warn!(
                        task = id,
                        "a task's status is not saved now ({why}): saved when the database is back"
                    );
                    self.unsaved.insert(id, (state, detail));
                } else {
                    tracing::debug!(task = id, "a status of a task not held here: not saved");
                }
            }
        }
    }
}

/// A statement's answer to a request, or its failure (the driver's).
type Answered<T> = Result<Result<T, TaskStoreError>, tokio_postgres::Error>;

impl Tasks {
    /// Sends `result` as the request's answer; a failure of the driver
    /// goes back to the connection too.
    fn reply<T>(
        &self,
        reply: oneshot::Sender<Result<T, TaskStoreError>>,
        result: Answered<T>,
    ) -> Result<(), tokio_postgres::Error> {
        match result {
            Ok(result) => {
                let _ = reply.send(result);
                Ok(())
            }
            Err(e) => {
                let _ = reply.send(Err(TaskStoreError::Unreachable {
                    store: self.describe.clone(),
                    message: cause(&e),
                }));
                Err(e)
            }
        }
    }

    /// Makes `task`, held here: a transaction that counts its owner's
    /// unfinished tasks first, under a lock of the store and owner's.
    async fn create(
        &mut self,
        client: &mut Client,
        task: &NewTask,
        bounds: TaskBounds,
    ) -> Answered<()> {
        let tx = client.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(
                 hashtextextended(json_build_array('toolhost_tasks', $1::text, $2::text)::text, 0))",
            &[&self.store, &task.owner],
        )
        .await?;
        let row = tx
            .query_one(
                "SELECT count(*) FILTER (WHERE state IN ('working', 'input_required')),
                        coalesce(sum(octet_length(detail))
                                 FILTER (WHERE state NOT IN ('working', 'input_required')), 0)::bigint
                   FROM toolhost_tasks WHERE store = $1 AND owner = $2",
                &[&self.store, &task.owner],
            )
            .await?;
        let (open, kept): (i64, i64) = (row.try_get(0)?, row.try_get(1)?);
        if usize::try_from(open).unwrap_or(usize::MAX) >= bounds.open {
            tx.rollback().await?;
            return Ok(Err(TaskStoreError::TooMany(bounds.open)));
        }
        let kept = u64::try_from(kept).unwrap_or(0);
        if kept >= u64::try_from(bounds.kept_bytes).unwrap_or(u64::MAX) {
            tx.rollback().await?;
            return Ok(Err(TaskStoreError::TooMuchKept {
                bytes: kept,
                limit: bounds.kept_bytes,
            }));
        }
        let inserted = tx
            .execute(
                "INSERT INTO toolhost_tasks (store, id, owner, tool, agent, args, idempotent,
                                             ttl_ms, state, detail, replica, generation,
                                             heartbeat, created, asks)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1, now(), now(), $12)
                 ON CONFLICT (store, id) DO NOTHING",
                &[
                    &self.store,
                    &task.id,
                    &task.owner,
                    &task.tool,
                    &task.agent,
                    &task.args,
                    &task.idempotent,
                    &task.ttl_ms,
                    &state_name(task.state),
                    &task.detail,
                    &self.replica,
                    &task.asks,
                ],
            )
            .await?;
        if inserted == 0 {
            tx.rollback().await?;
            return Ok(Err(TaskStoreError::Unreachable {
                store: self.describe.clone(),
                message: format!("it has a task numbered `{}` already", task.id),
            }));
        }
        tx.commit().await?;
        if !task.state.is_terminal() {
            self.held.insert(
                task.id.clone(),
                Held {
                    generation: 1,
                    fixed_bytes: task.bytes().saturating_sub(task.detail.len()),
                },
            );
        }
        Ok(Ok(()))
    }

    /// Saves the status of task `id`, while it is held here at the
    /// generation it was; forgets it once it has ended, or once another
    /// replica holds it.
    async fn write(
        &mut self,
        client: &Client,
        id: &str,
        state: TaskState,
        detail: &str,
    ) -> Result<(), tokio_postgres::Error> {
        let Some(held) = self.held.get(id).copied() else {
            tracing::debug!(task = id, "a status of a task not held here: not saved");
            return Ok(());
        };
        let bytes = held.fixed_bytes.saturating_add(detail.len());
        if bytes > MAX_TASK_BYTES {
            tracing::warn!(
                task = id,
                "a task's status was not saved: the task would be {bytes} bytes, over the {MAX_TASK_BYTES} a shared store keeps"
            );
            return Ok(());
        }
        let saved = client
            .execute(
                "UPDATE toolhost_tasks SET state = $5, detail = $6
                  WHERE store = $1 AND id = $2 AND replica = $3 AND generation = $4",
                &[
                    &self.store,
                    &id,
                    &self.replica,
                    &held.generation,
                    &state_name(state),
                    &detail,
                ],
            )
            .await?;
        if saved == 0 {
            tracing::debug!(
                task = id,
                "a task's status was not saved: another replica holds it now (or it was let go)"
            );
            self.held.remove(id);
        } else if state.is_terminal() {
            self.held.remove(id);
        }
        Ok(())
    }

    /// The task `id`, wherever it is held.
    async fn load(&self, client: &Client, id: &str) -> Answered<Option<TaskRecord>> {
        let row = client
            .query_opt(
                &format!(
                    "SELECT {} FROM toolhost_tasks WHERE store = $1 AND id = $2",
                    columns()
                ),
                &[&self.store, &id, &max_bytes()],
            )
            .await?;
        let Some(row) = row else {
            return Ok(Ok(None));
        };
        Ok(match read(&row) {
            Ok(task) => Ok(Some(task.record)),
            Err(Unreadable::TooLarge(bytes)) => Err(TaskStoreError::TooLarge(bytes)),
            Err(Unreadable::Invalid(why)) => Err(TaskStoreError::Unreachable {
                store: self.describe.clone(),
                message: format!("the task `{id}` it keeps is not valid: {why}"),
            }),
        })
    }

    /// The store's tasks, newest first, at most `limit`, as the operator
    /// sees them: their status message (not their status, which may hold
    /// a result of megabytes) read in the database, only from a status of
    /// at most [`LISTED_DETAIL_BYTES`] (the console asks every 2 s: the
    /// database never parses megabytes for it), and every text cut short
    /// there.
    async fn list(&self, client: &Client, limit: i64) -> Answered<Vec<TaskSummary>> {
        let rows = client
            .query(
                "SELECT id, left(owner, 200), left(tool, 200), state,
                        CASE WHEN octet_length(detail) <= $3
                             THEN left(detail::jsonb ->> 'statusMessage', 300) END,
                        replica, generation,
                        greatest((extract(epoch FROM now() - created) * 1000)::bigint, 0)
                   FROM toolhost_tasks WHERE store = $1
                  ORDER BY created DESC LIMIT $2",
                &[&self.store, &limit, &LISTED_DETAIL_BYTES],
            )
            .await?;
        let mut listed = Vec::with_capacity(rows.len());
        for row in &rows {
            match self.summary(row) {
                Ok(task) => listed.push(task),
                Err(why) => tracing::warn!("a task the store keeps is not listed: {why}"),
            }
        }
        Ok(Ok(listed))
    }

    /// A row of [`Tasks::list`].
    fn summary(&self, row: &Row) -> Result<TaskSummary, String> {
        let invalid = |e: tokio_postgres::Error| cause(&e);
        let state: String = row.try_get(3).map_err(invalid)?;
        let replica: String = row.try_get(5).map_err(invalid)?;
        let generation: i64 = row.try_get(6).map_err(invalid)?;
        let age_ms: i64 = row.try_get(7).map_err(invalid)?;
        Ok(TaskSummary {
            id: row.try_get(0).map_err(invalid)?,
            owner: row.try_get(1).map_err(invalid)?,
            tool: row.try_get(2).map_err(invalid)?,
            state: state_of(&state).ok_or_else(|| format!("`{state}` is not a task's state"))?,
            message: row.try_get(4).map_err(invalid)?,
            age: Duration::from_millis(u64::try_from(age_ms).unwrap_or(0)),
            // Made at generation 1; each takeover is the next.
            taken_over: generation > 1,
            replica: (replica != self.replica).then_some(replica),
        })
    }

    /// Adds `responses` (a JSON object) to those asked of task `id`, while
    /// it is unfinished, and notifies its holder. (A task that is not
    /// there, or has ended, is left as it is.)
    async fn answer(&self, client: &mut Client, id: &str, responses: &str) -> Answered<()> {
        let tx = client.transaction().await?;
        let bytes = tx
            .query_opt(
                "UPDATE toolhost_tasks SET responses = responses || $3::text::jsonb
                  WHERE store = $1 AND id = $2 AND state IN ('working', 'input_required')
                  RETURNING octet_length(responses::text)",
                &[&self.store, &id, &responses],
            )
            .await?
            .map(|row| row.try_get::<_, i32>(0))
            .transpose()?;
        let Some(bytes) = bytes else {
            tx.rollback().await?;
            return Ok(Ok(()));
        };
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        if bytes > MAX_TASK_BYTES {
            tx.rollback().await?;
            return Ok(Err(TaskStoreError::TooLarge(bytes)));
        }
        tx.execute("SELECT pg_notify('toolhost_tasks', $1)", &[&self.store])
            .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Asks task `id`, while unfinished, to stop, and notifies its holder.
    async fn cancel(&self, client: &Client, id: &str) -> Answered<()> {
        client
            .execute(
                "WITH asked AS (
                     UPDATE toolhost_tasks SET cancel = true
                      WHERE store = $1 AND id = $2 AND state IN ('working', 'input_required')
                     RETURNING id
                 )
                 SELECT pg_notify('toolhost_tasks', $1) FROM asked",
                &[&self.store, &id],
            )
            .await?;
        Ok(Ok(()))
    }

    /// The tasks held here, as two arrays (ids, generations).
    fn held_arrays(&self) -> (Vec<String>, Vec<i64>) {
        self.held
            .iter()
            .map(|(id, held)| (id.clone(), held.generation))
            .unzip()
    }

    /// Takes the answers and cancels asked of the tasks held here (one
    /// statement: read and cleared at once) and tells the holder.
    async fn take_asked(
        &self,
        client: &Client,
        events: &TaskEvents,
    ) -> Result<(), tokio_postgres::Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        let (ids, generations) = self.held_arrays();
        let rows = client
            .query(
                "UPDATE toolhost_tasks t SET responses = '{}'::jsonb, cancel = false
                   FROM (SELECT o.id AS asked_id, o.responses AS old_responses,
                                o.cancel AS old_cancel
                           FROM toolhost_tasks o
                           JOIN unnest($3::text[], $4::bigint[]) AS h(id, generation)
                             ON o.id = h.id AND o.generation = h.generation
                          WHERE o.store = $1 AND o.replica = $2
                            AND o.state IN ('working', 'input_required')
                            AND (o.responses <> '{}'::jsonb OR o.cancel)
                          FOR UPDATE OF o) AS asked
                  WHERE t.store = $1 AND t.id = asked.asked_id
                 RETURNING t.id, old_responses <> '{}'::jsonb,
                           CASE WHEN octet_length(old_responses::text) <= $5
                                THEN old_responses::text END,
                           old_cancel",
                &[
                    &self.store,
                    &self.replica,
                    &ids,
                    &generations,
                    &max_bytes_i32(),
                ],
            )
            .await?;
        for row in rows {
            let id: String = row.try_get(0)?;
            let (answered, text, cancel): (bool, Option<String>, bool) =
                (row.try_get(1)?, row.try_get(2)?, row.try_get(3)?);
            if answered {
                match text
                    .as_deref()
                    .map(serde_json::from_str::<Map<String, Value>>)
                {
                    Some(Ok(responses)) => send(
                        events,
                        TaskEvent::Answered {
                            id: id.clone(),
                            responses,
                        },
                    ),
                    Some(Err(e)) => {
                        tracing::warn!(task = id, "answers in the database are not valid: {e}");
                    }
                    None => tracing::warn!(
                        task = id,
                        "answers in the database are over {MAX_TASK_BYTES} bytes: not delivered"
                    ),
                }
            }
            if cancel {
                send(events, TaskEvent::CancelAsked { id });
            }
        }
        Ok(())
    }

    /// Renews the heartbeat of the unfinished tasks held here, and
    /// forgets those it no longer holds (taken over, ended, deleted).
    async fn renew(&mut self, client: &Client) -> Result<(), tokio_postgres::Error> {
        if self.held.is_empty() {
            return Ok(());
        }
        let (ids, generations) = self.held_arrays();
        let rows = client
            .query(
                "UPDATE toolhost_tasks t SET heartbeat = now()
                   FROM unnest($3::text[], $4::bigint[]) AS h(id, generation)
                  WHERE t.store = $1 AND t.replica = $2
                    AND t.id = h.id AND t.generation = h.generation
                    AND t.state IN ('working', 'input_required')
                 RETURNING t.id",
                &[&self.store, &self.replica, &ids, &generations],
            )
            .await?;
        let mut renewed = std::collections::BTreeSet::new();
        for row in rows {
            renewed.insert(row.try_get::<_, String>(0)?);
        }
        self.held.retain(|id, _| {
            let kept = renewed.contains(id);
            if !kept {
                tracing::debug!(task = id, "a task is no longer held here");
            }
            kept
        });
        Ok(())
    }

    /// Takes over at most [`TAKEN_PER_POLL`] unfinished tasks whose
    /// heartbeat is older than [`LEASE`]: one statement, which skips the
    /// rows another replica is taking, so each is taken by one replica.
    async fn take_over(
        &mut self,
        client: &Client,
        events: &TaskEvents,
    ) -> Result<(), tokio_postgres::Error> {
        let rows = client
            .query(
                &format!(
                    "UPDATE toolhost_tasks t
                        SET replica = $2, generation = t.generation + 1, heartbeat = now()
                       FROM (SELECT id AS stale_id FROM toolhost_tasks
                              WHERE store = $1 AND state IN ('working', 'input_required')
                                AND heartbeat < now() - interval '{} milliseconds'
                              ORDER BY heartbeat LIMIT $4
                              FOR UPDATE SKIP LOCKED) AS stale
                      WHERE t.store = $1 AND t.id = stale.stale_id
                        AND t.state IN ('working', 'input_required')
                     RETURNING {}",
                    LEASE.as_millis(),
                    columns()
                ),
                &[&self.store, &self.replica, &max_bytes(), &TAKEN_PER_POLL],
            )
            .await?;
        for row in rows {
            let id: String = row.try_get(0)?;
            let generation: i64 = row.try_get(10)?;
            match read(&row) {
                Ok(task) => {
                    tracing::info!(
                        task = id,
                        generation,
                        "a task whose replica stopped is held here now"
                    );
                    self.held.insert(
                        id,
                        Held {
                            generation,
                            fixed_bytes: task.fixed_bytes,
                        },
                    );
                    send(events, TaskEvent::TakenOver(task.record));
                }
                Err(why) => {
                    // It cannot be run again: it ends here.
                    tracing::warn!(
                        task = id,
                        "a task whose replica stopped cannot be read ({why}): it ends as failed"
                    );
                    client
                        .execute(
                            "UPDATE toolhost_tasks SET state = 'failed'
                              WHERE store = $1 AND id = $2 AND replica = $3 AND generation = $4",
                            &[&self.store, &id, &self.replica, &generation],
                        )
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// Deletes the store's tasks made more than twice their time to live
    /// ago.
    async fn expire(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        // (Compared in milliseconds as numbers: no interval overflows.)
        client
            .execute(
                "DELETE FROM toolhost_tasks
                  WHERE store = $1 AND extract(epoch FROM now() - created) * 500 > ttl_ms",
                &[&self.store],
            )
            .await
            .map(|_| ())
    }
}

impl NewTask {
    /// Its size, as [`record_bytes`] counts it.
    fn bytes(&self) -> usize {
        record_bytes(
            &self.owner,
            &self.tool,
            self.agent.as_deref(),
            &self.args,
            &self.detail,
        )
    }
}

/// The size of a task as the store bounds it ([`MAX_TASK_BYTES`]): its
/// arguments and status as JSON, with its owner, tool and profile.
fn record_bytes(owner: &str, tool: &str, agent: Option<&str>, args: &str, detail: &str) -> usize {
    [
        owner.len(),
        tool.len(),
        agent.map_or(0, str::len),
        args.len(),
        detail.len(),
    ]
    .into_iter()
    .fold(0, usize::saturating_add)
}

/// The columns [`read`] reads, `$3` the largest row read
/// ([`max_bytes`]).
fn columns() -> String {
    let fits = format!("{ROW_BYTES} <= $3");
    format!(
        "id, {ROW_BYTES}, CASE WHEN {fits} THEN owner END, CASE WHEN {fits} THEN tool END,
         CASE WHEN {fits} THEN agent END, CASE WHEN {fits} THEN args END,
         CASE WHEN {fits} THEN detail END, idempotent, ttl_ms, state, generation, asks"
    )
}

/// [`MAX_TASK_BYTES`] as the database counts.
fn max_bytes() -> i64 {
    i64::try_from(MAX_TASK_BYTES).unwrap_or(i64::MAX)
}

/// [`MAX_TASK_BYTES`] as `octet_length` counts.
fn max_bytes_i32() -> i32 {
    i32::try_from(MAX_TASK_BYTES).unwrap_or(i32::MAX)
}

/// Why a row is not a task.
#[derive(Debug)]
enum Unreadable {
    /// Over [`MAX_TASK_BYTES`].
    TooLarge(usize),
    Invalid(String),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::TooLarge(bytes) => {
                write!(
                    f,
                    "{bytes} bytes, over the {MAX_TASK_BYTES} a shared store keeps"
                )
            }
            Unreadable::Invalid(why) => f.write_str(why),
        }
    }
}

/// A task read back.
struct Read {
    record: TaskRecord,
    /// Its bytes but its status's.
    fixed_bytes: usize,
}

/// A task read back from the database ([`columns`]; outside input: its
/// size bounded, its JSON parsed).
fn read(row: &Row) -> Result<Read, Unreadable> {
    let invalid = |e: tokio_postgres::Error| Unreadable::Invalid(cause(&e));
    let id: String = row.try_get(0).map_err(invalid)?;
    let bytes: i64 = row.try_get(1).map_err(invalid)?;
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    if bytes > MAX_TASK_BYTES {
        return Err(Unreadable::TooLarge(bytes));
    }
    let text = |i: usize| -> Result<String, Unreadable> {
        row.try_get::<_, Option<String>>(i)
            .map_err(invalid)?
            .ok_or(Unreadable::TooLarge(bytes))
    };
    let (owner, tool, args, detail) = (text(2)?, text(3)?, text(5)?, text(6)?);
    let agent: Option<String> = row.try_get(4).map_err(invalid)?;
    let json = |what: &str, text: &str| {
        serde_json::from_str::<Value>(text)
            .map_err(|e| Unreadable::Invalid(format!("its {what} are not JSON: {e}")))
    };
    let state: String = row.try_get(9).map_err(invalid)?;
    let state = state_of(&state)
        .ok_or_else(|| Unreadable::Invalid(format!("`{state}` is not a task's state")))?;
    let ttl_ms: i64 = row.try_get(8).map_err(invalid)?;
    // A word this version does not know asks no one (the safe reading).
    let asks: String = row.try_get(11).map_err(invalid)?;
    let asks = asks
        .parse()
        .unwrap_or(toolhost_runtime::policy::AskRoute::Deny);
    Ok(Read {
        fixed_bytes: bytes.saturating_sub(detail.len()),
        record: TaskRecord {
            id,
            owner,
            tool,
            agent,
            args: json("arguments", &args)?,
            idempotent: row.try_get(7).map_err(invalid)?,
            asks,
            ttl: Duration::from_millis(u64::try_from(ttl_ms).unwrap_or(0)),
            state,
            detail: json("status", &detail)?,
        },
    })
}

/// Sends an event to the holder (none when no one receives them: logged).
fn send(events: &TaskEvents, event: TaskEvent) {
    if events.send(event).is_err() {
        tracing::info!("an event about a task reached no one: its receiver is gone");
    }
}

/// A state as the table keeps it.
fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Working => "working",
        TaskState::InputRequired => "input_required",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Cancelled => "cancelled",
        // (A state this store does not know yet: ended or not, as it says.)
        other if other.is_terminal() => "failed",
        _ => "working",
    }
}

/// A state read back from the table.
fn state_of(name: &str) -> Option<TaskState> {
    Some(match name {
        "working" => TaskState::Working,
        "input_required" => TaskState::InputRequired,
        "completed" => TaskState::Completed,
        "failed" => TaskState::Failed,
        "cancelled" => TaskState::Cancelled,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_is_read_back_as_it_was_saved() {
        for state in [
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Cancelled,
        ] {
            assert_eq!(state_of(state_name(state)), Some(state));
        }
        assert_eq!(state_of("running"), None);
    }

    #[test]
    fn a_task_is_counted_with_its_owner_tool_and_profile() {
        assert_eq!(record_bytes("ana", "build", Some("ci"), "{}", "null"), 16);
        assert_eq!(record_bytes("ana", "build", None, "{}", "null"), 14);
    }
}
