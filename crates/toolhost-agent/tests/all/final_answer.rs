//! A run that cannot go on still ends with an answer: the round limit, doom
//! loops (approved or not), and final answers that are empty, echo the
//! question or the note, or are tool calls written as text.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::agent_loop::{agent, options, tool_messages};
use crate::agent_support::*;
use toolhost_agent::{
    AgentEvent, AnswerSource, FINAL_ANSWER_NOTE, Message, ProviderError, Status, ToolChoice,
    event_channel,
};

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
