//! The loop one step at a time, for embedders whose users decide each tool
//! call: [`Agent::step`](crate::Agent::step) returns at every point where a
//! person or a program may decide, with a state that can be saved and
//! resumed later, in another process.
//!
//! - [`StepOutcome::ToolCalls`]: the model proposed calls. For each, decide
//!   with [`AgentState::decide`]: run it (the default), run it with other
//!   arguments, skip it with a reason the model reads, or give its result by
//!   hand.
//! - [`StepOutcome::Results`]: the calls ran. Keep their results (the
//!   default) or replace one with [`AgentState::set_result`].
//! - [`StepOutcome::Finished`]: the run is over.
//!
//! [`Agent::run`](crate::Agent::run) is `step` in a loop that takes every
//! default. The permission layer, hooks and limits of the executor apply to
//! every call that runs, whatever was decided here.
//!
//! ```no_run
//! # async fn demo(agent: toolhost_agent::Agent) -> anyhow::Result<()> {
//! use toolhost_agent::{AgentState, Decision, Message, StepOutcome};
//!
//! let mut state = agent.start(vec![Message::user("Delete the old logs")]);
//! loop {
//!     match agent.step(&mut state).await {
//!         StepOutcome::ToolCalls(calls) => {
//!             for call in calls.iter().filter(|c| c.tool == "delete_file") {
//!                 state.decide(&call.call_id, Decision::Skip("not today".into()))?;
//!             }
//!             // Or: save it and resume tomorrow, in another process.
//!             let saved = serde_json::to_string(&state)?;
//!             state = serde_json::from_str::<AgentState>(&saved)?;
//!         }
//!         StepOutcome::Results(_) => {}
//!         StepOutcome::Finished(result) => {
//!             println!("{}", result.final_text());
//!             break;
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::result::ToolChainResult;
use super::state::{Action, Executed, Planned, RunState, State};

/// A run between steps. Serialise it (serde) to store it; resume it with an
/// [`Agent`](crate::Agent) that has the same provider, tools and options.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentState {
    /// The system prompt, as built when the run started.
    pub(crate) system: String,
    pub(crate) run: RunState,
    pub(crate) state: State,
    /// Whether the last step paused here and the next one goes on.
    pub(crate) awaiting: bool,
    /// Time spent in steps so far (the run's time limit counts only this).
    pub(crate) elapsed_ms: u64,
    /// Whether the `Finish` event was sent.
    pub(crate) finished: bool,
    /// This process's deadline, from the time limit and `elapsed_ms`.
    #[serde(skip)]
    pub(crate) deadline: Option<Option<tokio::time::Instant>>,
    /// The current round's span (a trace's `round N`), kept across the
    /// round's steps; a resumed state opens a new one.
    #[serde(skip)]
    pub(crate) round_span: Option<(u32, tracing::Span)>,
}

/// Where a step stopped.
#[derive(Debug, Clone)]
pub enum StepOutcome {
    /// The model proposed these calls; decide with [`AgentState::decide`].
    ToolCalls(Vec<ProposedCall>),
    /// The calls' results; replace any with [`AgentState::set_result`].
    Results(Vec<ReadyResult>),
    /// The run is over.
    Finished(Box<ToolChainResult>),
}

/// A call the model proposed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProposedCall {
    /// The model's call id.
    pub call_id: String,
    /// The tool, its name repaired.
    pub tool: String,
    /// The name the model wrote.
    pub requested_name: String,
    /// The arguments, parsed and with variable references substituted
    /// (`null` when they could not be parsed).
    pub args: Value,
    /// Whether the call runs when nothing else is decided. When it does not
    /// (unknown tool, malformed arguments, a repeated call, the loop
    /// stopping), `note` says why; it can still be given a result by hand.
    pub will_run: bool,
    /// Why it will not run.
    pub note: Option<String>,
}

/// A call's result, before the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReadyResult {
    /// The model's call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments it ran with.
    pub args: Value,
    /// What the model will read.
    pub output: String,
    /// Whether it is an error.
    pub is_error: bool,
    /// Data for user interfaces.
    pub details: Option<Value>,
}

/// What to do with a proposed call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run it as proposed (the default).
    Execute,
    /// Run it with these arguments instead (the executor validates them).
    EditArguments(Value),
    /// Do not run it; the model reads "not run: REASON".
    Skip(String),
    /// Do not run it; the model reads this result.
    Supply {
        /// The result.
        output: String,
        /// Whether it is an error.
        is_error: bool,
    },
}

