//! The chain with Rust hooks: decisions, ordering, rewrites, matchers,
//! stages, failures and timeouts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_content::ErrorKind;
use toolhost_hooks::{
    AfterDecision, BeforeDecision, BeforeVerdict, FailurePolicy, FnHook, Hook, HookCall, HookChain,
    HookEntry, HookError, HookFuture, HookOutcome, HookTrace, Matcher, OnError, Stage, Stages,
    TraceDecision,
};

fn entry(hook: impl Hook + 'static) -> HookEntry {
    HookEntry::new(Arc::new(hook))
}

fn call<'a>(tool: &'a str, args: &'a Value) -> HookCall<'a> {
    HookCall::new(tool, args)
        .plugin("fs", "0.1.0")
        .call_id("call_1")
        .session_id(Some("s1"))
        .agent(Some("coder"))
}

/// A hook that sleeps longer than any timeout used here.
struct Slow;

impl Hook for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn before<'a>(&'a self, _call: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(BeforeDecision::Continue)
        })
    }
    fn after<'a>(
        &'a self,
        _call: &'a HookCall<'a>,
        _outcome: &'a HookOutcome,
    ) -> HookFuture<'a, AfterDecision> {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(AfterDecision::Keep)
        })
    }
}

/// A hook that always returns an error.
fn broken() -> FnHook {
    FnHook::new("broken")
        .on_before(|_| Err(HookError::msg("database is down")))
        .on_after(|_, _| Err(HookError::msg("database is down")))
}

#[tokio::test]
async fn an_empty_chain_continues_keeps_and_allocates_no_trace() {
    let chain = HookChain::empty();
    let args = json!({"path": "a"});
    let before = chain.run_before(&call("read_file", &args)).await;
    assert_eq!(before.decision, BeforeVerdict::Continue);
    assert_eq!(before.trace.capacity(), 0);
    let after = chain
        .run_after(&call("read_file", &args), HookOutcome::ok("x"))
        .await;
    assert_eq!(after.outcome, HookOutcome::ok("x"));
    assert_eq!(after.trace.capacity(), 0);
}

#[tokio::test]
async fn a_rust_hook_that_continues_lets_the_call_run() {
    let chain = HookChain::new(vec![entry(FnHook::before("ok", |_| {
        BeforeDecision::Continue
    }))]);
    let args = json!({});
    let report = chain.run_before(&call("read_file", &args)).await;
    assert_eq!(report.decision, BeforeVerdict::Continue);
    assert_eq!(report.trace.len(), 1);
    assert_eq!(report.trace[0].decision, TraceDecision::Continue);
    assert_eq!(report.trace[0].stage, Stage::Before);
    assert_eq!(report.trace[0].error, None);
}

