//! The console's recent failures shared by replicas through PostgreSQL:
//! [`PostgresFailures`], a [`FailureLog`] for the operator's console
//! (`toolhost_console::ConsoleOptions::failures`).
//!
//! Each replica writes its failed calls to the table `toolhost_failures`
//! (made when missing: the store's name, the replica's, the failure as
//! JSON) from a thread of its own, and reads the others' last
//! [`KEPT`] every [`POLL`]; a store keeps its newest [`ROWS_KEPT`] rows.
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
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::{Client, NoTls};
use toolhost_runtime::failures::{Failure, FailureLog};

use crate::database::{ANSWER_WAIT, DatabaseError, POLL, cause, describe};

/// The most failures of other replicas listed.
pub const KEPT: i64 = 50;
/// The rows a store keeps (the oldest beyond are deleted).
pub const ROWS_KEPT: i64 = 500;
/// The longest failure read back, as JSON.
const MAX_ROW_BYTES: usize = 4096;
/// Failures waiting to be written.
const QUEUED: usize = 256;

#[derive(Default)]
struct Shared {
    elsewhere: Mutex<Vec<Failure>>,
    trouble: Mutex<Option<String>>,
}

/// The recent failures replicas share through PostgreSQL (see the module
/// docs).
pub struct PostgresFailures {
    queue: mpsc::Sender<Failure>,
    shared: Arc<Shared>,
    replica: String,
}

impl std::fmt::Debug for PostgresFailures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresFailures")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl PostgresFailures {
    /// The store `store` in the database `url` names. It connects on a
    /// thread of its own and returns at once; until connected, the others'
    /// failures are not listed and the console says why.
    pub fn connect(url: &str, store: &str) -> Result<PostgresFailures, DatabaseError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| DatabaseError::Config(e.to_string()))?;
        let mut bytes = [0u8; 3];
        getrandom::fill(&mut bytes)
            .map_err(|e| DatabaseError::Unreachable(format!("no random replica name: {e}")))?;
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
        *lock(&shared.trouble) = Some(format!("not connected yet to {}", describe(&config)));
        let (queue, written) = mpsc::channel(QUEUED);
        let thread = Thread {
            config,
            store: store.to_owned(),
            replica: replica.clone(),
            shared: Arc::clone(&shared),
        };
        std::thread::Builder::new()
            .name("toolhost-failures".into())
            .spawn(move || thread.run(written))
            .map_err(|e| DatabaseError::Unreachable(format!("cannot start its thread: {e}")))?;
        Ok(PostgresFailures {
            queue,
            shared,
            replica,
        })
    }

    /// This replica's name in the table.
    pub fn replica(&self) -> &str {
        &self.replica
    }
}

impl FailureLog for PostgresFailures {
    fn record(&self, failure: Failure) {
        if self.queue.try_send(failure).is_err() {
            tracing::debug!("a failure was not shared: the queue to the database is full");
        }
    }

    fn elsewhere(&self) -> Vec<Failure> {
        lock(&self.shared.elsewhere).clone()
    }

    fn trouble(&self) -> Option<String> {
        lock(&self.shared.trouble).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The connection's thread.
struct Thread {
    config: tokio_postgres::Config,
    store: String,
    replica: String,
    shared: Arc<Shared>,
}

impl Thread {
    fn run(self, mut written: mpsc::Receiver<Failure>) {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            *lock(&self.shared.trouble) = Some("cannot start its runtime".to_owned());
            return;
        };
        runtime.block_on(async move {
            let mut backoff = Duration::from_millis(100);
            loop {
                let why = match self.connect().await {
                    Ok(client) => {
                        backoff = Duration::from_millis(100);
                        match self.serve(&client, &mut written).await {
                            None => return,
                            Some(why) => why,
                        }
                    }
                    Err(why) => why,
                };
                tracing::warn!("shared failures: the database: {why}");
                *lock(&self.shared.trouble) = Some(why);
                lock(&self.shared.elsewhere).clear();
                // Disconnected: drop what comes until the next try.
                let retry = tokio::time::sleep(backoff);
                tokio::pin!(retry);
                loop {
                    tokio::select! {
                        () = &mut retry => break,
                        failure = written.recv() => if failure.is_none() { return },
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        });
    }

    async fn connect(&self) -> Result<Client, String> {
        let (client, connection) = tokio::time::timeout(ANSWER_WAIT, self.config.connect(NoTls))
            .await
            .map_err(|_| format!("no answer within {} s", ANSWER_WAIT.as_secs()))?
            .map_err(|e| cause(&e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("shared failures: connection: {e}");
            }
        });
        // Replicas starting at once make the table once.
        let setup = client.batch_execute(
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
        );
        tokio::time::timeout(ANSWER_WAIT, setup)
            .await
            .map_err(|_| format!("no answer within {} s", ANSWER_WAIT.as_secs()))?
            .map_err(|e| cause(&e))?;
        Ok(client)
    }

    /// Writes and reads while the connection holds; `None` when the log
    /// was dropped, else why the connection ended.
    async fn serve(
        &self,
        client: &Client,
        written: &mut mpsc::Receiver<Failure>,
    ) -> Option<String> {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        let mut ticks: u64 = 0;
        loop {
            let result = tokio::select! {
                failure = written.recv() => match failure {
                    None => return None,
                    Some(failure) => self.write(client, failure.bounded()).await,
                },
                _ = tick.tick() => {
                    ticks = ticks.wrapping_add(1);
                    let read = self.read(client).await;
                    if read.is_ok() && ticks.is_multiple_of(60) {
                        self.prune(client).await
                    } else {
                        read
                    }
                }
            };
            if let Err(why) = result {
                return Some(why);
            }
        }
    }

    async fn write(&self, client: &Client, failure: Failure) -> Result<(), String> {
        let Ok(text) = serde_json::to_string(&failure) else {
            return Ok(());
        };
        timed(client.execute(
            "INSERT INTO toolhost_failures (store, replica, failure) VALUES ($1, $2, $3::text::jsonb)",
            &[&self.store, &self.replica, &text],
        ))
        .await
        .map(|_| ())
    }

    /// The others' newest failures, into `elsewhere`.
    async fn read(&self, client: &Client) -> Result<(), String> {
        let rows = timed(client.query(
            "SELECT failure::text, replica FROM toolhost_failures
              WHERE store = $1 AND replica <> $2 ORDER BY id DESC LIMIT $3",
            &[&self.store, &self.replica, &KEPT],
        ))
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
        *lock(&self.shared.elsewhere) = found;
        *lock(&self.shared.trouble) = None;
        Ok(())
    }

    /// Deletes the store's rows beyond its newest [`ROWS_KEPT`].
    async fn prune(&self, client: &Client) -> Result<(), String> {
        timed(client.execute(
            "DELETE FROM toolhost_failures WHERE store = $1 AND id <= (
                 SELECT id FROM toolhost_failures WHERE store = $1
                  ORDER BY id DESC OFFSET $2 LIMIT 1)",
            &[&self.store, &ROWS_KEPT],
        ))
        .await
        .map(|_| ())
    }
}

/// A statement, at most [`ANSWER_WAIT`]; its failure in words.
async fn timed<T>(
    statement: impl std::future::Future<Output = Result<T, tokio_postgres::Error>>,
) -> Result<T, String> {
    tokio::time::timeout(ANSWER_WAIT, statement)
        .await
        .map_err(|_| format!("no answer within {} s", ANSWER_WAIT.as_secs()))?
        .map_err(|e| cause(&e))
}
