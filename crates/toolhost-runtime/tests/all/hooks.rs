//! Rust and command hooks around a call, with the real plugins: permission
//! hooks, before-hooks that rewrite, block or ask (and the policy applied
//! again), after-hooks that keep, replace or fail, timeouts, matchers, and
//! a reused instance guarded the same way.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::permissions::{Scripted, ask_calculate, builder, calc};
use crate::support::{fs_scene, root};
use serde_json::{Value, json};
use toolhost_runtime::hooks::{
    AfterDecision, BeforeDecision, CommandHook, FailurePolicy, FnHook, Hook, HookCall, HookEntry,
    HookFuture, HookOutcome, Matcher, OnError, Stages,
};
use toolhost_runtime::policy::{Decision, Policy, Rule};
use toolhost_runtime::{
    CallContext, DirGrant, PluginSettings, error::ErrorKind, permission::CallApproval,
    permission::CallStep,
};

/// A permission hook: allows `1+1`, denies anything with `*`, passes the rest.
struct Routine;

impl Hook for Routine {
    fn name(&self) -> &str {
        "routine"
    }

    fn stages(&self) -> Stages {
        Stages::PERMISSION
    }

    fn permission<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        reasons: &'a [String],
    ) -> HookFuture<'a, toolhost_runtime::hooks::PermissionDecision> {
        use toolhost_runtime::hooks::PermissionDecision;
        assert!(
            reasons.iter().any(|r| r.contains("calculate")),
            "{reasons:?}"
        );
        let expression = call.args["expression"].as_str().unwrap_or_default();
        let decision = if expression == "1+1" {
            PermissionDecision::Allow { reason: None }
        } else if expression.contains('*') {
            PermissionDecision::Deny {
                reason: "no products today".into(),
            }
        } else {
            PermissionDecision::Pass
        };
        Box::pin(std::future::ready(Ok(decision)))
    }
}

#[tokio::test]
async fn a_permission_hook_answers_routine_asks_and_leaves_the_rest_to_the_person() {
    let approver = Scripted::calls(vec![CallApproval::Deny { message: None }]);
    let rt = builder()
        .policy(ask_calculate())
        .hook(HookEntry::new(Arc::new(Routine)))
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    let denied = calc(&rt, "2*3").await.unwrap_err();
    assert_eq!(denied.kind(), ErrorKind::PermissionDenied);
    assert!(denied.to_string().contains("no products today"), "{denied}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 0, "nobody was asked");
    // Passed on: the person is asked (and says no).
    assert_eq!(
        calc(&rt, "2+2").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    // A deny rule is decided before any hook is consulted.
    let deny = Policy::builder()
        .rule(Rule::deny("calculate"))
        .build()
        .unwrap();
    let rt = builder()
        .policy(deny)
        .hook(HookEntry::new(Arc::new(Routine)))
        .build()
        .await
        .unwrap();
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}

#[tokio::test]
async fn after_hooks_see_every_refused_attempt_and_cannot_overturn_it() {
    // An audit-like after-hook that records each outcome's kind, and would
    // turn any failure into a success if it could.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let audit = HookEntry::new(Arc::new(FnHook::after("audit", move |call, outcome| {
        let kind = match outcome {
            HookOutcome::Ok { .. } => "ok".to_owned(),
            HookOutcome::Err { kind, .. } => kind.as_str().to_owned(),
        };
        let args = if call.args.is_null() { "null" } else { "args" };
        log.lock()
            .unwrap()
            .push(format!("{}:{kind}:{args}", call.tool));
        AfterDecision::replace_output("forged")
    })));
    let blocker = before("blocker", |args| {
        if args["expression"] == "block me" {
            BeforeDecision::Block {
                reason: "not this one".into(),
            }
        } else {
            BeforeDecision::Continue
        }
    });
    let policy = Policy::builder()
        .rule(Rule::deny("word_count"))
        .build()
        .unwrap();
    let rt = builder()
        .policy(policy)
        .hook(blocker)
        .hook(audit)
        .build()
        .await
        .unwrap();
    let cx = CallContext::new;
    let denied = rt.call("word_count", json!({"text": "a"}), cx()).await;
    let invalid = rt.call("calculate", json!({"expression": 7}), cx()).await;
    let blocked = rt
        .call("calculate", json!({"expression": "block me"}), cx())
        .await;
    // Over `max-args-bytes` (1 MiB): refused, and the bytes never reach a hook.
    let huge = json!({"expression": "1".repeat(2 * 1024 * 1024)});
    let oversized = rt.call("calculate", huge, cx()).await;
    for (what, result, kind) in [
        ("denied", &denied, ErrorKind::PermissionDenied),
        ("invalid", &invalid, ErrorKind::InvalidArguments),
        ("blocked", &blocked, ErrorKind::BlockedByHook),
        ("oversized", &oversized, ErrorKind::InvalidArguments),
    ] {
        let err = result.as_ref().expect_err(what);
        assert_eq!(err.kind(), kind, "{what}: the refusal stands: {err}");
    }
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "word_count:permission-denied:args",
            "calculate:invalid-arguments:args",
            "calculate:blocked-by-hook:args",
            "calculate:invalid-arguments:null"
        ]
    );
    // A call that ran is still the after-hook's to replace.
    let ran = rt
        .call("calculate", json!({"expression": "1+1"}), cx())
        .await
        .unwrap();
    assert_eq!(ran.output, "forged");
}

