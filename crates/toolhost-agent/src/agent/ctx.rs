//! What every step of a run reads: the options, the provider and the tools,
//! the system prompt and the deadline ([`Ctx`]); and what every step does
//! with them: report events, tell the time, notice an abort or the deadline,
//! list the tools to offer (all of them, or with tool search the pinned and
//! found ones and `search_tools`), end a round.

use std::time::Instant;

use tracing::debug;

use super::options::AgentOptions;
use super::state::{RoundInfo, RunState, Stop};
use crate::clock::unix_ms;
use crate::context::definitions_bytes;
use crate::events::AgentEvent;
use crate::provider::Provider;
use crate::read_var::read_var_spec;
use crate::status::Status;
use crate::tool_search::{SEARCH_TOOLS, search_tools_spec};
use crate::tools::{ToolCallInfo, ToolExecutor, ToolSpec};
use crate::vars::READ_VAR;

/// The read-only context of a run.
pub(super) struct Ctx<'a> {
    pub(super) provider: &'a dyn Provider,
    pub(super) tools: &'a dyn ToolExecutor,
    pub(super) opts: &'a AgentOptions,
    pub(super) system: String,
    pub(super) deadline: Option<tokio::time::Instant>,
    /// The search index of the last catalog (tool search).
    pub(super) search_index: &'a toolhost_search::IndexCache,
}

/// The tools of one request.
pub(super) struct Offer {
    /// What the request carries.
    pub(super) offered: Vec<ToolSpec>,
    /// What the model's calls resolve against: `offered`, or with tool
    /// search the whole catalog the policy let through and `search_tools`.
    pub(super) callable: Vec<ToolSpec>,
    /// Whether the `read_var` offered is the loop's own.
    pub(super) builtin: bool,
    /// Whether tool search is on (`search_tools` is the loop's own).
    pub(super) search: bool,
}

/// What a round's calls resolve against ([`Offer::callable`] and its flags).
pub(super) struct Callable<'a> {
    pub(super) tools: &'a [ToolSpec],
    pub(super) builtin: bool,
    pub(super) search: bool,
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

    /// Reports that the text `round` streamed is not the answer
    /// ([`AgentEvent::ReplySetAside`]).
    pub(super) fn set_aside(&self, round: u32, reason: crate::events::SetAside) {
        self.emit(AgentEvent::ReplySetAside { round, reason });
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
    /// the store holds something, through the filter; an executor that
    /// serves `read_var` ([`ToolExecutor::serves_read_var`]) offers it (or
    /// not, under its policy) and answers it. Past the tool search budget
    /// ([`crate::tool_search`]), only the pinned tools, `read_var`, the tools
    /// found so far in this run and `search_tools` are offered; the rest stay
    /// callable by name.
    pub(super) fn current_tools(&self, run: &RunState) -> Offer {
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
        let search = &self.opts.tool_search;
        // An executor's own `search_tools` wins, as its `read_var` does.
        let shadows_search = tools.iter().any(|t| t.name == SEARCH_TOOLS);
        let window = self.opts.context.window_for(&self.opts.model);
        if shadows_search || !search.applies(tools.len(), || definitions_bytes(&tools), window) {
            return Offer {
                callable: tools.clone(),
                offered: tools,
                builtin,
                search: false,
            };
        }
        let mut offered: Vec<ToolSpec> = tools
            .iter()
            .filter(|t| {
                t.name == READ_VAR || search.is_pinned(&t.name) || run.found.contains(&t.name)
            })
            .cloned()
            .collect();
        let spec = search_tools_spec(tools.len(), search.results);
        offered.push(spec.clone());
        let mut callable = tools;
        callable.push(spec);
        Offer {
            offered,
            callable,
            builtin,
            search: true,
        }
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
