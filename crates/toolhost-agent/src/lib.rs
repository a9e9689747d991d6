//! # toolhost-agent
//!
//! The agent loop and the LLM providers. The loop drives tools through the
//! small [`ToolExecutor`] trait (implemented for `toolhost_runtime::Runtime`),
//! and models through the [`Provider`] trait.

pub mod message;
pub mod provider;
pub mod tools;

pub use message::{Message, Role, ToolCall, Usage};
pub use provider::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice, ToolDefinition,
};
pub use tools::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec};
