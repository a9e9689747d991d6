//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), as spoken by
//! OpenAI and by compatible servers (Ollama's `/v1`, vLLM, llama.cpp, LM
//! Studio, OpenRouter, ...).
//!
//! ```no_run
//! use toolhost_providers::openai::OpenAiCompatible;
//!
//! let openai = OpenAiCompatible::new("https://api.openai.com/v1", "gpt-4o-mini")
//!     .with_api_key(std::env::var("OPENAI_API_KEY").ok());
//! let ollama = OpenAiCompatible::new("http://localhost:11434/v1", "qwen3:8b").with_name("ollama");
//! # let _ = (openai, ollama);
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
use crate::strict::{drop_strict_nulls, strict_schema};
use crate::transport::{RetryPolicy, excerpt};
use crate::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice,
};

/// Which request field carries [`CompletionRequest::max_tokens`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens` (compatible servers, older OpenAI models).
    #[default]
    MaxTokens,
    /// `max_completion_tokens` (current OpenAI models, required by reasoning models).
    MaxCompletionTokens,
}

/// A provider for the Chat Completions API.
#[derive(Debug, Clone)]
pub struct OpenAiCompatible {
    endpoint: Endpoint,
    api_key: Option<String>,
    max_tokens_field: MaxTokensField,
    strict_tools: bool,
    reads_images: bool,
}

impl OpenAiCompatible {
    /// A provider for the server at `base_url` (the part before
    /// `/chat/completions`, e.g. `https://api.openai.com/v1`) and the default
    /// `model` (used when [`CompletionRequest::model`] is empty). Streams by
    /// default; named `openai`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        OpenAiCompatible {
            endpoint: Endpoint::new("openai", base_url, model.into()),
            api_key: None,
            max_tokens_field: MaxTokensField::default(),
            strict_tools: false,
            reads_images: false,
        }
    }

    /// Whether the model reads images (off by default: a server may serve
    /// a model without vision, which refuses them). When on, the images of
    /// tool results go to the model as `image_url` parts with `data:` URLs,
    /// in a user message after the results (the API takes images only in
    /// user messages), and a user message's images as parts of it; when
    /// off, each image is a line of text that says what it was.
    pub fn with_images(mut self, reads_images: bool) -> Self {
        self.reads_images = reads_images;
        self
    }

    /// Sends tools with `"strict": true` and their schemas in the subset
    /// strict mode accepts ([`crate::strict`]), so that a server with
    /// Structured Outputs holds the arguments to the schema (constrained
    /// decoding of native calls); the nulls this makes the model write for
    /// optional arguments are dropped again. Off by default.
    pub fn with_strict_tools(mut self, strict: bool) -> Self {
        self.strict_tools = strict;
        self
    }

    /// Sends `Authorization: Bearer <key>` (nothing when `None` or empty).
    pub fn with_api_key(mut self, key: Option<String>) -> Self {
        self.api_key = key.filter(|k| !k.is_empty());
        self
    }

    /// The name used in errors and logs (default `openai`).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.endpoint.name = name.into();
        self
    }

    /// Streams responses (`true`, the default) or not.
    pub fn with_streaming(mut self, stream: bool) -> Self {
        self.endpoint.stream = stream;
        self
    }

    /// Which field carries the output token limit.
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
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

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.endpoint.base_url
    }

    /// The JSON body sent for `request` (public for tests and debugging).
    pub fn request_body(&self, request: &CompletionRequest) -> Value {
        let model = self.endpoint.model_for(request);
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.extend(messages_json(&request.messages, self.reads_images));
        let mut body = json!({"model": model, "messages": messages});
        if !request.tools.is_empty() {
            let tools: Vec<Value> = request
                .tools
                .iter()
                .map(|t| {
                    let mut function = json!({
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    });
                    if self.strict_tools {
                        function["parameters"] = strict_schema(&t.parameters);
                        function["strict"] = json!(true);
                    }
                    json!({"type": "function", "function": function})
                })
                .collect();
            body["tools"] = Value::Array(tools);
            body["tool_choice"] = json!(match request.tool_choice {
                ToolChoice::Auto => "auto",
                ToolChoice::None => "none",
                ToolChoice::Required => "required",
            });
            body["parallel_tool_calls"] = json!(request.parallel_tool_calls);
        }
        if let Some(max) = request.max_tokens {
            let field = match self.max_tokens_field {
                MaxTokensField::MaxTokens => "max_tokens",
                MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            };
            body[field] = json!(max);
        }
        if let Some(t) = request.temperature {
            body["temperature"] = f32_json(t);
        }
        if let Some(p) = request.top_p {
            body["top_p"] = f32_json(p);
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        if let Some(effort) = request.reasoning_effort {
            body["reasoning_effort"] = json!(effort.as_str());
        }
        if let Some(schema) = &request.response_schema {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": schema},
            });
        }
        if let Some(grammar) = &request.grammar {
            body["grammar"] = json!(grammar);
        }
        if self.endpoint.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        merge_extra(&self.endpoint.name, &mut body, &request.extra);
        body
    }
}

