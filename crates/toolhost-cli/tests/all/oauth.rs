//! `host serve` as an OAuth 2.1 resource server, with software nobody here
//! wrote on both sides: a real authorization server (`oidc-provider`, run
//! by `toolhost_test_support::oidc`) issues the tokens, and the official
//! MCP Python SDK's OAuth client finds it from `host serve`'s 401 and does
//! the whole dance (`mcp_client.py oauth`, with a scripted consent). The
//! caller's subject maps to a profile whose deny rule holds, and shows in
//! the audit hook's log, the exported traces and the operator's console;
//! no token does. Opaque tokens go through the provider's introspection
//! endpoint.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::console::{request, sign_in};
use crate::mcp::{client, host_args};
use crate::support::*;
use toolhost_test_support::oidc::OidcProvider;
use toolhost_test_support::otlp::Collector;

/// `host serve` started with `args` and `env`; its base URL. Stopped when
/// dropped.
pub(crate) struct Serving {
    child: Child,
    pub(crate) base: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn serve(args: &[String], env: &[(&str, &str)]) -> Serving {
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("host serve starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let base = loop {
        let Some(Ok(line)) = lines.next() else {
            panic!("host serve stopped before listening:\n{}", said.join("\n"));
        };
        if let Some(rest) = line.strip_prefix("toolhost MCP server on ") {
            break rest.trim_end_matches("/mcp").to_owned();
        }
        said.push(line);
    };
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            eprintln!("host serve: {line}");
        }
    });
    Serving { child, base }
}

/// POSTs a `tools/call` of `calculate` to `base`'s `/mcp` with `token`
/// (stateless, one request); the status and body.
fn call_with(base: &str, token: &str) -> (u16, String) {
    call_tool(base, token, "calculate")
}

/// POSTs a `tools/call` of `name` (a calculator: `{"expression":"6*7"}`)
/// to `base`'s `/mcp` with `token` (stateless, one request); the status
/// and the response.
pub(crate) fn call_tool(base: &str, token: &str, name: &str) -> (u16, String) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{{"expression":"6*7"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, response)
}