#[tokio::test]
async fn a_rust_hook_that_rewrites_changes_the_arguments() {
    let chain = HookChain::new(vec![entry(FnHook::before("rw", |call| {
        let mut args = call.args.clone();
        args["limit"] = json!(10);
        BeforeDecision::Rewrite(args)
    }))]);
    let args = json!({"path": "a"});
    let report = chain.run_before(&call("read_file", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Rewrite(json!({"path": "a", "limit": 10}))
    );
    assert_eq!(report.trace[0].decision, TraceDecision::Rewrite);
}

#[tokio::test]
async fn a_rust_hook_that_blocks_names_itself_and_its_reason() {
    let chain = HookChain::new(vec![entry(FnHook::before("guard", |_| {
        BeforeDecision::block("not today")
    }))]);
    let args = json!({});
    let report = chain.run_before(&call("read_file", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Block {
            hook: "guard".into(),
            reason: "not today".into()
        }
    );
    assert_eq!(
        report.trace[0].decision,
        TraceDecision::Block {
            reason: "not today".into()
        }
    );
}

#[tokio::test]
async fn a_rust_hook_that_asks_needs_approval() {
    let chain = HookChain::new(vec![entry(FnHook::before("asker", |_| {
        BeforeDecision::ask("costs money")
    }))]);
    let args = json!({});
    let report = chain.run_before(&call("buy", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Ask {
            reasons: vec!["costs money".into()],
            args: None
        }
    );
    assert_eq!(
        report.trace[0].decision,
        TraceDecision::Ask {
            reason: "costs money".into()
        }
    );
}

#[tokio::test]
async fn the_hook_sees_every_field_of_the_call() {
    let seen = Arc::new(Mutex::new(None));
    let sink = seen.clone();
    let chain = HookChain::new(vec![entry(FnHook::before("spy", move |call| {
        *sink.lock().unwrap() = Some(format!(
            "{} {} {} {} {} {:?} {:?}",
            call.tool,
            call.plugin,
            call.plugin_version,
            call.args,
            call.call_id,
            call.session_id,
            call.agent
        ));
        BeforeDecision::Continue
    }))]);
    let args = json!({"path": "a"});
    chain.run_before(&call("read_file", &args)).await;
    assert_eq!(
        seen.lock().unwrap().as_deref(),
        Some(r#"read_file fs 0.1.0 {"path":"a"} call_1 Some("s1") Some("coder")"#)
    );
}

#[tokio::test]
async fn hooks_run_in_the_configured_order_and_a_rewrite_feeds_the_next_hook() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let (o1, o2, o3) = (order.clone(), order.clone(), order.clone());
    let chain = HookChain::new(vec![
        entry(FnHook::before("first", move |call| {
            o1.lock().unwrap().push(format!("first saw {}", call.args));
            BeforeDecision::Rewrite(json!({"n": 1}))
        })),
        entry(FnHook::before("second", move |call| {
            o2.lock().unwrap().push(format!("second saw {}", call.args));
            let n = call.args["n"].as_i64().unwrap_or(0);
            BeforeDecision::Rewrite(json!({"n": n + 1}))
        })),
        entry(FnHook::before("third", move |call| {
            o3.lock().unwrap().push(format!("third saw {}", call.args));
            BeforeDecision::Continue
        })),
    ]);
    let args = json!({"n": 0});
    let report = chain.run_before(&call("count", &args)).await;
    assert_eq!(report.decision, BeforeVerdict::Rewrite(json!({"n": 2})));
    assert_eq!(
        *order.lock().unwrap(),
        [
            r#"first saw {"n":0}"#,
            r#"second saw {"n":1}"#,
            r#"third saw {"n":2}"#
        ]
    );
    let names: Vec<&str> = report.trace.iter().map(|t| t.hook.as_str()).collect();
    assert_eq!(names, ["first", "second", "third"]);
}

#[tokio::test]
async fn the_first_block_stops_the_chain() {
    let later_ran = Arc::new(Mutex::new(false));
    let flag = later_ran.clone();
    let chain = HookChain::new(vec![
        entry(FnHook::before("a", |_| BeforeDecision::ask("maybe"))),
        entry(FnHook::before("b", |_| BeforeDecision::block("no"))),
        entry(FnHook::before("c", move |_| {
            *flag.lock().unwrap() = true;
            BeforeDecision::block("also no")
        })),
    ]);
    let args = json!({});
    let report = chain.run_before(&call("x", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Block {
            hook: "b".into(),
            reason: "no".into()
        }
    );
    assert!(!*later_ran.lock().unwrap());
    assert_eq!(report.trace.len(), 2);
}

#[tokio::test]
async fn asks_are_collected_and_carry_the_rewritten_arguments() {
    let chain = HookChain::new(vec![
        entry(FnHook::before("a", |_| BeforeDecision::ask("first reason"))),
        entry(FnHook::before("rw", |_| {
            BeforeDecision::Rewrite(json!({"safe": true}))
        })),
        entry(FnHook::before("b", |_| {
            BeforeDecision::ask("second reason")
        })),
    ]);
    let args = json!({});
    let report = chain.run_before(&call("x", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Ask {
            reasons: vec!["first reason".into(), "second reason".into()],
            args: Some(json!({"safe": true}))
        }
    );
    assert_eq!(
        report.decision.reason().as_deref(),
        Some("first reason; second reason")
    );
    assert_eq!(report.trace.len(), 3);
}

#[tokio::test]
async fn matchers_select_hooks_by_tool_and_plugin_globs() {
    let chain = HookChain::new(vec![
        entry(FnHook::before("reads", |_| BeforeDecision::block("reads")))
            .matcher(Matcher::tools(["read_*"]).unwrap()),
        entry(FnHook::before("http", |_| BeforeDecision::block("http")))
            .matcher(Matcher::plugins(["http*"]).unwrap()),
        entry(FnHook::before("both", |_| BeforeDecision::block("both")))
            .matcher(Matcher::new(["list_dir"], ["fs"]).unwrap()),
    ]);
    let args = json!({});
    let blocked_by = |report: toolhost_hooks::BeforeReport| match report.decision {
        BeforeVerdict::Block { hook, .. } => Some(hook),
        _ => None,
    };
    let fs = |tool| HookCall::new(tool, &args).plugin("fs", "1.0.0");
    assert_eq!(
        blocked_by(chain.run_before(&fs("read_file")).await).as_deref(),
        Some("reads")
    );
    assert_eq!(
        blocked_by(chain.run_before(&fs("list_dir")).await).as_deref(),
        Some("both")
    );
    let get = HookCall::new("http_get", &args).plugin("http", "1.0.0");
    assert_eq!(
        blocked_by(chain.run_before(&get).await).as_deref(),
        Some("http")
    );
    let other = HookCall::new("list_dir", &args).plugin("other-fs", "1.0.0");
    let report = chain.run_before(&other).await;
    assert_eq!(report.decision, BeforeVerdict::Continue);
    assert!(report.trace.is_empty(), "non-matching hooks leave no trace");
}

#[tokio::test]
async fn stages_select_when_a_hook_runs() {
    let chain = HookChain::new(vec![
        entry(
            FnHook::new("before-only")
                .on_before(|_| BeforeDecision::Continue)
                .on_after(|_, _| AfterDecision::fail("should not run")),
        )
        .stages(Stages::BEFORE),
        entry(
            FnHook::new("after-only")
                .on_before(|_| BeforeDecision::block("should not run"))
                .on_after(|_, _| AfterDecision::Keep),
        )
        .stages(Stages::AFTER),
    ]);
    let args = json!({});
    let before = chain.run_before(&call("x", &args)).await;
    assert_eq!(before.decision, BeforeVerdict::Continue);
    assert_eq!(before.trace.len(), 1);
    let after = chain
        .run_after(&call("x", &args), HookOutcome::ok("fine"))
        .await;
    assert_eq!(after.outcome, HookOutcome::ok("fine"));
    assert_eq!(after.trace.len(), 1);
    assert_eq!(after.trace[0].hook, "after-only");
    assert_eq!(after.trace[0].stage, Stage::After);
}

#[tokio::test]
async fn a_closure_hook_runs_only_at_the_stages_it_has_a_closure_for() {
    let chain = HookChain::new(vec![
        entry(FnHook::before("guard", |_| BeforeDecision::Continue)),
        entry(FnHook::after("logger", |_, _| AfterDecision::Keep)),
    ]);
    assert_eq!(chain.entries()[0].stages, Stages::BEFORE);
    assert_eq!(chain.entries()[1].stages, Stages::AFTER);
    let args = json!({});
    let before = chain.run_before(&call("x", &args)).await;
    let names: Vec<&str> = before.trace.iter().map(|t| t.hook.as_str()).collect();
    assert_eq!(names, ["guard"]);
    let after = chain
        .run_after(&call("x", &args), HookOutcome::ok(""))
        .await;
    let names: Vec<&str> = after.trace.iter().map(|t| t.hook.as_str()).collect();
    assert_eq!(names, ["logger"]);
}

#[tokio::test]
async fn a_rust_after_hook_keeps_replaces_and_fails() {
    let args = json!({});
    let details = json!({"lines": 3});
    let outcome = || HookOutcome::Ok {
        output: "secret".into(),
        details: Some(json!({"lines": 3})),
        structured: Some(json!({"text": "secret"})),
        content: Vec::new(),
    };

    let keep = HookChain::new(vec![entry(FnHook::after("k", |_, _| AfterDecision::Keep))]);
    let report = keep.run_after(&call("x", &args), outcome()).await;
    assert_eq!(report.outcome, outcome());
    assert_eq!(report.trace[0].decision, TraceDecision::Keep);

    let replace_output = HookChain::new(vec![entry(FnHook::after("r", |_, _| {
        AfterDecision::replace_output("[redacted]")
    }))]);
    let report = replace_output.run_after(&call("x", &args), outcome()).await;
    assert_eq!(
        report.outcome,
        HookOutcome::Ok {
            output: "[redacted]".into(),
            details: Some(details.clone()),
            structured: Some(json!({"text": "secret"})),
            content: Vec::new(),
        }
    );
    assert_eq!(report.trace[0].decision, TraceDecision::Replace);

    let drop_details = HookChain::new(vec![entry(FnHook::after("d", |_, _| {
        AfterDecision::Replace {
            output: None,
            details: Some(None),
            structured: Some(Some(json!({"text": "[redacted]"}))),
            content: None,
        }
    }))]);
    let report = drop_details.run_after(&call("x", &args), outcome()).await;
    assert_eq!(
        report.outcome,
        HookOutcome::Ok {
            output: "secret".into(),
            details: None,
            structured: Some(json!({"text": "[redacted]"})),
            content: Vec::new(),
        }
    );

    let fail = HookChain::new(vec![entry(FnHook::after("f", |_, _| {
        AfterDecision::fail("output withheld")
    }))]);
    let report = fail.run_after(&call("x", &args), outcome()).await;
    assert_eq!(
        report.outcome,
        HookOutcome::err(ErrorKind::Hook, "output withheld")
    );
    assert_eq!(
        report.trace[0].decision,
        TraceDecision::Fail {
            message: "output withheld".into()
        }
    );
}

#[tokio::test]
async fn after_hooks_see_failures_and_each_others_replacements() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (s1, s2, s3) = (seen.clone(), seen.clone(), seen.clone());
    let chain = HookChain::new(vec![
        entry(FnHook::after("first", move |_, outcome| {
            s1.lock().unwrap().push(outcome.clone());
            AfterDecision::replace_output("recovered")
        })),
        entry(FnHook::after("second", move |_, outcome| {
            s2.lock().unwrap().push(outcome.clone());
            AfterDecision::fail("no after all")
        })),
        entry(FnHook::after("third", move |_, outcome| {
            s3.lock().unwrap().push(outcome.clone());
            AfterDecision::Keep
        })),
    ]);
    let args = json!({});
    let report = chain
        .run_after(
            &call("x", &args),
            HookOutcome::err("timeout", "the tool ran out of time"),
        )
        .await;
    assert_eq!(
        *seen.lock().unwrap(),
        [
            HookOutcome::err("timeout", "the tool ran out of time"),
            HookOutcome::ok("recovered"),
            HookOutcome::err(ErrorKind::Hook, "no after all"),
        ]
    );
    assert_eq!(
        report.outcome,
        HookOutcome::err(ErrorKind::Hook, "no after all")
    );
    assert_eq!(report.trace.len(), 3);
}

#[tokio::test]
async fn replacing_only_the_details_of_a_failure_keeps_the_failure() {
    let chain = HookChain::new(vec![entry(FnHook::after("d", |_, _| {
        AfterDecision::Replace {
            output: None,
            details: Some(Some(json!({}))),
            structured: None,
            content: None,
        }
    }))]);
    let args = json!({});
    let report = chain
        .run_after(&call("x", &args), HookOutcome::err("failed", "nope"))
        .await;
    assert_eq!(report.outcome, HookOutcome::err("failed", "nope"));
}

#[tokio::test]
async fn a_failing_before_hook_blocks_by_default_naming_the_hook() {
    let chain = HookChain::new(vec![entry(broken())]);
    let args = json!({});
    let report = chain.run_before(&call("x", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Block {
            hook: "broken".into(),
            reason: "hook \"broken\" failed: database is down".into()
        }
    );
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("failed: database is down")
    );
}

#[tokio::test]
async fn a_failing_before_hook_fails_open_when_configured() {
    let chain = HookChain::new(vec![
        entry(broken()).on_error(OnError::both(FailurePolicy::Open)),
        entry(FnHook::before("next", |_| {
            BeforeDecision::Rewrite(json!({"ok": 1}))
        })),
    ]);
    let args = json!({});
    let report = chain.run_before(&call("x", &args)).await;
    assert_eq!(report.decision, BeforeVerdict::Rewrite(json!({"ok": 1})));
    assert_eq!(report.trace[0].decision, TraceDecision::Continue);
    assert!(report.trace[0].error.is_some());
}

#[tokio::test]
async fn a_hook_that_is_not_there_to_run_fails_closed_even_when_configured_open() {
    let missing = || {
        FnHook::new("missing")
            .on_before(|_| Err(HookError::Unavailable("not loaded".into())))
            .on_after(|_, _| Err(HookError::Unavailable("not loaded".into())))
    };
    let chain = HookChain::new(vec![
        entry(missing()).on_error(OnError::both(FailurePolicy::Open)),
    ]);
    let args = json!({});
    let before = chain.run_before(&call("x", &args)).await;
    assert!(
        matches!(before.decision, BeforeVerdict::Block { .. }),
        "{:?}",
        before.decision
    );
    let after = chain
        .run_after(&call("x", &args), HookOutcome::ok("secret result"))
        .await;
    assert_ne!(after.outcome, HookOutcome::ok("secret result"));
}

#[tokio::test]
async fn a_failing_after_hook_keeps_the_outcome_by_default_and_fails_it_when_closed() {
    let args = json!({});
    let open = HookChain::new(vec![entry(broken())]);
    let report = open
        .run_after(&call("x", &args), HookOutcome::ok("result"))
        .await;
    assert_eq!(report.outcome, HookOutcome::ok("result"));
    assert_eq!(report.trace[0].decision, TraceDecision::Keep);
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("failed: database is down")
    );

    let closed = HookChain::new(vec![
        entry(broken()).on_error(OnError::both(FailurePolicy::Closed)),
    ]);
    let report = closed
        .run_after(&call("x", &args), HookOutcome::ok("result"))
        .await;
    assert_eq!(
        report.outcome,
        HookOutcome::err(ErrorKind::Hook, "hook \"broken\" failed: database is down")
    );
}

#[tokio::test]
async fn a_slow_before_hook_times_out_and_blocks_by_default() {
    let chain = HookChain::new(vec![entry(Slow).timeout(Duration::from_millis(200))]);
    let args = json!({});
    let report = chain.run_before(&call("x", &args)).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Block {
            hook: "slow".into(),
            reason: "hook \"slow\" timed out after 200 ms".into()
        }
    );
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("timed out after 200 ms")
    );
    assert!(report.trace[0].duration >= Duration::from_millis(200));
}

#[tokio::test]
async fn a_slow_before_hook_continues_when_open() {
    let chain = HookChain::new(vec![
        entry(Slow)
            .timeout(Duration::from_millis(100))
            .on_error(OnError::both(FailurePolicy::Open)),
    ]);
    let args = json!({});
    let report = chain.run_before(&call("x", &args)).await;
    assert_eq!(report.decision, BeforeVerdict::Continue);
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("timed out after 100 ms")
    );
}