fn before(name: &str, f: impl Fn(&Value) -> BeforeDecision + Send + Sync + 'static) -> HookEntry {
    HookEntry::new(Arc::new(FnHook::before(name, move |call| f(call.args))))
}

fn after(
    name: &str,
    f: impl Fn(&HookOutcome) -> AfterDecision + Send + Sync + 'static,
) -> HookEntry {
    HookEntry::new(Arc::new(FnHook::after(name, move |_, outcome| f(outcome))))
}

#[tokio::test]
async fn before_hooks_continue_rewrite_block_and_ask() {
    let rt = builder()
        .hook(before("double", |args| match args["expression"].as_str() {
            Some("rewrite me") => BeforeDecision::Rewrite(json!({"expression": "20+22"})),
            Some("break me") => BeforeDecision::Rewrite(json!({"expr": 1})),
            Some("block me") => BeforeDecision::block("no blocking allowed"),
            Some("ask me") => BeforeDecision::ask("this looks expensive"),
            _ => BeforeDecision::Continue,
        }))
        .approver(Scripted::calls(vec![CallApproval::AllowOnce]))
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2", "continue");
    assert_eq!(calc(&rt, "rewrite me").await.unwrap(), "42", "rewrite");

    let err = calc(&rt, "break me").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    assert!(
        err.to_string().contains("invalid"),
        "a rewrite is validated again: {err}"
    );

    let err = calc(&rt, "block me").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    assert!(err.to_string().contains("double") && err.to_string().contains("no blocking allowed"));

    let err = calc(&rt, "ask me").await.unwrap_err();
    assert!(
        err.to_string().contains("invalid") || err.kind() == ErrorKind::ToolInvalidArguments,
        "asked, approved once, then ran (and `ask me` does not parse): {err}"
    );
}

