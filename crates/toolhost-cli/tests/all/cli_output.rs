//! What `host` prints, as a newcomer meets it (issue 47): a reader that
//! goes away ends the command quietly; each load warning is printed once;
//! errors say what failed and why, in words, once, with no `Debug` dump.

use std::io::Read;
use std::process::{Command, Output, Stdio};

use crate::support::*;

fn shared_cache() -> std::path::PathBuf {
    root().join("target/test-cache")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("host runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// No `Debug` dump of a library's error reaches the user.
fn assert_no_debug_dump(text: &str) {
    for dump in [
        "Os {",
        "kind: ",
        "reqwest::Error",
        "WorkerTransport",
        "hyper_util",
        "(os error",
        "Client(",
    ] {
        assert!(!text.contains(dump), "a Debug dump ({dump}) in:\n{text}");
    }
}

fn count(text: &str, needle: &str) -> usize {
    text.to_lowercase().matches(&needle.to_lowercase()).count()
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    for args in [
        vec!["tools", "--json"],
        vec!["plugins"],
        vec!["call", "word_count", r#"{"text":"a b c"}"#, "--json"],
    ] {
        let mut child = host(&shared_cache())
            .arg("--plugins")
            .arg(plugins_dir())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `| true`: the reader closes its end before the host writes.
        drop(child.stdout.take());
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(
            err.is_empty(),
            "{args:?}: nothing on stderr, as other tools: {err}"
        );
        assert_eq!(
            status.code(),
            Some(141),
            "{args:?}: the code a shell shows for SIGPIPE"
        );
    }
}

#[test]
fn each_load_warning_is_printed_once() {
    // A tool name two plugins declare: one is renamed, and a warning says so.
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    copy_plugin(&fixtures_dir(), "dup-calc", dir.path());
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(dir.path())
        .arg("tools"));
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(
        count(&err, "is exposed as `dup-calc__calculate`"),
        1,
        "{err}"
    );
    assert!(
        !err.contains("WARN"),
        "no log line besides the warning: {err}"
    );

    // A file that is not a component, checked.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "hello\n").unwrap();
    let o = run(host(&shared_cache()).arg("check").arg(&notes));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(count(&err, "not a WebAssembly component"), 1, "{err}");
    assert!(!err.contains("WARN"), "{err}");
}

#[test]
fn a_missing_plugin_path_is_said_once_in_words() {
    for args in [
        vec!["check", "nofile.wasm"],
        vec!["--plugins", "/nonexistent", "tools"],
    ] {
        let o = run(host(&shared_cache()).args(&args));
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = stderr(&o);
        assert_eq!(
            count(&err, "no such file or directory"),
            1,
            "{args:?}: {err}"
        );
        assert!(!err.contains("plugin directory nofile.wasm"), "{err}");
        assert_no_debug_dump(&err);
    }
}

#[test]
fn arguments_a_tool_rejects_are_not_called_a_failure() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "calculate", r#"{"expression":"2+"}"#]));
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("rejected its arguments"), "{err}");
    assert!(!err.contains("failed"), "{err}");
}

#[test]
fn an_unknown_tool_is_a_sentence_then_the_list() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "no_such_tool"]));
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(
        err.contains("no tool named `no_such_tool`. Available tools: bar_chart, calculate"),
        "{err}"
    );
}

#[test]
fn run_without_a_model_does_not_claim_a_tools_only_mode() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["run", "What is 2*(3+4)?"]));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(!err.contains("tools-only mode"), "{err}");
    assert!(err.contains("`host run` needs a language model"), "{err}");
    assert!(err.contains("OPENAI_API_KEY"), "what to do: {err}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

#[test]
fn check_calls_a_hook_plugin_a_hook_plugin() {
    let o = run(host(&shared_cache())
        .arg("check")
        .arg(plugins_dir().join("redact-secrets.wasm")));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("is a toolhost hook plugin"), "{out}");
    assert!(!out.contains("tool plugin"), "{out}");
}

#[test]
fn an_unreachable_mcp_server_is_down_in_words() {
    let docs_state = |out: &str| {
        out.lines()
            .skip_while(|l| !l.starts_with("docs"))
            .find(|l| l.trim_start().starts_with("state:"))
            .unwrap_or_default()
            .to_owned()
    };
    // On a loaded machine the listing may come before the first attempt
    // ends (`starting`): asked again, a few times at most.
    let mut tries = 0;
    let (o, out, state) = loop {
        tries += 1;
        let o = run(host(&shared_cache())
            .arg("--plugins")
            .arg(plugins_dir())
            .args(["--mcp", "docs=http://127.0.0.1:9/mcp", "plugins"]));
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        let state = docs_state(&out);
        if !state.contains("starting") || tries == 5 {
            break (o, out, state);
        }
    };
    assert!(state.contains("connection refused"), "{out}");
    assert!(state.contains("http://127.0.0.1:9/mcp"), "{state}");
    assert_no_debug_dump(&out);
    assert_no_debug_dump(&stderr(&o));
}

#[test]
fn a_tool_that_cannot_connect_logs_no_debug_dump() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args([
            "--allow-host",
            "http=127.0.0.1:9",
            "call",
            "http_get",
            r#"{"url":"http://127.0.0.1:9/"}"#,
        ]));
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("refused the connection"), "{err}");
    assert_no_debug_dump(&err);
    assert_eq!(err.lines().count(), 1, "said once: {err}");
}

#[test]
fn an_unreachable_model_is_said_once_with_what_to_do() {
    let o = run(host(&shared_cache())
        .env("OPENAI_API_KEY", "sk-test")
        .arg("--plugins")
        .arg(plugins_dir())
        .args([
            "--provider",
            "openai",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "run",
            "hi",
        ]));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(count(&err, "connection refused"), 1, "once: {err}");
    assert!(err.contains("http://127.0.0.1:9/v1"), "what failed: {err}");
    assert!(err.contains("--base-url"), "what to do: {err}");
    assert_no_debug_dump(&err);
    assert!(stdout(&o).is_empty(), "no empty answer: {:?}", stdout(&o));
}

#[test]
fn publishing_to_a_closed_port_says_the_connection_was_refused() {
    let o = run(host(&shared_cache()).args([
        "publish",
        &plugins_dir().join("calc.wasm").display().to_string(),
        "127.0.0.1:9/calc:1",
    ]));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("pushing "),
        "what it does, before the wait: {err}"
    );
    assert!(err.contains("connection refused"), "{err}");
    assert_no_debug_dump(&err);
}
