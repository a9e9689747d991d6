//! # toolhost-providers
//!
//! The LLM clients of toolhost: one [`Provider`] trait, one module per wire
//! format (OpenAI-compatible, Anthropic, and prompt-based tool calling for
//! models without native tool calls), the HTTP exchange the first two share
//! (`exchange.rs`) over one transport with retries and backoff
//! ([`transport`]), and the selection of a provider from flags, config and
//! environment. The agent
//! loop (`toolhost-agent`) drives models through this crate; nothing here
//! knows about tools beyond their definitions.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use options::ReasoningEffort;

pub mod anthropic;
pub mod attachments;
mod exchange;
#[doc(hidden)]
pub mod fuzzing;
pub mod grammar;
mod message;
pub mod openai;
pub mod options;
pub mod prompt;
pub mod select;
pub mod strict;
pub mod transport;
pub mod turns;

pub use message::{Message, Role, ToolCall, Usage};

/// A boxed, sendable future (the trait must be usable as `dyn Provider`).
pub use futures::future::BoxFuture;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Its name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (a top-level object schema).
    pub parameters: Arc<Value>,
}

/// Whether the model may, must or must not call tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoice {
    /// The model decides (the default when tools are offered).
    #[default]
    Auto,
    /// No tool calls (used for the forced final answer).
    None,
    /// At least one tool call.
    Required,
}

/// One request to a model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The model name, as the provider knows it.
    pub model: String,
    /// System prompt (providers place it where their format wants it).
    pub system: Option<String>,
    /// The conversation, oldest first. No `Role::System` messages here.
    pub messages: Vec<Message>,
    /// Tools offered; empty means tools are not sent at all.
    pub tools: Vec<ToolDefinition>,
    /// Only meaningful when `tools` is not empty.
    pub tool_choice: ToolChoice,
    /// Whether the model may ask for several tool calls in one response.
    pub parallel_tool_calls: bool,
    /// Upper bound on output tokens.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Asks the server to constrain the reply to this JSON Schema
    /// (constrained decoding: OpenAI-style `response_format`, which
    /// llama.cpp accepts, checked in `cargo xtask eval`; vLLM, LM Studio
    /// and Ollama document it); ignored by the
    /// Anthropic provider. The prompt protocols set it (`prompt/render.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<serde_json::Value>,
    /// Asks the server to hold the reply to this GBNF grammar (llama.cpp's
    /// `grammar` field; a server without it refuses the field). Ignored by
    /// the Anthropic provider. The xml prompt protocol sets it (`prompt/render.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Sequences that end the output (empty: none sent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Reasoning effort (OpenAI `reasoning_effort`, Anthropic `output_config.effort`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// More request-body fields, passed through as they are; a key the
    /// provider's body already has, or one of
    /// [`options::FORBIDDEN_EXTRA_KEYS`], is skipped.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, Value>,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// It finished its answer.
    Stop,
    /// It wants tool calls run.
    ToolCalls,
    /// It hit the output token limit.
    Length,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else, as the provider said it.
    Other(String),
}

/// A complete response: the assistant message with its tool calls assembled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The assistant message (text and tool calls, in order).
    pub message: Message,
    /// Why it stopped.
    pub finish_reason: FinishReason,
    /// Tokens used by this request.
    pub usage: Usage,
}

/// What arrives while a response streams, for user interfaces.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// More answer text.
    Text(String),
    /// More reasoning text, where the provider sends it.
    Reasoning(String),
    /// The model started a tool call (its arguments follow in the completion).
    ToolCallStarted {
        /// The call's id.
        id: String,
        /// The tool name as the model wrote it.
        name: String,
    },
}

/// Receives streamed deltas.
pub type DeltaSink<'a> = &'a (dyn Fn(Delta) + Send + Sync);

/// Why a request failed after the provider's retries.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The server answered with an error status.
    #[error("{provider}: HTTP {status}: {body}")]
    Status {
        /// Provider name.
        provider: String,
        /// HTTP status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The server could not be reached.
    #[error("{provider}: {message}")]
    Connect {
        /// Provider name.
        provider: String,
        /// Why.
        message: String,
    },
    /// No response (or no stream data) within the timeout.
    #[error("{provider}: timed out: {message}")]
    Timeout {
        /// Provider name.
        provider: String,
        /// Which timeout.
        message: String,
    },
    /// The response could not be understood, or the stream ended early.
    #[error("{provider}: bad response: {message}")]
    InvalidResponse {
        /// Provider name.
        provider: String,
        /// What was wrong.
        message: String,
        /// Text received before the failure, if any.
        partial_text: String,
    },
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// A language model behind some wire format.
pub trait Provider: Send + Sync {
    /// A short name for messages and logs (`openai`, `anthropic`, ...).
    fn name(&self) -> &str;

    /// Sends `request`, streaming deltas to `on_delta` as they arrive, and
    /// returns the complete response. Retries transient failures itself.
    /// Returns `ProviderError::Cancelled` promptly once `cancel` fires.
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        on_delta: DeltaSink<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>>;

    /// The prompt protocol this provider offers tools through, if it is one
    /// ([`prompt::PromptTools`]); `None` for native tool calling.
    fn prompt_profile(&self) -> Option<prompt::PromptProfile> {
        None
    }

    /// Whether this provider sends [`CompletionRequest::response_schema`]
    /// and [`CompletionRequest::grammar`] to its server (constrained
    /// decoding). A prompt protocol asks for a constrained reply, and tells
    /// the model the reply's JSON form, only through a provider that does:
    /// the OpenAI-compatible one; never the Anthropic wire, which has
    /// neither field.
    fn constrains_replies(&self) -> bool {
        false
    }
}
