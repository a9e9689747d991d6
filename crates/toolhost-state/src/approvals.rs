//! Saved approvals in PostgreSQL: [`PostgresApprovals`].
//!
//! A store is one row of the table `toolhost_approvals` (made when
//! missing): its name, the approvals as one JSON document (the same
//! entries a file holds), and a version that every change raises.
//!
//! - **Lookups read memory.** The connection's thread keeps the newest
//!   document it has read: at connection, after each change made here,
//!   when the database notifies a change made elsewhere (`NOTIFY
//!   toolhost_approvals`, from the statement that made it), and at a poll
//!   every [`POLL`](crate::POLL) that reads the row when its version
//!   moved. A lookup answers from that copy and never waits; while the
//!   copy is not known to be current (not connected, or the database
//!   silent for two polls) it finds nothing at once, and the call is
//!   asked. A change made elsewhere holds here once its notification has
//!   been read (a round trip after it arrives), at the latest a poll
//!   after it was made.
//! - **Changes** read the row, apply the change, and write it back only if
//!   the version did not move meanwhile (compare-and-set), trying again
//!   after a short random wait when another replica was first (for up to
//!   [`CHANGE_WAIT`], so replicas saving at once take turns instead of one
//!   starving): no change is lost, and no lock is held across a round
//!   trip. A change waits for the database (each statement at most
//!   [`ANSWER_WAIT`](crate::connection::ANSWER_WAIT)): callers on an async
//!   runtime run it on a blocking thread.

use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use tokio_postgres::Client;
use toolhost_policy::approvals::{
    ApprovalsError, Change, MAX_APPROVALS, SavedApproval, Stamp, Store,
};

use crate::connection::{self, ANSWER_WAIT, DatabaseError, Link, Lost, Session, Target};

/// The notification channel every replica listens on (its payload:
/// `VERSION STORE`).
pub const CHANNEL: &str = "toolhost_approvals";
/// How long a change keeps trying while other replicas change the row
/// first.
pub const CHANGE_WAIT: Duration = Duration::from_secs(5);
/// The largest approvals document read back (as a file may hold).
pub const MAX_DOCUMENT_BYTES: usize = 8 << 20;
/// The longest random wait between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(40);

/// The document as last read: its version and its entries (or why they
/// are not valid).
#[derive(Debug, Clone)]
struct Document {
    version: u64,
    entries: Result<Arc<Vec<SavedApproval>>, String>,
}

impl Document {
    fn parse(text: &str, version: u64) -> Document {
        let entries = if text.len() > MAX_DOCUMENT_BYTES {
            Err(format!("over {MAX_DOCUMENT_BYTES} bytes"))
        } else {
            match serde_json::from_str::<Vec<SavedApproval>>(text) {
                Err(e) => Err(e.to_string()),
                Ok(entries) if entries.len() > MAX_APPROVALS => {
                    Err(format!("over {MAX_APPROVALS} approvals"))
                }
                Ok(entries) => Ok(Arc::new(entries)),
            }
        };
        Document { version, entries }
    }
}

/// What the connection's thread keeps for the store's callers: the
/// newest document it read.
#[derive(Debug, Default)]
struct Latest(Mutex<Option<Document>>);

impl Latest {
    /// Keeps `document`, read from (or just written to) the database.
    fn keep(&self, document: Document) {
        *self.0.lock() = Some(document);
    }

    fn document(&self) -> Option<Document> {
        self.0.lock().clone()
    }

    fn version(&self) -> Option<u64> {
        self.0.lock().as_ref().map(|d| d.version)
    }
}

/// A request to the connection's thread (a change's statements; lookups
/// never send one).
enum Request {
    /// The document as it is now.
    Read(std::sync::mpsc::SyncSender<Result<Document, DatabaseError>>),
    /// Replace the document if its version is still `expected`: the new
    /// version, or `None` when another replica changed it first.
    Write {
        expected: u64,
        text: String,
        reply: std::sync::mpsc::SyncSender<Result<Option<u64>, DatabaseError>>,
    },
}

