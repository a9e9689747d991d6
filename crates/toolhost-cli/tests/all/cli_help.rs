//! Help that fits the command, shell completions and man pages, all from
//! the same clap definitions (issue 47).

use std::process::Output;

use crate::support::*;

fn shared_cache() -> std::path::PathBuf {
    root().join("target/test-cache")
}

fn out(args: &[&str]) -> Output {
    host(&shared_cache()).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn each_commands_help_shows_the_flags_it_uses_under_headings() {
    let o = out(&["check", "--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    assert!(!help.contains("--temperature"), "{help}");
    assert!(!help.contains("--allow-dir"), "{help}");
    assert!(help.contains("--cache-dir"), "{help}");
    assert!(
        help.lines().count() < 40,
        "{} lines:\n{help}",
        help.lines().count()
    );

    let help = stdout(&out(&["call", "--help"]));
    assert!(
        help.contains("Grants:") && help.contains("--allow-dir"),
        "{help}"
    );
    assert!(
        help.contains("Policy and approvals:") && help.contains("--policy"),
        "{help}"
    );
    assert!(!help.contains("--temperature"), "{help}");

    let help = stdout(&out(&["run", "--help"]));
    assert!(
        help.contains("Model:") && help.contains("--temperature"),
        "{help}"
    );

    let help = stdout(&out(&["--help"]));
    for heading in ["Plugins:", "Grants:", "Policy and approvals:", "Model:"] {
        assert!(help.contains(heading), "{heading}: {help}");
    }
    // A flag a command does not show is still accepted (and changes nothing).
    let o = out(&["check", "--temperature", "0.2", "nofile.wasm"]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn new_help_names_every_language() {
    let help = stdout(&out(&["new", "--help"]));
    assert!(
        help.starts_with("Create a plugin project")
            && help
                .lines()
                .next()
                .unwrap_or_default()
                .contains("Rust, Python, JavaScript or Go"),
        "{help}"
    );
}

#[test]
fn completions_for_bash_zsh_and_fish_name_the_commands_and_their_flags() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef host"),
        ("fish", "complete -c host"),
    ] {
        let o = out(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: {script}");
        for word in ["explain", "allow-dir", "completions"] {
            assert!(script.contains(word), "{shell} completes {word}");
        }
    }
    // bash reads the script without an error (from a file: the script is
    // longer than one argument may be).
    let o = out(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("host.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

#[test]
fn man_prints_roff_pages_and_writes_one_per_command() {
    let page = stdout(&out(&["man"]));
    assert!(
        page.starts_with(".ie") || page.contains(".TH host 1"),
        "{page}"
    );
    assert!(page.contains("explain"), "{page}");
    let page = stdout(&out(&["man", "call"]));
    assert!(page.contains(".TH host-call"), "{page}");

    let dir = tempfile::tempdir().unwrap();
    let o = out(&["man", "--dir", &dir.path().display().to_string()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for page in ["host.1", "host-call.1", "host-explain.1"] {
        assert!(dir.path().join(page).is_file(), "{page}");
    }
    let o = out(&["man", "nosuch"]);
    assert_eq!(o.status.code(), Some(1));
}
