//! The console's recent failures shared by replicas through PostgreSQL:
//! [`PostgresFailures`], a [`FailureLog`] for the operator's console
//! (`toolhost_console::ConsoleOptions::failures`).
//!
//! Each replica writes its failed calls to the table `toolhost_failures`
//! (made when missing: the store's name, the replica's, the failure as
//! JSON) from a thread of its own, and reads the others' last
//! [`KEPT`] every [`POLL`](crate::POLL); a store keeps its newest
//! [`ROWS_KEPT`] rows.
//! Writing never waits: a failure that finds the queue full or the
//! database gone is dropped (the replica's own console still lists it). A
//! replica that cannot read the database says so on its console and lists
//! its own failures only.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolhost_runtime::failures::FailureLog;
//! use toolhost_state::PostgresFailures;
//!
//! let log: Arc<dyn FailureLog> =
//!     Arc::new(PostgresFailures::connect("host=db.internal user=toolhost dbname=toolhost", "main")?);
//! # let _ = log;
//! # Ok::<(), toolhost_state::DatabaseError>(())
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use tokio_postgres::Client;
use toolhost_runtime::failures::{Failure, FailureLog};

use crate::connection::{self, DatabaseError, Link, Lost, Session, Target};

/// The most failures of other replicas listed.
pub const KEPT: i64 = 50;
/// The rows a store keeps (the oldest beyond are deleted).
pub const ROWS_KEPT: i64 = 500;
/// The longest failure read back, as JSON.
const MAX_ROW_BYTES: usize = 4096;
/// Failures waiting to be written.
const QUEUED: usize = 256;
/// Every how many polls the oldest rows are deleted.
const PRUNE_EVERY: u64 = 60;

#[derive(Default)]
struct Shared {
    elsewhere: Mutex<Vec<Failure>>,
    /// Failures sent to the thread and not written yet.
    queued: AtomicUsize,
}

/// The recent failures replicas share through PostgreSQL (see the module
/// docs).
pub struct PostgresFailures {
    link: Link<Failure>,
    shared: Arc<Shared>,
    replica: String,
    describe: String,
}

impl std::fmt::Debug for PostgresFailures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresFailures")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl PostgresFailures {
    /// The store `store` in the database `url` names (TLS as
    /// [`crate::tls`] reads it). It connects on a thread of its own and
    /// returns at once; until connected, the others' failures are not
    /// listed and the console says why.
    pub fn connect(url: &str, store: &str) -> Result<PostgresFailures, DatabaseError> {
        let target = Target::parse(url)?;
        let mut bytes = [0u8; 3];
        getrandom::fill(&mut bytes).map_err(|e| {
            DatabaseError::Unreachable(Lost::Failed(format!("no random replica name: {e}")))
        })?;
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "replica".to_owned());
        let replica = format!(
            "{}-{:02x}{:02x}{:02x}",
            host.chars().take(40).collect::<String>(),
            bytes[0],
            bytes[1],
            bytes[2]
        );
        let shared = Arc::new(Shared::default());
        let describe = target.describe().to_owned();
        let session = Failures {
            store: store.to_owned(),
            replica: replica.clone(),
            shared: Arc::clone(&shared),
            polls: 0,
        };
        Ok(PostgresFailures {
            link: connection::start(target, session)?,
            shared,
            replica,
            describe,
        })
    }

    /// This replica's name in the table.
    pub fn replica(&self) -> &str {
        &self.replica
    }
}

impl FailureLog for PostgresFailures {
    fn record(&self, failure: Failure) {
        // Never waits: a full queue drops the failure.
        if self.shared.queued.fetch_add(1, Ordering::AcqRel) >= QUEUED
            || self.link.send(failure).is_err()
        {
            self.shared.queued.fetch_sub(1, Ordering::AcqRel);
            tracing::debug!("a failure was not shared: the queue to the database is full");
        }
    }

