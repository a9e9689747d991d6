//! `host mcp` and `host serve` driven by software nobody here wrote: the
//! official MCP Python SDK client (`tests/mcp_client.py`, one scenario per
//! run) over stdio and Streamable HTTP, for protocol revisions 2025-11-25
//! and 2026-07-28, and the MCP Inspector's CLI. `cargo xtask test` installs
//! both into `target/tools/`; without them these tests fail, saying so.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::support::*;

pub(crate) const MODES: [&str; 2] = ["legacy", "2026-07-28"];

/// An outside tool: from the variable `cargo xtask test` sets, else its
/// place under `target/tools/`.
fn outside(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var).map_or_else(|| root().join(default), PathBuf::from);
    assert!(
        path.is_file(),
        "{} is missing: run the tests with `cargo xtask test`, which installs the MCP \
         Python SDK and the MCP Inspector into target/tools/ (${var})",
        path.display()
    );
    path
}

fn python() -> PathBuf {
    outside("TOOLHOST_TEST_PYTHON", "target/tools/py/bin/python")
}

fn inspector() -> PathBuf {
    outside(
        "TOOLHOST_TEST_INSPECTOR",
        "target/tools/node/node_modules/.bin/mcp-inspector",
    )
}

/// `host` with the test cache and a lock file of its own, as arguments (the
/// SDK starts stdio servers with a minimal environment of its own).
pub(crate) fn host_args(tmp: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec![
        env!("CARGO_BIN_EXE_host").to_owned(),
        "--cache-dir".to_owned(),
        root().join("target/test-cache").display().to_string(),
        "--lock".to_owned(),
        tmp.join("toolhost.lock").display().to_string(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

/// Runs one scenario of `mcp_client.py` and returns its report.
pub(crate) fn client(scenario: &str, options: &[&str], host: &[String]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let out = Command::new(python())
        .arg(script)
        .arg(scenario)
        .args(options)
        .arg("--")
        .args(host)
        .output()
        .expect("the MCP Python client runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{scenario} {options:?} failed:\n{stderr}\n{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// A plugin directory with the example plugins and the `hostile` fixture.
fn plugins_with_hostile() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["calc", "fs", "http", "text"] {
        copy_plugin(&plugins_dir(), name, tmp.path());
    }
    copy_plugin(&fixtures_dir(), "hostile", tmp.path());
    tmp
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const DENY_HTTP: &str = "default = \"allow\"\n[[rules]]\ntool = \"http_get\"\ndecision = \"deny\"\nreason = \"no network here\"\n";

/// What every transport and revision must show: the tools one to one, a
/// denied tool not listed, results, structured content, details in `_meta`,
/// an unknown tool a JSON-RPC error (as every revision says), and every
/// other failure an `isError` result with the agent loop's message (invalid
/// arguments too: 2025-11-25 and 2026-07-28 call them tool execution errors).
fn assert_basics(report: &Value, version: &str) {
    assert_eq!(report["version"], version, "{report}");
    let tools = &report["tools"];
    assert_eq!(tools["calculate"]["read_only"], true, "{tools}");
    assert_eq!(tools["calculate"]["has_output_schema"], true);
    assert_eq!(tools["read_file"]["schema_type"], "object");
    assert!(
        tools.get("http_get").is_none(),
        "a tool the policy denies is not listed: {tools}"
    );
    let calls = &report["calls"];
    assert_eq!(calls["ok"]["is_error"], false, "{calls}");
    assert_eq!(calls["ok"]["text"], "14");
    assert_eq!(calls["ok"]["structured"]["value"], 14.0);
    assert_eq!(
        calls["ok"]["meta"]["dev.toolhost/details"]["expression"], "2*(3+4)",
        "details go in _meta, not the text"
    );
    for (call, kind, says) in [
        (
            "invalid",
            "invalid-arguments",
            "\"expression\" is a required property",
        ),
        ("denied", "permission-denied", "no network here"),
        ("panic", "sandbox-fault", "plugin panicked: boom"),
    ] {
        let r = &calls[call];
        assert_eq!(r["is_error"], true, "{call}: {r}");
        assert_eq!(r["meta"]["dev.toolhost/error-kind"], kind, "{call}: {r}");
        assert!(r["text"].as_str().unwrap().contains(says), "{call}: {r}");
    }
    let unknown = calls["unknown"]["exception"].as_str().unwrap_or_default();
    assert!(
        unknown.contains("did you mean `calculate`"),
        "an unknown tool is a protocol error: {calls}"
    );
}

#[test]
fn mcp_over_stdio_serves_the_plugins_to_the_python_sdk_in_both_revisions() {
    let dir = plugins_with_hostile();
    let policy = write(dir.path(), "policy.toml", DENY_HTTP);
    let plugins = dir.path().display().to_string();
    let host = host_args(
        dir.path(),
        &["--plugins", &plugins, "--policy", &policy, "mcp"],
    );
    for (mode, version) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let report = client("basics", &["--mode", mode], &host);
        assert_basics(&report, version);
    }
}

#[test]
fn the_chart_plugins_image_reaches_the_python_sdk_as_an_image_block_in_both_revisions() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "chart", dir.path());
    let plugins = dir.path().display().to_string();
    let host = host_args(dir.path(), &["--plugins", &plugins, "mcp"]);
    for mode in MODES {
        let report = client(
            "content",
            &[
                "--mode",
                mode,
                "--call",
                "bar_chart",
                r#"{"values": [3, 1, 4], "width": 64, "height": 48}"#,
            ],
            &host,
        );
        let result = &report["calls"]["bar_chart"];
        let content = result["content"].as_array().unwrap();
        assert_eq!(content.len(), 2, "{mode}: {result:#}");
        assert_eq!(
            content[0],
            serde_json::json!({"type": "text", "text": "A bar chart of 3 values, from 1 to 4: a 64×48 PNG image."})
        );
        assert_eq!(content[1]["type"], "image", "{mode}: {result:#}");
        assert_eq!(content[1]["mimeType"], "image/png");
        let png =
            toolhost_runtime::content::media::decode(content[1]["data"].as_str().unwrap(), 1 << 20)
                .unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{mode}: a PNG");
        assert_eq!(result["_meta"]["dev.toolhost/plugin"]["name"], "chart");
    }
}

#[test]
fn an_ask_reaches_the_clients_user_in_both_revisions_a_remembered_yes_is_saved_and_a_client_that_cannot_answer_is_denied()
 {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let policy = write(
        dir.path(),
        "policy.toml",
        "[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\nreason = \"sums need a nod\"\n",
    );
    let plugins = dir.path().display().to_string();
    let host = host_args(
        dir.path(),
        &["--plugins", &plugins, "--policy", &policy, "mcp"],
    );
    let ask =
        |answer: &str, mode: &str| client("ask", &["--mode", mode, "--answer", answer], &host);

    // 2025-11-25: an elicitation request during the call; 2026-07-28: an
    // `input_required` result, and the SDK retries with the answer.
    for mode in MODES {
        let yes = ask("accept", mode);
        assert_eq!(yes["result"]["text"], "2", "{mode}: {yes}");
        let question = yes["asked"][0].as_str().unwrap();
        assert!(
            question.contains("calculate") && question.contains("sums need a nod"),
            "the question names the tool and the rule's reason: {question}"
        );

        let no = ask("decline", mode);
        assert_eq!(no["asked"].as_array().unwrap().len(), 1, "{mode}: {no}");
        assert_eq!(no["result"]["is_error"], true);
        assert!(no["result"]["text"].as_str().unwrap().contains("declined"));

        let cannot = ask("none", mode);
        assert!(cannot["asked"].as_array().unwrap().is_empty());
        assert!(
            cannot["result"]["text"]
                .as_str()
                .unwrap()
                .contains("cannot be asked"),
            "{mode}: {cannot}"
        );
    }

    // "Remember" in the form saves an approval of these arguments: the
    // next client's identical call is not asked about (in both revisions).
    let saved_file = dir.path().join("toolhost.approvals.json");
    for mode in MODES {
        let _ = std::fs::remove_file(&saved_file);
        let saved = ask("remember", mode);
        assert_eq!(saved["result"]["text"], "2", "{mode}: {saved}");
        let again = ask("decline", mode);
        assert!(
            again["asked"].as_array().unwrap().is_empty(),
            "{mode}: {again}"
        );
        assert_eq!(again["result"]["text"], "2", "{mode}: {again}");
        let listed = std::fs::read_to_string(&saved_file).unwrap();
        let prompt = if mode == "legacy" {
            "mcp-elicitation"
        } else {
            "mcp-input-required"
        };
        assert!(listed.contains(prompt), "{mode}: {listed}");
    }
}

#[test]
fn a_server_with_asks_deny_never_lets_the_caller_approve_its_own_call() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let policy = write(
        dir.path(),
        "policy.toml",
        "[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n",
    );
    let plugins = dir.path().display().to_string();
    // What a non-loopback `serve` does by default, asked for on loopback.
    let served = serve(&host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--policy",
            &policy,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--asks",
            "deny",
        ],
    ));
    let url = format!("{}/mcp", served.base);
    for mode in MODES {
        // The client would say yes, but is never asked.
        let report = client(
            "ask",
            &["--mode", mode, "--url", &url, "--answer", "accept"],
            &[],
        );
        assert!(
            report["asked"].as_array().unwrap().is_empty(),
            "{mode}: {report}"
        );
        assert_eq!(report["result"]["is_error"], true, "{mode}: {report}");
        let text = report["result"]["text"].as_str().unwrap();
        assert!(
            text.contains("does not let its callers approve"),
            "{mode}: {text}"
        );
    }
}

