//! The live feed of calls (`Runtime::watch_calls`), for an operator's
//! console: a Started and a Finished event per call, on every entry
//! point, with the policy's decision, each step's time and the outcome.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::TryRecvError;
use toolhost_runtime::policy::{Policy, Rule};
use toolhost_runtime::{
    Approver, CallContext, Runtime, RuntimeBuilder, error::ErrorKind, feed::CallEvent,
    feed::CallPhase, feed::StepTiming, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::ResultApproval, permission::ResultApprovalRequest,
};

use crate::support::{plugins_dir, root};

fn builder() -> RuntimeBuilder {
    Runtime::builder()
        .plugin_dir(plugins_dir())
        .cache_dir(Some(root().join("target/test-cache")))
}

async fn calc(rt: &Runtime, expression: &str, cx: CallContext) -> Result<String, ErrorKind> {
    rt.call("calculate", json!({ "expression": expression }), cx)
        .await
        .map(|r| r.output)
        .map_err(|e| e.kind())
}

/// The next event, within a few seconds.
async fn next(rx: &mut Receiver<Arc<CallEvent>>) -> Arc<CallEvent> {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("an event within 5 s")
        .expect("the feed is open and not behind")
}

/// The Started and the Finished event of the next call on the feed.
async fn one_call(rx: &mut Receiver<Arc<CallEvent>>) -> (Arc<CallEvent>, Arc<CallEvent>) {
    let started = next(rx).await;
    assert!(matches!(started.phase, CallPhase::Started), "{started:?}");
    let finished = next(rx).await;
    assert_eq!(finished.id, started.id);
    (started, finished)
}

/// The parts of a Finished event the tests look at.
struct Finished<'a> {
    decision: Option<&'a str>,
    outcome: &'a str,
    steps: &'a [StepTiming],
    cached: bool,
    plugin: Option<&'a str>,
}

fn finished(event: &CallEvent) -> Finished<'_> {
    match &event.phase {
        CallPhase::Finished {
            decision,
            outcome,
            steps,
            cached,
            plugin,
            ..
        } => Finished {
            decision: decision.as_deref(),
            outcome,
            steps,
            cached: *cached,
            plugin: plugin.as_deref(),
        },
        CallPhase::Started => panic!("expected a finished event, got {event:?}"),
    }
}

fn step_names(steps: &[StepTiming]) -> Vec<&'static str> {
    steps.iter().map(|s| s.step).collect()
}

#[tokio::test]
async fn watch_a_call_emits_started_then_finished_with_admit_execute_conclude_in_order() {
    let rt = builder().build().await.unwrap();
    let mut rx = rt.watch_calls();
    let cx = CallContext::new()
        .call_id("watched-1")
        .agent("reviewer")
        .client("token:abc");
    assert_eq!(calc(&rt, "40+2", cx).await.unwrap(), "42");

    let (started, done) = one_call(&mut rx).await;
    assert_eq!(started.id, "watched-1");
    assert_eq!(started.tool, "calculate");
    assert_eq!(started.agent.as_deref(), Some("reviewer"));
    assert_eq!(started.client.as_deref(), Some("token:abc"));
    assert!(started.at_ms > 0 && done.at_ms >= started.at_ms);
    let f = finished(&done);
    assert_eq!(f.decision, Some("allow"));
    assert_eq!(f.outcome, "ok");
    assert_eq!(f.plugin, Some("calc"));
    assert!(!f.cached);
    assert_eq!(step_names(f.steps), ["admit", "execute", "conclude"]);
    let admit = &f.steps[0];
    assert!(
        admit
            .note
            .as_deref()
            .is_some_and(|n| n.starts_with("allow by ")),
        "{admit:?}"
    );
    assert_eq!(f.steps[1].note, None, "not from the cache");

    // As a console receives it: flat, the phase as a tag.
    let json: Value = serde_json::to_value(&*done).unwrap();
    assert_eq!(json["phase"], "finished");
    assert_eq!(json["id"], "watched-1");
    assert_eq!(json["decision"], "allow");
    assert_eq!(json["steps"][0]["step"], "admit");
    assert!(json["micros"].is_u64(), "{json}");
    let json: Value = serde_json::to_value(&*started).unwrap();
    assert_eq!(json["phase"], "started");
}

#[tokio::test]
async fn watch_a_call_the_result_cache_answers_notes_its_execute_step_cached() {
    let rt = builder().build().await.unwrap();
    let mut rx = rt.watch_calls();
    calc(&rt, "6*7", CallContext::new()).await.unwrap();
    calc(&rt, "6*7", CallContext::new()).await.unwrap();
    let (_, first) = one_call(&mut rx).await;
    let (_, second) = one_call(&mut rx).await;
    assert_ne!(first.id, second.id, "made-up ids differ");
    assert!(!finished(&first).cached);
    let f = finished(&second);
    assert!(f.cached);
    assert_eq!(step_names(f.steps), ["admit", "execute", "conclude"]);
    assert_eq!(f.steps[1].note.as_deref(), Some("cached"));
}

