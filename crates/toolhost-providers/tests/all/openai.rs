//! The OpenAI-compatible provider against the fake server: streamed and
//! whole responses, tool-call fragments, usage, the body the server got.

use std::time::Duration;

use serde_json::{Value, json};
use toolhost_providers::{Delta, FinishReason, ToolCall, ToolChoice};
use toolhost_test_support::fake_model::{End, FakeModel as Server, Reply};

use crate::support::*;

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
async fn a_reply_that_writes_a_turn_marker_ends_there_even_if_the_stream_never_does() {
    bounded(async {
        // A small model behind a template it does not know: it writes
        // ChatML's end of turn as text and goes on playing both sides, and
        // the server never ends the stream.
        let frames: Vec<String> = [
            text_chunk("It is 14.<|im_"),
            text_chunk("end|>\n<|im_start|>user\nWhat is"),
            text_chunk(" 2*(3+4)?<|im_end|>"),
        ]
        .iter()
        .map(|c| format!("data: {c}\n\n"))
        .collect();
        let server = Server::replies(vec![Reply::Stream {
            frames,
            gap: Duration::from_millis(5),
            end: End::Hang,
        }])
        .await;
        let (r, _) = run(&openai(&server), &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "It is 14.");
        assert_eq!(c.finish_reason, FinishReason::Stop);
        server.wait_stream_dropped().await;

        // The same written into a whole response.
        let body = json!({"choices": [{"index": 0, "finish_reason": "length",
            "message": {"role": "assistant", "content": "Fourteen.<end_of_turn>\n<start_of_turn>user\nAgain"}}]});
        let server = Server::replies(vec![json_reply(body)]).await;
        let (r, _) = run(&openai(&server).with_streaming(false), &request(vec![])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "Fourteen.");
        assert_eq!(c.finish_reason, FinishReason::Stop);
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
