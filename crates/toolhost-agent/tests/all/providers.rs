//! The HTTP providers against a local server speaking the real wire formats.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolhost_agent::provider::prompt::{Constrain, PromptProfile, PromptTools, parse_tool_calls};
use toolhost_agent::provider::select::{self, ProviderConfig, ProviderKind};
use toolhost_agent::provider::{Anthropic, OpenAiCompatible, RetryPolicy};
use toolhost_agent::{
    Completion, CompletionRequest, Delta, FinishReason, Message, Provider, ProviderError, ToolCall,
    ToolChoice, ToolDefinition,
};
use toolhost_test_support::fake_model::{End, FakeModel as Server, Reply};

// ---------------------------------------------------------------- the server

// The fake model server is `toolhost_test_support::fake_model`, shared
// with the fault tests and the agent loop's.

fn json_reply(body: Value) -> Reply {
    Reply::Full {
        status: 200,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_string(),
    }
}

fn status_reply(status: u16, body: &str) -> Reply {
    Reply::Full {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.to_owned(),
    }
}

fn sse(frames: Vec<String>) -> Reply {
    Reply::Stream {
        frames,
        gap: Duration::ZERO,
        end: End::Close,
    }
}

/// OpenAI frames: `data: …\n\n` for each chunk, then `data: [DONE]\n\n`.
fn openai_frames(chunks: &[Value]) -> Vec<String> {
    let mut f: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    f.push("data: [DONE]\n\n".to_owned());
    f
}

/// Anthropic frames: `event: …\ndata: …\n\n`.
fn anthropic_frames(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

// ---------------------------------------------------------------- helpers

/// Every test runs within this bound.
async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("test took too long")
}

