//! Large catalogs: an MCP server offering 300 look-alike tools (the MCP
//! Python SDK's server, `toolhost_test_support::catalog`) beside the example
//! plugins. `host run` offers `search_tools` instead of every definition and
//! finds and calls the tool it needs, under the policy; the json prompt
//! protocol does the same; `host mcp --tool-search on` serves the search to
//! the MCP Python SDK's client.

use std::path::Path;
use std::process::Output;

use serde_json::Value;
use toolhost_test_support::catalog::{catalog_server, look_alike_tools};

use crate::mcp::{client, host_args};
use crate::support::*;

/// A config with the catalog server (as `cat`) and a policy that denies
/// `cat__send_sms`.
fn scene() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let python = outside_tool("py/bin/python");
    let command = catalog_server(&python, dir.path(), &look_alike_tools(300));
    let config = format!(
        "[[mcp-servers]]\nname = \"cat\"\ncommand = {}\ntimeout-ms = 20000\n",
        serde_json::to_string(&command).unwrap()
    );
    std::fs::write(dir.path().join("host.toml"), config).unwrap();
    std::fs::write(
        dir.path().join("policy.toml"),
        "[[rules]]\ntool = \"cat__send_sms\"\ndecision = \"deny\"\n",
    )
    .unwrap();
    dir
}

/// `host` with the scene's config and policy, the example plugins and a
/// lock file of its own.
fn host_in(dir: &Path, args: &[&str]) -> Output {
    let plugins = plugins_dir().display().to_string();
    let lock = dir.join("toolhost.lock").display().to_string();
    let mut all = vec!["--plugins", plugins.as_str(), "--lock", lock.as_str()];
    all.extend_from_slice(args);
    crate::mcp_gateway::host_in(dir, &all)
}

fn run_against(dir: &Path, server: &ModelServer, extra: &[&str]) -> Output {
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let mut args = vec![
        "--provider",
        "openai",
        "--base-url",
        &base,
        "--api-key-env",
        "TEST_MODEL_KEY",
        "--model",
        "test-model",
    ];
    args.extend_from_slice(extra);
    args.extend(["run", "How much is 250 US dollars in euros?"]);
    host_in(dir, &args)
}

/// The names of the tools a request body (OpenAI's wire) offers.
pub(crate) fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The text of the request's last tool message.
pub(crate) fn last_tool_result(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_run_over_a_large_catalog_searches_finds_and_calls_the_tool_under_the_policy() {
    let dir = scene();
    let server = ModelServer::start(|n, _| match n {
        0 => openai_tool_call(
            "c1",
            "search_tools",
            r#"{"query": "send a text message sms"}"#,
        ),
        1 => openai_tool_call(
            "c2",
            "search_tools",
            r#"{"query": "convert currency dollars euros"}"#,
        ),
        2 => openai_tool_call(
            "c3",
            "cat__convert_currency",
            r#"{"amount": "250", "from": "USD", "to": "EUR"}"#,
        ),
        _ => openai_text("About 230 euros."),
    });
    let o = run_against(dir.path(), &server, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 4, "{bodies:#?}");

    // Search on by default (auto): the first request holds `search_tools`
    // alone, at most a tenth of the definitions' bytes without search.
    assert_eq!(tool_names(&bodies[0]), ["search_tools"]);
    let on = serde_json::to_vec(&bodies[0]["tools"]).unwrap().len();
    let off_server = ModelServer::start(|_, _| openai_text("x"));
    let o = run_against(dir.path(), &off_server, &["--tool-search", "off"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let off_body = &off_server.bodies()[0];
    let all = tool_names(off_body);
    assert!(
        all.len() > 300 && !all.iter().any(|n| n == "cat__send_sms"),
        "{}",
        all.len()
    );
    let off = serde_json::to_vec(&off_body["tools"]).unwrap().len();
    assert!(
        on * 10 <= off,
        "{on} bytes of definitions with search, {off} without"
    );
    eprintln!("definitions in the first request: {on} bytes with search, {off} without");

    // The denied tool is never found; the needed one is, and runs on the
    // MCP server under its own name.
    let sms = last_tool_result(&bodies[1]);
    assert!(!sms.contains("send_sms"), "{sms}");
    let currency = last_tool_result(&bodies[2]);
    assert!(currency.contains("\"cat__convert_currency\""), "{currency}");
    assert!(tool_names(&bodies[3]).contains(&"cat__convert_currency".to_owned()));
    let called = last_tool_result(&bodies[3]);
    assert!(called.contains("called convert_currency with"), "{called}");
    assert!(called.contains("\"amount\": \"250\""), "{called}");
}

#[test]
fn the_json_prompt_protocol_offers_the_search_too() {
    let dir = scene();
    let server = ModelServer::start(|_, _| openai_text("About 230 euros."));
    let o = run_against(dir.path(), &server, &["--protocol", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let body = &server.bodies()[0];
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("search_tools"), "{system}");
    assert!(!system.contains("billing_get_invoice"), "{system}");
    assert!(
        system.len() < 16_000,
        "{} bytes of system prompt",
        system.len()
    );
}

/// The scene's `host` arguments for an MCP server with tool search on,
/// then `command` (`mcp`, or `serve …`).
fn search_server_args(dir: &Path, command: &[&str]) -> Vec<String> {
    let config = dir.join("host.toml").display().to_string();
    let policy = dir.join("policy.toml").display().to_string();
    let plugins = plugins_dir().display().to_string();
    let mut args = vec![
        "--plugins",
        plugins.as_str(),
        "--config",
        config.as_str(),
        "--policy",
        policy.as_str(),
        "--tool-search",
        "on",
    ];
    args.extend_from_slice(command);
    host_args(dir, &args)
}

/// The MCP Python SDK's client lists, searches, calls a found tool by name
/// and the denied one (`mcp_client.py search`); `options` say how it
/// reaches the server, `host` starts it over stdio (empty over HTTP).
fn assert_searches_under_the_policy(options: &[&str], host: &[String]) {
    let mut options = options.to_vec();
    options.extend([
        "--call",
        "cat__send_sms",
        r#"{"phone_number": "1", "message": "x"}"#,
    ]);
    let r = client("search", &options, host);
    let listed: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed, ["search_tools"], "{r}");

    let found = r["currency"]["structured"]["tools"].as_array().unwrap();
    assert_eq!(found[0]["name"], "cat__convert_currency", "{r}");
    assert!(
        found[0]["inputSchema"]["properties"]["amount"].is_object(),
        "{r}"
    );
    assert_eq!(r["called"]["is_error"], false, "{r}");
    assert!(
        r["called"]["text"]
            .as_str()
            .unwrap()
            .starts_with("called convert_currency with"),
        "{r}"
    );

    let sms = r["sms"]["text"].as_str().unwrap();
    assert!(
        !sms.contains("send_sms"),
        "the denied tool is never found: {sms}"
    );
    assert_eq!(r["calls"]["cat__send_sms"]["is_error"], true, "{r}");
}

#[test]
fn an_mcp_client_of_host_mcp_finds_and_calls_a_tool_it_was_not_listed() {
    let dir = scene();
    assert_searches_under_the_policy(&[], &search_server_args(dir.path(), &["mcp"]));
}

#[test]
fn an_mcp_client_of_host_serve_finds_and_calls_a_tool_it_was_not_listed() {
    let dir = scene();
    let served = crate::mcp::serve(&search_server_args(
        dir.path(),
        &["serve", "--listen", "127.0.0.1:0"],
    ));
    let url = format!("{}/mcp", served.base);
    assert_searches_under_the_policy(&["--url", &url], &[]);
}
