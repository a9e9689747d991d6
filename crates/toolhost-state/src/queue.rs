//! The operator's queue shared by replicas through PostgreSQL:
//! [`PostgresQueue`], a [`QueueStore`] for
//! [`OperatorQueue::with_store`](toolhost_runtime::operator::OperatorQueue::with_store).
//!
//! A call that waits for the operator waits in the replica that holds it
//! (its caller's connection is there); the database is where the others
//! see it. The table `toolhost_asks` (made when missing) has one row per
//! waiting ask: its store name, its id (each replica numbers from a range
//! of its own), the replica that holds it, the question as JSON (bounded:
//! [`MAX_ASK_BYTES`]), a lease, and the answer once given.
//!
//! - Holding an ask is a transaction that counts the store's live asks
//!   (gone ones do not count) under an advisory lock (at most [`PostgresQueue::capacity`], else the ask
//!   is denied as when a queue is full), inserts the row and notifies.
//! - The holder renews its asks' lease every [`POLL`]; an ask whose lease
//!   ran out ([`LEASE`]: its replica stopped, or lost the database) is
//!   listed as gone and cannot be answered; it is deleted [`GONE_KEPT`]
//!   later.
//! - Answering an ask held elsewhere is a transaction: the row is locked,
//!   checked (waiting, its holder alive, "allow always" only where
//!   offered), the answer written, and the replicas notified
//!   (`NOTIFY toolhost_asks`). The holder takes the answer (deleting the
//!   row) at the notification, or at its next poll when one is lost.
//!
//! A replica that loses the database keeps its own asks waiting and
//! answerable on its own console, says so ([`QueueStore::trouble`]),
//! lists nothing from elsewhere, and shows its asks again when it is back.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolhost_runtime::operator::{OperatorQueue, QueueSettings};
//! use toolhost_state::PostgresQueue;
//!
//! let store = PostgresQueue::connect("host=db.internal user=toolhost dbname=toolhost", "main")?;
//! let queue = OperatorQueue::with_store(QueueSettings::default(), Arc::new(store));
//! # let _ = queue;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio_postgres::Client;
use toolhost_runtime::operator::{
    Answer, Inbox, MAX_ASK_BYTES, Pending, Place, QueueError, QueueStore, StoreError, StoreFuture,
};

use crate::connection::{self, ANSWER_WAIT, DatabaseError, Link, Lost, Session, Target, cause};

/// The notification channel (its payload: the store's name).
pub const CHANNEL: &str = "toolhost_asks";
/// How long an ask stays answerable elsewhere after its replica last
/// renewed it (every [`POLL`]).
pub const LEASE: Duration = Duration::from_secs(5);
/// How long an ask whose replica is gone is still listed (as gone).
pub const GONE_KEPT: Duration = Duration::from_secs(300);
/// The most asks one store keeps across its replicas, by default.
pub const DEFAULT_CAPACITY: usize = 256;
/// The longest answer read back (a denial's reason is cut at 300
/// characters).
const MAX_ANSWER_BYTES: usize = 4096;

/// What the connection's thread and the store share.
#[derive(Default)]
struct Shared {
    capacity: AtomicUsize,
    /// The asks held elsewhere, as last listed.
    elsewhere: Mutex<Vec<Pending>>,
    inbox: Mutex<Option<Inbox>>,
}

impl Shared {
    /// The connection was lost: nothing from elsewhere is listed.
    fn forget(&self) {
        let had = std::mem::take(&mut *self.elsewhere.lock());
        if !had.is_empty() {
            self.changed();
        }
    }

    fn inbox(&self) -> Option<Inbox> {
        self.inbox.lock().clone()
    }

    fn changed(&self) {
        if let Some(inbox) = self.inbox() {
            inbox.changed();
        }
    }
}

/// An ask held here, as the database keeps it.
#[derive(Debug, Clone)]
struct Held {
    /// The [`Pending`] as JSON.
    text: String,
}

