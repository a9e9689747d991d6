//! The provider-neutral conversation: messages, tool calls, usage.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The host's instructions (most providers take it apart from the messages).
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering one `ToolCall` by its id.
    Tool,
}

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call (generated when the provider has none).
    pub id: String,
    /// The tool name exactly as the model wrote it (repair happens in the loop).
    pub name: String,
    /// The arguments exactly as the model wrote them: JSON text, possibly malformed.
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text (for a tool message: the output the model reads).
    #[serde(default)]
    pub content: String,
    /// For an assistant message: the tool calls it makes, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message: the id of the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For a tool message: the name of the tool that ran (some providers need it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For a tool message: whether the result is an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// For a tool or user message: what it carries besides its text
    /// (a tool result's images, audio, resource links and binary resources,
    /// as MCP content blocks), in order. Each provider gives a model the
    /// images it can read as images and a line of text for the rest
    /// (`attachments.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<toolhost_content::Content>,
}

impl Message {
    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }
    /// An assistant message without tool calls.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text(Role::Assistant, text)
    }
    /// The result of tool call `call`.
    pub fn tool_result(call: &ToolCall, output: impl Into<String>, is_error: bool) -> Self {
        Message {
            role: Role::Tool,
            content: output.into(),
            tool_calls: Vec::new(),
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.name.clone()),
            is_error,
            attachments: Vec::new(),
        }
    }
    /// This message with `attachments` (see [`Message::attachments`]).
    ///
    /// ```
    /// use toolhost_content::Content;
    /// use toolhost_providers::{Message, ToolCall};
    ///
    /// let call = ToolCall { id: "c1".into(), name: "chart".into(), arguments: "{}".into() };
    /// let result = Message::tool_result(&call, "A chart of 3 values.", false)
    ///     .with_attachments(vec![Content::image("iVBORw0KGgo=", "image/png")]);
    /// assert_eq!(result.attachments.len(), 1);
    /// ```
    pub fn with_attachments(mut self, attachments: Vec<toolhost_content::Content>) -> Self {
        self.attachments = attachments;
        self
    }
    fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: text.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            attachments: Vec::new(),
        }
    }
}

/// Tokens a request used, as the provider reports them (0 when it does not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (including cached ones).
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache, where reported.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache, where reported.
    pub cache_write_tokens: u64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_read_tokens += o.cache_read_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
    }
}