/// Saved approvals that replicas share through PostgreSQL.
#[derive(Debug)]
pub struct PostgresApprovals {
    link: Link<Request>,
    latest: Arc<Latest>,
    name: String,
    describe: String,
}

impl PostgresApprovals {
    /// The store `name` in the database `url` names (`postgres://…` or
    /// `host=… user=… dbname=…`, with libpq's `sslmode`, `sslrootcert`,
    /// `sslcert` and `sslkey`: see [`crate::tls`]). It connects in the
    /// background and returns at once; until connected, lookups find
    /// nothing (the call is asked) and changes wait for the first attempt.
    pub fn connect(url: &str, name: &str) -> Result<PostgresApprovals, DatabaseError> {
        let target = Target::parse(url)?;
        let latest = Arc::new(Latest::default());
        let describe = target.describe().to_owned();
        let session = Approvals {
            store: name.to_owned(),
            latest: Arc::clone(&latest),
        };
        Ok(PostgresApprovals {
            link: connection::start(target, session)?,
            latest,
            name: name.to_owned(),
            describe,
        })
    }

    /// Whether the connection is up now.
    pub fn connected(&self) -> bool {
        self.link.health().connected()
    }

    /// Why lookups find nothing now (`None`: the copy is current).
    pub fn trouble(&self) -> Option<Lost> {
        self.link.health().trouble()
    }

    /// Waits at most `wait` for the first connection attempt to end: a
    /// command that runs once (`host approvals list`) reads what the
    /// database holds, not the nothing of a store still connecting.
    pub fn wait_connected(&self, wait: Duration) -> Result<(), DatabaseError> {
        let started = Instant::now();
        loop {
            match self.link.health().trouble() {
                None => return Ok(()),
                Some(Lost::NotYet) if started.elapsed() < wait => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Some(why) => return Err(DatabaseError::Unreachable(why)),
            }
        }
    }

    fn unavailable(&self, e: &DatabaseError) -> ApprovalsError {
        ApprovalsError::Unavailable {
            store: self.describe(),
            message: e.to_string(),
        }
    }

    fn entries(&self, document: &Document) -> Result<Vec<SavedApproval>, ApprovalsError> {
        match &document.entries {
            Ok(entries) => Ok(entries.to_vec()),
            Err(why) => Err(self.unavailable(&DatabaseError::Invalid(why.clone()))),
        }
    }

    /// The document to change: the copy when it is current, else read.
    fn fresh(&self) -> Result<Document, ApprovalsError> {
        if self.link.health().current()
            && let Some(document) = self.latest.document()
        {
            return Ok(document);
        }
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.link
            .send(Request::Read(reply))
            .map_err(|why| self.unavailable(&DatabaseError::Unreachable(why)))?;
        wait(&answer).map_err(|e| self.unavailable(&e))
    }

    fn write(&self, expected: u64, text: String) -> Result<Option<u64>, ApprovalsError> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.link
            .send(Request::Write {
                expected,
                text,
                reply,
            })
            .map_err(|why| self.unavailable(&DatabaseError::Unreachable(why)))?;
        wait(&answer).map_err(|e| self.unavailable(&e))
    }
}

/// The answer to a request, waited for at most twice [`ANSWER_WAIT`] (a
/// request sent during a connection attempt is answered after it).
fn wait<T>(
    answer: &std::sync::mpsc::Receiver<Result<T, DatabaseError>>,
) -> Result<T, DatabaseError> {
    answer
        .recv_timeout(2 * ANSWER_WAIT)
        .map_err(|_| DatabaseError::Timeout)?
}

impl Store for PostgresApprovals {
    fn describe(&self) -> String {
        format!("store `{}` of {}", self.name, self.describe)
    }

