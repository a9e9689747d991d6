//! Model options (top_p, stop, reasoning effort, extra fields) in both
//! providers' request bodies.

use serde_json::json;
use toolhost_providers::CompletionRequest;
use toolhost_test_support::fake_model::FakeModel as Server;

use crate::support::*;

/// A request with every model option set, and `extra` trying to override
/// fields the host sets.
fn request_with_options() -> CompletionRequest {
    let mut req = request(vec![calc_tool()]);
    req.temperature = Some(0.7);
    req.top_p = Some(0.9);
    req.stop = vec!["END".into(), "STOP".into()];
    req.reasoning_effort = Some(toolhost_providers::options::ReasoningEffort::High);
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
