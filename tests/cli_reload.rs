//! Hot reload, `--no-watch`, version pins and a shared compile cache, through
//! the `host` binary.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::*;

/// An interactive session whose stdout and stderr lines arrive on one channel.
struct Session {
    child: Child,
    lines: Receiver<String>,
}

impl Session {
    fn start(mut cmd: Command) -> Session {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("host starts");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for stream in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err) as Box<dyn std::io::Read + Send>,
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        Session { child, lines }
    }

    fn send(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits (at most 30 s) for a line containing `needle`; returns it.
    fn expect(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    panic!(
                        "no line with {needle:?}; output so far:\n{}",
                        seen.join("\n")
                    )
                }
            }
        }
    }

    /// Lines that arrive within `wait`.
    fn drain(&self, wait: Duration) -> Vec<String> {
        let deadline = Instant::now() + wait;
        let mut seen = Vec::new();
        while let Ok(line) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            seen.push(line);
        }
        seen
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
