//! Provider faults through the real agent loop: a real provider (OpenAI-compatible
//! and, where its stream parsing differs, Anthropic) talking to a local server
//! that misbehaves. Every fault must end the run with the right status, a
//! readable error and the history gathered so far; none may hang it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::agent_support::*;
use serde_json::{Value, json};
use toolhost_agent::provider::select::TimeoutsConfig;
use toolhost_agent::provider::{openai::OpenAiCompatible, transport::RetryPolicy};
use toolhost_agent::{
    Agent, AgentEvent, AgentOptions, AnswerSource, CancellationToken, Message, Provider, Role,
    Status, ToolChainResult,
};
use toolhost_test_support::fake_model::{End, FakeModel as Server, Reply};

// ---------------------------------------------------------------- the server
// (`toolhost_test_support::fake_model`, shared with the providers' tests)

fn status(code: u16, headers: Vec<(&'static str, String)>, body: &str) -> Reply {
    Reply::Full {
        status: code,
        headers,
        body: body.to_owned(),
    }
}

// ---------------------------------------------------------------- helpers

fn options() -> AgentOptions {
    AgentOptions::new("test-model").clock(clock())
}

/// An agent whose only tool, `echo`, answers `echo: <args>`.
fn agent(provider: Arc<dyn Provider>, options: AgentOptions) -> Agent {
    Agent::new(provider, FakeTools::echo(vec![spec("echo", true)])).with_options(options)
}

async fn run(agent: &Agent) -> (ToolChainResult, Duration) {
    let started = Instant::now();
    let result = bounded(agent.run(vec![Message::user("go")])).await;
    (result, started.elapsed())
}

/// Round 1 answered with the `echo` call: its call and result are kept.
fn assert_round_one_kept(result: &ToolChainResult) {
    assert_eq!(result.history.len(), 1, "{:#?}", result.history);
    let h = &result.history[0];
    assert_eq!(
        (h.call_id.as_str(), h.tool.as_str(), h.round),
        ("call_1", "echo", 1)
    );
    assert_eq!(h.output, r#"echo: {"x":1}"#);
    assert!(!h.is_error);
    assert_eq!(result.messages[0], Message::user("go"));
    assert_eq!(result.messages[1].role, Role::Assistant);
    assert_eq!(result.messages[1].tool_calls.len(), 1);
    assert_eq!(result.messages[1].tool_calls[0].id, "call_1");
    assert_eq!(result.messages[2].role, Role::Tool);
    assert_eq!(result.messages[2].tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(result.messages[2].content, r#"echo: {"x":1}"#);
    assert_every_call_has_a_result(result);
}

/// The second request carried round 1's call and result (round 2 really ran).
fn assert_round_two_sent_the_result(server: &Server) {
    let bodies = server.bodies();
    assert!(bodies.len() >= 2, "{bodies:#?}");
    assert!(
        bodies[1].to_string().contains(r#"echo: {\"x\":1}"#),
        "{}",
        bodies[1]
    );
}

fn error_of(result: &ToolChainResult) -> &str {
    result.error.as_deref().unwrap_or_default()
}

// ---------------------------------------------------------------- connection refused

#[tokio::test]
async fn connection_refused_ends_the_run_with_error_after_the_retry_budget() {
    // A port nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let provider: Arc<dyn Provider> = Arc::new(
        OpenAiCompatible::new(format!("http://{addr}/v1"), "test-model").with_retry(fast_policy(3)),
    );
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error);
    let error = error_of(&result);
    assert!(
        error.starts_with("model request failed: openai: cannot connect"),
        "{error}"
    );
    assert!(error.contains("gave up after 3 attempts"), "{error}");
    assert_eq!(result.messages, vec![Message::user("go")]);
    assert!(result.history.is_empty());
    assert_eq!(result.text, "");
    assert_eq!(result.stats.rounds, 1);
    assert!(took < Duration::from_secs(3), "{took:?}");
}

// ---------------------------------------------------------------- timeouts

#[tokio::test]
async fn a_server_that_never_answers_times_out_each_attempt_and_ends_with_error() {
    let server = Server::start(|_| Reply::Silent).await;
    let timeouts = TimeoutsConfig {
        request_secs: Some(0.3),
        ..TimeoutsConfig::default()
    };
    let provider = Wire::OpenAi.configured(&server.url(""), timeouts, 2);
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error);
    let error = error_of(&result);
    assert!(error.contains("openai: timed out"), "{error}");
    assert!(error.contains("no response within 300ms"), "{error}");
    assert!(error.contains("gave up after 2 attempts"), "{error}");
    assert_eq!(server.requests(), 2, "one request per attempt");
    assert_eq!(result.messages, vec![Message::user("go")]);
    // Two 300 ms attempts and one backoff of at most 1 s.
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

async fn idle_stream_in_round_two(wire: Wire) {
    let server = Server::start(move |n| match n {
        0 => Reply::Stream {
            frames: wire.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => Reply::Stream {
            frames: wire.unfinished_text(&["Still ", "thinking"]),
            gap: Duration::ZERO,
            end: End::Hang,
        },
    })
    .await;
    let timeouts = TimeoutsConfig {
        idle_secs: Some(0.3),
        ..TimeoutsConfig::default()
    };
    let provider = wire.configured(&server.url(""), timeouts, 4);
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error, "{wire:?}");
    let error = error_of(&result);
    assert!(error.contains("timed out"), "{error}");
    assert!(
        error.contains("the stream sent nothing for 300ms"),
        "{error}"
    );
    assert_round_one_kept(&result);
    assert_round_two_sent_the_result(&server);
    // The text that did arrive is kept as the last assistant message.
    assert_eq!(result.messages.len(), 4);
    assert_eq!(result.messages[3], Message::assistant("Still thinking"));
    assert_eq!(result.text, "Still thinking");
    assert_eq!(server.requests(), 2, "a stream that started is not retried");
    assert!(took < Duration::from_secs(3), "{took:?}");
    server.wait_stream_dropped().await;
}

#[tokio::test]
async fn an_idle_stream_in_round_two_times_out_and_keeps_round_one_openai() {
    idle_stream_in_round_two(Wire::OpenAi).await;
}

#[tokio::test]
async fn an_idle_stream_in_round_two_times_out_and_keeps_round_one_anthropic() {
    idle_stream_in_round_two(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- 429 storms

#[tokio::test]
async fn a_429_storm_without_retry_after_ends_with_error_after_a_bounded_number_of_attempts() {
    let server = Server::start(|n| match n {
        0 => Reply::Stream {
            frames: Wire::OpenAi.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => status(
            429,
            vec![("content-type", "application/json".into())],
            r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#,
        ),
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(3));
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error);
    let error = error_of(&result);
    assert!(error.contains("openai: HTTP 429"), "{error}");
    assert!(error.contains("Rate limit reached"), "{error}");
    assert!(error.contains("gave up after 3 attempts"), "{error}");
    assert_eq!(server.requests(), 1 + 3, "round 1, then three attempts");
    assert_round_one_kept(&result);
    assert_eq!(result.messages.len(), 3, "no partial answer");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_429_storm_with_a_long_retry_after_waits_at_most_max_backoff_per_retry() {
    // The server asks for 30 s every time; the policy caps each wait at 300 ms.
    let server = Server::start(|_| {
        status(
            429,
            vec![("retry-after", "30".into())],
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )
    })
    .await;
    let policy = RetryPolicy {
        max_backoff: Duration::from_millis(300),
        ..fast_policy(3)
    };
    let provider = Wire::Anthropic.provider(&server, policy);
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error);
    let error = error_of(&result);
    assert!(error.contains("anthropic: HTTP 429"), "{error}");
    assert!(error.contains("slow down"), "{error}");
    assert!(error.contains("gave up after 3 attempts"), "{error}");
    assert_eq!(server.requests(), 3);
    assert_eq!(result.messages, vec![Message::user("go")]);
    // Two waits: Retry-After is honoured (not the 10 ms backoff), up to the cap.
    assert!(
        took >= Duration::from_millis(550) && took < Duration::from_secs(3),
        "{took:?}"
    );
}

// ---------------------------------------------------------------- the model's own output

/// What llama.cpp sends, inside a 200 stream, when it cannot parse what the
/// model wrote.
fn unparsable_output_frame() -> String {
    format!(
        "data: {}\n\n",
        json!({"error": {"code": 500, "type": "server_error",
            "message": "The model produced output that does not match the expected peg-native format"}})
    )
}

#[tokio::test]
async fn a_round_the_server_could_not_parse_is_asked_again_and_answers() {
    let server = Server::start(|n| match n {
        0 => Reply::Stream {
            frames: vec![unparsable_output_frame()],
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => openai_answer(&["fourteen"]),
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let (result, _) = run(&agent(provider, options())).await;
    assert_eq!(result.status, Status::Completed, "{:?}", result.error);
    assert_eq!(result.final_text(), "fourteen");
    assert_eq!(server.requests(), 2);
}

/// What llama.cpp sends on either wire after it streamed some text and a
/// whole tool call, when it cannot parse what the model wrote: `event:
/// error` with a 500 body that has no `"type": "error"`.
fn text_call_then_error_event(wire: Wire) -> Vec<String> {
    let mut frames = wire.unfinished_text(&["```json"]);
    match wire {
        Wire::OpenAi => frames.push(format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "echo", "arguments": "{\"x\":1}"}}]}, "finish_reason": null}]})
        )),
        Wire::Anthropic => frames.extend(
            [
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "call_1", "name": "echo", "input": {}}}),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"x\":1}"}}),
                json!({"type": "content_block_stop", "index": 1}),
            ]
            .iter()
            .map(anthropic_frame),
        ),
    }
    frames.push(format!(
        "event: error\ndata: {}\n\n",
        json!({"code": 500, "type": "server_error",
            "message": "The model produced output that does not match the expected peg-native format"})
    ));
    frames
}

