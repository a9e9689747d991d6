//! Test doubles for the agent loop: a scripted provider, a fake tool executor,
//! and the two wire formats a real provider speaks to the fake model server.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolhost_agent::provider::select::{ProviderConfig, ProviderKind, TimeoutsConfig};
use toolhost_agent::provider::{
    anthropic::Anthropic, openai::OpenAiCompatible, transport::RetryPolicy,
};
use toolhost_agent::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, FixedClock, Message,
    Provider, ProviderError, Role, ToolCall, ToolCallInfo, ToolChainResult, ToolExecutor,
    ToolOutcome, ToolSpec, Usage,
};
use toolhost_test_support::fake_model::{End, FakeModel as Server, Reply};

/// 2026-03-14 15:09:26 UTC.
pub const NOW_SECS: u64 = 1_773_500_966;

pub fn clock() -> FixedClock {
    FixedClock(UNIX_EPOCH + Duration::from_secs(NOW_SECS))
}

/// One scripted answer.
pub enum Step {
    /// Stream these deltas, then return the completion.
    Reply {
        deltas: Vec<Delta>,
        completion: Completion,
    },
    /// Stream these deltas, then wait forever (ignoring cancellation, to check
    /// that the loop does not depend on the provider honouring it).
    Hang { deltas: Vec<Delta> },
    /// Stream these deltas, then wait until cancelled and return `Cancelled`.
    UntilCancelled { deltas: Vec<Delta> },
    /// Fail.
    Fail(ProviderError),
}

/// Returns queued steps and records every request.
#[derive(Default)]
pub struct ScriptedProvider {
    steps: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<CompletionRequest>>,
}

impl ScriptedProvider {
    pub fn new(steps: Vec<Step>) -> Arc<Self> {
        Arc::new(ScriptedProvider {
            steps: Mutex::new(steps.into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    pub fn requests(&self) -> Vec<CompletionRequest> {
        self.requests.lock().unwrap().clone()
    }

    pub fn remaining(&self) -> usize {
        self.steps.lock().unwrap().len()
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        on_delta: DeltaSink<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        self.requests.lock().unwrap().push(request.clone());
        let step = self.steps.lock().unwrap().pop_front();
        Box::pin(async move {
            match step {
                None => Err(ProviderError::InvalidResponse {
                    provider: "scripted".into(),
                    message: "script exhausted".into(),
                    partial_text: String::new(),
                }),
                Some(Step::Reply { deltas, completion }) => {
                    for d in deltas {
                        on_delta(d);
                        tokio::task::yield_now().await;
                    }
                    Ok(completion)
                }
                Some(Step::Hang { deltas }) => {
                    for d in deltas {
                        on_delta(d);
                    }
                    std::future::pending().await
                }
                Some(Step::UntilCancelled { deltas }) => {
                    for d in deltas {
                        on_delta(d);
                    }
                    cancel.cancelled().await;
                    Err(ProviderError::Cancelled)
                }
                Some(Step::Fail(e)) => Err(e),
            }
        })
    }
}

pub fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

/// A plain text answer (usage 10 in / 5 out).
pub fn text(s: &str) -> Step {
    Step::Reply {
        deltas: vec![Delta::Text(s.to_owned())],
        completion: Completion {
            message: Message::assistant(s),
            finish_reason: FinishReason::Stop,
            usage: usage(10, 5),
        },
    }
}

/// A response with tool calls `(id, name, arguments)` (usage 10 in / 5 out).
pub fn calls(list: &[(&str, &str, &str)]) -> Step {
    let mut message = Message::assistant("");
    message.tool_calls = list
        .iter()
        .map(|(id, name, args)| ToolCall {
            id: (*id).to_owned(),
            name: (*name).to_owned(),
            arguments: (*args).to_owned(),
        })
        .collect();
    Step::Reply {
        deltas: list
            .iter()
            .map(|(id, name, _)| Delta::ToolCallStarted {
                id: (*id).to_owned(),
                name: (*name).to_owned(),
            })
            .collect(),
        completion: Completion {
            message,
            finish_reason: FinishReason::ToolCalls,
            usage: usage(10, 5),
        },
    }
}

pub fn call(id: &str, name: &str, args: &str) -> Step {
    calls(&[(id, name, args)])
}

pub fn spec(name: &str, read_only: bool) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("the {name} tool"),
        input_schema: serde_json::json!({"type": "object"}).into(),
        read_only,
    }
}

type Handler = Arc<dyn Fn(String, Value) -> BoxFuture<'static, ToolOutcome> + Send + Sync>;
type ToolsFn = Box<dyn Fn(usize) -> Vec<ToolSpec> + Send + Sync>;

/// A tool executor whose tools and behaviour the test decides.
pub struct FakeTools {
    tools: ToolsFn,
    handler: Handler,
    pub tools_calls: AtomicUsize,
    pub calls: Mutex<Vec<(String, Value)>>,
    /// Names listed by `tools()` but withheld from the model, as a
    /// permission layer does.
    pub withheld: Mutex<Vec<String>>,
}

impl FakeTools {
    /// Fixed tools; `handler` runs every call.
    pub fn new(
        tools: Vec<ToolSpec>,
        handler: impl Fn(String, Value) -> BoxFuture<'static, ToolOutcome> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Self::dynamic(move |_| tools.clone(), handler)
    }

    /// Tools computed from how many times `tools()` was called before (0, 1, ...).
    pub fn dynamic(
        tools: impl Fn(usize) -> Vec<ToolSpec> + Send + Sync + 'static,
        handler: impl Fn(String, Value) -> BoxFuture<'static, ToolOutcome> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(FakeTools {
            tools: Box::new(tools),
            handler: Arc::new(handler),
            tools_calls: AtomicUsize::new(0),
            calls: Mutex::new(Vec::new()),
            withheld: Mutex::new(Vec::new()),
        })
    }

