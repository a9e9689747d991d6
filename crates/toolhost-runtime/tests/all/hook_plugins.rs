//! Hook plugins, sandboxed like any plugin: the redaction hook removes a
//! planted secret, and the `hook-decisions` fixture makes every decision
//! (proceed, rewrite, block, ask, trap, spin, replace, fail) reach the call.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::permissions::{Scripted, builder, calc};
use crate::support::{fs_scene, plugins_dir, root};
use serde_json::json;
use toolhost_runtime::{
    CallContext, CallError, DirGrant, PluginSettings, Runtime, RuntimeBuilder, error::ErrorKind,
    permission::CallApproval, permission::CallStep,
};

#[tokio::test]
async fn the_redaction_hook_plugin_removes_a_planted_secret_in_its_sandbox() {
    let scene = fs_scene();
    let secret = "sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFFGGGG";
    let file = scene.granted.join("config.txt");
    std::fs::write(&file, format!("key = {secret}\nname = demo\n")).unwrap();
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    let config: toolhost_runtime::hooks::HookConfig =
        toml::from_str("plugin-hook = \"redact-secrets\"").unwrap();
    let rt = builder()
        .plugin_settings("fs", fs)
        .hook_configs([config])
        .build()
        .await
        .unwrap();
    let hook = rt
        .plugins()
        .into_iter()
        .find(|p| p.name == "redact-secrets")
        .expect("the hook plugin is loaded");
    assert_eq!(hook.kind, toolhost_runtime::load::PluginKind::Hook);
    assert!(hook.tools.is_empty());

    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = steps.clone();
    let r = rt
        .call(
            "read_file",
            json!({"path": file.display().to_string()}),
            CallContext::new().on_step(move |s| sink.lock().unwrap().push(s.clone())),
        )
        .await
        .unwrap();
    assert!(!r.output.contains(secret), "{}", r.output);
    assert!(
        r.output.contains("[REDACTED") && r.output.contains("name = demo"),
        "{}",
        r.output
    );
    let traces: Vec<String> = steps
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| match s {
            CallStep::Hook(t) => Some(format!("{:?}:{}", t.stage, t.decision)),
            _ => None,
        })
        .collect();
    assert_eq!(
        traces,
        vec!["Before:continue".to_owned(), "After:replace".to_owned()]
    );

    // Nothing to redact: the result is kept as it is.
    let clean = rt
        .call(
            "calculate",
            json!({"expression": "1+1"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(clean.output, "2");
}

// The `hook-decisions` fixture: every hook decision, from a sandboxed hook
// plugin. Only `calc` and the fixture are loaded (the other fixtures clash
// or misbehave on purpose).

/// A runtime over a scratch directory holding only `calc` and the
/// `hook-decisions` fixture, hooked by `hook` (a `[[hooks]]` entry in TOML).
/// Keep the directory alive as long as the runtime.
async fn decisions(
    hook: &str,
    configure: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
) -> (tempfile::TempDir, Runtime) {
    let dir = tempfile::tempdir().unwrap();
    crate::support::copy_plugin(&plugins_dir(), "calc", dir.path());
    crate::support::copy_plugin(
        &crate::support::fixtures_dir(),
        "hook-decisions",
        dir.path(),
    );
    let config: toolhost_runtime::hooks::HookConfig = toml::from_str(hook).unwrap();
    let builder = Runtime::builder()
        .plugin_dir(dir.path())
        .cache_dir(Some(root().join("target/test-cache")))
        .hook_configs([config]);
    let rt = configure(builder).build().await.unwrap();
    assert!(
        rt.load_report().failures.is_empty(),
        "{:?}",
        rt.load_report().failures
    );
    (dir, rt)
}

const DECISIONS: &str = "plugin-hook = \"hook-decisions\"";

const DECISIONS_OPEN: &str = "plugin-hook = \"hook-decisions\"\non-error = \"open\"";

/// Calls `calculate` with `expression`; returns the result and the hook
/// traces as `HOOK:STAGE:DECISION`.
async fn calc_traced(
    rt: &Runtime,
    expression: &str,
) -> (Result<toolhost_runtime::ToolResult, CallError>, Vec<String>) {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = steps.clone();
    let result = rt
        .call(
            "calculate",
            json!({ "expression": expression }),
            CallContext::new().on_step(move |s| sink.lock().unwrap().push(s.clone())),
        )
        .await;
    let traces = steps
        .lock()
        .unwrap()
        .iter()
        .filter_map(|s| match s {
            CallStep::Hook(t) => Some(format!("{}:{:?}:{}", t.hook, t.stage, t.decision)),
            _ => None,
        })
        .collect();
    (result, traces)
}

#[tokio::test]
async fn a_hook_plugin_that_proceeds_lets_the_call_run_and_keeps_its_result() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let hook = rt
        .plugins()
        .into_iter()
        .find(|p| p.name == "hook-decisions")
        .expect("the fixture is loaded");
    assert_eq!(hook.kind, toolhost_runtime::load::PluginKind::Hook);
    let (result, traces) = calc_traced(&rt, "1+1").await;
    assert_eq!(result.unwrap().output, "2");
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:continue",
            "hook-decisions:After:keep"
        ]
    );
}

