//! Keeping long conversations inside the model's context window, against a
//! fake OpenAI-compatible server that counts tokens its own way and refuses
//! an oversized request as llama.cpp does.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolhost_agent::context::{ContextPolicy, REMOVED_MARK, SUMMARY_MARK, SUMMARY_PROMPT};
use toolhost_agent::provider::openai::OpenAiCompatible;
use toolhost_agent::{
    Agent, AgentEvent, AgentOptions, Message, Status, VarStore, next_turn_history,
};
use toolhost_test_support::fake_model::{Answer, FakeModel, context_limited, fake_tokens};

use crate::agent_support::{FakeTools, clock, ok, spec};

/// The numbers in `text`, in order.
fn numbers(text: &str) -> Vec<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect()
}

fn is_summary_request(body: &Value) -> bool {
    body["messages"][0]["content"].as_str() == Some(SUMMARY_PROMPT)
}

/// A model that looks up every record the user's last message names, one
/// call per round, then answers; and summarises when asked to
/// (`summaries = false`: it refuses).
fn scripted_model(summaries: bool) -> impl Fn(&Value) -> Answer + Send + Sync + 'static {
    move |body| {
        if is_summary_request(body) {
            return if summaries {
                Answer::Text("Earlier, the user had records looked up one by one.".into())
            } else {
                Answer::Status(400, r#"{"error":{"message":"no summaries today"}}"#.into())
            };
        }
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let Some(asked) = messages.iter().rposition(|m| m["role"] == "user") else {
            return Answer::Text("nothing asked".into());
        };
        let wanted = numbers(messages[asked]["content"].as_str().unwrap_or(""));
        let done = messages[asked..]
            .iter()
            .filter(|m| m["role"] == "tool")
            .count();
        match wanted.get(done) {
            Some(n) => Answer::Call(
                format!("call_{n}_{done}"),
                "lookup".into(),
                json!({ "record": n }).to_string(),
            ),
            None => Answer::Text(format!("Looked up {} record(s).", wanted.len())),
        }
    }
}

/// A lookup tool whose results are long (about 800 of the server's tokens).
fn lookup_tools() -> Arc<FakeTools> {
    FakeTools::new(vec![spec("lookup", true)], |_, args| {
        Box::pin(async move {
            ok(format!(
                "record {}: {}",
                args["record"],
                "lorem ipsum ".repeat(200)
            ))
        })
    })
}

struct Chat {
    agent: Agent,
    events: Arc<Mutex<Vec<AgentEvent>>>,
    vars: Arc<VarStore>,
}

impl Chat {
    /// Runs `n` turns as a chat does (each on the history the last one left,
    /// see `next_turn_history`); each must complete with the model's answer.
    /// Returns the history after the last.
    async fn turns(&self, n: u64) -> Vec<Message> {
        let mut history: Vec<Message> = Vec::new();
        for i in 0..n {
            let mut messages = history.clone();
            messages.push(Message::user(prompt(i)));
            let before = self.events.lock().unwrap().len();
            let result = self.agent.run(messages).await;
            let reported = self.events.lock().unwrap().len() - before;
            assert_eq!(
                result.stats.compactions as usize, reported,
                "turn {i}: the stats count each compaction"
            );
            assert_eq!(
                result.status,
                Status::Completed,
                "turn {i}: {:?}",
                result.error
            );
            assert!(
                result.text.starts_with("Looked up"),
                "turn {i}: {}",
                result.text
            );
            history = next_turn_history(&result);
        }
        history
    }
}

fn chat(server: &FakeModel, options: AgentOptions) -> Chat {
    let events = Arc::new(Mutex::new(Vec::new()));
    let vars = Arc::new(VarStore::new());
    let sink = events.clone();
    let provider = Arc::new(OpenAiCompatible::new(server.url("/v1"), "local-model"));
    let agent = Agent::new(provider, lookup_tools()).with_options(
        options
            .clock(clock())
            .vars(vars.clone())
            .on_event(move |e| {
                if matches!(e, AgentEvent::ContextCompacted { .. }) {
                    sink.lock().unwrap().push(e);
                }
            }),
    );
    Chat {
        agent,
        events,
        vars,
    }
}

