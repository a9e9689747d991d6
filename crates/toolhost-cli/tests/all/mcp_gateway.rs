//! External MCP servers behind toolhost: `mcp-server-time` (PyPI) and
//! `server-everything` (npm), installed by `cargo xtask test`, configured
//! with `[[mcp-servers]]` and `--mcp`, their calls through the policy, the
//! hooks and the agent loop, and re-exported by `host mcp` to the MCP
//! Python SDK (the gateway).

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use crate::mcp::{client, host_args};
use crate::support::*;

fn time_server() -> String {
    outside_tool("py/bin/mcp-server-time").display().to_string()
}

fn everything() -> String {
    outside_tool("node/node_modules/.bin/mcp-server-everything")
        .display()
        .to_string()
}

/// A config with both servers, a hook that rewrites `every__echo`'s
/// arguments and one that blocks `every__get-env`; a policy that denies
/// `time__convert_time` by server and tool.
fn scene() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[[mcp-servers]]
name = "time"
command = ["{time}"]

[[mcp-servers]]
name = "every"
command = ["{every}"]
timeout-ms = 20000

[[hooks]]
shell = "printf '%s' '{{\"decision\":\"rewrite\",\"args\":{{\"message\":\"rewritten by a hook\"}}}}'"
tools = ["every__echo"]
stages = ["before"]

[[hooks]]
shell = "echo 'no environment for you' >&2; exit 2"
tools = ["every__get-env"]
stages = ["before"]
"#,
        time = time_server(),
        every = everything()
    );
    std::fs::write(dir.path().join("host.toml"), config).unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "[[rules]]\nserver = \"time\"\ntool = \"time__convert_time\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    dir
}

pub(crate) fn host_in(dir: &Path, args: &[&str]) -> Output {
    host(&root().join("target/test-cache"))
        .env("TEST_MODEL_KEY", "test-key")
        .arg("--config")
        .arg(dir.join("host.toml"))
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn an_mcp_servers_calls_go_through_the_hooks_and_are_listed_with_their_state() {
    let dir = scene();
    let o = host_in(dir.path(), &["call", "every__echo", r#"{"message":"hi"}"#]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("rewritten by a hook"), "{stdout}");

    let o = host_in(dir.path(), &["call", "every__get-env", "{}"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(8), "blocked: {stderr}");
    assert!(stderr.contains("no environment for you"), "{stderr}");

    let args = r#"{"source_timezone":"UTC","time":"12:00","target_timezone":"UTC"}"#;
    let o = host_in(dir.path(), &["call", "time__convert_time", args]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("permission denied"), "{stderr}");

    let o = host_in(dir.path(), &["plugins"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("time  (mcp-stdio: "), "{stdout}");
    assert!(stdout.contains("state:     ready"), "{stdout}");
    assert!(stdout.contains("server:    mcp-time "), "{stdout}");
    let o = host_in(dir.path(), &["tools", "--json"]);
    let tools: Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"time__get_current_time") && names.contains(&"every__echo"),
        "{names:?}"
    );
}

#[test]
fn the_agent_loop_offers_an_mcp_servers_tools_less_the_denied_ones_and_calls_them() {
    let dir = scene();
    let server = ModelServer::start(|n, _| {
        if n == 0 {
            openai_tool_call("call_1", "time__get_current_time", r#"{"timezone":"UTC"}"#)
        } else {
            openai_text("It is late.")
        }
    });
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let o = host_in(
        dir.path(),
        &[
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--api-key-env",
            "TEST_MODEL_KEY",
            "--model",
            "test-model",
            "run",
            "What time is it?",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2);
    let offered: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"time__get_current_time"), "{offered:?}");
    assert!(
        !offered.contains(&"time__convert_time"),
        "denied by `server = \"time\"`: {offered:?}"
    );
    let answer = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert!(
        answer.contains("\"timezone\": \"UTC\""),
        "the server's answer reached the model: {answer}"
    );
}

#[test]
fn host_mcp_is_a_gateway_that_serves_an_mcp_servers_tools_through_the_policy() {
    let dir = scene();
    let tmp = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml").display().to_string();
    let policy = dir.path().join("policy.toml").display().to_string();
    let host = host_args(
        tmp.path(),
        &["--config", &config, "--policy", &policy, "mcp"],
    );
    let report = client(
        "gateway",
        &[
            "--call",
            "time__get_current_time",
            r#"{"timezone":"UTC"}"#,
            "--call",
            "every__echo",
            r#"{"message":"hi"}"#,
            "--call",
            "time__convert_time",
            r#"{"source_timezone":"UTC","time":"12:00","target_timezone":"UTC"}"#,
        ],
        &host,
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"time__get_current_time") && tools.contains(&"every__echo"),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"time__convert_time"),
        "the denied tool is not listed: {tools:?}"
    );
    let calls = &report["calls"];
    assert_eq!(
        calls["time__get_current_time"]["is_error"],
        json!(false),
        "{calls}"
    );
    assert!(
        calls["time__get_current_time"]["text"]
            .as_str()
            .unwrap()
            .contains("UTC")
    );
    assert!(
        calls["every__echo"]["text"]
            .as_str()
            .unwrap()
            .contains("rewritten by a hook"),
        "{calls}"
    );
    assert_eq!(
        calls["time__convert_time"]["is_error"],
        json!(true),
        "{calls}"
    );
}

/// A config with `server-everything` and the content server
/// (`content_mcp_server`), and a policy that allows everything.
fn content_scene() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let content = toolhost_test_support::content_mcp_server();
    let config = format!(
        r#"
[[mcp-servers]]
name = "every"
command = ["{every}"]
timeout-ms = 20000

[[mcp-servers]]
name = "content"
command = {content:?}
timeout-ms = 20000
"#,
        every = everything(),
    );
    std::fs::write(dir.path().join("host.toml"), config).unwrap();
    std::fs::write(dir.path().join("policy.toml"), "").unwrap();
    dir
}

