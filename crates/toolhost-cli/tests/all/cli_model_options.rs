//! `host run` with model options in layers (`[model.options]`,
//! `[agents.NAME.options]`, `[variants.NAME]`, flags), `--system-prompt FILE`
//! and `[[request-hooks]]`, checked in the request bodies a fake model
//! server received.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// A model that answers at once, without tool calls.
fn answering_server() -> ModelServer {
    ModelServer::start(|_, _| {
        openai_sse(&[
            json!({"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": "stop"}]}),
        ])
    })
}

/// `host --config CONFIG FLAGS… run go`, the `[model]` table pointing at `server`.
fn run_with(dir: &Path, server: &ModelServer, config: &str, flags: &[&str]) -> Output {
    command_with(dir, server, config, flags)
        .output()
        .expect("host runs")
}

fn command_with(
    dir: &Path,
    server: &ModelServer,
    config: &str,
    flags: &[&str],
) -> std::process::Command {
    let path = dir.join("host.toml");
    let config = format!(
        "[model]\nkind = \"openai\"\nmodel = \"m\"\nbase-url = \"http://127.0.0.1:{}/v1\"\n{config}",
        server.port
    );
    std::fs::write(&path, config).unwrap();
    let mut command = host(&root().join("target/test-cache"));
    command
        .arg("--plugins")
        .arg(plugins_dir())
        .arg("--config")
        .arg(&path)
        .args(flags)
        .args(["run", "go"]);
    command
}

#[test]
fn the_system_prompt_dates_the_day_where_the_user_is_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // POSIX zone strings (no tz database needed): UTC+14 and UTC-12 are 26
    // hours apart, so their dates differ at every instant.
    let date_line = |tz: &str| {
        let server = answering_server();
        let o = command_with(dir.path(), &server, "", &[])
            .env("TZ", tz)
            .output()
            .expect("host runs");
        let b = only_body(&server, &o);
        let system = b["messages"][0]["content"].as_str().unwrap().to_owned();
        system
            .lines()
            .find(|l| l.starts_with("Today's date:"))
            .unwrap_or_else(|| panic!("no date: {system}"))
            .to_owned()
    };
    let east = date_line("EAST-14");
    let west = date_line("WEST+12");
    assert!(east.ends_with("(local time, UTC+14:00)."), "{east}");
    assert!(west.ends_with("(local time, UTC-12:00)."), "{west}");
    assert_ne!(
        east[..24],
        west[..24],
        "the local date, not UTC's: {east} / {west}"
    );
    assert_eq!(
        east.len(),
        "Today's date: YYYY-MM-DD (local time, UTC+14:00).".len(),
        "the date and no time of day: {east}"
    );
}

fn only_body(server: &ModelServer, o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 1);
    bodies[0].clone()
}

const LAYERS: &str = r#"
[model.options]
temperature = 0.1
top-p = 0.5
max-tokens = 100
stop = ["BASE"]
extra = { seed = 1, top_k = 10 }

[agents.reviewer.options]
top-p = 0.6
reasoning-effort = "low"
extra = { seed = 2 }

[variants.long]
max-tokens = 900
reasoning-effort = "high"
"#;

#[test]
fn run_sends_the_merged_layers_and_the_system_prompt_file() {
    let dir = tempfile::tempdir().unwrap();
    let prompt = dir.path().join("prompt.md");
    std::fs::write(&prompt, "You are a careful pirate.").unwrap();
    let server = answering_server();
    let o = run_with(
        dir.path(),
        &server,
        LAYERS,
        &[
            "--agent",
            "reviewer",
            "--variant",
            "long",
            "--temperature",
            "0.3",
            "--system-prompt",
            prompt.to_str().unwrap(),
        ],
    );
    let b = only_body(&server, &o);
    // Flag > variant > agent > model.
    assert_eq!(b["temperature"].to_string(), "0.3");
    assert_eq!(b["top_p"].to_string(), "0.6");
    assert_eq!(b["max_tokens"], 900);
    assert_eq!(b["stop"], json!(["BASE"]));
    assert_eq!(b["reasoning_effort"], "high");
    assert_eq!(b["seed"], 2);
    assert_eq!(b["top_k"], 10);
    let system = b["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("You are a careful pirate."),
        "the file replaces the base prompt: {system}"
    );
    assert!(!system.contains("You are a helpful assistant"), "{system}");
    assert!(system.contains("Today's date:"), "{system}");
    assert!(
        system.contains("page through long files"),
        "the plugins' usage rules are still appended: {system}"
    );
}

#[test]
fn a_forbidden_extra_key_or_an_unknown_variant_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = answering_server();
    let o = run_with(
        dir.path(),
        &server,
        "[model.options]\nextra = { messages = [] }\n",
        &[],
    );
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("extra.messages"), "{stderr}");
    let o = run_with(dir.path(), &server, LAYERS, &["--variant", "short"]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("[variants.short]"), "{stderr}");
    assert!(server.bodies().is_empty(), "nothing reached the model");
}

#[test]
fn a_request_hook_changes_the_temperature() {
    let dir = tempfile::tempdir().unwrap();
    let hook = dir.path().join("cool.sh");
    // Echoes the request with the temperature replaced, keeping the rest.
    std::fs::write(
        &hook,
        "#!/bin/sh\nsed -e 's/\"temperature\":0.1,/\"temperature\":0.25,/'\n",
    )
    .unwrap();
    let server = answering_server();
    let config = format!(
        "{LAYERS}\n[[request-hooks]]\ncommand = [\"sh\", \"{}\"]\n",
        hook.display()
    );
    let o = run_with(dir.path(), &server, &config, &[]);
    let b = only_body(&server, &o);
    assert_eq!(b["temperature"].to_string(), "0.25");
    // The rest came back as it was.
    assert_eq!(b["top_p"].to_string(), "0.5");
    assert_eq!(b["seed"], 1);
    assert!(
        b["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Today's date:")
    );
}

#[test]
fn a_hanging_request_hook_is_cut_and_the_request_goes_out_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let server = answering_server();
    let config = format!(
        "{LAYERS}\n[[request-hooks]]\nname = \"stuck\"\ncommand = [\"sleep\", \"60\"]\ntimeout-ms = 500\n"
    );
    let started = Instant::now();
    let o = run_with(dir.path(), &server, &config, &[]);
    assert!(started.elapsed() < Duration::from_secs(30));
    let b = only_body(&server, &o);
    assert_eq!(b["temperature"].to_string(), "0.1");
    assert_eq!(b["top_p"].to_string(), "0.5");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("stuck") && stderr.contains("timed out"),
        "the failure is logged: {stderr}"
    );
}
