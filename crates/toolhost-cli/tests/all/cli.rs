//! End-to-end behaviour of the `host` binary with the real example plugins.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use crate::support::*;

fn shared_cache() -> std::path::PathBuf {
    root().join("target/test-cache")
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("host runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn call_prints_the_output_on_stdout() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "calculate", r#"{"expression":"2*(3+4)"}"#]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "14\n");
}

#[test]
fn the_toolhost_binary_is_the_same_command() {
    let o = run(
        host_command(env!("CARGO_BIN_EXE_toolhost"), &shared_cache())
            .arg("--plugins")
            .arg(plugins_dir())
            .args(["call", "calculate", r#"{"expression":"2*(3+4)"}"#]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "14\n");
}

#[test]
fn call_with_details_and_json() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["call", "word_count", r#"{"text":"a b c"}"#, "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["details"]["words"], 3);
    assert_eq!(v["plugin"], "text");
}

#[test]
fn tools_json_lists_every_tool_with_plugin_version_and_schema() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["tools", "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tools = v.as_array().unwrap();
    let calc = tools.iter().find(|t| t["name"] == "calculate").unwrap();
    assert_eq!(calc["plugin"], "calc");
    assert_eq!(calc["plugin_version"], "0.1.0");
    assert_eq!(calc["input_schema"]["type"], "object");
    assert!(tools.len() >= 6);
}

#[test]
fn each_kind_of_failure_has_its_own_exit_code() {
    let dir = plugins_dir();
    let cases: [(&str, &str, i32); 4] = [
        ("calculat", "{}", 3),
        ("calculate", r#"{"expression": 7}"#, 4),
        ("calculate", r#"{"expression": "1/0"}"#, 5),
        ("calculate", "{not json", 4),
    ];
    for (tool, args, code) in cases {
        let o = run(host(&shared_cache())
            .arg("--plugins")
            .arg(&dir)
            .args(["call", tool, args]));
        assert_eq!(o.status.code(), Some(code), "{tool} {args}: {}", stderr(&o));
        assert!(stderr(&o).contains("error:"), "{}", stderr(&o));
        assert!(
            stdout(&o).is_empty(),
            "errors stay off stdout: {}",
            stdout(&o)
        );
    }
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(fixtures_dir().join("hostile.wasm"))
        .args(["--timeout-ms", "200", "call", "spin"]));
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    assert!(stderr(&o).contains("timed out"), "{}", stderr(&o));
}

#[test]
fn check_describes_a_good_plugin_and_explains_a_bad_one() {
    let o = run(host(&shared_cache())
        .arg("check")
        .arg(plugins_dir().join("fs.wasm")));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("fs@0.1.0"), "{out}");
    assert!(
        out.contains("contract:  toolhost:plugin@0.4.0 (the newest)"),
        "{out}"
    );
    // A plugin built against an older contract is named as such, and runs.
    for (fixture, version) in [
        ("legacy-v0-1", "0.1.0"),
        ("legacy-v0-2", "0.2.0"),
        ("legacy-v0-3", "0.3.0"),
    ] {
        let o = run(host(&shared_cache())
            .arg("check")
            .arg(fixtures_dir().join(format!("{fixture}.wasm"))));
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stdout(&o).contains(&format!(
                "contract:  toolhost:plugin@{version} (an older one, run as it is; the newest is 0.4.0)"
            )),
            "{}",
            stdout(&o)
        );
    }
    assert!(
        out.contains("read_file") && out.contains("dirs=read-only"),
        "{out}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let core = tmp.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap();
    let o = run(host(&shared_cache()).arg("check").arg(&core));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("core WebAssembly module"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_broken_plugin_is_reported_and_the_others_still_serve() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    std::fs::write(tmp.path().join("broken.wasm"), b"garbage").unwrap();
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(tmp.path())
        .args(["call", "calculate", r#"{"expression":"1+1"}"#]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2\n");
    assert!(
        stderr(&o).contains("broken.wasm not loaded"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_second_start_compiles_nothing() {
    let cache = tempfile::tempdir().unwrap();
    let start = || {
        run(host(cache.path())
            .arg("-v")
            .arg("--plugins")
            .arg(plugins_dir())
            .arg("tools"))
    };
    let first = start();
    assert!(
        stderr(&first).contains("(6 compiled, 0 from cache)"),
        "{}",
        stderr(&first)
    );
    let second = start();
    assert!(
        stderr(&second).contains("(0 compiled, 6 from cache)"),
        "{}",
        stderr(&second)
    );
}

/// `host call read_file ARGS` with fs granted `scene`'s directory.
fn read_file_in(scene: &FsScene, args: &str) -> Output {
    let granted = format!("fs={}", scene.granted.display());
    run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["--allow-dir", &granted, "call", "read_file", args]))
}

#[test]
fn fs_grants_come_from_the_command_line() {
    let scene = fs_scene();
    let o = read_file_in(&scene, r#"{"path":"hello.txt"}"#);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("line one"));
    let o = read_file_in(&scene, r#"{"path":"../secret.txt"}"#);
    // `read_file` names its path argument (a per-call grant): the host
    // refuses a path outside the grant before the plugin runs.
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("outside the directories granted to fs"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("TOP SECRET"));
}

#[test]
fn read_file_past_the_end_names_the_offset_the_model_sent_not_a_clamped_one() {
    // A 0.5B model asked for offset 3·10¹⁵; on wasm32 the plugin's `usize`
    // clamped it, and the error named 4294967295, a number it never sent.
    let scene = fs_scene();
    let o = read_file_in(&scene, r#"{"path":"hello.txt","offset":3000000000000000}"#);
    assert!(!o.status.success());
    let out = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        out.contains("offset 3000000000000000 is past the end"),
        "{out}"
    );
    assert!(out.contains("which has"), "{out}");
    assert!(!out.contains("4294967295"), "{out}");
}

#[test]
fn the_interactive_session_lists_and_calls_tools_without_a_model() {
    let mut child = host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"/tools\n/call calculate {\"expression\": \"6*7\"}\nhello\n/quit\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("read_file"), "{out}");
    assert!(out.contains("\n42\n") || out.contains("42\n("), "{out}");
    assert!(out.contains("Tools-only mode"), "{out}");
    assert!(
        out.contains("No model is configured"),
        "chat input without a model: {out}"
    );
}

#[test]
fn plugins_shows_the_limits_each_plugin_runs_under() {
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["plugins", "--json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let calc = v
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "calc")
        .unwrap();
    // calc's manifest asks for a 1 s timeout; the rest are defaults.
    assert_eq!(calc["limits"]["timeout-ms"], 1000);
    assert_eq!(calc["limits"]["max-instances"], 32);

    // The host's configuration wins over the manifest.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, "[plugins.calc]\nlimits = { timeout-ms = 250 }\n").unwrap();
    let o = run(host(&shared_cache())
        .arg("--plugins")
        .arg(plugins_dir())
        .arg("--config")
        .arg(&config)
        .arg("plugins"));
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let calc = text
        .split("\ncalc@")
        .nth(1)
        .or_else(|| text.strip_prefix("calc@"));
    let calc = calc.unwrap_or_else(|| panic!("{text}"));
    let limits = calc.lines().find(|l| l.trim_start().starts_with("limits:"));
    assert!(
        limits.is_some_and(|l| l.contains("timeout-ms=250") && l.contains("max-instances=32")),
        "{text}"
    );
}

#[test]
fn a_plugin_whose_code_changed_runs_without_its_grants_until_trusted() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("plugins");
    copy_plugin(&fixtures_dir(), "hostile-env", &dir);
    let lock = work.path().join("toolhost.lock");
    let host_with = |args: &[&str]| {
        run(host(&shared_cache())
            .env("TOOLHOST_LOCK", &lock)
            .arg("--plugins")
            .arg(&dir)
            .arg("--allow-env")
            .arg("hostile-env=TOOLHOST_TEST_SECRET=hunter2")
            .args(args))
    };
    let read_secret = ["call", "env", r#"{"name":"TOOLHOST_TEST_SECRET"}"#];
    let o = host_with(&read_secret);
    assert!(stdout(&o).contains("hunter2"), "first use: {}", stderr(&o));
    assert!(lock.is_file(), "the first grant writes the lock file");

    // Another component claims the name.
    std::fs::copy(
        fixtures_dir().join("hostile.wasm"),
        dir.join("hostile-env.wasm"),
    )
    .unwrap();
    let o = host_with(&["plugins"]);
    let listing = stdout(&o);
    assert!(listing.contains("digest:    sha256:"), "{listing}");
    assert!(listing.contains("WITHHELD"), "{listing}");
    let o = host_with(&read_secret);
    assert!(!stdout(&o).contains("hunter2"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("host trust hostile-env"),
        "{}",
        stderr(&o)
    );

    let o = host_with(&["trust", "hostile-env"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("sha256:"), "{}", stdout(&o));
    let o = host_with(&read_secret);
    assert!(stdout(&o).contains("hunter2"), "trusted: {}", stderr(&o));

    // `--dev` accepts a rebuild at once.
    copy_plugin(&fixtures_dir(), "hostile-env", &dir);
    let o = host_with(&["--dev", "call", "env", r#"{"name":"TOOLHOST_TEST_SECRET"}"#]);
    assert!(stdout(&o).contains("hunter2"), "dev mode: {}", stderr(&o));
}

#[test]
fn trust_follows_the_plugins_directory_not_the_directory_host_starts_in() {
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("plugins");
    copy_plugin(&fixtures_dir(), "hostile-env", &dir);
    let state = work.path().join("state");
    let (here, there) = (work.path().join("here"), work.path().join("there"));
    for d in [&here, &there] {
        std::fs::create_dir_all(d).unwrap();
    }
    // No `--lock`: the default, in the user's state directory.
    let host_in = |cwd: &std::path::Path, args: &[&str]| {
        run(host(&shared_cache())
            .env_remove("TOOLHOST_LOCK")
            .env("XDG_STATE_HOME", &state)
            .current_dir(cwd)
            .arg("--plugins")
            .arg(&dir)
            .arg("--allow-env")
            .arg("hostile-env=TOOLHOST_TEST_SECRET=hunter2")
            .args(args))
    };
    let read_secret = ["call", "env", r#"{"name":"TOOLHOST_TEST_SECRET"}"#];
    let o = host_in(&here, &read_secret);
    assert!(stdout(&o).contains("hunter2"), "first use: {}", stderr(&o));
    assert!(
        !here.join("toolhost.lock").exists(),
        "no lock in the working directory"
    );
    let locks: Vec<_> = std::fs::read_dir(state.join("toolhost/locks"))
        .expect("the lock file is in the state directory")
        .collect();
    assert_eq!(locks.len(), 1, "{locks:?}");

    // Other code under the name, and `host` started somewhere else: the
    // same lock file, so the grant is withheld (a lock per working
    // directory would have started afresh and handed it over).
    std::fs::copy(
        fixtures_dir().join("hostile.wasm"),
        dir.join("hostile-env.wasm"),
    )
    .unwrap();
    let o = host_in(&there, &["plugins"]);
    assert!(stdout(&o).contains("WITHHELD"), "{}", stdout(&o));
    assert!(
        !there.join("toolhost.lock").exists(),
        "nothing written here"
    );
    // An old lock file in the working directory is not read, and says so.
    std::fs::write(there.join("toolhost.lock"), "").unwrap();
    let o = host_in(&there, &["plugins"]);
    assert!(
        stderr(&o).contains("is not read any more"),
        "{}",
        stderr(&o)
    );
    // `--lock` still chooses another file.
    let o = host_in(
        &there,
        &[
            "--lock",
            work.path().join("own.lock").to_str().unwrap(),
            "plugins",
        ],
    );
    assert!(!stdout(&o).contains("WITHHELD"), "{}", stdout(&o));
}
