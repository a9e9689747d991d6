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

/// `host serve` in front of the suite's reference "everything" server
/// (`[[mcp-servers]]` with no prefix), under `policy`; and the reference
/// server, which must outlive it.
fn gateway(dir: &std::path::Path, policy: &str) -> (crate::mcp::Served, conformance::Everything) {
    let reference = conformance::everything();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp-servers]]\nname = \"everything\"\nurl = \"{}\"\nprefix = \"\"\n",
            reference.url
        ),
    )
    .unwrap();
    let policy_file = dir.join("policy.toml");
    std::fs::write(&policy_file, policy).unwrap();
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let served = serve(&host_args(
        dir,
        &[
            "--plugins",
            &plugins.display().to_string(),
            "--config",
            &config.display().to_string(),
            "--policy",
            &policy_file.display().to_string(),
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
    ));
    (served, reference)
}

/// Runs every server scenario of the suite against `url`; the outcomes
/// that failed.
fn failing_scenarios(url: &str) -> Vec<conformance::Outcome> {
    conformance::SERVER_SCENARIOS
        .iter()
        .map(|scenario| conformance::server(url, scenario))
        .filter(|outcome| !outcome.passed())
        .collect()
}

/// The scenarios that need what another branch builds (issue 45 items 4
/// sampling and elicitation forwarded from upstream servers); they are
/// reported, not required, here.
const ELSEWHERE: [&str; 4] = [
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
];

#[test]
fn host_serve_in_front_of_the_reference_server_passes_the_suites_server_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let (served, _reference) = gateway(dir.path(), "default = \"allow\"\n");
    let url = format!("{}/mcp", served.base);
    let failed = failing_scenarios(&url);
    let (elsewhere, here): (Vec<_>, Vec<_>) = failed
        .iter()
        .partition(|o| ELSEWHERE.contains(&o.scenario.as_str()));
    eprintln!(
        "scenarios left to other work: {:?}",
        elsewhere.iter().map(|o| &o.scenario).collect::<Vec<_>>()
    );
    assert!(
        here.is_empty(),
        "{}",
        here.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
}