/// A request to the connection's thread.
enum Request {
    Hold {
        id: u64,
        held: Held,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Release(u64),
    Answer {
        id: u64,
        answer: String,
        always: bool,
        reply: oneshot::Sender<Result<(), QueueError>>,
    },
}

/// The operator's queue in a PostgreSQL database that replicas share (see
/// the module docs). Its connection runs on a thread of its own, which
/// ends when this is dropped.
pub struct PostgresQueue {
    link: Link<Request>,
    shared: Arc<Shared>,
    name: String,
    describe: String,
    /// This replica's number: its asks' ids are `replica << 32` and up.
    replica: u64,
}

impl std::fmt::Debug for PostgresQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresQueue")
            .field("store", &self.name)
            .field("database", &self.describe)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl PostgresQueue {
    /// The queue `name` in the database `url` names (`postgres://…` or
    /// `host=… user=… dbname=…`, TLS as [`crate::tls`] reads it). It
    /// connects in the background and returns at once; until connected,
    /// asks wait on this replica only.
    pub fn connect(url: &str, name: &str) -> Result<PostgresQueue, DatabaseError> {
        let target = Target::parse(url)?;
        let describe = target.describe().to_owned();
        // A range of ids of its own (ids stay below 2^53, a number a
        // browser's script reads exactly).
        let mut bytes = [0u8; 4];
        getrandom::fill(&mut bytes).map_err(|e| {
            DatabaseError::Unreachable(Lost::Failed(format!("no random number for its ids: {e}")))
        })?;
        let replica = u64::from(u32::from_le_bytes(bytes) % ((1 << 21) - 1)) + 1;
        let shared = Arc::new(Shared {
            capacity: AtomicUsize::new(DEFAULT_CAPACITY),
            ..Shared::default()
        });
        let session = Queue {
            store: name.to_owned(),
            replica,
            shared: Arc::clone(&shared),
            held: BTreeMap::new(),
        };
        Ok(PostgresQueue {
            link: connection::start(target, session)?,
            shared,
            name: name.to_owned(),
            describe,
            replica,
        })
    }

    /// At most `asks` asks wait in this store across all its replicas
    /// ([`DEFAULT_CAPACITY`] by default); one more is denied at once.
    #[must_use]
    pub fn capacity(self, asks: usize) -> PostgresQueue {
        self.shared.capacity.store(asks.max(1), Ordering::Release);
        self
    }

    /// Whether the connection is up now.
    pub fn connected(&self) -> bool {
        self.link.health().connected()
    }

    /// Stops at once, as a replica that died: the connection is dropped,
    /// nothing is taken back, and this replica's asks are left for their
    /// lease to run out. (For tests of a replica lost; a replica that
    /// stops cleanly takes its asks back as their calls end.)
    pub fn halt(&self) {
        self.link.halt();
    }

    fn unreachable(&self) -> String {
        format!(
            "{}: the database is not reachable: {}",
            self.describe(),
            self.link.health().lost()
        )
    }
}

impl QueueStore for PostgresQueue {
    fn describe(&self) -> String {
        format!("queue `{}` of {}", self.name, self.describe)
    }

    fn first_id(&self) -> u64 {
        (self.replica << 32) | 1
    }

    fn attach(&self, inbox: Inbox) {
        *self.shared.inbox.lock() = Some(inbox);
    }

    fn hold<'a>(&'a self, ask: &'a Pending) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let unreachable = |message: String| StoreError::Unreachable {
                store: self.describe(),
                message,
            };
            let text = serde_json::to_string(ask).map_err(|e| unreachable(e.to_string()))?;
            if text.len() > MAX_ASK_BYTES {
                return Err(StoreError::TooLarge(text.len()));
            }
            let (reply, answer) = oneshot::channel();
            self.link
                .send(Request::Hold {
                    id: ask.id,
                    held: Held { text },
                    reply,
                })
                .map_err(|why| unreachable(why.to_string()))?;
            match tokio::time::timeout(2 * ANSWER_WAIT, answer).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) | Err(_) => Err(unreachable(format!(
                    "no answer within {} s",
                    (2 * ANSWER_WAIT).as_secs()
                ))),
            }
        })
    }

    fn release(&self, id: u64) {
        let _ = self.link.send(Request::Release(id));
    }

    fn elsewhere(&self) -> Vec<Pending> {
        if !self.link.health().current() {
            return Vec::new();
        }
        self.shared.elsewhere.lock().clone()
    }

    fn answer<'a>(
        &'a self,
        id: u64,
        answer: &'a Answer,
    ) -> StoreFuture<'a, Result<(), QueueError>> {
        Box::pin(async move {
            let text = serde_json::to_string(answer)
                .map_err(|e| QueueError::Unreachable(id, e.to_string()))?;
            let (reply, answered) = oneshot::channel();
            self.link
                .send(Request::Answer {
                    id,
                    answer: text,
                    always: *answer == Answer::AllowAlways,
                    reply,
                })
                .map_err(|_| QueueError::Unreachable(id, self.unreachable()))?;
            match tokio::time::timeout(2 * ANSWER_WAIT, answered).await {
                Ok(Ok(Err(QueueError::Unreachable(id, _)))) => {
                    Err(QueueError::Unreachable(id, self.unreachable()))
                }
                Ok(Ok(result)) => result,
                Ok(Err(_)) | Err(_) => Err(QueueError::Unreachable(id, self.unreachable())),
            }
        })
    }

    fn trouble(&self) -> Option<String> {
        let why = self.link.health().trouble()?;
        Some(format!(
            "{}: the database is not reachable: {why}",
            self.describe()
        ))
    }
}

