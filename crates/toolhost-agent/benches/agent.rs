//! The agent loop's own overhead per round, next to the cost of serializing
//! the request it sends.
//!
//! - `loop_round/N`: `Agent::run` over a history of N messages with a provider
//!   that answers at once and tools that cost nothing: everything measured is
//!   the loop's own work for one round (system prompt, tool list, request
//!   assembly, events, result).
//! - `loop_round_windowed/N`: the same with a context window configured
//!   (far from full): adds the size estimate made before every request.
//! - `serialize_request/N`: building and serializing the OpenAI wire body of
//!   the same request, which every real round pays on top.
//!
//! Run with `cargo bench -p toolhost-agent --bench agent`.

use std::sync::Arc;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolhost_agent::provider::openai::OpenAiCompatible;
use toolhost_agent::{
    Agent, AgentOptions, BoxFuture, Completion, CompletionRequest, DeltaSink, FinishReason,
    Message, Provider, ProviderError, ToolCallInfo, ToolChoice, ToolDefinition, ToolExecutor,
    ToolOutcome, ToolSpec, Usage,
};

/// Answers every request at once with a short final answer.
struct Instant;

impl Provider for Instant {
    fn name(&self) -> &str {
        "instant"
    }
    fn complete<'a>(
        &'a self,
        _request: &'a CompletionRequest,
        _on_delta: DeltaSink<'a>,
        _cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async {
            Ok(Completion {
                message: Message::assistant("done"),
                finish_reason: FinishReason::Stop,
                usage: Usage::default(),
            })
        })
    }
}

/// Six tools with realistic schemas that are never called.
struct Tools(Vec<ToolSpec>);

impl ToolExecutor for Tools {
    fn tools(&self) -> Vec<ToolSpec> {
        self.0.clone()
    }
    fn call<'a>(&'a self, _: &'a str, _: Value, _: ToolCallInfo) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async {
            ToolOutcome {
                output: String::new(),
                details: None,
                content: Vec::new(),
                is_error: false,
                error_kind: None,
                steps: Vec::new(),
                cached: false,
            }
        })
    }
}

fn tools() -> Vec<ToolSpec> {
    ["calculate", "word_count", "regex_find", "read_file", "list_dir", "http_get"]
        .iter()
        .map(|n| ToolSpec {
            name: (*n).to_owned(),
            description: format!("The {n} tool: a description of a few sentences, as plugins write them for the model."),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "A path, absolute or relative to the granted directory."},
                    "limit": {"type": ["integer", "null"], "minimum": 1, "description": "How many lines."}
                },
                "required": ["path"]
            })
            .into(),
            read_only: true,
        })
        .collect()
}

/// A conversation of `n` messages of typical sizes.
fn history(n: usize) -> Vec<Message> {
    (0..n)
        .map(|i| match i % 2 {
            0 => Message::user(format!(
                "Question {i}: {}",
                "please look at this file and tell me what it does. ".repeat(4)
            )),
            _ => Message::assistant(format!(
                "Answer {i}: {}",
                "it reads the configuration and starts the server. ".repeat(8)
            )),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let agent = Agent::new(Arc::new(Instant), Arc::new(Tools(tools())))
        .with_options(AgentOptions::new("bench-model"));
    // The same with a context window, far from full: the estimate before
    // every request runs, nothing is compacted.
    let windowed = Agent::new(Arc::new(Instant), Arc::new(Tools(tools())))
        .with_options(AgentOptions::new("bench-model").context_window(1_000_000));
    let openai = OpenAiCompatible::new("http://127.0.0.1:1/v1", "bench-model");
    let mut g = c.benchmark_group("agent");
    for n in [10usize, 200] {
        let messages = history(n);
        // The caller's messages are handed to `run` by value: cloning them is
        // the caller's setup, not the loop's work, and is left out.
        g.bench_with_input(BenchmarkId::new("loop_round", n), &messages, |b, m| {
            b.iter_batched(
                || m.clone(),
                |m| {
                    let r = rt.block_on(agent.run(m));
                    assert_eq!(r.text, "done");
                    r
                },
                BatchSize::SmallInput,
            );
        });
        g.bench_with_input(
            BenchmarkId::new("loop_round_windowed", n),
            &messages,
            |b, m| {
                b.iter_batched(
                    || m.clone(),
                    |m| rt.block_on(windowed.run(m)),
                    BatchSize::SmallInput,
                );
            },
        );
        let request = CompletionRequest {
            model: "bench-model".into(),
            system: Some(agent.system_prompt(&messages)),
            messages: messages.clone(),
            tools: tools()
                .into_iter()
                .map(|t| ToolDefinition {
                    name: t.name,
                    description: t.description,
                    parameters: t.input_schema,
                })
                .collect(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: true,
            max_tokens: None,
            temperature: None,
            response_schema: None,
            grammar: None,
            ..Default::default()
        };
        g.bench_with_input(
            BenchmarkId::new("serialize_request", n),
            &request,
            |b, r| b.iter(|| serde_json::to_vec(&openai.request_body(r)).map(|v| v.len())),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
