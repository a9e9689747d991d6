//! The connection each store keeps to PostgreSQL, on a thread of its own:
//! one loop for the approvals, the operator's queue and the failures.
//!
//! [`start`] runs a small async runtime on a new thread with one
//! `tokio-postgres` connection, secured as the URL says ([`crate::tls`]).
//! The thread connects, lets the store's [`Session`] set up (its table,
//! its `LISTEN`), then serves one thing at a time: the store's requests in
//! the order they came, the database's notifications, and a poll every
//! [`POLL`]. A statement that takes longer than [`ANSWER_WAIT`] counts as
//! a connection lost, as does a broken one; the thread then reconnects
//! after a backoff (100 ms, doubling to 5 s), and meanwhile answers every
//! request at once with the reason ([`Session::refuse`]), never leaving
//! one waiting.
//!
//! What the store asks on its callers' threads, [`Health`], is answered
//! from memory: whether the database is current (connected, and answered
//! within two polls), and if not, why ([`Lost`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client};

use crate::tls::{CertificateRefused, Tls, TlsError, Unreadable};

/// How often a store polls the database, in case a notification was lost
/// (a reconnect, a dropped connection): the bound on how late a change
/// made elsewhere shows here while the database is up.
pub const POLL: Duration = Duration::from_secs(1);
/// The longest a statement (and a connection attempt) may take; a caller
/// that waits for one waits as long at most.
pub const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// The longest wait between two connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why the database could not be used.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DatabaseError {
    /// The connection string cannot be read.
    #[error("not a PostgreSQL connection string: {0}")]
    Config(String),
    /// Its TLS settings cannot be used (`sslmode`, `sslrootcert`, …).
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// Not connected (yet, or any more), or silent.
    #[error("the database is not reachable: {0}")]
    Unreachable(Lost),
    /// A statement failed.
    #[error("the database refused a statement: {0}")]
    Statement(String),
    /// No answer within [`ANSWER_WAIT`].
    #[error("the database did not answer within {} s", ANSWER_WAIT.as_secs())]
    Timeout,
    /// What the database holds is not valid (over its bound, or not JSON).
    #[error("the stored approvals are not valid: {0}")]
    Invalid(String),
}

impl From<Unreadable> for DatabaseError {
    fn from(e: Unreadable) -> Self {
        DatabaseError::Config(e.0)
    }
}

/// Why a store is not connected to its database.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Lost {
    /// The first connection attempt has not ended yet.
    #[error("not connected yet")]
    NotYet,
    /// A statement or an attempt got no answer within [`ANSWER_WAIT`].
    #[error("no answer within {} s", ANSWER_WAIT.as_secs())]
    Silent,
    /// Connected, but the database has not answered for two polls.
    #[error("it has not answered for {} s", (2 * POLL).as_secs())]
    Quiet,
    /// The connection was closed.
    #[error("the connection ended")]
    Ended,
    /// The server's certificate was refused ([`crate::tls`]).
    #[error(transparent)]
    Certificate(#[from] CertificateRefused),
    /// The driver's or the server's own words (`connection refused`, a
    /// failed authentication), never the connection string.
    #[error("{0}")]
    Failed(String),
}

/// What a store's callers ask about its connection, answered from memory.
#[derive(Debug)]
pub struct Health {
    connected: AtomicBool,
    /// When the database last answered (milliseconds since `epoch`).
    answered: AtomicU64,
    epoch: Instant,
    lost: Mutex<Lost>,
}