/// A decision that does not fit the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The run is not paused where this decision belongs.
    #[error("the run is not waiting for {0}")]
    NotWaiting(&'static str),
    /// No call with this id is waiting.
    #[error("no call `{0}` is waiting")]
    UnknownCall(String),
    /// The call cannot run (unknown tool, malformed arguments); it can be
    /// skipped or given a result.
    #[error("call `{0}` cannot run: {1}")]
    CannotRun(String, String),
}

impl AgentState {
    /// Decides what happens to a proposed call (after
    /// [`StepOutcome::ToolCalls`]).
    pub fn decide(&mut self, call_id: &str, decision: Decision) -> Result<(), StepError> {
        let State::Proposed { planned, .. } = &mut self.state else {
            return Err(StepError::NotWaiting("decisions on proposed calls"));
        };
        if !self.awaiting {
            return Err(StepError::NotWaiting("decisions on proposed calls"));
        }
        let p = planned
            .iter_mut()
            .find(|p| p.call.id == call_id)
            .ok_or_else(|| StepError::UnknownCall(call_id.to_owned()))?;
        match decision {
            Decision::Execute | Decision::EditArguments(_)
                if !matches!(p.action, Action::Run { .. }) =>
            {
                return Err(StepError::CannotRun(
                    call_id.to_owned(),
                    note(&p.action).unwrap_or_default(),
                ));
            }
            Decision::Execute => {}
            Decision::EditArguments(args) => p.args = args,
            Decision::Skip(reason) => p.action = Action::Skip { reason },
            Decision::Supply { output, is_error } => {
                p.action = Action::Supplied { output, is_error };
            }
        }
        Ok(())
    }

    /// Replaces a call's result before the model reads it (after
    /// [`StepOutcome::Results`]).
    pub fn set_result(
        &mut self,
        call_id: &str,
        output: impl Into<String>,
        is_error: bool,
    ) -> Result<(), StepError> {
        let State::Ran { done, .. } = &mut self.state else {
            return Err(StepError::NotWaiting("results"));
        };
        if !self.awaiting {
            return Err(StepError::NotWaiting("results"));
        }
        let (_, e) = done
            .iter_mut()
            .find(|(p, _)| p.call.id == call_id)
            .ok_or_else(|| StepError::UnknownCall(call_id.to_owned()))?;
        let output = output.into();
        e.replaced = true;
        e.for_model.clone_from(&output);
        e.outcome.output = output;
        e.outcome.is_error = is_error;
        if !is_error {
            e.outcome.error_kind = None;
        } else if e.outcome.error_kind.is_none() {
            e.outcome.error_kind = Some(toolhost_content::ErrorKind::Rejected);
        }
        Ok(())
    }

    /// The calls waiting for a decision (empty unless the last step
    /// returned [`StepOutcome::ToolCalls`]).
    pub fn proposed(&self) -> Vec<ProposedCall> {
        if self.awaiting {
            proposed(&self.state)
        } else {
            Vec::new()
        }
    }

    /// The conversation so far.
    pub fn messages(&self) -> &[crate::Message] {
        &self.run.messages
    }

    /// Whether the run is over.
    pub fn is_finished(&self) -> bool {
        matches!(self.state, State::Done { .. })
    }
}

fn note(action: &Action) -> Option<String> {
    match action {
        Action::Run { .. } => None,
        Action::Reject { message, .. } => Some(message.clone()),
        Action::Skip { reason } => Some(format!("not run: {reason}")),
        Action::Repeat { .. } => Some("the same call just ran; its result is reused".into()),
        Action::Supplied { .. } => Some("its result was given".into()),
        Action::Searched { .. } => Some("answered by the loop's tool search".into()),
    }
}

/// The calls of a `Proposed` state.
pub(crate) fn proposed(state: &State) -> Vec<ProposedCall> {
    let State::Proposed { planned, .. } = state else {
        return Vec::new();
    };
    planned.iter().map(proposed_call).collect()
}

fn proposed_call(p: &Planned) -> ProposedCall {
    ProposedCall {
        call_id: p.call.id.clone(),
        tool: p.tool.clone(),
        requested_name: p.call.name.clone(),
        args: p.args.clone(),
        will_run: matches!(p.action, Action::Run { .. }),
        note: note(&p.action),
    }
}

/// The results of a `Ran` state.
pub(crate) fn ready(state: &State) -> Vec<ReadyResult> {
    let State::Ran { done, .. } = state else {
        return Vec::new();
    };
    done.iter()
        .map(|(p, e): &(Planned, Executed)| ReadyResult {
            call_id: p.call.id.clone(),
            tool: p.tool.clone(),
            args: p.args.clone(),
            output: e.for_model.clone(),
            is_error: e.outcome.is_error,
            details: e.outcome.details.clone(),
        })
        .collect()
}