pub(crate) fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn an_sdk_client_signs_in_at_a_real_authorization_server_and_its_subjects_profile_holds() {
    let idp = OidcProvider::start(json!({
        "resource_pattern": "^http://127\\.0\\.0\\.1:[0-9]+/mcp$",
        "scopes": ["tools"],
        "clients": [
            OidcProvider::machine_client("bot", "bot-secret"),
            OidcProvider::machine_client("opaque-bot", "opaque-secret"),
            OidcProvider::introspecting_client("toolhost", "introspection-secret"),
        ],
        "opaque_clients": ["opaque-bot"],
    }));
    let dir = tempfile::tempdir().unwrap();
    for name in ["calc", "text"] {
        copy_plugin(&plugins_dir(), name, dir.path());
    }
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"allow\"\n[profiles.reviewer]\n\
         [[profiles.reviewer.rules]]\ntool = \"word_count\"\ndecision = \"deny\"\n\
         reason = \"reviewers do not count words\"\n",
    );
    let audit_log = dir.path().join("audit.log");
    let audit = root().join("examples/hooks/audit.sh");
    let config = write(
        dir.path(),
        "toolhost.toml",
        &format!(
            r#"
[oauth]
issuer = "{issuer}"
scopes = ["tools"]

[oauth.introspection]
client-id = "toolhost"
client-secret-env = "TEST_INTROSPECTION_SECRET"

[[oauth.callers]]
subject = "alice"
profile = "reviewer"

[[oauth.callers]]
client = "opaque-bot"
profile = "reviewer"

[[hooks]]
name = "audit"
command = ["sh", "{audit}"]
stages = ["after"]
env = {{ TOOLHOST_AUDIT_LOG = "{log}" }}
"#,
            issuer = idp.issuer,
            audit = audit.display(),
            log = audit_log.display(),
        ),
    );
    // An operator's token, for the console (callers bring OAuth tokens).
    let tokens = write(dir.path(), "tokens", "op-secret role=operator\n");
    let collector = Collector::keeping();
    let plugins = dir.path().display().to_string();
    let served = serve(
        &host_args(
            dir.path(),
            &[
                "--config",
                &config,
                "--plugins",
                &plugins,
                "--policy",
                &policy,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &tokens,
                "--console",
            ],
        ),
        &[
            ("TEST_INTROSPECTION_SECRET", "introspection-secret"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let url = format!("{}/mcp", served.base);

    // The SDK finds the authorization server from the 401 by itself,
    // registers, signs in as alice (the scripted consent) and calls.
    let report = client(
        "oauth",
        &[
            "--mode",
            "legacy",
            "--url",
            &url,
            "--login",
            "alice",
            "--call",
            "calculate",
            r#"{"expression":"2*(3+4)"}"#,
            "--call",
            "word_count",
            r#"{"text":"one two"}"#,
        ],
        &[],
    );
    // What the client asked the authorization server for: this server's
    // resource, PKCE with S256, and the scope the 401 named (the SDK adds
    // `offline_access`, which the provider offers, for a refresh token).
    let asked = &report["asked"];
    assert_eq!(asked.as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(asked[0]["resource"], url.as_str(), "{report}");
    assert_eq!(asked[0]["code_challenge_method"], "S256", "{report}");
    assert!(
        asked[0]["scope"]
            .as_str()
            .is_some_and(|s| s.split(' ').any(|s| s == "tools")),
        "{report}"
    );
    assert_eq!(report["calls"]["calculate"]["text"], "14", "{report}");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"calculate") && !tools.contains(&"word_count"),
        "alice's profile denies word_count, which is not listed: {tools:?}"
    );
    let denied = &report["calls"]["word_count"];
    assert_eq!(denied["is_error"], true, "{denied}");
    assert_eq!(
        denied["meta"]["dev.toolhost/error-kind"],
        "permission-denied"
    );
    assert!(
        denied["text"]
            .as_str()
            .unwrap()
            .contains("reviewers do not count words"),
        "{denied}"
    );
    // The audit log names the subject, for both calls.
    let log = std::fs::read_to_string(&audit_log).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    for line in &lines {
        assert_eq!(line["call"]["client"], "oauth:alice", "{line}");
        assert_eq!(line["call"]["agent"], "reviewer", "{line}");
    }

    // An opaque token, checked at the provider's introspection endpoint,
    // of a client a rule maps.
    let opaque = idp.client_credentials("opaque-bot", "opaque-secret", &url, "tools");
    assert!(!opaque.contains('.'), "an opaque token");
    let (status, body) = call_with(&served.base, &opaque);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"42\""), "{body}");
    // A good JWT of a client no rule names: refused, nothing runs.
    let unmapped = idp.client_credentials("bot", "bot-secret", &url, "tools");
    let (status, body) = call_with(&served.base, &unmapped);
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        std::fs::read_to_string(&audit_log).unwrap().lines().count(),
        3,
        "only the opaque token's call ran"
    );
    // A made-up opaque token: the provider says it is not active.
    let (status, _) = call_with(&served.base, "made-up-opaque-token");
    assert_eq!(status, 401);

    // The operator's console names each call's caller (it reads the call
    // feed every 100 ms).
    let (session, _) = sign_in(&served.base);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let calls = loop {
        let (status, _, calls) = request(
            &served.base,
            "GET",
            "/console/part/calls",
            &[("Cookie", &session)],
            "",
        );
        assert_eq!(status, 200, "{calls}");
        if calls.contains("oauth:opaque-bot") || std::time::Instant::now() > deadline {
            break calls;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    for who in ["oauth:alice", "oauth:opaque-bot"] {
        assert!(calls.contains(&format!("<td>{who}</td>")), "{who}: {calls}");
    }
    // So do the traces (the `execute_tool` span's `toolhost.client`), and
    // no token is in them.
    let sent = loop {
        let sent = collector.received_text();
        if sent.contains("oauth:opaque-bot") || std::time::Instant::now() > deadline {
            break sent;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    for who in ["oauth:alice", "oauth:opaque-bot"] {
        assert!(sent.contains(who), "{who} in the traces: {sent:?}");
    }
    assert!(sent.contains("toolhost.client"), "{sent:?}");
    for token in [&opaque, &unmapped] {
        assert!(!sent.contains(token.as_str()), "a token in the traces");
    }
}

#[test]
fn host_serve_refuses_to_start_with_an_oauth_table_it_cannot_honour() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        dir.path(),
        "policy.toml",
        "default = \"allow\"\n[profiles.reviewer]\n",
    );
    let plugins = plugins_dir().display().to_string();
    for (table, says) in [
        (
            // A misspelt profile would run its callers under nothing the
            // operator wrote.
            "issuer = \"http://127.0.0.1:9\"\n[[callers]]\nsubject = \"alice\"\nprofile = \"reviewr\"\n",
            "[[oauth.callers]] rule 1 names the profile `reviewr`",
        ),
        (
            "issuer = \"http://127.0.0.1:9\"\nunmapped = \"guest\"\n",
            "[oauth] unmapped names the profile `guest`",
        ),
        (
            // A rule that names nobody would match everyone.
            "issuer = \"http://127.0.0.1:9\"\n[[callers]]\nprofile = \"reviewer\"\n",
            "names a subject, client, group or scope",
        ),
        ("issuer = \"http://login.example.com\"\n", "must be https"),
        (
            "issuer = \"http://127.0.0.1:9\"\naudience = \"x\"\n",
            "audience",
        ),
    ] {
        let table = table.replace("[[callers]]", "[[oauth.callers]]").replacen(
            "issuer",
            "[oauth]\nissuer",
            1,
        );
        let config = write(dir.path(), "toolhost.toml", &table);
        let out = Command::new(env!("CARGO_BIN_EXE_host"))
            .args(
                &host_args(
                    dir.path(),
                    &[
                        "--config",
                        &config,
                        "--plugins",
                        &plugins,
                        "--policy",
                        &policy,
                        "serve",
                        "--listen",
                        "127.0.0.1:0",
                    ],
                )[1..],
            )
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{table}: started\n{stderr}");
        assert!(stderr.contains(says), "{table}: {stderr}");
    }
}
