//! `host new NAME --lang rust|python|js|go`: the scaffold builds with the
//! language's one build command (run here with the toolchains `cargo xtask
//! test` installs under `target/tools/`), passes `host check`, answers
//! `host call`, and its own test passes. A missing toolchain fails the test,
//! naming `cargo xtask test`; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::*;

const HOW: &str = "run the tests with `cargo xtask test`, which installs the plugin toolchains \
                   (the wasm32-wasip2 target, componentize-py, componentize-js, Go, wit-bindgen, \
                   wasm-tools) under target/tools/";

/// Runs `cmd` and returns its stdout; a failure shows both streams.
fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}; {HOW}", cmd.get_program()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}); {HOW}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn cache() -> PathBuf {
    root().join("target/test-cache")
}

/// `host new demo --lang LANG --dir PARENT` into a fresh temporary parent.
fn scaffold(lang: &str) -> (tempfile::TempDir, PathBuf) {
    let parent = tempfile::tempdir().unwrap();
    let out = run(
        host(&cache())
            .args(["new", "demo", "--lang", lang, "--dir"])
            .arg(parent.path()),
        "host new",
    );
    let dir = parent.path().join("demo");
    assert!(out.contains(&dir.display().to_string()), "{out}");
    for file in ["demo.toml", "README.md"] {
        assert!(dir.join(file).is_file(), "{file} in {}", dir.display());
    }
    (parent, dir)
}

