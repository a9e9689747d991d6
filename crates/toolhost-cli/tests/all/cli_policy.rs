//! The permission layer and hooks through the `host` binary: a policy file,
//! approval prompts answered on stdin, the redaction hook plugin and a
//! command hook, with a model server on 127.0.0.1 that records what it is sent.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};

use crate::support::*;

const SECRET: &str = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";

/// A plugin directory, a granted folder with a file that holds a secret, a
/// policy that denies `http_get` and asks before `read_file`, and a config
/// that runs the redaction hook plugin after every call.
struct Scene {
    dir: tempfile::TempDir,
    notes: PathBuf,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let notes = data.join("notes.txt");
        std::fs::write(
            &notes,
            format!("deploy notes\nOPENAI_API_KEY={SECRET}\nremember the milk\n"),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("policy.toml"),
            format!(
                "# Project policy.\n\
                 [[rules]]\n\
                 tool = \"http_get\"\n\
                 decision = \"deny\"\n\
                 reason = \"no network from this project\"\n\
                 \n\
                 [[rules]]\n\
                 tool = \"read_file\"   # reading needs a yes\n\
                 decision = \"ask\"\n\
                 \n\
                 [plugins.fs]\n\
                 dirs = [{{ path = \"{}\", access = \"read-only\" }}]\n",
                data.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("host.toml"),
            "[[hooks]]\nplugin-hook = \"redact-secrets\"\n",
        )
        .unwrap();
        Scene { dir, notes }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `host` with the scene's config and policy, answering prompts with
/// `stdin` (piped, so `--answers-from-stdin`).
fn host(scene: &Scene, args: &[&str], stdin: &str) -> Output {
    let mut with_answers = vec!["--answers-from-stdin"];
    with_answers.extend_from_slice(args);
    host_piped(scene, &with_answers, stdin)
}

/// `host` with the scene's config and policy, `stdin` piped in.
fn host_piped(scene: &Scene, args: &[&str], stdin: &str) -> Output {
    let mut child = host_command(
        env!("CARGO_BIN_EXE_host"),
        &root().join("target/test-cache"),
    )
    .env("TEST_MODEL_KEY", "test-key")
    .arg("--plugins")
    .arg(plugins_dir())
    .arg("--config")
    .arg(scene.path("host.toml"))
    .arg("--policy")
    .arg(scene.path("policy.toml"))
    .args(args)
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("host runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

/// A model that reads `path` with `read_file`, then answers "done".
fn reading_model(path: &Path) -> ModelServer {
    let args = json!({ "path": path.display().to_string() }).to_string();
    ModelServer::start(move |n, _| {
        if n == 0 {
            openai_tool_call("call_1", "read_file", &args)
        } else {
            openai_text("done")
        }
    })
}

fn run_args(server: &ModelServer) -> Vec<String> {
    vec![
        "--provider".into(),
        "openai".into(),
        "--base-url".into(),
        format!("http://127.0.0.1:{}/v1", server.port),
        "--api-key-env".into(),
        "TEST_MODEL_KEY".into(),
        "--model".into(),
        "test-model".into(),
        "run".into(),
        "Summarise my deploy notes.".into(),
    ]
}

fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn tool_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_denied_tool_is_never_offered_reads_are_asked_and_secrets_are_redacted() {
    let scene = Scene::new();
    let server = reading_model(&scene.notes);
    let args = run_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host(&scene, &args, "y\n");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("read_file (fs) wants to run"),
        "the user was asked: {stderr}"
    );

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2, "{stderr}");
    for body in &bodies {
        let tools = offered_tools(body);
        assert!(!tools.contains(&"http_get".to_owned()), "{tools:?}");
    }
    assert!(offered_tools(&bodies[0]).contains(&"read_file".to_owned()));
    let raw = serde_json::to_string(&bodies[1]).unwrap();
    assert!(!raw.contains(SECRET), "the secret never reaches the model");
    let seen = tool_message(&bodies[1]);
    assert!(seen.contains("deploy notes"), "{seen}");
    assert!(seen.contains("[REDACTED"), "{seen}");
}

#[test]
fn answers_piped_into_a_stdin_that_is_not_a_terminal_approve_nothing() {
    // `yes | host run …`: without --answers-from-stdin, nobody was asked.
    let scene = Scene::new();
    let server = reading_model(&scene.notes);
    let args = run_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host_piped(&scene, &args, "y\ny\ny\n");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("not a terminal"), "{stderr}");
    let bodies = server.bodies();
    let seen = tool_message(&bodies[1]);
    assert!(!seen.contains("deploy notes"), "nothing was read: {seen}");
}

#[test]
fn a_denial_with_a_message_reaches_the_model_and_nothing_is_read() {
    let scene = Scene::new();
    let server = reading_model(&scene.notes);
    let args = run_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host(&scene, &args, "n use the summary in README instead\n");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let seen = tool_message(&server.bodies()[1]);
    assert!(seen.contains("permission denied"), "{seen}");
    assert!(seen.contains("use the summary in README instead"), "{seen}");
    assert!(!seen.contains("deploy notes"), "{seen}");
}

#[test]
fn deny_and_stop_ends_the_turn_without_asking_the_model_again() {
    let scene = Scene::new();
    let server = reading_model(&scene.notes);
    let mut args = run_args(&server);
    args.insert(args.len() - 1, "--json".to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host(&scene, &args, "s not now\n");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "aborted: {stderr}");
    assert_eq!(server.bodies().len(), 1, "the model was not asked again");
    let run: Value = serde_json::from_slice(&o.stdout).expect("the run as JSON");
    assert_eq!(run["status"], "aborted");
    assert_eq!(run["history"][0]["error_kind"], "aborted");
    assert!(
        run["history"][0]["output"]
            .as_str()
            .unwrap()
            .contains("not now"),
        "{run}"
    );
}

#[test]
fn allow_always_saves_an_approval_of_those_arguments_that_the_next_run_uses_and_revoke_removes() {
    let scene = Scene::new();
    let lock = scene.path("toolhost.lock").display().to_string();
    let with_lock = |args: Vec<String>| {
        let mut all = vec!["--lock".to_owned(), lock.clone()];
        all.extend(args);
        all
    };
    let server = reading_model(&scene.notes);
    let args = with_lock(run_args(&server));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host(&scene, &args, "always\n");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let policy = std::fs::read_to_string(scene.path("policy.toml")).unwrap();
    assert!(
        !policy.contains("always-allow"),
        "the policy is not widened: {policy}"
    );

    let list = host(
        &scene,
        &["--lock", &lock, "approvals", "list", "--json"],
        "",
    );
    assert!(list.status.success(), "{list:?}");
    let saved: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(saved.as_array().map(Vec::len), Some(1), "{saved}");
    assert_eq!(saved[0]["tool"], "read_file");
    assert_eq!(saved[0]["from"], "terminal");
    assert_eq!(saved[0]["scope"]["kind"], "arguments");
    assert_eq!(
        saved[0]["scope"]["arguments"]["path"],
        scene.notes.display().to_string()
    );
    assert!(saved[0]["digest"].as_str().unwrap().starts_with("sha256:"));

    let server = reading_model(&scene.notes);
    let args = with_lock(run_args(&server));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host(&scene, &args, "");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        !stderr.contains("wants to run"),
        "not asked again: {stderr}"
    );
    assert!(tool_message(&server.bodies()[1]).contains("deploy notes"));