impl WireFormat for OpenAiCompatible {
    type Assembler = StreamAccumulator;

    const PATH: &'static str = "/chat/completions";

    fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn headers(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.api_key {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    fn parse_response(provider: &str, body: &[u8]) -> Result<Completion, ProviderError> {
        parse_response(provider, body)
    }
}

impl Provider for OpenAiCompatible {
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
            let mut completion = exchange(self, &body, on_delta, cancel).await?;
            if self.strict_tools {
                for call in &mut completion.message.tool_calls {
                    if let Some(tool) = request.tools.iter().find(|t| t.name == call.name) {
                        call.arguments = drop_strict_nulls(&call.arguments, &tool.parameters);
                    }
                }
            }
            Ok(completion)
        })
    }

    fn constrains_replies(&self) -> bool {
        true
    }
}

/// The conversation as Chat Completions messages: each message as
/// [`message_json`] writes it, with its attachments (`attachments.rs`): a
/// line of text for each one not given as an image; a user message's
/// images as `image_url` parts of it; the images of a run of tool results
/// in one user message after them, since a `tool` message takes text only.
fn messages_json(messages: &[Message], reads_images: bool) -> Vec<Value> {
    let given = attachments::given(messages, reads_images);
    let mut out = Vec::with_capacity(messages.len());
    let mut images: Vec<Value> = Vec::new();
    for (m, given) in messages.iter().zip(&given) {
        if m.role != Role::Tool && !images.is_empty() {
            out.push(tool_images(std::mem::take(&mut images)));
        }
        if given.is_empty() {
            out.push(message_json(m, &m.content));
            continue;
        }
        let parts = given.iter().filter_map(|g| match g {
            Given::Image(image) => {
                Some(json!({"type": "image_url", "image_url": {"url": image.data_url()}}))
            }
            Given::Line(_) => None,
        });
        match m.role {
            Role::Tool => {
                let text = text_with_lines(&m.content, given, Some("in the next message"));
                out.push(message_json(m, &text));
                images.extend(parts);
            }
            Role::User => {
                let text = text_with_lines(&m.content, given, None);
                let mut content = vec![json!({"type": "text", "text": text})];
                content.extend(parts);
                out.push(json!({"role": "user", "content": content}));
            }
            Role::System | Role::Assistant => out.push(message_json(m, &m.content)),
        }
    }
    if !images.is_empty() {
        out.push(tool_images(images));
    }
    out
}

/// The user message that carries the images of the tool results before it.
fn tool_images(images: Vec<Value>) -> Value {
    let mut content =
        vec![json!({"type": "text", "text": "The images of the tool results above, in order:"})];
    content.extend(images);
    json!({"role": "user", "content": content})
}

/// `m` with `content` as its text.
fn message_json(m: &Message, content: &str) -> Value {
    match m.role {
        Role::System => json!({"role": "system", "content": content}),
        Role::User => json!({"role": "user", "content": content}),
        Role::Assistant if m.tool_calls.is_empty() => {
            json!({"role": "assistant", "content": content})
        }
        Role::Assistant => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
            let content = if content.is_empty() {
                Value::Null
            } else {
                json!(content)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Role::Tool => {
            // The API has no error flag: say it in the text.
            let content = if m.is_error && !content.trim_start().to_lowercase().starts_with("error")
            {
                format!("Error: {content}")
            } else {
                content.to_owned()
            };
            json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
                "content": content,
            })
        }
    }
}