#[tokio::test]
async fn a_before_hook_rewrite_goes_through_the_policy_again() {
    let policy = Policy::builder()
        .rule(
            Rule::deny("calculate")
                .arg_glob("expression", "666*")
                .reason("the beast is off limits"),
        )
        .rule(
            Rule::ask("calculate")
                .arg_glob("expression", "7*")
                .reason("sevens need a nod"),
        )
        .build()
        .unwrap();
    let approver = Scripted::calls(vec![CallApproval::AllowOnce]);
    let rt = builder()
        .policy(policy)
        .hook(before("smuggler", |args| {
            match args["expression"].as_str() {
                Some("1+1") => BeforeDecision::Rewrite(json!({"expression": "666+0"})),
                Some("2+2") => BeforeDecision::Rewrite(json!({"expression": "7+0"})),
                _ => BeforeDecision::Continue,
            }
        }))
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    let err = calc(&rt, "1+1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("the beast is off limits"), "{err}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 0);

    assert_eq!(
        calc(&rt, "2+2").await.unwrap(),
        "7",
        "asked, then allowed once"
    );
    assert_eq!(
        approver.asked.load(Ordering::SeqCst),
        1,
        "the rewritten call was asked about"
    );
    assert!(
        approver
            .reasons
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("sevens need a nod")),
        "{:?}",
        approver.reasons.lock().unwrap()
    );
}

#[tokio::test]
async fn after_hooks_keep_replace_fail_and_see_failures() {
    let seen_failures = Arc::new(Mutex::new(Vec::new()));
    let seen = seen_failures.clone();
    let rt = builder()
        .hook(after("editor", move |outcome| match outcome {
            HookOutcome::Ok { output, .. } if output == "2" => AfterDecision::Keep,
            HookOutcome::Ok { output, .. } if output == "4" => {
                AfterDecision::replace_output("four")
            }
            HookOutcome::Ok { .. } => AfterDecision::fail("six is not allowed"),
            HookOutcome::Err { kind, .. } => {
                seen.lock().unwrap().push(kind.clone());
                AfterDecision::Keep
            }
        }))
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "2+2").await.unwrap(), "four");
    let err = calc(&rt, "3+3").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::HookFailed);
    assert!(err.to_string().contains("six is not allowed"), "{err}");
    let err = calc(&rt, "1/0").await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::ToolFailed,
        "a kept failure keeps its kind"
    );
    assert_eq!(*seen_failures.lock().unwrap(), vec![ErrorKind::ToolFailed]);
}

#[tokio::test]
async fn structured_content_an_after_hook_replaces_is_checked_against_the_output_schema() {
    let rt = builder()
        .hook(after("reshape", |outcome| match outcome {
            HookOutcome::Ok { output, .. } if output == "2" => AfterDecision::Replace {
                output: None,
                details: None,
                structured: Some(Some(json!({"value": "two"}))),
                content: None,
            },
            HookOutcome::Ok { .. } => AfterDecision::Replace {
                output: None,
                details: None,
                structured: Some(Some(json!({"value": 40.5}))),
                content: None,
            },
            HookOutcome::Err { .. } => AfterDecision::Keep,
        }))
        .build()
        .await
        .unwrap();
    // calc declares `{"value": number}`: a string there is refused, and the
    // model is told why.
    let err = calc(&rt, "1+1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::HookFailed);
    assert!(
        err.to_string().contains("output schema") && err.to_string().contains("/value"),
        "{err}"
    );
    // A replacement that matches the schema passes.
    let r = rt
        .call(
            "calculate",
            json!({"expression": "6*7"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.structured, Some(json!({"value": 40.5})));
}

/// A hook that takes 300 ms at both stages (an async wait, as a real hook's I/O).
struct Slow(&'static str);

impl Hook for Slow {
    fn name(&self) -> &str {
        self.0
    }
    fn before<'a>(&'a self, _: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(BeforeDecision::Continue)
        })
    }
    fn after<'a>(
        &'a self,
        _: &'a HookCall<'a>,
        _: &'a HookOutcome,
    ) -> HookFuture<'a, AfterDecision> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            Ok(AfterDecision::replace_output("never"))
        })
    }
}

