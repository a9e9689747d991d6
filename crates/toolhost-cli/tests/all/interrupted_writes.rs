//! Interrupted writes never stop the host from starting: leftovers of a
//! compile-cache write or of a policy write-back cut short are skipped or
//! repaired, while a policy file that was itself cut short stops the host with
//! its location (the host never runs on half a policy).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::*;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `host -v --plugins target/plugins [--policy FILE] tools`, with the compile cache in `cache`.
fn list_tools(cache: &Path, policy: Option<&Path>) -> Output {
    let mut cmd = host(cache);
    cmd.arg("-v").arg("--plugins").arg(plugins_dir());
    if let Some(p) = policy {
        cmd.arg("--policy").arg(p);
    }
    cmd.arg("tools").output().expect("host runs")
}

/// Asserts a successful start that listed the example plugins' tools.
fn assert_lists_tools(o: &Output) {
    assert!(o.status.success(), "{}", stderr(o));
    let out = stdout(o);
    for tool in ["calculate", "case_convert", "http_get", "read_file"] {
        assert!(out.contains(tool), "{tool} is not listed:\n{out}");
    }
}

/// The compiled entries of a cache directory, sorted.
fn cwasm_entries(cache: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    entries.sort();
    entries
}

#[test]
fn damaged_compile_cache_entries_are_recompiled_and_leftovers_ignored() {
    let cache = tempfile::tempdir().unwrap();
    let first = list_tools(cache.path(), None);
    assert_lists_tools(&first);
    assert!(
        stderr(&first).contains("(6 compiled, 0 from cache)"),
        "{}",
        stderr(&first)
    );
    let entries = cwasm_entries(cache.path());
    assert_eq!(entries.len(), 6, "{entries:?}");

    // A write cut in half, a write that never got its bytes, the temporary
    // file of an interrupted write, and origin lists full of garbage.
    let whole = std::fs::read(&entries[0]).unwrap();
    std::fs::write(&entries[0], &whole[..whole.len() / 2]).unwrap();
    std::fs::write(&entries[1], b"").unwrap();
    std::fs::write(
        cache.path().join(format!(".tmp-{}-0", u32::MAX)),
        &whole[..whole.len() / 3],
    )
    .unwrap();
    let origins = entries[2].with_extension("origins");
    std::fs::write(&origins, [0xff, 0xfe, 0x00, b'\n', 0xc3, 0x28]).unwrap();
    std::fs::write(
        cache.path().join(format!("{}.origins", "0".repeat(64))),
        "\0\0\0 not a path\n",
    )
    .unwrap();

    let second = list_tools(cache.path(), None);
    assert_lists_tools(&second);
    assert_eq!(stdout(&second), stdout(&first), "the same tools");
    assert!(
        stderr(&second).contains("(2 compiled, 4 from cache)"),
        "only the two damaged entries are recompiled: {}",
        stderr(&second)
    );
    assert_eq!(
        std::fs::read(&entries[0]).unwrap().len(),
        whole.len(),
        "the truncated entry was rewritten whole"
    );

    let third = list_tools(cache.path(), None);
    assert_lists_tools(&third);
    assert!(
        stderr(&third).contains("(0 compiled, 6 from cache)"),
        "the rewritten entries are valid: {}",
        stderr(&third)
    );
}

/// A valid policy with a comment, two rules, a plugin grant and an
/// `always-allow` list (so that cutting it anywhere lands inside something).
const POLICY: &str = r#"# Project policy.
default = "allow"
always-allow = ["calculate", "case_convert"]

[[rules]]
tool = "http_get"
decision = "deny"
reason = "no network from this project"

[[rules]]
tool = "read_file"
decision = "ask"
"#;

#[test]
fn a_stray_temporary_file_of_an_interrupted_write_back_does_not_stop_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    // `persist_always_allow` writes `.policy-XXXXXX.tmp` and renames it over the
    // policy: interrupted before the rename, the half-written file stays behind.
    let half = &POLICY[..POLICY.find("\"no network").unwrap() + 4];
    std::fs::write(dir.path().join(".policy-Ab3xY9.tmp"), half).unwrap();

    let o = list_tools(&root().join("target/test-cache"), Some(&policy));
    assert_lists_tools(&o);
    assert_eq!(
        std::fs::read_to_string(&policy).unwrap(),
        POLICY,
        "the policy is left as it was"
    );
}

#[test]
fn a_policy_file_cut_short_stops_the_host_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    // Each cut ends inside a token: a string, an array, a table header, a key.
    let cuts = [
        ("tool = \"http_g", 6),
        ("\"case_conv", 3),
        ("[[ru", 10),
        ("deci", 12),
    ];
    for (end, line) in cuts {
        let at = POLICY.rfind(end).unwrap() + end.len();
        std::fs::write(&policy, &POLICY[..at]).unwrap();

        let o = list_tools(&root().join("target/test-cache"), Some(&policy));
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "cut after {end:?}: {err}");
        // `<file>:<line>:<column>: <message>`
        let location = format!("{}:{line}:", policy.display());
        let Some(rest) = err.find(&location).map(|i| &err[i + location.len()..]) else {
            panic!("cut after {end:?}: no {location} in: {err}");
        };
        let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
        assert!(
            !column.is_empty() && rest[column.len()..].starts_with(':'),
            "cut after {end:?}: no column in: {err}"
        );
        assert!(
            err.contains("does not start with a policy it cannot read fully"),
            "{err}"
        );
        assert!(
            o.stdout.is_empty(),
            "cut after {end:?}: no tools listed from half a policy: {}",
            stdout(&o)
        );
    }
}
