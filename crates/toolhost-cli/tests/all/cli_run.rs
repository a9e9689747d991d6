//! `host run`: the real binary, the real example plugins, and a model server
//! on 127.0.0.1 that speaks the providers' streaming wire formats.

use std::process::Output;

use serde_json::json;

use crate::support::*;

fn host_run(args: &[&str]) -> Output {
    host_command(
        env!("CARGO_BIN_EXE_host"),
        &root().join("target/test-cache"),
    )
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
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("page through long files"),
        "the fs plugin's usage rules are in the system prompt: {system}"
    );
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
    let o = host_command(
        env!("CARGO_BIN_EXE_host"),
        &root().join("target/test-cache"),
    )
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

/// `host run` against `server` (OpenAI-compatible), with extra flags before `run`.
fn run_openai(server: &ModelServer, flags: &[&str], json: bool) -> (Output, serde_json::Value) {
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let mut args = vec!["--provider", "openai", "--base-url", &base, "--model", "m"];
    args.extend_from_slice(flags);
    args.push("run");
    args.push("--json");
    args.push("go");
    let o = host_run(&args);
    let v = if json {
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {} / {}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        })
    } else {
        serde_json::Value::Null
    };
    (o, v)
}

/// The content of the last message of request `n` the server received.
fn last_message(server: &ModelServer, n: usize) -> serde_json::Value {
    server.bodies()[n]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone()
}