/// The provider's finish reason in ours.
fn finish_reason(s: &str) -> FinishReason {
    match s {
        "stop" | "end_turn" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    fn usage(&self) -> Usage {
        Usage {
            input_tokens: self.prompt_tokens.unwrap_or(0),
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_read_tokens: self
                .prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            cache_write_tokens: 0,
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// A string on the wire; some servers send an object.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, alias = "message")]
    delta: Option<WireMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Option<Vec<WireChoice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

fn args_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
    announced: bool,
}

/// Assembles a streamed response.
#[derive(Debug, Default)]
pub(crate) struct StreamAccumulator {
    text: String,
    calls: BTreeMap<usize, PartialCall>,
    finish: Option<FinishReason>,
    usage: Usage,
    done: bool,
    chunks: usize,
}

impl StreamAccumulator {
    /// Takes one server-sent event's data; returns whether it was the
    /// stream's `[DONE]`. Empty events (keep-alives) are skipped.
    fn event(
        &mut self,
        provider: &str,
        data: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if !data.is_empty() {
            self.chunk(provider, data, on_delta)?;
        }
        Ok(false)
    }

    fn chunk(
        &mut self,
        provider: &str,
        data: &str,
        on_delta: DeltaSink<'_>,
    ) -> Result<(), ProviderError> {
        self.chunks += 1;
        let chunk: WireChunk = parse_event(
            provider,
            format_args!("chunk {}", self.chunks),
            data,
            &self.text,
        )?;
        if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
            return Err(invalid(
                provider,
                format!("error in stream: {}", excerpt(&err.to_string())),
                &self.text,
            ));
        }
        if let Some(u) = &chunk.usage {
            self.usage = u.usage();
        }
        // Only the first choice (we never ask for more than one).
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                self.delta(delta, on_delta);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(finish_reason(&reason));
            }
        }
        Ok(())
    }

    fn delta(&mut self, delta: WireMessage, on_delta: DeltaSink<'_>) {
        for reasoning in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if !reasoning.is_empty() {
                on_delta(Delta::Reasoning(reasoning));
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.text.push_str(&text);
            on_delta(Delta::Text(text));
        }
        for (pos, tc) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let index = tc.index.unwrap_or_else(|| {
                // No index: the call with this id, a new call for a new id,
                // else the last call.
                let last = self.calls.keys().next_back().copied();
                let known = tc.id.as_ref().and_then(|id| {
                    self.calls
                        .iter()
                        .find(|(_, c)| &c.id == id)
                        .map(|(i, _)| *i)
                });
                match (known, &tc.id, last) {
                    (Some(i), _, _) => i,
                    (None, Some(_), Some(l)) => l + 1,
                    (None, Some(_), None) => pos,
                    (None, None, l) => l.unwrap_or(pos),
                }
            });
            let call = self.calls.entry(index).or_default();
            if let Some(id) = tc.id.filter(|i| !i.is_empty())
                && call.id.is_empty()
            {
                call.id = id;
            }
            if let Some(f) = tc.function {
                if let Some(name) = f.name.filter(|n| !n.is_empty())
                    && call.name.is_empty()
                {
                    call.name = name;
                }
                if let Some(args) = f.arguments {
                    call.arguments.push_str(&args_text(&args));
                }
            }
            if !call.announced && !call.name.is_empty() {
                call.announced = true;
                if call.id.is_empty() {
                    call.id = generated_id(index);
                }
                on_delta(Delta::ToolCallStarted {
                    id: call.id.clone(),
                    name: call.name.clone(),
                });
            }
        }
    }
}

impl Assembler for StreamAccumulator {
    fn text(&self) -> &str {
        &self.text
    }

    fn end_here(&mut self) {
        self.finish.get_or_insert(FinishReason::Stop);
    }

    fn on_event(
        &mut self,
        provider: &str,
        event: &Event,
        on_delta: DeltaSink<'_>,
    ) -> Result<bool, ProviderError> {
        // An error event (`event: error`, or data that is an error object)
        // says what the server said.
        if let Some(error) = stream_error(provider, &event.event, &event.data, &self.text) {
            return Err(error);
        }
        self.event(provider, &event.data, on_delta)
    }