#[tokio::test]
async fn watch_a_denied_call_finishes_with_decision_deny_its_kind_and_no_execute_step() {
    let policy = Policy::builder()
        .rule(Rule::deny("calculate").reason("no sums today"))
        .build()
        .unwrap();
    let rt = builder().policy(policy).build().await.unwrap();
    let mut rx = rt.watch_calls();
    let kind = calc(&rt, "1+1", CallContext::new()).await.unwrap_err();
    assert_eq!(kind, ErrorKind::PermissionDenied);

    let (_, done) = one_call(&mut rx).await;
    let f = finished(&done);
    assert_eq!(f.decision, Some("deny"));
    assert_eq!(f.outcome, ErrorKind::PermissionDenied.as_str());
    assert_eq!(step_names(f.steps), ["admit", "conclude"]);
    let CallPhase::Finished { rule, .. } = &done.phase else {
        unreachable!()
    };
    assert!(
        rule.as_deref().is_some_and(|r| r.contains("rule 1")),
        "{rule:?}"
    );
}

/// Answers every call question with "allow always", and counts them.
#[derive(Default)]
struct AllowAlways {
    asked: std::sync::atomic::AtomicUsize,
}

impl Approver for AllowAlways {
    fn approve_call<'a>(
        &'a self,
        _: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { CallApproval::AllowAlways })
    }
    fn approve_result<'a>(
        &'a self,
        _: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async { ResultApproval::Accept })
    }
}

#[tokio::test]
async fn watch_an_ask_answered_by_the_approver_then_by_the_saved_approval_shows_an_approval_step() {
    let dir = tempfile::tempdir().unwrap();
    let approver = Arc::new(AllowAlways::default());
    let rt = builder()
        .policy(
            Policy::builder()
                .rule(Rule::ask("calculate"))
                .build()
                .unwrap(),
        )
        .approvals_file(Some(dir.path().join("approvals.json")))
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    let mut rx = rt.watch_calls();
    assert_eq!(calc(&rt, "2+3", CallContext::new()).await.unwrap(), "5");
    assert_eq!(calc(&rt, "2+3", CallContext::new()).await.unwrap(), "5");
    assert_eq!(
        approver.asked.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the second call is answered by the saved approval"
    );

    let (_, asked) = one_call(&mut rx).await;
    let f = finished(&asked);
    assert_eq!(f.decision, Some("ask"));
    assert_eq!(f.outcome, "ok");
    assert_eq!(
        step_names(f.steps),
        ["admit", "approval", "execute", "conclude"]
    );
    assert_eq!(
        f.steps[1].note.as_deref(),
        Some("allowed always (saved) by approver")
    );
    assert!(
        f.steps[1].micros <= f.steps[0].micros,
        "the approval lies within admit: {:?}",
        f.steps
    );

    let (_, saved) = one_call(&mut rx).await;
    let f = finished(&saved);
    assert_eq!(f.decision, Some("ask"));
    assert_eq!(
        step_names(f.steps),
        ["admit", "approval", "execute", "conclude"]
    );
    let note = f.steps[1].note.as_deref().unwrap_or_default();
    assert!(note.starts_with("saved approval "), "{note}");
}