#[test]
fn a_cancelled_call_stops_its_sandbox_in_both_revisions() {
    let dir = plugins_with_hostile();
    // One sandbox at a time for `hostile`, and a spin that would run for a
    // minute: the call after the cancelled one runs only if the cancelled
    // call's sandbox was stopped.
    let config = write(
        dir.path(),
        "config.toml",
        "[plugins.hostile]\nlimits = { max-instances = 1, timeout-ms = 60000 }\n",
    );
    let plugins = dir.path().display().to_string();
    let host = host_args(
        dir.path(),
        &["--plugins", &plugins, "--config", &config, "mcp"],
    );
    for mode in MODES {
        let report = client("cancel", &["--mode", mode], &host);
        assert_eq!(report["cancelled"], true, "{report}");
        assert_eq!(report["next"]["text"], "next", "{mode}: {report}");
    }
}

#[test]
fn a_hot_reload_tells_clients_the_tool_list_changed_in_both_revisions() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let plugins = dir.path().join("plugins");
        copy_plugin(&plugins_dir(), "calc", &plugins);
        let host = host_args(
            dir.path(),
            &["--plugins", &plugins.display().to_string(), "mcp"],
        );
        let report = client(
            "reload",
            &[
                "--mode",
                mode,
                "--copy",
                &plugins_dir().join("text.wasm").display().to_string(),
                &plugins.join("text.wasm").display().to_string(),
            ],
            &host,
        );
        assert_eq!(report["changed"], true, "{mode}: {report}");
        assert_eq!(report["before"], serde_json::json!(["calculate"]));
        assert!(
            report["after"]
                .as_array()
                .unwrap()
                .contains(&Value::from("word_count")),
            "{report}"
        );
    }
}