fn fast_policy() -> RetryPolicy {
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

fn openai(server: &Server) -> OpenAiCompatible {
    OpenAiCompatible::new(server.url("/v1"), "test-model")
        .with_api_key(Some("sk-test".into()))
        .with_retry(fast_policy())
}

fn anthropic(server: &Server) -> Anthropic {
    Anthropic::new("ak-test", "claude-test")
        .with_base_url(server.url(""))
        .with_retry(fast_policy())
}

fn calc_tool() -> ToolDefinition {
    ToolDefinition {
        name: "calc".into(),
        description: "Evaluates an arithmetic expression.".into(),
        parameters: json!({"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}).into(),
    }
}

fn request(tools: Vec<ToolDefinition>) -> CompletionRequest {
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
fn request_with_history() -> CompletionRequest {
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
async fn run(
    provider: &dyn Provider,
    req: &CompletionRequest,
) -> (Result<Completion, ProviderError>, Vec<Delta>) {
    let deltas = Mutex::new(Vec::new());
    let sink = |d: Delta| deltas.lock().unwrap().push(d);
    let cancel = CancellationToken::new();
    let r = provider.complete(req, &sink, &cancel).await;
    (r, deltas.into_inner().unwrap())
}

fn texts(deltas: &[Delta]) -> Vec<String> {
    deltas
        .iter()
        .filter_map(|d| match d {
            Delta::Text(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn tool_call_chunk(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
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

fn text_chunk(text: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

fn finish_chunk(reason: &str) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
}

fn usage_chunk(choices: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": choices,
           "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40,
                     "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0}}})
}

// ---------------------------------------------------------------- OpenAI

#[tokio::test]
async fn openai_streamed_tool_call_arguments_over_many_chunks() {
    bounded(async {
        let mut chunks = vec![
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, "finish_reason": null}]}),
            tool_call_chunk(0, Some("call_1"), Some("calc"), ""),
        ];
        for piece in ["{\"", "expr", "\":", " \"6", "*", "7\"", "}"] {
            chunks.push(tool_call_chunk(0, None, None, piece));
        }
        chunks.push(finish_chunk("tool_calls"));
        chunks.push(usage_chunk(json!([])));
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let (r, deltas) = run(&openai(&server), &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            c.message.tool_calls,
            vec![ToolCall {
                id: "call_1".into(),
                name: "calc".into(),
                arguments: r#"{"expr": "6*7"}"#.into(),
            }]
        );
        assert_eq!(c.message.content, "");
        assert_eq!(
            deltas,
            vec![Delta::ToolCallStarted {
                id: "call_1".into(),
                name: "calc".into()
            }]
        );
        assert_eq!(c.usage.input_tokens, 31);
        assert_eq!(c.usage.output_tokens, 9);
        assert_eq!(c.usage.cache_read_tokens, 4);
    })
    .await;
}

#[tokio::test]
async fn openai_two_tool_calls_in_one_response() {
    bounded(async {
        let chunks = vec![
            text_chunk("Both."),
            tool_call_chunk(0, Some("call_a"), Some("calc"), "{\"expr\":"),
            tool_call_chunk(1, Some("call_b"), Some("calc"), ""),
            tool_call_chunk(0, None, None, "\"1+1\"}"),
            tool_call_chunk(1, None, None, "{\"expr\":\"2+2\"}"),
            finish_chunk("tool_calls"),
        ];
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let (r, deltas) = run(&openai(&server), &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "Both.");
        let calls: Vec<(&str, &str)> = c
            .message
            .tool_calls
            .iter()
            .map(|t| (t.id.as_str(), t.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("call_a", r#"{"expr":"1+1"}"#),
                ("call_b", r#"{"expr":"2+2"}"#)
            ]
        );
        let started = deltas
            .iter()
            .filter(|d| matches!(d, Delta::ToolCallStarted { .. }))
            .count();
        assert_eq!(started, 2);
    })
    .await;
}

#[tokio::test]
async fn openai_text_streaming_reaches_the_sink_in_order() {
    bounded(async {
        let chunks = vec![
            json!({"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Think"}}]}),
            json!({"choices": [{"index": 0, "delta": {"reasoning": " more"}}]}),
            text_chunk("The "),
            text_chunk("answer "),
            text_chunk("is "),
            text_chunk("42."),
            finish_chunk("stop"),
        ];
        let server = Server::replies(vec![Reply::Stream {
            frames: openai_frames(&chunks),
            gap: Duration::from_millis(5),
            end: End::Close,
        }])
        .await;
        let (r, deltas) = run(&openai(&server), &request(vec![])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "The answer is 42.");
        assert_eq!(c.finish_reason, FinishReason::Stop);
        assert_eq!(texts(&deltas), ["The ", "answer ", "is ", "42."]);
        assert_eq!(
            deltas[..2],
            [
                Delta::Reasoning("Think".into()),
                Delta::Reasoning(" more".into())
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn openai_usage_chunk_with_empty_or_null_choices() {
    bounded(async {
        for choices in [json!([]), Value::Null] {
            let chunks = vec![text_chunk("ok"), finish_chunk("stop"), usage_chunk(choices)];
            let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
            let (r, _) = run(&openai(&server), &request(vec![])).await;
            let c = r.unwrap();
            assert_eq!(c.message.content, "ok");
            assert_eq!(c.usage.input_tokens, 31);
            assert_eq!(c.usage.output_tokens, 9);
        }
    })
    .await;
}

#[tokio::test]
async fn openai_non_streaming_response() {
    bounded(async {
        let body = json!({
            "id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": "test-model",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": "Let me compute.", "refusal": null,
                    "tool_calls": [{"id": "call_x", "type": "function",
                        "function": {"name": "calc", "arguments": "{\"expr\":\"6*7\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
            "service_tier": "default"
        });
        let server = Server::replies(vec![json_reply(body)]).await;
        let provider = openai(&server).with_streaming(false);
        let (r, deltas) = run(&provider, &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "Let me compute.");
        assert_eq!(c.message.tool_calls[0].id, "call_x");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"expr":"6*7"}"#);
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.usage.input_tokens, 12);
        assert_eq!(texts(&deltas), ["Let me compute."]);
        let got = &server.received()[0].body;
        assert!(got.get("stream").is_none());
        assert!(got.get("stream_options").is_none());
    })
    .await;
}

#[tokio::test]
async fn a_json_body_answering_a_streaming_request_is_parsed_whole() {
    bounded(async {
        let openai_body = json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "whole"}}]});
        let anthropic_body = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "content": [{"type": "text", "text": "whole too"},
                        {"type": "tool_use", "id": "toolu_9", "name": "calc", "input": {"expr": "1"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 2, "output_tokens": 3}});
        let server = Server::replies(vec![json_reply(openai_body), json_reply(anthropic_body)]).await;
        let (r, deltas) = run(&openai(&server), &request(vec![])).await;
        assert_eq!(r.unwrap().message.content, "whole");
        assert_eq!(texts(&deltas), ["whole"]);
        let (r, _) = run(&anthropic(&server), &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "whole too");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"expr":"1"}"#);
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.usage.output_tokens, 3);
    })
    .await;
}

#[tokio::test]
async fn openai_request_body_as_the_server_received_it() {
    bounded(async {
        let chunks = vec![text_chunk("fine"), finish_chunk("stop")];
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let mut req = request_with_history();
        req.tool_choice = ToolChoice::Required;
        req.parallel_tool_calls = false;
        req.max_tokens = Some(100);
        req.temperature = Some(0.5);
        let (r, _) = run(&openai(&server), &req).await;
        r.unwrap();
        let got = server.received();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, "/v1/chat/completions");
        assert_eq!(got[0].headers["authorization"], "Bearer sk-test");
        let b = &got[0].body;
        assert_eq!(b["model"], "test-model");
        assert_eq!(b["stream"], true);
        assert_eq!(b["stream_options"], json!({"include_usage": true}));
        assert_eq!(b["tool_choice"], "required");
        assert_eq!(b["parallel_tool_calls"], false);
        assert_eq!(b["max_tokens"], 100);
        assert_eq!(b["temperature"], 0.5);
        assert_eq!(
            b["tools"],
            json!([{"type": "function", "function": {"name": "calc",
                "description": "Evaluates an arithmetic expression.",
                "parameters": calc_tool().parameters}}])
        );
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 5);
        assert_eq!(m[0], json!({"role": "system", "content": "You are terse."}));
        assert_eq!(m[1], json!({"role": "user", "content": "What is 6*7?"}));
        assert_eq!(m[2]["role"], "assistant");
        assert_eq!(m[2]["content"], "Computing.");
        assert_eq!(
            m[2]["tool_calls"][0],
            json!({"id": "call_a", "type": "function",
                   "function": {"name": "calc", "arguments": "{\"expr\":\"6*7\"}"}})
        );
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "call_a", "content": "42"})
        );
        assert_eq!(m[4]["tool_call_id"], "call_b");
        // The API has no error flag: the text says it.
        assert_eq!(m[4]["content"], "Error: division by zero");

        // Without tools, neither tools nor tool_choice is sent.
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        r.unwrap();
        let b = &server.received()[0].body;
        assert!(b.get("tools").is_none());
        assert!(b.get("tool_choice").is_none());
        assert!(b.get("parallel_tool_calls").is_none());
    })
    .await;
}