/// The queue's side of the connection, and what only it keeps.
struct Queue {
    store: String,
    replica: u64,
    shared: Arc<Shared>,
    /// The asks held here, to show again after a reconnect.
    held: BTreeMap<u64, Held>,
}

impl Session for Queue {
    type Request = Request;
    const NAME: &'static str = "operator's queue";
    const THREAD: &'static str = "toolhost-queue";

    /// Makes the table when missing, listens, and shows the asks held
    /// here again.
    async fn setup(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        // Replicas starting at once make the table once: the advisory
        // lock (the approvals' own) orders them.
        client
            .batch_execute(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(7262718);
                 CREATE TABLE IF NOT EXISTS toolhost_asks (
                     store text NOT NULL,
                     id bigint NOT NULL,
                     holder bigint NOT NULL,
                     question jsonb NOT NULL,
                     lease_until timestamptz NOT NULL,
                     answer jsonb,
                     PRIMARY KEY (store, id)
                 );
                 COMMIT;
                 LISTEN toolhost_asks;",
            )
            .await?;
        let held: Vec<(u64, Held)> = self.held.iter().map(|(k, v)| (*k, v.clone())).collect();
        for (id, held) in held {
            match self.insert(client, id, &held).await {
                Err(e) if client.is_closed() => return Err(e),
                Err(e) => tracing::warn!(id, "an ask could not be shown again: {}", cause(&e)),
                Ok(Err(e)) => tracing::warn!(id, "an ask could not be shown again: {e}"),
                Ok(Ok(())) => {}
            }
        }
        self.refresh(client).await?;
        self.shared.changed();
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
            Request::Hold { id, held, reply } => {
                self.held.insert(id, held.clone());
                match self.insert(client, id, &held).await {
                    Ok(result) => {
                        let _ = reply.send(result);
                    }
                    Err(e) => {
                        let _ = reply.send(Err(StoreError::Unreachable {
                            store: format!("queue `{}`", self.store),
                            message: cause(&e),
                        }));
                        return Err(e);
                    }
                }
            }
            Request::Release(id) => {
                self.held.remove(&id);
                let id = sql_id(id);
                client
                    .execute(
                        "WITH gone AS (
                             DELETE FROM toolhost_asks WHERE store = $1 AND id = $2 AND holder = $3
                             RETURNING id
                         )
                         SELECT pg_notify('toolhost_asks', $1) FROM gone",
                        &[&self.store, &id, &sql_id(self.replica)],
                    )
                    .await?;
            }
            Request::Answer {
                id,
                answer,
                always,
                reply,
            } => match self.answer(client, id, &answer, always).await {
                Ok(result) => {
                    let _ = reply.send(result);
                }
                Err(e) => {
                    let _ = reply.send(Err(QueueError::Unreachable(id, cause(&e))));
                    return Err(e);
                }
            },
        }
        Ok(())
    }

    async fn notified(
        &mut self,
        client: &mut Client,
        payload: String,
    ) -> Result<(), tokio_postgres::Error> {
        if payload == self.store {
            self.refresh(client).await?;
        }
        Ok(())
    }

    async fn poll(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        self.renew(client).await
    }

    /// Disconnected: asks held meanwhile wait here, and are shown when
    /// back.
    fn refuse(&mut self, request: Request, why: &Lost) {
        let why = why.to_string();
        match request {
            Request::Hold { id, held, reply } => {
                self.held.insert(id, held);
                let _ = reply.send(Err(StoreError::Unreachable {
                    store: format!("queue `{}`", self.store),
                    message: why,
                }));
            }
            Request::Release(id) => {
                self.held.remove(&id);
            }
            Request::Answer { id, reply, .. } => {
                let _ = reply.send(Err(QueueError::Unreachable(id, why)));
            }
        }
    }

    fn down(&mut self, _: &Lost) {
        self.shared.forget();
        self.shared.changed();
    }
}

