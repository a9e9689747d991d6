//! What the providers' tests share: replies of the fake model server
//! (`toolhost_test_support::fake_model`) in both wire formats, providers
//! pointed at it, requests, and a runner that collects the deltas.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolhost_providers::{
    Completion, CompletionRequest, Delta, Message, Provider, ProviderError, ToolCall, ToolChoice,
    ToolDefinition, anthropic::Anthropic, openai::OpenAiCompatible, transport::RetryPolicy,
};
use toolhost_test_support::fake_model::{End, FakeModel as Server, Reply};

// The fake model server is `toolhost_test_support::fake_model`, shared
// with the fault tests and the agent loop's.

pub(crate) fn json_reply(body: Value) -> Reply {
    Reply::Full {
        status: 200,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
    }
}

pub(crate) fn status_reply(status: u16, body: &str) -> Reply {
    Reply::Full {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_owned(),
    }
}

pub(crate) fn sse(frames: Vec<String>) -> Reply {
    Reply::Stream {
        frames,
        gap: Duration::ZERO,
        end: End::Close,
    }
}

/// OpenAI frames: `data: …\n\n` for each chunk, then `data: [DONE]\n\n`.
pub(crate) fn openai_frames(chunks: &[Value]) -> Vec<String> {
    let mut f: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    f.push("data: [DONE]\n\n".to_owned());
    f
}

/// Anthropic frames: `event: …\ndata: …\n\n`.
pub(crate) fn anthropic_frames(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// The Anthropic events of one reply that is only `text`, ended `end_turn`.
pub(crate) fn anthropic_text_events(text: &str) -> Vec<Value> {
    vec![
        json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
        json!({"type": "message_stop"}),
    ]
}

// ---------------------------------------------------------------- helpers

/// Every test runs within this bound.
pub(crate) async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("test took too long")
}

pub(crate) fn fast_policy() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_secs(2),
        jitter: true,
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        ..RetryPolicy::default()
    }
}

pub(crate) fn openai(server: &Server) -> OpenAiCompatible {
    OpenAiCompatible::new(server.url("/v1"), "test-model")
        .with_api_key(Some("sk-test".into()))
        .with_retry(fast_policy())
}

pub(crate) fn anthropic(server: &Server) -> Anthropic {
    Anthropic::new("ak-test", "claude-test")
        .with_base_url(server.url(""))
        .with_retry(fast_policy())
}

pub(crate) fn calc_tool() -> ToolDefinition {
    ToolDefinition {
        name: "calc".into(),
        description: "Evaluates an arithmetic expression.".into(),
        parameters: json!({"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}).into(),
    }
}

pub(crate) fn request(tools: Vec<ToolDefinition>) -> CompletionRequest {
    CompletionRequest {
        model: String::new(),
        system: Some("You are terse.".into()),
        messages: vec![Message::user("What is 6*7?")],
        tools,
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: true,
        max_tokens: None,
        temperature: None,
        response_schema: None,
        grammar: None,
        ..Default::default()
    }
}

/// A request whose history holds two tool calls and their results.
pub(crate) fn request_with_history() -> CompletionRequest {
    let a = ToolCall {
        id: "call_a".into(),
        name: "calc".into(),
        arguments: r#"{"expr":"6*7"}"#.into(),
    };
    let b = ToolCall {
        id: "call_b".into(),
        name: "calc".into(),
        arguments: r#"{"expr":"1/0"}"#.into(),
    };
    let mut req = request(vec![calc_tool()]);
    req.messages.push(Message {
        tool_calls: vec![a.clone(), b.clone()],
        ..Message::assistant("Computing.")
    });
    req.messages.push(Message::tool_result(&a, "42", false));
    req.messages
        .push(Message::tool_result(&b, "division by zero", true));
    req
}

/// Runs `provider` on `req`, collecting the deltas.
pub(crate) async fn run(
    provider: &dyn Provider,
    req: &CompletionRequest,
) -> (Result<Completion, ProviderError>, Vec<Delta>) {
    let deltas = Mutex::new(Vec::new());
    let sink = |d: Delta| deltas.lock().unwrap().push(d);
    let cancel = CancellationToken::new();
    let r = provider.complete(req, &sink, &cancel).await;
    (r, deltas.into_inner().unwrap())
}

pub(crate) fn texts(deltas: &[Delta]) -> Vec<String> {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) fn tool_call_chunk(
    index: u32,
    id: Option<&str>,
    name: Option<&str>,
    args: &str,
) -> Value {
    let mut tc = json!({"index": index, "function": {"arguments": args}});
    if let Some(id) = id {
        tc["id"] = json!(id);
        tc["type"] = json!("function");
    }
    if let Some(name) = name {
        tc["function"]["name"] = json!(name);
    }
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "test-model",
           "system_fingerprint": "fp", "choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "logprobs": null, "finish_reason": null}]})
}

pub(crate) fn text_chunk(text: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

pub(crate) fn finish_chunk(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

pub(crate) fn usage_chunk(choices: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": choices,
           "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40,
                     "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0}}})
}