#[tokio::test]
async fn a_slow_after_hook_keeps_by_default_and_fails_when_closed() {
    let args = json!({});
    let open = HookChain::new(vec![entry(Slow).timeout(Duration::from_millis(100))]);
    let report = open
        .run_after(&call("x", &args), HookOutcome::ok("result"))
        .await;
    assert_eq!(report.outcome, HookOutcome::ok("result"));
    assert_eq!(
        report.trace[0].error.as_deref(),
        Some("timed out after 100 ms")
    );

    let closed = HookChain::new(vec![
        entry(Slow)
            .timeout(Duration::from_millis(100))
            .on_error(OnError {
                before: FailurePolicy::Open,
                after: FailurePolicy::Closed,
            }),
    ]);
    let report = closed
        .run_after(&call("x", &args), HookOutcome::ok("result"))
        .await;
    assert_eq!(
        report.outcome,
        HookOutcome::err(ErrorKind::Hook, "hook \"slow\" timed out after 100 ms")
    );
}

#[test]
fn a_trace_serializes_for_events_and_history() {
    let trace = HookTrace {
        hook: "audit".into(),
        stage: Stage::After,
        decision: TraceDecision::Replace,
        duration: Duration::from_micros(1500),
        error: None,
    };
    let json = serde_json::to_value(&trace).unwrap();
    assert_eq!(
        json,
        json!({"hook": "audit", "stage": "after", "decision": "replace", "duration_ms": 1.5})
    );
    let back: HookTrace = serde_json::from_value(json).unwrap();
    assert_eq!(back, trace);
}

