//! OpenTelemetry traces, read back from a real backend (Arize Phoenix,
//! which `cargo xtask test` installs): the span tree of a `host call`, of a
//! `host run` against the fake model, of an MCP call that carries a
//! `traceparent` through `host mcp` to an upstream MCP server and back, and
//! of an MCP call whose caller asks for it not to be sampled. One Phoenix
//! serves the four scenarios (it takes a while to start); each exports to
//! a project of its own.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolhost_test_support::phoenix::{Span, tree};

use crate::support::*;

/// `host` exporting to `phoenix`'s `project`, with a short batch delay.
fn traced(cmd: &mut Command, phoenix: &Phoenix, project: &str) {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.endpoint())
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={project}"),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "100");
}

fn host_cmd() -> Command {
    host(&root().join("target/test-cache"))
}

fn only_trace(spans: &[Span]) -> String {
    let mut ids: Vec<&str> = spans.iter().map(|s| s.trace_id.as_str()).collect();
    ids.dedup();
    assert_eq!(ids.len(), 1, "one trace: {}", tree(spans));
    ids[0].to_owned()
}

fn named<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span `{name}` in\n{}", tree(spans)))
}

const CALL_TREE: &str = "\
execute_tool calculate
  validate
  admit
    policy
  execute
    queue
    sandbox
  conclude
";

#[test]
fn a_call_a_run_and_an_mcp_request_reach_phoenix_as_span_trees() {
    let phoenix = Phoenix::start();
    a_call_is_one_trace_with_a_span_per_step(&phoenix);
    a_run_is_a_trace_of_rounds_model_requests_and_calls(&phoenix);
    an_mcp_call_joins_a_trusted_callers_trace_and_carries_it_upstream(&phoenix);
    an_unsampled_callers_mcp_call_is_traced_in_a_trace_of_its_own(&phoenix);
}

/// A config file that exports each call's steps (`[telemetry] steps`).
fn with_steps() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, "[telemetry]\nsteps = true\n").unwrap();
    (dir, config)
}

fn a_call_is_one_trace_with_a_span_per_step(phoenix: &Phoenix) {
    // By default a call is one span.
    let mut cmd = host_cmd();
    traced(&mut cmd, phoenix, "call-alone");
    let out = cmd
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "calculate", r#"{"expression":"6*7"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        tree(&phoenix.spans("call-alone", 1)),
        "execute_tool calculate\n"
    );
    // With `steps`, a span per step below it.
    let (_dir, config) = with_steps();
    let mut cmd = host_cmd();
    traced(&mut cmd, phoenix, "call");
    let out = cmd
        .arg("--config")
        .arg(&config)
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "calculate", r#"{"expression":"6*7"}"#])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spans = phoenix.spans("call", 8);
    assert_eq!(tree(&spans), CALL_TREE);
    only_trace(&spans);
    let call = named(&spans, "execute_tool calculate");
    for (key, value) in [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "calculate"),
        ("toolhost.plugin", "calc"),
        ("toolhost.decision", "allow"),
        ("toolhost.outcome", "ok"),
        ("toolhost.cached", "false"),
    ] {
        assert_eq!(call.attr(key), value, "{key}: {:?}", call.attributes);
    }
    assert!(call.attr("toolhost.plugin.digest").starts_with("sha256:"));
    // Never the arguments or the result.
    for span in &spans {
        for (key, value) in &span.attributes {
            let text = value.as_str().unwrap_or_default();
            assert!(
                !text.contains("6*7") && text != "42",
                "{}: {key} = {text}",
                span.name
            );
        }
    }
}

fn a_run_is_a_trace_of_rounds_model_requests_and_calls(phoenix: &Phoenix) {
    let server = ModelServer::start(|n, _| {
        if n == 0 {
            openai_sse(&[
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "calculate", "arguments": "{\"expression\": \"6*7\"}"}}]}, "finish_reason": "tool_calls"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 10}}),
            ])
        } else {
            openai_sse(&[
                json!({"choices": [{"index": 0, "delta": {"content": "It is 42."}, "finish_reason": "stop"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 70, "completion_tokens": 5}}),
            ])
        }
    });
    let mut cmd = host_cmd();
    traced(&mut cmd, phoenix, "run");
    let out = cmd
        .env("TEST_MODEL_KEY", "test-key")
        .arg("--plugins")
        .arg(plugins_dir())
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("http://127.0.0.1:{}/v1", server.port),
            "--model",
            "test-model",
            "run",
            "What is 6*7?",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let spans = phoenix.spans("run", 6);
    assert_eq!(
        tree(&spans),
        "invoke_agent\n  round 1\n    chat test-model\n    execute_tool calculate\n  round 2\n    chat test-model\n"
    );
    let trace = only_trace(&spans);
    let run = named(&spans, "invoke_agent");
    assert_eq!(run.attr("gen_ai.request.model"), "test-model");
    assert_eq!(run.attr("gen_ai.usage.input_tokens"), "120");
    assert_eq!(run.attr("toolhost.status"), "completed");
    let chat = spans.iter().find(|s| s.name == "chat test-model").unwrap();
    assert_eq!(chat.attr("gen_ai.operation.name"), "chat");
    assert_eq!(chat.attr("gen_ai.provider.name"), "openai");
    // The model requests carried the trace onward.
    for received in server.received() {
        let parent = received
            .headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(parent.starts_with(&format!("00-{trace}-")), "{parent:?}");
    }
}

