//! The host's settings: the configuration file and the shared flags,
//! turned into a runtime builder. One file per concept: the file's tables
//! (`config_file`, `state`, `tasks`, `telemetry`), the model provider
//! (`provider`), the lock file (`lock`), saved approvals (`approvals`),
//! profiles (`profiles`), grants (`grants`) and the builder (`builder`).

mod approvals;
mod builder;
mod config_file;
mod grants;
mod lock;
mod profiles;
mod provider;
mod state;
mod tasks;
mod telemetry;

pub use approvals::{ApprovalStores, approval_stores, approvals_file};
pub use builder::{builder, mcp_servers};
pub use config_file::{ConfigFile, config_file, tool_search};
pub use grants::warn_unknown_grants;
pub use lock::{lock_file, primary_plugins_dir};
pub use profiles::check_profile;
pub use provider::provider_config;
pub use state::StateConfig;
pub use tasks::TasksConfig;
pub use telemetry::TelemetryConfig;