#[test]
fn the_chain_futures_are_send() {
    fn assert_send<T: Send>(_: T) {}
    let chain = HookChain::empty();
    let args = json!({});
    let c = HookCall::new("x", &args);
    assert_send(chain.run_before(&c));
    assert_send(chain.run_after(&c, HookOutcome::ok("")));
}

#[tokio::test]
async fn the_report_says_whether_a_hook_put_in_a_structured_result() {
    let args = json!({});
    let run = |decision: AfterDecision, outcome: HookOutcome| {
        let chain = HookChain::new(vec![entry(FnHook::after("h", move |_, _| {
            Ok(decision.clone())
        }))]);
        let args = args.clone();
        async move {
            chain
                .run_after(&call("x", &args), outcome)
                .await
                .structured_replaced
        }
    };
    let structured = |v: Option<Value>| AfterDecision::Replace {
        output: Some("text".into()),
        details: None,
        structured: Some(v),
        content: None,
    };
    let failed = || HookOutcome::err("tool-failed", "boom");
    assert!(!run(AfterDecision::Keep, HookOutcome::ok("x")).await);
    assert!(!run(AfterDecision::replace_output("y"), HookOutcome::ok("x")).await);
    assert!(run(structured(Some(json!({"v": 1}))), HookOutcome::ok("x")).await);
    assert!(
        !run(structured(None), HookOutcome::ok("x")).await,
        "removed"
    );
    assert!(
        run(structured(Some(json!(1))), failed()).await,
        "a failure recovered"
    );
    assert!(!run(AfterDecision::fail("no"), HookOutcome::ok("x")).await);
}

