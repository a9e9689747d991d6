//! Arize Phoenix (PyPI), a real OpenTelemetry backend: an OTLP/HTTP
//! receiver with a REST API to read the spans back. `cargo xtask test`
//! installs it into `target/tools/phoenix/`; without it the tests that
//! need it fail, saying so.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::free_port;

/// A Phoenix server on loopback ports of its own, stopped when dropped.
pub struct Phoenix {
    /// Its HTTP port (OTLP at `/v1/traces`, REST under `/v1/projects`).
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

/// A GET on 127.0.0.1:`port`: the status and the body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    // Chunked bodies: the JSON is between the chunk sizes.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        unchunk(body)
    } else {
        body.to_owned()
    };
    Some((status, body))
}

fn unchunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}

impl Phoenix {
    /// Starts Phoenix and waits (at most 3 minutes) until it answers.
    pub fn start() -> Phoenix {
        let bin = std::env::var_os("TOOLHOST_TEST_PHOENIX").map_or_else(
            || crate::root().join("target/tools/phoenix/bin/phoenix"),
            PathBuf::from,
        );
        assert!(
            bin.is_file(),
            "{} is missing: run the tests with `cargo xtask test`, which installs \
             Arize Phoenix into target/tools/phoenix/ ($TOOLHOST_TEST_PHOENIX)",
            bin.display()
        );
        let dir = tempfile::tempdir().expect("a directory for Phoenix's database");
        let port = free_port();
        let child = Command::new(&bin)
            .arg("serve")
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("phoenix serve starts");
        let mut phoenix = Phoenix {
            port,
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if let Some((200, _)) = get(port, "/healthz") {
                return phoenix;
            }
            if let Ok(Some(status)) = phoenix.child.try_wait() {
                panic!("phoenix serve exited early: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "Phoenix did not answer in 3 minutes"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Its OTLP base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans of `project` (the `openinference.project.name` resource
    /// attribute), waiting (at most 30 s) until there are at least `min`.
    pub fn spans(&self, project: &str, min: usize) -> Vec<Span> {
        self.spans_where(project, min, |_| true)
    }

    /// The spans of `trace` in `project`, waiting (at most 30 s) until there
    /// are at least `min`.
    pub fn trace(&self, project: &str, trace: &str, min: usize) -> Vec<Span> {
        self.spans_where(project, min, |s| s.trace_id == trace)
    }

    fn spans_where(&self, project: &str, min: usize, keep: impl Fn(&Span) -> bool) -> Vec<Span> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let spans: Vec<Span> = match get(
                self.port,
                &format!("/v1/projects/{project}/spans?limit=1000"),
            ) {
                Some((200, body)) => serde_json::from_str::<Value>(&body)
                    .ok()
                    .and_then(|v| v["data"].as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .map(Span::from_json)
                    .filter(|s| keep(s))
                    .collect(),
                _ => Vec::new(),
            };
            if spans.len() >= min || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One span as Phoenix stores it.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its name.
    pub name: String,
    /// Its trace (32 hex digits).
    pub trace_id: String,
    /// Its id (16 hex digits).
    pub span_id: String,
    /// Its parent's id, `None` for a root.
    pub parent_id: Option<String>,
    /// When it started (RFC 3339, sortable within one trace).
    pub start: String,
    /// Its attributes.
    pub attributes: serde_json::Map<String, Value>,
}

impl Span {
    fn from_json(v: &Value) -> Span {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        Span {
            name: s(&v["name"]),
            trace_id: s(&v["context"]["trace_id"]),
            span_id: s(&v["context"]["span_id"]),
            parent_id: v["parent_id"].as_str().map(str::to_owned),
            start: s(&v["start_time"]),
            attributes: v["attributes"].as_object().cloned().unwrap_or_default(),
        }
    }

    /// An attribute as text (`""` when absent).
    pub fn attr(&self, key: &str) -> String {
        match self.attributes.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    }
}

/// The spans as an indented tree of names (children in start order), one
/// tree per root, for comparing a trace's shape with what is expected.
pub fn tree(spans: &[Span]) -> String {
    let mut children: BTreeMap<Option<&str>, Vec<&Span>> = BTreeMap::new();
    let ids: Vec<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    for span in spans {
        // A parent outside these spans (a remote caller's) counts as none.
        let parent = span.parent_id.as_deref().filter(|p| ids.contains(p));
        children.entry(parent).or_default().push(span);
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| a.start.cmp(&b.start).then(a.name.cmp(&b.name)));
    }
    fn walk(
        out: &mut String,
        children: &BTreeMap<Option<&str>, Vec<&Span>>,
        parent: Option<&str>,
        depth: usize,
    ) {
        for span in children.get(&parent).into_iter().flatten() {
            out.push_str(&"  ".repeat(depth));
            out.push_str(&span.name);
            out.push('\n');
            walk(out, children, Some(&span.span_id), depth + 1);
        }
    }
    let mut out = String::new();
    walk(&mut out, &children, None, 0);
    out
}