#[test]
fn progress_from_a_plugin_reaches_the_client_as_progress_notifications() {
    let server = TestServer::start("hello from the test server");
    let url = server.url("/page");
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "http", dir.path());
    let plugins = dir.path().display().to_string();
    let grant = format!("http=127.0.0.1:{}", server.port);
    let host = host_args(
        dir.path(),
        &["--plugins", &plugins, "--allow-host", &grant, "mcp"],
    );
    for mode in MODES {
        let report = client("progress", &["--mode", mode, "--url-arg", &url], &host);
        assert_eq!(report["result"]["is_error"], false, "{mode}: {report}");
        let progress = report["progress"].as_array().unwrap();
        assert!(
            progress
                .iter()
                .any(|p| p["message"].as_str().is_some_and(|m| m.contains(&url))),
            "{mode}: {report}"
        );
    }
}

/// `host serve` on a free port; returns the process and its base URL.
pub(crate) struct Served {
    child: Child,
    pub(crate) base: String,
    /// What it printed to stderr before saying where it listens.
    pub(crate) said: Vec<String>,
    /// What it printed to stderr after that (its log).
    pub(crate) log: Arc<Mutex<Vec<String>>>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `host serve` of the plugins in `dir` under `policy`, behind the token file `tokens`.
fn serve_with_tokens(dir: &Path, policy: &str, tokens: &str) -> Served {
    serve_with_tokens_and(dir, policy, tokens, &[])
}

/// [`serve_with_tokens`] with more flags of `serve` (`--stateless`).
fn serve_with_tokens_and(dir: &Path, policy: &str, tokens: &str, flags: &[&str]) -> Served {
    let plugins = dir.display().to_string();
    let mut args = vec!["--plugins", &plugins, "--policy", policy, "serve"];
    args.extend_from_slice(flags);
    args.extend(["--listen", "127.0.0.1:0", "--token-file", tokens]);
    serve(&host_args(dir, &args))
}

/// `host serve` of the plugins in `dir/plugins` (made if missing) with
/// `config` and `policy` written beside them, plus `flags` of `serve`.
pub(crate) fn serve_configured(dir: &Path, config: &str, policy: &str, flags: &[&str]) -> Served {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let (config_file, policy_file) = (dir.join("config.toml"), dir.join("policy.toml"));
    std::fs::write(&config_file, config).unwrap();
    std::fs::write(&policy_file, policy).unwrap();
    let (plugins, config_file, policy_file) = (
        plugins.display().to_string(),
        config_file.display().to_string(),
        policy_file.display().to_string(),
    );
    let mut args = vec![
        "--plugins",
        &plugins,
        "--config",
        &config_file,
        "--policy",
        &policy_file,
        "serve",
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(flags);
    serve(&host_args(dir, &args))
}

pub(crate) fn serve(args: &[String]) -> Served {
    serve_with_env(args, &[])
}

/// [`serve`] with environment variables of its own (`OTEL_*` for a test
/// that reads its traces).
pub(crate) fn serve_with_env(args: &[String], env: &[(&str, String)]) -> Served {
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .envs(env.iter().map(|(k, v)| (k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("host serve starts");
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let mut said = Vec::new();
    let base = loop {
        let line = lines
            .next()
            .expect("host serve says where it listens")
            .unwrap();
        if let Some(rest) = line.strip_prefix("toolhost MCP server on ") {
            break rest.trim_end_matches("/mcp").to_owned();
        }
        said.push(line);
    };
    // Keep draining stderr so the server never blocks on it.
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            kept.lock().unwrap().push(line);
        }
    });
    Served {
        child,
        base,
        said,
        log,
    }
}

/// A raw HTTP/1.1 request; returns the status code and the body.
fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    // A server may answer before reading a large body: a failed write is fine.
    let _ = stream.write_all(body.as_bytes());
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

pub(crate) const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

pub(crate) fn mcp_headers(token: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
    ];
    if let Some(t) = token {
        h.push(("Authorization", format!("Bearer {t}")));
    }
    h
}

/// A GET of `path` whose `Host` header is `host` (a DNS-rebinding page's
/// request); returns the status code.
fn raw_get_with_host(base: &str, path: &str, host: &str) -> u16 {
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn post(base: &str, headers: &[(&'static str, String)], body: &str) -> (u16, String) {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    http(base, "POST", "/mcp", &h, body)
}

#[test]
fn mcp_over_http_serves_both_revisions_behind_a_bearer_token() {
    let dir = plugins_with_hostile();
    let policy = write(dir.path(), "policy.toml", DENY_HTTP);
    let token = write(dir.path(), "token", "s3cret-token\n");
    let served = serve_with_tokens(dir.path(), &policy, &token);
    let url = format!("{}/mcp", served.base);
    for (mode, version) in [("legacy", "2025-11-25"), ("2026-07-28", "2026-07-28")] {
        let report = client(
            "basics",
            &["--mode", mode, "--url", &url, "--token", "s3cret-token"],
            &[],
        );
        assert_basics(&report, version);
    }

    let (status, body) = post(&served.base, &mcp_headers(None), INITIALIZE);
    assert_eq!(status, 401, "no token: {body}");
    assert!(
        body.contains("bearer token"),
        "a JSON-RPC error says why: {body}"
    );
    let (status, _) = post(&served.base, &mcp_headers(Some("wrong")), INITIALIZE);
    assert_eq!(status, 401, "a wrong token");
    let mut lower = mcp_headers(None);
    lower.push(("Authorization", "bearer s3cret-token".to_owned()));
    let (status, body) = post(&served.base, &lower, INITIALIZE);
    assert_eq!(status, 200, "the scheme is case-insensitive: {body}");

    let mut evil = mcp_headers(Some("s3cret-token"));
    evil.push(("Origin", "http://evil.example".to_owned()));
    let (status, body) = post(&served.base, &evil, INITIALIZE);
    assert_eq!(status, 403, "a browser page from another origin: {body}");

    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    let (status, _) = post(&served.base, &mcp_headers(Some("s3cret-token")), &huge);
    assert_eq!(status, 413, "a request over the size bound");

    assert_eq!(http(&served.base, "GET", "/healthz", &[], "").0, 200);
    assert_eq!(http(&served.base, "GET", "/readyz", &[], "").0, 200);
    // The figures tell who calls what: behind the token (unless
    // --metrics-public), and every extra endpoint behind the Host check.
    let (status, _) = http(&served.base, "GET", "/metrics", &[], "");
    assert_eq!(status, 401, "/metrics without a token");
    for path in ["/healthz", "/readyz", "/metrics"] {
        assert_eq!(
            raw_get_with_host(&served.base, path, "evil.example"),
            403,
            "{path}"
        );
    }
    let (status, metrics) = http(
        &served.base,
        "GET",
        "/metrics",
        &[("Authorization", "Bearer s3cret-token")],
        "",
    );
    assert_eq!(status, 200);
    for series in [
        "toolhost_mcp_calls_total{outcome=\"ok\"} 2",
        "toolhost_mcp_calls_total{outcome=\"permission-denied\"} 2",
        "toolhost_mcp_calls_in_flight 0",
        "toolhost_mcp_call_duration_seconds_count 10",
    ] {
        assert!(metrics.contains(series), "{series} in:\n{metrics}");
    }
    let (status, _) = post(&served.base, &mcp_headers(Some("s3cret-token")), INITIALIZE);
    assert_eq!(status, 200, "the server still serves");
}

/// A stateless server answers a plain `tools/call` in front of rmcp
/// (`toolhost-mcp`'s `stateless_call.rs`): the official client's calls
/// to one, behind a token, answer as the session-keeping server's do.
#[test]
fn the_official_client_calls_a_stateless_server_as_it_calls_one_with_sessions() {
    let dir = plugins_with_hostile();
    let policy = write(dir.path(), "policy.toml", DENY_HTTP);
    let token = write(dir.path(), "token", "s3cret-token\n");
    let served = serve_with_tokens_and(dir.path(), &policy, &token, &["--stateless"]);
    let url = format!("{}/mcp", served.base);
    let report = client(
        "basics",
        &["--mode", "legacy", "--url", &url, "--token", "s3cret-token"],
        &[],
    );
    assert_basics(&report, "2025-11-25");
}

#[test]
fn each_bearer_token_can_carry_its_clients_policy_profile() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["calc", "text"] {
        copy_plugin(&plugins_dir(), name, dir.path());
    }
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"allow\"\n[profiles.reviewer]\ndefault = \"deny\"\n\
         [[profiles.reviewer.rules]]\ntool = \"calculate\"\ndecision = \"allow\"\n",
    );
    let tokens = write(
        dir.path(),
        "tokens",
        "# who may call\nadmin-token\nreviewer-token reviewer\n",
    );
    let served = serve_with_tokens(dir.path(), &policy, &tokens);
    let url = format!("{}/mcp", served.base);
    let listed = |token: &str, mode: &str| -> Vec<String> {
        let report = client(
            "basics",
            &["--mode", mode, "--url", &url, "--token", token],
            &[],
        );
        assert_eq!(report["calls"]["ok"]["text"], "14", "{report}");
        report["tools"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    for mode in MODES {
        assert_eq!(listed("reviewer-token", mode), ["calculate"], "{mode}");
        assert!(
            listed("admin-token", mode).contains(&"word_count".to_owned()),
            "{mode}"
        );
    }
}

#[test]
fn a_profile_the_policy_lacks_in_a_token_file_or_in_agent_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let plugins = dir.path().display().to_string();
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"allow\"\n[profiles.reviewer]\ndefault = \"deny\"\n",
    );
    // `reviewr`, a typo of `reviewer`: it would run under `default = "allow"`.
    let tokens = write(dir.path(), "tokens", "tok-0 reviewer\ntok-1 reviewr\n");
    let run = |args: &[&str]| {
        let all = host_args(dir.path(), args);
        let out = Command::new(&all[0])
            .args(&all[1..])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stderr) = run(&[
        "--plugins",
        &plugins,
        "--policy",
        &policy,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        &tokens,
    ]);
    assert!(!ok, "host serve started: {stderr}");
    assert!(
        stderr.contains("`reviewr`") && stderr.contains("profiles: reviewer"),
        "{stderr}"
    );
    let (ok, stderr) = run(&[
        "--plugins",
        &plugins,
        "--policy",
        &policy,
        "--agent",
        "reviewr",
        "call",
        "calculate",
        r#"{"expression": "1+1"}"#,
    ]);
    assert!(!ok, "host call ran: {stderr}");
    assert!(
        stderr.contains("--agent") && stderr.contains("profiles: reviewer"),
        "{stderr}"
    );
    // The profile that exists is accepted.
    let (ok, stderr) = run(&[
        "--plugins",
        &plugins,
        "--policy",
        &policy,
        "--agent",
        "reviewer",
        "tools",
    ]);
    assert!(ok, "{stderr}");
}

#[test]
fn one_clients_cached_result_never_answers_another_client() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let plugins = dir.path().display().to_string();
    let policy = write(dir.path(), "policy.toml", "default = \"allow\"\n");
    let tokens = write(dir.path(), "tokens", "alice-token\nbob-token\n");
    let served = serve(&host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--policy",
            &policy,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            &tokens,
            "--stateless",
        ],
    ));
    let calculate = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"6*7"}}}"#;
    let cached = |token: &str| -> bool {
        let (status, body) = post(&served.base, &mcp_headers(Some(token)), calculate);
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("42"), "{body}");
        body.contains(r#""dev.toolhost/cached":true"#)
    };
    assert!(!cached("alice-token"), "the first call runs");
    assert!(
        cached("alice-token"),
        "alice's repeat is answered from the cache"
    );
    assert!(
        !cached("bob-token"),
        "bob is never answered from alice's call"
    );
    assert!(cached("bob-token"));
}

