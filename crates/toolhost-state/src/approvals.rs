//! Saved approvals in PostgreSQL: [`PostgresApprovals`].
//!
//! A store is one row of the table `toolhost_approvals` (made when
//! missing): its name, the approvals as one JSON document (the same
//! entries a file holds), and a version that every change raises. A change
//! reads the row, applies the change, and writes it back only if the
//! version did not move meanwhile (compare-and-set), trying again after a
//! short random wait when another replica was first (for up to
//! [`CHANGE_WAIT`], so replicas saving at once take turns instead of one
//! starving): no change is lost, and no lock is held across a round trip. The same statement notifies every replica
//! (`NOTIFY toolhost_approvals`), so their next lookup reads the new
//! entries; a lookup between changes costs no query.

use toolhost_policy::approvals::{
    ApprovalsError, Change, MAX_APPROVALS, SavedApproval, Stamp, Store,
};

use crate::database::{Database, DatabaseError};
use std::time::{Duration, Instant};

/// How long a change keeps trying while other replicas change the row
/// first.
pub const CHANGE_WAIT: Duration = Duration::from_secs(5);
/// The longest random wait between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(40);

/// Saved approvals that replicas share through PostgreSQL.
#[derive(Debug)]
pub struct PostgresApprovals {
    database: Database,
    name: String,
}

impl PostgresApprovals {
    /// The store `name` in the database `url` names (`postgres://…` or
    /// `host=… user=… dbname=…`). It connects in the background and
    /// returns at once; until connected, lookups find nothing (the call
    /// is asked) and changes fail with the reason.
    pub fn connect(url: &str, name: &str) -> Result<PostgresApprovals, DatabaseError> {
        Ok(PostgresApprovals {
            database: Database::start(url, name)?,
            name: name.to_owned(),
        })
    }

    /// Whether the connection is up now.
    pub fn connected(&self) -> bool {
        self.database
            .shared()
            .connected
            .load(std::sync::atomic::Ordering::Acquire)
    }

    fn unavailable(&self, e: &DatabaseError) -> ApprovalsError {
        ApprovalsError::Unavailable {
            store: self.describe(),
            message: e.to_string(),
        }
    }

    fn entries(&self, text: &str) -> Result<Vec<SavedApproval>, ApprovalsError> {
        let invalid = |message: String| ApprovalsError::Unavailable {
            store: self.describe(),
            message: format!("the stored approvals are not valid: {message}"),
        };
        let entries: Vec<SavedApproval> =
            serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
        if entries.len() > MAX_APPROVALS {
            return Err(invalid(format!("over {MAX_APPROVALS} approvals")));
        }
        Ok(entries)
    }
}

impl Store for PostgresApprovals {
    fn describe(&self) -> String {
        format!("store `{}` of {}", self.name, self.database.describe())
    }

    fn unchanged_since(&self, seen: &Stamp) -> bool {
        let shared = self.database.shared();
        shared.current()
            && seen.as_version() == Some(shared.version.load(std::sync::atomic::Ordering::Acquire))
    }

    fn read(&self) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
        let document = self.database.read().map_err(|e| self.unavailable(&e))?;
        Ok((
            self.entries(&document.text)?,
            Stamp::version(document.version),
        ))
    }

    fn change(&self, f: Change<'_>) -> Result<(Vec<SavedApproval>, Stamp), ApprovalsError> {
        let deadline = Instant::now() + CHANGE_WAIT;
        let mut tries: u32 = 0;
        loop {
            let document = self.database.read().map_err(|e| self.unavailable(&e))?;
            let mut entries = self.entries(&document.text)?;
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
            match self
                .database
                .write(document.version, text)
                .map_err(|e| self.unavailable(&e))?
            {
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
}
