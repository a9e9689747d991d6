//! The agent loop's help for small local models, over the wire: the real
//! `OpenAiCompatible` and `Anthropic` providers talk HTTP/SSE to the fake
//! model server, and each test checks both how the run ends and what the
//! loop sent (`tool_choice`, whether `tools` went, the last user message).
//! The same behaviours are tested against a scripted provider in
//! `agent_loop.rs`; these prove they survive both wire formats.

use std::sync::{Arc, Mutex};

use crate::agent_support::*;
use serde_json::{Value, json};
use toolhost_agent::provider::{
    Provider, openai::OpenAiCompatible, prompt::PromptProfile, prompt::PromptTools,
};
use toolhost_agent::{
    Agent, AgentEvent, AgentOptions, AnswerSource, ErrorKind, FINAL_ANSWER_NOTE, Message, Role,
    SetAside, Status, ToolChainResult, ToolSpec,
};
use toolhost_test_support::fake_model::{FakeModel as Server, Received, Reply};

// ---------------------------------------------------------------- the run

/// The call small models repeat.
const CALC: &str = r#"{"expression":"14"}"#;

/// What `calculate` answers.
const FOURTEEN: &str = "14";

/// A run over the wire: its result, its events and the request bodies the
/// server received.
struct WireRun {
    result: ToolChainResult,
    events: Vec<AgentEvent>,
    bodies: Vec<Value>,
    /// The calls the tool executor ran.
    ran: usize,
}

/// Runs "what is 14?" with one tool, `calculate` (not read-only, so that a
/// repeated call really runs again), answering `14`, through `wire`'s real
/// provider against `server` (no retries inside the provider).
async fn run(wire: Wire, server: &Server, options: AgentOptions) -> WireRun {
    let provider = wire.provider(server, fast_policy(1));
    let tools = vec![spec("calculate", false)];
    run_asking(provider, server, options, "What is 14?", tools).await
}

/// [`run`] through `provider` with `tools` (each answering `14`), the user
/// asking `question`.
async fn run_asking(
    provider: Arc<dyn Provider>,
    server: &Server,
    options: AgentOptions,
    question: &str,
    tools: Vec<ToolSpec>,
) -> WireRun {
    let tools = FakeTools::new(tools, |_, _| Box::pin(async { ok(FOURTEEN) }));
    run_through(provider, server, options, question, tools).await
}

/// [`run_asking`] with `tools` as they are.
async fn run_through(
    provider: Arc<dyn Provider>,
    server: &Server,
    options: AgentOptions,
    question: &str,
    tools: Arc<FakeTools>,
) -> WireRun {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let options = options
        .clock(clock())
        .on_event(move |e| sink.lock().unwrap().push(e));
    let agent = Agent::new(provider, tools.clone()).with_options(options);
    let result = bounded(agent.run(vec![Message::user(question)])).await;
    let events = events.lock().unwrap().clone();
    WireRun {
        result,
        events,
        bodies: server.bodies(),
        ran: tools.recorded().len(),
    }
}

fn options() -> AgentOptions {
    AgentOptions::new("test-model")
}

/// The run ended with `status`, a non-empty `answer` as its final text, and
/// messages that can be sent again (every call has its result, no answer
/// left with a dangling call).
fn assert_outcome(run: &WireRun, status: Status, answer: &str) {
    let r = &run.result;
    assert_eq!(r.status, status, "{:?}", r.error);
    assert!(!answer.trim().is_empty());
    assert_eq!(r.final_text(), answer, "{:#?}", r.messages);
    let last = r.messages.last().expect("messages");
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.content, answer);
    assert!(last.tool_calls.is_empty(), "no dangling calls");
    assert_every_call_has_a_result(r);
    // The note is for the request only, never kept.
    let bare = FINAL_ANSWER_NOTE.trim_matches(['[', ']']);
    assert!(
        r.messages.iter().all(|m| !m.content.contains(bare)),
        "{:#?}",
        r.messages
    );
}

// ---------------------------------------------------------------- the wire

/// `tool_choice` as sent (`auto`, `none`, ...), in either format.
fn tool_choice(wire: Wire, body: &Value) -> Option<&str> {
    match wire {
        Wire::OpenAi => body["tool_choice"].as_str(),
        Wire::Anthropic => body["tool_choice"]["type"].as_str(),
    }
}

/// The tool names offered in `body`.
fn tool_names(wire: Wire, body: &Value) -> Vec<&str> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| match wire {
            Wire::OpenAi => t["function"]["name"].as_str(),
            Wire::Anthropic => t["name"].as_str(),
        })
        .collect()
}

/// The conversation in `body` (without OpenAI's system message).
fn conversation(body: &Value) -> Vec<&Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] != "system")
        .collect()
}

/// The text of a message: its content string, or its text blocks.
fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of the last user message (Anthropic: its text blocks, not the
/// tool results it may carry).
fn last_user_text(body: &Value) -> String {
    conversation(body)
        .into_iter()
        .rev()
        .find(|m| m["role"] == "user" && !text_of(m).is_empty())
        .map(text_of)
        .unwrap_or_default()
}

/// The tool results in `body`, in order: (call id, text, error flag — always
/// `false` on OpenAI, which has none: an error is said in the text).
fn tool_results(wire: Wire, body: &Value) -> Vec<(String, String, bool)> {
    let messages = conversation(body);
    match wire {
        Wire::OpenAi => messages
            .into_iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                (
                    m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                    false,
                )
            })
            .collect(),
        Wire::Anthropic => messages
            .into_iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| {
                (
                    b["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                    b["content"].as_str().unwrap_or_default().to_owned(),
                    b["is_error"] == true,
                )
            })
            .collect(),
    }
}