/// A result with text, an image and an embedded text resource, as an MCP
/// server sends one.
fn with_content() -> HookOutcome {
    use toolhost_content::Content;
    let content = vec![
        Content::text("token=s3cret"),
        Content::image("iVBORw0KGgo=", "image/png"),
        Content::embedded_text("file:///env", "s3cret again"),
    ];
    HookOutcome::Ok {
        output: toolhost_content::text_of(&content),
        details: None,
        structured: None,
        content,
    }
}

async fn after(decision: AfterDecision, outcome: HookOutcome) -> toolhost_hooks::AfterReport {
    let chain = HookChain::new(vec![entry(FnHook::after("h", move |_, _| {
        Ok(decision.clone())
    }))]);
    let args = json!({});
    chain.run_after(&call("x", &args), outcome).await
}

#[tokio::test]
async fn a_hook_that_rewrites_the_output_rewrites_the_contents_text_too() {
    let report = after(
        AfterDecision::replace_output("token=[redacted]"),
        with_content(),
    )
    .await;
    let HookOutcome::Ok {
        output, content, ..
    } = report.outcome
    else {
        panic!("{:?}", report.outcome)
    };
    assert_eq!(output, "token=[redacted]");
    let kinds: Vec<_> = content
        .iter()
        .map(toolhost_content::Content::kind)
        .collect();
    assert_eq!(
        kinds,
        ["text", "image"],
        "the embedded text went with the text"
    );
    assert_eq!(content[0].as_text(), Some("token=[redacted]"));
    assert!(
        !report.content_replaced,
        "the hook gave no content of its own"
    );
}

