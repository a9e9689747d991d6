//! Anthropic's Messages API (`POST {base_url}/v1/messages`).
//!
//! ```no_run
//! use toolhost_providers::anthropic::Anthropic;
//!
//! let claude = Anthropic::new(std::env::var("ANTHROPIC_API_KEY").unwrap_or_default(), "claude-sonnet-4-5")
//!     .with_max_tokens(8192);
//! # let _ = claude;
//! ```

use std::collections::BTreeMap;

use eventsource_stream::Event;
use reqwest::RequestBuilder;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::attachments::{self, Given, text_with_lines};
use crate::exchange::{
    Assembler, Endpoint, WireFormat, completion, exchange, invalid, parse_body, parse_event,
    stream_error,
};
use crate::message::{Message, Role, ToolCall, Usage};
use crate::options::{f32_json, merge_extra};
use crate::transport::RetryPolicy;
use crate::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice,
};

/// The API version sent as `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// The default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// `max_tokens` when the request sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// A provider for the Messages API.
#[derive(Debug, Clone)]
pub struct Anthropic {
    endpoint: Endpoint,
    api_key: String,
    max_tokens: u32,
    reads_images: bool,
}

impl Anthropic {
    /// A provider with `api_key` and the default `model` (used when
    /// [`CompletionRequest::model`] is empty), at [`DEFAULT_BASE_URL`].
    pub fn new(api_key: impl Into<String>, model: impl Into<String>) -> Self {
        Anthropic {
            endpoint: Endpoint::new("anthropic", DEFAULT_BASE_URL.to_owned(), model.into()),
            api_key: api_key.into(),
            max_tokens: DEFAULT_MAX_TOKENS,
            reads_images: true,
        }
    }

    /// Whether the model reads images (on by default: every Claude model
    /// since Claude 3 does). When on, the images of a tool result go to the
    /// model as `image` blocks of its `tool_result`, and a user message's as
    /// `image` blocks of the turn; when off, each is a line of text that
    /// says what it was.
    pub fn with_images(mut self, reads_images: bool) -> Self {
        self.reads_images = reads_images;
        self
    }

    /// Another server (the part before `/v1/messages`; a trailing `/v1` is accepted too).
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        let url = base_url.into();
        let url = url.trim_end_matches('/');
        self.endpoint.base_url = url.strip_suffix("/v1").unwrap_or(url).to_owned();
        self
    }

    /// `max_tokens` when the request sets none (default [`DEFAULT_MAX_TOKENS`]).
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// The name used in errors and logs (default `anthropic`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.endpoint.name = name.into();
        self
    }

    /// Streams responses (`true`, the default) or not.
    pub fn with_streaming(mut self, stream: bool) -> Self {
        self.endpoint.stream = stream;
        self
    }

    /// Retries and timeouts.
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.endpoint.set_retry(policy);
        self
    }

    /// The default model.
    pub fn model(&self) -> &str {
        &self.endpoint.model
    }

    /// The JSON body sent for `request` (public for tests and debugging).
    pub fn request_body(&self, request: &CompletionRequest) -> Value {
        let model = self.endpoint.model_for(request);
        let mut system: Vec<&str> = request.system.iter().map(String::as_str).collect();
        system.extend(
            request
                .messages
                .iter()
                .filter(|m| m.role == Role::System)
                .map(|m| m.content.as_str()),
        );
        system.retain(|s| !s.is_empty());
        let mut body = json!({
            "model": model,
            "max_tokens": request.max_tokens.unwrap_or(self.max_tokens),
            "messages": messages_json(&request.messages, self.reads_images),
        });
        // Prompt caching: the tool definitions and the system prompt (which
        // carries the date, never the time) are the same request after
        // request, so each ends with a cache breakpoint (two of the four
        // Anthropic allows); the conversation after them is not cached.
        let cached = json!({"type": "ephemeral"});
        if !system.is_empty() {
            body["system"] = json!([
                {"type": "text", "text": system.join("\n\n"), "cache_control": cached},
            ]);
        }
        if !request.tools.is_empty() {
            let mut tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = cached.clone();
            }
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = match request.tool_choice {
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Auto => {
                    json!({"type": "auto", "disable_parallel_tool_use": !request.parallel_tool_calls})
                }
                ToolChoice::Required => {
                    json!({"type": "any", "disable_parallel_tool_use": !request.parallel_tool_calls})
                }
            };
        }
        if let Some(t) = request.temperature {
            body["temperature"] = f32_json(t);
        }
        if let Some(p) = request.top_p {
            body["top_p"] = f32_json(p);
        }
        if !request.stop.is_empty() {
            body["stop_sequences"] = json!(request.stop);
        }
        // Anthropic's effort parameter (`output_config.effort`: low, medium,
        // high), documented at platform.claude.com/docs/en/build-with-claude/effort;
        // models without it answer 400, as they would to any unsupported option.
        if let Some(effort) = request.reasoning_effort {
            body["output_config"] = json!({"effort": effort.as_str()});
        }
        if self.endpoint.stream {
            body["stream"] = json!(true);
        }
        merge_extra(&self.endpoint.name, &mut body, &request.extra);
        body
    }
}

