//! What every step of a run reads: the options, the provider and the tools,
//! the system prompt and the deadline ([`Ctx`]); and what every step does
//! with them: report events, tell the time, notice an abort or the deadline,
//! list the tools to offer, end a round.

use std::time::Instant;

use tracing::debug;

use super::options::AgentOptions;
use super::state::{RoundInfo, Stop};
use crate::clock::unix_ms;
use crate::events::AgentEvent;
use crate::provider::Provider;
use crate::read_var::read_var_spec;
use crate::status::Status;
use crate::tools::{ToolCallInfo, ToolExecutor, ToolSpec};
use crate::vars::READ_VAR;

/// The read-only context of a run.
pub(super) struct Ctx<'a> {
    pub(super) provider: &'a dyn Provider,
    pub(super) tools: &'a dyn ToolExecutor,
    pub(super) opts: &'a AgentOptions,
    pub(super) system: String,
    pub(super) deadline: Option<tokio::time::Instant>,
}

/// When a call started: by the agent's clock, and monotonic.
pub(super) struct Timing {
    pub(super) at_ms: u64,
    pub(super) instant: Instant,
}

impl Ctx<'_> {
    pub(super) fn emit(&self, event: AgentEvent) {
        if let Some(sink) = &self.opts.events {
            sink(event);
        }
    }

    pub(super) fn now_ms(&self) -> u64 {
        unix_ms(self.opts.clock.now())
    }

    pub(super) fn start_timing(&self) -> Timing {
        Timing {
            at_ms: self.now_ms(),
            instant: Instant::now(),
        }
    }

    /// Resolves when the run must stop: abort (preferred) or deadline.
    pub(super) async fn interrupted(&self) -> Stop {
        let deadline = self.deadline;
        tokio::select! {
            biased;
            _ = self.opts.abort.cancelled() => Stop {
                status: Status::Aborted,
                error: Some("aborted".to_owned()),
            },
            _ = async move {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending::<()>().await,
                }
            } => Stop {
                status: Status::Timeout,
                error: Some(format!(
                    "the run's time limit ({:?}) passed",
                    self.opts.timeout.unwrap_or_default()
                )),
            },
        }
    }

    /// `Some` when the run must stop already.
    pub(super) fn stop_now(&self) -> Option<Stop> {
        if self.opts.abort.is_cancelled() {
            return Some(Stop {
                status: Status::Aborted,
                error: Some("aborted".to_owned()),
            });
        }
        if self
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d)
        {
            return Some(Stop {
                status: Status::Timeout,
                error: Some(format!(
                    "the run's time limit ({:?}) passed",
                    self.opts.timeout.unwrap_or_default()
                )),
            });
        }
        None
    }

    /// The run's variables as calls carry them to the executor.
    pub(super) fn run_vars(&self) -> crate::vars::RunVars {
        crate::vars::RunVars {
            store: self.opts.vars.clone(),
            max_page: self.opts.max_output_bytes,
        }
    }

    /// The tools for the next request: the executor's plus `read_var` when
    /// the store holds something, through the filter. The flag says whether
    /// the `read_var` offered is the loop's own; an executor that serves
    /// `read_var` ([`ToolExecutor::serves_read_var`]) offers it (or not,
    /// under its policy) and answers it.
    pub(super) fn current_tools(&self) -> (Vec<ToolSpec>, bool) {
        let info = ToolCallInfo {
            session_id: self.opts.session_id.clone(),
            agent: self.opts.agent.clone(),
            vars: Some(self.run_vars()),
            ..ToolCallInfo::default()
        };
        let mut all = self.tools.tools_for(&info);
        let shadowed = self.tools.serves_read_var() || all.iter().any(|t| t.name == READ_VAR);
        if shadowed {
            debug!("the executor's `read_var` shadows the built-in one");
        } else if !self.opts.vars.is_empty() {
            all.push(read_var_spec(self.opts.max_output_bytes));
        }
        let tools = match &self.opts.tool_filter {
            Some(filter) => filter(&all),
            None => all,
        };
        let builtin = !shadowed && tools.iter().any(|t| t.name == READ_VAR);
        (tools, builtin)
    }

    pub(super) fn end_round(&self, round: u32, info: RoundInfo, tool_calls: usize) {
        self.emit(AgentEvent::RoundEnd {
            round,
            usage: info.usage,
            finish_reason: info.finish_reason,
            tool_calls,
        });
    }
}
