//! The agent loop against a scripted provider and fake tools: tool rounds,
//! argument and name repair, read-only parallelism, the tool list and the
//! system prompt, events and the compact history.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::agent_support::*;
use serde_json::{Value, json};
use tokio::sync::Barrier;
use toolhost_agent::{
    Agent, AgentEvent, AgentOptions, Delta, ErrorKind, Message, ProviderError, Role, Status,
    ToolChoice, ToolOutcome, compact_history, event_channel,
};

pub(crate) fn options() -> AgentOptions {
    AgentOptions::new("test-model").clock(clock())
}

pub(crate) fn agent(
    provider: &Arc<ScriptedProvider>,
    tools: &Arc<FakeTools>,
    options: AgentOptions,
) -> Agent {
    Agent::new(provider.clone(), tools.clone()).with_options(options)
}

pub(crate) fn tool_messages(messages: &[Message]) -> Vec<&Message> {
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
async fn calls_past_the_rounds_bound_are_answered_not_run_and_the_loop_goes_on() {
    let many: Vec<(String, String)> = (0..5)
        .map(|i| (format!("c{i}"), format!(r#"{{"n":{i}}}"#)))
        .collect();
    let list: Vec<(&str, &str, &str)> = many
        .iter()
        .map(|(id, args)| (id.as_str(), "echo", args.as_str()))
        .collect();
    let provider = ScriptedProvider::new(vec![calls(&list), text("done")]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let result = agent(&provider, &tools, options().max_calls_per_round(3))
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.final_text(), "done");
    assert_eq!(tools.recorded().len(), 3, "only the first three ran");
    let results = tool_messages(&result.messages);
    assert_eq!(results.len(), 5, "every call has its result");
    assert_eq!(results[2].content, r#"echo: {"n":2}"#);
    for (i, r) in results[3..].iter().enumerate() {
        assert!(r.is_error);
        assert!(
            r.content.contains(&format!(
                "a round runs at most 3 calls and this was call {}",
                i + 4
            )),
            "{}",
            r.content
        );
    }
    assert_eq!(result.history[4].error_kind, Some(ErrorKind::NotRun));
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
                        content: Vec::new(),
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
            AgentEvent::ReplySetAside { reason, .. } => format!("set aside {reason:?}"),
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

#[tokio::test]
async fn a_results_images_and_other_blocks_go_to_the_model_beside_its_text() {
    use toolhost_content::Content;
    let for_user_only: Content = serde_json::from_value(json!({
        "type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png",
        "annotations": {"audience": ["user"]},
    }))
    .unwrap();
    let image = Content::image("iVBORw0KGgo=", "image/png");
    let audio = Content::audio("UklGRg==", "audio/wav");
    let blocks = vec![
        Content::text("A chart."),
        image.clone(),
        audio.clone(),
        Content::embedded_text("file:///data.csv", "a,b"),
        for_user_only,
    ];
    let provider = ScriptedProvider::new(vec![call("c1", "chart", "{}"), text("done")]);
    let tools = FakeTools::new(vec![spec("chart", true)], move |_, _| {
        let content = blocks.clone();
        Box::pin(async move {
            ToolOutcome {
                content: content.clone(),
                ..ok(toolhost_content::text_of(&content))
            }
        })
    });
    let result = agent(&provider, &tools, options())
        .run(vec![Message::user("chart it")])
        .await;
    assert_eq!(result.status, Status::Completed);
    let requests = provider.requests();
    let sent = tool_messages(&requests[1].messages);
    assert_eq!(sent[0].content, "A chart.\na,b", "the text of the blocks");
    assert_eq!(
        sent[0].attachments,
        vec![image, audio],
        "the blocks that are not text and are meant for the model, in order"
    );
}
