//! Command hooks, by actually running programs.

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_hooks::{
    AfterDecision, BeforeDecision, BeforeVerdict, CommandHook, FailurePolicy, Hook, HookCall,
    HookChain, HookEntry, HookError, HookOutcome, Matcher, OnError,
};

fn call<'a>(tool: &'a str, args: &'a Value) -> HookCall<'a> {
    HookCall::new(tool, args)
        .plugin("fs", "0.1.0")
        .call_id("call_1")
        .session_id(Some("s1"))
}

fn sh(script: &str) -> CommandHook {
    CommandHook::shell("cmd", script)
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hooks")
}

async fn before(hook: &CommandHook, args: &Value) -> Result<BeforeDecision, HookError> {
    hook.before(&call("read_file", args)).await
}

async fn after(hook: &CommandHook, outcome: &HookOutcome) -> Result<AfterDecision, HookError> {
    let args = json!({"path": "a"});
    hook.after(&call("read_file", &args), outcome).await
}

/// Whether `pid` is gone (or a zombie).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

async fn wait_dead(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if is_dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

async fn read_pid(file: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no pid in {}", file.display());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_command_gets_the_call_as_json_on_stdin_and_in_its_environment() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("in.json");
    let hook = sh(r#"cat > "$OUT"; echo "$TOOLHOST_HOOK_EVENT $TOOLHOST_TOOL $TOOLHOST_PLUGIN $TOOLHOST_HOOK_NAME" > "$OUT.env""#)
        .env("OUT", out.to_str().unwrap());
    let args = json!({"path": "README.md"});
    assert_eq!(
        before(&hook, &args).await.unwrap(),
        BeforeDecision::Continue
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.ends_with("}\n"), "one line: {text:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({
            "event": "before_execute", "tool": "read_file", "plugin": "fs",
            "plugin_version": "0.1.0", "args": {"path": "README.md"},
            "call_id": "call_1", "session_id": "s1", "agent": null
        })
    );
    let env = std::fs::read_to_string(out.with_extension("json.env")).unwrap();
    assert_eq!(env.trim(), "before_execute read_file fs cmd");

    let outcome = HookOutcome::Ok {
        output: "hello".into(),
        details: Some(json!({"n": 1})),
        structured: None,
        content: Vec::new(),
    };
    assert_eq!(after(&hook, &outcome).await.unwrap(), AfterDecision::Keep);
    let sent: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(sent["event"], "after_execute");
    assert_eq!(
        sent["outcome"],
        json!({"ok": true, "output": "hello", "details": {"n": 1}, "structured": null})
    );

    after(&hook, &HookOutcome::err("timeout", "too slow"))
        .await
        .unwrap();
    let sent: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(
        sent["outcome"],
        json!({"ok": false, "kind": "timeout", "message": "too slow"})
    );
}

