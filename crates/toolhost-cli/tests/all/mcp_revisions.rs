//! `host serve` answers each protocol revision in its own terms, checked
//! with raw HTTP requests as an older client sends them: the SSE priming
//! event (empty `data` with `id` and `retry`) only for sessions at
//! 2025-11-25 or later, and a failed `tools/call` as a JSON-RPC error or
//! an `isError` result as the session's revision lists it.

use std::io::{Read, Write};

use crate::mcp::{host_args, serve};
use crate::support::*;

/// One HTTP exchange: the status, the response's head and its body.
fn exchange(base: &str, headers: &[(&str, &str)], body: &str) -> (u16, String, String) {
    let authority = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).unwrap();
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

fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .expect("a session id")
}

/// A session of `version` with `host serve`: every response to it, and
/// whether any carried an SSE `retry` (the priming event).
struct Session {
    base: String,
    id: String,
    version: &'static str,
}

impl Session {
    fn open(base: &str, version: &'static str) -> (Session, String) {
        let init = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"{version}","capabilities":{{}},"clientInfo":{{"name":"old","version":"0"}}}}}}"#
        );
        let (status, head, body) = exchange(base, &[], &init);
        assert_eq!(status, 200, "{head}\n{body}");
        let session = Session {
            base: base.to_owned(),
            id: session_id(&head),
            version,
        };
        session.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        (session, body)
    }

    /// Sends `body` as a client of this revision does: with the session,
    /// and from 2025-06-18 on the `MCP-Protocol-Version` header.
    fn send(&self, body: &str) -> String {
        let mut headers = vec![("Mcp-Session-Id", self.id.as_str())];
        if self.version != "2025-03-26" {
            headers.push(("MCP-Protocol-Version", self.version));
        }
        exchange(&self.base, &headers, body).2
    }

    fn call(&self, id: u32, tool: &str, args: &str) -> String {
        self.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
        ))
    }
}

fn served() -> (tempfile::TempDir, crate::mcp::Served) {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let plugins = dir.path().display().to_string();
    let served = serve(&host_args(
        dir.path(),
        &["--plugins", &plugins, "serve", "--listen", "127.0.0.1:0"],
    ));
    (dir, served)
}

#[test]
fn sessions_before_2025_11_25_get_no_sse_priming_event_and_later_ones_do() {
    let (_dir, served) = served();
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let (session, init) = Session::open(&served.base, version);
        let listed = session.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
        let called = session.call(3, "calculate", r#"{"expression":"1+1"}"#);
        let primed = version >= "2025-11-25";
        for (what, body) in [
            ("initialize", &init),
            ("tools/list", &listed),
            ("tools/call", &called),
        ] {
            assert!(body.contains("\"jsonrpc\""), "{version} {what}: {body}");
            assert_eq!(
                body.contains("retry:"),
                primed,
                "{version} {what}: the priming event is for 2025-11-25 on only: {body}"
            );
            // Every event an older client reads parses as JSON.
            if !primed {
                for line in body.lines().filter_map(|l| l.strip_prefix("data:")) {
                    assert!(
                        serde_json::from_str::<serde_json::Value>(line.trim()).is_ok(),
                        "{version} {what}: {line:?} in {body}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_failed_call_is_a_protocol_error_or_a_result_as_the_sessions_revision_says() {
    let (_dir, served) = served();
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let (session, _) = Session::open(&served.base, version);
        // Unknown tool: a JSON-RPC error in every revision.
        let unknown = session.call(2, "calculat", "{}");
        assert!(
            unknown.contains("\"error\"") && unknown.contains("-32602"),
            "{version}: {unknown}"
        );
        assert!(
            unknown.contains("did you mean `calculate`"),
            "{version}: {unknown}"
        );
        // Invalid arguments: a JSON-RPC error before 2025-11-25, a tool
        // execution error (`isError`) from it on.
        let invalid = session.call(3, "calculate", r#"{"expr":"1"}"#);
        if version >= "2025-11-25" {
            assert!(
                invalid.contains("\"isError\":true") && !invalid.contains("-32602"),
                "{version}: {invalid}"
            );
        } else {
            assert!(
                invalid.contains("\"error\"") && invalid.contains("-32602"),
                "{version}: {invalid}"
            );
        }
        assert!(invalid.contains("expression"), "{version}: {invalid}");
    }
}