#[tokio::test]
async fn content_given_back_unchanged_counts_as_not_replaced() {
    let HookOutcome::Ok { content, .. } = with_content() else {
        unreachable!()
    };
    let echo = AfterDecision::Replace {
        output: Some("token=[redacted]".into()),
        details: None,
        structured: None,
        content: Some(content),
    };
    let report = after(echo, with_content()).await;
    let HookOutcome::Ok { content, .. } = &report.outcome else {
        panic!()
    };
    assert_eq!(content[0].as_text(), Some("token=[redacted]"));
    assert!(
        !content.iter().any(|c| c.as_text() == Some("s3cret again")),
        "{content:?}"
    );
    assert!(!report.content_replaced);
}

#[tokio::test]
async fn new_content_without_an_output_makes_the_output_its_text() {
    use toolhost_content::Content;
    let replace = AfterDecision::Replace {
        output: None,
        details: None,
        structured: None,
        content: Some(vec![
            Content::text("only this"),
            Content::image("R0lGODlh", "image/gif"),
        ]),
    };
    let report = after(replace, with_content()).await;
    let HookOutcome::Ok {
        output, content, ..
    } = &report.outcome
    else {
        panic!()
    };
    assert_eq!(output, "only this");
    assert_eq!(content[1].kind(), "image");
    assert!(report.content_replaced);
}
