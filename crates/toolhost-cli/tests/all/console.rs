//! The operator's console (`host serve --console`) in a real browser:
//! Debian's Chromium driven headless by puppeteer-core
//! (`tests/console_browser.cjs`; `cargo xtask test` installs both). The
//! page lists the tools, shows a call made over MCP as it happens, and an
//! operator answers a waiting `ask` from it, after which the caller's call
//! completes. Around it, without a browser: who may open the console and
//! change anything (operator tokens, the cookie, CSRF, Host and Origin).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::mcp::{MODES, Served, client, host_args, serve};
use crate::support::*;

const POLICY: &str = "default = \"allow\"\n[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\nreason = \"arithmetic needs a person\"\n\n[profiles.remote]\nask = \"operator\"\n";
/// One caller's asks go to the operator by its token's line, another's by
/// its profile in the policy.
const TOKENS: &str = "caller-secret ask=operator\nprofile-caller remote\nop-secret role=operator\n";

fn outside(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var).map_or_else(|| root().join(default), PathBuf::from);
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo xtask test`, which installs Debian's chromium \
         and puppeteer-core (${var})",
        path.display()
    );
    path
}

fn console_server(dir: &Path) -> Served {
    std::fs::write(dir.join("policy.toml"), POLICY).unwrap();
    std::fs::write(dir.join("tokens"), TOKENS).unwrap();
    let plugins = plugins_dir().display().to_string();
    let policy = dir.join("policy.toml").display().to_string();
    let tokens = dir.join("tokens").display().to_string();
    serve(&host_args(
        dir,
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
            "--console",
        ],
    ))
}

#[test]
fn an_operator_sees_live_calls_and_answers_a_waiting_ask_from_the_console_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let served = console_server(dir.path());
    let screenshot = root().join("target/console.png");
    let out = Command::new("node")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console_browser.cjs"))
        .env(
            "NODE_PATH",
            outside("TOOLHOST_TEST_NODE_DIR", "target/tools/node").join("node_modules"),
        )
        .env("BASE", &served.base)
        .env("CALLER", "caller-secret")
        .env("OPERATOR", "op-secret")
        .env(
            "CHROMIUM",
            outside("TOOLHOST_TEST_CHROMIUM", "/usr/bin/chromium"),
        )
        .env("SCREENSHOT", &screenshot)
        .output()
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "no report ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        out.status.success() && report.get("error").is_none(),
        "{report:#}"
    );
    eprintln!(
        "the call showed on the console {} ms after its answer",
        report["live_call_ms"]
    );

    assert_eq!(report["sign_in_form"], true);
    assert_eq!(
        report["caller_refused"], true,
        "a caller's token opens nothing"
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for tool in ["calculate", "word_count", "read_file"] {
        assert!(tools.contains(&tool), "{tool} listed: {tools:?}");
    }
    assert!(report["plugins"].to_string().contains("calc"), "{report}");
    assert_eq!(report["cookie"]["httpOnly"], true, "{report}");
    assert_eq!(report["cookie"]["sameSite"], "Strict", "{report}");
    assert_eq!(report["cookie_visible_to_script"], false);

    assert_eq!(report["word_count"]["isError"], false, "{report}");
    assert_eq!(report["live_call"]["tool"], "word_count", "{report}");
    assert_eq!(report["live_call"]["decision"], "allow", "{report}");
    let steps = report["live_call"]["steps"].to_string();
    assert!(
        steps.contains("admit") && steps.contains("execute") && steps.contains("conclude"),
        "{steps}"
    );

    assert_eq!(
        report["same_id_rows"], 3,
        "three calls, each its client's mcp-1: three rows"
    );
    for key in ["hostile_live", "hostile_reloaded"] {
        let text = report[key].as_str().unwrap();
        assert!(
            text.contains("\\u{202e}evil"),
            "{key}: escaped: {text:.300}"
        );
        assert!(!text.contains('\u{202e}'), "{key}");
        assert!(text.len() < 10_000, "{key}: cut: {} bytes", text.len());
    }
    assert_eq!(report["hostile_in_page"], false);
    assert!(report["page_bytes"].as_u64().unwrap() < 200_000, "{report}");

    let pending = report["pending_text"].as_str().unwrap();
    assert!(
        pending.contains("calculate")
            && pending.contains("2*(3+4)")
            && pending.contains("arithmetic needs a person"),
        "{pending}"
    );
    assert_eq!(report["allowed"]["isError"], false, "{report}");
    assert!(
        report["allowed"]["text"].as_str().unwrap().contains("14"),
        "{report}"
    );
    assert_eq!(report["allowed_always"]["isError"], false, "{report}");
    assert!(report["saved"].to_string().contains("6*7"), "{report}");
    assert!(report["saved"].to_string().contains("operator"), "{report}");
    assert_eq!(report["again_without_asking"]["isError"], false, "{report}");
    assert_eq!(report["saved_after_revoke"], 0);
    assert_eq!(report["denied"]["isError"], true, "{report}");
    assert!(
        report["denied"]["text"]
            .as_str()
            .unwrap()
            .contains("operator denied"),
        "{report}"
    );
    assert!(
        report["failures"].to_string().contains("calculate"),
        "{report}"
    );
    assert_eq!(report["page_errors"], serde_json::json!([]), "{report}");
    assert!(screenshot.is_file());
}

/// A raw HTTP/1.1 request; the status, the headers and the body.
pub(crate) fn request(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: {authority}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

#[test]
fn only_an_operators_token_signs_in_and_every_change_needs_the_pages_csrf_token() {
    let dir = tempfile::tempdir().unwrap();
    let served = console_server(dir.path());
    let base = &served.base;
    let form = [("Content-Type", "application/x-www-form-urlencoded")];

    // Not signed in: the sign-in page, and nothing else.
    let (status, _, body) = request(base, "GET", "/console", &[], "");
    assert_eq!(status, 401);
    assert!(body.contains("Operator token"), "{body}");
    for path in ["/console/part/queue", "/console/events"] {
        assert_eq!(request(base, "GET", path, &[], "").0, 401, "{path}");
    }
    // A caller's token neither signs in nor passes as a session.
    let (status, head, _) = request(base, "POST", "/console/login", &form, "token=caller-secret");
    assert_eq!(status, 401);
    assert!(!head.to_ascii_lowercase().contains("set-cookie"), "{head}");
    // An operator's token calls no tool.
    let (status, _, _) = request(
        base,
        "POST",
        "/mcp",
        &[
            ("Authorization", "Bearer op-secret"),
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
    );
    assert_eq!(status, 403);
    // A sign-in from another site's page is refused.
    let evil = [
        ("Content-Type", "application/x-www-form-urlencoded"),
        ("Origin", "http://evil.example"),
    ];
    assert_eq!(
        request(base, "POST", "/console/login", &evil, "token=op-secret").0,
        403
    );

    let (session, csrf) = sign_in(base);
    let (_, head, _) = request(base, "GET", "/console", &[("Cookie", &session)], "");
    assert!(head.contains("frame-ancestors 'none'"), "{head}");

    // A change without the token, with a wrong one, or from another
    // origin, is refused; with it, it reaches the queue (nothing waits).
    let post =
        |headers: &[(&str, &str)]| request(base, "POST", "/console/queue/1", headers, "allow").0;
    assert_eq!(post(&[("Cookie", &session)]), 403);
    assert_eq!(post(&[("Cookie", &session), ("X-CSRF-Token", "0000")]), 403);
    assert_eq!(
        post(&[
            ("Cookie", &session),
            ("X-CSRF-Token", &csrf),
            ("Origin", "http://evil.example")
        ]),
        403
    );
    assert_eq!(
        post(&[("Cookie", &session), ("X-CSRF-Token", &csrf)]),
        409,
        "no question 1 waits"
    );
    // A page reached under another name (DNS rebinding) is refused.
    assert_eq!(
        request(
            base,
            "GET",
            "/console",
            &[("Host", "evil.example"), ("Cookie", &session)],
            ""
        )
        .0,
        403
    );
    // Signing out ends the session.
    let (status, _, _) = request(
        base,
        "POST",
        "/console/logout",
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "",
    );
    assert_eq!(status, 204);
    assert_eq!(
        request(base, "GET", "/console", &[("Cookie", &session)], "").0,
        401
    );
}

#[test]
fn an_ask_for_the_operator_needs_the_console_and_the_console_needs_an_operator_token() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("callers"), "caller ask=operator\n").unwrap();
    std::fs::write(dir.path().join("bad"), "caller colour=blue\n").unwrap();
    let run = |args: &[&str]| {
        let all = host_args(dir.path(), args);
        let out = Command::new(&all[0]).args(&all[1..]).output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let file = |name: &str| dir.path().join(name).display().to_string();
    let (ok, err) = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        &file("callers"),
    ]);
    assert!(!ok && err.contains("needs the console"), "{err}");
    let (ok, err) = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        &file("callers"),
        "--console",
    ]);
    assert!(!ok && err.contains("operator's token"), "{err}");
    let (ok, err) = run(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        &file("bad"),
    ]);
    assert!(
        !ok && err.contains("line 1") && err.contains("colour"),
        "{err}"
    );
}

#[test]
fn a_console_without_tokens_opens_only_to_the_printed_one_time_token_so_a_local_client_cannot_approve_its_own_ask()
 {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("policy.toml"), POLICY).unwrap();
    let plugins = plugins_dir().display().to_string();
    let policy = dir.path().join("policy.toml").display().to_string();
    // Loopback, no token: `/mcp` is open to local processes, as before.
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
            "--console",
            "--asks",
            "operator",
        ],
    ));
    let base = served.base.clone();
    // A local MCP client's call waits for the operator.
    let url = format!("{base}/mcp");
    let waiting = std::thread::spawn(move || {
        client("operator_wait", &["--mode", MODES[0], "--url", &url], &[])
    });

    // That client (or any local process) reads the console: the sign-in
    // page, no CSRF token, and every change refused, "allow always" for
    // its own call first.
    let (status, _, page) = request(&base, "GET", "/console", &[], "");
    assert_eq!(status, 401, "the console is not open: {page}");
    assert!(!page.contains("name=\"csrf\""), "{page}");
    for id in 1..=3 {
        let path = format!("/console/queue/{id}");
        let (status, _, _) = request(
            &base,
            "POST",
            &path,
            &[("X-CSRF-Token", "")],
            "allow-always",
        );
        assert_eq!(status, 401, "{path}");
    }
    let (status, _, _) = request(&base, "GET", "/console?token=guess", &[], "");
    assert_eq!(status, 401);

    // The person who started the server has the link it printed.
    let link = served
        .said
        .iter()
        .find_map(|l| l.strip_prefix("toolhost console: sign in at "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no sign-in link printed: {:?}", served.said))
        .to_owned();
    let path = link.strip_prefix(&base).expect("a link to this server");
    assert!(path.starts_with("/console?token="), "{path}");
    let (status, head, _) = request(&base, "GET", path, &[], "");
    assert_eq!(status, 303, "{head}");
    let session = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie:")
                .then(|| l.split_once(':').unwrap().1)
        })
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .trim()
        .to_owned();
    let (status, _, page) = request(&base, "GET", "/console", &[("Cookie", &session)], "");
    assert_eq!(status, 200);
    let csrf = page
        .split("name=\"csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let started = std::time::Instant::now();
    let id = loop {
        let (_, _, queue) = request(
            &base,
            "GET",
            "/console/part/queue",
            &[("Cookie", &session)],
            "",
        );
        if let Some(id) = queue
            .split("data-id=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
        {
            break id.to_owned();
        }
        assert!(started.elapsed().as_secs() < 60, "no call waits: {queue}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let (status, _, body) = request(
        &base,
        "POST",
        &format!("/console/queue/{id}"),
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "allow",
    );
    assert_eq!(status, 204, "{body}");
    let report = waiting.join().unwrap();
    assert_eq!(report["result"]["text"], "14", "{report}");
    // Nothing was saved by anyone.
    let saved = dir.path().join("toolhost.approvals.json");
    assert!(
        std::fs::read_to_string(&saved).map_or(true, |s| !s.contains("2*(3+4)")),
        "no approval saved"
    );
}

/// Signs the operator in: the session cookie (`name=value`) and the
/// page's CSRF token. Checks the cookie's flags on the way.
pub(crate) fn sign_in(base: &str) -> (String, String) {
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let (status, head, _) = request(base, "POST", "/console/login", &form, "token=op-secret");
    assert_eq!(status, 303, "{head}");
    let cookie_line = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie_line.contains(flag), "{cookie_line}");
    }
    let session = cookie_line
        .split_once(':')
        .and_then(|(_, v)| v.split(';').next())
        .unwrap()
        .trim()
        .to_owned();
    let (status, _, page) = request(base, "GET", "/console", &[("Cookie", &session)], "");
    assert_eq!(status, 200);
    let csrf = page
        .split("name=\"csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries its CSRF token")
        .to_owned();
    (session, csrf)
}

#[test]
fn a_caller_whose_token_or_profile_sends_asks_to_the_operator_waits_hearing_so_in_both_revisions() {
    let dir = tempfile::tempdir().unwrap();
    let served = console_server(dir.path());
    let (session, csrf) = sign_in(&served.base);
    // The token's `ask=operator`, then the profile's `ask = "operator"`.
    for (mode, token) in [(MODES[0], "caller-secret"), (MODES[1], "profile-caller")] {
        let url = format!("{}/mcp", served.base);
        let waiting = std::thread::spawn(move || {
            client(
                "operator_wait",
                &["--mode", mode, "--url", &url, "--token", token],
                &[],
            )
        });
        // The call shows in the operator's queue; the operator allows it.
        let started = std::time::Instant::now();
        let id = loop {
            let (_, _, queue) = request(
                &served.base,
                "GET",
                "/console/part/queue",
                &[("Cookie", &session)],
                "",
            );
            if let Some(id) = queue
                .split("data-id=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
            {
                break id.to_owned();
            }
            assert!(
                started.elapsed().as_secs() < 60,
                "{mode}: no call waits: {queue}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let (status, _, body) = request(
            &served.base,
            "POST",
            &format!("/console/queue/{id}"),
            &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
            "allow",
        );
        assert_eq!(status, 204, "{body}");
        let report = waiting.join().unwrap();
        assert_eq!(report["result"]["is_error"], false, "{mode}: {report}");
        assert_eq!(report["result"]["text"], "14", "{mode}: {report}");
        assert!(
            report["progress"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("waiting for the operator"))),
            "{mode}: {report}"
        );
    }
}
