//! Grants and saved state that would miss without a word (issue 47): a
//! grant to a plugin that is not loaded (a typo) is warned about, and the
//! call that then misses says what to do; `host approvals list` with no
//! plugins directory finds the approvals there are; times are dates.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::json;

use crate::support::*;

fn shared_cache() -> std::path::PathBuf {
    root().join("target/test-cache")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_grant_to_a_plugin_that_is_not_loaded_is_warned_about_and_the_miss_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let o = host(&shared_cache())
        .current_dir(dir.path())
        .arg("--plugins")
        .arg(plugins_dir())
        .args([
            "--allow-dir",
            "fss=.",
            "--allow-env",
            "myplugin=API_KEY",
            "call",
            "read_file",
            r#"{"path":"notes.txt"}"#,
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("--allow-dir fss=.: no plugin named `fss` is loaded"),
        "{err}"
    );
    assert!(err.contains("did you mean `fs`?"), "{err}");
    assert!(
        err.contains("--allow-env myplugin=API_KEY: no plugin named `myplugin`"),
        "{err}"
    );
    assert!(
        err.contains("hint: fs asks for directories and has none granted: `--allow-dir fs=DIR`"),
        "{err}"
    );
}

/// `host` with the user's own state directory (`XDG_STATE_HOME`), as a
/// newcomer runs it: the default lock file and approvals store.
fn host_at_home(state: &std::path::Path, cwd: &std::path::Path) -> Command {
    let mut cmd = host(&shared_cache());
    cmd.env_remove("TOOLHOST_LOCK")
        .env("XDG_STATE_HOME", state)
        .env("HOME", state)
        .current_dir(cwd);
    cmd
}

#[test]
fn approvals_list_without_a_plugins_directory_shows_the_approvals_there_are_with_dates() {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("todo.txt"), "milk\n").unwrap();
    let policy = work.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rules]]\ntool = \"read_file\"\ndecision = \"ask\"\n",
    )
    .unwrap();
    let granted = format!("fs={}", data.display());
    let args = json!({"path": data.join("todo.txt").display().to_string()}).to_string();
    let mut child = host_at_home(home.path(), work.path())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["--allow-dir", &granted, "--policy"])
        .arg(&policy)
        .args(["--answers-from-stdin", "call", "read_file", &args])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"always\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));

    let o = host_at_home(home.path(), work.path())
        .args(["approvals", "list"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("no saved approvals"), "{out}");
    assert!(out.contains("read_file (fs sha256:"), "{out}");
    assert!(!out.contains("Unix time"), "dates, not seconds: {out}");
    let year = chrono_year();
    assert!(out.contains(&format!(" on {year}-")), "{out}");

    // The same with the plugins directory named: that directory's store.
    let o = host_at_home(home.path(), work.path())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["approvals", "list", "--json"])
        .output()
        .unwrap();
    let saved: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(saved.as_array().map(Vec::len), Some(1), "{saved}");
}

/// This year, as the system clock says (no date crate in the tests).
fn chrono_year() -> String {
    let out = Command::new("date").arg("+%Y").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_call_whose_grants_are_withheld_says_how_to_accept_the_code_not_how_to_grant() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    copy_plugin(&plugins_dir(), "fs", &plugins);
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("todo.txt"), "milk\n").unwrap();
    let call = || {
        host(&shared_cache())
            .arg("--plugins")
            .arg(&plugins)
            .arg("--lock")
            .arg(dir.path().join("toolhost.lock"))
            .arg("--allow-dir")
            .arg(format!("fs={}", data.display()))
            .args(["call", "read_file", r#"{"path":"todo.txt"}"#])
            .output()
            .unwrap()
    };
    let o = call();
    assert!(o.status.success(), "{}", stderr(&o));
    // Other code under the same name (a custom section appended: another
    // digest, the same tools).
    let mut wasm = std::fs::read(plugins.join("fs.wasm")).unwrap();
    wasm.extend_from_slice(b"\x00\x05\x04test");
    std::fs::write(plugins.join("fs.wasm"), wasm).unwrap();
    let o = call();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("hint: fs's grants are withheld") && err.contains("`host trust fs`"),
        "{err}"
    );
    assert!(!err.contains("has none granted"), "{err}");
}