/// `result` without the `_meta` keys of one hop: toolhost's own
/// (`dev.toolhost/…`, which the gateway adds beside the server's) and MCP's
/// (`io.modelcontextprotocol/…`, which a server writes for its own client,
/// the gateway for its).
fn without_toolhosts_meta(mut result: Value) -> Value {
    if let Some(meta) = result.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.retain(|k, _| {
            !k.starts_with("dev.toolhost/") && !k.starts_with("io.modelcontextprotocol/")
        });
        if meta.is_empty() {
            result.as_object_mut().unwrap().remove("_meta");
        }
    }
    result
}

/// Calls each `(tool, arguments)` of the server `name` through `host mcp`
/// and directly (the same MCP Python SDK client), and checks that the
/// results are the same: every block, annotation, `_meta` and structured
/// result as the server sent it.
fn same_through_the_gateway(
    name: &str,
    direct: &str,
    calls: &[(&str, &str)],
    normalize: fn(Value) -> Value,
) -> Value {
    let dir = content_scene();
    let tmp = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml").display().to_string();
    let policy = dir.path().join("policy.toml").display().to_string();
    let host = host_args(
        tmp.path(),
        &["--config", &config, "--policy", &policy, "mcp"],
    );
    let prefix = format!("{name}__");
    let mut options = vec![
        "--direct".to_owned(),
        direct.to_owned(),
        "--prefix".to_owned(),
        prefix.clone(),
    ];
    for (tool, args) in calls {
        options.extend([
            "--call".to_owned(),
            format!("{prefix}{tool}"),
            (*args).to_owned(),
        ]);
    }
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let report = client("content", &options, &host);
    for (tool, _) in calls {
        let through = &report["calls"][format!("{prefix}{tool}")];
        let direct = without_toolhosts_meta(report["direct"][format!("{prefix}{tool}")].clone());
        assert!(direct.is_object(), "{tool}: {report:#}");
        assert_eq!(
            normalize(without_toolhosts_meta(through.clone())),
            normalize(direct),
            "{tool}: through the gateway (left) and directly (right)"
        );
    }
    report
}

/// `result` with the text or bytes of its embedded resources left out:
/// `server-everything` writes the time it made one into it.
fn without_resource_times(mut result: Value) -> Value {
    for block in result["content"].as_array_mut().into_iter().flatten() {
        if let Some(resource) = block.get_mut("resource").and_then(Value::as_object_mut) {
            for key in ["text", "blob"] {
                if resource.contains_key(key) {
                    resource.insert(key.to_owned(), Value::from("(made at some time)"));
                }
            }
        }
    }
    result
}

#[test]
fn server_everythings_images_resources_and_annotations_pass_through_the_gateway_as_sent() {
    let report = same_through_the_gateway(
        "every",
        &everything(),
        &[
            ("get-tiny-image", "{}"),
            (
                "get-annotated-message",
                r#"{"messageType":"success","includeImage":true}"#,
            ),
            ("get-resource-links", r#"{"count":4}"#),
            (
                "get-resource-reference",
                r#"{"resourceType":"Blob","resourceId":3}"#,
            ),
            ("get-structured-content", r#"{"location":"Chicago"}"#),
        ],
        without_resource_times,
    );
    let reference = &report["calls"]["every__get-resource-reference"]["content"][1]["resource"];
    assert_eq!(
        reference["uri"], "demo://resource/dynamic/blob/3",
        "{report:#}"
    );
    assert!(reference["blob"].as_str().is_some_and(|b| !b.is_empty()));
    let image = &report["calls"]["every__get-tiny-image"]["content"][1];
    assert_eq!(image["type"], "image", "{report:#}");
    assert_eq!(image["mimeType"], "image/png");
    let links = report["calls"]["every__get-resource-links"]["content"]
        .as_array()
        .unwrap();
    assert_eq!(links.len(), 5, "a text and four links: {links:#?}");
    assert!(links[1..].iter().all(|l| l["type"] == "resource_link"));
}

#[test]
fn every_kind_of_block_with_its_meta_passes_through_the_gateway_as_sent() {
    let direct = toolhost_test_support::content_mcp_server()
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let report = same_through_the_gateway("content", &direct, &[("every_block", "{}")], |v| v);
    let result = &report["calls"]["content__every_block"];
    let kinds: Vec<&str> = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "text",
            "image",
            "audio",
            "resource_link",
            "resource",
            "resource"
        ]
    );
    assert_eq!(result["_meta"]["example.com/request"], "r-17", "{result:#}");
    assert_eq!(result["_meta"]["dev.toolhost/plugin"]["name"], "content");
    assert_eq!(
        result["structuredContent"],
        json!({"blocks": 6, "ok": true})
    );
}