#[tokio::test]
async fn a_hook_plugin_rewrite_runs_the_call_with_the_new_arguments() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let (result, traces) = calc_traced(&rt, "rewrite").await;
    let result = result.unwrap();
    assert_eq!(result.output, "42");
    assert_eq!(
        result.details.as_ref().unwrap()["expression"],
        "20+22",
        "the tool ran with the rewritten arguments"
    );
    assert_eq!(
        traces,
        ["hook-decisions:Before:rewrite", "hook-decisions:After:keep"]
    );
}

#[tokio::test]
async fn a_hook_plugin_rewrite_that_breaks_the_schema_is_refused_before_the_call() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let (result, traces) = calc_traced(&rt, "break").await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    assert!(
        err.to_string().contains("invalid"),
        "a rewrite is validated again: {err}"
    );
    // The call never ran; the after-hooks saw the refusal (an audit logs
    // every attempt) and could not change it.
    assert_eq!(
        traces,
        ["hook-decisions:Before:rewrite", "hook-decisions:After:keep"],
        "the call never ran"
    );
}

#[tokio::test]
async fn a_hook_plugin_block_reaches_the_model_with_the_hooks_name_and_reason() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let (result, traces) = calc_traced(&rt, "block").await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    let message = err.to_string();
    assert!(
        message.contains("hook-decisions") && message.contains("the hook plugin blocks this"),
        "{message}"
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:block: the hook plugin blocks this",
            "hook-decisions:After:keep"
        ]
    );
}

#[tokio::test]
async fn a_hook_plugin_ask_runs_the_call_once_approved_and_is_denied_without_an_approver() {
    let approver = Scripted::calls(vec![CallApproval::AllowOnce]);
    let (_dir, rt) = decisions(DECISIONS, |b| b.approver(approver.clone())).await;
    let (result, traces) = calc_traced(&rt, "ask").await;
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    assert_eq!(
        *approver.reasons.lock().unwrap(),
        ["the hook plugin wants a human"]
    );
    let err = result.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::ToolInvalidArguments,
        "approved, then the tool ran (and `ask` does not parse): {err}"
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:ask: the hook plugin wants a human",
            "hook-decisions:After:keep"
        ]
    );

    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let (result, traces) = calc_traced(&rt, "ask").await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(
        err.to_string().contains("the hook plugin wants a human"),
        "{err}"
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:ask: the hook plugin wants a human",
            "hook-decisions:After:keep"
        ]
    );
}

