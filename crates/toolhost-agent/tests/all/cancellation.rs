//! A run stops early and promptly: an abort while streaming, during a tool
//! call or while waiting for approval, a tool's timeout and the run's
//! deadline, with the partial history kept and the tools told.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::agent_loop::{agent, options, tool_messages};
use crate::agent_support::*;
use serde_json::Value;
use toolhost_agent::{
    Agent, AgentEvent, AnswerSource, CancellationToken, Delta, ErrorKind, Message, Status,
    ToolOutcome, event_channel,
};

#[tokio::test]
async fn abort_during_streaming_ends_promptly_and_keeps_partial_text() {
    let provider = ScriptedProvider::new(vec![Step::Hang {
        deltas: vec![Delta::Text("Partial ans".into())],
    }]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    let opts = options().abort(abort).on_event(move |e| {
        if matches!(e, AgentEvent::TextDelta { .. }) {
            trigger.cancel();
        }
    });
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        agent(&provider, &tools, opts).run(vec![Message::user("go")]),
    )
    .await
    .expect("the run must end promptly even though the provider ignores cancellation");
    assert_eq!(result.status, Status::Aborted);
    assert_eq!(result.final_text(), "Partial ans");
    assert_eq!(result.messages.len(), 2);
}

#[tokio::test]
async fn abort_from_another_task_while_the_provider_honours_cancellation() {
    let provider = ScriptedProvider::new(vec![Step::UntilCancelled { deltas: vec![] }]);
    let tools = FakeTools::echo(vec![]);
    let abort = CancellationToken::new();
    let agent = agent(&provider, &tools, options().abort(abort.clone()));
    let input = vec![
        Message::user("earlier"),
        Message::assistant("old answer"),
        Message::user("go"),
    ];
    let run = tokio::spawn(async move { agent.run(input).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    abort.cancel();
    let result = tokio::time::timeout(Duration::from_secs(5), run)
        .await
        .expect("prompt")
        .expect("no panic");
    assert_eq!(result.status, Status::Aborted);
    assert_eq!(result.messages.len(), 3, "nothing appended");
    assert_eq!(result.final_text(), "", "not the previous turn's answer");
}

#[tokio::test]
async fn abort_during_a_slow_tool_call_keeps_partial_history() {
    let provider = ScriptedProvider::new(vec![
        calls(&[
            ("fast", "echo", "{}"),
            ("slow", "slow", "{}"),
            ("never", "echo", r#"{"n":3}"#),
        ]),
        text("unreachable"),
    ]);
    let tools = FakeTools::new(
        vec![spec("echo", false), spec("slow", false)],
        |name, args| {
            Box::pin(async move {
                if name == "slow" {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                ok(format!("{name}: {args}"))
            })
        },
    );
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    let opts = options().abort(abort).on_event(move |e| {
        if let AgentEvent::ToolCallRunning { tool, .. } = e
            && tool == "slow"
        {
            trigger.cancel();
        }
    });
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        agent(&provider, &tools, opts).run(vec![Message::user("go")]),
    )
    .await
    .expect("prompt");
    assert_eq!(result.status, Status::Aborted);
    assert_eq!(provider.requests().len(), 1);
    // The fast call ran, the slow one was stopped, the third never started...
    let kinds: Vec<_> = result
        .history
        .iter()
        .map(|h| h.error_kind.clone())
        .collect();
    assert_eq!(
        kinds,
        [None, Some(ErrorKind::Aborted), Some(ErrorKind::NotRun)]
    );
    // ...and every call of the response has a result, in order.
    let results = tool_messages(&result.messages);
    let ids: Vec<_> = results
        .iter()
        .map(|m| m.tool_call_id.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(ids, ["fast", "slow", "never"]);
    assert!(results[2].content.starts_with("not run"));
    assert_eq!(tools.recorded().len(), 2, "the third call never started");
}

#[tokio::test]
async fn a_tool_over_its_timeout_becomes_an_error_result() {
    let provider = ScriptedProvider::new(vec![call("c1", "slow", "{}"), text("it timed out")]);
    let tools = FakeTools::new(vec![spec("slow", false)], |_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            ok("late")
        })
    });
    let result = agent(
        &provider,
        &tools,
        options().tool_timeout(Duration::from_millis(200)),
    )
    .run(vec![Message::user("go")])
    .await;
    assert_eq!(result.status, Status::Completed);
    let h = &result.history[0];
    assert!(h.is_error);
    assert_eq!(h.error_kind, Some(ErrorKind::Timeout));
    assert!(h.output.contains("200 ms"), "{}", h.output);
}

#[tokio::test]
async fn the_run_deadline_ends_with_timeout_and_says_in_words_that_there_is_no_answer() {
    let provider = ScriptedProvider::new(vec![call("c1", "slow", "{}"), text("never")]);
    let tools = FakeTools::new(vec![spec("slow", false)], |_, _| {
        Box::pin(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            ok("late")
        })
    });
    let result = agent(
        &provider,
        &tools,
        options().timeout(Duration::from_millis(300)),
    )
    .run(vec![Message::user("go")])
    .await;
    assert_eq!(result.status, Status::Timeout);
    assert!(result.error.is_some());
    assert_eq!(result.history.len(), 1);
    assert_eq!(result.history[0].error_kind, Some(ErrorKind::Timeout));
    assert_eq!(result.answer_source, AnswerSource::Host);
    assert!(
        result
            .final_text()
            .starts_with("The model gave no answer within the run's time limit.\nslow() failed: "),
        "{}",
        result.final_text()
    );
}

