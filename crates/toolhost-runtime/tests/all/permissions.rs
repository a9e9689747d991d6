//! The permission layer and the hooks, through the public API with the real
//! plugins: policy decisions, approvals, result approval, session toggles,
//! Rust hooks and command hooks, on every call path.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{TestServer, fs_scene, plugins_dir, root};
use serde_json::{Value, json};
use toolhost_runtime::hooks::{
    AfterDecision, BeforeDecision, CommandHook, FailurePolicy, FnHook, Hook, HookCall, HookEntry,
    HookFuture, HookOutcome, Matcher, OnError, Stages,
};
use toolhost_runtime::policy::{Decision, Policy, Rule};
use toolhost_runtime::{
    ApprovalFuture, Approver, CallApproval, CallApprovalRequest, CallContext, CallError, CallStep,
    DirGrant, ErrorKind, PluginSettings, ResultApproval, ResultApprovalRequest, Runtime,
    RuntimeBuilder,
};

fn builder() -> RuntimeBuilder {
    Runtime::builder()
        .plugin_dir(plugins_dir())
        .cache_dir(Some(root().join("target/test-cache")))
}

async fn calc(rt: &Runtime, expression: &str) -> Result<String, CallError> {
    rt.call(
        "calculate",
        json!({ "expression": expression }),
        CallContext::new(),
    )
    .await
    .map(|r| r.output)
}

/// Answers every question with the next scripted answer, and counts them.
#[derive(Default)]
struct Scripted {
    calls: Mutex<Vec<CallApproval>>,
    results: Mutex<Vec<ResultApproval>>,
    asked: AtomicUsize,
    reasons: Mutex<Vec<String>>,
}

impl Scripted {
    fn calls(answers: Vec<CallApproval>) -> Arc<Scripted> {
        Arc::new(Scripted {
            calls: Mutex::new(answers),
            ..Default::default()
        })
    }
    fn results(answers: Vec<ResultApproval>) -> Arc<Scripted> {
        Arc::new(Scripted {
            results: Mutex::new(answers),
            ..Default::default()
        })
    }
}

impl Approver for Scripted {
    fn approve_call<'a>(
        &'a self,
        req: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.reasons
            .lock()
            .unwrap()
            .extend(req.reasons.iter().cloned());
        let answer = self.calls.lock().unwrap().remove(0);
        Box::pin(async move { answer })
    }
    fn approve_result<'a>(
        &'a self,
        _: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        let answer = self.results.lock().unwrap().remove(0);
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn a_denied_tool_is_refused_with_the_rule_reason_and_hidden_from_the_model() {
    let policy = Policy::builder()
        .rule(Rule::deny("http_get").reason("no network here"))
        .build()
        .unwrap();
    let rt = builder().policy(policy).build().await.unwrap();
    let err = rt
        .call(
            "http_get",
            json!({"url": "http://127.0.0.1:9/"}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("no network here"), "{err}");
    let visible: Vec<String> = rt
        .offered_tools(None, None)
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(!visible.contains(&"http_get".to_owned()), "{visible:?}");
    assert!(visible.contains(&"calculate".to_owned()));
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
}

#[tokio::test]
async fn argument_patterns_decide_per_call_and_keep_the_tool_visible() {
    let scene = fs_scene();
    let secret_dir = scene.granted.join("secret");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("key.txt"), "hunter2").unwrap();
    let pattern = format!("{}/secret/**", scene.granted.display());
    let policy = Policy::builder()
        .rule(
            Rule::deny("read_file")
                .arg_path("path", &pattern)
                .reason("the secret folder is off limits"),
        )
        .build()
        .unwrap();
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = builder()
        .policy(policy)
        .plugin_settings("fs", fs)
        .build()
        .await
        .unwrap();
    assert!(
        rt.offered_tools(None, None)
            .iter()
            .any(|t| t.name == "read_file")
    );
    let read = |path: String| {
        let rt = rt.clone();
        async move {
            rt.call("read_file", json!({ "path": path }), CallContext::new())
                .await
        }
    };
    let sneaky = format!("{}/sub/../secret/key.txt", scene.granted.display());
    let err = read(sneaky).await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::PermissionDenied,
        "`..` does not get around the rule"
    );
    let ok = read(scene.granted.join("hello.txt").display().to_string()).await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn ask_without_an_approver_is_denied_unless_the_builder_allows_it() {
    let policy = || {
        Policy::builder()
            .rule(Rule::ask("calculate"))
            .build()
            .unwrap()
    };
    let rt = builder().policy(policy()).build().await.unwrap();
    let err = calc(&rt, "1+1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(
        err.to_string().contains("needs the user's approval"),
        "{err}"
    );

    let rt = builder()
        .policy(policy())
        .allow_asks_without_approver(true)
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
}

