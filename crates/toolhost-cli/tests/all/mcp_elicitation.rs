//! An upstream MCP server's question during a call (elicitation) reaches
//! the person at the terminal: `host call` as the official conformance
//! suite's client, answering its form from stdin (`--answers-from-stdin`),
//! each empty answer taking the field's default (SEP-1034).

use std::path::Path;

use crate::support::*;

/// The client command for the suite, in `dir`: `host call` of the
/// scenario's tool on the server whose URL the suite appends, its answers
/// `answers` on stdin.
fn client_command(dir: &Path, answers: &str, flags: &str) -> String {
    let d = dir.display();
    let script = format!(
        r#"#!/bin/sh
# toolhost's `host` as the conformance suite's client; $1: the server's URL.
unset RUST_LOG TOOLHOST_CONFIG TOOLHOST_POLICY
export TOOLHOST_CACHE_DIR="{d}/cache" TOOLHOST_LOCK="{d}/lock" TOOLHOST_OAUTH_DIR="{d}/oauth"
printf '[[mcp-servers]]\nname = "up"\nurl = "%s"\n' "$1" > "{d}/host.toml"
printf '{answers}' | "{host}" --config "{d}/host.toml" --no-watch {flags} call up__test_client_elicitation_defaults
"#,
        host = env!("CARGO_BIN_EXE_host"),
    );
    let path = dir.join("client.sh");
    std::fs::write(&path, script).unwrap();
    format!("sh {}", path.display())
}

#[test]
fn the_person_at_the_terminal_answers_an_upstream_form_and_empty_answers_take_its_defaults() {
    let dir = tempfile::tempdir().unwrap();
    // "y" to fill it in, then an empty answer to each of its five fields.
    let command = client_command(dir.path(), "y\\n\\n\\n\\n\\n\\n", "--answers-from-stdin");
    let outcome = conformance::client(&command, "elicitation-sep1034-client-defaults");
    assert!(outcome.passed(), "{outcome}");
}