    fn elsewhere(&self) -> Vec<Failure> {
        if !self.link.health().current() {
            return Vec::new();
        }
        self.shared.elsewhere.lock().clone()
    }

    fn trouble(&self) -> Option<String> {
        let why = self.link.health().trouble()?;
        Some(format!("{}: {why}", self.describe))
    }
}

/// The failures' side of the connection.
struct Failures {
    store: String,
    replica: String,
    shared: Arc<Shared>,
    polls: u64,
}

impl Session for Failures {
    type Request = Failure;
    const NAME: &'static str = "shared failures";
    const THREAD: &'static str = "toolhost-failures";

    async fn setup(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        // Replicas starting at once make the table once.
        client
            .batch_execute(
                "BEGIN;
                 SELECT pg_advisory_xact_lock(7262719);
                 CREATE TABLE IF NOT EXISTS toolhost_failures (
                     id bigserial PRIMARY KEY,
                     store text NOT NULL,
                     replica text NOT NULL,
                     failure jsonb NOT NULL
                 );
                 CREATE INDEX IF NOT EXISTS toolhost_failures_store ON toolhost_failures (store, id);
                 COMMIT;",
            )
            .await?;
        self.read(client).await
    }

    async fn serve(
        &mut self,
        client: &mut Client,
        failure: Failure,
    ) -> Result<(), tokio_postgres::Error> {
        self.shared.queued.fetch_sub(1, Ordering::AcqRel);
        let Ok(text) = serde_json::to_string(&failure.bounded()) else {
            return Ok(());
        };
        client
            .execute(
                "INSERT INTO toolhost_failures (store, replica, failure) VALUES ($1, $2, $3::text::jsonb)",
                &[&self.store, &self.replica, &text],
            )
            .await
            .map(|_| ())
    }

    async fn notified(&mut self, _: &mut Client, _: String) -> Result<(), tokio_postgres::Error> {
        Ok(())
    }

    async fn poll(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error> {
        self.polls = self.polls.wrapping_add(1);
        self.read(client).await?;
        if self.polls.is_multiple_of(PRUNE_EVERY) {
            self.prune(client).await?;
        }
        Ok(())
    }

    /// Disconnected: the failure is not shared.
    fn refuse(&mut self, _: Failure, _: &Lost) {
        self.shared.queued.fetch_sub(1, Ordering::AcqRel);
    }

    fn down(&mut self, _: &Lost) {
        self.shared.elsewhere.lock().clear();
    }
}

impl Failures {
    /// The others' newest failures, into `elsewhere`.
    async fn read(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        let rows = client
            .query(
                "SELECT failure::text, replica FROM toolhost_failures
                  WHERE store = $1 AND replica <> $2 ORDER BY id DESC LIMIT $3",
                &[&self.store, &self.replica, &KEPT],
            )
            .await?;
        let mut found: Vec<Failure> = rows
            .iter()
            .filter_map(|row| {
                let text: String = row.try_get(0).ok()?;
                let replica: String = row.try_get(1).ok()?;
                if text.len() > MAX_ROW_BYTES {
                    return None;
                }
                let failure: Failure = serde_json::from_str(&text).ok()?;
                Some(
                    Failure {
                        replica: Some(replica),
                        ..failure
                    }
                    .bounded(),
                )
            })
            .collect();
        found.reverse();
        *self.shared.elsewhere.lock() = found;
        Ok(())
    }

    /// Deletes the store's rows beyond its newest [`ROWS_KEPT`].
    async fn prune(&self, client: &Client) -> Result<(), tokio_postgres::Error> {
        client
            .execute(
                "DELETE FROM toolhost_failures WHERE store = $1 AND id <= (
                     SELECT id FROM toolhost_failures WHERE store = $1
                      ORDER BY id DESC OFFSET $2 LIMIT 1)",
                &[&self.store, &ROWS_KEPT],
            )
            .await
            .map(|_| ())
    }
}