#[tokio::test]
async fn on_both_wires_an_error_event_after_a_tool_call_is_read_and_the_round_asked_again() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let server = Server::start(move |n| match n {
            0 => Reply::Stream {
                frames: text_call_then_error_event(wire),
                gap: Duration::ZERO,
                end: End::Close,
            },
            _ => {
                let mut frames = wire.unfinished_text(&["fourteen"]);
                frames.extend(wire.finish());
                Reply::Stream {
                    frames,
                    gap: Duration::ZERO,
                    end: End::Close,
                }
            }
        })
        .await;
        let provider = wire.provider(&server, fast_policy(1));
        let (result, _) = run(&agent(provider, options())).await;
        assert_eq!(
            result.status,
            Status::Completed,
            "{wire:?}: {:?}",
            result.error
        );
        assert_eq!(result.final_text(), "fourteen", "{wire:?}");
        assert_eq!(server.requests(), 2, "{wire:?}: asked again once");
    }
}

#[tokio::test]
async fn on_both_wires_a_server_error_event_that_persists_ends_the_run_with_the_servers_words() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let server = Server::start(move |_| Reply::Stream {
            frames: text_call_then_error_event(wire),
            gap: Duration::ZERO,
            end: End::Close,
        })
        .await;
        let provider = wire.provider(&server, fast_policy(1));
        let (result, _) = run(&agent(provider, options())).await;
        assert_eq!(result.status, Status::Error, "{wire:?}");
        let error = error_of(&result);
        assert!(
            error.contains("does not match the expected peg-native format"),
            "{wire:?}: the server's words: {error}"
        );
        assert!(!error.contains("ended before"), "{wire:?}: {error}");
    }
}

