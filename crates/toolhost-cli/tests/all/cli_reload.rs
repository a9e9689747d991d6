//! Hot reload, `--no-watch`, version pins and a shared compile cache, through
//! the `host` binary.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use crate::support::*;

/// Copies `from` over `dir/calc.wasm` as a build would (staged, then renamed).
fn rebuild_calc(dir: &Path, from: &Path) {
    let staged = dir.join("calc.wasm.part");
    std::fs::copy(from, &staged).unwrap();
    std::fs::rename(&staged, dir.join("calc.wasm")).unwrap();
}

#[test]
fn a_rebuilt_plugin_is_reloaded_in_the_interactive_session_with_a_notice() {
    let work = tempfile::tempdir().unwrap();
    let plugins = work.path().join("plugins");
    copy_plugin(&plugins_dir(), "calc", &plugins);
    let mut cmd = host(&root().join("target/test-cache"));
    // A relative plugin directory, resolved against the working directory.
    cmd.current_dir(work.path()).args(["--plugins", "plugins"]);
    let mut session = Session::start(cmd);
    session.expect("tools loaded");
    session.send(r#"/call calculate {"expression": "20+22"}"#);
    session.expect("42");

    rebuild_calc(&plugins, &fixtures_dir().join("dup-calc.wasm"));
    let notice = session.expect("[plugins] reloaded calc");
    assert!(notice.contains("calc@0.1.0 -> 0.1.0"), "{notice}");
    session.send(r#"/call calculate {"expression": "20+22"}"#);
    session.expect("dup");

    // A broken write is reported and the last good version keeps serving.
    std::fs::write(plugins.join("calc.wasm"), b"garbage").unwrap();
    let failure = session.expect("[plugins]");
    assert!(
        failure.contains("did not load") && failure.contains("keeps serving"),
        "{failure}"
    );
    session.send(r#"/call calculate {"expression": "1"}"#);
    session.expect("dup");
}

/// A file broken during a reload is reported once, by the session's
/// `[plugins]` line (issue 47: a timestamped `WARN` log line said it too).
#[test]
fn a_file_broken_during_a_reload_is_reported_once() {
    let work = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", work.path());
    let mut cmd = host(&root().join("target/test-cache"));
    cmd.arg("--plugins").arg(work.path());
    let session = Session::start(cmd);
    session.expect("tools loaded");
    std::fs::write(work.path().join("calc.wasm"), b"garbage").unwrap();
    let lines = session.drain(Duration::from_secs(4));
    let said: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("calc.wasm") && l.contains("did not load"))
        .collect();
    assert_eq!(said.len(), 1, "{lines:#?}");
    assert!(said[0].starts_with("[plugins]"), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.contains("WARN")), "{lines:#?}");
}

/// Issue 59: a read of a plugin's files (an MCP client's own `mcp list`
/// starting another host on the same directory, a `cat`) made every
/// watching host reload every 75 ms for ever, because the reload's own
/// reads were seen as changes. A read reloads nothing and looks at nothing;
/// one edit reloads once; writing the same bytes again reloads nothing;
/// and nothing feeds itself afterwards. The log counts both loads and the
/// looks that found a file unchanged (`toolhost_runtime::reload` at debug).
#[test]
fn reading_the_plugin_files_reloads_nothing_and_one_edit_reloads_once() {
    let work = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", work.path());
    let mut cmd = host(&root().join("target/test-cache"));
    cmd.env("RUST_LOG", "warn,toolhost_runtime::reload=debug")
        .arg("--plugins")
        .arg(work.path())
        .args(["serve", "--listen", "127.0.0.1:0"]);
    let session = Session::start(cmd);
    session.expect("loaded plugins");
    let count = |lines: &[String], what: &str| lines.iter().filter(|l| l.contains(what)).count();
    let (loads, looks) = ("loaded plugins", "contents are unchanged");
    let settled = session.drain(Duration::from_secs(1));
    assert_eq!(count(&settled, loads), 0, "{settled:#?}");

    let manifest = work.path().join("calc.toml");
    for file in [work.path().join("calc.wasm"), manifest.clone()] {
        std::fs::read(&file).unwrap();
    }
    let after_reads = session.drain(Duration::from_secs(3));
    assert_eq!(count(&after_reads, loads), 0, "{after_reads:#?}");
    assert_eq!(count(&after_reads, looks), 0, "{after_reads:#?}");

    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, format!("{text}\n# edited\n")).unwrap();
    let after_edit = session.drain(Duration::from_secs(3));
    assert_eq!(count(&after_edit, loads), 1, "{after_edit:#?}");

    let same = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, same).unwrap();
    let after_same = session.drain(Duration::from_secs(2));
    assert_eq!(count(&after_same, loads), 0, "{after_same:#?}");

    let quiet = session.drain(Duration::from_secs(2));
    assert_eq!(count(&quiet, loads) + count(&quiet, looks), 0, "{quiet:#?}");
}

#[test]
fn no_watch_leaves_the_loaded_plugins_as_they_are() {
    let work = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", work.path());
    let mut cmd = host(&root().join("target/test-cache"));
    cmd.arg("--plugins").arg(work.path()).arg("--no-watch");
    let mut session = Session::start(cmd);
    session.expect("tools loaded");
    rebuild_calc(work.path(), &fixtures_dir().join("dup-calc.wasm"));
    let quiet = session.drain(Duration::from_millis(800));
    assert!(!quiet.iter().any(|l| l.contains("[plugins]")), "{quiet:?}");
    session.send(r#"/call calculate {"expression": "20+22"}"#);
    session.expect("42");
}

#[test]
fn tools_and_plugins_show_which_version_was_chosen_and_why() {
    let work = tempfile::tempdir().unwrap();
    for (file, version) in [("calc-old", "1.1.0"), ("calc-new", "2.0.0")] {
        std::fs::copy(
            plugins_dir().join("calc.wasm"),
            work.path().join(format!("{file}.wasm")),
        )
        .unwrap();
        std::fs::write(
            work.path().join(format!("{file}.toml")),
            format!("name = \"calc\"\nversion = \"{version}\"\n"),
        )
        .unwrap();
    }
    let out = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(work.path())
        .arg("plugins")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("calc@2.0.0"), "{text}");
    assert!(
        text.contains("the highest version among 2.0.0, 1.1.0"),
        "{text}"
    );

    let config = work.path().join("host.toml");
    std::fs::write(&config, "[versions]\ncalc = \"~1.1\"\n").unwrap();
    let out = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(work.path())
        .arg("--config")
        .arg(&config)
        .arg("tools")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("calculate  calc@1.1.0"), "{text}");
    assert!(text.contains("pinned to ~1.1"), "{text}");
}

#[test]
fn two_hosts_starting_together_share_one_empty_cache() {
    let cache = tempfile::tempdir().unwrap();
    let start = || {
        host(cache.path())
            .arg("--plugins")
            .arg(plugins_dir())
            .args(["call", "calculate", r#"{"expression": "6*7"}"#])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
    }
    let out = host(cache.path())
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["-v", "tools"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("0 compiled"), "{log}");
}