/// The prompt of turn `i`: one record, or three every tenth turn.
fn prompt(i: u64) -> String {
    if i % 10 == 9 {
        format!("Compare records {i}, {} and {}.", i + 1000, i + 2000)
    } else {
        format!("Look up record {i}.")
    }
}

fn compactions(events: &[AgentEvent]) -> Vec<toolhost_agent::context::Compaction> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ContextCompacted { compaction, .. } => Some(compaction.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_200_turn_chat_fits_an_8k_context_by_pruning_and_summarising() {
    const N_CTX: u64 = 8192;
    let server = context_limited(N_CTX, scripted_model(true)).await;
    let chat = chat(
        &server,
        AgentOptions::new("local-model").context_window(8192),
    );
    let history = chat.turns(200).await;

    let bodies = server.bodies();
    let refused: Vec<u64> = bodies
        .iter()
        .map(fake_tokens)
        .filter(|&t| t > N_CTX)
        .collect();
    assert!(refused.is_empty(), "requests over the context: {refused:?}");
    // The system prompt and the turn's request are in every request.
    for body in bodies.iter().filter(|b| !is_summary_request(b)) {
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["role"], "system");
        let last_user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
        let text = last_user["content"].as_str().unwrap();
        assert!(
            text.starts_with("Look up") || text.starts_with("Compare"),
            "{text}"
        );
    }

    let done = compactions(&chat.events.lock().unwrap());
    let summarised: Vec<_> = done.iter().filter(|c| c.summarized_messages > 0).collect();
    let pruned: Vec<_> = done.iter().filter(|c| c.pruned_outputs > 0).collect();
    assert!(summarised.len() >= 3, "{done:#?}");
    assert!(summarised.iter().all(|c| c.summarized_by_model));
    assert!(
        !pruned.is_empty(),
        "the three-record turns prune: {done:#?}"
    );
    for c in &done {
        assert!(c.tokens_after < c.tokens_before, "{c:?}");
        assert_eq!(c.window, 8192);
    }
    // A pruned output stays readable through its variable.
    let last = pruned.last().unwrap();
    let var = last.pruned_vars.last().unwrap();
    assert!(
        chat.vars.get(var).is_some_and(|v| v.starts_with("record ")),
        "{var}"
    );
    // The chat's history carries the summary forward rather than growing.
    assert!(
        history[0].content.starts_with(SUMMARY_MARK),
        "{:?}",
        history[0]
    );
    assert!(history.len() < 100, "{}", history.len());
    assert!(
        chat.agent.options().context.counter.ratio() > 1.1,
        "calibrated towards the server's count (3 characters a token)"
    );
}

#[tokio::test]
async fn a_request_refused_as_too_long_is_compacted_and_sent_again_and_the_window_learned() {
    const N_CTX: u64 = 3000;
    let server = context_limited(N_CTX, scripted_model(true)).await;
    // No window configured, and the model is not a known one.
    let chat = chat(&server, AgentOptions::new("local-model"));
    chat.turns(40).await;
    let refused = server
        .bodies()
        .iter()
        .filter(|b| fake_tokens(b) > N_CTX)
        .count();
    assert_eq!(refused, 1, "refused once; then the learned window is used");
    let policy = &chat.agent.options().context;
    assert_eq!(policy.window_for("local-model"), Some(3000));
    assert!(compactions(&chat.events.lock().unwrap()).len() >= 2);
}

#[tokio::test]
async fn turns_the_model_cannot_summarise_are_removed_with_a_note_and_the_chat_goes_on() {
    let server = context_limited(8192, scripted_model(false)).await;
    let chat = chat(
        &server,
        AgentOptions::new("local-model").context(ContextPolicy::default().window(4096)),
    );
    let history = chat.turns(40).await;
    let done = compactions(&chat.events.lock().unwrap());
    let removed: Vec<_> = done.iter().filter(|c| c.summarized_messages > 0).collect();
    assert!(!removed.is_empty(), "{done:#?}");
    assert!(removed.iter().all(|c| !c.summarized_by_model));
    assert!(
        history[0].content.starts_with(REMOVED_MARK),
        "{:?}",
        history[0]
    );
}
