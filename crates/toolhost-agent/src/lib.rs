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

pub mod agent;
pub mod clock;
pub mod context;
pub mod events;
pub mod format;
pub mod read_var;
pub mod repair;
pub mod request;
pub mod status;
pub mod think;
pub mod tool_search;
pub mod tools;
pub mod var_ref;
pub mod vars;

// The loop one step at a time, at the path it always had.
pub use agent::step;

pub use provider::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice, ToolDefinition,
};
/// The LLM clients (the `toolhost-providers` crate).
pub use toolhost_providers as provider;
#[doc(hidden)]
pub use toolhost_providers::fuzzing;
/// The messages of a conversation (from `toolhost-providers`).
pub use toolhost_providers::message;
pub use toolhost_providers::message::{Message, Role, ToolCall, Usage};
pub use tools::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec};

pub use agent::{
    Agent, AgentOptions, AnswerSource, BeforeRequest, DEFAULT_BASE_PROMPT, DoomLoop,
    DoomLoopApproval, FINAL_ANSWER_NOTE, ToolCallRecord, ToolChainResult, ToolFilter, UsageRules,
};
pub use clock::{Clock, FixedClock, SystemClock};
pub use events::{AgentEvent, EventSink, SetAside, event_channel};
pub use format::{compact_history, next_turn_history};
pub use status::{Stats, Status};
pub use step::{AgentState, Decision, ProposedCall, ReadyResult, StepError, StepOutcome};
pub use tokio_util::sync::CancellationToken;
pub use toolhost_hooks::ErrorKind;
pub use vars::{
    DEFAULT_MAX_VAR_BYTES, DEFAULT_MAX_VARS, SavedVar, VarError, VarSnapshot, VarStore,
};
