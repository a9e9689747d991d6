//! What replicas of one toolhost gate must agree on, kept in PostgreSQL:
//! saved approvals and the operator's queue.
//!
//! One machine keeps its saved approvals in a file beside its lock file
//! (`toolhost_policy::approvals`, the default). Replicas behind a load
//! balancer share a database instead: an approval saved through one
//! replica answers on every other, and a revocation made on one holds on
//! all of them at their next lookup after the database tells them
//! (`LISTEN`/`NOTIFY`, milliseconds), and at the latest [`POLL`] after it
//! was made when a notification is lost.
//!
//! - [`connection`]: the connection each store keeps, on a thread of its
//!   own: it reconnects, listens, polls and answers the store's requests
//!   in order; what callers ask of it is answered from memory.
//! - [`tls`]: how that connection is secured, libpq's `sslmode`,
//!   `sslrootcert`, `sslcert` and `sslkey` over rustls: plain text to
//!   another machine only when the URL says `sslmode=disable`.
//! - [`approvals`]: [`PostgresApprovals`], a
//!   [`Store`](toolhost_policy::approvals::Store): one row per store
//!   name, changed by compare-and-set on its version, in one statement
//!   that also notifies the other replicas; lookups read the copy the
//!   connection keeps, and never wait.
//! - [`queue`]: [`PostgresQueue`], the operator's queue of asks as a
//!   [`QueueStore`](toolhost_runtime::operator::QueueStore): an ask held
//!   by any replica is listed on every replica's console and answered
//!   from any of them; the holder renews a lease, so an ask whose replica
//!   died shows as gone.
//! - [`failures`]: [`PostgresFailures`], the console's recent failures of
//!   every replica.
//! - [`tasks`]: [`PostgresTasks`], the MCP gateway's long-running tasks as
//!   a [`TaskStore`](toolhost_runtime::tasks::TaskStore): a task made on
//!   one replica is read, answered and cancelled through any other; its
//!   holder renews a heartbeat, and a task whose replica died is taken
//!   over by exactly one other.
//!
//! A replica that loses the database (down, or silent for two polls)
//! finds no saved approval, at once (the call is asked, never allowed by
//! an approval it cannot check), and cannot save or revoke one (the error
//! says why); everything else it serves as before, and it reconnects by
//! itself.
//!
//! ```no_run
//! use toolhost_policy::approvals::Approvals;
//! use toolhost_state::PostgresApprovals;
//!
//! let store = PostgresApprovals::connect(
//!     "host=db.internal user=toolhost dbname=toolhost sslrootcert=/etc/toolhost/db-ca.pem",
//!     "main",
//! )?;
//! let approvals = Approvals::with_store(std::sync::Arc::new(store));
//! println!("{} saved approvals", approvals.list()?.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod approvals;
pub mod connection;
pub mod failures;
pub mod queue;
pub mod tasks;
pub mod tls;

pub use approvals::PostgresApprovals;
pub use connection::{DatabaseError, Lost, POLL};
pub use failures::PostgresFailures;
pub use queue::PostgresQueue;
pub use tasks::PostgresTasks;
