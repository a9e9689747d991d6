//! toolhost as an MCP client, checked by the official conformance suite's
//! client scenarios: `host` connects to the suite's test server (its URL
//! appended to the command) as an `[[mcp-servers]]` entry, and lists or
//! calls its tools. The sign-in scenarios (`auth/*`) are in
//! `mcp_oauth.rs`, elicitation in `mcp_elicitation.rs`.
//!
//! The suite's `initialize` scenario runs with its next release
//! (0.2.0-alpha.12): 0.1.16 expects a client to offer 2025-11-25, and
//! toolhost's client offers the newest revision it speaks, 2026-07-28, as
//! the spec asks (with 0.1.16 that version was the scenario's only failed
//! check).

use std::path::Path;

use crate::support::*;

/// The client command for the suite, in `dir`: `host ARGS` with the
/// server whose URL the suite appends configured as `up`.
fn client_command(dir: &Path, args: &str) -> String {
    let d = dir.display();
    let script = format!(
        r#"#!/bin/sh
# toolhost's `host` as the conformance suite's client; $1: the server's URL.
unset RUST_LOG TOOLHOST_CONFIG TOOLHOST_POLICY
export TOOLHOST_CACHE_DIR="{d}/cache" TOOLHOST_LOCK="{d}/lock" TOOLHOST_OAUTH_DIR="{d}/oauth"
printf '[[mcp-servers]]\nname = "up"\nurl = "%s"\n' "$1" > "{d}/host.toml"
exec "{host}" --config "{d}/host.toml" --no-watch {args}
"#,
        host = env!("CARGO_BIN_EXE_host"),
    );
    let path = dir.join("client.sh");
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

#[test]
fn host_as_a_client_passes_the_suites_tools_call_and_sse_retry_scenarios() {
    for (scenario, args) in [
        ("tools_call", r#"call up__add_numbers '{"a": 2, "b": 3}'"#),
        ("sse-retry", "call up__test_reconnection '{}'"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let outcome = conformance::client(&client_command(dir.path(), args), scenario);
        assert!(outcome.passed(), "{scenario}: {outcome}");
    }
}

#[test]
fn host_as_a_client_passes_the_next_suites_initialize_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let outcome = conformance::client_of(
        conformance::Release::Next,
        &client_command(dir.path(), "tools"),
        "initialize",
    );
    assert!(outcome.passed(), "{outcome}");
}

/// The skills scenarios (SEP-2640) of the next release: `host skills up`
/// lists and reads nothing; `host skills up URI` loads the skill, and
/// stops at the `SKILL.md` whose digest, size or front matter is not the
/// listing's, reading no other file. Each scenario's own check must have
/// run (a client that never lists is a skip, not a pass).
#[test]
fn host_as_a_client_lists_skills_without_reading_them_and_loads_none_that_fails_verification() {
    let load = "skills up skill://pdf-processing/SKILL.md";
    for (scenario, args, check) in [
        (
            "sep-2640-client-no-prefetch",
            "skills up",
            "sep-2640-host-no-prefetch",
        ),
        (
            "sep-2640-client-verify-digest",
            load,
            "sep-2640-host-verify-digest",
        ),
        (
            "sep-2640-client-verify-size",
            load,
            "sep-2640-host-size-mismatch-failure",
        ),
        (
            "sep-2640-client-verify-frontmatter",
            load,
            "sep-2640-host-frontmatter-comparison",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let outcome = conformance::client_of(
            conformance::Release::Next,
            &client_command(dir.path(), args),
            scenario,
        );
        assert!(outcome.passed(), "{scenario}: {outcome}");
        assert!(
            outcome
                .checks
                .iter()
                .any(|c| c["id"] == check && c["status"] == "SUCCESS"),
            "{scenario}: {check} did not succeed: {outcome}"
        );
    }
}

/// The client command for the suite with `host serve` between: the
/// suite's server (its URL appended) is the gateway's upstream `up`, and
/// `host ARGS` is the gateway's client (its server `gw`).
fn through_gateway_command(dir: &Path, args: &str) -> String {
    let d = dir.display();
    let port = free_port();
    let script = format!(
        r#"#!/bin/sh
# The suite's server, then `host serve` in front of it, then `host` as its client.
unset RUST_LOG TOOLHOST_CONFIG TOOLHOST_POLICY
export TOOLHOST_CACHE_DIR="{d}/cache" TOOLHOST_LOCK="{d}/lock" TOOLHOST_OAUTH_DIR="{d}/oauth"
printf '[[mcp-servers]]\nname = "up"\nurl = "%s"\nprefix = ""\n' "$1" > "{d}/gateway.toml"
printf '[[mcp-servers]]\nname = "gw"\nurl = "http://127.0.0.1:{port}/mcp"\n' > "{d}/host.toml"
"{host}" --config "{d}/gateway.toml" --no-watch serve --listen 127.0.0.1:{port} 2> "{d}/gateway.log" &
gateway=$!
python3 -c 'import socket,sys,time
for _ in range(600):
    try:
        socket.create_connection(("127.0.0.1", {port}), 1).close(); sys.exit(0)
    except OSError: time.sleep(0.05)
sys.exit(1)'
"{host}" --config "{d}/host.toml" --no-watch {args}
status=$?
kill $gateway
exit $status
"#,
        host = env!("CARGO_BIN_EXE_host"),
    );
    let path = dir.join("through-gateway.sh");
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

/// The same skills scenarios with the gateway between the suite's server
/// and the client: the gateway passes the server's skills on without
/// reading a file ahead of need, and a tampered `SKILL.md` never gets
/// past it to the client (its own check refuses it first; the client's
/// would too: the gateway's is proven on its own in `skills.rs`).
#[test]
fn the_gateway_passes_the_suites_skills_on_without_prefetch_and_stops_a_tampered_one() {
    let load = "skills gw skill://pdf-processing/SKILL.md";
    for (scenario, args, check) in [
        (
            "sep-2640-client-no-prefetch",
            "skills gw",
            "sep-2640-host-no-prefetch",
        ),
        (
            "sep-2640-client-verify-digest",
            load,
            "sep-2640-host-verify-digest",
        ),
        (
            "sep-2640-client-verify-frontmatter",
            load,
            "sep-2640-host-frontmatter-comparison",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let outcome = conformance::client_of(
            conformance::Release::Next,
            &through_gateway_command(dir.path(), args),
            scenario,
        );
        let gateway = std::fs::read_to_string(dir.path().join("gateway.log")).unwrap_or_default();
        assert!(
            outcome.passed(),
            "{scenario}: {outcome}\ngateway: {gateway}"
        );
        assert!(
            outcome
                .checks
                .iter()
                .any(|c| c["id"] == check && c["status"] == "SUCCESS"),
            "{scenario}: {check} did not succeed: {outcome}\ngateway: {gateway}"
        );
        if scenario != "sep-2640-client-no-prefetch" {
            assert!(
                gateway.contains("skill-file-refused"),
                "{scenario}: the gateway did not refuse it itself: {gateway}"
            );
        }
    }
}
