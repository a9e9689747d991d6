//! The agent loop: ask the model, run the tools it asks for, repeat.
//!
//! [`Agent::run`] is one state machine, driven by [`Agent::step`], which
//! pauses at `Proposed` and `Ran` for an embedder's decisions (see
//! [`step`]); `run` takes every default:
//!
//! ```text
//!            +-----------------------------+
//!            v                             |
//! Request(round) --no tool calls--> Done(completed)
//!    |  tool calls                         |
//!    v                                     |
//! Execute(round): repair, parse, doom loop |
//!    v                                     |
//! Proposed (pause) -> run them -> Ran (pause) -> record
//!    |                                     |
//!    +--------------round < max_rounds-----+
//!    |  round == max_rounds
//!    v
//! FinalAnswer (tool_choice none; then no tools, history as text) --> Done(max-rounds)
//!
//! any state --abort--> Done(aborted); --deadline--> Done(timeout);
//! provider error --> Done(error);
//! repeated call refused --> FinalAnswer --> Done(doom-loop);
//! empty reply after tool results --> FinalAnswer --> Done(completed)
//! ```
//!
//! A doom loop (the same tool with the same canonical arguments
//! [`AgentOptions::doom_loop_threshold`] times in a row, across rounds) asks
//! [`AgentOptions::doom_loop_approval`]; without a callback (non-interactive
//! use), or when refused, the repeated call gets a result telling the model
//! it already has that result, the model is asked for a final answer, and
//! the run ends with the dedicated status `doom-loop` and that answer, so
//! callers can tell it apart from host faults and still get an answer.
//!
//! Every failure inside a tool call (unknown tool, malformed arguments,
//! schema violations, traps, timeouts) becomes a tool result the model reads;
//! only host-level faults end the loop, always with a [`Status`], never a panic.
//! However a run ends, every tool call in [`ToolChainResult::messages`] has a
//! tool result (calls that did not run get an error result saying why), so
//! the messages can be sent to a model again.
//!
//! A run goes through these modules, in this order, one file each:
//!
//! 1. **options** (`options.rs`): how it is configured, [`AgentOptions`];
//! 2. **start** (here, [`Agent::start`]): the system prompt and a fresh
//!    state (`state.rs`: the states of the loop and what a run keeps, all of
//!    it serialisable); [`Agent::step`] then moves it from state to state,
//!    here, each step reading the run's context (`ctx.rs`: the options, the
//!    provider and the tools, the deadline and abort, where events go);
//! 3. **request** (`exchange.rs`): the tools offered, the request built,
//!    prepared, sent and streamed, and sent again when the server could not
//!    parse the model's output, or with a call required when the first
//!    reply skipped a tool the user named (`named_tool.rs`); the history
//!    compacted first when it would not fit the model's context
//!    (`compaction.rs`);
//! 4. **plan** (`plan.rs`): the calls of the response checked: names
//!    repaired, arguments parsed, doom loops and repeated calls caught;
//! 5. **decide** (`step.rs`): a pause in which an embedder may decide each
//!    call, and after it runs replace its result; [`Agent::run`] takes
//!    every default;
//! 6. **execute** (`execute.rs`): the calls run (concurrently when all are
//!    read-only) and their results recorded in call order; then back to 3;
//! 7. **final answer** (`final_answer.rs`): one request in which no tool can
//!    be called, after the round limit, a refused doom loop or an empty
//!    reply;
//! 8. **result** (`result.rs`): what the run produced, a [`ToolChainResult`]
//!    with a [`ToolCallRecord`] for each call.
//!
//! ```no_run
//! # async fn demo(provider: std::sync::Arc<dyn toolhost_agent::Provider>,
//! #               runtime: std::sync::Arc<dyn toolhost_agent::ToolExecutor>) {
//! use toolhost_agent::{Agent, AgentOptions, Message, Status, event_channel};
//!
//! let (sink, mut events) = event_channel();
//! let options = AgentOptions::new("gpt-4.1-mini").max_rounds(8).events(sink);
//! let agent = Agent::new(provider, runtime).with_options(options);
//! tokio::spawn(async move {
//!     while let Some(event) = events.recv().await {
//!         println!("{event:?}");
//!     }
//! });
//! let result = agent.run(vec![Message::user("What is 2*(3+4)?")]).await;
//! assert_eq!(result.status, Status::Completed);
//! println!("{}", result.final_text());
//! # }
//! ```

pub(crate) mod answer;
mod compaction;
mod ctx;
mod exchange;
mod execute;
mod final_answer;
mod named_tool;
mod options;
mod plan;
pub(crate) mod result;
pub(crate) mod state;
pub mod step;
mod trace;

