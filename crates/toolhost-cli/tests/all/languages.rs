//! Plugins written in other languages, built from source by the test command
//! with their own toolchains (`cargo xtask test`: componentize-py from PyPI
//! builds `plugins/python/*` into `target/plugins-py/`), loaded and called
//! like any Rust plugin.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::*;

/// `target/plugins-py`, with the Python plugins `cargo xtask test` builds.
fn python_plugins() -> PathBuf {
    let dir = root().join("target/plugins-py");
    assert!(
        dir.join("text-stats.wasm").is_file(),
        "{} is missing: run the tests with `cargo xtask test`, which builds the Python \
         plugins with componentize-py",
        dir.join("text-stats.wasm").display()
    );
    dir
}

/// `host call TOOL ARGS --json` over the Python plugins, with `extra` flags.
fn call(extra: &[&str], tool: &str, args: &str) -> (i32, Value) {
    let out = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(python_plugins())
        .args(extra)
        .args(["call", tool, args, "--json"])
        .output()
        .expect("host runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), value)
}

#[test]
fn a_python_plugin_returns_structured_output_through_host_call() {
    let (code, r) = call(&[], "text_stats", r#"{"text": "one two\nthree"}"#);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], "3 words, 2 lines, 13 characters");
    assert_eq!(r["plugin"], "text-stats");
    assert_eq!(r["structured"]["words"], 3);
}

#[test]
fn a_python_plugin_reads_only_what_it_was_granted() {
    let scene = fs_scene();
    let granted = scene.granted.display().to_string();
    let hello = scene.granted.join("hello.txt").display().to_string();
    let grant = format!("text-stats={granted}");

    let (code, r) = call(
        &["--allow-dir", &grant],
        "read_lines",
        &format!(r#"{{"path": "{hello}"}}"#),
    );
    assert_eq!(code, 0, "{r}");
    assert!(!r["output"].as_str().unwrap().is_empty(), "{r}");

    // Outside the grant, the file is not there for the plugin.
    let secret = scene.secret.display().to_string();
    let (code, r) = call(
        &["--allow-dir", &grant],
        "read_lines",
        &format!(r#"{{"path": "{secret}"}}"#),
    );
    assert_ne!(code, 0, "{r}");
    assert!(
        !r.to_string().contains("TOP SECRET"),
        "nothing of the file leaks: {r}"
    );

    // Without a grant, nothing at all.
    let (code, _) = call(&[], "read_lines", &format!(r#"{{"path": "{hello}"}}"#));
    assert_ne!(code, 0);
}
