//! An error the model server sends in the middle of a stream, on both
//! wires, as a local llama.cpp server sends it when it cannot parse what
//! the model wrote: text, a complete tool call, then `event: error` with a
//! 500 body (no `"type": "error"` in it). The error says what the server
//! said and keeps the text streamed before it; the agent loop recovers
//! from it (`toolhost-agent`'s `provider_faults.rs`).

use serde_json::json;
use toolhost_providers::ProviderError;
use toolhost_test_support::fake_model::FakeModel as Server;

use crate::support::*;

/// The server's words.
const SAID: &str = "The model produced output that does not match the expected peg-native format";

/// llama.cpp's `event: error` frame.
fn error_event() -> String {
    format!(
        "event: error\ndata: {}\n\n",
        json!({"code": 500, "message": SAID, "type": "server_error"})
    )
}

fn assert_said(r: Result<toolhost_providers::Completion, ProviderError>) {
    match r.unwrap_err() {
        ProviderError::InvalidResponse {
            message,
            partial_text,
            ..
        } => {
            assert!(message.contains(SAID), "the server's words: {message}");
            assert!(message.contains("500"), "{message}");
            assert_eq!(partial_text, "```json");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_event_after_a_tool_use_block_on_the_anthropic_wire_says_what_the_server_said() {
    bounded(async {
        let mut frames = anthropic_frames(&[
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                "content": [], "usage": {"input_tokens": 25, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "```json"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"expr\": \"2*(3+4)\"}"}}),
            json!({"type": "content_block_stop", "index": 1}),
        ]);
        frames.push(error_event());
        let server = Server::replies(vec![sse(frames)]).await;
        let (r, _) = run(&anthropic(&server), &request(vec![calc_tool()])).await;
        assert_said(r);
    })
    .await;
}

#[tokio::test]
async fn an_error_event_after_a_tool_call_on_the_openai_wire_says_what_the_server_said() {
    bounded(async {
        let frames = vec![
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "```json"}, "finish_reason": null}]})
            ),
            format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "calc", "arguments": "{\"expr\": \"2*(3+4)\"}"}}]}, "finish_reason": null}]})
            ),
            error_event(),
        ];
        let server = Server::replies(vec![sse(frames)]).await;
        let (r, _) = run(&openai(&server), &request(vec![calc_tool()])).await;
        assert_said(r);
    })
    .await;
}