    /// Tools that answer `<name>: <args as JSON>`.
    pub fn echo(tools: Vec<ToolSpec>) -> Arc<Self> {
        Self::new(tools, |name, args| {
            Box::pin(async move { ok(format!("{name}: {args}")) })
        })
    }

    pub fn recorded(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }
}

pub fn ok(output: impl Into<String>) -> ToolOutcome {
    ToolOutcome {
        output: output.into(),
        details: None,
        is_error: false,
        error_kind: None,
        steps: Vec::new(),
        cached: false,
        content: Vec::new(),
    }
}

impl ToolExecutor for FakeTools {
    fn tools(&self) -> Vec<ToolSpec> {
        let n = self.tools_calls.fetch_add(1, Ordering::SeqCst);
        (self.tools)(n)
    }

    fn tools_for(&self, _info: &ToolCallInfo) -> Vec<ToolSpec> {
        let withheld = self.withheld.lock().unwrap().clone();
        let mut tools = self.tools();
        tools.retain(|t| !withheld.contains(&t.name));
        tools
    }

    fn withheld_tools(&self, _info: &ToolCallInfo) -> Vec<String> {
        self.withheld.lock().unwrap().clone()
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        _info: ToolCallInfo,
    ) -> BoxFuture<'a, ToolOutcome> {
        self.calls
            .lock()
            .unwrap()
            .push((name.to_owned(), args.clone()));
        (self.handler)(name.to_owned(), args)
    }
}

// ---------------------------------------------------------------- wire formats

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

pub fn anthropic_frame(event: &Value) -> String {
    format!(
        "event: {}\ndata: {event}\n\n",
        event["type"].as_str().unwrap()
    )
}

impl Wire {
    /// The provider, with explicit retries and timeouts.
    pub fn provider(self, server: &Server, policy: RetryPolicy) -> Arc<dyn Provider> {
        match self {
            Wire::OpenAi => Arc::new(
                OpenAiCompatible::new(format!("{}/v1", server.url("")), "test-model")
                    .with_api_key(Some("sk-test".into()))
                    .with_retry(policy),
            ),
            Wire::Anthropic => Arc::new(
                Anthropic::new("ak-test", "claude-test")
                    .with_base_url(server.url(""))
                    .with_retry(policy),
            ),
        }
    }

