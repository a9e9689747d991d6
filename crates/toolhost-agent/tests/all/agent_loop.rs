//! The agent loop against a scripted provider and fake tools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::agent_support::*;
use serde_json::{Value, json};
use tokio::sync::Barrier;
use toolhost_agent::{
    Agent, AgentEvent, AgentOptions, AnswerSource, CancellationToken, Delta, ErrorKind,
    FINAL_ANSWER_NOTE, Message, ProviderError, Role, Status, ToolChoice, ToolOutcome, VarStore,
    compact_history, event_channel,
};

fn options() -> AgentOptions {
    AgentOptions::new("test-model").clock(clock())
}

fn agent(provider: &Arc<ScriptedProvider>, tools: &Arc<FakeTools>, options: AgentOptions) -> Agent {
    Agent::new(provider.clone(), tools.clone()).with_options(options)
}

fn tool_messages(messages: &[Message]) -> Vec<&Message> {
    messages.iter().filter(|m| m.role == Role::Tool).collect()
}

#[tokio::test]
async fn plain_answer_without_tools() {
    let provider = ScriptedProvider::new(vec![text("Hello!")]);
    let tools = FakeTools::echo(vec![]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("hi")])
        .await;

    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.error, None);
    assert_eq!(result.final_text(), "Hello!");
    assert_eq!(
        result.messages,
        vec![Message::user("hi"), Message::assistant("Hello!")]
    );
    assert!(result.history.is_empty());
    assert_eq!(result.stats.rounds, 1);
    assert_eq!(result.usage, usage(10, 5));

    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].model, "test-model");
    assert!(
        requests[0].tools.is_empty(),
        "no tools are sent when none is enabled"
    );
    assert_eq!(requests[0].messages, vec![Message::user("hi")]);
}

#[tokio::test]
async fn one_tool_round_then_answer() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"x": 1}"#),
        text("The echo said x=1."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("echo x")])
        .await;

    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.final_text(), "The echo said x=1.");
    let roles: Vec<Role> = result.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(result.messages[1].tool_calls[0].id, "c1");

    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].tools.len(), 1);
    assert_eq!(requests[0].tool_choice, ToolChoice::Auto);
    let tool_msg = &requests[1].messages[2];
    assert_eq!(tool_msg.role, Role::Tool);
    assert_eq!(tool_msg.tool_call_id.as_deref(), Some("c1"));
    assert_eq!(tool_msg.content, r#"echo: {"x":1}"#);
    assert!(!tool_msg.is_error);

    assert_eq!(result.history.len(), 1);
    let h = &result.history[0];
    assert_eq!((h.call_id.as_str(), h.tool.as_str()), ("c1", "echo"));
    assert_eq!(h.args, json!({"x": 1}));
    assert_eq!(h.round, 1);
    assert_eq!(h.round_usage, usage(10, 5));
    assert_eq!(h.started_at_ms, NOW_SECS * 1000);
    assert!(!h.is_error);
    assert_eq!(result.usage, usage(20, 10));
    assert_eq!(result.stats.rounds, 2);
    assert_eq!(result.stats.tool_calls, 1);
    assert_eq!(result.stats.errors, 0);
    assert_eq!(tools.recorded(), vec![("echo".to_owned(), json!({"x": 1}))]);
}

