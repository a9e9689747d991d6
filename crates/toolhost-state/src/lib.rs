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
//! - [`database`]: the connection, on a thread of its own: it reconnects,
//!   listens and answers the store's requests in order.
//! - [`queue`]: [`PostgresQueue`], the operator's queue of asks as a
//!   [`QueueStore`](toolhost_runtime::operator::QueueStore): an ask held
//!   by any replica is listed on every replica's console and answered
//!   from any of them; the holder renews a lease, so an ask whose replica
//!   died shows as gone.
//! - [`approvals`]: [`PostgresApprovals`], a
//!   [`Store`](toolhost_policy::approvals::Store) over it: one row per
//!   store name, changed by compare-and-set on its version, in one
//!   statement that also notifies the other replicas.
//!
//! A replica that loses the database finds no saved approval (the call is
//! asked, never allowed by an approval it cannot check) and cannot save
//! or revoke one (the error says why); everything else it serves as
//! before, and it reconnects by itself.
//!
//! ```no_run
//! use toolhost_policy::approvals::Approvals;
//! use toolhost_state::PostgresApprovals;
//!
//! let store = PostgresApprovals::connect("host=db.internal user=toolhost dbname=toolhost", "main")?;
//! let approvals = Approvals::with_store(std::sync::Arc::new(store));
//! println!("{} saved approvals", approvals.list()?.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod approvals;
pub mod database;
pub mod queue;

pub use approvals::PostgresApprovals;
pub use database::{DatabaseError, POLL};
pub use queue::PostgresQueue;