    fn unchanged_since(&self, seen: &Stamp) -> bool {
        self.link.health().current() && seen.as_version() == self.latest.version()
    }

    /// The copy (see the module docs): never waits.
    fn read(&self) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
        if let Some(why) = self.link.health().trouble() {
            return Err(self.unavailable(&DatabaseError::Unreachable(why)));
        }
        let Some(document) = self.latest.document() else {
            return Err(self.unavailable(&DatabaseError::Unreachable(Lost::NotYet)));
        };
        Ok((self.entries(&document)?, Stamp::version(document.version)))
    }

    fn change(&self, f: Change<'_>) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
        let deadline = Instant::now() + CHANGE_WAIT;
        let mut tries: u32 = 0;
        loop {
            let document = self.fresh()?;
            let mut entries = self.entries(&document)?;
            let before = entries.clone();
            f(&mut entries)?;
            if entries == before {
                return Ok((entries, Stamp::version(document.version)));
            }
            let text =
                serde_json::to_string(&entries).map_err(|e| ApprovalsError::Unavailable {
                    store: self.describe(),
                    message: e.to_string(),
                })?;
            match self.write(document.version, text)? {
                Some(version) => return Ok((entries, Stamp::version(version))),
                None => tracing::debug!("saved approvals: another replica changed them first"),
            }
            tries = tries.saturating_add(1);
            if Instant::now() >= deadline {
                return Err(ApprovalsError::Unavailable {
                    store: self.describe(),
                    message: format!(
                        "other replicas changed the approvals first {tries} times in {} s",
                        CHANGE_WAIT.as_secs()
                    ),
                });
            }
            std::thread::sleep(pause(tries));
        }
    }
}

/// The approvals' side of the connection.
struct Approvals {
    store: String,
    latest: Arc<Latest>,
}

impl Approvals {
    /// Reads the row and keeps it.
    async fn read(&self, client: &Client) -> Result<Document, tokio_postgres::Error> {
        let row = client
            .query_one(
                "SELECT approvals::text, version FROM toolhost_approvals WHERE store = $1",
                &[&self.store],
            )
            .await?;
        let document = Document::parse(&row.try_get::<_, String>(0)?, version(&row, 1)?);
        self.latest.keep(document.clone());
        Ok(document)
    }
}

impl Session for Approvals {
    type Request = Request;
    const NAME: &'static str = "saved approvals";
    const THREAD: &'static str = "toolhost-approvals";

    async fn setup(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        // Three replicas starting at once make the table once: the
        // advisory lock orders them.
        client
            .batch_execute(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(7262718);
                 CREATE TABLE IF NOT EXISTS toolhost_approvals (
                     store text PRIMARY KEY,
                     approvals jsonb NOT NULL,
                     version bigint NOT NULL
                 );
                 COMMIT;
                 LISTEN toolhost_approvals;",
            )
            .await?;
        client
            .execute(
                "INSERT INTO toolhost_approvals (store, approvals, version)
                 VALUES ($1, '[]'::jsonb, 1) ON CONFLICT (store) DO NOTHING",
                &[&self.store],
            )
            .await?;
        self.read(client).await.map(|_| ())
    }