#[tokio::test]
async fn watch_an_unknown_tool_still_emits_started_and_finished_not_found() {
    let rt = builder().build().await.unwrap();
    let mut rx = rt.watch_calls();
    let err = rt
        .call(
            "no_such_tool",
            json!({}),
            CallContext::new().call_id("lost-1"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    let (started, done) = one_call(&mut rx).await;
    assert_eq!(started.id, "lost-1");
    assert_eq!(started.tool, "no_such_tool");
    let f = finished(&done);
    assert_eq!(f.outcome, "not-found");
    assert_eq!(f.decision, None, "it never reached the policy");
    assert_eq!(f.plugin, None);
    assert!(f.steps.is_empty(), "{:?}", f.steps);
}

#[tokio::test]
async fn watch_a_reused_instance_call_is_on_the_feed_too() {
    let rt = builder().build().await.unwrap();
    let mut reused = rt.reused_instance("calc").await.unwrap();
    let mut rx = rt.watch_calls();
    let r = reused
        .call(
            "calculate",
            json!({"expression": "3*3"}),
            CallContext::new().call_id("kept-1"),
        )
        .await
        .unwrap();
    assert_eq!(r.output, "9");
    let (started, done) = one_call(&mut rx).await;
    assert_eq!(started.id, "kept-1");
    let f = finished(&done);
    assert_eq!(f.decision, Some("allow"));
    assert_eq!(f.outcome, "ok");
    assert_eq!(step_names(f.steps), ["admit", "execute", "conclude"]);
}

#[tokio::test]
async fn watch_a_receiver_never_read_lags_and_never_blocks_calls() {
    let rt = builder().build().await.unwrap();
    let mut idle = rt.watch_calls();
    let calls = async {
        for i in 0..2000 {
            // A few distinct arguments: most calls come from the cache.
            let expression = format!("{}+1", i % 10);
            calc(&rt, &expression, CallContext::new()).await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(120), calls)
        .await
        .expect("2000 calls complete while nobody reads the feed");
    // 4000 events into a feed that keeps 1024: the receiver skipped the rest.
    match idle.try_recv() {
        Err(TryRecvError::Lagged(skipped)) => assert!(skipped >= 4000 - 1024, "{skipped}"),
        other => panic!("expected the receiver to lag, got {other:?}"),
    }
    // And reads on from the oldest event kept.
    assert!(idle.try_recv().is_ok());
}

/// A megabyte of tool name with a bidirectional override, and a long id
/// with a terminal escape, as an MCP client may send them.
fn hostile_names() -> (String, String) {
    let tool = format!("evil\u{202e}{}", "x".repeat(1_000_000));
    let id = format!("mcp-\u{1b}[2J{}", "7".repeat(100_000));
    (tool, id)
}

#[tokio::test]
async fn watch_a_callers_huge_hostile_tool_name_and_id_reach_the_feed_bounded_and_escaped() {
    let rt = builder().build().await.unwrap();
    let mut rx = rt.watch_calls();
    let (tool, id) = hostile_names();
    let err = rt
        .call(&tool, json!({}), CallContext::new().call_id(&id))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // The error the caller reads names the tool as shown, too.
    assert!(
        err.to_string().len() < 2_000,
        "{} bytes",
        err.to_string().len()
    );

    let (started, done) = one_call(&mut rx).await;
    for event in [&started, &done] {
        for (what, text) in [("tool", &event.tool), ("id", &event.id)] {
            assert!(
                text.chars().count() <= toolhost_runtime::shown::MAX_SHOWN_NAME_CHARS + 1,
                "{what}: {} chars",
                text.chars().count()
            );
            assert!(
                !text.chars().any(toolhost_text::needs_escape),
                "{what}: {text:?}"
            );
        }
    }
    assert!(done.tool.starts_with("evil\\u{202e}xxx"), "{}", done.tool);
    assert_eq!(finished(&done).outcome, "not-found");
}

#[tokio::test]
async fn watch_two_callers_calls_with_the_same_id_are_told_apart_by_seq() {
    let rt = builder().build().await.unwrap();
    let mut rx = rt.watch_calls();
    for client in ["token:aaaa", "token:bbbb"] {
        let cx = CallContext::new().call_id("mcp-1").client(client);
        calc(&rt, "1+1", cx).await.unwrap();
    }
    let (first, first_done) = one_call(&mut rx).await;
    let (second, second_done) = one_call(&mut rx).await;
    assert_eq!(first.id, second.id, "the callers' ids are the same");
    assert_eq!(first.seq, first_done.seq);
    assert_eq!(second.seq, second_done.seq);
    assert_ne!(first.seq, second.seq);
    let json: Value = serde_json::to_value(&*second_done).unwrap();
    assert_eq!(json["seq"], second.seq);
}

/// Every span's name and field values, as a subscriber sees them.
#[derive(Clone, Default)]
struct SpanText(Arc<std::sync::Mutex<Vec<(String, String)>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanText {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut seen = self.0.lock().unwrap();
        seen.push(("(name)".to_owned(), attrs.metadata().name().to_owned()));
        attrs.record(&mut Fields(&mut seen));
    }
    fn on_record(
        &self,
        _: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        values.record(&mut Fields(&mut self.0.lock().unwrap()));
    }
}

#[tokio::test]
async fn a_callers_huge_hostile_tool_name_and_id_make_bounded_escaped_spans() {
    use tracing_subscriber::layer::SubscriberExt;
    // While only one dispatcher exists, tracing caches a call site's
    // interest from the dispatcher of whichever thread hits it first
    // (tracing-core's `has_just_one`): another test's thread would make
    // it "never". With a second one, every dispatcher is asked.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let seen = SpanText::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(seen.clone()));
    let rt = builder().build().await.unwrap();
    let (tool, id) = hostile_names();
    let err = rt
        .call(&tool, json!({}), CallContext::new().call_id(&id))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // And a call that is found: its id is recorded at lookup.
    calc(&rt, "1+1", CallContext::new().call_id(&id))
        .await
        .unwrap();

    let seen = seen.0.lock().unwrap();
    let call_spans = seen
        .iter()
        .filter(|(k, v)| k == "(name)" && v == "execute_tool")
        .count();
    assert_eq!(call_spans, 2, "{seen:?}");
    for field in ["otel.name", "gen_ai.tool.name", "gen_ai.tool.call.id"] {
        assert!(seen.iter().any(|(k, _)| k == field), "{field} recorded");
    }
    for (field, value) in seen.iter() {
        assert!(
            value.chars().count() <= 200,
            "{field}: {} chars",
            value.chars().count()
        );
        assert!(
            !value.contains('\u{202e}') && !value.contains('\u{1b}'),
            "{field}: {value:?}"
        );
    }
}