#[test]
fn serve_refuses_a_non_loopback_address_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(host_args(dir.path(), &["serve", "--listen", "0.0.0.0:0"])[1..].iter())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without a bearer token"), "{stderr}");
}

#[test]
fn the_mcp_inspector_cli_lists_and_calls_tools_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let plugins = dir.path().display().to_string();
    let host = host_args(dir.path(), &["--plugins", &plugins, "mcp"]);
    let inspect = |method: &[&str]| -> Value {
        let out = Command::new(inspector())
            .arg("--cli")
            .args(&host)
            .args(method)
            .output()
            .expect("the Inspector runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{method:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    };
    let listed = inspect(&["--method", "tools/list"]);
    assert_eq!(listed["tools"][0]["name"], "calculate", "{listed}");
    assert_eq!(listed["tools"][0]["annotations"]["readOnlyHint"], true);
    let called = inspect(&[
        "--method",
        "tools/call",
        "--tool-name",
        "calculate",
        "--tool-arg",
        "expression=6*7",
    ]);
    assert_eq!(called["content"][0]["text"], "42", "{called}");
    assert_eq!(called["structuredContent"]["value"], 42, "{called}");
}

/// A raw `tools/call` of `calculate` with `token`, as 2025-11-25 without a
/// session (`--stateless`); the response body.
fn calculate_with(base: &str, token: &str) -> String {
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"6*7"}}}"#;
    let (status, body) = post(base, &mcp_headers(Some(token)), call);
    assert_eq!(status, 200, "{body}");
    body
}

