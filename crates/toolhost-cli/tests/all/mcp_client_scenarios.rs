//! toolhost as an MCP client, checked by the official conformance suite's
//! client scenarios: `host` connects to the suite's test server (its URL
//! appended to the command) as an `[[mcp-servers]]` entry, and lists or
//! calls its tools. The sign-in scenarios (`auth/*`) are in
//! `mcp_oauth.rs`, elicitation in `mcp_elicitation.rs`.
//!
//! The scenarios are those of the suite's next release (0.2.0-alpha.12),
//! which judges revision 2026-07-28: `initialize` there accepts a client
//! that offers 2026-07-28 (0.1.16 expects 2025-11-25), and a server that
//! speaks 2026-07-28 alone is reached without an `initialize` it does not
//! know (`client/revisions.rs`).

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

/// What a user's harness does with `host` as the client of a scenario's
/// server: lists its tools (`host tools --json`), then calls each one once,
/// with the arguments the scenario's context names (a `null` left out, as
/// the tool's schema has no null), else with one value of each required
/// argument's type; `json_schema_echo` gets back the schema `host` holds
/// for the scenario's other tool. Its arguments: a directory of its own,
/// `host`, and the server's URL (which the suite appends).
const HARNESS: &str = r#"
import json, os, subprocess, sys
d, host, url = sys.argv[1], sys.argv[2], sys.argv[3]
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
with open(os.path.join(d, "host.toml"), "w") as f:
    f.write("[[mcp-servers]]\nname = \"up\"\nurl = %s\n" % json.dumps(url))
env = dict(os.environ, TOOLHOST_CACHE_DIR=d + "/cache", TOOLHOST_LOCK=d + "/lock",
           TOOLHOST_OAUTH_DIR=d + "/oauth")
for name in ("RUST_LOG", "TOOLHOST_CONFIG", "TOOLHOST_POLICY"):
    env.pop(name, None)
base = [host, "--config", d + "/host.toml", "--no-watch"]
log = open(os.path.join(d, "harness.log"), "a")
def run(args):
    out = subprocess.run(base + args, env=env, capture_output=True, text=True, timeout=60)
    log.write("$ host %s\n%s%s\n" % (" ".join(args), out.stdout[-4000:], out.stderr[-4000:]))
    return out
listed = run(["tools", "--json"])
tools = json.loads(listed.stdout or "[]")
schemas = {t["declared_name"]: t["input_schema"] for t in tools}
def filled(schema):
    values = {"string": "x", "integer": 1, "number": 1, "boolean": True}
    props = schema.get("properties", {})
    return {k: values.get(props.get(k, {}).get("type"), "x") for k in schema.get("required", [])}
calls = context.get("toolCalls")
if calls is not None:
    calls = [("up__" + c["name"], {k: v for k, v in c.get("arguments", {}).items() if v is not None})
             for c in calls]
else:
    calls = []
    for name, schema in schemas.items():
        if name == "up__json_schema_echo":
            other = next((s for n, s in schemas.items() if n != name), {})
            calls.append((name, {"schema": other}))
        else:
            calls.append((name, filled(schema)))
for name, arguments in calls:
    run(["call", name, json.dumps(arguments)])
"#;

/// The client scenarios of the next release judged by other tests of this
/// binary: the elicitation form answered at the terminal
/// (`mcp_elicitation.rs`), the skills ones (above and below, each with
/// its URI), the sign-in ones (`mcp_oauth.rs`).
fn judged_elsewhere(scenario: &str) -> bool {
    scenario == "elicitation-sep1034-client-defaults"
        || scenario.starts_with("sep-2640-client-")
        || scenario.starts_with("auth/")
}

/// Every other client scenario of the next release, with `host` as the
/// client the way a user's harness runs it ([`HARNESS`]): each passes,
/// no check failed or warned, and every client scenario the release lists
/// is judged here or by a test named in [`judged_elsewhere`].
#[test]
fn host_as_a_client_passes_every_client_scenario_of_the_next_release() {
    let scenarios = conformance::client_scenarios(conformance::Release::Next);
    assert!(
        scenarios.len() >= 45,
        "the release lists {} client scenarios",
        scenarios.len()
    );
    let here: Vec<String> = scenarios
        .into_iter()
        .filter(|s| !judged_elsewhere(s))
        .collect();
    for known in [
        "initialize",
        "tools_call",
        "sse-retry",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ] {
        assert!(here.iter().any(|s| *s == known), "{known} is not listed");
    }
    // `sse-retry` runs after the others, alone: rmcp opens its standalone
    // GET stream in a task of its own after `initialize`, and a GET that
    // a loaded machine delays past the call's stream closing is taken by
    // the suite for the reconnection (which it is not), a warning.
    let (alone, paired): (Vec<String>, Vec<String>) =
        here.into_iter().partition(|s| s == "sse-retry");
    let run = |scenario: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("harness.py"), HARNESS).unwrap();
        let command = format!(
            "python3 {}/harness.py {} {}",
            dir.path().display(),
            dir.path().display(),
            env!("CARGO_BIN_EXE_host")
        );
        let outcome = conformance::client_of(conformance::Release::Next, &command, scenario);
        let warned = outcome.warnings();
        (!outcome.passed() || !warned.is_empty()).then(|| {
            let log = std::fs::read_to_string(dir.path().join("harness.log")).unwrap_or_default();
            format!("{outcome}\n{}\nharness:\n{log}", warned.join("\n"))
        })
    };
    let mut failed = conformance::two_at_a_time(&paired, |scenario| run(scenario));
    failed.extend(alone.iter().filter_map(|scenario| run(scenario)));
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
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
