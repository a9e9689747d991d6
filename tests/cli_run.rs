//! `host run`: the real binary, the real example plugins, and a model server
//! on 127.0.0.1 that speaks the providers' streaming wire formats.

mod common;

use std::process::{Command, Output};

use serde_json::json;

use common::*;

fn host_run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_host"))
        .env("TOOLHOST_CACHE_DIR", root().join("target/test-cache"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("TOOLHOST_CONFIG")
        .env("TEST_MODEL_KEY", "test-key")
        .arg("--plugins")
        .arg(plugins_dir())
        .args(args)
        .output()
        .expect("host runs")
}

#[test]
fn run_answers_through_an_openai_compatible_server_after_calling_calculate() {
    let server = ModelServer::start(|n, _| {
        if n == 0 {
            // The tool call's arguments arrive in three fragments.
            let call = |args: &str, first: bool| {
                let mut tc = json!({"index": 0, "function": {"arguments": args}});
                if first {
                    tc["id"] = json!("call_1");
                    tc["type"] = json!("function");
                    tc["function"]["name"] = json!("calculate");
                }
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": null}]})
            };
            openai_sse(&[
                call("{\"expre", true),
                call("ssion\": \"2*(3", false),
                call("+4)\"}", false),
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10}}),
            ])
        } else {
            openai_sse(&[
                json!({"choices": [{"index": 0, "delta": {"content": "2*(3+4) is "}, "finish_reason": null}]}),
                json!({"choices": [{"index": 0, "delta": {"content": "14."}, "finish_reason": "stop"}]}),
            ])
        }
    });
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let o = host_run(&[
        "--provider",
        "openai",
        "--base-url",
        &base,
        "--model",
        "test-model",
        "run",
        "What is 2*(3+4)? Use the calculator.",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "2*(3+4) is 14.");
    assert!(
        stderr.contains("calculate"),
        "the tool call is shown: {stderr}"
    );

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], "test-model");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"calculate") && tools.contains(&"read_file"),
        "{tools:?}"
    );
    let last = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "tool");
    assert_eq!(last["tool_call_id"], "call_1");
    assert_eq!(last["content"], "14");
}

#[test]
fn run_answers_through_the_anthropic_format_after_calling_calculate() {
    let server = ModelServer::start(|n, _| {
        if n == 0 {
            anthropic_sse(&[
                json!({"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 40, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "calculate"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"expression\": "}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "\"2*(3+4)\"}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}}),
                json!({"type": "message_stop"}),
            ])
        } else {
            anthropic_sse(&[
                json!({"type": "message_start", "message": {"id": "m2", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 60, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "It is 14."}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ])
        }
    });
    let base = format!("http://127.0.0.1:{}", server.port);
    let o = host_run(&[
        "--provider",
        "anthropic",
        "--base-url",
        &base,
        "--api-key-env",
        "TEST_MODEL_KEY",
        "--model",
        "claude-test",
        "run",
        "--json",
        "What is 2*(3+4)? Use the calculator.",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(result["status"], "completed");
    assert_eq!(result["text"], "It is 14.");
    assert_eq!(result["history"][0]["tool"], "calculate");
    assert_eq!(result["history"][0]["output"], "14");

    let bodies = server.bodies();
    let last = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_1");
}

#[test]
fn run_without_a_model_says_how_to_configure_one() {
    let o = Command::new(env!("CARGO_BIN_EXE_host"))
        .env("TOOLHOST_CACHE_DIR", root().join("target/test-cache"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        // Nothing listens here, so auto-detection finds no Ollama either.
        .env("OLLAMA_HOST", "http://127.0.0.1:9")
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["run", "hello"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("OPENAI_API_KEY"));
}
