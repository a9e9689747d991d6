//! `host serve` checked by the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, installed by `cargo xtask test`):
//! the protocol scenarios that need no tool of the suite's own reference
//! server, against the example plugins.

use crate::mcp::{host_args, serve};
use crate::support::*;

/// The suite's server scenarios that test the protocol itself, not the
/// reference server's own tools, resources or prompts.
const PROTOCOL_SCENARIOS: [&str; 5] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[test]
fn host_serve_with_the_example_plugins_passes_the_suites_protocol_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["calc", "fs", "http", "text"] {
        copy_plugin(&plugins_dir(), name, dir.path());
    }
    let plugins = dir.path().display().to_string();
    let served = serve(&host_args(
        dir.path(),
        &["--plugins", &plugins, "serve", "--listen", "127.0.0.1:0"],
    ));
    let url = format!("{}/mcp", served.base);
    let failed: Vec<String> = PROTOCOL_SCENARIOS
        .iter()
        .map(|scenario| conformance::server(&url, scenario))
        .filter(|outcome| !outcome.passed())
        .map(|outcome| outcome.to_string())
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
