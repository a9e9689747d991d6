//! How a run ended, and its counts: what the loop reports at the end of a
//! run and its events report along the way.

use serde::{Deserialize, Serialize};

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The model answered without asking for more tool calls.
    Completed,
    /// [`AgentOptions::abort`] fired.
    Aborted,
    /// A host-level fault (the provider failed after its retries);
    /// [`ToolChainResult::error`] says what.
    Error,
    /// The round limit was reached; the answer comes from one last request
    /// without tools.
    MaxRounds,
    /// The run's deadline ([`AgentOptions::timeout`]) passed.
    Timeout,
    /// The same call repeated [`AgentOptions::doom_loop_threshold`] times in a
    /// row and no approval callback allowed it to go on.
    DoomLoop,
}

impl Status {
    /// The status as written in JSON (`completed`, `max-rounds`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Completed => "completed",
            Status::Aborted => "aborted",
            Status::Error => "error",
            Status::MaxRounds => "max-rounds",
            Status::Timeout => "timeout",
            Status::DoomLoop => "doom-loop",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counts and time of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Requests sent to the model (including a forced final one).
    pub rounds: u32,
    /// Tool calls in the history.
    pub tool_calls: u32,
    /// Of those, how many failed.
    pub errors: u32,
    /// Wall-clock time of the run, in milliseconds.
    pub elapsed_ms: u64,
    /// Times the history was compacted to fit the context window (each
    /// also reported as [`AgentEvent::ContextCompacted`](crate::AgentEvent::ContextCompacted)).
    pub compactions: u32,
}
