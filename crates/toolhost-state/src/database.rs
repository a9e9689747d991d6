//! The connection to PostgreSQL, on a thread of its own.
//!
//! The thread runs a small async runtime with one `tokio-postgres`
//! connection. It answers [`Request`]s in the order they come, keeps the
//! latest version of the approvals row it has seen in [`Shared`] (from the
//! answers, from `NOTIFY toolhost_approvals`, and from a poll every
//! [`POLL`] in case a notification is lost), and reconnects with a backoff
//! when the connection breaks. While it is disconnected every request is
//! answered at once with the reason, never left waiting.
//!
//! Callers wait for an answer at most [`ANSWER_WAIT`]; the store's API is
//! synchronous (the policy crate's), and a request is one short statement.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};

/// The notification channel every replica listens on.
pub const CHANNEL: &str = "toolhost_approvals";
/// How often a replica reads the version again, in case a notification
/// was lost (a reconnect, a dropped connection): the bound on how late a
/// revocation made elsewhere can hold here while the database is up.
pub const POLL: Duration = Duration::from_secs(1);
/// How long a caller waits for the database's answer.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// The largest approvals document read back (as a file may hold).
pub const MAX_DOCUMENT_BYTES: usize = 8 << 20;

/// Why the database could not be used.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DatabaseError {
    /// The connection string cannot be read.
    #[error("not a PostgreSQL connection string: {0}")]
    Config(String),
    /// Not connected (yet, or any more): the reason of the last failure.
    #[error("the database is not reachable: {0}")]
    Unreachable(String),
    /// A statement failed.
    #[error("the database refused a statement: {0}")]
    Statement(String),
    /// No answer within [`ANSWER_WAIT`].
    #[error("the database did not answer within {} s", ANSWER_WAIT.as_secs())]
    Timeout,
    /// The stored document is over [`MAX_DOCUMENT_BYTES`] or not JSON.
    #[error("the stored approvals are not valid: {0}")]
    Invalid(String),
}

/// What the connection's thread and the store share.
#[derive(Debug)]
pub struct Shared {
    /// The newest version of the store's row seen (0: none yet).
    pub version: AtomicU64,
    /// Whether the connection is up now.
    pub connected: AtomicBool,
    /// Why it is not, in words.
    pub last_error: Mutex<String>,
    /// When the database last answered (milliseconds since `epoch`).
    answered: AtomicU64,
    epoch: Instant,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            version: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            last_error: Mutex::new(String::new()),
            answered: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Shared {
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn seen(&self, version: u64) {
        self.version.fetch_max(version, Ordering::AcqRel);
        self.answered.store(self.now(), Ordering::Release);
    }

    /// Whether the version is known to be current: connected, and the
    /// database answered within two polls (a connection that hangs
    /// without breaking, e.g. a network partition, stops being current
    /// after that, and lookups read again, which then fails: asked).
    pub fn current(&self) -> bool {
        let limit = u64::try_from(2 * POLL.as_millis()).unwrap_or(u64::MAX);
        self.connected.load(Ordering::Acquire)
            && self
                .now()
                .saturating_sub(self.answered.load(Ordering::Acquire))
                <= limit
    }

    fn down(&self, why: String) {
        self.connected.store(false, Ordering::Release);
        *self
            .last_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = why;
    }

    fn unreachable(&self) -> DatabaseError {
        DatabaseError::Unreachable(
            self.last_error
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }
}

/// The approvals document of a store and its version.
#[derive(Debug)]
pub struct Document {
    /// The JSON text (an array of saved approvals).
    pub text: String,
    /// The row's version.
    pub version: u64,
}

/// A request to the connection's thread.
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

/// A connection to one database for one store name, on its own thread
/// (which ends when this is dropped).
#[derive(Debug)]
pub struct Database {
    requests: mpsc::UnboundedSender<Request>,
    shared: Arc<Shared>,
    /// Where, for messages: host, port and database, never the password.
    describe: String,
}

impl Database {
    /// Starts the connection's thread for `store` in the database that
    /// `url` names (a `postgres://` URL or `key=value` pairs). It returns
    /// at once; the first connection is made on the thread.
    pub fn start(url: &str, store: &str) -> Result<Database, DatabaseError> {
        let config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| DatabaseError::Config(e.to_string()))?;
        let describe = describe(&config);
        let shared = Arc::new(Shared::default());
        shared.down("not connected yet".to_owned());
        let (requests, inbox) = mpsc::unbounded_channel();
        let thread_shared = Arc::clone(&shared);
        let store = store.to_owned();
        std::thread::Builder::new()
            .name("toolhost-state".into())
            .spawn(move || serve(config, store, thread_shared, inbox))
            .map_err(|e| DatabaseError::Unreachable(format!("cannot start its thread: {e}")))?;
        Ok(Database {
            requests,
            shared,
            describe,
        })
    }

    /// What both sides share.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// Where, for messages.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// The store's document now.
    pub fn read(&self) -> Result<Document, DatabaseError> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.send(Request::Read(reply))?;
        wait(&answer)
    }