#[test]
fn an_approval_given_at_the_terminal_never_answers_a_remote_tokens_call() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let plugins = dir.path().display().to_string();
    let policy = write(
        dir.path(),
        "policy.toml",
        "[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n",
    );
    // At the terminal: "[t]his tool always".
    let args = host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--policy",
            &policy,
            "--answers-from-stdin",
            "call",
            "calculate",
            r#"{"expression": "1+1"}"#,
        ],
    );
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"t\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let listed = Command::new(&args[0])
        .args(host_args(dir.path(), &["approvals", "list"])[1..].iter())
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("answers the user, with no profile"),
        "{listed}"
    );

    // The same host served to a token (callers never approve here): the
    // terminal's approval does not answer it, so its call is refused.
    let tokens = write(dir.path(), "tokens", "remote-token\n");
    let served = serve(&host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--policy",
            &policy,
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            &tokens,
            "--asks",
            "deny",
            "--stateless",
        ],
    ));
    let body = calculate_with(&served.base, "remote-token");
    assert!(
        body.contains("permission-denied") && !body.contains("\"42\""),
        "{body}"
    );
}

#[test]
fn the_instructions_name_only_the_plugins_whose_tools_the_caller_may_see() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["calc", "fs", "http"] {
        copy_plugin(&plugins_dir(), name, dir.path());
    }
    let policy = write(
        dir.path(),
        "policy.toml",
        &format!(
            "{DENY_HTTP}[profiles.sums]\ndefault = \"deny\"\n\
             [[profiles.sums.rules]]\ntool = \"calculate\"\ndecision = \"allow\"\n"
        ),
    );
    let tokens = write(dir.path(), "tokens", "all-token\nsums-token sums\n");
    let served = serve_with_tokens(dir.path(), &policy, &tokens);
    let instructions = |token: &str| {
        let (status, body) = post(&served.base, &mcp_headers(Some(token)), INITIALIZE);
        assert_eq!(status, 200, "{body}");
        body
    };
    let all = instructions("all-token");
    assert!(all.contains("fs: Paths are relative"), "{all}");
    assert!(
        !all.contains("http: ") && !all.contains("Only hosts the user granted"),
        "`http_get` is denied: its plugin's rule is not told: {all}"
    );
    let sums = instructions("sums-token");
    assert!(
        !sums.contains("instructions") && !sums.contains("Paths are relative"),
        "a profile that sees `calculate` alone is told nothing: {sums}"
    );
}