#[tokio::test]
async fn a_server_that_never_parses_the_models_output_ends_the_run_saying_so() {
    let server = Server::start(|_| Reply::Stream {
        frames: vec![unparsable_output_frame()],
        gap: Duration::ZERO,
        end: End::Close,
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let (result, _) = run(&agent(provider, options())).await;
    assert_eq!(result.status, Status::Error);
    let error = error_of(&result);
    assert!(
        error.contains(
            "could not parse the model's own output (3 attempts, then once through the json \
             prompt protocol)"
        ),
        "{error}"
    );
    assert_eq!(server.requests(), 4, "bounded");
}

#[tokio::test]
async fn a_round_the_server_never_parses_natively_goes_through_the_prompt_protocol() {
    // Native requests fail to parse; the one without native tools (the
    // prompt protocol) gets a call written as text, which runs; the next
    // round is native again and answers.
    let server = Server::start(|n| match n {
        0..=2 => Reply::Stream {
            frames: vec![unparsable_output_frame()],
            gap: Duration::ZERO,
            end: End::Close,
        },
        3 => Reply::Stream {
            frames: {
                let call = r#"{"tool_calls": [{"name": "echo", "arguments": {"x": 1}}]}"#;
                let mut f = Wire::OpenAi.unfinished_text(&[call]);
                f.extend(Wire::OpenAi.finish());
                f
            },
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => openai_answer(&["done"]),
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let (result, _) = run(&agent(provider, options())).await;
    assert_eq!(result.status, Status::Completed, "{:?}", result.error);
    assert_eq!(result.final_text(), "done");
    assert_eq!(result.history.len(), 1, "the call written as text ran");
    assert_eq!(result.history[0].tool, "echo");
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    assert!(bodies[2].get("tools").is_some(), "native before");
    assert!(
        bodies[3].get("tools").is_none(),
        "the prompt protocol: no native tools"
    );
    let system = bodies[3]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(
        system.contains("\"tool_calls\""),
        "the tools are described in the prompt"
    );
    assert!(
        bodies[4].get("tools").is_some(),
        "the next round is native again"
    );
}

/// A round the server cannot parse, slower than the retry time: no second
/// native attempt; the round goes through the prompt protocol at once.
#[tokio::test]
async fn a_slow_unparsable_round_goes_through_the_prompt_protocol_without_more_attempts() {
    let server = Server::start(|n| match n {
        0 => Reply::Stream {
            frames: {
                let mut f = Wire::OpenAi.unfinished_text(&["thinking"]);
                f.push(unparsable_output_frame());
                f
            },
            gap: Duration::from_millis(300),
            end: End::Close,
        },
        _ => openai_answer(&["fourteen"]),
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let options = options().model_output_retry_time(Duration::from_millis(100));
    let (result, _) = run(&agent(provider, options)).await;
    assert_eq!(result.status, Status::Completed, "{:?}", result.error);
    assert_eq!(result.final_text(), "fourteen");
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies.len(),
        2,
        "one native attempt, then the prompt protocol"
    );
    assert!(bodies[1].get("tools").is_none(), "{}", bodies[1]);
}

/// A round after results that the server never parses, natively or through
/// the prompt protocol: the answer comes from the history as text (no tools
/// to fail on), and the status still says what happened.
#[tokio::test]
async fn an_unparsable_round_after_results_is_answered_from_the_history_as_text() {
    let unparsable = || Reply::Stream {
        frames: vec![unparsable_output_frame()],
        gap: Duration::ZERO,
        end: End::Close,
    };
    let server = Server::start(move |n| match n {
        0 => Wire::OpenAi.response(&[], &[("call_1", "echo", r#"{"x":14}"#)]),
        1..=4 => unparsable(),
        _ => openai_answer(&["It is 14."]),
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let (result, _) = run(&agent(provider, options())).await;
    assert_eq!(result.status, Status::Error);
    assert!(error_of(&result).contains("could not parse"), "{result:?}");
    assert_eq!(result.final_text(), "It is 14.");
    assert_eq!(result.answer_source, AnswerSource::Model);
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies.len(),
        6,
        "the call, three native attempts, the prompt protocol, the history as text"
    );
    assert!(bodies[5].get("tools").is_none(), "{}", bodies[5]);
    let log = bodies[5]["messages"].to_string();
    assert!(log.contains("System-generated log"), "{log}");
}

/// The prompt protocol's attempt at an unparsable round is bounded: a reply
/// that never ends is cut at four times `model_output_retry_time`, and the
/// run still ends in words (the host's, as no call succeeded).
#[tokio::test]
async fn a_prompt_protocol_round_that_never_ends_is_cut_at_four_times_the_retry_time() {
    let server = Server::start(|n| match n {
        0..=2 => Reply::Stream {
            frames: vec![unparsable_output_frame()],
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => Reply::Stream {
            frames: (0..10_000)
                .map(|_| Wire::OpenAi.unfinished_text(&["{"])[0].clone())
                .collect(),
            gap: Duration::from_millis(50),
            end: End::Close,
        },
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let options = options().model_output_retry_time(Duration::from_millis(300));
    let (result, took) = run(&agent(provider, options)).await;
    assert_eq!(result.status, Status::Error);
    let error = error_of(&result);
    assert!(
        error.contains("the json prompt protocol gave no reply within 1.2s"),
        "{error}"
    );
    assert!(took < Duration::from_secs(20), "bounded: {took:?}");
    assert_eq!(
        result.final_text(),
        "The model gave no answer: the server could not parse what it wrote."
    );
    assert_eq!(result.answer_source, AnswerSource::Host);
}

/// The next turn of a saved session (its history holds calls and results)
/// whose round the server cannot parse: through the prompt protocol too.
#[tokio::test]
async fn a_continued_sessions_unparsable_round_goes_through_the_prompt_protocol() {
    let server = Server::start(|n| match n {
        0..=2 => Reply::Stream {
            frames: vec![unparsable_output_frame()],
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => openai_answer(&["51 it is."]),
    })
    .await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(1));
    let agent = agent(provider, options());
    let earlier = toolhost_agent::ToolCall {
        id: "call_1".into(),
        name: "echo".into(),
        arguments: r#"{"x":14}"#.into(),
    };
    let mut asked = Message::assistant("");
    asked.tool_calls = vec![earlier.clone()];
    let history = vec![
        Message::user("What is 2*(3+4)?"),
        asked,
        Message::tool_result(&earlier, "echo: {\"x\":14}", false),
        Message::assistant("It is 14."),
        Message::user("And 3*17?"),
    ];
    let result = bounded(agent.run(history)).await;
    assert_eq!(result.status, Status::Completed, "{:?}", result.error);
    assert_eq!(result.final_text(), "51 it is.");
    let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
    assert_eq!(
        bodies.len(),
        4,
        "three native attempts, then the prompt protocol"
    );
    assert!(bodies[3].get("tools").is_none(), "{}", bodies[3]);
}

// ---------------------------------------------------------------- broken streams

async fn truncated_stream_in_round_two(wire: Wire, end: End) {
    let server = Server::start(move |n| match n {
        0 => Reply::Stream {
            frames: wire.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => Reply::Stream {
            frames: wire.unfinished_text(&["Half ", "an answer"]),
            gap: Duration::ZERO,
            end,
        },
    })
    .await;
    let provider = wire.provider(&server, fast_policy(4));
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error, "{wire:?}");
    let error = error_of(&result);
    assert!(error.contains("bad response"), "{error}");
    if matches!(end, End::Cut) {
        assert!(error.contains("the stream broke"), "{error}");
    } else {
        assert!(error.contains("the stream ended before"), "{error}");
    }
    assert_round_one_kept(&result);
    assert_round_two_sent_the_result(&server);
    assert_eq!(result.messages.len(), 4);
    assert_eq!(result.messages[3], Message::assistant("Half an answer"));
    assert_eq!(result.text, "Half an answer");
    assert_eq!(server.requests(), 2, "a broken stream is not retried");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_stream_closed_before_done_ends_with_error_keeping_the_partial_text_openai() {
    truncated_stream_in_round_two(Wire::OpenAi, End::Close).await;
}

#[tokio::test]
async fn a_stream_closed_before_message_stop_ends_with_error_keeping_the_partial_text() {
    truncated_stream_in_round_two(Wire::Anthropic, End::Close).await;
}

#[tokio::test]
async fn a_connection_cut_mid_stream_ends_with_error_and_keeps_round_one_openai() {
    truncated_stream_in_round_two(Wire::OpenAi, End::Cut).await;
}

#[tokio::test]
async fn a_connection_cut_mid_stream_ends_with_error_and_keeps_round_one_anthropic() {
    truncated_stream_in_round_two(Wire::Anthropic, End::Cut).await;
}

#[tokio::test]
async fn a_stream_cut_inside_a_tool_call_leaves_no_call_without_a_result() {
    // Round 2 starts a second call and the connection drops mid-arguments.
    let server = Server::start(|n| match n {
        0 => Reply::Stream {
            frames: Wire::OpenAi.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => Reply::Stream {
            frames: vec![format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_2", "type": "function",
                    "function": {"name": "echo", "arguments": "{\"x\":"}}]}, "finish_reason": null}]})
            )],
            gap: Duration::ZERO,
            end: End::Cut,
        },
    })
    .await;
    let tools = FakeTools::echo(vec![spec("echo", true)]);
    let provider = Wire::OpenAi.provider(&server, fast_policy(4));
    let agent = Agent::new(provider, tools.clone()).with_options(options());
    let (result, _) = run(&agent).await;

    assert_eq!(result.status, Status::Error);
    assert!(
        error_of(&result).contains("the stream broke"),
        "{result:#?}"
    );
    assert_round_one_kept(&result);
    assert_eq!(result.messages.len(), 3, "the half call is dropped");
    assert_eq!(tools.recorded().len(), 1, "the half call never runs");
}

async fn invalid_json_in_round_two(wire: Wire) {
    let server = Server::start(move |n| match n {
        0 => Reply::Stream {
            frames: wire.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        _ => {
            let mut frames = wire.unfinished_text(&["Hi"]);
            frames.push(wire.broken_frame());
            frames.extend(wire.finish());
            Reply::Stream {
                frames,
                gap: Duration::ZERO,
                end: End::Close,
            }
        }
    })
    .await;
    let provider = wire.provider(&server, fast_policy(4));
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error, "{wire:?}");
    let error = error_of(&result);
    assert!(error.contains("bad response"), "{error}");
    assert!(error.contains("is not valid JSON"), "{error}");
    let position = match wire {
        Wire::OpenAi => "chunk 3",
        Wire::Anthropic => "event 4 (content_block_delta)",
    };
    assert!(error.contains(position), "{error}");
    assert!(error.contains("oo"), "the excerpt is quoted: {error}");
    assert_round_one_kept(&result);
    assert_eq!(result.messages.len(), 4);
    assert_eq!(result.messages[3], Message::assistant("Hi"));
    assert_eq!(server.requests(), 2, "a broken stream is not retried");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

/// A stream that would grow without end: 64 KiB of text in 1 KiB deltas,
/// against a limit of 16 KiB per response.
async fn a_response_past_the_byte_limit(wire: Wire) {
    let server = Server::start(move |_| {
        let kib = "x".repeat(1024);
        Reply::Stream {
            frames: wire.unfinished_text(&vec![kib.as_str(); 64]),
            gap: Duration::ZERO,
            end: End::Close,
        }
    })
    .await;
    let policy = RetryPolicy {
        max_response_bytes: 16 * 1024,
        ..fast_policy(4)
    };
    let provider = wire.provider(&server, policy);
    let (result, took) = run(&agent(provider, options())).await;

    assert_eq!(result.status, Status::Error, "{wire:?}");
    let error = error_of(&result);
    assert!(
        error.contains("larger than 16384 bytes") && error.contains("max_response_bytes"),
        "{error}"
    );
    assert_eq!(server.requests(), 1, "an oversized response is not retried");
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[tokio::test]
async fn a_stream_past_the_response_byte_limit_ends_with_error_openai() {
    a_response_past_the_byte_limit(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_stream_past_the_response_byte_limit_ends_with_error_anthropic() {
    a_response_past_the_byte_limit(Wire::Anthropic).await;
}

#[tokio::test]
async fn invalid_json_in_a_chunk_ends_with_error_naming_the_chunk_openai() {
    invalid_json_in_round_two(Wire::OpenAi).await;
}

#[tokio::test]
async fn invalid_json_in_an_event_ends_with_error_naming_the_event_anthropic() {
    invalid_json_in_round_two(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- endless streams

/// Round 1 asks for `echo`; round 2 streams text deltas forever, 10 ms apart
/// (never idle long enough for the idle timeout).
async fn endless_server(wire: Wire) -> Server {
    Server::start(move |n| match n {
        0 => Reply::Stream {
            frames: wire.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        1 => Reply::Endless {
            first: wire.text_start(),
            frame: wire.text_delta("la "),
            gap: Duration::from_millis(10),
        },
        _ => status(500, vec![], "unexpected request"),
    })
    .await
}

async fn endless_stream_until_the_run_timeout(wire: Wire) {
    let server = endless_server(wire).await;
    let provider = wire.provider(&server, fast_policy(4));
    let options = options().timeout(Duration::from_millis(500));
    let (result, took) = run(&agent(provider, options)).await;

    assert_eq!(
        result.status,
        Status::Timeout,
        "{wire:?}: {:?}",
        result.error
    );
    assert!(
        error_of(&result).contains("time limit"),
        "{:?}",
        result.error
    );
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_round_one_kept(&result);
    assert_eq!(result.messages.len(), 4);
    let partial = &result.messages[3];
    assert_eq!(partial.role, Role::Assistant);
    assert!(
        partial.content.starts_with("la la "),
        "{:?}",
        partial.content
    );
    assert_eq!(result.text, partial.content);
    assert_eq!(server.requests(), 2);
    server.wait_stream_dropped().await;
}

#[tokio::test]
async fn an_endless_stream_ends_at_the_run_timeout_openai() {
    endless_stream_until_the_run_timeout(Wire::OpenAi).await;
}

#[tokio::test]
async fn an_endless_stream_ends_at_the_run_timeout_anthropic() {
    endless_stream_until_the_run_timeout(Wire::Anthropic).await;
}

/// Round 2 writes a call as text and is still writing it when the run's
/// time limit passes (Qwen2.5-Coder-1.5B in the eval's `large-file`): the
/// answer is the run's results, never the half-written call.
async fn a_call_written_as_text_cut_by_the_time_limit(wire: Wire) {
    let server = Server::start(move |n| match n {
        0 => Reply::Stream {
            frames: wire.tool_call(),
            gap: Duration::ZERO,
            end: End::Close,
        },
        1 => Reply::Endless {
            first: [
                wire.text_start(),
                vec![wire.text_delta("```json\n{\"name\": \"echo\", \"arguments\": {\"x")],
            ]
            .concat(),
            frame: wire.text_delta("1"),
            gap: Duration::from_millis(10),
        },
        _ => status(500, vec![], "unexpected request"),
    })
    .await;
    let provider = wire.provider(&server, fast_policy(4));
    let options = options().timeout(Duration::from_millis(500));
    let (result, _) = run(&agent(provider, options)).await;

    assert_eq!(result.status, Status::Timeout, "{:?}", result.error);
    assert_round_one_kept(&result);
    assert_eq!(
        result.answer_source,
        AnswerSource::Results,
        "{}",
        result.text
    );
    assert_eq!(result.text, r#"echo(1) returned echo: {"x":1}."#);
    // The conversation holds that answer, not the half-written call.
    let last = result.messages.last().unwrap();
    assert_eq!(
        (last.role, last.content.as_str()),
        (Role::Assistant, result.text.as_str())
    );
}

#[tokio::test]
async fn a_call_written_as_text_and_cut_by_the_time_limit_is_not_the_answer() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        a_call_written_as_text_cut_by_the_time_limit(wire).await;
    }
}

#[tokio::test]
async fn an_endless_stream_ends_when_the_abort_token_fires() {
    let server = endless_server(Wire::OpenAi).await;
    let provider = Wire::OpenAi.provider(&server, fast_policy(4));
    let abort = CancellationToken::new();
    let deltas = Arc::new(AtomicUsize::new(0));
    let (a, d) = (abort.clone(), deltas.clone());
    // Abort from the event stream once round 2 has streamed 20 deltas.
    let options = options().abort(abort).on_event(move |e| {
        if let AgentEvent::TextDelta { round: 2, .. } = e
            && d.fetch_add(1, Ordering::SeqCst) + 1 == 20
        {
            a.cancel();
        }
    });
    let (result, took) = run(&agent(provider, options)).await;

    assert_eq!(result.status, Status::Aborted, "{:?}", result.error);
    assert_eq!(result.error.as_deref(), Some("aborted"));
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_round_one_kept(&result);
    assert_eq!(result.messages.len(), 4);
    assert!(result.messages[3].content.starts_with("la la "));
    assert!(deltas.load(Ordering::SeqCst) >= 20);
    server.wait_stream_dropped().await;
}