#[tokio::test]
async fn ask_once_asks_every_time_and_deny_passes_the_users_message_to_the_model() {
    let approver = Scripted::calls(vec![
        CallApproval::AllowOnce,
        CallApproval::AllowOnce,
        CallApproval::Deny {
            message: Some("use mental arithmetic".into()),
        },
    ]);
    let rt = builder()
        .policy(
            Policy::builder()
                .rule(Rule::ask("calculate"))
                .build()
                .unwrap(),
        )
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "2+2").await.unwrap(), "4");
    let err = calc(&rt, "3+3").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("use mental arithmetic"), "{err}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 3);
}

fn ask_calculate() -> Policy {
    Policy::builder()
        .rule(Rule::ask("calculate"))
        .build()
        .unwrap()
}

/// A runtime under `policy` with its saved approvals in `saved`, and
/// `approver` (none: nobody to ask).
async fn with_saved(
    policy: Policy,
    saved: &std::path::Path,
    approver: Option<Arc<Scripted>>,
) -> Runtime {
    let mut b = builder()
        .policy(policy)
        .approvals_file(Some(saved.to_owned()));
    if let Some(a) = approver {
        b = b.approver(a);
    }
    b.build().await.unwrap()
}

#[tokio::test]
async fn allow_always_saves_an_approval_of_these_arguments_only_and_it_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![
        CallApproval::AllowAlways,
        CallApproval::Deny { message: None },
    ]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2", "not asked again");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    let err = calc(&rt, "2+2").await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::PermissionDenied,
        "other arguments are asked"
    );
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    let list = rt.approvals().list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].tool, "calculate");
    assert_eq!(list[0].plugin, "calc");
    assert!(list[0].digest.starts_with("sha256:"), "{:?}", list[0]);
    assert_eq!(
        list[0].scope,
        toolhost_runtime::policy::approvals::Scope::Arguments(json!({"expression": "1+1"}))
    );

    // A restart reads the file: nobody to ask, and the approved call runs.
    let rt = with_saved(ask_calculate(), &saved, None).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(
        calc(&rt, "2+2").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    // Revoked: asked (here: denied, nobody to ask) again.
    assert!(rt.approvals().revoke(&list[0].id).unwrap());
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}

#[tokio::test]
async fn an_approval_a_client_saves_covers_that_clients_calls_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![
        CallApproval::AllowTool,
        CallApproval::Deny { message: None },
    ]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    let from = |client: &'static str, expression: &'static str| {
        let rt = rt.clone();
        async move {
            rt.call(
                "calculate",
                json!({ "expression": expression }),
                CallContext::new().client(client),
            )
            .await
            .map(|r| r.output)
        }
    };
    assert_eq!(from("token:a", "1+1").await.unwrap(), "2");
    assert_eq!(from("token:a", "2+2").await.unwrap(), "4", "a's own calls");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    let other = from("token:b", "1+1").await.unwrap_err();
    assert_eq!(other.kind(), ErrorKind::PermissionDenied, "b is asked");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    assert_eq!(
        rt.approvals().list().unwrap()[0].client.as_deref(),
        Some("token:a")
    );
}