// ---------------------------------------------------------------- Anthropic

fn anthropic_tool_use_events() -> Vec<Value> {
    vec![
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "content": [], "model": "claude-test", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 25, "output_tokens": 1, "cache_read_input_tokens": 5,
                      "cache_creation_input_tokens": 0}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Multiply."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "abc"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Let me "}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "compute."}}),
        json!({"type": "content_block_stop", "index": 1}),
        // No `input` in content_block_start.
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "calc"}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"expr\": "}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "\"6*7\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "calc", "input": {}}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 40}}),
        json!({"type": "message_stop"}),
    ]
}

#[tokio::test]
async fn anthropic_stream_with_text_tool_use_and_usage() {
    bounded(async {
        let server =
            Server::replies(vec![sse(anthropic_frames(&anthropic_tool_use_events()))]).await;
        let (r, deltas) = run(&anthropic(&server), &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "Let me compute.");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            c.message.tool_calls,
            vec![
                ToolCall {
                    id: "toolu_1".into(),
                    name: "calc".into(),
                    arguments: r#"{"expr": "6*7"}"#.into()
                },
                ToolCall {
                    id: "toolu_2".into(),
                    name: "calc".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(c.usage.input_tokens, 30);
        assert_eq!(c.usage.cache_read_tokens, 5);
        assert_eq!(c.usage.output_tokens, 40);
        assert_eq!(
            deltas,
            vec![
                Delta::Reasoning("Multiply.".into()),
                Delta::Text("Let me ".into()),
                Delta::Text("compute.".into()),
                Delta::ToolCallStarted {
                    id: "toolu_1".into(),
                    name: "calc".into()
                },
                Delta::ToolCallStarted {
                    id: "toolu_2".into(),
                    name: "calc".into()
                },
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn anthropic_request_body_as_the_server_received_it() {
    bounded(async {
        let events = vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "42"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ];
        let server = Server::replies(vec![sse(anthropic_frames(&events))]).await;
        let mut req = request_with_history();
        req.parallel_tool_calls = false;
        let (r, _) = run(&anthropic(&server), &req).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "42");
        assert_eq!(c.finish_reason, FinishReason::Stop);
        let got = server.received();
        assert_eq!(got[0].path, "/v1/messages");
        assert_eq!(got[0].headers["x-api-key"], "ak-test");
        assert_eq!(got[0].headers["anthropic-version"], "2023-06-01");
        let b = &got[0].body;
        assert_eq!(b["model"], "claude-test");
        // The system prompt and the tool definitions end with cache breakpoints.
        assert_eq!(
            b["system"],
            json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(b["max_tokens"], 4096);
        assert_eq!(b["stream"], true);
        assert_eq!(
            b["tools"],
            json!([{"name": "calc", "description": "Evaluates an arithmetic expression.",
                    "input_schema": calc_tool().parameters, "cache_control": {"type": "ephemeral"}}])
        );
        assert_eq!(
            b["tool_choice"],
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3, "{m:#?}");
        assert_eq!(
            m[0],
            json!({"role": "user", "content": [{"type": "text", "text": "What is 6*7?"}]})
        );
        assert_eq!(
            m[1],
            json!({"role": "assistant", "content": [
                {"type": "text", "text": "Computing."},
                {"type": "tool_use", "id": "call_a", "name": "calc", "input": {"expr": "6*7"}},
                {"type": "tool_use", "id": "call_b", "name": "calc", "input": {"expr": "1/0"}},
            ]})
        );
        // Both results in ONE user message.
        assert_eq!(
            m[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "42", "is_error": false},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "division by zero", "is_error": true},
            ]})
        );
        for m in m {
            assert_ne!(m["role"], "system");
        }
    })
    .await;
}

#[tokio::test]
async fn anthropic_tool_choice_variants() {
    let p = Anthropic::new("k", "m");
    let mut req = request(vec![calc_tool()]);
    req.tool_choice = ToolChoice::Required;
    assert_eq!(p.request_body(&req)["tool_choice"]["type"], "any");
    req.tool_choice = ToolChoice::None;
    assert_eq!(p.request_body(&req)["tool_choice"], json!({"type": "none"}));
    let req = request(vec![]);
    assert!(p.request_body(&req).get("tools").is_none());
    assert!(p.request_body(&req).get("tool_choice").is_none());
}

#[tokio::test]
async fn anthropic_error_event_and_cut_stream() {
    bounded(async {
        let mut events = anthropic_tool_use_events()[..9].to_vec();
        events.push(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}));
        let cut = anthropic_tool_use_events()[..9].to_vec();
        let server = Server::replies(vec![
            sse(anthropic_frames(&events)),
            sse(anthropic_frames(&cut)),
        ])
        .await;
        let (r, _) = run(&anthropic(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::InvalidResponse {
                message,
                partial_text,
                ..
            } => {
                assert!(message.contains("overloaded_error"), "{message}");
                assert_eq!(partial_text, "Let me compute.");
            }
            other => panic!("{other:?}"),
        }
        let (r, _) = run(&anthropic(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::InvalidResponse { partial_text, .. } => {
                assert_eq!(partial_text, "Let me compute.");
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

// ---------------------------------------------------------------- retries and failures

#[tokio::test]
async fn retries_after_500_then_succeeds() {
    bounded(async {
        let chunks = vec![text_chunk("recovered"), finish_chunk("stop")];
        let server = Server::replies(vec![
            status_reply(500, r#"{"error":{"message":"boom"}}"#),
            status_reply(503, "unavailable"),
            sse(openai_frames(&chunks)),
        ])
        .await;
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        assert_eq!(r.unwrap().message.content, "recovered");
        assert_eq!(server.received().len(), 3);
    })
    .await;
}

#[tokio::test]
async fn retries_after_429_honouring_retry_after() {
    bounded(async {
        let chunks = vec![text_chunk("ok"), finish_chunk("stop")];
        let server = Server::replies(vec![
            Reply::Full {
                status: 429,
                headers: vec![("retry-after", "1".into())],
                body: r#"{"error":{"type":"rate_limit_error"}}"#.into(),
            },
            sse(openai_frames(&chunks)),
        ])
        .await;
        let started = Instant::now();
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        assert_eq!(r.unwrap().message.content, "ok");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(950), "{waited:?}");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
        assert_eq!(server.received().len(), 2);
    })
    .await;
}

#[tokio::test]
async fn status_400_fails_at_once_with_status_and_body() {
    bounded(async {
        let body = r#"{"error":{"message":"Invalid schema for function 'calc'","type":"invalid_request_error"}}"#;
        let server = Server::replies(vec![status_reply(400, body), status_reply(400, body)]).await;
        let (r, _) = run(&openai(&server), &request(vec![calc_tool()])).await;
        let e = r.unwrap_err();
        match &e {
            ProviderError::Status {
                provider,
                status,
                body: got,
            } => {
                assert_eq!(provider, "openai");
                assert_eq!(*status, 400);
                assert_eq!(got, body);
            }
            other => panic!("{other:?}"),
        }
        let msg = e.to_string();
        assert!(msg.contains("400") && msg.contains("Invalid schema"), "{msg}");
        assert_eq!(server.received().len(), 1, "no retry on 400");
        // 401 and 404 do not retry either.
        for status in [401, 404] {
            let server = Server::replies(vec![status_reply(status, "no"), status_reply(200, "{}")]).await;
            let (r, _) = run(&anthropic(&server), &request(vec![])).await;
            assert!(matches!(r, Err(ProviderError::Status { status: s, .. }) if s == status));
            assert_eq!(server.received().len(), 1);
        }
    })
    .await;
}

#[tokio::test]
async fn gives_up_after_max_attempts_with_an_excerpt() {
    bounded(async {
        let long = "x".repeat(2000);
        let replies = (0..4).map(|_| status_reply(502, &long)).collect();
        let server = Server::replies(replies).await;
        let (r, _) = run(&anthropic(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::Status {
                provider,
                status,
                body,
            } => {
                assert_eq!(provider, "anthropic");
                assert_eq!(status, 502);
                assert!(body.contains("gave up after 4 attempts"), "{body}");
                assert!(body.chars().filter(|c| *c == 'x').count() <= 500);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(server.received().len(), 4);
    })
    .await;
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    bounded(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let provider =
            OpenAiCompatible::new(format!("http://{addr}/v1"), "m").with_retry(RetryPolicy {
                max_attempts: 2,
                ..fast_policy()
            });
        let (r, _) = run(&provider, &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::Connect { provider, message } => {
                assert_eq!(provider, "openai");
                assert!(message.contains("gave up after 2 attempts"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn stream_cut_mid_way_is_invalid_with_partial_text() {
    bounded(async {
        // No finish_reason and no [DONE]: the server just closes the body.
        let frames: Vec<String> = [text_chunk("Half "), text_chunk("an answer")]
            .iter()
            .map(|c| format!("data: {c}\n\n"))
            .collect();
        let server = Server::replies(vec![sse(frames)]).await;
        let (r, deltas) = run(&openai(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::InvalidResponse { partial_text, .. } => {
                assert_eq!(partial_text, "Half an answer");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(texts(&deltas), ["Half ", "an answer"]);
        assert_eq!(server.received().len(), 1, "a broken stream is not retried");
    })
    .await;
}

#[tokio::test]
async fn invalid_json_in_a_chunk_names_the_chunk() {
    bounded(async {
        let frames = vec![
            format!("data: {}\n\n", text_chunk("Hi")),
            "data: {\"choices\": [{\"delta\": {\"content\": \"oops\"\n\n".to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ];
        let server = Server::replies(vec![sse(frames)]).await;
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        match r.unwrap_err() {
            ProviderError::InvalidResponse {
                message,
                partial_text,
                ..
            } => {
                assert!(message.contains("chunk 2"), "{message}");
                assert!(message.contains("oops"), "{message}");
                assert_eq!(partial_text, "Hi");
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

#[tokio::test]
async fn cancellation_during_streaming_returns_quickly() {
    bounded(async {
        let server = Server::replies(vec![Reply::Stream {
            frames: vec![format!("data: {}\n\n", text_chunk("Start"))],
            gap: Duration::ZERO,
            end: End::Hang,
        }])
        .await;
        let provider = openai(&server);
        let req = request(vec![]);
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        let sink = move |d: Delta| {
            if matches!(d, Delta::Text(_)) {
                c2.cancel();
            }
        };
        let started = Instant::now();
        let r = provider.complete(&req, &sink, &cancel).await;
        assert!(matches!(r, Err(ProviderError::Cancelled)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        // The connection was dropped: the server's body stream goes away.
        let deadline = Instant::now() + Duration::from_secs(3);
        while !server.stream_dropped() {
            assert!(Instant::now() < deadline, "the server still streams");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        // Cancelling while waiting to retry returns at once too.
        let server = Server::replies(vec![Reply::Full {
            status: 429,
            headers: vec![("retry-after", "30".into())],
            body: String::new(),
        }])
        .await;
        let provider = openai(&server).with_retry(RetryPolicy {
            max_backoff: Duration::from_secs(60),
            ..fast_policy()
        });
        let cancel = CancellationToken::new();
        let c2 = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            c2.cancel();
        });
        let started = Instant::now();
        let r = provider.complete(&req, &|_| {}, &cancel).await;
        assert!(matches!(r, Err(ProviderError::Cancelled)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    })
    .await;
}

#[tokio::test]
async fn idle_timeout_on_an_endless_silent_stream() {
    bounded(async {
        let server = Server::replies(vec![Reply::Stream {
            frames: vec![": keep quiet\n\n".to_owned()],
            gap: Duration::ZERO,
            end: End::Hang,
        }])
        .await;
        let provider = anthropic(&server).with_retry(RetryPolicy {
            idle_timeout: Duration::from_millis(300),
            ..fast_policy()
        });
        let started = Instant::now();
        let (r, _) = run(&provider, &request(vec![])).await;
        assert!(matches!(r, Err(ProviderError::Timeout { .. })), "{r:?}");
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(250) && took < Duration::from_secs(3),
            "{took:?}"
        );
    })
    .await;
}

// ---------------------------------------------------------------- prompt-based tools

#[tokio::test]
async fn prompt_json_profile_round_trip() {
    bounded(async {
        let answer = "I'll use the calculator.\n```json\n{\"tool_calls\": [{\"name\": \"calc\", \"arguments\": {\"expr\": \"6*7\"}}]}\n```";
        let pieces: Vec<Value> = answer
            .as_bytes()
            .chunks(7)
            .map(|c| text_chunk(std::str::from_utf8(c).unwrap()))
            .chain([finish_chunk("stop")])
            .collect();
        let server = Server::replies(vec![sse(openai_frames(&pieces))]).await;
        let provider =
            PromptTools::new(openai(&server), PromptProfile::Json).with_constrain(Constrain::Off);
        assert_eq!(provider.name(), "openai+json");
        let (r, deltas) = run(&provider, &request_with_history()).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "I'll use the calculator.");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.message.tool_calls.len(), 1);
        assert_eq!(c.message.tool_calls[0].name, "calc");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"expr":"6*7"}"#);
        assert!(!c.message.tool_calls[0].id.is_empty());
        // The UI saw the text but not the raw call.
        let shown = texts(&deltas).concat();
        assert_eq!(shown, "I'll use the calculator.\n");
        assert!(deltas.iter().any(|d| matches!(d, Delta::ToolCallStarted { name, .. } if name == "calc")));

        let b = &server.received()[0].body;
        assert!(b.get("tools").is_none());
        assert!(b.get("tool_choice").is_none());
        let m = b["messages"].as_array().unwrap();
        let system = m[0]["content"].as_str().unwrap();
        assert_eq!(m[0]["role"], "system");
        assert!(system.starts_with("You are terse."));
        assert!(system.contains("## calc"));
        assert!(system.contains("Evaluates an arithmetic expression."));
        assert!(system.contains(r#""required":["expr"]"#));
        assert!(system.contains(r#"{"tool_calls": [{"name": "<tool name>""#));
        // History: the assistant's calls as text, the results as one user message.
        assert_eq!(m.len(), 4);
        assert!(m[2].get("tool_calls").is_none());
        let earlier = m[2]["content"].as_str().unwrap();
        assert!(earlier.starts_with("Computing.\n\n```json\n"), "{earlier}");
        let (_, calls) = parse_tool_calls(PromptProfile::Json, earlier);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments, r#"{"expr":"1/0"}"#);
        assert_eq!(m[3]["role"], "user");
        assert_eq!(
            m[3]["content"],
            "Tool result (calc, call call_a):\n42\n\nTool error (calc, call call_b):\ndivision by zero"
        );
    })
    .await;
}

#[tokio::test]
async fn the_json_protocol_asks_for_constrained_decoding_and_reads_the_answer_form() {
    bounded(async {
        let reply = r#"{"answer": "It is 42."}"#;
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk(reply),
            finish_chunk("stop"),
        ]))])
        .await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Json);
        let (r, deltas) = run(&provider, &request_with_history()).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "It is 42.");
        assert!(c.message.tool_calls.is_empty());
        assert_eq!(
            texts(&deltas).concat(),
            "It is 42.",
            "the UI sees the answer, not the JSON"
        );
        let body = &server.received()[0].body;
        let format = &body["response_format"];
        assert_eq!(format["type"], "json_schema", "{body}");
        let schema = &format["json_schema"]["schema"];
        let call = &schema["anyOf"][0]["properties"]["tool_calls"]["items"]["anyOf"][0];
        assert_eq!(call["properties"]["name"]["const"], "calc");
        assert_eq!(call["properties"]["arguments"]["required"][0], "expr");
        assert_eq!(schema["anyOf"][1]["required"][0], "answer");
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains(r#"{"answer": "<your answer>"}"#),
            "{system}"
        );
    })
    .await;
}

#[tokio::test]
async fn a_server_that_refuses_constrained_decoding_is_asked_without_from_then_on() {
    bounded(async {
        let refusal = status_reply(
            400,
            r#"{"error": {"message": "response_format is not supported"}}"#,
        );
        let answer = || {
            sse(openai_frames(&[
                text_chunk("plain answer"),
                finish_chunk("stop"),
            ]))
        };
        let server = Server::replies(vec![refusal, answer(), answer()]).await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Json);
        assert!(provider.constrains());
        let (r, _) = run(&provider, &request_with_history()).await;
        assert_eq!(r.unwrap().message.content, "plain answer");
        assert!(!provider.constrains(), "remembered");
        let (r, _) = run(&provider, &request_with_history()).await;
        assert_eq!(r.unwrap().message.content, "plain answer");
        let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), 3);
        assert!(bodies[0].get("response_format").is_some());
        assert!(
            bodies[1].get("response_format").is_none(),
            "the same request again, without"
        );
        assert!(
            bodies[2].get("response_format").is_none(),
            "and every request after"
        );
        // Forced on, a refusal is an error.
        let server = Server::replies(vec![status_reply(400, "json_schema unsupported")]).await;
        let forced =
            PromptTools::new(openai(&server), PromptProfile::Json).with_constrain(Constrain::On);
        let (r, _) = run(&forced, &request_with_history()).await;
        assert!(r.is_err());
    })
    .await;
}

#[tokio::test]
async fn the_xml_protocol_is_constrained_by_a_grammar_and_falls_back_when_refused() {
    bounded(async {
        let answer = || {
            sse(openai_frames(&[
                text_chunk("<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"1\"}}</tool_code>"),
                finish_chunk("stop"),
            ]))
        };
        // OpenAI's answer to a field it does not know.
        let refusal = status_reply(
            400,
            r#"{"error": {"message": "Unrecognized request argument supplied: grammar", "type": "invalid_request_error"}}"#,
        );
        let server = Server::replies(vec![answer(), refusal, answer(), answer()]).await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Xml);
        assert!(provider.constrains());
        let (r, _) = run(&provider, &request(vec![calc_tool()])).await;
        assert_eq!(r.unwrap().message.tool_calls.len(), 1);
        let (r, _) = run(&provider, &request(vec![calc_tool()])).await;
        assert_eq!(r.unwrap().message.tool_calls[0].name, "calc");
        assert!(!provider.constrains(), "the refusal is remembered");
        let (r, _) = run(&provider, &request(vec![calc_tool()])).await;
        assert!(r.is_ok());
        let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), 4);
        let grammar = bodies[0]["grammar"].as_str().expect("a grammar is sent");
        assert!(
            grammar.starts_with(r#"root ::= call ("\n" call){0,3} ("\n"{0,2} "<tool_result")? | answer"#),
            "bounded calls, and a way out at an imitated result: {grammar}"
        );
        assert!(
            grammar.contains(r#"call-0 ::= "\"calc\"" ws"#),
            "the offered name: {grammar}"
        );
        assert!(bodies[0].get("response_format").is_none());
        // The grammar ends a call block; the result marker still stops a
        // server that ignores the grammar.
        assert_eq!(bodies[0]["stop"], json!(["<tool_result"]));
        assert!(bodies[1].get("grammar").is_some());
        assert!(bodies[2].get("grammar").is_none(), "asked again without");
        assert!(bodies[3].get("grammar").is_none(), "and from then on");
        // Off: never sent.
        let server = Server::replies(vec![answer()]).await;
        let off = PromptTools::new(openai(&server), PromptProfile::Xml).with_constrain(Constrain::Off);
        let _ = run(&off, &request(vec![calc_tool()])).await;
        assert!(server.received()[0].body.get("grammar").is_none());
        // The Anthropic wire format has no such field.
        let server = Server::replies(vec![]).await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Xml);
        let _ = run(&provider, &request(vec![calc_tool()])).await;
        assert!(server.received()[0].body.get("grammar").is_none());
    })
    .await;
}

#[tokio::test]
async fn prompt_xml_profile_round_trip() {
    bounded(async {
        let answer = "Two at once.\n<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"1+1\"}}</tool_code>\n<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}</tool_code>";
        let events = vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": answer}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 30}}),
            json!({"type": "message_stop"}),
        ];
        let server = Server::replies(vec![sse(anthropic_frames(&events))]).await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Xml);
        let (r, _) = run(&provider, &request_with_history()).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "Two at once.");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        let args: Vec<&str> = c.message.tool_calls.iter().map(|t| t.arguments.as_str()).collect();
        assert_eq!(args, [r#"{"expr":"1+1"}"#, r#"{"expr":"2+2"}"#]);
        assert_ne!(c.message.tool_calls[0].id, c.message.tool_calls[1].id);
        assert_eq!(c.usage.output_tokens, 30);

        let b = &server.received()[0].body;
        assert!(b.get("tools").is_none());
        assert!(b.get("tool_choice").is_none());
        let system = b["system"][0]["text"].as_str().unwrap();
        assert!(system.contains("## calc") && system.contains("<tool_code>"));
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        let assistant = m[1]["content"][0]["text"].as_str().unwrap();
        assert!(assistant.starts_with("Computing.\n\n<tool_code>"), "{assistant}");
        assert!(m[1]["content"].as_array().unwrap().iter().all(|b| b["type"] == "text"));
        assert_eq!(
            m[2]["content"][0]["text"],
            "<tool_result name=\"calc\" id=\"call_a\">42</tool_result>\n\n<tool_result name=\"calc\" id=\"call_b\" error=\"true\">division by zero</tool_result>"
        );
    })
    .await;
}

#[tokio::test]
async fn a_result_the_model_invents_after_its_call_is_stopped_and_dropped() {
    bounded(async {
        // What Qwen2.5-Coder 1.5B wrote for "What is 2*(3+4)?" in the xml
        // protocol: its call, then the result it expected.
        let invented = "<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"2*(3+4)\"}}</tool_code>\n\n<tool_result name=\"calc\" id=\"1\">14</tool_result>";
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk(invented),
            finish_chunk("stop"),
        ]))])
        .await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Xml);
        let (r, deltas) = run(&provider, &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "", "the invented result is not kept");
        assert_eq!(c.message.tool_calls.len(), 1);
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"expr":"2*(3+4)"}"#);
        assert_eq!(texts(&deltas).concat(), "", "nor shown");
        // The server is asked to stop the model where a result would start.
        assert_eq!(server.received()[0].body["stop"], json!(["<tool_result"]));

        // The same through the Anthropic wire format, json protocol.
        let server = Server::replies(vec![]).await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Json)
            .with_constrain(Constrain::Off);
        let _ = run(&provider, &request(vec![calc_tool()])).await;
        assert_eq!(
            server.received()[0].body["stop_sequences"],
            json!(["Tool result (", "Tool error ("])
        );
    })
    .await;
}

#[tokio::test]
async fn prompt_profile_without_calls_keeps_the_answer() {
    bounded(async {
        let chunks = vec![text_chunk("It is {about} 42."), finish_chunk("stop")];
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Json);
        let (r, deltas) = run(&provider, &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "It is {about} 42.");
        assert!(c.message.tool_calls.is_empty());
        assert_eq!(c.finish_reason, FinishReason::Stop);
        assert_eq!(texts(&deltas).concat(), "It is {about} 42.");
    })
    .await;
}

// ---------------------------------------------------------------- selection

#[tokio::test]
async fn select_prefers_explicit_then_keys_then_ollama() {
    bounded(async {
        let tags = json!({"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "size": 1}]});
        let server = Server::replies(vec![json_reply(tags.clone()), json_reply(tags)]).await;
        let root = server.url("");
        let no_env = |_: &str| None;

        let s = select::select_with(None, &no_env, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Ollama);
        assert_eq!(s.model, "qwen3:8b");
        assert_eq!(s.base_url, format!("{root}/v1"));
        assert_eq!(server.received()[0].path, "/api/tags");

        let keys = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "ak".to_owned());
        let s = select::select_with(None, &keys, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Anthropic);

        let both = |k: &str| k.ends_with("_API_KEY").then(|| "k".to_owned());
        let s = select::select_with(None, &both, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Openai);
        assert_eq!(s.model, select::OPENAI_DEFAULT_MODEL);

        let explicit = ProviderConfig {
            protocol: select::ToolProtocol::Json,
            ..ProviderConfig::new(ProviderKind::Ollama)
        };
        let s = select::select_with(Some(&explicit), &both, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Ollama);
        assert_eq!(s.model, "qwen3:8b");
        assert_eq!(s.provider.name(), "ollama+json");
    })
    .await;
}

#[tokio::test]
async fn a_configured_constrain_reaches_both_prompt_protocols() {
    bounded(async {
        for (protocol, field) in [
            (select::ToolProtocol::Json, "response_format"),
            (select::ToolProtocol::Xml, "grammar"),
        ] {
            for (constrain, sent) in [(Constrain::Auto, true), (Constrain::Off, false)] {
                let server = Server::replies(vec![sse(openai_frames(&[
                    text_chunk("ok"),
                    finish_chunk("stop"),
                ]))])
                .await;
                let config = ProviderConfig {
                    base_url: Some(server.url("/v1")),
                    model: Some("m".into()),
                    protocol,
                    constrain,
                    ..ProviderConfig::new(ProviderKind::Openai)
                };
                let env = |_: &str| Some("key".to_owned());
                let selected = config.build_with(&env).unwrap();
                let _ = run(selected.provider.as_ref(), &request(vec![calc_tool()])).await;
                let body = &server.received()[0].body;
                assert_eq!(
                    body.get(field).is_some(),
                    sent,
                    "{protocol:?} with {constrain:?}: {body}"
                );
            }
        }
    })
    .await;
}

#[tokio::test]
async fn native_calls_constrained_on_send_strict_schemas_and_drop_the_nulls_they_cause() {
    bounded(async {
        let optional = ToolDefinition {
            name: "read".into(),
            description: "Reads.".into(),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]})
            .into(),
        };
        let reply = || {
            sse(openai_frames(&[
                tool_call_chunk(
                    0,
                    Some("c1"),
                    Some("read"),
                    r#"{"path": "a.txt", "limit": null}"#,
                ),
                finish_chunk("tool_calls"),
            ]))
        };
        for (constrain, strict) in [
            (Constrain::On, true),
            (Constrain::Auto, false),
            (Constrain::Off, false),
        ] {
            let server = Server::replies(vec![reply()]).await;
            let config = ProviderConfig {
                base_url: Some(server.url("/v1")),
                model: Some("m".into()),
                constrain,
                ..ProviderConfig::new(ProviderKind::Openai)
            };
            let env = |_: &str| Some("key".to_owned());
            let provider = config.build_with(&env).unwrap().provider;
            let (r, _) = run(provider.as_ref(), &request(vec![optional.clone()])).await;
            let call = &r.unwrap().message.tool_calls[0];
            let body = &server.received()[0].body;
            let function = &body["tools"][0]["function"];
            if strict {
                assert_eq!(function["strict"], true, "{body}");
                assert_eq!(function["parameters"]["additionalProperties"], false);
                assert_eq!(function["parameters"]["required"], json!(["limit", "path"]));
                // The tool sees the call it would have seen without strict mode.
                assert_eq!(call.arguments, r#"{"path":"a.txt"}"#);
            } else {
                assert!(function.get("strict").is_none(), "{constrain:?}: {body}");
                assert_eq!(function["parameters"], *optional.parameters);
                assert_eq!(call.arguments, r#"{"path": "a.txt", "limit": null}"#);
            }
        }
    })
    .await;
}

#[tokio::test]
async fn select_returns_none_quickly_without_any_model() {
    bounded(async {
        // A port nobody listens on, and a server that never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_url = format!("http://{}", silent.local_addr().unwrap());
        let no_env = |_: &str| None;
        for root in [closed, silent_url] {
            let started = Instant::now();
            let s = select::select_with(None, &no_env, Some(&root))
                .await
                .unwrap();
            assert!(s.is_none());
            assert!(started.elapsed() < Duration::from_millis(1500));
        }
        drop(silent);
    })
    .await;
}

// ---------------------------------------------------------------- model options

/// A request with every model option set, and `extra` trying to override
/// fields the host sets.
fn request_with_options() -> CompletionRequest {
    let mut req = request(vec![calc_tool()]);
    req.temperature = Some(0.7);
    req.top_p = Some(0.9);
    req.stop = vec!["END".into(), "STOP".into()];
    req.reasoning_effort = Some(toolhost_agent::provider::ReasoningEffort::High);
    req.extra.insert("seed".into(), json!(7));
    req.extra.insert("top_k".into(), json!(40));
    req.extra.insert("temperature".into(), json!(1.5));
    req.extra.insert("tools".into(), json!([]));
    req
}

#[tokio::test]
async fn openai_body_carries_top_p_stop_reasoning_effort_and_extra() {
    bounded(async {
        let chunks = vec![text_chunk("ok"), finish_chunk("stop")];
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let (r, _) = run(&openai(&server), &request_with_options()).await;
        r.unwrap();
        let b = &server.received()[0].body;
        // Sent in their shortest decimal form.
        assert_eq!(b["temperature"].to_string(), "0.7");
        assert_eq!(b["top_p"].to_string(), "0.9");
        assert_eq!(b["stop"], json!(["END", "STOP"]));
        assert_eq!(b["reasoning_effort"], "high");
        assert_eq!(b["seed"], 7);
        assert_eq!(b["top_k"], 40);
        // `extra` never replaces what the host set.
        assert_eq!(b["tools"].as_array().map(Vec::len), Some(1));
        // Nothing is sent that was not set.
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let (r, _) = run(&openai(&server), &request(vec![])).await;
        r.unwrap();
        let b = &server.received()[0].body;
        for key in ["top_p", "stop", "reasoning_effort", "temperature", "seed"] {
            assert!(b.get(key).is_none(), "{key}: {b}");
        }
    })
    .await;
}

#[tokio::test]
async fn anthropic_body_carries_top_p_stop_sequences_effort_and_extra() {
    bounded(async {
        let events = vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}),
            json!({"type": "message_stop"}),
        ];
        let server = Server::replies(vec![sse(anthropic_frames(&events))]).await;
        let mut req = request_with_options();
        req.max_tokens = Some(321);
        req.extra.insert("max_tokens".into(), json!(5));
        req.extra
            .insert("metadata".into(), json!({"user_id": "u1"}));
        let (r, _) = run(&anthropic(&server), &req).await;
        r.unwrap();
        let b = &server.received()[0].body;
        assert_eq!(b["temperature"].to_string(), "0.7");
        assert_eq!(b["top_p"].to_string(), "0.9");
        assert_eq!(b["stop_sequences"], json!(["END", "STOP"]));
        assert!(b.get("stop").is_none());
        assert_eq!(b["output_config"], json!({"effort": "high"}));
        assert_eq!(b["max_tokens"], 321);
        assert_eq!(b["metadata"], json!({"user_id": "u1"}));
        assert_eq!(b["seed"], 7);
        assert_eq!(b["tools"].as_array().map(Vec::len), Some(1));
    })
    .await;
}
