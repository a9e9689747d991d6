//! Test doubles for the agent loop: a scripted provider and a fake tool executor.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolhost_agent::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, FixedClock, Message,
    Provider, ProviderError, ToolCall, ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec, Usage,
};

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
    }
}

impl ToolExecutor for FakeTools {
    fn tools(&self) -> Vec<ToolSpec> {
        let n = self.tools_calls.fetch_add(1, Ordering::SeqCst);
        (self.tools)(n)
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