pub use final_answer::FINAL_ANSWER_NOTE;
pub use options::{
    AgentOptions, BeforeRequest, DEFAULT_BASE_PROMPT, DoomLoop, DoomLoopApproval, ToolFilter,
    UsageRules,
};
pub use result::AnswerSource;
pub use result::{ToolCallRecord, ToolChainResult};

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{Instrument, info};

use self::ctx::{Callable, Ctx};
use self::state::{RunState, State};
use self::step::{AgentState, StepOutcome};
use crate::events::AgentEvent;
use crate::provider::Provider;
use crate::status::{Stats, Status};
use crate::tools::{ToolCallInfo, ToolExecutor};
use crate::{Message, Role, Usage};

/// Runs the loop for one provider and one tool executor. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    provider: Arc<dyn Provider>,
    tools: Arc<dyn ToolExecutor>,
    options: AgentOptions,
    /// The search index of the last catalog (tool search).
    search_index: Arc<toolhost_search::IndexCache>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.provider.name())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent with the default options (set at least the model with
    /// [`with_options`](Self::with_options)).
    pub fn new(provider: Arc<dyn Provider>, tools: Arc<dyn ToolExecutor>) -> Self {
        Agent {
            provider,
            tools,
            options: AgentOptions::default(),
            search_index: Arc::default(),
        }
    }

    /// Replaces the options.
    pub fn with_options(mut self, options: AgentOptions) -> Self {
        self.options = options;
        self
    }

    /// The options.
    pub fn options(&self) -> &AgentOptions {
        &self.options
    }

    /// The options, to change between runs (e.g. a fresh abort token).
    pub fn options_mut(&mut self) -> &mut AgentOptions {
        &mut self.options
    }

    /// The system prompt a run starting now would send: the base prompt, the
    /// text of any `Role::System` messages among `messages`, the usage rules,
    /// a note on tools the user's last message asks for by name that the
    /// executor withholds ([`ToolExecutor::withheld_tools`]: its permission
    /// layer or the session switched them off), and today's date (never the time,
    /// so the prompt stays cacheable all day).
    /// [`AgentOptions::system_transform`] and request hooks apply to it
    /// before each request, not here.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use toolhost_agent::{Agent, AgentOptions, Message};
    /// # fn demo(provider: Arc<dyn toolhost_agent::Provider>, tools: Arc<dyn toolhost_agent::ToolExecutor>) {
    /// let agent = Agent::new(provider, tools).with_options(AgentOptions::new("model"));
    /// let prompt = agent.system_prompt(&[Message::user("Fetch it with http_get.")]);
    /// assert!(prompt.contains("Today's date"));
    /// # }
    /// ```
    pub fn system_prompt(&self, messages: &[Message]) -> String {
        self.system_prompt_with(messages, &self.withheld_named(messages))
    }

    /// The tools the last user message among `messages` asks for by name
    /// that are not offered (`named_tool::withheld_named`).
    fn withheld_named(&self, messages: &[Message]) -> Vec<String> {
        let info = ToolCallInfo {
            session_id: self.options.session_id.clone(),
            agent: self.options.agent.clone(),
            ..ToolCallInfo::default()
        };
        // Nothing withheld (every executor without a permission layer):
        // the message is not even read.
        let withheld = self.tools.withheld_tools(&info);
        if withheld.is_empty() {
            return Vec::new();
        }
        named_tool::withheld_named(answer::question(messages), &withheld)
    }

    fn system_prompt_with(&self, messages: &[Message], withheld: &[String]) -> String {
        let o = &self.options;
        let mut parts: Vec<String> = Vec::new();
        if !o.base_prompt.trim().is_empty() {
            parts.push(o.base_prompt.trim().to_owned());
        }
        for m in messages.iter().filter(|m| m.role == Role::System) {
            if !m.content.trim().is_empty() {
                parts.push(m.content.trim().to_owned());
            }
        }
        // The options' rules, then the executor's for the tools offered now
        // (a name the options already cover is not repeated).
        let info = ToolCallInfo {
            session_id: o.session_id.clone(),
            agent: o.agent.clone(),
            ..ToolCallInfo::default()
        };
        let mut all: Vec<(String, String)> = o
            .usage_rules
            .iter()
            .map(|r| (r.name.clone(), r.text.clone()))
            .collect();
        for (name, text) in self.tools.usage_rules(&info) {
            if !all.iter().any(|(n, _)| *n == name) {
                all.push((name, text));
            }
        }
        if !all.is_empty() {
            let mut rules = String::from("# Tool usage rules");
            for (name, text) in &all {
                rules.push_str(&format!("\n\n## {name}\n{}", text.trim()));
            }
            parts.push(rules);
        }
        if !o.vars.is_empty() {
            parts.push(crate::var_ref::PROMPT.to_owned());
        }
        if !withheld.is_empty() {
            parts.push(named_tool::withheld_note(withheld));
        }
        parts.push(format!("Today's date: {}.", o.clock.today()));
        parts.join("\n\n")
    }

    /// Runs the loop on `messages` (the conversation so far, ending with the
    /// user's request) and returns the whole tool chain. Never panics on
    /// anything the model, the tools or the provider do; see [`Status`].
    ///
    /// It is [`step`](Self::step) in a loop that runs every proposed call
    /// and keeps every result.
    pub async fn run(&self, messages: Vec<Message>) -> ToolChainResult {
        let span = trace::run_span(&self.options.model, self.provider.name());
        let result = async {
            let mut state = self.start(messages);
            self.advance(&mut state, false).await;
            self.result(&mut state, true)
        }
        .instrument(span.clone())
        .await;
        trace::record_run(&span, &result);
        result
    }

    /// A run on `messages` that has not started: drive it with
    /// [`step`](Self::step). The state can be saved (serde) between steps
    /// and resumed by an agent with the same options, in another process.
    pub fn start(&self, messages: Vec<Message>) -> AgentState {
        info!(messages = messages.len(), "agent run starts");
        let withheld = self.withheld_named(&messages);
        if !withheld.is_empty() {
            info!(tools = ?withheld, "the user asks for tools that are not offered");
        }
        AgentState {
            system: self.system_prompt_with(&messages, &withheld),
            run: RunState {
                messages,
                text: String::new(),
                history: Vec::new(),
                usage: Usage::default(),
                rounds: 0,
                last_call: None,
                repeats: 0,
                recent: Default::default(),
                overflowed: false,
                compacted_after_overflow: false,
                unparsable: false,
                found: std::collections::BTreeSet::new(),
                answer_source: result::AnswerSource::Model,
                settled: false,
                named_tools: Vec::new(),
                named_asks: 0,
                withheld,
                compactions: 0,
            },
            state: State::Request { round: 1 },
            awaiting: false,
            elapsed_ms: 0,
            finished: false,
            deadline: None,
            round_span: None,
        }
    }

    /// Runs `state` on to the next point where a person or a program may
    /// decide: calls proposed ([`StepOutcome::ToolCalls`]; decide with
    /// [`AgentState::decide`], by default a call runs), results ready
    /// ([`StepOutcome::Results`]; replace with [`AgentState::set_result`],
    /// by default they are kept), or the end ([`StepOutcome::Finished`]).
    /// The next call to `step` goes on from there.
    pub async fn step(&self, state: &mut AgentState) -> StepOutcome {
        match self.advance(state, true).await {
            Some(outcome) => outcome,
            None => StepOutcome::Finished(Box::new(self.result(state, false))),
        }
    }

    /// Moves `state` on until a pause (`Some`; only when `pauses`) or the
    /// end (`None`).
    async fn advance(&self, state: &mut AgentState, pauses: bool) -> Option<StepOutcome> {
        let began = Instant::now();
        // The run's time limit counts the time spent in steps, not between them.
        let deadline = *state.deadline.get_or_insert_with(|| {
            let used = Duration::from_millis(state.elapsed_ms);
            self.options
                .timeout
                .and_then(|d| tokio::time::Instant::now().checked_add(d.saturating_sub(used)))
        });
        let ctx = Ctx {
            provider: self.provider.as_ref(),
            tools: self.tools.as_ref(),
            opts: &self.options,
            system: state.system.clone(),
            deadline,
            search_index: &self.search_index,
        };
        let outcome = ctx.advance(state, pauses).await;
        state.elapsed_ms = state
            .elapsed_ms
            .saturating_add(u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX));
        outcome
    }

    /// The run's result (and, the first time, its `Finish` event); `take`
    /// moves the conversation out of `state` rather than copying it.
    fn result(&self, state: &mut AgentState, take: bool) -> ToolChainResult {
        let (status, error) = match &state.state {
            State::Done { status, error } => (*status, error.clone()),
            _ => (Status::Error, Some("the run has not finished".to_owned())),
        };
        let run = &mut state.run;
        // A person always reads words: the results, else why there are none
        // (`answer.rs`); a run the caller stopped, or a host fault, keeps
        // its empty text and says why in `error`. Output the server could
        // not parse is the model's fault, not the host's: it gets words.
        let model_fault = status == Status::Error && run.unparsable;
        // A reply the time or round limit cut while the model was still
        // writing a call as text is no answer either (every reply that
        // ended by itself was checked in `exchange.rs`).
        let cut_short = run.answer_source == result::AnswerSource::Model
            && matches!(status, Status::Timeout | Status::MaxRounds)
            && !run.text.trim().is_empty()
            && answer::not_words(&run.text, &state.system, answer::question(&run.messages))
                .is_some();
        if cut_short {
            info!(%status, "the reply was cut short while not words; answering for the model");
        }
        if (run.text.trim().is_empty() || cut_short)
            && (model_fault || !matches!(status, Status::Aborted | Status::Error))
        {
            let text = match answer::from_results(&run.history) {
                Some(text) => {
                    run.answer_source = result::AnswerSource::Results;
                    text
                }
                None => {
                    run.answer_source = result::AnswerSource::Host;
                    answer::no_answer(status, model_fault, &run.history)
                }
            };
            // The host's own answer says why a tool the user asked for
            // was not used.
            let cut =
                std::mem::replace(&mut run.text, named_tool::and_withheld(text, &run.withheld));
            // The conversation carries the answer the user read, not the
            // half-written call (a saved session's next turn sends it).
            if cut_short
                && let Some(last) = run.messages.last_mut().filter(|m| {
                    m.role == Role::Assistant && m.tool_calls.is_empty() && m.content == cut
                })
            {
                last.content.clone_from(&run.text);
            }
        }
        let stats = Stats {
            rounds: run.rounds,
            tool_calls: u32::try_from(run.history.len()).unwrap_or(u32::MAX),
            errors: u32::try_from(run.history.iter().filter(|h| h.is_error).count())
                .unwrap_or(u32::MAX),
            elapsed_ms: state.elapsed_ms,
            compactions: run.compactions,
        };
        if !state.finished {
            state.finished = true;
            match status {
                Status::Completed | Status::MaxRounds => {
                    info!(%status, rounds = stats.rounds, calls = stats.tool_calls, "agent run ends");
                }
                // The result's status and error say it to the caller.
                _ => info!(
                    %status,
                    error = error.as_deref().unwrap_or_default(),
                    rounds = stats.rounds,
                    "agent run ends early"
                ),
            }
            if let Some(sink) = &self.options.events {
                sink(AgentEvent::Finish {
                    status,
                    error: error.clone(),
                    usage: run.usage,
                    stats,
                });
            }
        }
        let (text, messages, history) = if take {
            (
                std::mem::take(&mut run.text),
                std::mem::take(&mut run.messages),
                std::mem::take(&mut run.history),
            )
        } else {
            (run.text.clone(), run.messages.clone(), run.history.clone())
        };
        ToolChainResult {
            status,
            error,
            text,
            messages,
            history,
            usage: run.usage,
            stats,
            answer_source: run.answer_source,
        }
    }
}