    async fn serve(
        &mut self,
        client: &mut Client,
        request: Request,
    ) -> Result<(), tokio_postgres::Error> {
        match request {
            Request::Read(reply) => {
                let read = self.read(client).await;
                let _ = reply.try_send(read.as_ref().map(Document::clone).map_err(statement));
                read.map(|_| ())
            }
            Request::Write {
                expected,
                text,
                reply,
            } => {
                let Ok(expected_sql) = i64::try_from(expected) else {
                    let _ =
                        reply.try_send(Err(DatabaseError::Invalid("version out of range".into())));
                    return Ok(());
                };
                // One statement: the compare-and-set and the notification
                // commit together, or neither does.
                let written = client
                    .query_opt(
                        "WITH changed AS (
                             UPDATE toolhost_approvals
                                SET approvals = $2::text::jsonb, version = version + 1
                              WHERE store = $1 AND version = $3
                          RETURNING version
                         )
                         SELECT version, pg_notify('toolhost_approvals', version::text || ' ' || $1)
                           FROM changed",
                        &[&self.store, &text, &expected_sql],
                    )
                    .await
                    .and_then(|row| row.map(|row| version(&row, 0)).transpose());
                match written {
                    Ok(Some(version)) => {
                        // What this replica wrote is what the row holds.
                        self.latest.keep(Document::parse(&text, version));
                        let _ = reply.try_send(Ok(Some(version)));
                    }
                    Ok(None) => {
                        let _ = reply.try_send(Ok(None));
                    }
                    Err(e) => {
                        let _ = reply.try_send(Err(statement(&e)));
                        return Err(e);
                    }
                }
                Ok(())
            }
        }
    }

    async fn notified(
        &mut self,
        client: &mut Client,
        payload: String,
    ) -> Result<(), tokio_postgres::Error> {
        // `VERSION STORE`, from the statement that changed it (this
        // replica's own changes it has kept already).
        if let Some((version, name)) = payload.split_once(' ')
            && name == self.store
            && let Ok(version) = version.parse::<u64>()
            && Some(version) != self.latest.version()
        {
            self.read(client).await?;
        }
        Ok(())
    }

    async fn poll(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        // The row, only when its version moved (a notification lost).
        let seen = i64::try_from(self.latest.version().unwrap_or(0)).unwrap_or(i64::MAX);
        let row = client
            .query_opt(
                "SELECT approvals::text, version FROM toolhost_approvals
                  WHERE store = $1 AND version <> $2",
                &[&self.store, &seen],
            )
            .await?;
        if let Some(row) = row {
            let document = Document::parse(&row.try_get::<_, String>(0)?, version(&row, 1)?);
            self.latest.keep(document);
        }
        Ok(())
    }

    fn refuse(&mut self, request: Request, why: &Lost) {
        let why = DatabaseError::Unreachable(why.clone());
        match request {
            Request::Read(reply) => {
                let _ = reply.try_send(Err(why));
            }
            Request::Write { reply, .. } => {
                let _ = reply.try_send(Err(why));
            }
        }
    }
}

/// The version in column `at`.
fn version(row: &tokio_postgres::Row, at: usize) -> Result<u64, tokio_postgres::Error> {
    Ok(u64::try_from(row.try_get::<_, i64>(at)?).unwrap_or(0))
}

fn statement(e: &tokio_postgres::Error) -> DatabaseError {
    DatabaseError::Statement(connection::cause(e))
}

/// A random wait before try `tries + 1`, up to twice as long as the last
/// (from 1 ms to [`MAX_PAUSE`]), so replicas that collided try apart.
fn pause(tries: u32) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let ceiling = Duration::from_millis(1)
        .saturating_mul(1u32.checked_shl(tries.min(6)).unwrap_or(64))
        .min(MAX_PAUSE);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(tries);
    let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(hasher.finish() % nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_between_tries_are_random_and_bounded() {
        for tries in [1, 3, 6, 40, u32::MAX] {
            let p = pause(tries);
            assert!(p <= MAX_PAUSE, "{p:?}");
        }
        let first: Vec<Duration> = (0..32).map(|_| pause(6)).collect();
        assert!(first.windows(2).any(|w| w[0] != w[1]), "never random");
    }

    #[test]
    fn a_document_over_its_bounds_or_not_json_is_kept_as_invalid() {
        assert!(Document::parse("[]", 3).entries.is_ok_and(|e| e.is_empty()));
        assert!(Document::parse("{", 3).entries.is_err());
        let huge = format!("[{}]", " ".repeat(MAX_DOCUMENT_BYTES));
        assert!(Document::parse(&huge, 3).entries.is_err());
    }
}