impl Queue {
    /// Shows ask `id` (held here) to the other replicas: a transaction
    /// that counts the store's asks first.
    async fn insert(
        &self,
        client: &mut Client,
        id: u64,
        held: &Held,
    ) -> Result<Result<(), StoreError>, tokio_postgres::Error> {
        let capacity = self.shared.capacity.load(Ordering::Acquire);
        let tx = client.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('toolhost_asks ' || $1))",
            &[&self.store],
        )
        .await?;
        let others: i64 = tx
            .query_one(
                "SELECT count(*) FROM toolhost_asks
                  WHERE store = $1 AND id <> $2 AND lease_until > now()",
                &[&self.store, &sql_id(id)],
            )
            .await?
            .try_get(0)?;
        if usize::try_from(others).unwrap_or(usize::MAX) >= capacity {
            tx.rollback().await?;
            return Ok(Err(StoreError::Full(capacity)));
        }
        let inserted = tx
            .execute(
                &format!(
                    "INSERT INTO toolhost_asks (store, id, holder, question, lease_until)
                     VALUES ($1, $2, $3, $4::text::jsonb, now() + interval '{} milliseconds')
                     ON CONFLICT (store, id) DO UPDATE
                        SET question = EXCLUDED.question, lease_until = EXCLUDED.lease_until
                      WHERE toolhost_asks.holder = EXCLUDED.holder",
                    LEASE.as_millis()
                ),
                &[&self.store, &sql_id(id), &sql_id(self.replica), &held.text],
            )
            .await?;
        if inserted == 0 {
            tx.rollback().await?;
            return Ok(Err(StoreError::Unreachable {
                store: format!("queue `{}`", self.store),
                message: format!("another replica holds an ask numbered {id}"),
            }));
        }
        tx.execute("SELECT pg_notify('toolhost_asks', $1)", &[&self.store])
            .await?;
        tx.commit().await?;
        Ok(Ok(()))
    }

    /// Answers ask `id`, held elsewhere: a transaction that locks its row
    /// and checks it first.
    async fn answer(
        &self,
        client: &mut Client,
        id: u64,
        answer: &str,
        always: bool,
    ) -> Result<Result<(), QueueError>, tokio_postgres::Error> {
        let tx = client.transaction().await?;
        let row = tx
            .query_opt(
                "SELECT question::text, lease_until > now(), answer IS NOT NULL, holder = $3
                   FROM toolhost_asks WHERE store = $1 AND id = $2 FOR UPDATE",
                &[&self.store, &sql_id(id), &sql_id(self.replica)],
            )
            .await?;
        let Some(row) = row else {
            return Ok(Err(QueueError::NotWaiting(id)));
        };
        let (question, alive, answered, mine): (String, bool, bool, bool) = (
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        );
        // (Held here but no longer waiting here: its call ended.)
        if answered || mine {
            return Ok(Err(QueueError::NotWaiting(id)));
        }
        if !alive {
            return Ok(Err(QueueError::Gone(id)));
        }
        if always && !pending(&question).is_some_and(|p| p.question.offers_always()) {
            return Ok(Err(QueueError::AlwaysNotOffered(id)));
        }
        tx.execute(
            "UPDATE toolhost_asks SET answer = $3::text::jsonb WHERE store = $1 AND id = $2",
            &[&self.store, &sql_id(id), &answer],
        )
        .await?;
        tx.execute("SELECT pg_notify('toolhost_asks', $1)", &[&self.store])
            .await?;
        tx.commit().await?;
        // Answered from here: no longer listed here, even before the
        // notification comes back and the list is read again.
        let listed = {
            let mut elsewhere = self.shared.elsewhere.lock();
            let before = elsewhere.len();
            elsewhere.retain(|p| p.id != id);
            elsewhere.len() != before
        };
        if listed {
            self.shared.changed();
        }
        Ok(Ok(()))
    }

    /// Every [`POLL`]: renews the lease of the asks held here, forgets
    /// asks long gone, and reads again (a notification may be lost).
    async fn renew(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        client
            .execute(
                &format!(
                    "UPDATE toolhost_asks SET lease_until = now() + interval '{} milliseconds'
                      WHERE store = $1 AND holder = $2",
                    LEASE.as_millis()
                ),
                &[&self.store, &sql_id(self.replica)],
            )
            .await?;
        client
            .execute(
                &format!(
                    "DELETE FROM toolhost_asks
                      WHERE store = $1 AND lease_until < now() - interval '{} seconds'",
                    GONE_KEPT.as_secs()
                ),
                &[&self.store],
            )
            .await?;
        self.refresh(client).await
    }

    /// Takes the answers given elsewhere to asks held here (and hands them
    /// to the waiting calls), then lists the asks held elsewhere.
    async fn refresh(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        let answers = client
            .query(
                "DELETE FROM toolhost_asks
                  WHERE store = $1 AND holder = $2 AND answer IS NOT NULL
                  RETURNING id, answer::text",
                &[&self.store, &sql_id(self.replica)],
            )
            .await?;
        for row in answers {
            let (id, text): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
            let Ok(id) = u64::try_from(id) else { continue };
            let Some(answer) = answer(&text) else {
                tracing::warn!(id, "an answer in the database is not one: ignored");
                continue;
            };
            if let Some(inbox) = self.shared.inbox()
                && let Err(e) = inbox.answer(id, answer)
            {
                tracing::info!(id, "an answer given elsewhere reached no call here: {e}");
            }
        }
        let capacity = self.shared.capacity.load(Ordering::Acquire);
        let rows = client
            .query(
                "SELECT id, question::text, lease_until > now()
                   FROM toolhost_asks
                  WHERE store = $1 AND holder <> $2 AND answer IS NULL
                    AND octet_length(question::text) <= $3
                  ORDER BY id LIMIT $4",
                &[
                    &self.store,
                    &sql_id(self.replica),
                    &i32::try_from(MAX_ASK_BYTES).unwrap_or(i32::MAX),
                    &i64::try_from(capacity).unwrap_or(i64::MAX),
                ],
            )
            .await?;
        let mut listed = Vec::with_capacity(rows.len());
        for row in rows {
            let (id, text, alive): (i64, String, bool) =
                (row.try_get(0)?, row.try_get(1)?, row.try_get(2)?);
            match pending(&text) {
                Some(mut p) if u64::try_from(id).is_ok_and(|id| id == p.id) => {
                    p.place = if alive { Place::Elsewhere } else { Place::Gone };
                    listed.push(p);
                }
                _ => tracing::debug!(id, "an ask in the database is not one: not listed"),
            }
        }
        let changed = {
            let mut elsewhere = self.shared.elsewhere.lock();
            let key = |l: &[Pending]| l.iter().map(|p| (p.id, p.place)).collect::<Vec<_>>();
            let changed = key(&elsewhere) != key(&listed);
            *elsewhere = listed;
            changed
        };
        if changed {
            self.shared.changed();
        }
        Ok(())
    }
}