    /// Replaces the document when its version is still `expected`.
    pub fn write(&self, expected: u64, text: String) -> Result<Option<u64>, DatabaseError> {
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        self.send(Request::Write {
            expected,
            text,
            reply,
        })?;
        wait(&answer)
    }

    fn send(&self, request: Request) -> Result<(), DatabaseError> {
        self.requests
            .send(request)
            .map_err(|_| DatabaseError::Unreachable("its thread has ended".to_owned()))
    }
}

fn wait<T>(
    answer: &std::sync::mpsc::Receiver<Result<T, DatabaseError>>,
) -> Result<T, DatabaseError> {
    answer
        .recv_timeout(ANSWER_WAIT)
        .map_err(|_| DatabaseError::Timeout)?
}

/// `host:port/dbname` of a configuration, for messages.
pub(crate) fn describe(config: &tokio_postgres::Config) -> String {
    let host = config.get_hosts().first().map_or_else(
        || "localhost".to_owned(),
        |h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        },
    );
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("postgresql://{host}:{port}/{db}")
}

/// The connection's thread: connect, serve until the connection breaks
/// or the store is dropped, wait, connect again.
fn serve(
    config: tokio_postgres::Config,
    store: String,
    shared: Arc<Shared>,
    mut inbox: mpsc::UnboundedReceiver<Request>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            shared.down(format!("cannot start its runtime: {e}"));
            return;
        }
    };
    runtime.block_on(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            match connect(&config, &store, &shared).await {
                Ok((client, notes)) => {
                    backoff = Duration::from_millis(100);
                    shared.connected.store(true, Ordering::Release);
                    tracing::info!("saved approvals: connected to the database");
                    let why = connected(&client, notes, &store, &shared, &mut inbox).await;
                    match why {
                        None => return,
                        Some(why) => {
                            tracing::warn!("saved approvals: lost the database: {why}");
                            shared.down(why);
                        }
                    }
                }
                Err(why) => {
                    tracing::warn!("saved approvals: cannot connect to the database: {why}");
                    shared.down(why);
                }
            }
            // Disconnected: answer every request at once until the next try.
            let retry = tokio::time::sleep(backoff);
            tokio::pin!(retry);
            loop {
                tokio::select! {
                    () = &mut retry => break,
                    request = inbox.recv() => match request {
                        None => return,
                        Some(r) => refuse(r, shared.unreachable()),
                    },
                }
            }
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
}

fn refuse(request: Request, why: DatabaseError) {
    match request {
        Request::Read(reply) => {
            let _ = reply.try_send(Err(why));
        }
        Request::Write { reply, .. } => {
            let _ = reply.try_send(Err(why));
        }
    }
}

/// Connects, makes the table and the store's row when missing, and
/// listens: the client and the notifications' payloads.
async fn connect(
    config: &tokio_postgres::Config,
    store: &str,
    shared: &Shared,
) -> Result<(Client, mpsc::UnboundedReceiver<Option<String>>), String> {
    let (client, mut connection) = tokio::time::timeout(ANSWER_WAIT, config.connect(NoTls))
        .await
        .map_err(|_| format!("no answer within {} s", ANSWER_WAIT.as_secs()))?
        .map_err(|e| cause(&e))?;
    // The connection's messages: notifications go to the loop; its end
    // (or failure) is a `None`.
    let (notes, notified) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => {
                    let _ = notes.send(Some(n.payload().to_owned()));
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!("database connection: {e}");
                    break;
                }
            }
        }
        let _ = notes.send(None);
    });
    // Three replicas starting at once make the table once: the advisory
    // lock orders them.
    let setup = client.batch_execute(
        "BEGIN;
             SELECT pg_advisory_xact_lock(7262718);
             CREATE TABLE IF NOT EXISTS toolhost_approvals (
                 store text PRIMARY KEY,
                 approvals jsonb NOT NULL,
                 version bigint NOT NULL
             );
             COMMIT;
             LISTEN toolhost_approvals;",
    );
    tokio::time::timeout(ANSWER_WAIT, async {
        setup.await?;
        client
            .execute(
                "INSERT INTO toolhost_approvals (store, approvals, version)
                 VALUES ($1, '[]'::jsonb, 1) ON CONFLICT (store) DO NOTHING",
                &[&store],
            )
            .await
    })
    .await
    .map_err(|_| format!("no answer within {} s", ANSWER_WAIT.as_secs()))?
    .map_err(|e| cause(&e))?;
    tokio::time::timeout(ANSWER_WAIT, poll(&client, store, shared))
        .await
        .map_err(|_| format!("no answer within {} s", ANSWER_WAIT.as_secs()))??;
    Ok((client, notified))
}

