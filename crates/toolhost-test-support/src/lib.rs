//! # toolhost-test-support
//!
//! What the end-to-end tests of every crate share (dev-only, never
//! published): where the built plugins and fixtures are, scratch plugin
//! directories, a real HTTP server on loopback, the fake model server that
//! speaks the providers' wire formats, an interactive `host` session, and
//! the process's resident memory, an in-process OTLP collector, a real
//! authorization server (`oidc`).
//!
//! ```no_run
//! use toolhost_test_support::{copy_plugin, plugins_dir};
//!
//! let dir = tempfile::tempdir().unwrap();
//! copy_plugin(&plugins_dir(), "calc", dir.path());
//! assert!(dir.path().join("calc.wasm").is_file());
//! ```

pub mod catalog;
pub mod clients;
pub mod conformance;
pub mod container;
pub mod fake_model;
pub mod oidc;
pub mod otlp;
pub mod phoenix;
pub mod postgres;
pub mod registry;

pub use fake_model::{ModelServer, Reply};
pub use phoenix::Phoenix;
pub use registry::Registry;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Resident memory of this process, in bytes.
pub fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb * 1024
}

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn built(dir: &str, probe: &str) -> PathBuf {
    let env = format!("TOOLHOST_TEST_{}", dir.to_uppercase());
    let dir = std::env::var_os(&env).map_or_else(|| root().join("target").join(dir), PathBuf::from);
    assert!(
        dir.join(probe).is_file(),
        "{} is missing: build the plugins first with `cargo xtask plugins` (or run `cargo xtask test`)",
        dir.join(probe).display()
    );
    dir
}

/// The `host` binary at `bin` (the CLI's tests pass
/// `env!("CARGO_BIN_EXE_host")`) with a clean environment: the compile cache
/// in `cache`, no model configured (nothing listens on port 9), and a lock
/// file of its own that does not exist yet (not `toolhost.lock` in the
/// working directory; a test of the lock file sets `TOOLHOST_LOCK` again).
pub fn host_command(bin: &str, cache: &Path) -> std::process::Command {
    static COMMANDS: AtomicUsize = AtomicUsize::new(0);
    let lock = std::env::temp_dir()
        .join("toolhost-test-locks")
        .join(format!(
            "{}-{}.lock",
            std::process::id(),
            COMMANDS.fetch_add(1, Ordering::Relaxed)
        ));
    // A file left by an earlier run whose process had this id (ids come
    // round again) would hold another build's digests.
    let _ = std::fs::remove_file(&lock);
    let mut cmd = std::process::Command::new(bin);
    cmd.env("TOOLHOST_CACHE_DIR", cache)
        .env("TOOLHOST_LOCK", lock)
        .env_remove("RUST_LOG")
        .env_remove("TOOLHOST_CONFIG")
        .env_remove("TOOLHOST_POLICY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        // Traces go nowhere unless a test says where.
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OLLAMA_HOST", "http://127.0.0.1:9");
    cmd
}

/// `target/plugins`: the example plugins.
pub fn plugins_dir() -> PathBuf {
    built("plugins", "calc.wasm")
}

/// `target/code`: code mode's program runner (`run-code`).
pub fn code_dir() -> PathBuf {
    built("code", "run-code.wasm")
}

/// A free loopback port, given back just before a server the test starts
/// takes it.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// `target/fixtures`: the fixture plugins.
pub fn fixtures_dir() -> PathBuf {
    built("fixtures", "hostile.wasm")
}

/// An outside program the test command installs under `target/tools/`
/// (`cargo xtask test` says where with `TOOLHOST_TEST_TOOLS`), e.g.
/// `py/bin/mcp-server-time` or `node/node_modules/.bin/mcp-server-everything`.
/// Missing, it fails the test, saying how to install it: never a skip.
pub fn outside_tool(relative: &str) -> PathBuf {
    let tools = std::env::var_os("TOOLHOST_TEST_TOOLS")
        .map_or_else(|| root().join("target").join("tools"), PathBuf::from);
    let path = tools.join(relative);
    assert!(
        path.is_file(),
        "{} is missing: run the tests with `cargo xtask test`, which installs the MCP SDK, the \
         Inspector and the reference MCP servers into target/tools/",
        path.display()
    );
    path
}

/// The misbehaving MCP server (`mcp/hostile_server.py`, run with `python3`).
pub fn hostile_mcp_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/hostile_server.py")
}