/// `host mcp` with its stdout a file or `/dev/null` (a script's `> out.txt`,
/// Python's `subprocess` with a file) and stdin a pipe that stays quiet at
/// first: it waits for the client, answers into the file, and ends when
/// stdin closes.
#[test]
fn mcp_serves_with_its_stdout_a_file_or_dev_null() {
    let tmp = tempfile::tempdir().unwrap();
    for target in ["out.txt", "/dev/null"] {
        let path = tmp.path().join(target);
        let out = std::fs::File::create(&path).unwrap();
        let mut child = host(&root().join("target/test-cache"))
            .arg("--plugins")
            .arg(plugins_dir())
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(out)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // Nothing to read yet when the server starts reading.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"redirected","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        ] {
            writeln!(stdin, "{line}").unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(1500));
        drop(stdin);
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{target}: {err}");
        assert!(
            !err.contains("temporarily unavailable") && !err.contains("could not start"),
            "{target}: {err}"
        );
        if target == "out.txt" {
            let written = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<Value> = written
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            assert_eq!(lines.len(), 2, "{written}");
            assert!(lines[0]["result"]["serverInfo"].is_object(), "{written}");
            let tools = lines[1]["result"]["tools"].as_array().unwrap();
            assert!(tools.iter().any(|t| t["name"] == "calculate"), "{written}");
        }
    }
}