fn an_mcp_call_joins_a_trusted_callers_trace_and_carries_it_upstream(phoenix: &Phoenix) {
    let tmp = tempfile::tempdir().unwrap();
    // Both hosts trust their callers' trace context (by default a caller's
    // `traceparent` is only linked: `propagate.rs` tests that).
    const TRUSTED: &str = "[telemetry]\ncaller-trace = \"parent\"\nsteps = true\n";
    let upstream_config = tmp.path().join("upstream.toml");
    std::fs::write(&upstream_config, TRUSTED).unwrap();
    // The upstream server is another toolhost (`host mcp` serving calc),
    // exporting to the same project: its spans must join the same trace.
    let upstream = crate::mcp::host_args(
        tmp.path(),
        &[
            "--config",
            &upstream_config.display().to_string(),
            "--plugins",
            &plugins_dir().display().to_string(),
            "mcp",
        ],
    );
    let config = tmp.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "{TRUSTED}[[mcp-servers]]\nname = \"up\"\ncommand = {}\npass-env = [\"OTEL_EXPORTER_OTLP_ENDPOINT\", \"OTEL_RESOURCE_ATTRIBUTES\", \"OTEL_BSP_SCHEDULE_DELAY\"]\n",
            serde_json::to_string(&upstream).unwrap()
        ),
    )
    .unwrap();
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = host_cmd();
    traced(&mut cmd, phoenix, "mcp");
    let mut child = cmd
        .arg("--config")
        .arg(&config)
        .arg("--plugins")
        .arg(empty.path())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = "00f067aa0ba902b7";
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "trace-test", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "up__calculate", "arguments": {"expression": "6*7"},
        "_meta": {"traceparent": format!("00-{trace}-{caller}-01")}}}),
    );
    let answer = lines
        .by_ref()
        .map_while(Result::ok)
        .map(|l| serde_json::from_str::<Value>(&l).unwrap_or_default())
        .find(|v| v["id"] == 2)
        .expect("an answer to tools/call");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // Both processes export while they run (the batch leaves every 100 ms
    // here): nine spans each.
    let spans = phoenix.trace("mcp", trace, 18);
    drop(stdin);
    let _ = child.wait();
    assert_eq!(only_trace(&spans), trace, "the caller's trace");
    let served = named(&spans, "tools/call up__calculate");
    assert_eq!(
        served.parent_id.as_deref(),
        Some(caller),
        "the caller's span"
    );
    assert_eq!(served.attr("mcp.method.name"), "tools/call");
    let shape = tree(&spans);
    assert!(
        shape.contains(
            "\
tools/call up__calculate
  execute_tool up__calculate
"
        ) && shape.contains(
            "\
      tools/call calculate
        tools/call calculate
          execute_tool calculate
"
        ),
        "{shape}"
    );
}

/// A `tools/call` to `host mcp` over stdio (after `initialize`), with
/// `_meta.traceparent` = `traceparent`; returns once it is answered.
fn call_over_stdio(cmd: &mut Command, tool: &str, traceparent: &str) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "trace-test", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": tool, "arguments": {"expression": "6*7"},
        "_meta": {"traceparent": traceparent}}}),
    );
    let answer = lines
        .by_ref()
        .map_while(Result::ok)
        .map(|l| serde_json::from_str::<Value>(&l).unwrap_or_default())
        .find(|v| v["id"] == 2)
        .expect("an answer to tools/call");
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    drop(stdin);
    let _ = child.wait();
}

fn an_unsampled_callers_mcp_call_is_traced_in_a_trace_of_its_own(phoenix: &Phoenix) {
    // By default (`caller-trace = "link"`), the sampled flag `-00` neither
    // hides the call nor lends it the caller's trace id.
    let caller_trace = "5bf92f3577b34da6a3ce929d0e0e4736";
    let mut cmd = host_cmd();
    traced(&mut cmd, phoenix, "untrusted");
    cmd.arg("--plugins").arg(plugins_dir()).arg("mcp");
    call_over_stdio(
        &mut cmd,
        "calculate",
        &format!("00-{caller_trace}-00f067aa0ba902b7-00"),
    );
    let spans = phoenix.spans("untrusted", 2);
    let trace = only_trace(&spans);
    assert_ne!(trace, caller_trace, "a trace of the host's own");
    let served = named(&spans, "tools/call calculate");
    assert_eq!(
        served.parent_id, None,
        "the caller's span is not its parent"
    );
    assert_eq!(
        tree(&spans),
        "tools/call calculate\n  execute_tool calculate\n"
    );
}

/// A collector nobody runs (a wrong port): the host says once, in words,
/// that traces are not exported and where it tried, without `-v`, and
/// without the credentials the endpoint or the headers hold; the call
/// itself is not held up.
#[test]
fn an_unreachable_collector_is_said_once() {
    let o = host_cmd()
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://user:s3cret@127.0.0.1:9",
        )
        .env("OTEL_EXPORTER_OTLP_HEADERS", "api-key=k3y")
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "calculate", r#"{"expression":"2*(3+4)"}"#])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout), "14\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("traces are not exported").count(),
        1,
        "said once: {err}"
    );
    assert!(err.contains("http://127.0.0.1:9/v1/traces"), "{err}");
    assert!(!err.contains("s3cret") && !err.contains("k3y"), "{err}");
    assert!(!err.contains("(os error"), "{err}");
}