/// An ask read back from the database (outside input: bounded again).
fn pending(text: &str) -> Option<Pending> {
    if text.len() > MAX_ASK_BYTES {
        return None;
    }
    let mut p: Pending = serde_json::from_str(text).ok()?;
    p.question = p.question.bounded();
    Some(p)
}

/// An answer read back from the database (a denial's reason bounded).
fn answer(text: &str) -> Option<Answer> {
    if text.len() > MAX_ANSWER_BYTES {
        return None;
    }
    Some(match serde_json::from_str(text).ok()? {
        Answer::Deny(why) => Answer::Deny(toolhost_text::line(&why, 300)),
        other => other,
    })
}

/// An id as the database keeps it (ids stay below 2^53).
fn sql_id(id: u64) -> i64 {
    i64::try_from(id).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_back_are_bounded_and_anything_else_is_refused() {
        assert_eq!(answer("\"allow\""), Some(Answer::Allow));
        assert_eq!(
            answer("{\"allow-within\": 1}"),
            Some(Answer::AllowWithin(1))
        );
        let long = serde_json::to_string(&Answer::Deny("x".repeat(1000))).unwrap();
        assert!(matches!(answer(&long), Some(Answer::Deny(why)) if why.chars().count() <= 301));
        assert_eq!(answer("\"yes\""), None);
        assert_eq!(
            answer(&format!("\"{}\"", "a".repeat(MAX_ANSWER_BYTES))),
            None
        );
    }

    #[test]
    fn the_largest_question_fits_a_shared_queue() {
        let args: serde_json::Map<String, serde_json::Value> = (0..100)
            .map(|i| {
                (
                    format!("{i:0>300}"),
                    serde_json::json!("\u{202e}".repeat(5000)),
                )
            })
            .collect();
        let mut q = toolhost_runtime::operator::Question::call(
            &"t".repeat(10_000),
            "p",
            &serde_json::Value::Object(args),
        );
        q.reasons = vec!["\u{202e}".repeat(1000); 100];
        q.output = Some("\u{202e}".repeat(20_000));
        q.agent = Some("\u{202e}".repeat(1000));
        q.client = Some("\u{202e}".repeat(1000));
        let q = q.bounded();
        let p = Pending {
            id: 1,
            place: Place::Here,
            question: q,
            asked_at_ms: 0,
            deadline_ms: 0,
        };
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.len() <= MAX_ASK_BYTES, "{}", text.len());
        assert!(pending(&text).is_some());
    }
}