impl Health {
    fn new() -> Health {
        Health {
            connected: AtomicBool::new(false),
            answered: AtomicU64::new(0),
            epoch: Instant::now(),
            lost: Mutex::new(Lost::NotYet),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The database just answered.
    pub(crate) fn heard(&self) {
        self.answered.store(self.now(), Ordering::Release);
    }

    /// Whether the connection is up now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Whether what the store last read is known to be current: connected,
    /// and the database answered within two polls (a connection that
    /// hangs without breaking, behind a network partition, stops being
    /// current then).
    pub fn current(&self) -> bool {
        let limit = u64::try_from(2 * POLL.as_millis()).unwrap_or(u64::MAX);
        self.connected()
            && self
                .now()
                .saturating_sub(self.answered.load(Ordering::Acquire))
                <= limit
    }

    /// Why the database is not current (`None`: it is).
    pub fn trouble(&self) -> Option<Lost> {
        if self.current() {
            None
        } else if self.connected() {
            Some(Lost::Quiet)
        } else {
            Some(self.lost())
        }
    }

    /// Why the connection is down (or was, last).
    pub fn lost(&self) -> Lost {
        self.lost.lock().clone()
    }

    fn up(&self) {
        self.heard();
        self.connected.store(true, Ordering::Release);
    }

    fn down(&self, why: Lost) {
        self.connected.store(false, Ordering::Release);
        *self.lost.lock() = why;
    }
}

/// Where to connect: the driver's configuration, its TLS, and where, for
/// messages.
#[derive(Clone)]
pub(crate) struct Target {
    config: tokio_postgres::Config,
    tls: Tls,
    describe: String,
}

impl Target {
    /// Reads a connection string (`postgresql://…` or `key=value` pairs),
    /// its TLS settings included (see [`crate::tls`]).
    pub(crate) fn parse(url: &str) -> Result<Target, DatabaseError> {
        let (rest, settings) = crate::tls::split(url)?;
        let config: tokio_postgres::Config = rest
            .parse()
            .map_err(|e: tokio_postgres::Error| DatabaseError::Config(e.to_string()))?;
        let tls = Tls::new(&settings, &config)?;
        let mut config = config;
        config.ssl_mode(tls.driver_mode());
        Ok(Target {
            describe: describe(&config),
            config,
            tls,
        })
    }

    /// `postgresql://host:port/dbname`, never the password.
    pub(crate) fn describe(&self) -> &str {
        &self.describe
    }

    /// Connects (at most [`ANSWER_WAIT`]); the client and the connection's
    /// messages: each notification's payload, then `None` at its end.
    async fn connect(&self) -> Result<(Client, mpsc::UnboundedReceiver<Option<String>>), Lost> {
        let (client, mut connection) =
            tokio::time::timeout(ANSWER_WAIT, self.config.connect(self.tls.connector()))
                .await
                .map_err(|_| Lost::Silent)?
                .map_err(|e| {
                    self.tls
                        .refused(&e)
                        .map_or_else(|| failed(&e), Lost::Certificate)
                })?;
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
        Ok((client, notified))
    }
}

/// What a store does on its connection. The thread calls one method at a
/// time, in order; each may take [`ANSWER_WAIT`] at most. A method's
/// error ends the connection when the client is closed by then; any other
/// is the statement's own, logged, and the connection goes on.
pub(crate) trait Session: Send + 'static {
    /// The store's requests.
    type Request: Send + 'static;
    /// The store, in log lines (`saved approvals`).
    const NAME: &'static str;
    /// Its thread's name.
    const THREAD: &'static str;

    /// Once connected: make the tables when missing, `LISTEN`, read what
    /// the store keeps in memory.
    async fn setup(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error>;

    /// One request, while connected.
    async fn serve(
        &mut self,
        client: &mut Client,
        request: Self::Request,
    ) -> Result<(), tokio_postgres::Error>;

    /// A notification on a channel it listens on.
    async fn notified(
        &mut self,
        client: &mut Client,
        payload: String,
    ) -> Result<(), tokio_postgres::Error>;

    /// Every [`POLL`].
    async fn poll(&mut self, client: &mut Client) -> Result<(), tokio_postgres::Error>;

    /// A request while disconnected: answered at once with `why`.
    fn refuse(&mut self, request: Self::Request, why: &Lost);

    /// The connection was lost (or could not be made).
    fn down(&mut self, _why: &Lost) {}
}

/// What goes to the connection's thread.
enum Message<R> {
    Request(R),
    /// Stop at once, as a replica that died.
    Halt,
}

/// The store's side of its connection: where requests go, and its
/// [`Health`]. The thread ends when this is dropped.
pub(crate) struct Link<R> {
    requests: mpsc::UnboundedSender<Message<R>>,
    health: Arc<Health>,
}

impl<R> std::fmt::Debug for Link<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("health", &self.health)
            .finish_non_exhaustive()
    }
}

impl<R> Link<R> {
    /// Sends a request (answered in order; at once while disconnected).
    pub(crate) fn send(&self, request: R) -> Result<(), Lost> {
        self.requests
            .send(Message::Request(request))
            .map_err(|_| Lost::Failed("its thread has ended".to_owned()))
    }

    /// Stops the thread at once: the connection is dropped, nothing more
    /// is sent.
    pub(crate) fn halt(&self) {
        let _ = self.requests.send(Message::Halt);
    }

    pub(crate) fn health(&self) -> &Health {
        &self.health
    }
}