/// The process sandbox's escape probe (`mcp/unix_socket_probe.c`),
/// compiled with the machine's `cc` into `dir`: it tries one way of
/// reaching a Unix-domain socket (see the file's comment). Put `dir`
/// outside `/tmp`, which the sandbox empties.
pub fn unix_socket_probe(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/unix_socket_probe.c");
    let probe = dir.join("unix_socket_probe");
    let status = std::process::Command::new("cc")
        .args(["-O1", "-Wall", "-o"])
        .arg(&probe)
        .arg(&source)
        .status()
        .expect("a C compiler (`cc`) is needed to build the process sandbox's escape probe");
    assert!(status.success(), "cc {}: {status}", source.display());
    probe
}

/// Copies plugin `name` (its `.wasm` and `.toml`, when there is one) from `from` into `to`.
pub fn copy_plugin(from: &Path, name: &str, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(
        from.join(format!("{name}.wasm")),
        to.join(format!("{name}.wasm")),
    )
    .unwrap();
    // The manifest, and a plain component's WIT (its docs).
    for ext in ["toml", "wit"] {
        let beside = from.join(format!("{name}.{ext}"));
        if beside.is_file() {
            std::fs::copy(beside, to.join(format!("{name}.{ext}"))).unwrap();
        }
    }
    // Its skills.
    let skills = from.join(format!("{name}.skills"));
    if skills.is_dir() {
        copy_tree(&skills, &to.join(format!("{name}.skills")));
    }
}

/// Copies the folder `from` to `to`, every file below it.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let dest = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &dest);
        } else {
            std::fs::copy(&path, &dest).unwrap();
        }
    }
}

/// The MCP server whose tool returns every kind of content block
/// (`mcp/content_server.py`, on the official MCP Python SDK): its command
/// line, run with the SDK's Python (`TOOLHOST_TEST_PYTHON`, else
/// `target/tools/py/bin/python`).
pub fn content_mcp_server() -> Vec<String> {
    let python = std::env::var_os("TOOLHOST_TEST_PYTHON")
        .map_or_else(|| outside_tool("py/bin/python"), PathBuf::from);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/content_server.py");
    vec![python.display().to_string(), script.display().to_string()]
}

/// A minimal HTTP/1.1 server on 127.0.0.1 that answers every request with a
/// fixed body (or what [`TestServer::routing`]'s function says) and counts
/// requests. Stops when dropped.
pub struct TestServer {
    /// The address it listens on.
    ip: &'static str,
    /// The port it listens on.
    pub port: u16,
    /// Requests served so far.
    pub requests: Arc<AtomicUsize>,
    lines: Arc<parking_lot::Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

/// What a [`TestServer`] answers to a request line (`GET /path HTTP/1.1`):
/// the whole response, as sent.
pub type Answer = dyn Fn(&str) -> String + Send + Sync;

impl TestServer {
    /// Starts the server on a free port; every request gets `body`.
    pub fn start(body: &'static str) -> TestServer {
        TestServer::start_on("127.0.0.1", body)
    }