    // Revoked: the same call is asked again (and, with no answer, denied).
    let id = saved[0]["id"].as_str().unwrap();
    let o = host(&scene, &["--lock", &lock, "approvals", "revoke", id], "");
    assert!(o.status.success(), "{o:?}");
    let o = host(&scene, &["--lock", &lock, "approvals", "revoke", id], "");
    assert!(!o.status.success(), "a second revoke finds nothing");
    let call = [
        "--lock".to_owned(),
        lock.clone(),
        "call".to_owned(),
        "read_file".to_owned(),
        json!({ "path": scene.notes.display().to_string() }).to_string(),
    ];
    let call: Vec<&str> = call.iter().map(String::as_str).collect();
    let o = host(&scene, &call, "");
    assert_eq!(o.status.code(), Some(8), "{o:?}");
}

#[test]
fn a_directory_answer_saves_that_directory_for_as_long_as_approvals_last_says() {
    let scene = Scene::new();
    let lock = scene.path("toolhost.lock").display().to_string();
    let read = |path: &Path, answer: &str| {
        let args = json!({ "path": path.display().to_string() }).to_string();
        host(
            &scene,
            &[
                "--lock",
                &lock,
                "--approvals-last",
                "1h",
                "call",
                "read_file",
                &args,
            ],
            answer,
        )
    };
    let o = read(&scene.notes, "d\n");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let data = std::fs::canonicalize(scene.notes.parent().unwrap()).unwrap();
    assert!(
        stderr.contains(&format!("[d]irectory {} always", data.display())),
        "{stderr}"
    );

    let list = host(
        &scene,
        &["--lock", &lock, "approvals", "list", "--json"],
        "",
    );
    let saved: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(saved[0]["scope"]["kind"], "directory", "{saved}");
    assert_eq!(
        saved[0]["scope"]["arguments"]["directory"],
        data.display().to_string()
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let expires = saved[0]["expires"].as_u64().expect("an expiry");
    assert!(
        expires > now + 3000 && expires <= now + 3600,
        "{expires} vs {now}"
    );

    // Another file of that directory: not asked.
    let beside = scene.notes.with_file_name("todo.txt");
    std::fs::write(&beside, "water the plants\n").unwrap();
    let o = read(&beside, "");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(!stderr.contains("wants to run"), "not asked: {stderr}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("water the plants"));
}

#[test]
fn without_an_answer_an_ask_is_a_denial_and_yes_approves_it() {
    let scene = Scene::new();
    let call = [
        "call",
        "read_file",
        &json!({ "path": scene.notes.display().to_string() }).to_string(),
    ]
    .map(str::to_owned);
    let call: Vec<&str> = call.iter().map(String::as_str).collect();
    let o = host(&scene, &call, "");
    assert_eq!(
        o.status.code(),
        Some(8),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("permission denied"));

    let mut yes = vec!["--yes"];
    yes.extend(&call);
    let o = host(&scene, &yes, "");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("deploy notes"), "{stdout}");
    assert!(
        !stdout.contains(SECRET),
        "hooks run on `host call` too: {stdout}"
    );
}

#[test]
fn a_policy_file_with_an_error_stops_the_host_with_its_location() {
    let scene = Scene::new();
    std::fs::write(
        scene.path("policy.toml"),
        "[[rules]]\ntool = \"read_file\"\ndecision = \"maybe\"\n",
    )
    .unwrap();
    let o = host(&scene, &["tools"], "");
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("policy.toml:3:"), "{stderr}");
    assert!(stderr.contains("maybe"), "{stderr}");
    assert!(
        o.stdout.is_empty(),
        "no tools listed from a half-read policy"
    );
}