/// Starts `session`'s connection to `target` on a thread of its own. It
/// returns at once; the first attempt is made on the thread.
pub(crate) fn start<S: Session>(
    target: Target,
    session: S,
) -> Result<Link<S::Request>, DatabaseError> {
    let health = Arc::new(Health::new());
    let (requests, inbox) = mpsc::unbounded_channel();
    let thread_health = Arc::clone(&health);
    std::thread::Builder::new()
        .name(S::THREAD.into())
        .spawn(move || run(target, session, &thread_health, inbox))
        .map_err(|e| {
            DatabaseError::Unreachable(Lost::Failed(format!("cannot start its thread: {e}")))
        })?;
    Ok(Link { requests, health })
}

/// The thread: connect, serve until the connection is lost or the store
/// dropped, wait, connect again.
fn run<S: Session>(
    target: Target,
    mut session: S,
    health: &Health,
    mut inbox: mpsc::UnboundedReceiver<Message<S::Request>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            let why = Lost::Failed(format!("cannot start its runtime: {e}"));
            session.down(&why);
            health.down(why);
            return;
        }
    };
    runtime.block_on(async move {
        let mut backoff = Duration::from_millis(100);
        loop {
            let why = match target.connect().await {
                Ok((mut client, notified)) => {
                    // A store that cannot set up (no table, no right to
                    // make one) is as good as not connected.
                    let setup = tokio::time::timeout(ANSWER_WAIT, session.setup(&mut client)).await;
                    match setup
                        .map_err(|_| Lost::Silent)
                        .and_then(|r| r.map_err(|e| failed(&e)))
                    {
                        Err(why) => why,
                        Ok(()) => {
                            backoff = Duration::from_millis(100);
                            health.up();
                            tracing::info!(
                                "{}: connected to the database {} (sslmode={})",
                                S::NAME,
                                target.describe(),
                                target.tls.mode()
                            );
                            match connected(&mut client, notified, &mut session, health, &mut inbox)
                                .await
                            {
                                None => return,
                                Some(why) => why,
                            }
                        }
                    }
                }
                Err(why) => why,
            };
            tracing::warn!("{}: the database {}: {why}", S::NAME, target.describe());
            session.down(&why);
            health.down(why);
            // Disconnected: answer every request at once until the next try.
            let retry = tokio::time::sleep(backoff);
            tokio::pin!(retry);
            loop {
                tokio::select! {
                    () = &mut retry => break,
                    message = inbox.recv() => match message {
                        None | Some(Message::Halt) => return,
                        Some(Message::Request(r)) => session.refuse(r, &health.lost()),
                    },
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    });
}

/// Serves while the connection holds; `None` when the store was dropped
/// or halted, else why the connection was lost.
async fn connected<S: Session>(
    client: &mut Client,
    mut notified: mpsc::UnboundedReceiver<Option<String>>,
    session: &mut S,
    health: &Health,
    inbox: &mut mpsc::UnboundedReceiver<Message<S::Request>>,
) -> Option<Lost> {
    let mut ticker = tokio::time::interval(POLL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // (The first tick is now: setup has just read everything.)
    ticker.tick().await;
    loop {
        // Each step at most `ANSWER_WAIT`: a statement that hangs is a
        // connection lost.
        let done = tokio::select! {
            message = inbox.recv() => match message {
                None | Some(Message::Halt) => return None,
                Some(Message::Request(request)) => {
                    tokio::time::timeout(ANSWER_WAIT, session.serve(client, request)).await
                }
            },
            note = notified.recv() => match note.flatten() {
                Some(payload) => {
                    tokio::time::timeout(ANSWER_WAIT, session.notified(client, payload)).await
                }
                None => return Some(Lost::Ended),
            },
            _ = ticker.tick() => tokio::time::timeout(ANSWER_WAIT, session.poll(client)).await,
        };
        match done {
            Err(_) => return Some(Lost::Silent),
            Ok(Err(e)) if client.is_closed() => return Some(failed(&e)),
            // A statement's own failure: the database answered.
            Ok(Err(e)) => {
                tracing::warn!("{}: {}", S::NAME, cause(&e));
                health.heard();
            }
            Ok(Ok(())) => health.heard(),
        }
    }
}

/// A failure of the driver as a [`Lost`].
fn failed(e: &tokio_postgres::Error) -> Lost {
    Lost::Failed(cause(e))
}

/// `host:port/dbname` of a configuration, for messages.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = config.get_hosts().first().map_or_else(
        || {
            config
                .get_hostaddrs()
                .first()
                .map_or_else(|| "localhost".to_owned(), ToString::to_string)
        },
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