/// The gateway guide's sandbox (`hide = ["~/.ssh"]`) on a machine whose
/// home has no `.ssh`: nothing to hide, and the server starts (it was
/// refused: "sandbox directory …/.ssh does not exist"). Needs bubblewrap
/// (`cargo xtask test` puts PyPI's on the PATH).
#[test]
fn a_sandboxed_server_whose_hidden_directory_does_not_exist_starts() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("gateway.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp-servers]]\nname = \"calc\"\ncommand = [{:?}, \"--plugins\", {:?}, \"mcp\"]\n\
             sandbox = {{ write = [\".\"], hide = [\"~/.ssh\"], network = false }}\n",
            env!("CARGO_BIN_EXE_host"),
            plugins_dir().join("calc.wasm").display().to_string(),
        ),
    )
    .unwrap();
    let o = host(&root().join("target/test-cache"))
        .current_dir(work.path())
        .env("HOME", home.path())
        .arg("--config")
        .arg(&config)
        .args(["call", "calc__calculate", r#"{"expression":"6*7"}"#])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "42\n", "{err}");
}

/// CPU seconds each thread of process `pid` has used, by thread id.
#[cfg(target_os = "linux")]
fn cpu_by_thread(pid: u32) -> std::collections::HashMap<String, f64> {
    let mut used = std::collections::HashMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap();
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue; // the thread ended
        };
        // After the command's name in parentheses: state, then utime and
        // stime are the 12th and 13th fields, in clock ticks (100 a second).
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        used.insert(
            task.file_name().to_string_lossy().into_owned(),
            ticks / 100.0,
        );
    }
    used
}