#[test]
fn run_retries_after_a_500_and_then_calls_the_plugin() {
    let server = ModelServer::start(|n, _| {
        match n {
        0 => "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\noops".into(),
        1 => openai_tool_call("c1", "calculate", r#"{"expression":"6*7"}"#),
        _ => openai_text("42"),
    }
    });
    let (o, r) = run_openai(&server, &[], true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["status"], "completed");
    assert_eq!(r["history"][0]["output"], "42");
    assert_eq!(server.bodies().len(), 3, "one retry, then two rounds");
}

#[test]
fn run_fails_clearly_on_a_400() {
    let server = ModelServer::start(|_, _| {
        let body = r#"{"error":{"message":"model `m` does not exist"}}"#;
        format!(
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    });
    let (o, r) = run_openai(&server, &[], true);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(r["status"], "error");
    let error = r["error"].as_str().unwrap();
    assert!(
        error.contains("400") && error.contains("does not exist"),
        "{error}"
    );
    assert_eq!(server.bodies().len(), 1, "a 400 is not retried");
}

#[test]
fn a_stream_cut_mid_way_ends_with_error_and_keeps_the_history() {
    let server = ModelServer::start(|n, _| {
        match n {
        0 => openai_tool_call("c1", "calculate", r#"{"expression":"1+1"}"#),
        // A partial answer, then the connection closes without finish_reason or [DONE].
        _ => "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"The answer is\"},\"finish_reason\":null}]}\n\n".into(),
    }
    });
    let (o, r) = run_openai(&server, &[], true);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(r["status"], "error");
    assert_eq!(r["history"][0]["output"], "2", "the tool round is kept");
    let text: Vec<&str> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        text.iter().any(|t| t.contains("The answer is")),
        "partial text kept: {text:?}"
    );
}

#[test]
fn malformed_arguments_wrong_case_and_unknown_tools_become_results_the_model_reads() {
    let server = ModelServer::start(|n, _| match n {
        0 => openai_tool_call("c1", "calculate", r#"{"expression": "1+"#),
        1 => openai_tool_call("c2", "Calculate", r#"{"expression":"2+2"}"#),
        2 => openai_tool_call("c3", "teleport", r#"{}"#),
        _ => openai_text("done"),
    });
    let (o, r) = run_openai(&server, &[], true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h = r["history"].as_array().unwrap();
    assert_eq!(h[0]["is_error"], true);
    assert_eq!(h[1]["tool"], "calculate", "the name was repaired");
    assert_eq!(h[1]["output"], "4");
    assert_eq!(h[2]["is_error"], true);
    let malformed = last_message(&server, 1);
    assert_eq!(malformed["role"], "tool");
    assert!(
        malformed["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("json"),
        "{malformed}"
    );
    let unknown = last_message(&server, 3)["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        unknown.contains("teleport") && unknown.contains("calculate"),
        "{unknown}"
    );
}

#[test]
fn max_rounds_forces_a_final_answer() {
    let server = ModelServer::start(|n, _| match n {
        0 => openai_tool_call("c1", "calculate", r#"{"expression":"1+1"}"#),
        _ => openai_text("final: 2"),
    });
    let (o, r) = run_openai(&server, &["--max-rounds", "1"], true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(r["status"], "max-rounds");
    assert_eq!(r["text"], "final: 2");
    let last = &server.bodies()[1];
    assert_eq!(
        last["tool_choice"], "none",
        "no tool may be called in the final answer"
    );
}

#[test]
fn a_model_stream_that_never_ends_is_cut_by_the_run_timeout() {
    // Each frame arrives well within the stream's idle timeout, so only the
    // run's own deadline can end it.
    let server = ModelServer::start_replies(|_, _| {
        let frame =
            json!({"choices": [{"index": 0, "delta": {"content": "."}, "finish_reason": null}]});
        Reply::Endless {
            first: Vec::new(),
            frame: format!("data: {frame}\n\n"),
            gap: std::time::Duration::from_millis(50),
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
        "--run-timeout",
        "2",
        "run",
        "Say something.",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "{stderr} / {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(
        stderr.contains("timeout"),
        "{stderr} / {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// A chat with the example plugins and `server`'s model, answering
/// questions from stdin, once its tools are loaded.
fn chat_with(server: &ModelServer) -> Session {
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let mut cmd = crate::support::host(&root().join("target/test-cache"));
    cmd.env("TEST_MODEL_KEY", "test-key")
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["--provider", "openai", "--base-url", &base, "--model", "m"])
        .args(["--api-key-env", "TEST_MODEL_KEY", "--answers-from-stdin"]);
    let session = Session::start(cmd);
    session.expect("tools loaded");
    session
}

#[test]
fn in_the_chat_a_repeated_call_is_the_users_to_allow_or_stop() {
    // The model asks for the same call forever, until it is told to answer.
    let server = ModelServer::start(|_, body| {
        if body.contains("answer now") {
            openai_sse(&[
                json!({"choices": [{"index": 0, "delta": {"content": "It is 2."}, "finish_reason": "stop"}]}),
            ])
        } else {
            openai_tool_call("c", "calculate", r#"{"expression": "1+1"}"#)
        }
    });
    let mut session = chat_with(&server);
    session.send("What is 1+1?");
    let asked = session.expect("times in a row with");
    assert!(
        asked.contains("calculate") && asked.contains("3 times"),
        "{asked}"
    );
    session.send("o");
    // Allowed once: the count starts again, and the question comes back.
    session.expect("times in a row with");
    session.send("s");
    // Stopped: the model is asked for its answer.
    session.expect("It is 2.");
}

#[test]
fn a_plugins_progress_reports_are_shown_while_its_call_runs() {
    let page = TestServer::start("a small page");
    let url = page.url("/notes");
    let args = json!({ "url": url }).to_string();
    let server = ModelServer::start(move |n, _| {
        if n == 0 {
            openai_tool_call("c1", "http_get", &args)
        } else {
            openai_text("Fetched.")
        }
    });
    let grant = format!(
        "http={}",
        url.trim_start_matches("http://").split('/').next().unwrap()
    );
    let (o, _) = run_openai(&server, &["--allow-host", &grant], false);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("… http_get: GET {url}")),
        "the http plugin's progress report: {stderr}"
    );
}

/// The model calls `calculate`, then answers every request with the call
/// written as JSON (what a 0.5B model did in the issue).
fn call_then_protocol_text() -> ModelServer {
    ModelServer::start(|n, _| {
        if n == 0 {
            openai_tool_call("c1", "calculate", r#"{"expression": "2*(3+4)"}"#)
        } else {
            openai_text(r#"{"name": "calculate", "arguments": {"expression": "14"}}"#)
        }
    })
}

#[test]
fn a_run_whose_model_answers_only_with_calls_answers_from_the_results() {
    let server = call_then_protocol_text();
    let (o, v) = run_openai(&server, &[], true);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["text"], "calculate(2*(3+4)) returned 14.", "{v}");
    assert_eq!(v["answer_source"], "results", "{v}");
    assert_eq!(v["status"], "completed", "{v}");
}

#[test]
fn in_the_chat_a_reply_set_aside_after_it_was_shown_is_marked_as_not_the_answer() {
    // Words where the user named a tool (what a 0.5B model did in the
    // issue): shown as they stream, then set aside for a required call.
    let server = ModelServer::start(|n, _| match n {
        0 => openai_text("It is 10."),
        1 => openai_tool_call("c1", "calculate", r#"{"expression": "2*(3+4)"}"#),
        _ => openai_text("It is 14."),
    });
    let mut session = chat_with(&server);
    session.send("What is 2*(3+4)? Use the calculate tool.");
    let note = session.expect("not the answer");
    assert!(
        note.contains("↺ not the answer: the tool the user named was not called"),
        "{note}"
    );
    let answer = session.expect("It is 14.");
    assert!(
        !answer.contains("It is 10."),
        "the answer is not run on from the reply set aside: {answer}"
    );
}

#[test]
fn in_the_chat_protocol_text_is_never_shown_and_the_answer_comes_from_the_results() {
    let server = call_then_protocol_text();
    let mut session = chat_with(&server);
    session.send("What is 2*(3+4)?");
    let shown = session.expect("from the tool results:");
    assert!(!shown.contains("\"arguments\""), "{shown}");
    let answer = session.expect("returned 14.");
    assert!(
        answer.contains("calculate(2*(3+4)) returned 14."),
        "{answer}"
    );
    assert!(!answer.contains("\"arguments\""), "{answer}");
}

/// `host run` over the example plugins, the model an OpenAI-compatible
/// server whose `[model]` says `images = IMAGES`, that calls `bar_chart`
/// and then answers: the request after the call, as the server got it.
fn chart_run(images: bool) -> serde_json::Value {
    let server = ModelServer::start(|n, _| {
        if n == 0 {
            openai_tool_call(
                "call_1",
                "bar_chart",
                r#"{"values": [3, 1, 4], "width": 64, "height": 48}"#,
            )
        } else {
            openai_text("The third bar is the tallest.")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\nkind = \"openai\"\nbase-url = \"http://127.0.0.1:{}/v1\"\nmodel = \"test-model\"\nimages = {images}\n",
            server.port
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    let o = host_run(&["--config", &config, "run", "Chart 3, 1 and 4."]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("The third bar is the tallest."),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:#?}");
    bodies[1].clone()
}

#[test]
fn a_plugins_image_reaches_a_model_that_reads_images_as_an_image() {
    let body = chart_run(true);
    let messages = body["messages"].as_array().unwrap();
    let tool = messages
        .iter()
        .position(|m| m["role"] == "tool")
        .expect("the tool result");
    let text = messages[tool]["content"].as_str().unwrap();
    assert!(
        text.starts_with(
            "A bar chart of 3 values, from 1 to 4: a 64×48 PNG image.\n[image image/png, "
        ),
        "{text}"
    );
    assert!(text.ends_with(" bytes: in the next message]"), "{text}");
    let images = &messages[tool + 1];
    assert_eq!(images["role"], "user", "{messages:#?}");
    let url = images["content"][1]["image_url"]["url"].as_str().unwrap();
    let data = url
        .strip_prefix("data:image/png;base64,")
        .expect("a PNG data URL");
    let png = toolhost_runtime::content::media::decode(data, 1 << 20).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[test]
fn a_model_that_does_not_read_images_gets_a_line_instead() {
    let body = chart_run(false);
    let text = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_owned();
    assert!(
        text.contains("(not shown: this model does not read images)"),
        "{text}"
    );
    assert!(!body.to_string().contains("image_url"), "{body}");
}

/// A model that takes long to answer: the turn says, on stderr, that it is
/// still waiting (every 15 s), and the answer comes as usual (issue 47: a
/// long turn was silent).
#[test]
fn a_turn_that_waits_long_for_the_model_says_so() {
    let server = ModelServer::start_replies(|_, _| Reply::Stream {
        frames: vec![openai_text("fourteen")],
        gap: std::time::Duration::from_secs(16),
        end: toolhost_test_support::fake_model::End::Close,
    });
    let (o, r) = run_openai(&server, &[], true);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(r["status"], "completed", "{r}");
    assert_eq!(
        err.matches("… waiting for the model (").count(),
        1,
        "once in 16 s: {err}"
    );
}