/// A round's request: `calculate` offered and callable.
fn assert_tool_request(wire: Wire, body: &Value) {
    // (From round 2 on, the built-in `read_var` is offered too.)
    assert!(tool_names(wire, body).contains(&"calculate"), "{body}");
    assert_eq!(tool_choice(wire, body), Some("auto"), "{body}");
}

/// The forced final answer request: the tools are still defined (Anthropic
/// needs them when the history holds tool calls) but may not be called, and
/// the last user message is the note.
fn assert_final_answer_request(wire: Wire, body: &Value) {
    assert!(tool_names(wire, body).contains(&"calculate"), "{body}");
    assert_eq!(tool_choice(wire, body), Some("none"), "{body}");
    if wire == Wire::OpenAi {
        assert_eq!(body["parallel_tool_calls"], false, "{body}");
    }
    assert_eq!(last_user_text(body), FINAL_ANSWER_NOTE, "{body}");
}

/// The last resort: no tools at all, and the history as a log in one user
/// message, ending with the note.
fn assert_history_as_text_request(body: &Value) {
    assert!(body.get("tools").is_none(), "no tools: {body}");
    assert!(body.get("tool_choice").is_none(), "{body}");
    let messages = conversation(body);
    assert_eq!(messages.len(), 1, "one message: {body}");
    assert_eq!(messages[0]["role"], "user");
    let log = text_of(messages[0]);
    assert!(log.starts_with("[System-generated log"), "{log}");
    assert!(log.contains("\nUser: What is 14?\n"), "{log}");
    assert!(
        log.contains(&format!("called the tool `calculate` with {CALC}")),
        "{log}"
    );
    assert!(
        log.contains(&format!("The tool `calculate` returned: {FOURTEEN}")),
        "{log}"
    );
    assert!(log.contains("[End of the log]"), "{log}");
    assert!(log.ends_with(FINAL_ANSWER_NOTE), "{log}");
}

/// Round 1 of most tests: one `calculate` call.
fn calc_call(wire: Wire) -> Reply {
    wire.response(&[], &[("call_1", "calculate", CALC)])
}

// ---------------------------------------------------------------- 1. doom loop