/// Serves requests while the connection holds; `None` when the store was
/// dropped, else why the connection ended.
async fn connected(
    client: &Client,
    mut notified: mpsc::UnboundedReceiver<Option<String>>,
    store: &str,
    shared: &Shared,
    inbox: &mut mpsc::UnboundedReceiver<Request>,
) -> Option<String> {
    let mut ticker = tokio::time::interval(POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            request = inbox.recv() => {
                let request = request?;
                // A statement that hangs is a connection lost (the
                // caller, who waits as long, is told it timed out).
                match tokio::time::timeout(ANSWER_WAIT, answer(client, store, shared, request)).await {
                    Err(_) => return Some(format!("no answer within {} s", ANSWER_WAIT.as_secs())),
                    Ok(Err(why)) => return Some(why),
                    Ok(Ok(())) => {}
                }
            }
            note = notified.recv() => match note.flatten() {
                Some(payload) => {
                    // `VERSION STORE`, from the statement that changed it.
                    if let Some((version, name)) = payload.split_once(' ')
                        && name == store
                        && let Ok(version) = version.parse::<u64>()
                    {
                        shared.seen(version);
                    }
                }
                None => return Some("the connection ended".to_owned()),
            },
            _ = ticker.tick() => {
                match tokio::time::timeout(ANSWER_WAIT, poll(client, store, shared)).await {
                    Err(_) => return Some(format!("no answer within {} s", ANSWER_WAIT.as_secs())),
                    Ok(Err(why)) => return Some(why),
                    Ok(Ok(())) => {}
                }
            }
        }
    }
}

/// Reads the row's version.
async fn poll(client: &Client, store: &str, shared: &Shared) -> Result<(), String> {
    let row = client
        .query_one(
            "SELECT version FROM toolhost_approvals WHERE store = $1",
            &[&store],
        )
        .await
        .map_err(|e| cause(&e))?;
    let version: i64 = row.try_get(0).map_err(|e| cause(&e))?;
    shared.seen(u64::try_from(version).unwrap_or(0));
    Ok(())
}

/// Answers one request. A failure of the connection itself is returned
/// (and the request answered with it); a statement's own failure is the
/// request's answer only.
async fn answer(
    client: &Client,
    store: &str,
    shared: &Shared,
    request: Request,
) -> Result<(), String> {
    match request {
        Request::Read(reply) => {
            let result = client
                .query_one(
                    "SELECT approvals::text, version FROM toolhost_approvals WHERE store = $1",
                    &[&store],
                )
                .await;
            let out = match result {
                Err(e) if client.is_closed() => {
                    let why = cause(&e);
                    let _ = reply.try_send(Err(DatabaseError::Unreachable(why.clone())));
                    return Err(why);
                }
                Err(e) => Err(DatabaseError::Statement(cause(&e))),
                Ok(row) => document(&row),
            };
            if let Ok(d) = &out {
                shared.seen(d.version);
            }
            let _ = reply.try_send(out);
        }
        Request::Write {
            expected,
            text,
            reply,
        } => {
            let Ok(expected) = i64::try_from(expected) else {
                let _ = reply.try_send(Err(DatabaseError::Invalid("version out of range".into())));
                return Ok(());
            };
            // One statement: the compare-and-set and the notification
            // commit together, or neither does.
            let result = client
                .query_opt(
                    "WITH changed AS (
                         UPDATE toolhost_approvals
                            SET approvals = $2::text::jsonb, version = version + 1
                          WHERE store = $1 AND version = $3
                      RETURNING version
                     )
                     SELECT version, pg_notify('toolhost_approvals', version::text || ' ' || $1)
                       FROM changed",
                    &[&store, &text, &expected],
                )
                .await;
            let out = match result {
                Err(e) if client.is_closed() => {
                    let why = cause(&e);
                    let _ = reply.try_send(Err(DatabaseError::Unreachable(why.clone())));
                    return Err(why);
                }
                Err(e) => Err(DatabaseError::Statement(cause(&e))),
                Ok(None) => Ok(None),
                Ok(Some(row)) => row
                    .try_get::<_, i64>(0)
                    .map_err(|e| DatabaseError::Statement(cause(&e)))
                    .map(|v| {
                        let v = u64::try_from(v).unwrap_or(0);
                        shared.seen(v);
                        Some(v)
                    }),
            };
            let _ = reply.try_send(out);
        }
    }
    Ok(())
}

fn document(row: &tokio_postgres::Row) -> Result<Document, DatabaseError> {
    let text: String = row
        .try_get(0)
        .map_err(|e| DatabaseError::Statement(cause(&e)))?;
    let version: i64 = row
        .try_get(1)
        .map_err(|e| DatabaseError::Statement(cause(&e)))?;
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(DatabaseError::Invalid(format!(
            "over {MAX_DOCUMENT_BYTES} bytes"
        )));
    }
    Ok(Document {
        text,
        version: u64::try_from(version).unwrap_or(0),
    })
}

/// An error of the driver in words, with its source (`connection
/// refused`, the server's message), never the connection string.
pub(crate) fn cause(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}
