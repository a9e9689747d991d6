//! Plugins written in other languages, built from source by the test command
//! with their own toolchains (`cargo xtask test`: componentize-py from PyPI
//! builds `plugins/python/*` into `target/plugins-py/`, componentize-js from
//! npm builds `plugins/js/*` into `target/plugins-js/`), loaded and called
//! like any Rust plugin.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::*;

/// `target/DIR`, holding `FILE`, built by `cargo xtask test`.
fn built(dir: &str, file: &str) -> PathBuf {
    let dir = root().join("target").join(dir);
    assert!(
        dir.join(file).is_file(),
        "{} is missing: run the tests with `cargo xtask test`, which builds the Python \
         and JavaScript plugins with componentize-py and componentize-js",
        dir.join(file).display()
    );
    dir
}

/// `host call TOOL ARGS --json` over the Python plugins, with `extra` flags.
fn call(extra: &[&str], tool: &str, args: &str) -> (i32, Value) {
    call_in(&built("plugins-py", "text-stats.wasm"), extra, tool, args)
}

/// `host call TOOL ARGS --json` over the plugins in `dir`.
fn call_in(dir: &std::path::Path, extra: &[&str], tool: &str, args: &str) -> (i32, Value) {
    let out = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(dir)
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

#[test]
fn a_javascript_plugin_answers_with_text_structured_output_and_typed_errors() {
    let dir = built("plugins-js", "text-case.wasm");
    let (code, r) = call_in(&dir, &[], "shout", r#"{"text": "hi"}"#);
    assert_eq!((code, r["output"].as_str()), (0, Some("HI")), "{r}");
    assert_eq!(r["plugin"], "text-case");

    let (code, r) = call_in(
        &dir,
        &[],
        "json_pick",
        r#"{"json": "{\"a\": {\"b\": [1, 2]}}", "path": "a.b"}"#,
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["structured"],
        serde_json::json!({"found": true, "value": [1, 2]})
    );

    // The plugin's own invalid-arguments error reaches the caller typed.
    let (code, r) = call_in(&dir, &[], "json_pick", r#"{"json": "{", "path": "a"}"#);
    assert_eq!(code, 4, "{r}");
    assert_eq!(r["error"]["kind"], "tool-invalid-arguments", "{r}");
}
