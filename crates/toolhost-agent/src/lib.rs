//! # toolhost-agent
//!
//! The agent loop and the LLM providers. The loop drives tools through the
//! small [`ToolExecutor`] trait (implemented for `toolhost_runtime::Runtime`),
//! and models through the [`Provider`] trait.
//!
//! [`Agent::run`] is the loop; it returns a [`ToolChainResult`] and reports
//! every step as an [`AgentEvent`]. [`compact_history`] turns a finished run
//! into one assistant message for a chat history.

pub mod agent;
pub mod clock;
pub mod events;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
pub mod message;
pub mod provider;
pub mod repair;
pub mod tools;
pub mod vars;

pub use message::{Message, Role, ToolCall, Usage};
pub use provider::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice, ToolDefinition,
};
pub use tools::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec};

pub use agent::{
    Agent, AgentOptions, BeforeRequest, DEFAULT_BASE_PROMPT, DoomLoop, DoomLoopApproval,
    FINAL_ANSWER_NOTE, Stats, Status, ToolCallRecord, ToolChainResult, ToolFilter, UsageRules,
};
pub use clock::{Clock, FixedClock, SystemClock};
pub use events::{AgentEvent, EventSink, event_channel};
pub use format::compact_history;
pub use tokio_util::sync::CancellationToken;
pub use toolhost_hooks::ErrorKind;
pub use vars::VarStore;