impl WireFormat for Anthropic {
    type Assembler = Accumulator;

    const PATH: &'static str = "/v1/messages";

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn headers(&self, request: RequestBuilder) -> RequestBuilder {
        request
            .header("x-api-key", &self.api_key)
            .header("anthropic-version", ANTHROPIC_VERSION)
    }

    fn parse_response(provider: &str, body: &[u8]) -> Result<Completion, ProviderError> {
        parse_response(provider, body)
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        &self.endpoint.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        on_delta: DeltaSink<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            let body = self.request_body(request);
            exchange(self, &body, on_delta, cancel).await
        })
    }
}

/// The arguments of a call as an `input` object (`{}` when empty or malformed).
fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// The conversation as Messages API turns: tool results become `tool_result`
/// blocks of a user turn, and consecutive turns of one role are merged.
/// Attachments (`attachments.rs`) are `image` blocks, of the `tool_result`
/// or of the user's turn, or lines of text.
fn messages_json(messages: &[Message], reads_images: bool) -> Vec<Value> {
    let given = attachments::given(messages, reads_images);
    let mut turns: Vec<(&str, Vec<Value>)> = Vec::new();
    for (m, given) in messages.iter().zip(&given) {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User if !given.is_empty() => {
                let mut blocks: Vec<Value> = text_block(&text_with_lines(&m.content, given, None))
                    .into_iter()
                    .collect();
                blocks.extend(image_blocks(given));
                ("user", blocks)
            }
            Role::User => ("user", text_block(&m.content).into_iter().collect()),
            Role::Assistant => {
                let mut blocks: Vec<Value> = text_block(&m.content).into_iter().collect();
                blocks.extend(m.tool_calls.iter().map(|c| {
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input_object(&c.arguments)})
                }));
                ("assistant", blocks)
            }
            Role::Tool => {
                let content = if given.is_empty() {
                    json!(m.content)
                } else {
                    let mut blocks: Vec<Value> =
                        text_block(&text_with_lines(&m.content, given, None))
                            .into_iter()
                            .collect();
                    blocks.extend(image_blocks(given));
                    Value::Array(blocks)
                };
                (
                    "user",
                    vec![json!({
                        "type": "tool_result",
                        "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
                        "content": content,
                        "is_error": m.is_error,
                    })],
                )
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((r, existing)) if *r == role => existing.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

/// The images among `given`, as `image` blocks with base64 sources.
fn image_blocks<'a>(given: &'a [Given<'a>]) -> impl Iterator<Item = Value> + 'a {
    given.iter().filter_map(|g| match g {
        Given::Image(image) => Some(json!({
            "type": "image",
            "source": {"type": "base64", "media_type": image.mime_type, "data": image.data},
        })),
        Given::Line(_) => None,
    })
}

fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn stop_reason(s: &str) -> FinishReason {
    match s {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Updates `u` with what this report carries (reports are cumulative).
    fn apply(&self, u: &mut Usage, uncached_input: &mut u64) {
        if let Some(v) = self.input_tokens {
            *uncached_input = v;
        }
        if let Some(v) = self.output_tokens {
            u.output_tokens = v;
        }
        if let Some(v) = self.cache_read_input_tokens {
            u.cache_read_tokens = v;
        }
        if let Some(v) = self.cache_creation_input_tokens {
            u.cache_write_tokens = v;
        }
        // Ours counts cached prompt tokens as input too.
        u.input_tokens = *uncached_input + u.cache_read_tokens + u.cache_write_tokens;
    }
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireStartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: WireDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop {},
    Ping {},
    Error {
        #[serde(default)]
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Deserialize)]
struct WireStartMessage {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        #[serde(default)]
        text: String,
    },
    InputJsonDelta {
        #[serde(default)]
        partial_json: String,
    },
    ThinkingDelta {
        #[serde(default)]
        thinking: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug)]
struct PartialToolUse {
    id: String,
    name: String,
    json: String,
    start_input: Option<Value>,
}

/// Assembles a streamed response.
#[derive(Debug, Default)]
pub(crate) struct Accumulator {
    text: String,
    tools: BTreeMap<usize, PartialToolUse>,
    usage: Usage,
    uncached_input: u64,
    stop: Option<FinishReason>,
    stopped: bool,
    events: usize,
}

impl Accumulator {
    /// Handles one event; `true` once the message is complete.
    fn event(
        &mut self,
        provider: &str,
        name: &str,
        data: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<bool, ProviderError> {
        self.events += 1;
        if data.trim().is_empty() {
            return Ok(false);
        }
        // `event: error`, whatever its data's shape (llama.cpp's has no
        // `"type": "error"`).
        if let Some(error) = stream_error(provider, name, data, &self.text) {
            return Err(error);
        }
        let ev: WireEvent = parse_event(
            provider,
            format_args!(
                "event {} ({})",
                self.events,
                if name.is_empty() { "unnamed" } else { name }
            ),
            data,
            &self.text,
        )?;
        match ev {
            WireEvent::MessageStart { message } => {
                if let Some(u) = message.usage {
                    u.apply(&mut self.usage, &mut self.uncached_input);
                }
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                WireBlock::Text { text } => self.text_delta(text, on_delta),
                WireBlock::Thinking { thinking } if !thinking.is_empty() => {
                    on_delta(Delta::Reasoning(thinking));
                }
                WireBlock::ToolUse { id, name, input } => {
                    on_delta(Delta::ToolCallStarted {
                        id: id.clone(),
                        name: name.clone(),
                    });
                    self.tools.insert(
                        index,
                        PartialToolUse {
                            id,
                            name,
                            json: String::new(),
                            start_input: input,
                        },
                    );
                }
                WireBlock::Thinking { .. } | WireBlock::Other => {}
            },
            WireEvent::ContentBlockDelta { index, delta } => match delta {
                WireDelta::TextDelta { text } => self.text_delta(text, on_delta),
                WireDelta::ThinkingDelta { thinking } => {
                    if !thinking.is_empty() {
                        on_delta(Delta::Reasoning(thinking));
                    }
                }
                WireDelta::InputJsonDelta { partial_json } => match self.tools.get_mut(&index) {
                    Some(t) => t.json.push_str(&partial_json),
                    None => {
                        tracing::debug!(provider, index, "input_json_delta for no tool_use block");
                    }
                },
                WireDelta::Other => {}
            },
            WireEvent::ContentBlockStop {} | WireEvent::Ping {} | WireEvent::Unknown => {}
            WireEvent::MessageDelta { delta, usage } => {
                if let Some(r) = delta.stop_reason {
                    self.stop = Some(stop_reason(&r));
                }
                if let Some(u) = usage {
                    u.apply(&mut self.usage, &mut self.uncached_input);
                }
            }
            WireEvent::MessageStop {} => {
                self.stopped = true;
                return Ok(true);
            }
            WireEvent::Error { error } => {
                // An unnamed event with `"type": "error"`.
                let data = serde_json::json!({ "error": error }).to_string();
                return Err(
                    stream_error(provider, "error", &data, &self.text).unwrap_or_else(|| {
                        invalid(provider, "an error event".to_owned(), &self.text)
                    }),
                );
            }
        }
        Ok(false)
    }

    fn text_delta(&mut self, text: String, on_delta: DeltaSink<'_>) {
        if !text.is_empty() {
            self.text.push_str(&text);
            on_delta(Delta::Text(text));
        }
    }
}

impl Assembler for Accumulator {
    fn text(&self) -> &str {
        &self.text
    }

    fn end_here(&mut self) {
        self.stop.get_or_insert(FinishReason::Stop);
    }

    fn on_event(
        &mut self,
        provider: &str,
        event: &Event,
        on_delta: DeltaSink<'_>,
    ) -> Result<bool, ProviderError> {
        self.event(provider, &event.event, &event.data, on_delta)
    }

    fn finish(self, provider: &str) -> Result<Completion, ProviderError> {
        if !self.stopped && self.stop.is_none() {
            return Err(invalid(
                provider,
                "the stream ended before message_stop".to_owned(),
                &self.text,
            ));
        }
        let calls = self
            .tools
            .into_values()
            .map(|t| ToolCall {
                id: t.id,
                name: t.name,
                arguments: tool_arguments(t.json, t.start_input),
            })
            .collect();
        Ok(finished(self.text, calls, self.stop, self.usage))
    }
}

fn tool_arguments(joined: String, start_input: Option<Value>) -> String {
    if !joined.trim().is_empty() {
        return joined;
    }
    match start_input {
        Some(v @ Value::Object(_)) if v.as_object().is_some_and(|o| !o.is_empty()) => v.to_string(),
        _ => "{}".to_owned(),
    }
}

/// The completion of a response that ended with `stop`.
fn finished(
    text: String,
    calls: Vec<ToolCall>,
    stop: Option<FinishReason>,
    usage: Usage,
) -> Completion {
    let finish_reason = match stop {
        Some(f) => f,
        None if !calls.is_empty() => FinishReason::ToolCalls,
        None => FinishReason::Stop,
    };
    completion(text, calls, finish_reason, usage)
}

#[derive(Debug, Deserialize)]
struct WireResponse {
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// Parses a non-streamed Messages response.
fn parse_response(provider: &str, body: &[u8]) -> Result<Completion, ProviderError> {
    let resp: WireResponse = parse_body(provider, body)?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for block in resp.content {
        match block {
            WireBlock::Text { text: t } => text.push_str(&t),
            WireBlock::ToolUse { id, name, input } => calls.push(ToolCall {
                id,
                name,
                arguments: tool_arguments(String::new(), input),
            }),
            WireBlock::Thinking { .. } | WireBlock::Other => {}
        }
    }
    let mut usage = Usage::default();
    let mut uncached = 0;
    if let Some(u) = resp.usage {
        u.apply(&mut usage, &mut uncached);
    }
    Ok(finished(
        text,
        calls,
        resp.stop_reason.as_deref().map(stop_reason),
        usage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_tool_results_and_merges_turns() {
        let a = ToolCall {
            id: "a".into(),
            name: "calc".into(),
            arguments: r#"{"e":"1"}"#.into(),
        };
        let b = ToolCall {
            id: "b".into(),
            name: "calc".into(),
            arguments: "not json".into(),
        };
        let msgs = vec![
            Message::user("go"),
            Message {
                tool_calls: vec![a.clone(), b.clone()],
                ..Message::assistant("let me")
            },
            Message::tool_result(&a, "1", false),
            Message::tool_result(&b, "bad", true),
            Message::user("and?"),
        ];
        let v = messages_json(&msgs, true);
        assert_eq!(v.len(), 3);
        assert_eq!(v[1]["content"][1]["input"], json!({"e": "1"}));
        assert_eq!(v[1]["content"][2]["input"], json!({}));
        assert_eq!(v[2]["role"], "user");
        let blocks = v[2]["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 3);
        assert_eq!(blocks[1]["is_error"], true);
        assert_eq!(blocks[2]["type"], "text");
    }

    #[test]
    fn unknown_events_and_blocks_are_ignored() {
        let sink = |_: Delta| {};
        let mut acc = Accumulator::default();
        for (name, data) in [
            ("future_event", r#"{"type":"future_event","x":1}"#),
            (
                "content_block_start",
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web"}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"citations_delta","citation":{}}}"#,
            ),
            (
                "message_delta",
                r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":9}}"#,
            ),
        ] {
            assert!(!acc.event("anthropic", name, data, &sink).unwrap());
        }
        assert!(
            acc.event(
                "anthropic",
                "message_stop",
                r#"{"type":"message_stop"}"#,
                &sink
            )
            .unwrap()
        );
        let c = acc.finish("anthropic").unwrap();
        assert_eq!(c.finish_reason, FinishReason::Length);
        assert_eq!(c.usage.output_tokens, 9);
        let mut acc = Accumulator::default();
        let e = acc.event("anthropic", "ping", "{oops", &sink).unwrap_err();
        assert!(e.to_string().contains("event 1 (ping)"), "{e}");
    }

    #[test]
    fn non_streaming_response() {
        let body = br#"{"id":"m","type":"message","content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"calc","input":{"e":"2"}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":4,"cache_read_input_tokens":10}}"#;
        let c = parse_response("anthropic", body).unwrap();
        assert_eq!(c.message.content, "hi");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"e":"2"}"#);
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.usage.input_tokens, 13);
        assert_eq!(c.usage.output_tokens, 4);
    }
}
