//! `host explain TOOL ARGS` and the policy's marks in `host tools`: what
//! would happen to a call and why, without running it (issue 47).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::*;

fn shared_cache() -> PathBuf {
    root().join("target/test-cache")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A granted directory with a file, a policy that asks before
/// `read_file` (rule 1, line 1) and denies `http_get` (rule 2, line 5), a
/// command hook on `read_file` that leaves a mark when it runs, and a lock
/// file of its own.
struct Scene {
    dir: tempfile::TempDir,
    data: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("todo.txt"), "milk\n").unwrap();
        let data = data.canonicalize().unwrap();
        std::fs::write(
            dir.path().join("policy.toml"),
            "[[rules]]\ntool = \"read_file\"\ndecision = \"ask\"\n\n\
             [[rules]]\ntool = \"http_get\"\ndecision = \"deny\"\nreason = \"no network here\"\n",
        )
        .unwrap();
        let mark = dir.path().join("hook-ran");
        std::fs::write(
            dir.path().join("host.toml"),
            format!(
                "[[hooks]]\nname = \"marker\"\ncommand = [\"sh\", \"-c\", \"touch {}; cat >/dev/null\"]\ntools = [\"read_file\"]\n",
                mark.display()
            ),
        )
        .unwrap();
        Scene { dir, data }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn host(&self, args: &[&str]) -> Command {
        let mut cmd = host(&shared_cache());
        cmd.arg("--plugins")
            .arg(plugins_dir())
            .arg("--policy")
            .arg(self.path("policy.toml"))
            .arg("--config")
            .arg(self.path("host.toml"))
            .arg("--lock")
            .arg(self.path("toolhost.lock"))
            .arg("--allow-dir")
            .arg(format!("fs={}", self.data.display()))
            .args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.host(args).output().unwrap()
    }
}

fn policy_file(scene: &Scene) -> String {
    scene.path("policy.toml").display().to_string()
}

#[test]
fn explain_says_what_a_call_would_meet_and_why_without_running_it() {
    let scene = Scene::new();
    let o = scene.run(&["explain", "read_file", r#"{"path":"todo.txt"}"#]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("read_file: would ask before it runs"),
        "{out}"
    );
    assert!(out.contains("fs@0.1.0"), "lookup: {out}");
    assert!(out.contains("sha256:"), "the digest: {out}");
    assert!(out.contains("arguments: valid"), "{out}");
    assert!(
        out.contains(&format!(
            "ask by rule 1 (read_file, ask) in {}:1",
            policy_file(&scene)
        )),
        "the rule, its file and line: {out}"
    );
    assert!(
        out.contains(&format!(
            "{} is a file",
            scene.data.join("todo.txt").display()
        )),
        "the per-call grant's path: {out}"
    );
    assert!(out.contains("hook:      marker (before"), "{out}");
    assert!(out.contains("none saved: you would be asked"), "{out}");
    assert!(
        out.contains(&format!("dirs {}:ro", scene.data.display())),
        "grants: {out}"
    );
    assert!(out.contains("limits:    timeout-ms=10000"), "{out}");
    assert!(
        !scene.path("hook-ran").exists(),
        "explain runs no hook (and no tool)"
    );

    // As JSON, the same steps.
    let o = scene.run(&["explain", "read_file", r#"{"path":"todo.txt"}"#, "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"], "asks");
    assert_eq!(v["policy"]["decision"], "ask");
    assert_eq!(v["plugin"]["name"], "fs");
    assert_eq!(v["path"]["found"], "file");
    assert_eq!(v["hooks"][0]["hook"], "marker");
}

#[test]
fn explain_gives_the_code_a_refused_call_would_get() {
    let scene = Scene::new();
    let o = scene.run(&["explain", "http_get", r#"{"url":"https://example.com/"}"#]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("would be denied by the policy"), "{out}");
    assert!(
        out.contains(&format!(
            "deny by rule 2 (http_get, deny) in {}:5: no network here",
            policy_file(&scene)
        )),
        "{out}"
    );

    let o = scene.run(&["explain", "calculate", r#"{"expression":7}"#]);
    assert_eq!(o.status.code(), Some(4));
    assert!(
        stdout(&o).contains("arguments: invalid: /expression"),
        "{}",
        stdout(&o)
    );

    let o = scene.run(&["explain", "read_file", r#"{"path":"../policy.toml"}"#]);
    assert_eq!(o.status.code(), Some(8));
    assert!(
        stdout(&o).contains("outside the directories granted to fs"),
        "{}",
        stdout(&o)
    );

    let o = scene.run(&["explain", "no_such_tool"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("no tool named"), "{}", stderr(&o));
}

#[test]
fn explain_names_the_saved_approval_that_would_answer() {
    let scene = Scene::new();
    let args = json!({"path": "todo.txt"}).to_string();
    let mut child = scene
        .host(&["--answers-from-stdin", "call", "read_file", &args])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"always\n").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let o = scene.run(&["explain", "read_file", &args]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(
        out.starts_with("read_file: would run (a saved approval answers"),
        "{out}"
    );
    assert!(out.contains("approval:  saved approval"), "{out}");
}

#[test]
fn tools_marks_what_the_policy_denies_or_asks_for() {
    let scene = Scene::new();
    let o = scene.run(&["tools"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let block = |tool: &str| -> String {
        out.split("\n\n")
            .find(|b| b.starts_with(&format!("{tool}  ")))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        block("read_file").contains("policy: asks before each call (rule 1 (read_file, ask)"),
        "{out}"
    );
    assert!(
        block("http_get").contains("policy: denied, and not offered to the model"),
        "{out}"
    );
    assert!(!block("calculate").contains("policy:"), "{out}");

    let o = scene.run(&["tools", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let http = v
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "http_get")
        .unwrap();
    assert_eq!(http["policy"]["offered"], false);
    assert_eq!(http["policy"]["decision"], "deny");
}