#[tokio::test]
async fn a_tool_approval_covers_any_arguments_of_that_build_and_never_lifts_a_deny() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![CallApproval::AllowTool]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "5*5").await.unwrap(), "25", "any arguments");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);

    // Another build of the plugin (here: the saved digest changed) is asked again.
    let text = std::fs::read_to_string(&saved).unwrap();
    let digest = rt.approvals().list().unwrap()[0].digest.clone();
    std::fs::write(&saved, text.replace(&digest, "sha256:an-older-build")).unwrap();
    let rt = with_saved(ask_calculate(), &saved, None).await;
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );

    // Saved for this build, and a deny rule: the deny wins.
    std::fs::write(&saved, text).unwrap();
    let deny = Policy::builder()
        .rule(Rule::deny("calculate"))
        .build()
        .unwrap();
    let rt = with_saved(deny, &saved, None).await;
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}

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
async fn a_rejected_result_reaches_the_model_as_a_rejected_status() {
    let approver = Scripted::results(vec![
        ResultApproval::Accept,
        ResultApproval::Reject {
            message: Some("that number looks wrong".into()),
        },
    ]);
    let rt = builder()
        .policy(
            Policy::builder()
                .approve_results(["calculate"])
                .build()
                .unwrap(),
        )
        .approver(approver)
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    let err = calc(&rt, "2+2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Rejected);
    let seen: Value = serde_json::from_str(&err.to_string()).unwrap();
    assert_eq!(
        seen,
        json!({"status": "rejected", "message": "that number looks wrong"})
    );
}

#[tokio::test]
async fn a_tool_switched_off_for_a_session_is_hidden_and_denied_there_only() {
    let rt = builder().build().await.unwrap();
    rt.disable_tools("s1", "calc*").unwrap();
    let in_s1 = CallContext::new().session_id("s1");
    let err = rt
        .call("calculate", json!({"expression": "1"}), in_s1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(
        !rt.offered_tools(None, Some("s1"))
            .iter()
            .any(|t| t.name == "calculate")
    );
    assert!(
        rt.offered_tools(None, Some("s2"))
            .iter()
            .any(|t| t.name == "calculate")
    );
    let in_s2 = CallContext::new().session_id("s2");
    assert!(
        rt.call("calculate", json!({"expression": "1"}), in_s2)
            .await
            .is_ok()
    );
    rt.enable_tools("s1", "calc*").unwrap();
    let again = CallContext::new().session_id("s1");
    assert!(
        rt.call("calculate", json!({"expression": "1"}), again)
            .await
            .is_ok()
    );
}

/// Allows everything, except for `reviewer`, who may call `word_count` only.
fn reviewer_policy() -> Policy {
    Policy::from_toml(
        "default = \"allow\"\n\
         [profiles.reviewer]\n\
         default = \"deny\"\n\
         [[profiles.reviewer.rules]]\n\
         tool = \"word_count\"\n\
         decision = \"allow\"\n",
        Path::new("inline.toml"),
    )
    .unwrap()
}

#[tokio::test]
async fn an_agent_profile_overrides_the_defaults_for_that_agent() {
    let policy = reviewer_policy();
    let rt = builder().policy(policy).build().await.unwrap();
    let names = |agent| -> Vec<String> {
        rt.offered_tools(agent, None)
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert_eq!(names(Some("reviewer")), vec!["word_count".to_owned()]);
    assert!(names(None).len() > 1);
    let err = rt
        .call(
            "calculate",
            json!({"expression": "1"}),
            CallContext::new().agent("reviewer"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn a_not_found_error_names_only_the_tools_the_callers_profile_may_see() {
    let policy = reviewer_policy();
    let rt = builder().policy(policy).build().await.unwrap();
    let missing = |cx: CallContext| {
        let rt = rt.clone();
        async move {
            match rt.call("calculat", json!({}), cx).await {
                Err(CallError::NotFound {
                    suggestions,
                    available,
                    ..
                }) => (suggestions, available),
                other => panic!("{other:?}"),
            }
        }
    };
    let (suggestions, available) = missing(CallContext::new().agent("reviewer")).await;
    assert_eq!(available, ["word_count"]);
    assert!(suggestions.is_empty(), "{suggestions:?}");
    // Without the profile, the hidden tool is there to suggest.
    let (suggestions, available) = missing(CallContext::new()).await;
    assert!(available.contains(&"calculate".to_owned()), "{available:?}");
    assert_eq!(suggestions.first().map(String::as_str), Some("calculate"));
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
            },
            HookOutcome::Ok { .. } => AfterDecision::Replace {
                output: None,
                details: None,
                structured: Some(Some(json!({"value": 40.5}))),
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
    assert_eq!(hook.kind, toolhost_runtime::PluginKind::Hook);
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
    assert_eq!(hook.kind, toolhost_runtime::PluginKind::Hook);
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
async fn a_hook_plugin_after_the_call_replaces_fails_and_recovers_a_failure() {
    let (_dir, rt) = decisions(DECISIONS, |b| b).await;

    let (result, traces) = calc_traced(&rt, "2+2").await;
    let result = result.unwrap();
    assert_eq!(result.output, "four");
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

#[tokio::test]
async fn a_url_rule_holds_for_every_redirect_hop() {
    let target = TestServer::start("the page behind the redirect");
    let start = TestServer::redirecting(&target.url("/secret"));
    let mut http = toolhost_runtime::PluginSettings::default();
    for port in [start.port, target.port] {
        http.hosts
            .push(format!("127.0.0.1:{port}").parse().unwrap());
    }
    let policy = Policy::builder()
        .rule(
            Rule::deny("http_get")
                .arg_host("url", format!("127.0.0.1:{}", target.port))
                .reason("not that service"),
        )
        .build()
        .unwrap();
    let rt = builder()
        .plugin_settings("http", http)
        .policy(policy)
        .build()
        .await
        .unwrap();

    // Asked directly, the rule denies the call.
    let direct = rt
        .call(
            "http_get",
            json!({"url": target.url("/secret")}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(direct.kind(), ErrorKind::PermissionDenied, "{direct}");

    // Through an allowed host's redirect, the hop is refused too.
    let through = rt
        .call(
            "http_get",
            json!({"url": start.url("/go")}),
            CallContext::new(),
        )
        .await;
    assert!(through.is_err(), "{through:?}");
    assert_eq!(start.request_count(), 1, "the first request went out");
    assert_eq!(
        target.request_count(),
        0,
        "the redirect to the denied service never left the host"
    );
}
