//! The Anthropic provider against the fake server: its event stream, the
//! body the server got, tool choice, error events and cut streams.

use serde_json::{Value, json};
use toolhost_providers::{
    Delta, FinishReason, ProviderError, ToolCall, ToolChoice, anthropic::Anthropic,
};
use toolhost_test_support::fake_model::FakeModel as Server;

use crate::support::*;

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
        let server =
            Server::replies(vec![sse(anthropic_frames(&anthropic_text_events("42")))]).await;
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
