//! Saved approvals in PostgreSQL: [`PostgresApprovals`].
//!
//! A store is one row of the table `toolhost_approvals` (made when
//! missing): its name, the approvals as one JSON document (the same
//! entries a file holds), and a version that every change raises. A change
//! reads the row, applies the change, and writes it back only if the
//! version did not move meanwhile (compare-and-set), trying again when
//! another replica was first: no change is lost, and no lock is held
//! across a round trip. The same statement notifies every replica
//! (`NOTIFY toolhost_approvals`), so their next lookup reads the new
//! entries; a lookup between changes costs no query.

use toolhost_policy::approvals::{
    ApprovalsError, Change, MAX_APPROVALS, SavedApproval, Stamp, Store,
};

use crate::database::{Database, DatabaseError};

/// How many times a change is tried when other replicas keep changing
/// the row first.
const TRIES: usize = 16;

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
        for _ in 0..TRIES {
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
        }
        Err(ApprovalsError::Unavailable {
            store: self.describe(),
            message: format!("other replicas changed the approvals first {TRIES} times in a row"),
        })
    }
}