#[test]
fn a_command_hook_from_the_config_blocks_on_the_cli_path() {
    let scene = Scene::new();
    let env_file = scene.notes.with_file_name(".env");
    std::fs::write(&env_file, "TOKEN=abc").unwrap();
    std::fs::write(
        scene.path("host.toml"),
        format!(
            "[[hooks]]\ncommand = [\"sh\", \"{}\"]\ntools = [\"read_file\"]\n",
            root().join("examples/hooks/block-secrets.sh").display()
        ),
    )
    .unwrap();
    let o = host(
        &scene,
        &[
            "--yes",
            "call",
            "read_file",
            &json!({ "path": env_file.display().to_string() }).to_string(),
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(8));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("may hold secrets"), "{stderr}");
}

#[test]
fn a_permission_hook_from_the_config_answers_a_routine_ask_and_passes_the_rest_on() {
    let scene = Scene::new();
    let readme = scene.notes.with_file_name("README.md");
    std::fs::write(&readme, "# read me").unwrap();
    std::fs::write(
        scene.path("host.toml"),
        format!(
            "[[hooks]]\nshell = \"sh {}\"\ntools = [\"read_file\"]\nstages = [\"permission\"]\n",
            root().join("examples/hooks/allow-docs.sh").display()
        ),
    )
    .unwrap();
    let read = |path: &std::path::Path| {
        host(
            &scene,
            &[
                "call",
                "read_file",
                &json!({ "path": path.display().to_string() }).to_string(),
            ],
            "",
        )
    };
    // Nobody at the terminal: without the hook this ask would be a denial.
    let o = read(&readme);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("# read me"));
    // Not documentation: passed on to the person, who is not there.
    let o = read(&scene.notes);
    assert_eq!(o.status.code(), Some(8), "{o:?}");
}

#[test]
fn each_step_of_the_permission_layer_and_hooks_is_in_the_runs_history() {
    let scene = Scene::new();
    let server = reading_model(&scene.notes);
    let mut args = run_args(&server);
    args.push("--json".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = host(&scene, &args, "y\n");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result: Value = serde_json::from_slice(&o.stdout).unwrap();
    let steps = result["history"][0]["steps"].as_array().unwrap().clone();
    let kinds: Vec<String> = steps
        .iter()
        .map(|s| {
            let mut kind = s["step"].as_str().unwrap_or_default().to_owned();
            for key in ["decision", "answer", "hook", "stage"] {
                if let Some(v) = s[key].as_str() {
                    kind.push(':');
                    kind.push_str(v);
                }
            }
            kind
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "permission:ask".to_owned(),
            "hook:continue:redact-secrets:before".to_owned(),
            "approval:allow-once".to_owned(),
            "hook:replace:redact-secrets:after".to_owned(),
        ],
        "{steps:#?}"
    );
    assert!(steps[1]["duration_ms"].as_f64().is_some(), "{steps:#?}");
}

#[test]
fn a_tool_switched_off_in_the_interactive_session_is_denied_until_switched_on() {
    let mut cmd = crate::support::host(&root().join("target/test-cache"));
    cmd.arg("--plugins").arg(plugins_dir());
    let mut session = Session::start(cmd);
    session.expect("tools loaded");
    session.send("/disable calc*");
    session.expect("switched off for this session: calc*");
    session.send(r#"/call calculate {"expression": "6*7"}"#);
    let denied = session.expect("error:");
    assert!(denied.contains("permission denied"), "{denied}");
    session.send("/enable calc*");
    session.expect("switched on again");
    session.send(r#"/call calculate {"expression": "6*7"}"#);
    session.expect("42");
}