/// `host mcp` runs a lone call on the thread that reads its requests (no
/// hop between threads), but calls at once still run in parallel: two
/// calls that spin until their timeout each keep a thread of the server
/// busy, where one thread running both would use one core between them.
#[cfg(target_os = "linux")]
#[test]
fn two_calls_at_once_over_stdio_each_run_on_a_thread_of_their_own() {
    let dir = plugins_with_hostile();
    let config = write(
        dir.path(),
        "config.toml",
        "[plugins.hostile]\nlimits = { timeout-ms = 2000 }\n",
    );
    let plugins = dir.path().display().to_string();
    let args = host_args(
        dir.path(),
        &["--plugins", &plugins, "--config", &config, "mcp"],
    );
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answers = |ids: &[u64]| {
        let mut left: Vec<u64> = ids.to_vec();
        let mut line = String::new();
        while !left.is_empty() {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "host mcp ended");
            let v: Value = serde_json::from_str(&line).unwrap();
            left.retain(|id| v["id"] != *id);
        }
    };
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    answers(&[1]);
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let before = cpu_by_thread(child.id());
    for id in [2, 3] {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"spin","arguments":{{}}}}}}"#
        )
        .unwrap();
    }
    answers(&[2, 3]);
    let after = cpu_by_thread(child.id());
    drop(stdin);
    let _ = child.wait();
    let mut used: Vec<f64> = after
        .iter()
        .map(|(tid, t)| t - before.get(tid).copied().unwrap_or(0.0))
        .collect();
    used.sort_by(|a, b| b.total_cmp(a));
    // The second busiest thread did about as much as the busiest (on a
    // busy machine both get less, alike); one thread running both calls
    // leaves it next to nothing.
    assert!(
        used.len() >= 2 && used[1] >= 0.1 && used[1] >= used[0] / 3.0,
        "CPU seconds by thread, busiest first: {used:?}"
    );
}