#[tokio::test]
async fn a_command_answers_each_before_decision_in_json() {
    let args = json!({"path": "a"});
    let reply = |json: &str| sh(&format!("cat >/dev/null; echo '{json}'"));
    assert_eq!(
        before(&reply(r#"{"decision":"continue"}"#), &args)
            .await
            .unwrap(),
        BeforeDecision::Continue
    );
    assert_eq!(
        before(
            &reply(r#"{"decision":"rewrite","args":{"path":"b"}}"#),
            &args
        )
        .await
        .unwrap(),
        BeforeDecision::Rewrite(json!({"path": "b"}))
    );
    assert_eq!(
        before(&reply(r#"{"decision":"block","reason":"nope"}"#), &args)
            .await
            .unwrap(),
        BeforeDecision::block("nope")
    );
    assert_eq!(
        before(&reply(r#"{"decision":"ask","reason":"sure?"}"#), &args)
            .await
            .unwrap(),
        BeforeDecision::ask("sure?")
    );
    assert_eq!(
        before(&reply(r#"{"decision":"block"}"#), &args)
            .await
            .unwrap(),
        BeforeDecision::block("blocked by hook \"cmd\"")
    );
}

#[tokio::test]
async fn a_command_answers_each_after_decision_in_json() {
    let ok = HookOutcome::ok("x");
    let reply = |json: &str| sh(&format!("cat >/dev/null; echo '{json}'"));
    assert_eq!(
        after(&reply(r#"{"decision":"keep"}"#), &ok).await.unwrap(),
        AfterDecision::Keep
    );
    assert_eq!(
        after(
            &reply(r#"{"decision":"replace","output":"y","details":{"k":1}}"#),
            &ok
        )
        .await
        .unwrap(),
        AfterDecision::Replace {
            output: Some("y".into()),
            details: Some(Some(json!({"k": 1}))),
            structured: None,
            content: None,
        }
    );
    assert_eq!(
        after(
            &reply(r#"{"decision":"replace","structured":{"k":2},"details":null}"#),
            &ok
        )
        .await
        .unwrap(),
        AfterDecision::Replace {
            output: None,
            details: Some(None),
            structured: Some(Some(json!({"k": 2}))),
            content: None,
        }
    );
    assert_eq!(
        after(&reply(r#"{"decision":"fail","message":"withheld"}"#), &ok)
            .await
            .unwrap(),
        AfterDecision::fail("withheld")
    );
}

#[tokio::test]
async fn an_empty_stdout_continues_and_keeps() {
    let hook = sh("cat >/dev/null; echo '  '");
    assert_eq!(
        before(&hook, &json!({})).await.unwrap(),
        BeforeDecision::Continue
    );
    assert_eq!(
        after(&hook, &HookOutcome::ok("x")).await.unwrap(),
        AfterDecision::Keep
    );
}

#[tokio::test]
async fn exit_code_2_blocks_before_and_fails_after_with_stderr_as_the_reason() {
    let hook = sh("cat >/dev/null; echo 'do not touch .env' >&2; exit 2");
    assert_eq!(
        before(&hook, &json!({})).await.unwrap(),
        BeforeDecision::block("do not touch .env")
    );
    assert_eq!(
        after(&hook, &HookOutcome::ok("x")).await.unwrap(),
        AfterDecision::fail("do not touch .env")
    );
    // Through the chain, the block names the hook.
    let chain = HookChain::new(vec![HookEntry::new(Arc::new(hook))]);
    let args = json!({});
    assert_eq!(
        chain.run_before(&call("read_file", &args)).await.decision,
        BeforeVerdict::Block {
            hook: "cmd".into(),
            reason: "do not touch .env".into()
        }
    );
}

#[tokio::test]
async fn a_non_zero_exit_other_than_2_is_a_hook_failure() {
    let hook = sh("echo boom >&2; exit 1");
    match before(&hook, &json!({})).await {
        Err(HookError::Exit { code, stderr }) => {
            assert_eq!(code, Some(1));
            assert_eq!(stderr, "boom");
        }
        other => panic!("expected an exit error, got {other:?}"),
    }
    let chain = HookChain::new(vec![HookEntry::new(Arc::new(hook))]);
    let args = json!({});
    assert_eq!(
        chain.run_before(&call("read_file", &args)).await.decision,
        BeforeVerdict::Block {
            hook: "cmd".into(),
            reason: "hook \"cmd\" failed: exited with code 1: boom".into()
        }
    );
    let report = chain
        .run_after(&call("read_file", &args), HookOutcome::ok("kept"))
        .await;
    assert_eq!(report.outcome, HookOutcome::ok("kept"));
    assert!(report.trace[0].error.is_some());
}

#[tokio::test]
async fn invalid_json_on_stdout_is_a_hook_failure() {
    for stdout in [
        "{oops",
        r#"{"decision":"allow"}"#,
        r#"{"decision":"block","reson":"typo"}"#,
        r#"{"decision":"rewrite"}"#,
        "[1,2]",
    ] {
        let hook = sh(&format!("echo '{stdout}'"));
        match before(&hook, &json!({})).await {
            Err(HookError::InvalidReply(_)) => {}
            other => panic!("{stdout}: expected an invalid reply, got {other:?}"),
        }
    }
    let hook = sh(r#"echo '{"decision":"continue"}'"#);
    assert!(matches!(
        after(&hook, &HookOutcome::ok("x")).await,
        Err(HookError::InvalidReply(_))
    ));
}

#[tokio::test]
async fn a_program_that_cannot_start_is_a_hook_failure() {
    let hook = CommandHook::argv("ghost", ["/nonexistent/hook"]);
    assert!(matches!(
        before(&hook, &json!({})).await,
        Err(HookError::Spawn { .. })
    ));
    let empty = CommandHook::argv("empty", Vec::<String>::new());
    assert!(before(&empty, &json!({})).await.is_err());
}

#[tokio::test]
async fn a_stdout_larger_than_the_limit_is_a_hook_failure() {
    let hook = sh("head -c 100000 /dev/zero | tr '\\000' a").max_output(1024);
    match before(&hook, &json!({})).await {
        Err(HookError::InvalidReply(message)) => assert!(message.contains("1024"), "{message}"),
        other => panic!("expected an invalid reply, got {other:?}"),
    }
    // A large stderr is cut, not fatal.
    let hook = sh("head -c 100000 /dev/zero | tr '\\000' a >&2; exit 2").max_output(1024);
    match before(&hook, &json!({})).await.unwrap() {
        BeforeDecision::Block { reason } => assert_eq!(reason.len(), 1024),
        other => panic!("expected a block, got {other:?}"),
    }
}

#[tokio::test]
async fn a_hook_that_does_not_read_stdin_does_not_hang() {
    // Far more than a pipe buffer holds.
    let big = json!({"content": "x".repeat(4 * 1024 * 1024)});
    let started = Instant::now();
    let hook = sh("exit 0");
    assert_eq!(before(&hook, &big).await.unwrap(), BeforeDecision::Continue);
    let hook = sh("sleep 0.2; echo '{\"decision\":\"block\",\"reason\":\"unread\"}'");
    assert_eq!(
        before(&hook, &big).await.unwrap(),
        BeforeDecision::block("unread")
    );
    let hook = CommandHook::argv("true", ["true"]);
    assert_eq!(
        after(&hook, &HookOutcome::ok("x".repeat(1 << 20)))
            .await
            .unwrap(),
        AfterDecision::Keep
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn a_timeout_kills_the_command_and_its_children_and_blocks_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let hook = CommandHook::argv(
        "sleeper",
        [
            "sh",
            "-c",
            r#"sleep 30 & echo "$$ $!" > "$PIDS.tmp"; mv "$PIDS.tmp" "$PIDS"; wait"#,
        ],
    )
    .env("PIDS", pids.to_str().unwrap());
    let chain = HookChain::new(vec![
        HookEntry::new(Arc::new(hook)).timeout(Duration::from_millis(500)),
    ]);
    let args = json!({});
    let started = Instant::now();
    let report = chain.run_before(&call("read_file", &args)).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        report.decision,
        BeforeVerdict::Block {
            hook: "sleeper".into(),
            reason: "hook \"sleeper\" timed out after 500 ms".into()
        }
    );
    let text = std::fs::read_to_string(&pids).unwrap();
    let mut it = text.split_whitespace().map(|p| p.parse::<u32>().unwrap());
    let (shell, sleep) = (it.next().unwrap(), it.next().unwrap());
    assert!(wait_dead(shell).await, "the command {shell} still runs");
    assert!(wait_dead(sleep).await, "its child {sleep} still runs");
}

#[tokio::test]
async fn a_timeout_after_the_call_keeps_by_default_and_fails_when_closed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let hook = Arc::new(
        sh(r#"echo $$ > "$PID.tmp"; mv "$PID.tmp" "$PID"; exec sleep 30"#)
            .env("PID", pid_file.to_str().unwrap()),
    );
    let args = json!({});

    let open = HookChain::new(vec![
        HookEntry::new(hook.clone()).timeout(Duration::from_millis(200)),
    ]);
    let report = open
        .run_after(&call("read_file", &args), HookOutcome::ok("result"))
        .await;
    assert_eq!(report.outcome, HookOutcome::ok("result"));
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("timed out after 200 ms")
    );
    let pid = read_pid(&pid_file).await;
    assert!(wait_dead(pid).await, "the command {pid} still runs");
    std::fs::remove_file(&pid_file).unwrap();

    let closed = HookChain::new(vec![
        HookEntry::new(hook)
            .timeout(Duration::from_millis(200))
            .on_error(OnError::both(FailurePolicy::Closed)),
    ]);
    let report = closed
        .run_after(&call("read_file", &args), HookOutcome::ok("result"))
        .await;
    assert_eq!(
        report.outcome,
        HookOutcome::err("hook", "hook \"cmd\" timed out after 200 ms")
    );
    let pid = read_pid(&pid_file).await;
    assert!(wait_dead(pid).await, "the command {pid} still runs");
}

#[tokio::test]
async fn a_timeout_before_the_call_continues_when_open() {
    let hook = sh("exec sleep 30");
    let chain = HookChain::new(vec![
        HookEntry::new(Arc::new(hook))
            .timeout(Duration::from_millis(200))
            .on_error(OnError::both(FailurePolicy::Open)),
    ]);
    let args = json!({});
    let report = chain.run_before(&call("read_file", &args)).await;
    assert_eq!(report.decision, BeforeVerdict::Continue);
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("timed out after 200 ms")
    );
}

#[tokio::test]
async fn the_working_directory_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let hook = sh("pwd -P >&2; exit 2").current_dir(dir.path());
    let expected = dir.path().canonicalize().unwrap();
    assert_eq!(
        before(&hook, &json!({})).await.unwrap(),
        BeforeDecision::block(expected.to_str().unwrap())
    );
}

#[tokio::test]
async fn command_hooks_rewrite_in_chain_order() {
    // The second hook sees the first one's arguments on stdin.
    let first = sh(r#"cat >/dev/null; echo '{"decision":"rewrite","args":{"path":"safe.txt"}}'"#);
    let second = CommandHook::shell(
        "second",
        r#"grep -q '"path":"safe.txt"' && echo '{"decision":"ask","reason":"saw the rewrite"}'"#,
    );
    let chain = HookChain::new(vec![
        HookEntry::new(Arc::new(first)),
        HookEntry::new(Arc::new(second)),
    ]);
    let args = json!({"path": ".env"});
    assert_eq!(
        chain.run_before(&call("read_file", &args)).await.decision,
        BeforeVerdict::Ask {
            reasons: vec!["saw the rewrite".into()],
            args: Some(json!({"path": "safe.txt"}))
        }
    );
}

#[tokio::test]
async fn the_example_script_blocks_secret_paths_for_read_file_only() {
    let script = examples().join("block-secrets.sh");
    let hook = CommandHook::argv("block-secrets", [script.to_str().unwrap()]);
    let chain = HookChain::new(vec![
        HookEntry::new(Arc::new(hook)).matcher(Matcher::plugins(["fs"]).unwrap()),
    ]);
    for path in [
        "app/.env",
        ".env.local",
        "/home/me/.ssh/id_rsa",
        "a\"b/.env",
    ] {
        let args = json!({"path": path, "limit": 5});
        match chain.run_before(&call("read_file", &args)).await.decision {
            BeforeVerdict::Block { hook, reason } => {
                assert_eq!(hook, "block-secrets");
                assert!(reason.contains("not allowed"), "{reason}");
            }
            other => panic!("{path}: expected a block, got {other:?}"),
        }
    }
    for (tool, path) in [
        ("read_file", "README.md"),
        ("read_file", "src/environment.rs"),
        ("list_dir", ".env"),
    ] {
        let args = json!({"path": path});
        assert_eq!(
            chain.run_before(&call(tool, &args)).await.decision,
            BeforeVerdict::Continue,
            "{tool} {path}"
        );
    }
    let args = json!({"path": ".env"});
    let report = chain
        .run_after(&call("read_file", &args), HookOutcome::ok("x"))
        .await;
    assert_eq!(report.outcome, HookOutcome::ok("x"));
    assert_eq!(report.trace[0].error, None);
}

#[tokio::test]
async fn the_example_audit_script_logs_every_call_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.log");
    let hook = CommandHook::argv("audit", [examples().join("audit.sh").to_str().unwrap()])
        .env("TOOLHOST_AUDIT_LOG", log.to_str().unwrap());
    let chain = HookChain::new(vec![HookEntry::new(Arc::new(hook))]);
    let args = json!({"path": "README.md"});
    assert_eq!(
        chain.run_before(&call("read_file", &args)).await.decision,
        BeforeVerdict::Continue
    );
    let report = chain
        .run_after(&call("read_file", &args), HookOutcome::ok("# hi"))
        .await;
    assert_eq!(report.outcome, HookOutcome::ok("# hi"));
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["call"]["event"], "before_execute");
    assert_eq!(lines[1]["call"]["outcome"]["output"], "# hi");
}

#[tokio::test]
async fn a_permission_hook_allows_denies_or_passes_and_sees_why_the_call_is_asked() {
    use toolhost_hooks::{PermissionVerdict, Stages};
    // Allows reads of README.md, denies anything under secret/, passes the
    // rest; it sees the reasons in the JSON.
    let script = r#"input=$(cat)
case "$input" in
  *'"event":"permission_request"'*'"reasons":["rule: reads are asked"]'*) ;;
  *) echo "unexpected input: $input" >&2; exit 1 ;;
esac
case "$input" in
  *'"path":"README.md"'*) echo '{"decision":"allow","reason":"docs are public"}' ;;
  *'"path":"secret/'*) echo 'secrets stay put' >&2; exit 2 ;;
  *) ;;
esac"#;
    let chain = HookChain::new(vec![
        HookEntry::new(Arc::new(sh(script))).stages(Stages::PERMISSION),
    ]);
    let reasons = ["rule: reads are asked".to_owned()];
    let verdict = |path: &'static str| {
        let chain = &chain;
        let reasons = &reasons;
        async move {
            let args = json!({ "path": path });
            chain
                .run_permission(&call("read_file", &args), reasons)
                .await
        }
    };
    let allowed = verdict("README.md").await;
    assert_eq!(
        allowed.decision,
        PermissionVerdict::Allow {
            hook: "cmd".into(),
            reason: Some("docs are public".into())
        }
    );
    let denied = verdict("secret/key").await;
    assert_eq!(
        denied.decision,
        PermissionVerdict::Deny {
            hook: "cmd".into(),
            reason: "secrets stay put".into()
        }
    );
    assert_eq!(verdict("notes.txt").await.decision, PermissionVerdict::Pass);
    // Not a before- or after-hook: those stages run nothing.
    let args = json!({"path": "secret/key"});
    assert_eq!(
        chain.run_before(&call("read_file", &args)).await.decision,
        BeforeVerdict::Continue
    );
}

#[tokio::test]
async fn a_permission_hook_that_fails_or_stalls_passes_the_question_on() {
    use toolhost_hooks::{PermissionVerdict, Stages};
    let chain = HookChain::new(vec![
        HookEntry::new(Arc::new(sh("exit 3"))).stages(Stages::PERMISSION),
        HookEntry::new(Arc::new(sh("echo '{\"decision\":\"allow\",\"extra\":1}'")))
            .stages(Stages::PERMISSION),
        HookEntry::new(Arc::new(sh("sleep 5")))
            .stages(Stages::PERMISSION)
            .timeout(Duration::from_millis(200)),
    ]);
    let args = json!({"path": "a"});
    let report = chain.run_permission(&call("read_file", &args), &[]).await;
    assert_eq!(report.decision, PermissionVerdict::Pass);
    assert_eq!(report.trace.len(), 3);
    assert!(
        report.trace.iter().all(|t| t.error.is_some()),
        "{:?}",
        report.trace
    );
}
