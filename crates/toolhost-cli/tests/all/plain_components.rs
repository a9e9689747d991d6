//! Plain components (their own WIT world, no toolhost SDK) as tools
//! through every way in: `host call`, `host mcp` (the MCP Python SDK) and
//! the agent loop (`host run` with a scripted model), in Rust
//! (`plugins/fixtures/plain-units`, wit-bindgen) and JavaScript
//! (`plugins/js/fixtures/plain-greet`, componentize-js), each built from
//! source by the test command; a policy rule names their tools as any.

use std::path::Path;

use serde_json::{Value, json};

use crate::mcp::client;
use crate::support::*;

/// A directory with both plain fixtures and their WIT.
fn plain_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let js = root().join("target/fixtures-js");
    for (from, name) in [(fixtures_dir(), "plain-units"), (js, "plain-greet")] {
        let wasm = from.join(format!("{name}.wasm"));
        assert!(
            wasm.is_file(),
            "{} is missing: run the tests with `cargo xtask test`",
            wasm.display()
        );
        copy_plugin(&from, name, dir.path());
        assert!(
            dir.path().join(format!("{name}.wit")).is_file(),
            "{name}.wit beside it"
        );
    }
    dir
}

fn host_in(dir: &Path, args: &[&str]) -> std::process::Output {
    host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
}

fn path_text(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn host_call_runs_a_rust_and_a_javascript_plain_components_functions() {
    let dir = plain_dir();
    let listed = host_in(dir.path(), &["tools", "--json"]);
    let tools: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in ["add", "units_parse", "greet", "reverse"] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    for (tool, args, expected) in [
        (
            "units_parse",
            r#"{"text": "300K"}"#,
            json!({"value": 300.0, "scale": "kelvin"}),
        ),
        (
            "greet",
            r#"{"name": "Ada", "times": 2}"#,
            json!("Hello, Ada! Hello, Ada!"),
        ),
        (
            "reverse",
            r#"{"words": ["a", "b", "c"]}"#,
            json!(["c", "b", "a"]),
        ),
    ] {
        let out = host_in(dir.path(), &["call", tool, args, "--json"]);
        assert!(
            out.status.success(),
            "{tool}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result: Value = serde_json::from_slice(&out.stdout).unwrap();
        let output = result["output"].as_str().unwrap();
        let got = serde_json::from_str::<Value>(output).unwrap_or_else(|_| json!(output));
        assert_eq!(got, expected, "{tool}: {result}");
    }
    // A range the WIT type sets: refused before the component runs.
    let out = host_in(
        dir.path(),
        &["call", "greet", r#"{"name": "x", "times": 256}"#],
    );
    assert!(!out.status.success());
}

#[test]
fn host_mcp_serves_plain_components_tools_to_the_mcp_sdk_under_the_policy() {
    let dir = plain_dir();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "default = \"allow\"\n[[rules]]\ntool = \"reverse\"\ndecision = \"deny\"\nreason = \"no reversing\"\n",
    )
    .unwrap();
    let host = crate::mcp::host_args(
        dir.path(),
        &[
            "--plugins",
            &path_text(dir.path()),
            "--policy",
            &path_text(&policy),
            "mcp",
        ],
    );
    let report = client(
        "content",
        &[
            "--mode",
            "2026-07-28",
            "--call",
            "units_convert",
            r#"{"reading": {"value": 0.0, "scale": "celsius"}, "to": "fahrenheit"}"#,
            "--call",
            "greet",
            r#"{"name": "MCP", "times": 1}"#,
        ],
        &host,
    );
    let tools = report["tools"].as_array().unwrap();
    assert!(tools.contains(&json!("units_convert")), "{report:#}");
    assert!(
        !tools.contains(&json!("reverse")),
        "denied, so not listed: {report:#}"
    );
    let converted = &report["calls"]["units_convert"];
    assert_eq!(
        converted["structuredContent"],
        json!({"value": 32.0, "scale": "fahrenheit"}),
        "{converted:#}"
    );
    assert!(
        report["calls"]["greet"].to_string().contains("Hello, MCP!"),
        "{report:#}"
    );
}

#[test]
fn the_agent_loop_calls_a_plain_components_function_and_reads_its_answer() {
    let server = ModelServer::start(|n, _| {
        if n == 0 {
            openai_tool_call("call_1", "units_parse", r#"{"text": "21.5C"}"#)
        } else {
            openai_text("It is 21.5 degrees Celsius.")
        }
    });
    let dir = plain_dir();
    let out = host(&root().join("target/test-cache"))
        .env("TEST_MODEL_KEY", "test-key")
        .arg("--plugins")
        .arg(dir.path())
        .args([
            "--provider",
            "openai",
            "--base-url",
            &format!("http://127.0.0.1:{}/v1", server.port),
            "--api-key-env",
            "TEST_MODEL_KEY",
            "--model",
            "test-model",
            "run",
            "--json",
            "How warm is 21.5C?",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "completed", "{result:#}");
    assert_eq!(result["history"][0]["tool"], "units_parse", "{result:#}");
    let output: Value =
        serde_json::from_str(result["history"][0]["output"].as_str().unwrap()).unwrap();
    assert_eq!(output, json!({"value": 21.5, "scale": "celsius"}));
    // The model saw the tool with its WIT docs and derived schema.
    let first = &server.bodies()[0];
    let offered = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "units_parse")
        .expect("offered to the model");
    assert!(
        offered["function"]["description"]
            .as_str()
            .unwrap()
            .contains("anything else is an error"),
        "{offered}"
    );
}