#[tokio::test]
async fn abort_while_waiting_for_doom_loop_approval() {
    let provider = ScriptedProvider::new(vec![
        calls(&[
            ("1", "echo", "{}"),
            ("2", "echo", "{}"),
            ("3", "echo", "{}"),
        ]),
        text("unreachable"),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let abort = CancellationToken::new();
    let trigger = abort.clone();
    let opts = options().abort(abort).doom_loop_approval(move |_| {
        trigger.cancel();
        Box::pin(std::future::pending())
    });
    let result = tokio::time::timeout(
        Duration::from_secs(5),
        agent(&provider, &tools, opts).run(vec![Message::user("go")]),
    )
    .await
    .expect("prompt");
    assert_eq!(result.status, Status::Aborted);
    assert!(tools.recorded().is_empty(), "nothing runs once aborted");
    assert_eq!(tool_messages(&result.messages).len(), 3);
}

/// A tool that reports progress 100 times, and one that waits on the
/// call's abort signal from a task of its own.
struct Observant {
    aborted: Arc<std::sync::atomic::AtomicBool>,
}

impl toolhost_agent::ToolExecutor for Observant {
    fn tools(&self) -> Vec<toolhost_agent::ToolSpec> {
        vec![spec("busy", true), spec("stuck", false)]
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        _args: Value,
        info: toolhost_agent::ToolCallInfo,
    ) -> toolhost_agent::BoxFuture<'a, ToolOutcome> {
        let aborted = self.aborted.clone();
        Box::pin(async move {
            assert_eq!(info.round, 1);
            if name == "busy" {
                let report = info.progress.expect("someone listens");
                for i in 0..100u8 {
                    report(&format!("step {i}"), Some(f32::from(i) / 100.0));
                }
                return ok("done");
            }
            let token = info.abort.clone();
            tokio::spawn(async move {
                token.cancelled().await;
                aborted.store(true, Ordering::SeqCst);
            });
            std::future::pending().await
        })
    }
}

#[tokio::test]
async fn progress_becomes_bounded_events_and_a_tool_sees_the_run_stop() {
    let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tools = Arc::new(Observant {
        aborted: aborted.clone(),
    });
    let provider = ScriptedProvider::new(vec![call("c1", "busy", "{}"), text("ok")]);
    let (sink, mut rx) = event_channel();
    let agent = Agent::new(provider.clone(), tools.clone()).with_options(options().events(sink));
    let result = agent.run(vec![Message::user("go")]).await;
    assert_eq!(result.status, Status::Completed);
    let mut progress = Vec::new();
    while let Ok(e) = rx.try_recv() {
        if let AgentEvent::ToolCallProgress {
            message, fraction, ..
        } = e
        {
            progress.push((message, fraction));
        }
    }
    assert_eq!(progress.len(), 64, "at most 64 reports a call");
    assert_eq!(progress[0], ("step 0".to_owned(), Some(0.0)));

    let provider = ScriptedProvider::new(vec![call("c1", "stuck", "{}")]);
    let agent = Agent::new(provider.clone(), tools)
        .with_options(options().timeout(Duration::from_millis(200)));
    let result = agent.run(vec![Message::user("go")]).await;
    assert_eq!(result.status, Status::Timeout);
    for _ in 0..100 {
        if aborted.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        aborted.load(Ordering::SeqCst),
        "the tool saw the abort signal"
    );
}