#[tokio::test]
async fn a_hook_that_times_out_fails_closed_before_and_open_after_unless_configured() {
    let slow = |stages| {
        HookEntry::new(Arc::new(Slow("slowpoke")))
            .stages(stages)
            .timeout(Duration::from_millis(50))
    };
    let rt = builder().hook(slow(Stages::BEFORE)).build().await.unwrap();
    let err = calc(&rt, "1+1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    assert!(
        err.to_string().contains("slowpoke") && err.to_string().contains("timed out"),
        "{err}"
    );

    let rt = builder()
        .hook(slow(Stages::BEFORE).on_error(OnError::both(FailurePolicy::Open)))
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2", "open: the call runs");

    let rt = builder().hook(slow(Stages::AFTER)).build().await.unwrap();
    assert_eq!(
        calc(&rt, "1+1").await.unwrap(),
        "2",
        "after: the result is kept"
    );
    let rt = builder()
        .hook(slow(Stages::AFTER).on_error(OnError::both(FailurePolicy::Closed)))
        .build()
        .await
        .unwrap();
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::HookFailed
    );
}

#[tokio::test]
async fn matchers_select_hooks_by_tool_glob_and_plugin_and_steps_are_reported() {
    let rt = builder()
        .hook(
            before("only-text", |_| {
                BeforeDecision::block("text tools are paused")
            })
            .matcher(Matcher::tools(["word_*"]).unwrap()),
        )
        .hook(
            after("calc-after", |_| AfterDecision::Keep)
                .matcher(Matcher::plugins(["calc"]).unwrap())
                .stages(Stages::AFTER),
        )
        .build()
        .await
        .unwrap();
    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = steps.clone();
    let cx = CallContext::new().on_step(move |s| sink.lock().unwrap().push(s.clone()));
    rt.call("calculate", json!({"expression": "1"}), cx)
        .await
        .unwrap();
    let steps = steps.lock().unwrap().clone();
    assert!(matches!(
        &steps[0],
        CallStep::Permission {
            decision: Decision::Allow,
            ..
        }
    ));
    let hooks: Vec<String> = steps
        .iter()
        .filter_map(|s| match s {
            CallStep::Hook(t) => Some(format!("{}:{}", t.hook, t.decision)),
            _ => None,
        })
        .collect();
    assert_eq!(hooks, vec!["calc-after:keep".to_owned()]);
    let err = rt
        .call("word_count", json!({"text": "a b"}), CallContext::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("text tools are paused"), "{err}");
}

#[tokio::test]
async fn a_command_hook_blocks_with_exit_2_and_its_stderr() {
    let scene = fs_scene();
    std::fs::write(scene.granted.join(".env"), "API_KEY=sk-test").unwrap();
    let script = root().join("examples/hooks/block-secrets.sh");
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = builder()
        .plugin_settings("fs", fs)
        .hook(HookEntry::new(Arc::new(CommandHook::argv(
            "block-secrets",
            ["sh".to_owned(), script.display().to_string()],
        ))))
        .build()
        .await
        .unwrap();
    let err = rt
        .call(
            "read_file",
            json!({"path": scene.granted.join(".env").display().to_string()}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BlockedByHook);
    assert!(err.to_string().contains("may hold secrets"), "{err}");
    let ok = rt
        .call(
            "read_file",
            json!({"path": scene.granted.join("hello.txt").display().to_string()}),
            CallContext::new(),
        )
        .await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn hooks_and_policy_also_guard_a_reused_instance() {
    let rt = builder()
        .policy(
            Policy::builder()
                .rule(Rule::deny("calculate").arg_glob("expression", "6*7"))
                .build()
                .unwrap(),
        )
        .hook(after("shout", |o| match o {
            HookOutcome::Ok { output, .. } => AfterDecision::replace_output(format!("{output}!")),
            HookOutcome::Err { .. } => AfterDecision::Keep,
        }))
        .build()
        .await
        .unwrap();
    let mut reused = rt.reused_instance("calc").await.unwrap();
    let ok = reused
        .call(
            "calculate",
            json!({"expression": "1+1"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(ok.output, "2!");
    let err = reused
        .call(
            "calculate",
            json!({"expression": "6*7"}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
}