    /// The provider as a config file would describe it (timeouts in seconds).
    pub fn configured(
        self,
        base_url: &str,
        timeouts: TimeoutsConfig,
        attempts: u32,
    ) -> Arc<dyn Provider> {
        let (kind, url) = match self {
            Wire::OpenAi => (ProviderKind::Openai, format!("{base_url}/v1")),
            Wire::Anthropic => (ProviderKind::Anthropic, base_url.to_owned()),
        };
        let mut config = ProviderConfig::new(kind);
        config.model = Some("test-model".into());
        config.base_url = Some(url);
        config.timeouts = timeouts;
        config.max_attempts = Some(attempts);
        let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "ak-test".to_owned());
        Arc::from(config.build_with(&env).expect("a valid config").provider)
    }

    /// A complete response asking for `echo` with `{"x":1}` (call id `call_1`).
    pub fn tool_call(self) -> Vec<String> {
        match self {
            Wire::OpenAi => vec![
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "echo", "arguments": "{\"x\":"}}]}, "finish_reason": null}]})
                ),
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}, "finish_reason": null}]})
                ),
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
                ),
                "data: [DONE]\n\n".to_owned(),
            ],
            Wire::Anthropic => [
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                    "usage": {"input_tokens": 10, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "call_1", "name": "echo", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"x\":"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ]
            .iter()
            .map(anthropic_frame)
            .collect(),
        }
    }

    /// The start of a text answer, up to (not including) its first delta.
    pub fn text_start(self) -> Vec<String> {
        match self {
            Wire::OpenAi => vec![format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
            )],
            Wire::Anthropic => [
                json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "content": [],
                    "usage": {"input_tokens": 20, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ]
            .iter()
            .map(anthropic_frame)
            .collect(),
        }
    }

    /// One text delta.
    pub fn text_delta(self, text: &str) -> String {
        match self {
            Wire::OpenAi => format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
            ),
            Wire::Anthropic => anthropic_frame(
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            ),
        }
    }

    /// A text answer that starts with `texts` and is never finished.
    pub fn unfinished_text(self, texts: &[&str]) -> Vec<String> {
        let mut frames = self.text_start();
        frames.extend(texts.iter().map(|t| self.text_delta(t)));
        frames
    }

    /// A frame whose JSON breaks off (a chunk that is not valid JSON).
    pub fn broken_frame(self) -> String {
        match self {
            Wire::OpenAi => "data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"oo\n\n".to_owned(),
            Wire::Anthropic => "event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_delta\", \"text\": \"oo\n\n".to_owned(),
        }
    }

    /// What ends a well-formed answer.
    pub fn finish(self) -> Vec<String> {
        match self {
            Wire::OpenAi => vec![
                format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                ),
                "data: [DONE]\n\n".to_owned(),
            ],
            Wire::Anthropic => [
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ]
            .iter()
            .map(anthropic_frame)
            .collect(),
        }
    }

    /// A whole streamed response, ending normally: the text `pieces` (one
    /// delta each; an empty text when there are neither pieces nor calls),
    /// then the `calls` `(id, name, JSON arguments)`, each call's arguments
    /// in two deltas.
    pub fn response(self, pieces: &[&str], calls: &[(&str, &str, &str)]) -> Reply {
        let halves = |args: &str| {
            let mut at = args.len() / 2;
            while !args.is_char_boundary(at) {
                at -= 1;
            }
            (args[..at].to_owned(), args[at..].to_owned())
        };
        let mut frames = Vec::new();
        match self {
            Wire::OpenAi => {
                frames.extend(self.unfinished_text(pieces));
                for (i, (id, name, args)) in calls.iter().enumerate() {
                    let (head, tail) = halves(args);
                    for delta in [
                        json!({"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": head}}),
                        json!({"index": i, "function": {"arguments": tail}}),
                    ] {
                        frames.push(format!(
                            "data: {}\n\n",
                            json!({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}, "finish_reason": null}]})
                        ));
                    }
                }
                let finish = if calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                frames.push(format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                ));
                frames.push("data: [DONE]\n\n".to_owned());
            }
            Wire::Anthropic => {
                let mut events = vec![
                    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
                        "usage": {"input_tokens": 10, "output_tokens": 1}}}),
                ];
                let mut index = 0;
                if !pieces.is_empty() || calls.is_empty() {
                    events.push(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}));
                    events.extend(pieces.iter().map(|t| {
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
                    }));
                    events.push(json!({"type": "content_block_stop", "index": 0}));
                    index = 1;
                }
                for (id, name, args) in calls {
                    let (head, tail) = halves(args);
                    events.push(json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
                    for part in [head, tail] {
                        events.push(json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}));
                    }
                    events.push(json!({"type": "content_block_stop", "index": index}));
                    index += 1;
                }
                let stop = if calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                };
                events.push(json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}}));
                events.push(json!({"type": "message_stop"}));
                frames.extend(events.iter().map(anthropic_frame));
            }
        }
        Reply::sse(frames)
    }
}

// ---------------------------------------------------------------- run helpers

/// Every test runs within this bound: a hang fails the test instead of the suite.
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(15), fut)
        .await
        .expect("the run hung")
}

/// Fast retries, long timeouts (each test shortens what it exercises).
pub fn fast_policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(100),
        jitter: false,
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        ..RetryPolicy::default()
    }
}

/// The messages can be sent to a model again: no call without its result.
pub fn assert_every_call_has_a_result(result: &ToolChainResult) {
    for call in result.messages.iter().flat_map(|m| &m.tool_calls) {
        assert!(
            result
                .messages
                .iter()
                .any(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(&call.id)),
            "call {} has no result: {:#?}",
            call.id,
            result.messages
        );
    }
}

/// A whole streamed OpenAI answer of `pieces`.
pub fn openai_answer(pieces: &[&str]) -> Reply {
    let mut frames = Wire::OpenAi.unfinished_text(pieces);
    frames.extend(Wire::OpenAi.finish());
    Reply::Stream {
        frames,
        gap: Duration::ZERO,
        end: End::Close,
    }
}
