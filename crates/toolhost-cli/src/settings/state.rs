//! The `[state]` table: what replicas of one gate share, in PostgreSQL.

use serde::Deserialize;

/// The `[state]` table: the database that replicas share.
///
/// ```toml
/// [state]
/// postgres-env = "TOOLHOST_STATE_URL"   # or postgres = "postgresql://toolhost@db/toolhost"
/// store = "prod"                        # default "default": one gate's approvals
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StateConfig {
    /// The connection string (`postgresql://…` or `key=value` pairs).
    /// One with a password belongs in `postgres-env`.
    #[serde(default)]
    pub postgres: Option<String>,
    /// The environment variable that holds the connection string.
    #[serde(default)]
    pub postgres_env: Option<String>,
    /// The store's name: replicas of one gate share one (its approvals
    /// and its operator's queue); another gate in the same database takes
    /// another.
    #[serde(default)]
    pub store: Option<String>,
}

impl StateConfig {
    /// The saved-approvals store it names (connecting in the background).
    pub fn approvals(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::policy::approvals::Store>> {
        Ok(std::sync::Arc::new(self.postgres_approvals()?))
    }

    /// The saved-approvals store it names, once its first connection
    /// attempt ended: a lookup never waits for the database, so a command
    /// that reads once (`host approvals`) waits here instead, at most the
    /// database's answer time (a store still out of reach then says why
    /// when read).
    pub fn approvals_connected(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::policy::approvals::Store>> {
        let approvals = self.postgres_approvals()?;
        let _ = approvals.wait_connected(toolhost_state::connection::ANSWER_WAIT);
        Ok(std::sync::Arc::new(approvals))
    }

    fn postgres_approvals(&self) -> anyhow::Result<toolhost_state::PostgresApprovals> {
        toolhost_state::PostgresApprovals::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))
    }

    /// The operator's queue it names (connecting in the background):
    /// every replica's console lists and answers the asks of all.
    pub fn queue(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::operator::QueueStore>> {
        let queue = toolhost_state::PostgresQueue::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))?;
        Ok(std::sync::Arc::new(queue))
    }

    /// The console's recent failures, shared (connecting in the
    /// background): every replica's console lists the others' too.
    pub fn failures(
        &self,
    ) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::failures::FailureLog>> {
        let failures = toolhost_state::PostgresFailures::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))?;
        Ok(std::sync::Arc::new(failures))
    }

    /// The tasks replicas share (connecting in the background): a task
    /// is polled, answered and cancelled through any replica, and one
    /// whose replica stopped is taken over by another.
    pub fn tasks(&self) -> anyhow::Result<std::sync::Arc<dyn toolhost_runtime::tasks::TaskStore>> {
        let tasks = toolhost_state::PostgresTasks::connect(&self.url()?, self.store())
            .map_err(|e| anyhow::anyhow!("[state]: {e}"))?;
        Ok(std::sync::Arc::new(tasks))
    }

    fn store(&self) -> &str {
        self.store.as_deref().unwrap_or("default")
    }

    fn url(&self) -> anyhow::Result<String> {
        Ok(match (&self.postgres, &self.postgres_env) {
            (Some(url), None) => url.clone(),
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                anyhow::anyhow!(
                    "[state] postgres-env = \"{var}\", but {var} is not set (or not UTF-8)"
                )
            })?,
            (Some(_), Some(_)) => {
                anyhow::bail!("[state] takes `postgres` or `postgres-env`, not both")
            }
            (None, None) => anyhow::bail!(
                "[state] needs `postgres-env = \"VAR\"` (or `postgres = \"URL\"`): the \
                 database that replicas share"
            ),
        })
    }
}