#[tokio::test]
async fn a_trapping_hook_plugin_blocks_the_call_unless_it_fails_open() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let (result, traces) = calc_traced(&rt, "trap").await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    let message = err.to_string();
    assert!(
        message.contains("hook-decisions") && message.contains("deliberate trap"),
        "fails closed, saying what happened: {message}"
    );
    assert_eq!(traces.len(), 2, "{traces:?}");
    assert!(
        traces[0].starts_with("hook-decisions:Before:block: "),
        "{traces:?}"
    );
    assert_eq!(
        traces[1], "hook-decisions:After:keep",
        "the refusal is seen"
    );

    let (_dir, rt) = decisions(DECISIONS_OPEN, |b| b).await;
    let (result, traces) = calc_traced(&rt, "trap").await;
    let err = result.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::ToolInvalidArguments,
        "open: the tool ran (and `trap` does not parse): {err}"
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:continue",
            "hook-decisions:After:keep"
        ]
    );
    // An ordinary call still works: the trap took only its own instance down.
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
}

#[tokio::test]
async fn a_spinning_hook_plugin_is_stopped_by_its_sandbox_timeout_and_blocks_unless_it_fails_open()
{
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let started = std::time::Instant::now();
    let (result, traces) = calc_traced(&rt, "spin").await;
    let elapsed = started.elapsed();
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    let message = err.to_string();
    assert!(
        message.contains("hook-decisions")
            && message.contains("timed out")
            && message.contains("200 ms"),
        "stopped by the manifest's `timeout-ms`: {message}"
    );
    assert!(
        elapsed < Duration::from_secs(4),
        "the sandbox stopped it, not the chain's 5 s timeout: {elapsed:?}"
    );
    assert_eq!(traces.len(), 2, "{traces:?}");
    assert!(
        traces[0].starts_with("hook-decisions:Before:block: "),
        "{traces:?}"
    );
    assert_eq!(
        traces[1], "hook-decisions:After:keep",
        "the refusal is seen"
    );

    let (_dir, rt) = decisions(DECISIONS_OPEN, |b| b).await;
    let (result, traces) = calc_traced(&rt, "spin").await;
    assert_eq!(result.unwrap_err().kind(), ErrorKind::ToolInvalidArguments);
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:continue",
            "hook-decisions:After:keep"
        ]
    );
}

#[tokio::test]
async fn a_0_3_hook_plugin_may_put_content_blocks_in_the_result() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;
    let (result, traces) = calc_traced(&rt, "4+4").await;
    let result = result.unwrap();
    assert_eq!(result.output, "eight");
    let kinds: Vec<_> = result
        .content
        .iter()
        .map(toolhost_runtime::Content::kind)
        .collect();
    assert_eq!(kinds, ["text", "image"], "{:?}", result.content);
    let toolhost_runtime::Content::Image(image) = &result.content[1] else {
        unreachable!()
    };
    assert_eq!(
        image.data,
        toolhost_runtime::content::encode(b"\x89PNG\r\n\x1a\n"),
        "the hook's bytes, as base64"
    );
    assert_eq!(traces[1], "hook-decisions:After:replace");
}

#[tokio::test]
async fn a_hook_plugin_after_the_call_replaces_fails_and_recovers_a_failure() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;

    let (result, traces) = calc_traced(&rt, "2+2").await;
    let result = result.unwrap();
    assert_eq!(result.output, "four");
    assert!(
        result.content.is_empty(),
        "the content it was shown (none) given back: not replaced"
    );
    assert_eq!(
        result.details.as_ref().unwrap()["expression"],
        "2+2",
        "details kept"
    );
    assert_eq!(
        result.structured,
        Some(json!({"value": 4.0})),
        "structured kept"
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:continue",
            "hook-decisions:After:replace"
        ]
    );

    let (result, traces) = calc_traced(&rt, "3+3").await;
    let err = result.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::HookFailed);
    assert!(
        err.to_string()
            .contains("six is not allowed by the hook plugin"),
        "{err}"
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:continue",
            "hook-decisions:After:fail: six is not allowed by the hook plugin"
        ]
    );

    let (result, traces) = calc_traced(&rt, "1/0").await;
    let result = result.unwrap();
    assert!(
        result.output.starts_with("recovered: ") && result.output.contains("division by zero"),
        "the after-hook saw the failure: {}",
        result.output
    );
    assert_eq!(
        traces,
        [
            "hook-decisions:Before:continue",
            "hook-decisions:After:replace"
        ]
    );
}