    /// Starts a server whose every answer is a `302` to `location`.
    pub fn redirecting(location: &str) -> TestServer {
        TestServer::answering(format!(
            "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ))
    }

    /// Starts the server on a free port; every request gets `response`
    /// (status line, headers and body, as sent).
    pub fn answering(response: String) -> TestServer {
        TestServer::answering_on("127.0.0.1", response)
    }

    /// [`TestServer::start`] on another loopback address (`127.0.0.2`):
    /// another host, for tests that need two.
    pub fn start_on(ip: &'static str, body: &'static str) -> TestServer {
        TestServer::answering_on(
            ip,
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            ),
        )
    }

    fn answering_on(ip: &'static str, response: String) -> TestServer {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        TestServer::serve(ip, listener, Arc::new(move |_: &str| response.clone()))
    }

    /// A server on 127.0.0.1:`port` (one a test freed, to stand in for
    /// the server that was there) whose answer to each request is what
    /// `answer` makes of its request line; it keeps the lines
    /// ([`TestServer::request_lines`]).
    pub fn routing(port: u16, answer: Arc<Answer>) -> TestServer {
        let listener = TcpListener::bind(("127.0.0.1", port)).unwrap();
        TestServer::serve("127.0.0.1", listener, answer)
    }

    fn serve(ip: &'static str, listener: TcpListener, answer: Arc<Answer>) -> TestServer {
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let lines = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, l, s) = (requests.clone(), lines.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                r.fetch_add(1, Ordering::SeqCst);
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut first = String::new();
                let mut line = String::new();
                let mut length = 0usize;
                // Read the request head (and the body, if it says one).
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line == "\r\n" || line == "\n" {
                        break;
                    }
                    if first.is_empty() {
                        first = line.trim_end().to_owned();
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                    line.clear();
                }
                let mut body = vec![0; length.min(1 << 20)];
                let _ = std::io::Read::read_exact(&mut reader, &mut body);
                l.lock().push(first.clone());
                let _ = conn.write_all(answer(&first).as_bytes());
                let _ = conn.flush();
            }
        });
        TestServer {
            ip,
            port,
            requests,
            lines,
            stop,
        }
    }

    /// The request line of every request served so far
    /// (`POST /token HTTP/1.1`).
    pub fn request_lines(&self) -> Vec<String> {
        self.lines.lock().clone()
    }

    /// `http://IP:PORT{path}` (`127.0.0.1` unless started on another).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}:{}{path}", self.ip, self.port)
    }

    /// Requests served so far.
    pub fn request_count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect((self.ip, self.port));
    }
}

/// A scratch directory with a file inside and a secret outside, plus a
/// symlink inside that points at the secret.
pub struct FsScene {
    /// Owns the scratch directory (removed when dropped).
    pub tmp: tempfile::TempDir,
    /// The directory a plugin is granted, with `hello.txt` inside.
    pub granted: PathBuf,
    /// A file outside it (`secret.txt`), and the target of the symlink inside.
    pub secret: PathBuf,
}

/// Builds an [`FsScene`] in a fresh temporary directory.
pub fn fs_scene() -> FsScene {
    let tmp = tempfile::tempdir().unwrap();
    let granted = tmp.path().join("granted");
    std::fs::create_dir_all(granted.join("sub")).unwrap();
    std::fs::write(
        granted.join("hello.txt"),
        "line one\nline two\nline three\n",
    )
    .unwrap();
    std::fs::write(granted.join("sub/inner.txt"), "inner\n").unwrap();
    let secret = tmp.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, granted.join("link-out")).unwrap();
    let granted = std::fs::canonicalize(granted).unwrap();
    FsScene {
        tmp,
        granted,
        secret,
    }
}

/// SSE frames of an OpenAI-compatible stream: `data: {json}\n\n` each, then `[DONE]`.
pub fn openai_sse(chunks: &[serde_json::Value]) -> String {
    let mut s = String::new();
    for c in chunks {
        s.push_str(&format!("data: {c}\n\n"));
    }
    s.push_str("data: [DONE]\n\n");
    s
}

/// SSE frames of an Anthropic stream: `event: TYPE\ndata: {json}\n\n` each.
pub fn anthropic_sse(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// An OpenAI stream with one tool call (arguments as given) and no text.
pub fn openai_tool_call(id: &str, name: &str, arguments: &str) -> String {
    openai_sse(&[
        serde_json::json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": arguments}}]}, "finish_reason": null}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    ])
}

/// An OpenAI stream with a final text answer.
pub fn openai_text(text: &str) -> String {
    openai_sse(&[
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}),
    ])
}

/// An interactive session whose stdout and stderr lines arrive on one channel.
pub struct Session {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Session {
    /// Starts `cmd` with piped stdin, stdout and stderr.
    pub fn start(mut cmd: std::process::Command) -> Session {
        let mut child = cmd
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("host starts");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for stream in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err) as Box<dyn std::io::Read + Send>,
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Session { child, lines }
    }

    /// Writes `line` (and a newline) to the session's stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (at most 30 s) for a line containing `needle`; returns it.
    pub fn expect(&self, needle: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(
                    std::sync::mpsc::RecvTimeoutError::Timeout
                    | std::sync::mpsc::RecvTimeoutError::Disconnected,
                ) => {
                    panic!(
                        "no line with {needle:?}; output so far:\n{}",
                        seen.join("\n")
                    )
                }
            }
        }
    }

    /// Lines that arrive within `wait`.
    pub fn drain(&self, wait: std::time::Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + wait;
        let mut seen = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
        {
            seen.push(line);
        }
        seen
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