#[tokio::test]
async fn two_tool_calls_in_one_response_keep_call_order() {
    let provider = ScriptedProvider::new(vec![
        calls(&[("a", "echo", r#"{"n":1}"#), ("b", "echo", r#"{"n":2}"#)]),
        text("done"),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let results = tool_messages(&result.messages);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].tool_call_id.as_deref(), Some("a"));
    assert_eq!(results[0].content, r#"echo: {"n":1}"#);
    assert_eq!(results[1].tool_call_id.as_deref(), Some("b"));
    assert_eq!(results[1].content, r#"echo: {"n":2}"#);
    assert_eq!(result.history.len(), 2);
}

#[tokio::test]
async fn malformed_arguments_become_an_error_result_and_the_loop_continues() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"x": 1"#),
        call("c2", "echo", r#"{"x": 1}"#),
        text("fixed it"),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let first = &result.history[0];
    assert!(first.is_error);
    assert_eq!(first.error_kind, Some(ErrorKind::InvalidArguments));
    assert!(first.output.contains("not valid JSON"), "{}", first.output);
    assert!(
        first.output.contains("line 1"),
        "names the parse error: {}",
        first.output
    );
    assert_eq!(first.args, Value::Null);
    assert!(!result.history[1].is_error);
    // The executor only saw the corrected call.
    assert_eq!(tools.recorded().len(), 1);
    let req = &provider.requests()[1];
    assert!(req.messages.last().is_some_and(|m| m.is_error));
    assert_eq!(result.stats.errors, 1);
}

#[tokio::test]
async fn empty_arguments_mean_an_empty_object() {
    let provider = ScriptedProvider::new(vec![call("c1", "echo", ""), text("ok")]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(tools.recorded(), vec![("echo".to_owned(), json!({}))]);
    assert!(!result.history[0].is_error);
}

#[tokio::test]
async fn tool_names_are_repaired() {
    let provider = ScriptedProvider::new(vec![
        calls(&[("a", "Read-File", "{}"), ("b", "ECHO", "{}")]),
        text("ok"),
    ]);
    let tools = FakeTools::echo(vec![spec("read_file", true), spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let names: Vec<String> = tools.recorded().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["read_file", "echo"]);
    assert_eq!(result.history[0].tool, "read_file");
    assert_eq!(result.history[0].requested_name, "Read-File");
    assert!(result.history.iter().all(|h| !h.is_error));
}

#[tokio::test]
async fn unknown_tool_gets_an_error_listing_the_available_tools() {
    let provider = ScriptedProvider::new(vec![call("c1", "delete_all", "{}"), text("sorry")]);
    let tools = FakeTools::echo(vec![spec("echo", false), spec("calc", true)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let h = &result.history[0];
    assert!(h.is_error);
    assert_eq!(h.error_kind, Some(ErrorKind::NotFound));
    assert_eq!(
        h.output,
        "unknown tool `delete_all`. Available tools: calc, echo."
    );
    assert!(tools.recorded().is_empty());
}

#[tokio::test]
async fn max_rounds_forces_a_final_answer_in_which_tools_cannot_be_called() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        call("c2", "echo", r#"{"i":2}"#),
        text("Here is what I found."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(2))
        .run(vec![Message::user("go")])
        .await;

    assert_eq!(result.status, Status::MaxRounds);
    assert_eq!(result.final_text(), "Here is what I found.");
    assert_eq!(
        result.history.len(),
        2,
        "the calls of the last round still ran"
    );
    assert_eq!(result.stats.rounds, 3);

    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert!(!requests[1].tools.is_empty());
    let last = &requests[2];
    // The definitions stay (Anthropic needs them when the history has tool
    // calls) but the model may not call any.
    assert_eq!(last.tool_choice, ToolChoice::None);
    assert!(!last.parallel_tool_calls);
    assert_eq!(
        last.messages.last().map(|m| m.content.as_str()),
        Some(FINAL_ANSWER_NOTE)
    );
    // The note is for that request only.
    assert!(
        result
            .messages
            .iter()
            .all(|m| m.content != FINAL_ANSWER_NOTE)
    );
    // Every tool call in the history has its result.
    assert_eq!(tool_messages(&result.messages).len(), 2);
}

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
async fn a_doom_loop_without_approval_refuses_the_call_and_ends_with_an_answer() {
    let same = r#"{"b": 2, "a": 1}"#;
    let reordered = r#"{"a":1,"b":2}"#;
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", same),
        call("c2", "echo", reordered),
        call("c3", "Echo", same),
        text("The answer, from what I have."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let (sink, mut events) = event_channel();
    let result = agent(&provider, &tools, options().events(sink))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(
        result.status,
        Status::DoomLoop,
        "the status says what happened"
    );
    assert!(
        result.error.as_deref().unwrap_or("").contains("3 times"),
        "{:?}",
        result.error
    );
    assert_eq!(
        result.final_text(),
        "The answer, from what I have.",
        "never an empty answer"
    );
    assert_eq!(
        tools.recorded().len(),
        2,
        "the third identical call did not run"
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 4, "three rounds, then the final answer");
    assert_eq!(requests[3].tool_choice, ToolChoice::None);
    // The refused call has a result telling the model why, so the messages
    // stay valid and the model knows to answer.
    let refused = tool_messages(&result.messages).last().copied().unwrap();
    assert!(
        refused.content.starts_with("not run") && refused.content.contains("do not call it again"),
        "{}",
        refused.content
    );
    let mut detected = false;
    while let Ok(e) = events.try_recv() {
        detected |= matches!(e, AgentEvent::DoomLoopDetected { repeats: 3, .. });
    }
    assert!(detected);
}

#[tokio::test]
async fn calls_that_alternate_between_two_tools_end_as_a_doom_loop_with_an_answer() {
    // A small model among look-alike tools: a, b, a, b, a, b with the same
    // arguments each time. No call repeats the one just before it, so only
    // the cycle shows the loop.
    let mut script = Vec::new();
    for i in 0..3 {
        script.push(call(&format!("a{i}"), "echo", r#"{"x":1}"#));
        script.push(call(&format!("b{i}"), "shout", r#"{"x":1}"#));
    }
    script.push(call("a3", "echo", r#"{"x":1}"#));
    script.push(text("Both said 1."));
    let provider = ScriptedProvider::new(script);
    let tools = FakeTools::echo(vec![spec("echo", false), spec("shout", false)]);
    let (sink, mut events) = event_channel();
    let result = agent(&provider, &tools, options().events(sink))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::DoomLoop, "{:?}", result.error);
    let error = result.error.as_deref().unwrap_or("");
    assert!(
        error.contains("`echo`, then `shout`") && error.contains("in turn 3 times"),
        "{error}"
    );
    assert_eq!(result.final_text(), "Both said 1.");
    assert_eq!(
        tools.recorded().len(),
        5,
        "the sixth call, which closes the third cycle, did not run"
    );
    let mut cycle = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let AgentEvent::DoomLoopDetected { cycle: c, .. } = e {
            cycle = c;
        }
    }
    assert_eq!(cycle, vec!["echo".to_owned(), "shout".to_owned()]);
}

#[tokio::test]
async fn calls_that_alternate_with_new_arguments_are_not_a_loop() {
    let mut script = Vec::new();
    for i in 0..4 {
        script.push(call(&format!("a{i}"), "echo", &format!(r#"{{"x":{i}}}"#)));
        script.push(call(&format!("b{i}"), "shout", r#"{"x":1}"#));
    }
    script.push(text("Done."));
    let provider = ScriptedProvider::new(script);
    let tools = FakeTools::echo(vec![spec("echo", false), spec("shout", false)]);
    let result = agent(&provider, &tools, options().max_rounds(20))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed, "{:?}", result.error);
    assert_eq!(tools.recorded().len(), 8);
}

#[tokio::test]
async fn a_reply_that_only_repeats_the_question_is_asked_again_and_never_shown_as_the_answer() {
    let question = "What is 2*(3+4)? Use the calculate tool.";
    let provider = ScriptedProvider::new(vec![
        text("What is 2*(3+4)? Use the case_convert tool."),
        text("It is 14."),
    ]);
    let tools = FakeTools::echo(vec![spec("calculate", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user(question)])
        .await;
    assert_eq!(result.final_text(), "It is 14.");
    assert_eq!(provider.requests().len(), 2, "asked once more");
}

#[tokio::test]
async fn think_blocks_in_the_text_are_reasoning_not_answer() {
    let provider = ScriptedProvider::new(vec![text(
        "<think>2 and 2 make 4</think>\n\nThe answer is 4.",
    )]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let (sink, mut events) = event_channel();
    let result = agent(&provider, &tools, options().events(sink))
        .run(vec![Message::user("2+2?")])
        .await;
    assert_eq!(result.final_text(), "The answer is 4.");
    assert!(
        result
            .messages
            .iter()
            .all(|m| !m.content.contains("<think>")),
        "the history keeps no reasoning"
    );
    let (mut reasoning, mut text) = (String::new(), String::new());
    while let Ok(e) = events.try_recv() {
        match e {
            AgentEvent::ReasoningDelta { text: t, .. } => reasoning.push_str(&t),
            AgentEvent::TextDelta { text: t, .. } => text.push_str(&t),
            _ => {}
        }
    }
    assert_eq!(reasoning, "2 and 2 make 4");
    assert!(!text.contains("think"), "{text}");
}

#[tokio::test]
async fn an_empty_reply_after_tool_results_asks_for_the_answer() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        text(""),
        text("Done: the echo said i=1."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.final_text(), "Done: the echo said i=1.");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].tool_choice, ToolChoice::None);
}

#[tokio::test]
async fn an_empty_final_answer_is_asked_again_without_tools_and_the_history_as_text() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        // With tool_choice none, a small model still writes a tool call.
        call("c2", "echo", r#"{"i":2}"#),
        text("From the history: i=1."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::MaxRounds);
    assert_eq!(result.final_text(), "From the history: i=1.");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    let plain = &requests[2];
    assert!(plain.tools.is_empty(), "no tools at all");
    assert_eq!(plain.messages.len(), 1);
    let text = &plain.messages[0].content;
    assert!(
        text.contains("called the tool `echo`") && text.contains(FINAL_ANSWER_NOTE),
        "{text}"
    );
    // Marked as the host's log, so the model neither answers it as the
    // user's words nor imitates it.
    assert!(text.starts_with("[System-generated log"), "{text}");
    assert!(text.contains("[End of the log]"), "{text}");
    // Every tool call in the history still has its result.
    assert_eq!(tool_messages(&result.messages).len(), 1);
}

#[tokio::test]
async fn a_final_answer_that_is_a_tool_call_written_as_text_is_asked_again_without_tools() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        // With tool_choice none, a small model writes its call as text.
        text("```json\n{\"name\": \"echo\", \"arguments\": {\"i\": 2}}\n```"),
        text("The echo said i=1."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::MaxRounds);
    assert_eq!(result.final_text(), "The echo said i=1.");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[2].tools.is_empty(), "asked again without tools");
}

#[tokio::test]
async fn a_final_answer_that_repeats_the_note_keeps_only_the_answer() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        text(&format!(
            "It is 1.\n\n{}",
            FINAL_ANSWER_NOTE.trim_matches(['[', ']'])
        )),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.final_text(), "It is 1.");

    // Only the note is no answer: asked again with the history as text.
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        text(FINAL_ANSWER_NOTE),
        text("i=1"),
    ]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.final_text(), "i=1");
}

#[tokio::test]
async fn a_conversation_past_the_models_context_still_ends_with_an_answer_from_the_history_as_text()
{
    let overflow = || {
        Step::Fail(ProviderError::Status {
            provider: "openai".into(),
            status: 400,
            body: r#"{"error":{"code":400,"message":"request (16881 tokens) exceeds the available context size (16384 tokens)","type":"exceed_context_size_error"}}"#.into(),
        })
    };
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        overflow(),
        overflow(),
        text("From what was read: i=1."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.final_text(), "From what was read: i=1.");
    assert_eq!(result.status, Status::Error);
    let error = result.error.unwrap_or_default();
    assert!(
        error.contains("no longer fits the model's context"),
        "{error}"
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        requests[3].tools.is_empty() && requests[3].messages.len() == 1,
        "the history as text"
    );
}

#[tokio::test]
async fn a_final_answer_that_stays_empty_is_answered_from_the_results() {
    let provider =
        ScriptedProvider::new(vec![call("c1", "echo", r#"{"i":1}"#), text(""), text("")]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::MaxRounds);
    assert_eq!(result.final_text(), r#"echo(1) returned echo: {"i":1}."#);
    assert_eq!(result.answer_source, AnswerSource::Results);
}

#[tokio::test]
async fn a_final_answer_that_stays_empty_without_results_says_why_in_words_and_in_the_error() {
    let provider =
        ScriptedProvider::new(vec![call("c1", "nope", r#"{"i":1}"#), text(""), text("")]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::MaxRounds);
    assert_eq!(
        result.final_text(),
        "The model gave no answer within the round limit.\n\
         nope({\"i\":1}) failed: unknown tool `nope`. Available tools: echo."
    );
    assert_eq!(result.answer_source, AnswerSource::Host);
    assert!(
        !result
            .messages
            .iter()
            .any(|m| m.content.contains("gave no answer")),
        "the host's note is not put in the model's mouth"
    );
    assert!(
        result
            .error
            .as_deref()
            .unwrap_or("")
            .contains("no answer, with or without tools, and no tool ran"),
        "{:?}",
        result.error
    );
}

#[tokio::test]
async fn a_read_only_call_repeated_at_once_is_answered_from_its_result_not_run_again() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", r#"{"i":1}"#),
        call("c2", "echo", r#"{ "i": 1 }"#),
        text("i was 1."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", true)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.final_text(), "i was 1.");
    assert_eq!(tools.recorded().len(), 1, "ran once");
    let results = tool_messages(&result.messages);
    assert_eq!(results.len(), 2, "every call has its result");
    assert!(!results[1].is_error);
    assert!(
        results[1].content.starts_with(&results[0].content),
        "{}",
        results[1].content
    );
    assert!(
        results[1].content.contains("was not run again"),
        "{}",
        results[1].content
    );
}

#[tokio::test]
async fn an_approved_doom_loop_goes_on() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", "{}"),
        call("c2", "echo", "{}"),
        call("c3", "echo", "{}"),
        text("done"),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let opts = options().doom_loop_approval(move |doom| {
        counter.fetch_add(1, Ordering::SeqCst);
        assert_eq!(doom.tool, "echo");
        assert_eq!(doom.repeats, 3);
        Box::pin(async { true })
    });
    let result = agent(&provider, &tools, opts)
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert_eq!(asked.load(Ordering::SeqCst), 1);
    assert_eq!(tools.recorded().len(), 3);
}

#[tokio::test]
async fn a_large_result_is_truncated_and_paged_with_read_var() {
    let big: String = (0..3000).map(|i| format!("line {i:04}\n")).collect(); // 30 000 bytes
    let big_for_tool = big.clone();
    let provider = ScriptedProvider::new(vec![
        call("c1", "dump", "{}"),
        call(
            "c2",
            "read_var",
            r#"{"name": "result_1", "offset": 10000, "length": 20}"#,
        ),
        text("read it"),
    ]);
    let tools = FakeTools::new(vec![spec("dump", true)], move |_, _| {
        let out = big_for_tool.clone();
        Box::pin(async move { ok(out) })
    });
    let vars = Arc::new(VarStore::new());
    let opts = options().max_output_bytes(10_000).vars(vars.clone());
    let result = agent(&provider, &tools, opts)
        .run(vec![Message::user("dump")])
        .await;
    assert_eq!(result.status, Status::Completed);

    let requests = provider.requests();
    // read_var is offered only once something is stored.
    let names =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(names(0), ["dump"]);
    assert_eq!(names(1), ["dump", "read_var"]);

    let first = &result.history[0];
    assert_eq!(first.var.as_deref(), Some("result_1"));
    assert!(first.output.len() < 10_400, "{}", first.output.len());
    assert!(first.output.starts_with(&big[..10_000]));
    assert!(
        first.output.contains("result_1"),
        "the note names the variable"
    );
    assert_eq!(vars.get("result_1").as_deref(), Some(big.as_str()));

    let page = &result.history[1];
    assert_eq!(page.tool, "read_var");
    assert!(!page.is_error, "{}", page.output);
    assert!(
        page.output.starts_with(&big[10_000..10_020]),
        "{}",
        page.output
    );
    assert!(page.output.contains("offset=10020"), "{}", page.output);
    assert_eq!(page.var, None, "pages are not stored again");
    assert_eq!(tools.recorded().len(), 1, "read_var is built in");
}

#[tokio::test]
async fn parallel_read_only_calls_overlap_and_keep_call_order() {
    let barrier = Arc::new(Barrier::new(2));
    let provider = ScriptedProvider::new(vec![
        calls(&[("a", "read_a", "{}"), ("b", "read_b", "{}")]),
        text("done"),
    ]);
    let tools = FakeTools::new(
        vec![spec("read_a", true), spec("read_b", true)],
        move |name, _| {
            let barrier = barrier.clone();
            Box::pin(async move {
                // Both calls must be running at once to pass the barrier.
                match tokio::time::timeout(Duration::from_secs(5), barrier.wait()).await {
                    Ok(_) => {
                        // Finish in reverse order to check the results are reordered.
                        if name == "read_a" {
                            tokio::time::sleep(Duration::from_millis(30)).await;
                        }
                        ok(format!("{name} done"))
                    }
                    Err(_) => ToolOutcome {
                        output: "the other call never ran concurrently".into(),
                        details: None,
                        is_error: true,
                        error_kind: Some(ErrorKind::Other("test".into())),
                        steps: Vec::new(),
                        cached: false,
                    },
                }
            })
        },
    );
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let results = tool_messages(&result.messages);
    assert_eq!(results[0].content, "read_a done");
    assert_eq!(results[1].content, "read_b done");
    assert_eq!(result.history[0].call_id, "a");
    assert!(result.history.iter().all(|h| !h.is_error));
}

fn concurrency_probe(in_flight: Arc<AtomicUsize>, max_seen: Arc<AtomicUsize>) -> Arc<FakeTools> {
    FakeTools::new(
        vec![spec("write", false), spec("read", true)],
        move |name, _| {
            let in_flight = in_flight.clone();
            let max_seen = max_seen.clone();
            Box::pin(async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max_seen.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                ok(format!("{name} ok"))
            })
        },
    )
}

#[tokio::test]
async fn calls_are_serial_unless_all_are_read_only() {
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let tools = concurrency_probe(in_flight.clone(), max_seen.clone());
    let provider = ScriptedProvider::new(vec![
        calls(&[("1", "write", "{}"), ("2", "write", r#"{"n":2}"#)]),
        calls(&[("3", "read", "{}"), ("4", "write", "{}")]),
        text("done"),
    ]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert_eq!(max_seen.load(Ordering::SeqCst), 1, "never two at once");
    assert_eq!(result.history.len(), 4);

    // With parallelism turned off, even read-only calls run one by one.
    max_seen.store(0, Ordering::SeqCst);
    let provider = ScriptedProvider::new(vec![
        calls(&[("1", "read", "{}"), ("2", "read", r#"{"n":2}"#)]),
        text("done"),
    ]);
    let tools = concurrency_probe(in_flight, max_seen.clone());
    agent(&provider, &tools, options().parallel_read_only(false))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(max_seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_tool_list_is_recomputed_before_each_request() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "first", "{}"),
        call("c2", "second", "{}"),
        text("done"),
    ]);
    let tools = FakeTools::dynamic(
        |n| match n {
            0 => vec![spec("first", false)],
            _ => vec![spec("second", false)],
        },
        |name, _| Box::pin(async move { ok(format!("{name} ran")) }),
    );
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let requests = provider.requests();
    let names: Vec<Vec<&str>> = requests
        .iter()
        .map(|r| r.tools.iter().map(|t| t.name.as_str()).collect())
        .collect();
    assert_eq!(names[0], ["first"]);
    assert!(names[1].contains(&"second") && !names[1].contains(&"first"));
    assert_eq!(tools.tools_calls.load(Ordering::SeqCst), 3);
    assert!(result.history.iter().all(|h| !h.is_error));
}

#[tokio::test]
async fn the_tool_filter_and_the_before_request_hook_apply() {
    let provider = ScriptedProvider::new(vec![call("c1", "secret", "{}"), text("ok")]);
    let tools = FakeTools::echo(vec![spec("echo", false), spec("secret", false)]);
    let opts = options()
        .tool_filter(|all| all.iter().filter(|t| t.name != "secret").cloned().collect())
        .before_request(|messages| {
            if messages.len() == 1 {
                messages.insert(0, Message::user("(context)"));
            }
        });
    let result = agent(&provider, &tools, opts)
        .run(vec![Message::user("go")])
        .await;
    let requests = provider.requests();
    assert_eq!(requests[0].tools.len(), 1);
    assert_eq!(requests[0].messages[0].content, "(context)");
    // A filtered tool cannot be called.
    assert_eq!(result.history[0].error_kind, Some(ErrorKind::NotFound));
    assert!(tools.recorded().is_empty());
    assert_eq!(
        result.messages[0].content, "(context)",
        "hook changes persist"
    );
}

#[tokio::test]
async fn the_system_prompt_has_the_date_but_no_time() {
    let provider = ScriptedProvider::new(vec![text("hi")]);
    let tools = FakeTools::echo(vec![]);
    let opts = options()
        .base_prompt("You are a test.")
        .usage_rules("fs", "Prefer relative paths.");
    agent(&provider, &tools, opts)
        .run(vec![Message::system("Be brief."), Message::user("hi")])
        .await;
    let request = &provider.requests()[0];
    let system = request.system.as_deref().unwrap_or("");
    assert!(system.starts_with("You are a test."), "{system}");
    assert!(system.contains("2026-03-14"), "{system}");
    assert!(!system.contains("15:09"), "no time of day: {system}");
    let b = system.as_bytes();
    let has_clock_time = b.windows(5).any(|w| {
        w[0].is_ascii_digit()
            && w[1].is_ascii_digit()
            && w[2] == b':'
            && w[3].is_ascii_digit()
            && w[4].is_ascii_digit()
    });
    assert!(!has_clock_time, "no HH:MM in the prompt: {system}");
    assert!(system.contains("Be brief."), "{system}");
    assert!(system.contains("## fs\nPrefer relative paths."), "{system}");
    assert!(request.messages.iter().all(|m| m.role != Role::System));
}

#[tokio::test]
async fn a_provider_error_ends_with_error_and_keeps_the_history() {
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", "{}"),
        Step::Fail(ProviderError::Status {
            provider: "scripted".into(),
            status: 503,
            body: "overloaded".into(),
        }),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Error);
    let error = result.error.as_deref().unwrap_or("");
    assert!(
        error.contains("503") && error.contains("overloaded"),
        "{error}"
    );
    assert_eq!(result.history.len(), 1);
    assert_eq!(
        result.messages.len(),
        3,
        "user, assistant call, tool result"
    );
    assert_eq!(result.usage, usage(10, 5));
}

#[tokio::test]
async fn events_are_emitted_in_order() {
    let provider = ScriptedProvider::new(vec![
        Step::Reply {
            deltas: vec![
                Delta::Reasoning("think".into()),
                Delta::ToolCallStarted {
                    id: "c1".into(),
                    name: "echo".into(),
                },
            ],
            completion: match call("c1", "echo", "{}") {
                Step::Reply { completion, .. } => completion,
                _ => unreachable!(),
            },
        },
        text("done"),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let (sink, mut rx) = event_channel();
    agent(&provider, &tools, options().events(sink))
        .run(vec![Message::user("go")])
        .await;
    let mut kinds = Vec::new();
    while let Ok(e) = rx.try_recv() {
        let kind = match &e {
            AgentEvent::RequestStart {
                round,
                messages,
                tools,
            } => format!("request {round} m{messages} t{tools}"),
            AgentEvent::TextDelta { text, .. } => format!("text {text}"),
            AgentEvent::ReasoningDelta { text, .. } => format!("reasoning {text}"),
            AgentEvent::ToolCallStreamed { name, .. } => format!("streamed {name}"),
            AgentEvent::ToolCallPending { tool, .. } => format!("pending {tool}"),
            AgentEvent::ToolCallRunning { tool, .. } => format!("running {tool}"),
            AgentEvent::ToolCallCompleted { tool, var, .. } => {
                format!("completed {tool} {}", var.as_deref().unwrap_or("-"))
            }
            AgentEvent::ToolCallError { tool, .. } => format!("error {tool}"),
            AgentEvent::DoomLoopDetected { .. } => "doom".into(),
            AgentEvent::ContextCompacted { .. } => "compacted".into(),
            AgentEvent::ToolCallProgress { message, .. } => format!("progress {message}"),
            AgentEvent::RoundEnd {
                round, tool_calls, ..
            } => format!("round-end {round} c{tool_calls}"),
            AgentEvent::Finish { status, .. } => format!("finish {status}"),
        };
        kinds.push(kind);
    }
    assert_eq!(
        kinds,
        [
            "request 1 m1 t1",
            "reasoning think",
            "streamed echo",
            "pending echo",
            "running echo",
            "completed echo result_1",
            "round-end 1 c1",
            "request 2 m3 t2",
            "text done",
            "round-end 2 c0",
            "finish completed",
        ]
    );
}

#[tokio::test]
async fn compact_history_makes_one_assistant_message() {
    let long_args = format!(r#"{{"text": "{}"}}"#, "a".repeat(300));
    let provider = ScriptedProvider::new(vec![
        calls(&[("c1", "echo", &long_args), ("c2", "nope", "{}")]),
        text("All done."),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("go")])
        .await;
    let message = compact_history(&result);
    assert_eq!(message.role, Role::Assistant);
    assert!(message.tool_calls.is_empty());
    let text = &message.content;
    let hint = text.lines().next().unwrap_or("");
    assert!(hint.contains("echo (result in `result_1`)"), "{text}");
    assert!(hint.contains("read_var"), "{text}");
    assert!(text.contains("\n\nAll done.\n\n"), "{text}");
    let log: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "Execution log:")
        .collect();
    assert_eq!(log.len(), 3, "{text}");
    assert!(log[1].starts_with("1. echo {\"text\": \"aaa"), "{}", log[1]);
    assert!(log[1].contains("… -> ok: echo: "), "{}", log[1]);
    assert!(log[1].chars().count() < 100 + 200 + 40, "{}", log[1]);
    assert!(
        log[2].starts_with("2. nope {} -> error: unknown tool"),
        "{}",
        log[2]
    );

    // Serializes for `--json` output.
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["status"], "completed");
    assert_eq!(json["history"][0]["tool"], "echo");
    assert_eq!(json["stats"]["tool_calls"], 2);
}

#[tokio::test]
async fn a_shared_var_store_outlives_the_run() {
    let vars = Arc::new(VarStore::new());
    vars.insert("from an earlier turn".to_owned());
    let provider = ScriptedProvider::new(vec![
        call("c1", "read_var", r#"{"name":"result_1"}"#),
        text("ok"),
    ]);
    let tools = FakeTools::echo(vec![]);
    let result = agent(&provider, &tools, options().vars(vars))
        .run(vec![Message::user("what did you find before?")])
        .await;
    let requests = provider.requests();
    assert_eq!(
        requests[0].tools.len(),
        1,
        "read_var offered from the start"
    );
    assert!(
        result.history[0].output.starts_with("from an earlier turn"),
        "{}",
        result.history[0].output
    );
}

#[tokio::test]
async fn tool_calls_in_the_forced_final_answer_are_ignored() {
    let Step::Reply {
        completion: mut stubborn,
        ..
    } = call("c2", "echo", "{}")
    else {
        unreachable!()
    };
    stubborn.message.content = "Best effort answer.".into();
    let provider = ScriptedProvider::new(vec![
        call("c1", "echo", "{}"),
        Step::Reply {
            deltas: vec![],
            completion: stubborn,
        },
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_rounds(1))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::MaxRounds);
    assert_eq!(result.final_text(), "Best effort answer.");
    let last = result.messages.last().unwrap();
    assert!(last.tool_calls.is_empty(), "no dangling tool calls");
    assert_eq!(tools.recorded().len(), 1);
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

#[test]
fn events_serialize_with_a_type_tag() {
    let e = AgentEvent::RequestStart {
        round: 1,
        messages: 2,
        tools: 3,
    };
    let v = serde_json::to_value(&e).unwrap();
    assert_eq!(
        v,
        json!({"type": "request_start", "round": 1, "messages": 2, "tools": 3})
    );
    let s = serde_json::to_value(Status::DoomLoop).unwrap();
    assert_eq!(s, json!("doom-loop"));
}

#[tokio::test]
async fn a_variable_reference_passes_a_stored_result_to_the_next_tool_without_the_model() {
    let long = "line\n".repeat(10_000);
    let from_fetch = long.clone();
    let tools = FakeTools::new(
        vec![spec("fetch", true), spec("count_lines", true)],
        move |name, args| {
            let long = from_fetch.clone();
            Box::pin(async move {
                match name.as_str() {
                    "fetch" => ok(long),
                    _ => ok(format!(
                        "{} lines",
                        args["text"].as_str().unwrap_or("").lines().count()
                    )),
                }
            })
        },
    );
    let provider = ScriptedProvider::new(vec![
        call("c1", "fetch", "{}"),
        call("c2", "count_lines", r#"{"text": {"$var": "result_1"}}"#),
        call("c3", "count_lines", r#"{"text": {"$var": "result_7"}}"#),
        text("10000 lines."),
    ]);
    let result = agent(&provider, &tools, options().max_output_bytes(1024))
        .run(vec![Message::user("count the lines")])
        .await;
    assert_eq!(result.status, Status::Completed);
    // The second tool got the whole result, which the model only saw cut short.
    let recorded = tools.recorded();
    assert_eq!(recorded[1].1["text"].as_str().unwrap(), long);
    assert!(result.history[0].output.len() < 2048);
    assert_eq!(result.history[1].output, "10000 lines");
    assert_eq!(
        result.history[1].arguments, r#"{"text": {"$var": "result_1"}}"#,
        "the record keeps what the model wrote"
    );
    // An unknown variable is an error the model reads, naming what exists.
    let bad = &result.history[2];
    assert!(bad.is_error);
    assert_eq!(bad.error_kind, Some(ErrorKind::InvalidArguments));
    assert!(
        bad.output.contains("result_7") && bad.output.contains("result_1"),
        "{}",
        bad.output
    );
    assert_eq!(recorded.len(), 2, "the bad call did not run");
    // The system prompt explains references once variables exist.
    let requests = provider.requests();
    assert!(
        requests[2]
            .tools
            .iter()
            .any(|t| t.name == "read_var" && t.description.contains("$var"))
    );
}

#[tokio::test]
async fn a_cached_tool_result_is_marked_in_the_event_and_the_history() {
    let provider = ScriptedProvider::new(vec![call("c1", "read", "{}"), text("done")]);
    let tools = FakeTools::new(vec![spec("read", true)], |_, _| {
        Box::pin(async {
            ToolOutcome {
                cached: true,
                ..ok("from the cache")
            }
        })
    });
    let (sink, mut rx) = event_channel();
    let result = agent(&provider, &tools, options().events(sink))
        .run(vec![Message::user("go")])
        .await;
    assert!(result.history[0].cached);
    let mut completed = None;
    while let Ok(e) = rx.try_recv() {
        if let AgentEvent::ToolCallCompleted { cached, .. } = e {
            completed = Some(cached);
        }
    }
    assert_eq!(completed, Some(true));

    // A record saved before `cached` existed reads as not cached.
    let mut saved = serde_json::to_value(&result.history[0]).unwrap();
    assert_eq!(saved["cached"], true);
    saved.as_object_mut().unwrap().remove("cached");
    let old: toolhost_agent::ToolCallRecord = serde_json::from_value(saved).unwrap();
    assert!(!old.cached);
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