impl Ctx<'_> {
    /// Moves `state` on until a pause (`Some`; only when `pauses`) or the
    /// end (`None`).
    async fn advance(&self, state: &mut AgentState, pauses: bool) -> Option<StepOutcome> {
        let run = &mut state.run;
        loop {
            let current = std::mem::replace(&mut state.state, State::done(Status::Error, None));
            let round_span = trace::round_span(&mut state.round_span, current.round());
            state.state = match current {
                State::Request { round } if round > self.opts.max_rounds => State::FinalAnswer {
                    round,
                    status: Status::MaxRounds,
                    error: Some(format!(
                        "stopped after {} rounds of tool calls",
                        self.opts.max_rounds
                    )),
                },
                State::Request { round } => self.request(run, round).instrument(round_span).await,
                State::Execute {
                    round,
                    calls,
                    tools,
                    builtin,
                    search,
                    completion,
                } => {
                    let offer = Callable {
                        tools: &tools,
                        builtin,
                        search,
                    };
                    let (planned, stop) = self
                        .plan(run, round, calls, offer)
                        .instrument(round_span)
                        .await;
                    State::Proposed {
                        round,
                        planned,
                        stop,
                        completion,
                    }
                }
                State::Proposed { .. } if pauses && !state.awaiting => {
                    let view = step::proposed(&current);
                    state.state = current;
                    state.awaiting = true;
                    return Some(StepOutcome::ToolCalls(view));
                }
                State::Proposed {
                    round,
                    planned,
                    stop,
                    completion,
                } => {
                    state.awaiting = false;
                    self.run_planned(round, planned, stop, completion)
                        .instrument(round_span)
                        .await
                }
                State::Ran { .. } if pauses && !state.awaiting => {
                    let view = step::ready(&current);
                    state.state = current;
                    state.awaiting = true;
                    return Some(StepOutcome::Results(view));
                }
                State::Ran {
                    round,
                    done,
                    stop,
                    completion,
                } => {
                    state.awaiting = false;
                    self.record_round(run, round, done, stop, completion)
                }
                State::FinalAnswer {
                    round,
                    status,
                    error,
                } => {
                    self.final_answer(run, round, status, error)
                        .instrument(round_span)
                        .await
                }
                done @ State::Done { .. } => {
                    state.state = done;
                    return None;
                }
            };
        }
    }
}
