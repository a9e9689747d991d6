//! # toolhost-agent
//!
//! The agent loop. It drives tools through the small [`ToolExecutor`] trait
//! (implemented for the runtime by the adapter crate
//! `toolhost-agent-runtime`, so neither this crate nor the runtime imports
//! the other, and this one needs no WebAssembly), and models through the
//! [`Provider`] trait of `toolhost-providers` (re-exported as [`provider`]).
//!
//! [`Agent::run`] is the loop; it returns a [`ToolChainResult`] and reports
//! every step as an [`AgentEvent`]. [`compact_history`] turns a finished run
//! into one assistant message for a chat history.

mod agent;
mod clock;
pub mod context;
mod events;
mod format;
pub mod read_var;
pub mod repair;
pub mod request;
mod status;
pub mod think;
pub mod tool_search;
mod tools;
pub mod var_ref;
mod vars;

pub use provider::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice, ToolDefinition,
};
/// The LLM clients (the `toolhost-providers` crate).
pub use toolhost_providers as provider;
#[doc(hidden)]
pub use toolhost_providers::fuzzing;
pub use toolhost_providers::{Message, Role, ToolCall, Usage};
pub use tools::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec};

pub use agent::step::{AgentState, Decision, ProposedCall, ReadyResult, StepError, StepOutcome};
pub use agent::{
    Agent, AgentOptions, AnswerSource, BeforeRequest, DEFAULT_BASE_PROMPT, DoomLoop,
    DoomLoopApproval, FINAL_ANSWER_NOTE, ToolCallRecord, ToolChainResult, ToolFilter, UsageRules,
};
pub use clock::{Clock, FixedClock, SystemClock};
pub use events::{AgentEvent, EventSink, SetAside, event_channel};
pub use format::{compact_history, next_turn_history};
pub use status::{Stats, Status};
pub use tokio_util::sync::CancellationToken;
pub use toolhost_content::ErrorKind;
pub use vars::{
    DEFAULT_MAX_VAR_BYTES, DEFAULT_MAX_VARS, READ_VAR, RunVars, SavedVar, VarError, VarSnapshot,
    VarStore,
};