async fn doom_loop_refused_then_answered(wire: Wire) {
    let server = Server::replies(vec![
        wire.response(&[], &[("call_1", "calculate", CALC)]),
        // The same arguments, written differently.
        wire.response(&[], &[("call_2", "calculate", r#"{ "expression": "14" }"#)]),
        wire.response(&[], &[("call_3", "calculate", CALC)]),
        wire.response(&["14 is 14."], &[]),
    ])
    .await;
    let run = run(wire, &server, options()).await;

    assert_outcome(&run, Status::DoomLoop, "14 is 14.");
    let error = run.result.error.as_deref().unwrap_or_default();
    assert!(error.contains("called 3 times in a row"), "{error}");
    assert_eq!(run.ran, 2, "the third identical call did not run");
    let refused = run.result.history.last().expect("history");
    assert_eq!(refused.call_id, "call_3");
    assert_eq!(refused.error_kind, Some(ErrorKind::NotRun));
    assert!(
        run.events
            .iter()
            .any(|e| matches!(e, AgentEvent::DoomLoopDetected { repeats: 3, .. }))
    );

    // On the wire: three rounds with tools, then the final answer request,
    // which carries the refusal as the third call's result.
    let b = &run.bodies;
    assert_eq!(b.len(), 4, "{b:#?}");
    for body in &b[..3] {
        assert_tool_request(wire, body);
    }
    assert_eq!(
        tool_results(wire, &b[2]),
        [
            ("call_1".to_owned(), FOURTEEN.to_owned(), false),
            ("call_2".to_owned(), FOURTEEN.to_owned(), false),
        ]
    );
    assert_final_answer_request(wire, &b[3]);
    let results = tool_results(wire, &b[3]);
    assert_eq!(results.len(), 3, "{results:?}");
    let (id, text, is_error) = &results[2];
    assert_eq!(id, "call_3");
    assert!(
        text.contains("not run: `calculate` was called 3 times")
            && text.contains("its result is already above: do not call it again"),
        "{text}"
    );
    if wire == Wire::Anthropic {
        assert!(is_error, "the refusal is an error result");
    } else {
        assert!(text.starts_with("Error: "), "{text}");
    }
}

#[tokio::test]
async fn a_doom_loop_over_the_wire_refuses_the_call_then_asks_with_tool_choice_none_openai() {
    doom_loop_refused_then_answered(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_doom_loop_over_the_wire_refuses_the_call_then_asks_with_tool_choice_none_anthropic() {
    doom_loop_refused_then_answered(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- 2. forced final answer

/// llama.cpp's HTTP 500 when the model wrote a tool call it could not parse
/// (here: a call although `tool_choice` is `none`).
fn unparsable_call() -> Reply {
    Reply::status(
        500,
        &json!({"error": {"code": 500, "type": "server_error",
            "message": "Failed to parse input at pos 0: <tool_call>{\"name\": \"calculate\"... \
                        The model produced output that does not match the expected peg-native format"}})
        .to_string(),
    )
}

/// Whether `request` is the history rendered as text.
fn is_history_as_text(request: &Received) -> bool {
    conversation(&request.body)
        .first()
        .is_some_and(|m| text_of(m).starts_with("[System-generated log"))
}

#[tokio::test]
async fn llama_cpp_refusing_the_final_answer_leads_to_the_history_as_text_openai() {
    // llama.cpp refuses the `tool_choice: none` request (the model wrote a
    // call), three times; the round goes through the prompt protocol, where
    // the model writes its call as text; the history as text gets the answer.
    let call_as_text =
        r#"{"tool_calls": [{"name": "calculate", "arguments": {"expression": "14"}}]}"#;
    let server = Server::replies(vec![
        calc_call(Wire::OpenAi),
        unparsable_call(),
        unparsable_call(),
        unparsable_call(),
        Wire::OpenAi.response(&[call_as_text], &[]),
        Wire::OpenAi.response(&["It is 14."], &[]),
    ])
    .await;
    let run = run(Wire::OpenAi, &server, options().max_rounds(1)).await;

    assert_outcome(&run, Status::MaxRounds, "It is 14.");
    assert_eq!(run.ran, 1, "the call written as text did not run");
    let b = &run.bodies;
    assert_eq!(b.len(), 6, "{b:#?}");
    assert_tool_request(Wire::OpenAi, &b[0]);
    for body in &b[1..4] {
        assert_final_answer_request(Wire::OpenAi, body);
    }
    // The prompt protocol: no native tools; they are described in the prompt.
    assert!(b[4].get("tools").is_none(), "{}", b[4]);
    assert!(
        b[4]["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.contains("calculate")),
        "{}",
        b[4]
    );
    assert_history_as_text_request(&b[5]);
}

#[tokio::test]
async fn llama_cpp_refusing_every_request_with_calls_still_gets_an_answer_openai() {
    // A model that writes a call whenever the history holds calls: llama.cpp
    // fails every request but the history as text, which has none.
    let server = Server::start_with(|n, request| match n {
        0 => calc_call(Wire::OpenAi),
        _ if is_history_as_text(request) => Wire::OpenAi.response(&["It is 14."], &[]),
        _ => unparsable_call(),
    })
    .await;
    let run = run(Wire::OpenAi, &server, options().max_rounds(1)).await;

    assert_outcome(&run, Status::MaxRounds, "It is 14.");
    let error = run.result.error.as_deref().unwrap_or_default();
    assert!(error.contains("stopped after 1 rounds"), "{error}");
    let b = &run.bodies;
    assert_eq!(
        b.len(),
        6,
        "round 1, 3 attempts, the prompt protocol, the log"
    );
    for body in &b[1..4] {
        assert_final_answer_request(Wire::OpenAi, body);
    }
    assert!(b[4].get("tools").is_none(), "{}", b[4]);
    assert_history_as_text_request(&b[5]);
}

/// One call, then `bad` as the reply to the final-answer request: the loop
/// must ask once more, without tools and with the history as text, and
/// end with that answer.
async fn a_bad_final_answer_is_asked_again_with_the_history_as_text(
    wire: Wire,
    bad: Reply,
) -> WireRun {
    let server = Server::replies(vec![
        calc_call(wire),
        bad,
        wire.response(&["It is 14."], &[]),
    ])
    .await;
    let run = run(wire, &server, options().max_rounds(1)).await;

    assert_outcome(&run, Status::MaxRounds, "It is 14.");
    let b = &run.bodies;
    assert_eq!(b.len(), 3, "{b:#?}");
    assert_tool_request(wire, &b[0]);
    assert_final_answer_request(wire, &b[1]);
    assert_history_as_text_request(&b[2]);
    run
}

async fn final_answer_with_a_native_call(wire: Wire) {
    // The server ignores `tool_choice: none` (Ollama, some vLLM templates;
    // Anthropic's models follow the history): the answer is a call.
    let bad = wire.response(&[], &[("call_2", "calculate", CALC)]);
    let run = a_bad_final_answer_is_asked_again_with_the_history_as_text(wire, bad).await;
    assert_eq!(run.ran, 1, "the call in the final answer did not run");
}

#[tokio::test]
async fn a_final_answer_that_is_a_tool_call_is_asked_again_without_tools_openai() {
    final_answer_with_a_native_call(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_final_answer_that_is_a_tool_use_block_is_asked_again_without_tools_anthropic() {
    final_answer_with_a_native_call(Wire::Anthropic).await;
}

async fn final_answer_with_a_call_as_text(wire: Wire) {
    let bad = wire.response(
        &[
            "```json\n{\"name\": \"calculate\", ",
            "\"arguments\": {\"expression\": \"14\"}}\n```",
        ],
        &[],
    );
    a_bad_final_answer_is_asked_again_with_the_history_as_text(wire, bad).await;
}

#[tokio::test]
async fn a_final_answer_that_is_a_call_written_as_text_is_asked_again_without_tools_openai() {
    final_answer_with_a_call_as_text(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_final_answer_that_is_a_call_written_as_text_is_asked_again_without_tools_anthropic() {
    final_answer_with_a_call_as_text(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- 3. empty reply

async fn empty_reply_after_results(wire: Wire) {
    let server = Server::replies(vec![
        calc_call(wire),
        wire.response(&[], &[]),
        wire.response(&["It is 14."], &[]),
    ])
    .await;
    let run = run(wire, &server, options()).await;

    assert_outcome(&run, Status::Completed, "It is 14.");
    assert!(run.result.error.is_none(), "{:?}", run.result.error);
    let b = &run.bodies;
    assert_eq!(b.len(), 3, "{b:#?}");
    assert_tool_request(wire, &b[1]);
    assert_eq!(
        tool_results(wire, &b[1]),
        [("call_1".to_owned(), FOURTEEN.to_owned(), false)]
    );
    assert_final_answer_request(wire, &b[2]);
    assert_eq!(tool_results(wire, &b[2]).len(), 1, "{}", b[2]);
}

#[tokio::test]
async fn an_empty_reply_after_tool_results_asks_for_the_answer_with_tool_choice_none_openai() {
    empty_reply_after_results(Wire::OpenAi).await;
}

#[tokio::test]
async fn an_empty_reply_after_tool_results_asks_for_the_answer_with_tool_choice_none_anthropic() {
    empty_reply_after_results(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- 4. <think> in the text

/// Round 1 reasons in `<think>` then calls; round 2 reasons then answers.
async fn think_in_the_text(wire: Wire, round_one: &[&str], round_two: &[&str]) {
    let server = Server::replies(vec![
        wire.response(round_one, &[("call_1", "calculate", CALC)]),
        wire.response(round_two, &[]),
    ])
    .await;
    let run = run(wire, &server, options()).await;

    assert_outcome(&run, Status::Completed, "The answer is 14.");
    assert_eq!(run.ran, 1);
    let (mut reasoning, mut text) = ([String::new(), String::new()], String::new());
    for e in &run.events {
        match e {
            AgentEvent::ReasoningDelta { round, text } => reasoning[*round as usize - 1] += text,
            AgentEvent::TextDelta { text: t, .. } => text += t,
            _ => {}
        }
    }
    assert_eq!(reasoning[0].trim(), "Let me calculate 14.");
    assert_eq!(reasoning[1].trim(), "The tool said 14.");
    assert_eq!(text.trim(), "The answer is 14.", "no reasoning in the text");
    for m in &run.result.messages {
        assert!(
            !m.content.contains("think>") && !m.content.contains("Let me calculate"),
            "{m:?}"
        );
    }

    // The history sent back has no reasoning: round 1's message is only its call.
    let b = &run.bodies;
    assert_eq!(b.len(), 2, "{b:#?}");
    let sent = b[1].to_string();
    assert!(
        !sent.contains("think>") && !sent.contains("Let me calculate"),
        "{sent}"
    );
    let assistant = conversation(&b[1])
        .into_iter()
        .find(|m| m["role"] == "assistant")
        .cloned()
        .expect("round 1's message");
    assert_eq!(text_of(&assistant), "", "{assistant}");
    assert_eq!(
        tool_results(wire, &b[1]),
        [("call_1".to_owned(), FOURTEEN.to_owned(), false)]
    );
}

const THINK_ONE: &[&str] = &["<think>Let me calculate 14.</think>\n\n"];
const THINK_TWO: &[&str] = &["<think>The tool said 14.</think>\n\nThe answer is 14."];
// The tags cut between chunks, as a server streams them token by token.
const THINK_ONE_SPLIT: &[&str] = &["<thi", "nk>Let me calc", "ulate 14.</th", "ink>\n\n"];
const THINK_TWO_SPLIT: &[&str] = &[
    "<",
    "think",
    ">The tool said 14.<",
    "/think",
    ">\n\nThe answer",
    " is 14.",
];

#[tokio::test]
async fn think_blocks_in_the_text_stay_out_of_the_answer_and_the_history_openai() {
    think_in_the_text(Wire::OpenAi, THINK_ONE, THINK_TWO).await;
}

#[tokio::test]
async fn think_blocks_in_the_text_stay_out_of_the_answer_and_the_history_anthropic() {
    think_in_the_text(Wire::Anthropic, THINK_ONE, THINK_TWO).await;
}

#[tokio::test]
async fn think_tags_split_across_stream_chunks_stay_out_of_the_answer_and_the_history_openai() {
    think_in_the_text(Wire::OpenAi, THINK_ONE_SPLIT, THINK_TWO_SPLIT).await;
}

#[tokio::test]
async fn think_tags_split_across_stream_chunks_stay_out_of_the_answer_and_the_history_anthropic() {
    think_in_the_text(Wire::Anthropic, THINK_ONE_SPLIT, THINK_TWO_SPLIT).await;
}

// ---------------------------------------------------------------- 5. the note copied

async fn note_copied_after_the_answer(wire: Wire) {
    let bare = FINAL_ANSWER_NOTE.trim_matches(['[', ']']);
    let server = Server::replies(vec![
        calc_call(wire),
        wire.response(&["It is 14.\n\n", bare], &[]),
    ])
    .await;
    let run = run(wire, &server, options().max_rounds(1)).await;

    assert_outcome(&run, Status::MaxRounds, "It is 14.");
    let b = &run.bodies;
    assert_eq!(b.len(), 2, "the answer was kept, not asked again");
    assert_final_answer_request(wire, &b[1]);
}

async fn only_the_note_as_the_answer(wire: Wire) {
    let bad = wire.response(&[FINAL_ANSWER_NOTE], &[]);
    a_bad_final_answer_is_asked_again_with_the_history_as_text(wire, bad).await;
}

#[tokio::test]
async fn a_final_answer_followed_by_a_copy_of_the_note_keeps_only_the_answer_openai() {
    note_copied_after_the_answer(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_final_answer_followed_by_a_copy_of_the_note_keeps_only_the_answer_anthropic() {
    note_copied_after_the_answer(Wire::Anthropic).await;
}

#[tokio::test]
async fn a_final_answer_that_is_only_the_note_is_asked_again_with_the_history_as_text_openai() {
    only_the_note_as_the_answer(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_final_answer_that_is_only_the_note_is_asked_again_with_the_history_as_text_anthropic() {
    only_the_note_as_the_answer(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- never protocol text as the answer

/// A call to `tool` with `expression` in every shape small models write
/// it as text: bare JSON, a fenced block, `<tool_call>` tags, Llama's
/// `<function=…>`, a list with other key names.
fn calls_as_text(tool: &str, expression: &str) -> Vec<String> {
    let call = format!(r#"{{"name": "{tool}", "arguments": {{"expression": "{expression}"}}}}"#);
    vec![
        call.clone(),
        format!("```json\n{call}\n```"),
        format!("<tool_call>\n{call}\n</tool_call>"),
        format!(r#"<function={tool}>{{"expression": "{expression}"}}</function>"#),
        format!(r#"[{{"tool": "{tool}", "parameters": {{"expression": "{expression}"}}}}]"#),
    ]
}

/// What small models write instead of an answer that is not a call of an
/// offered tool: calls of a tool the run does not have, in every shape, and
/// copies of the host's own text.
fn not_answers() -> Vec<String> {
    let mut bad = calls_as_text("calculator", "14");
    // Broken call JSON (Qwen2.5-Coder-0.5B through the json protocol, in
    // docs/log.md, "Eval round 3"): cut at the token bound, an invalid escape, a stray brace.
    bad.push(
        "```json\n{\"tool_calls\": [{\"name\": \"calculate\", \"arguments\": {\"expression\": \"14\"}, \"id\": \"call_1234567890".into(),
    );
    bad.push(
        "```json\n{\"tool_calls\": [{\"name\": \"regex_find\", \"arguments\": {\"pattern\": \"a+\\.b\"}}]}\n{\"tool_calls\": [{\"name\": \"regex_find\"".into(),
    );
    bad.push(
        "```json\n{\"tool_calls\": [{\"name\": \"calculate\", \"arguments\": {\"expression\": \"14\"}, \"error\": \"no\"}}]}\n```".into(),
    );
    bad.push("The tool `calculate` returned an error: not run: the loop stopped\n\nAssistant called the tool `calculate` with {\"expression\": \"51\"}".into());
    bad.push(
        "[System-generated log of the conversation so far, written by the host for reference.]"
            .into(),
    );
    // A result written out as the answer (Qwen2.5-Coder-0.5B through the
    // xml protocol at the round limit, docs/log.md, "Eval round 5"), in the prompt
    // protocols' forms and a chat template's tags.
    bad.push(format!(
        "<tool_result name=\"calculate\" id=\"call_9\">{FOURTEEN}</tool_result>"
    ));
    bad.push(format!("Tool result (calculate, call call_9):\n{FOURTEEN}"));
    bad.push(format!("<tool_response>\n{FOURTEEN}\n</tool_response>"));
    bad
}

/// One call that returns 14, then `bad` as the model's reply to every
/// request after it: the loop asks once more (tool_choice none), then with
/// the history as text, then answers from the results, marked so.
async fn protocol_text_is_never_the_answer(wire: Wire, bad: &str) {
    let server = Server::replies(vec![
        calc_call(wire),
        wire.response(&[bad], &[]),
        wire.response(&[bad], &[]),
        wire.response(&[bad], &[]),
    ])
    .await;
    let run = run(wire, &server, options()).await;
    let answer = format!("calculate(14) returned {FOURTEEN}.");
    assert_outcome(&run, Status::Completed, &answer);
    assert_eq!(run.result.answer_source, AnswerSource::Results, "{bad}");
    assert_eq!(run.ran, 1, "{bad}: nothing but the first call ran");
    let b = &run.bodies;
    assert_eq!(b.len(), 4, "{bad}: {b:#?}");
    assert_tool_request(wire, &b[1]);
    assert_final_answer_request(wire, &b[2]);
    assert_history_as_text_request(&b[3]);
    // Each reply is set aside after it streamed: round 2's, then the final
    // answer's twice (asked without tools, then over the history as text).
    let why = set_aside(&run.events);
    assert_eq!(why.len(), 3, "{bad}: {why:?}");
    assert_eq!(why[0].0, 2, "{bad}: {why:?}");
    assert!(
        why.iter().all(|(_, r)| *r != SetAside::NamedToolNotCalled),
        "{bad}: {why:?}"
    );
}

#[tokio::test]
async fn protocol_text_in_every_shape_is_never_the_answer_openai() {
    for bad in not_answers() {
        protocol_text_is_never_the_answer(Wire::OpenAi, &bad).await;
    }
}

#[tokio::test]
async fn protocol_text_in_every_shape_is_never_the_answer_anthropic() {
    for bad in not_answers() {
        protocol_text_is_never_the_answer(Wire::Anthropic, &bad).await;
    }
}

/// The model writes its call of an offered tool as text in a round where
/// it may call tools (the server's parser missed it: llama.cpp with a chat
/// template that expects other tags): the loop runs it as the call it is,
/// and the next request carries it as a real call with its result.
async fn a_call_as_text_is_run(wire: Wire, text: &str) {
    let server = Server::replies(vec![
        wire.response(&[text], &[]),
        wire.response(&["It is 14."], &[]),
    ])
    .await;
    let run = run(wire, &server, options()).await;
    assert_outcome(&run, Status::Completed, "It is 14.");
    assert_eq!(run.result.answer_source, AnswerSource::Model, "{text}");
    assert_eq!(run.ran, 1, "{text}: the call ran");
    let history = &run.result.history;
    assert_eq!(history.len(), 1, "{text}");
    assert_eq!(history[0].tool, "calculate");
    assert_eq!(history[0].args, json!({"expression": "2*(3+4)"}), "{text}");
    let b = &run.bodies;
    assert_eq!(b.len(), 2, "{text}: {b:#?}");
    assert_tool_request(wire, &b[1]);
    let results = tool_results(wire, &b[1]);
    assert_eq!(results.len(), 1, "{text}: {}", b[1]);
    assert_eq!(results[0].1, FOURTEEN, "{text}");
    assert!(
        !b[1].to_string().contains("<function=") && !b[1].to_string().contains("```json"),
        "{text}: the call went back as a call, not as its text: {}",
        b[1]
    );
    assert_eq!(
        set_aside(&run.events),
        [(1, SetAside::CallAsText)],
        "{text}: the streamed call text is not the answer"
    );
}

#[tokio::test]
async fn a_call_of_an_offered_tool_written_as_text_is_run_as_a_call_openai() {
    // Not the last shape: a list with other key names is no call the
    // prompt protocols' parsers know (it is asked again, as any reply that
    // is not words).
    for text in calls_as_text("calculate", "2*(3+4)").iter().take(4) {
        a_call_as_text_is_run(Wire::OpenAi, text).await;
    }
}

#[tokio::test]
async fn a_call_of_an_offered_tool_written_as_text_is_run_as_a_call_anthropic() {
    // Not the last shape: a list with other key names is no call the
    // prompt protocols' parsers know (it is asked again, as any reply that
    // is not words).
    for text in calls_as_text("calculate", "2*(3+4)").iter().take(4) {
        a_call_as_text_is_run(Wire::Anthropic, text).await;
    }
}

/// The issue's run: the model writes `calculate` as text (the server saw no
/// call), then hands the result back the same way: 14, from the results.
async fn text_call_then_hand_back(wire: Wire) {
    let first = calls_as_text("calculate", "2*(3+4)").remove(0);
    let again = calls_as_text("calculate", "14").remove(0);
    let server = Server::replies(vec![
        wire.response(&[&first], &[]),
        wire.response(&[&again], &[]),
    ])
    .await;
    let run = run(wire, &server, options()).await;
    assert_outcome(&run, Status::Completed, "calculate(2*(3+4)) returned 14.");
    assert_eq!(run.result.answer_source, AnswerSource::Results);
    assert_eq!(run.ran, 1, "the hand-back did not run");
}

#[tokio::test]
async fn a_text_call_whose_result_comes_back_as_a_text_call_ends_with_the_result_openai() {
    text_call_then_hand_back(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_text_call_whose_result_comes_back_as_a_text_call_ends_with_the_result_anthropic() {
    text_call_then_hand_back(Wire::Anthropic).await;
}

/// `calculate("2*(3+4)")` returns 14, then the model calls
/// `calculate("14")`: it is done, and 14 is the answer.
async fn the_result_handed_back(wire: Wire) {
    let server = Server::replies(vec![
        wire.response(
            &[],
            &[("call_1", "calculate", r#"{"expression":"2*(3+4)"}"#)],
        ),
        wire.response(&[], &[("call_2", "calculate", CALC)]),
    ])
    .await;
    let run = run(wire, &server, options()).await;
    assert_outcome(&run, Status::Completed, "calculate(2*(3+4)) returned 14.");
    assert_eq!(run.result.answer_source, AnswerSource::Results);
    assert_eq!(run.bodies.len(), 2, "no further request");
    assert_eq!(run.ran, 1, "the hand-back did not run");
}

#[tokio::test]
async fn a_call_that_hands_back_the_result_ends_the_run_with_it_openai() {
    the_result_handed_back(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_call_that_hands_back_the_result_ends_the_run_with_it_anthropic() {
    the_result_handed_back(Wire::Anthropic).await;
}

// ---------------------------------------------------------------- a tool the user names

/// The issue's question, which names its tool.
const NAMES_CALCULATE: &str = "What is 2*(3+4)? Use the calculate tool.";

/// `tool_choice: required` as `wire` writes it.
fn required(wire: Wire) -> &'static str {
    match wire {
        Wire::OpenAi => "required",
        Wire::Anthropic => "any",
    }
}

/// `calculate` and `word_count`, read-only, and a tool that changes things.
fn calculate_and_a_writer() -> Vec<ToolSpec> {
    vec![
        spec("calculate", true),
        spec("word_count", true),
        spec("write_note", false),
    ]
}

/// The first reply answers "10" to `question`; asked again with a call
/// required (offering `forced`), the model calls `calculate`.
async fn a_named_tool_not_called(wire: Wire, question: &str, forced: &[&str]) {
    // Qwen2.5-Coder-0.5B answers "10" at once (docs/log.md, "Eval round 4").
    let server = Server::replies(vec![
        wire.response(&["10"], &[]),
        calc_call(wire),
        wire.response(&["It is 14."], &[]),
    ])
    .await;
    let provider = wire.provider(&server, fast_policy(1));
    let tools = calculate_and_a_writer();
    let run = run_asking(provider, &server, options(), question, tools).await;

    assert_outcome(&run, Status::Completed, "It is 14.");
    assert_eq!(run.ran, 1, "the tool ran");
    let b = &run.bodies;
    assert_eq!(b.len(), 3, "{b:#?}");
    assert_tool_request(wire, &b[0]);
    assert!(tool_names(wire, &b[0]).contains(&"write_note"), "{}", b[0]);
    assert_eq!(tool_choice(wire, &b[1]), Some(required(wire)), "{}", b[1]);
    // A call the host forces is of the tool named, which changes nothing:
    // neither the writer nor the other read-only tool is offered (any
    // read-only tool when the user asked for a tool without naming one).
    assert_eq!(tool_names(wire, &b[1]), forced, "{}", b[1]);
    assert_tool_request(wire, &b[2]);
    // The reply that skipped the tool is neither sent again nor kept, and a
    // UI that showed it is told so.
    assert_eq!(conversation(&b[1]).len(), 1, "{}", b[1]);
    assert!(run.result.messages.iter().all(|m| m.content != "10"));
    assert_eq!(
        set_aside(&run.events),
        [(1, SetAside::NamedToolNotCalled)],
        "{:#?}",
        run.events
    );
}

/// The `ReplySetAside` events of a run, after a `TextDelta` of their round
/// (what they take back), as `(round, reason)`.
fn set_aside(events: &[AgentEvent]) -> Vec<(u32, SetAside)> {
    let mut streamed = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for e in events {
        match e {
            AgentEvent::TextDelta { round, .. } => {
                streamed.insert(*round);
            }
            AgentEvent::ReplySetAside { round, reason } => {
                assert!(
                    streamed.contains(round),
                    "set aside before its text: {events:#?}"
                );
                out.push((*round, *reason));
            }
            _ => {}
        }
    }
    out
}

#[tokio::test]
async fn a_tool_the_user_names_but_the_reply_skips_is_asked_for_with_a_call_required_openai() {
    a_named_tool_not_called(Wire::OpenAi, NAMES_CALCULATE, &["calculate"]).await;
}

#[tokio::test]
async fn a_tool_the_user_names_but_the_reply_skips_is_asked_for_with_a_call_required_anthropic() {
    a_named_tool_not_called(Wire::Anthropic, NAMES_CALCULATE, &["calculate"]).await;
}

#[tokio::test]
async fn a_tool_asked_for_without_a_name_is_required_among_the_read_only_ones() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let q = "What is 2*(3+4)? Use a tool.";
        a_named_tool_not_called(wire, q, &["calculate", "word_count"]).await;
    }
}

/// The system prompt of `body`, in either format.
fn system_text(body: &Value) -> String {
    match body.get("system") {
        Some(system) => text_of(&json!({ "content": system })),
        None => body["messages"]
            .as_array()
            .and_then(|m| m.first())
            .filter(|m| m["role"] == "system")
            .map(text_of)
            .unwrap_or_default(),
    }
}

/// The eval's `denied-tool` question: it names `http_get`, which the
/// permission layer withholds.
const NAMES_A_WITHHELD_TOOL: &str =
    "Fetch http://127.0.0.1:9/status with the http_get tool and tell me the HTTP status code.";

/// `calculate` and `word_count` offered, `http_get` withheld.
fn with_http_get_withheld() -> Arc<FakeTools> {
    let mut tools = calculate_and_a_writer();
    tools.push(spec("http_get", true));
    let tools = FakeTools::new(tools, |_, _| Box::pin(async { ok(FOURTEEN) }));
    *tools.withheld.lock().unwrap() = vec!["http_get".to_owned()];
    tools
}

async fn run_on(wire: Wire, server: &Server, tools: Arc<FakeTools>, question: &str) -> WireRun {
    let provider = wire.provider(server, fast_policy(1));
    run_through(provider, server, options(), question, tools).await
}

/// The eval's `denied-tool` question, `http_get` withheld.
async fn asking_for_http_get(wire: Wire, server: &Server) -> WireRun {
    run_on(
        wire,
        server,
        with_http_get_withheld(),
        NAMES_A_WITHHELD_TOOL,
    )
    .await
}

/// The user asks for a tool the permission layer withholds. The model is
/// told it is not allowed here (and nothing else about the tools it does
/// not see); when the model calls another tool in its place and never
/// answers (Qwen2.5-Coder-0.5B called `calculate` with the URL), the
/// host's own answer says so.
#[tokio::test]
async fn a_tool_the_user_asks_for_that_is_withheld_is_named_as_not_allowed_here() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let url = r#"{"expression":"127.0.0.1:9/status"}"#;
        let server = Server::replies(vec![
            wire.response(&[], &[("call_1", "calculate", url)]),
            wire.response(&[], &[("call_2", "calculate", url)]),
            wire.response(&[], &[("call_3", "calculate", url)]),
            wire.response(&[""], &[]),
            wire.response(&[""], &[]),
        ])
        .await;
        let run = asking_for_http_get(wire, &server).await;
        let b = &run.bodies;
        assert!(!tool_names(wire, &b[0]).contains(&"http_get"), "{}", b[0]);
        let system = system_text(&b[0]);
        assert!(
            system.contains("asks for `http_get`, which this host does not allow here"),
            "{system}"
        );
        assert!(
            !system.contains("calculate"),
            "only the tool asked for: {system}"
        );
        let text = run.result.final_text();
        assert_ne!(run.result.answer_source, AnswerSource::Model, "{text}");
        assert!(
            text.ends_with(
                "The request asks for `http_get`, which this host does not allow here, so the \
                 model cannot use it."
            ),
            "{text}"
        );

        // Called anyway (the 1.5B through xml): refused as not allowed, not
        // as an unknown tool, and never run.
        let server = Server::replies(vec![
            wire.response(
                &[],
                &[("call_1", "http_get", r#"{"url":"http://127.0.0.1:9/"}"#)],
            ),
            wire.response(&["I cannot use http_get here."], &[]),
        ])
        .await;
        let run = asking_for_http_get(wire, &server).await;
        assert_outcome(&run, Status::Completed, "I cannot use http_get here.");
        assert_eq!(run.ran, 0);
        let refused = &run.result.history[0];
        assert_eq!(refused.error_kind, Some(ErrorKind::PermissionDenied));
        assert_eq!(
            refused.output,
            "`http_get` is not allowed here: this host withholds it. Tell the user you cannot use it."
        );

        // Asked for without its name, or not asked for: no note.
        for question in ["What is 2*(3+4)?", "Fetch http://127.0.0.1:9/status."] {
            let server = Server::replies(vec![wire.response(&["14"], &[])]).await;
            let run = run_on(wire, &server, with_http_get_withheld(), question).await;
            assert!(
                !system_text(&run.bodies[0]).contains("http_get"),
                "{question}"
            );
            assert_eq!(run.result.final_text(), "14");
        }
    }
}

/// The model reads the file, then reads it again instead of calling the
/// tool the user named (Qwen2.5-Coder-0.5B in the eval's `read-then-regex`):
/// the repeat is answered with its result and a request for the named
/// tool, and the next request requires it.
async fn a_repeat_before_the_named_tool(wire: Wire) {
    let read = r#"{"path":"emails.txt"}"#;
    let server = Server::replies(vec![
        wire.response(&[], &[("call_1", "read_file", read)]),
        wire.response(&[], &[("call_2", "read_file", read)]),
        wire.response(&[], &[("call_3", "regex_find", r#"{"pattern":"@"}"#)]),
        wire.response(&["There are 3."], &[]),
    ])
    .await;
    let tools = vec![
        spec("read_file", true),
        spec("regex_find", true),
        spec("calculate", true),
    ];
    let tools = FakeTools::new(tools, |_, _| Box::pin(async { ok(FOURTEEN) }));
    let question = "Read emails.txt, then use regex_find to find the e-mail addresses in it.";
    let run = run_on(wire, &server, tools, question).await;

    assert_outcome(&run, Status::Completed, "There are 3.");
    assert_eq!(run.ran, 2, "the repeat did not run; regex_find did");
    let b = &run.bodies;
    assert_eq!(b.len(), 4, "{b:#?}");
    assert_eq!(
        tool_choice(wire, &b[1]),
        tool_choice(wire, &b[0]),
        "{}",
        b[1]
    );
    assert_eq!(tool_choice(wire, &b[2]), Some(required(wire)), "{}", b[2]);
    assert_eq!(tool_names(wire, &b[2]), ["regex_find"], "{}", b[2]);
    assert_ne!(tool_choice(wire, &b[3]), Some(required(wire)), "{}", b[3]);
    let repeat = &run.result.history[1];
    assert!(
        repeat.output.ends_with(
            "it was not run again. The user asked for `regex_find`: call it next, with this \
             result.]"
        ),
        "{}",
        repeat.output
    );
}

#[tokio::test]
async fn a_repeated_call_before_the_tool_the_user_named_is_answered_by_requiring_that_tool_openai()
{
    a_repeat_before_the_named_tool(Wire::OpenAi).await;
}

#[tokio::test]
async fn a_repeated_call_before_the_tool_the_user_named_is_answered_by_requiring_that_tool_anthropic()
 {
    a_repeat_before_the_named_tool(Wire::Anthropic).await;
}

/// A repeat after every named tool was called is answered as before: use
/// the result.
#[tokio::test]
async fn a_repeated_call_after_the_named_tools_ran_is_answered_with_its_result() {
    let wire = Wire::OpenAi;
    let read = r#"{"path":"emails.txt"}"#;
    let server = Server::replies(vec![
        wire.response(&[], &[("call_1", "read_file", read)]),
        wire.response(&[], &[("call_2", "read_file", read)]),
        wire.response(&["It says 14."], &[]),
    ])
    .await;
    let tools = FakeTools::new(
        vec![spec("read_file", true), spec("calculate", true)],
        |_, _| Box::pin(async { ok(FOURTEEN) }),
    );
    let run = run_on(wire, &server, tools, "Read emails.txt with read_file.").await;
    assert_outcome(&run, Status::Completed, "It says 14.");
    assert!(
        run.bodies
            .iter()
            .all(|b| tool_choice(wire, b) != Some(required(wire)))
    );
    assert!(
        run.result.history[1]
            .output
            .ends_with("Use it to answer the user now.]")
    );
}

async fn asked_once(wire: Wire, question: &str, replies: &[&str]) -> WireRun {
    let server = Server::replies(replies.iter().map(|r| wire.response(&[*r], &[])).collect()).await;
    let provider = wire.provider(&server, fast_policy(1));
    run_asking(
        provider,
        &server,
        options(),
        question,
        calculate_and_a_writer(),
    )
    .await
}

#[tokio::test]
async fn a_named_tool_is_asked_for_once_never_after_a_negation_nor_when_it_changes_things() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        // Still no call when required: the run ends with that reply.
        let run = asked_once(wire, NAMES_CALCULATE, &["10", "It is 14."]).await;
        assert_outcome(&run, Status::Completed, "It is 14.");
        assert_eq!(run.bodies.len(), 2);
        assert_eq!(run.ran, 0);
        // Named after "without": not a request for the tool.
        let q = "Without the calculate tool: what is 2*(3+4)?";
        let run = asked_once(wire, q, &["14"]).await;
        assert_outcome(&run, Status::Completed, "14");
        assert_eq!(run.bodies.len(), 1, "asked once: {:#?}", run.bodies);
        // No tool named.
        let run = asked_once(wire, "What is 2*(3+4)?", &["14"]).await;
        assert_outcome(&run, Status::Completed, "14");
        assert_eq!(run.bodies.len(), 1);
        // Named, but it changes things: never forced.
        let run = asked_once(wire, "Use the write_note tool to note 14.", &["Noted."]).await;
        assert_outcome(&run, Status::Completed, "Noted.");
        assert_eq!(run.bodies.len(), 1);
    }
}

#[tokio::test]
async fn through_the_json_protocol_a_required_call_leaves_the_answer_out_of_the_schema() {
    let answer = r#"{"answer": "10"}"#;
    let call = r#"{"tool_calls": [{"name": "calculate", "arguments": {"expression": "14"}}]}"#;
    let server = Server::replies(vec![
        Wire::OpenAi.response(&[answer], &[]),
        Wire::OpenAi.response(&[call], &[]),
        Wire::OpenAi.response(&[r#"{"answer": "It is 14."}"#], &[]),
    ])
    .await;
    let inner = OpenAiCompatible::new(format!("{}/v1", server.url("")), "test-model")
        .with_api_key(Some("sk-test".into()))
        .with_retry(fast_policy(1));
    let provider: Arc<dyn Provider> = Arc::new(PromptTools::new(inner, PromptProfile::Json));
    let tools = calculate_and_a_writer();
    let run = run_asking(provider, &server, options(), NAMES_CALCULATE, tools).await;

    assert_outcome(&run, Status::Completed, "It is 14.");
    assert_eq!(run.ran, 1);
    let b = &run.bodies;
    assert_eq!(b.len(), 3, "{b:#?}");
    let schema = |body: &Value| body["response_format"]["json_schema"]["schema"].to_string();
    assert!(schema(&b[0]).contains(r#""answer""#), "{}", b[0]);
    assert!(!schema(&b[1]).contains(r#""answer""#), "{}", b[1]);
    assert!(!schema(&b[1]).contains("write_note"), "{}", b[1]);
    assert!(schema(&b[0]).contains("write_note"), "{}", b[0]);
    assert!(schema(&b[1]).contains("tool_calls"), "{}", b[1]);
    assert!(schema(&b[2]).contains(r#""answer""#), "{}", b[2]);
}