    fn finish(self, provider: &str) -> Result<Completion, ProviderError> {
        if self.finish.is_none() && !self.done {
            return Err(invalid(
                provider,
                "the stream ended before the response was complete".to_owned(),
                &self.text,
            ));
        }
        let calls: Vec<ToolCall> = self
            .calls
            .into_iter()
            .map(|(index, c)| ToolCall {
                id: if c.id.is_empty() {
                    generated_id(index)
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Ok(assemble(self.text, calls, self.finish, self.usage))
    }
}

fn generated_id(index: usize) -> String {
    format!("call_{:08x}_{index}", fastrand::u32(..))
}

fn assemble(
    text: String,
    calls: Vec<ToolCall>,
    finish: Option<FinishReason>,
    usage: Usage,
) -> Completion {
    // Some servers (Ollama among them) say `stop` when they return tool calls.
    let finish_reason = match finish {
        Some(FinishReason::Stop) | None if !calls.is_empty() => FinishReason::ToolCalls,
        Some(f) => f,
        None => FinishReason::Stop,
    };
    completion(text, calls, finish_reason, usage)
}

/// Parses a non-streamed Chat Completions response.
fn parse_response(provider: &str, body: &[u8]) -> Result<Completion, ProviderError> {
    let chunk: WireChunk = parse_body(provider, body)?;
    if let Some(err) = chunk.error.filter(|e| !e.is_null()) {
        return Err(invalid(
            provider,
            format!("error: {}", excerpt(&err.to_string())),
            "",
        ));
    }
    let choice = chunk
        .choices
        .and_then(|c| c.into_iter().next())
        .ok_or_else(|| invalid(provider, "the response has no choices".to_owned(), ""))?;
    let message = choice.delta.unwrap_or_default();
    let calls = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, tc)| {
            let (name, arguments) = match tc.function {
                Some(f) => (
                    f.name.unwrap_or_default(),
                    f.arguments.as_ref().map(args_text).unwrap_or_default(),
                ),
                None => (String::new(), String::new()),
            };
            ToolCall {
                id: tc
                    .id
                    .filter(|i| !i.is_empty())
                    .unwrap_or_else(|| generated_id(i)),
                name,
                arguments,
            }
        })
        .collect();
    let usage = chunk.usage.map(|u| u.usage()).unwrap_or_default();
    Ok(assemble(
        message.content.unwrap_or_default(),
        calls,
        choice.finish_reason.as_deref().map(finish_reason),
        usage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&str]) -> Result<(Completion, Vec<Delta>), ProviderError> {
        let deltas = std::sync::Mutex::new(Vec::new());
        let sink = |d: Delta| deltas.lock().unwrap().push(d);
        let mut acc = StreamAccumulator::default();
        for c in chunks {
            if *c == "[DONE]" {
                acc.done = true;
                break;
            }
            acc.chunk("openai", c, &sink)?;
        }
        let c = acc.finish("openai")?;
        Ok((c, deltas.into_inner().unwrap()))
    }

    #[test]
    fn joins_fragments_by_index() {
        let (c, deltas) = collect(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"calc","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"echo","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"e\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"1+1\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":null,"usage":{"prompt_tokens":5,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":2}}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.message.tool_calls.len(), 2);
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"e":"1+1"}"#);
        assert_eq!(c.message.tool_calls[1].arguments, r#"{"x":1}"#);
        assert_eq!(c.usage.input_tokens, 5);
        assert_eq!(c.usage.cache_read_tokens, 2);
        assert_eq!(deltas.len(), 2);
    }

    #[test]
    fn stop_with_calls_becomes_tool_calls_and_object_arguments_are_kept() {
        let (c, _) = collect(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"calc","arguments":{"e":"2"}}}]},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"e":"2"}"#);
        assert!(c.message.tool_calls[0].id.starts_with("call_"));
    }

    #[test]
    fn fragments_without_index_are_matched_by_id() {
        let (c, _) = collect(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"x","arguments":"{\"k\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"y","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"other choice"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        let got: Vec<(&str, &str)> = c
            .message
            .tool_calls
            .iter()
            .map(|t| (t.id.as_str(), t.arguments.as_str()))
            .collect();
        assert_eq!(got, [("a", r#"{"k":1}"#), ("b", "{}")]);
        assert_eq!(c.message.content, "");
    }

    #[test]
    fn cut_stream_is_invalid() {
        let e = collect(&[r#"{"choices":[{"delta":{"content":"Hel"}}]}"#]).unwrap_err();
        match e {
            ProviderError::InvalidResponse { partial_text, .. } => assert_eq!(partial_text, "Hel"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn request_shapes() {
        let p = OpenAiCompatible::new("http://x/v1/", "m");
        let call = ToolCall {
            id: "c1".into(),
            name: "calc".into(),
            arguments: "{}".into(),
        };
        let req = CompletionRequest {
            system: Some("sys".into()),
            messages: vec![
                Message::user("hi"),
                Message {
                    tool_calls: vec![call.clone()],
                    ..Message::assistant("")
                },
                Message::tool_result(&call, "2", false),
            ],
            ..Default::default()
        };
        let body = p.request_body(&req);
        assert_eq!(body["model"], "m");
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["messages"][2]["content"], Value::Null);
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert!(body.get("tools").is_none());
        assert!(body.get("tool_choice").is_none());
        assert_eq!(p.base_url(), "http://x/v1");
    }
}
