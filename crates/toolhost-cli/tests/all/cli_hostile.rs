//! Hostile plugins in the agent loop, through the `host run` binary: a
//! scripted model (on 127.0.0.1, recording what it is sent) calls one
//! misbehaving tool after another, then a well-behaved one. Every fault must
//! come back to the model as a readable tool result, and the run must go on.

use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::*;

/// `(tool, arguments, text the model must read in the tool result)`.
fn script() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        ("spin", json!({}), "timed out after 200ms"),
        (
            "panic",
            json!({"message": "hostile kaboom 31"}),
            "plugin panicked: hostile kaboom 31",
        ),
        ("alloc", json!({}), "memory limit exceeded"),
        ("recurse", json!({}), "stack overflow"),
        (
            "big_output",
            json!({}),
            "output is 52428800 bytes, over the limit",
        ),
        ("bad_details", json!({}), "details that are not valid JSON"),
        ("bad_utf8_details", json!({}), "invalid utf-8"),
        (
            "read_path",
            json!({"path": "/etc/passwd"}),
            "cannot read /etc/passwd",
        ),
        (
            "env",
            json!({"name": "PATH"}),
            "PATH: environment variable not found",
        ),
        ("calculate", json!({"expression": "6*7"}), "42"),
    ]
}

/// `host run PROMPT` with the plugins at `plugins`, against the scripted
/// model `server` (OpenAI's wire format), stdin closed.
fn run_against(server: &ModelServer, plugins: &std::path::Path, prompt: &str) -> Output {
    host(&root().join("target/test-cache"))
        .env("TEST_MODEL_KEY", "test-key")
        .arg("--plugins")
        .arg(plugins)
        .args(["--no-watch", "--provider", "openai", "--base-url"])
        .arg(format!("http://127.0.0.1:{}/v1", server.port))
        .args([
            "--api-key-env",
            "TEST_MODEL_KEY",
            "--model",
            "m",
            "run",
            prompt,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("host runs")
}

fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn every_fault_reaches_the_model_as_a_readable_tool_result() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "hostile-spin",
        "hostile-panic",
        "hostile-alloc",
        "hostile-recurse",
        "hostile-big-output",
        "hostile-bad-details",
        "hostile-fs-escape",
        "hostile-env",
    ] {
        copy_plugin(&fixtures_dir(), name, dir.path());
    }
    copy_plugin(&plugins_dir(), "calc", dir.path());

    let calls = script();
    let n_calls = calls.len();
    let steps: Vec<(String, String)> = calls
        .iter()
        .map(|(tool, args, _)| (tool.to_string(), args.to_string()))
        .collect();
    let server = ModelServer::start(move |n, _| match steps.get(n) {
        Some((tool, args)) => openai_tool_call(&format!("call_{n}"), tool, args),
        None => openai_text("done"),
    });

    let started = std::time::Instant::now();
    let out = run_against(&server, dir.path(), "Misbehave.");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("done"),
        "the run finished with the model's answer: {stderr}"
    );
    eprintln!("the run took {:?}", started.elapsed());

    let bodies = server.bodies();
    assert_eq!(bodies.len(), n_calls + 1, "{stderr}");
    let seen = tool_messages(&bodies[n_calls]);
    assert_eq!(seen.len(), n_calls, "{seen:#?}");
    for ((tool, _, expected), message) in script().iter().zip(&seen) {
        eprintln!("{tool}: {message}");
        if *tool != "calculate" {
            assert!(message.starts_with("Error: "), "{tool}: {message}");
        }
        assert!(
            message.contains(expected),
            "{tool}: the model read {message:?}, not {expected:?}"
        );
        assert!(message.len() < 4096, "{tool}: {} bytes", message.len());
    }
}

/// Whether `text` holds a character that could drive a terminal: a control
/// other than newline and tab, or a bidirectional override.
fn drives_a_terminal(text: &str) -> bool {
    text.chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}'))
}

#[test]
fn text_a_plugin_or_the_model_writes_cannot_drive_the_terminal() {
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}txt.exe";
    let plugins = fixtures_dir().join("hostile.wasm");
    let cache = root().join("target/test-cache");

    // `host call`: the error a plugin wrote goes to stderr, escaped.
    let out = host(&cache)
        .arg("--plugins")
        .arg(&plugins)
        .args(["--no-watch", "call", "panic"])
        .arg(json!({ "message": hostile }).to_string())
        .output()
        .expect("host runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("\\u{1b}]0;pwned\\u{7}"), "{stderr}");
    assert!(!drives_a_terminal(&stderr), "{stderr:?}");

    // `host run`: the tool lines on stderr show the arguments and the
    // output escaped; the answer on stdout, a pipe here, stays exact.
    let steps = [json!({ "text": hostile }).to_string()];
    let answer = format!("done {hostile}");
    let reply = answer.clone();
    let server = ModelServer::start(move |n, _| match steps.get(n) {
        Some(args) => openai_tool_call("call_0", "echo", args),
        None => openai_text(&reply),
    });
    let out = run_against(&server, &plugins, "Echo.");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("✓ echo"), "{stderr}");
    assert!(stderr.contains("\\u{202e}txt.exe"), "{stderr}");
    assert!(!drives_a_terminal(&stderr), "{stderr:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&answer));

    // A model server's error, which ends the run with its words.
    let body = format!("{{\"error\":{{\"message\":\"bad {hostile}\"}}}}");
    let server = ModelServer::start_replies(move |_, _| Reply::status(400, &body));
    let out = run_against(&server, &plugins, "Fail.");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("status: error"), "{stderr}");
    assert!(
        stderr.contains("\\u{1b}]0;pwned"),
        "the server's words are shown, escaped: {stderr}"
    );
    assert!(!drives_a_terminal(&stderr), "{stderr:?}");
}