/// `host check DIR/demo.wasm` passes, and `host call greet` answers with
/// text and structured content, greeting as `--set demo.greeting=…` says.
fn check_and_call(dir: &Path) {
    let wasm = dir.join("demo.wasm");
    let out = run(host(&cache()).arg("check").arg(&wasm), "host check");
    assert!(out.contains("demo@0.1.0"), "{out}");
    assert!(out.contains("greet"), "{out}");

    let out = run(
        host(&cache()).arg("--plugins").arg(dir).args([
            "call",
            "greet",
            r#"{"name":"Ada"}"#,
            "--json",
        ]),
        "host call greet",
    );
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(r["plugin"], "demo", "{r}");
    assert_eq!(r["output"], "Hello, Ada!", "{r}");
    assert_eq!(r["structured"]["greeting"], "Hello, Ada!", "{r}");

    // The greeting is a config value the host may set (the plugin guide's
    // `--set NAME.greeting=Bonjour`).
    let out = run(
        host(&cache()).arg("--plugins").arg(dir).args([
            "--set",
            "demo.greeting=Bonjour",
            "call",
            "greet",
            r#"{"name":"Ada"}"#,
        ]),
        "host --set demo.greeting=Bonjour call greet",
    );
    assert_eq!(out, "Bonjour, Ada!\n");

    // The scaffold's tool tells a blank name apart from a failure.
    let o = host(&cache())
        .arg("--plugins")
        .arg(dir)
        .args(["call", "greet", r#"{"name":"  "}"#, "--json"])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["error"]["kind"], "tool-invalid-arguments", "{r}");
}

#[test]
fn a_new_rust_plugin_builds_passes_host_check_and_answers() {
    let (_parent, dir) = scaffold("rust");
    let cargo_toml = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let sdk = root().join("crates").join("toolhost-sdk");
    let sdk = sdk.canonicalize().unwrap();
    assert!(
        cargo_toml.contains(&sdk.display().to_string()),
        "the SDK of this repository by default: {cargo_toml}"
    );

    // One target directory shared by every run, so the SDK's dependencies
    // are compiled once (as `cargo xtask plugins` shares target/).
    let target = root().join("target").join("scaffold");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    run(
        Command::new(&cargo)
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .args(["build", "--release", "--target", "wasm32-wasip2"]),
        "cargo build --release --target wasm32-wasip2 (the scaffold's build command)",
    );
    std::fs::copy(
        target.join("wasm32-wasip2/release/demo.wasm"),
        dir.join("demo.wasm"),
    )
    .unwrap();
    check_and_call(&dir);

    let out = run(
        Command::new(&cargo)
            .current_dir(&dir)
            .env("CARGO_TARGET_DIR", &target)
            .args(["test", "--", "--format", "terse"]),
        "cargo test (the scaffold's own test)",
    );
    assert!(out.contains("test result: ok. 3 passed"), "{out}");
}

#[test]
fn a_new_python_plugin_builds_passes_host_check_and_answers() {
    let (_parent, dir) = scaffold("python");
    for file in ["app.py", "test_app.py", "toolhost_plugin.py", "plugin.wit"] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    let componentize = outside_tool("py/bin/componentize-py");
    run(
        Command::new(componentize).current_dir(&dir).args([
            "-d",
            "plugin.wit",
            "-w",
            "tool-plugin",
            "componentize",
            "app",
            "-p",
            ".",
            "-o",
            "demo.wasm",
        ]),
        "componentize-py (the scaffold's build command)",
    );
    check_and_call(&dir);

    let python = std::env::var_os("TOOLHOST_TEST_PYTHON")
        .map_or_else(|| outside_tool("py/bin/python"), PathBuf::from);
    let o = Command::new(python)
        .current_dir(&dir)
        .args(["-m", "unittest", "-v"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "python -m unittest: {err}");
    assert!(err.contains("Ran 3 tests"), "{err}");
}

#[test]
fn a_new_javascript_plugin_builds_passes_host_check_and_answers() {
    let (_parent, dir) = scaffold("js");
    for file in [
        "app.js",
        "app.test.mjs",
        "toolhost-plugin.js",
        "plugin.wit",
        "build.mjs",
        "package.json",
        "test/register.mjs",
        "test/host-stub.mjs",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    // What `npm install` puts there: componentize-js, from target/tools/.
    let node_modules =
        outside_tool("node/node_modules/@bytecodealliance/componentize-js/package.json")
            .ancestors()
            .nth(3)
            .unwrap()
            .to_owned();
    std::os::unix::fs::symlink(&node_modules, dir.join("node_modules")).unwrap();
    run(
        Command::new("node").current_dir(&dir).arg("build.mjs"),
        "node build.mjs (the scaffold's build command)",
    );
    check_and_call(&dir);

    let out = run(
        Command::new("node").current_dir(&dir).args([
            "--import",
            "./test/register.mjs",
            "--test",
            "app.test.mjs",
        ]),
        "node --test (the scaffold's own test)",
    );
    assert!(out.contains("# pass 2"), "{out}");
    assert!(out.contains("# fail 0"), "{out}");
}

#[test]
fn a_new_go_plugin_builds_passes_host_check_and_answers() {
    let (_parent, dir) = scaffold("go");
    for file in [
        "tool.go",
        "greet.go",
        "greet_test.go",
        "go.mod",
        "build.sh",
        "plugin.wit",
    ] {
        assert!(dir.join(file).is_file(), "{file}");
    }
    // The toolchain `cargo xtask plugins-foreign` installs; Go's caches and
    // no network, as xtask builds the Go plugins.
    let go = outside_tool("go/bin/go");
    let tools = go.ancestors().nth(3).unwrap().to_owned();
    let go_env = |cmd: &mut Command| {
        cmd.current_dir(&dir)
            .env("GOTOOLCHAIN", "local")
            .env("GOPROXY", "off")
            .env("GOSUMDB", "off")
            .env("GOTELEMETRY", "off")
            .env("GOPATH", tools.join("gopath"))
            .env("GOCACHE", tools.join("gocache"));
    };
    let mut build = Command::new("sh");
    go_env(&mut build);
    let out = run(
        build.arg("build.sh").env("TOOLHOST_TOOLS", &tools),
        "sh build.sh (the scaffold's build command)",
    );
    assert!(out.contains("built demo.wasm"), "{out}");
    check_and_call(&dir);

    let mut test = Command::new(&go);
    go_env(&mut test);
    let out = run(
        test.args(["test", "-v", "./..."]),
        "go test (the scaffold's own test)",
    );
    assert_eq!(out.matches("--- PASS").count(), 3, "{out}");
    assert!(!out.contains("--- FAIL"), "{out}");

    // A missing tool is named, not a shell error.
    let mut build = Command::new("sh");
    go_env(&mut build);
    let o = build
        .arg("build.sh")
        .env("TOOLHOST_TOOLS", &tools)
        .env("WASM_TOOLS", dir.join("no-such-wasm-tools"))
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no-such-wasm-tools not found"), "{err}");
}

#[test]
fn host_new_refuses_a_name_the_host_would_not_load() {
    let parent = tempfile::tempdir().unwrap();
    for (name, lang) in [
        ("../escape", "python"),
        ("has space", "js"),
        ("", "python"),
        (&*"x".repeat(65), "js"),
        ("dot.ted", "python"),
        // Cargo refuses these package names.
        ("1st", "rust"),
        ("fn", "rust"),
        ("test", "rust"),
    ] {
        let o = host(&cache())
            .args(["new", name, "--lang", lang, "--dir"])
            .arg(parent.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name:?} was accepted");
        assert!(err.contains("plugin name"), "{name:?}: {err}");
    }
    let left: Vec<_> = std::fs::read_dir(parent.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing written: {left:?}");
    assert!(!parent.path().parent().unwrap().join("escape").exists());
}

#[test]
fn host_new_never_overwrites_an_existing_directory() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("demo");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("app.py"), "mine").unwrap();
    let o = host(&cache())
        .args(["new", "demo", "--lang", "python", "--dir"])
        .arg(parent.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("already exists"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("app.py")).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing added");

    // Not through a symbolic link either.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), parent.path().join("linked")).unwrap();
    let o = host(&cache())
        .args(["new", "linked", "--lang", "js", "--dir"])
        .arg(parent.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}
