//! The model exchange of one round (state `Request`): the request built
//! from the history and the tools offered, prepared (the options, transforms
//! and hooks of [`request`](crate::request)), sent and streamed (text,
//! reasoning, calls as they come), sent again when the server could not parse
//! the model's own output, and, when the server refuses it as too long for
//! the context, the history compacted and the request sent once more.

use std::sync::Mutex;

use tracing::{Instrument, debug, info, warn};

use super::ctx::Ctx;
use super::options::AgentOptions;
use super::state::{RoundInfo, RunState, State, Stop};
use super::trace;
use crate::events::AgentEvent;
use crate::provider::{
    Completion, CompletionRequest, Delta, ProviderError, ToolChoice, ToolDefinition,
    options::ModelOptions,
};
use crate::request::{RequestEdit, RequestHookError};
use crate::status::Status;
use crate::tools::ToolSpec;
use crate::{Message, Role};

/// How many times a request is sent again when the server could not parse
/// the model's own output ([`is_model_output_error`]).
const MODEL_OUTPUT_RETRIES: u32 = 2;

/// How many times `model_output_retry_time` the json prompt protocol's
/// attempt at an unparsable round may take before it is cut.
const PROMPT_ATTEMPT_FACTOR: u32 = 4;

/// Whether `e` says the server could not parse what the model itself wrote
/// (llama.cpp's "the model produced output that does not match the expected
/// … format", in the stream or as a 5xx), rather than a fault of the
/// request or the network: the next attempt samples anew.
fn is_model_output_error(e: &ProviderError) -> bool {
    let text = match e {
        ProviderError::Status { status, body, .. } if *status >= 500 => body,
        ProviderError::InvalidResponse { message, .. } => message,
        _ => return false,
    };
    let text = text.to_ascii_lowercase();
    [
        "does not match the expected",
        "model produced output",
        "failed to parse tool call",
        "failed to parse the model",
        "error parsing tool call",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// Whether `e` is a server refusing a request longer than the model's
/// context (llama.cpp's `exceed_context_size_error`, OpenAI's
/// `context_length_exceeded`, Anthropic's "prompt is too long").
fn is_context_overflow(e: &ProviderError) -> bool {
    let ProviderError::Status { status, body, .. } = e else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    matches!(*status, 400 | 413)
        && (body.contains("context_length_exceeded")
            || body.contains("exceed_context_size")
            || body.contains("prompt is too long")
            || (body.contains("context") && (body.contains("exceed") || body.contains("too long"))))
}

impl Ctx<'_> {
    /// State `Request`: ask the model with tools.
    pub(super) async fn request(&self, run: &mut RunState, round: u32) -> State {
        let mut offer = self.current_tools(run);
        // The user named tools the model has not called (after a first
        // reply without calls, or a repeated call): this request must call
        // one of them, each one that changes nothing (`named_tool.rs`).
        let required = !run.named_tools.is_empty()
            && offer
                .offered
                .iter()
                .any(|t| run.named_tools.contains(&t.name));
        if required {
            let named =
                |t: &crate::tools::ToolSpec| t.read_only && run.named_tools.contains(&t.name);
            offer.offered.retain(named);
            offer.callable.retain(named);
        }
        let tools = &offer.offered;
        let choice = if required {
            ToolChoice::Required
        } else {
            ToolChoice::Auto
        };
        let completion = match self.complete(run, round, tools, choice, None).await {
            Ok(c) => c,
            // Refused as too long: compact the history (once) and ask again.
            Err(_)
                if run.overflowed
                    && !run.compacted_after_overflow
                    && self
                        .fit_context(
                            run,
                            round,
                            crate::context::request_chars(&self.system, tools, []),
                            true,
                        )
                        .await =>
            {
                run.compacted_after_overflow = true;
                run.overflowed = false;
                return State::Request { round };
            }
            // Too long for the model, or still unparsable after the retries
            // and the json prompt protocol: the answer comes from the
            // history as text, results cut short (`final_answer`).
            Err(stop) if (run.overflowed || run.unparsable) && !run.history.is_empty() => {
                return State::FinalAnswer {
                    round: round + 1,
                    status: stop.status,
                    error: stop.error,
                };
            }
            Err(stop) => return stop.into_state(),
        };
        run.named_tools.clear();
        let Completion {
            mut message,
            finish_reason,
            usage,
        } = completion;
        // The user's question, for telling words from protocol text in a
        // reply without calls, and what that says of the reply (both read
        // once per round).
        let question = super::answer::question(&run.messages);
        let verdict = if message.tool_calls.is_empty() {
            super::answer::not_words(&message.content, &self.system, question)
        } else {
            None
        };
        if message.tool_calls.is_empty() {
            // A call the server did not see, written as text: taken as the
            // call it is (`answer.rs`).
            let known = |name: &str| tools.iter().chain(&offer.callable).any(|t| t.name == name);
            if let Some((rest, found)) =
                super::answer::calls_written_as_text(&message.content, verdict, known)
            {
                info!(
                    round,
                    calls = found.len(),
                    "the reply is a call written as text; taking it as the call"
                );
                self.set_aside(round, crate::events::SetAside::CallAsText);
                message.content = rest;
                message.tool_calls = found;
            }
        }
        let info = RoundInfo {
            usage,
            finish_reason,
        };
        // No call in the run's first reply, although the user asked for a
        // tool by name: asked once more, a call required (`named_tool.rs`).
        if message.tool_calls.is_empty()
            && run.history.is_empty()
            && run.named_asks == 0
            && round < self.opts.max_rounds
            && let named = super::named_tool::named_tools(question, tools)
            && !named.is_empty()
        {
            info!(
                round,
                tools = ?named,
                "the user named a tool the reply did not call; asking again with a call required"
            );
            run.named_tools = named.into_iter().map(str::to_owned).collect();
            run.named_asks = run.named_asks.saturating_add(1);
            self.set_aside(round, crate::events::SetAside::NamedToolNotCalled);
            self.end_round(round, info, 0);
            return State::Request { round: round + 1 };
        }
        let calls = message.tool_calls.clone();
        run.text.clone_from(&message.content);
        run.messages.push(Message {
            role: Role::Assistant,
            ..message
        });
        if calls.is_empty() {
            self.end_round(round, info, 0);
            // An empty reply after tool results (small models do this): ask
            // for the answer instead of ending with nothing.
            if run.text.trim().is_empty() && !run.history.is_empty() {
                info!(
                    round,
                    "empty reply after tool results; asking for a final answer"
                );
                return State::FinalAnswer {
                    round: round + 1,
                    status: Status::Completed,
                    error: None,
                };
            }
            // A call written as text, or a copy of the host's text, is no
            // answer: ask once more without tools (`answer.rs`).
            // `verdict` is of this reply's text (a reply whose calls were
            // taken from its text has calls and does not come here).
            if let Some(why) = verdict.filter(|w| *w != crate::events::SetAside::Empty) {
                info!(
                    round,
                    reply = why.describe(),
                    "the reply is not an answer in words; asking for a final answer"
                );
                self.set_aside(round, why);
                return State::FinalAnswer {
                    round: round + 1,
                    status: Status::Completed,
                    error: None,
                };
            }
            return State::done(Status::Completed, None);
        }
        State::Execute {
            round,
            calls,
            tools: offer.callable,
            builtin: offer.builtin,
            search: offer.search,
            completion: info,
        }
    }

    /// Sends one request and streams it; `extra` messages go to this request only.
    pub(super) async fn complete(
        &self,
        run: &mut RunState,
        round: u32,
        tools: &[ToolSpec],
        choice: ToolChoice,
        extra: Option<Message>,
    ) -> Result<Completion, Stop> {
        if let Some(stop) = self.stop_now() {
            return Err(stop);
        }
        if let Some(hook) = &self.opts.before_request {
            hook(&mut run.messages);
        }
        // With no window known there is nothing to estimate for (a refusal
        // as too long is handled in `request`).
        let managed = self.opts.context.window_for(&self.opts.model).is_some();
        let fixed_chars = if managed {
            let chars = crate::context::request_chars(&self.system, tools, []);
            self.fit_context(run, round, chars, false).await;
            chars
        } else {
            0
        };
        // The request takes the history and gives it back after the call, so a
        // round does not copy it. (System messages, merged into the system
        // prompt, are left out; only then is the history copied.)
        let lent = !run.messages.iter().any(|m| m.role == Role::System);
        let mut messages: Vec<Message> = if lent {
            std::mem::take(&mut run.messages)
        } else {
            run.messages
                .iter()
                .filter(|m| m.role != Role::System)
                .cloned()
                .collect()
        };
        let extras = usize::from(extra.is_some());
        let extra_sent = extra.clone();
        messages.extend(extra);
        let mut request = CompletionRequest {
            model: self.opts.model.clone(),
            system: Some(self.system.clone()),
            messages,
            tools: tools
                .iter()
                .map(|t| ToolDefinition {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.input_schema.clone(),
                })
                .collect(),
            tool_choice: if tools.is_empty() {
                ToolChoice::None
            } else {
                choice
            },
            parallel_tool_calls: self.opts.parallel_tool_calls
                && !tools.is_empty()
                && choice != ToolChoice::None,
            max_tokens: self.opts.max_tokens,
            temperature: self.opts.temperature,
            response_schema: None,
            grammar: None,
            ..Default::default()
        };
        prepare(self.opts, &mut request).await;
        self.emit(AgentEvent::RequestStart {
            round,
            messages: request.messages.len(),
            tools: request.tools.len(),
        });
        debug!(
            round,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "request"
        );
        run.rounds += 1;

        let partial = Mutex::new(String::new());
        // `<think>…</think>` in the text is reasoning, not answer.
        let think = Mutex::new(crate::think::ThinkFilter::default());
        let pieces = |pieces: Vec<crate::think::Piece>| {
            for piece in pieces {
                match piece {
                    crate::think::Piece::Text(text) => {
                        if let Ok(mut p) = partial.lock() {
                            p.push_str(&text);
                        }
                        self.emit(AgentEvent::TextDelta { round, text });
                    }
                    crate::think::Piece::Reasoning(text) => {
                        self.emit(AgentEvent::ReasoningDelta { round, text });
                    }
                }
            }
        };
        let on_delta = |delta: Delta| match delta {
            Delta::Text(text) => {
                let split = think.lock().map(|mut f| f.push(&text)).unwrap_or_default();
                pieces(split);
            }
            Delta::Reasoning(text) => self.emit(AgentEvent::ReasoningDelta { round, text }),
            Delta::ToolCallStarted { id, name } => self.emit(AgentEvent::ToolCallStreamed {
                round,
                call_id: id,
                name,
            }),
        };
        // A server that could not parse the model's own output (sampling
        // differs on the next attempt) is asked again, a bounded number of
        // times within a bounded time.
        let mut attempts = 1;
        let began = std::time::Instant::now();
        let result = loop {
            let span = trace::chat_span(&request.model, self.provider.name());
            let r = tokio::select! {
                biased;
                stop = self.interrupted() => Err(stop),
                r = self
                    .provider
                    .complete(&request, &on_delta, &self.opts.abort)
                    .instrument(span.clone()) => Ok(r),
            };
            if let Ok(r) = &r {
                trace::record_chat(&span, r);
            }
            match &r {
                Ok(Err(e))
                    if attempts <= MODEL_OUTPUT_RETRIES
                        && began.elapsed() < self.opts.model_output_retry_time
                        && is_model_output_error(e) =>
                {
                    warn!(round, attempts, error = %e, "the server could not parse the model's output; asking again");
                    attempts += 1;
                    if let Ok(mut p) = partial.lock() {
                        p.clear();
                    }
                }
                _ => break r,
            }
        };
        // Still unparsable: this round goes once through a prompt protocol
        // (tools in the system prompt, calls parsed from the text), which
        // leaves the server nothing of the model's to parse.
        let native = self.provider.prompt_profile().is_none();
        let mut through_prompt = false;
        let result = match result {
            Ok(Err(e)) if native && !request.tools.is_empty() && is_model_output_error(&e) => {
                warn!(round, error = %e, "the server could not parse the model's output; this round goes through the json prompt protocol");
                through_prompt = true;
                if let Ok(mut p) = partial.lock() {
                    p.clear();
                }
                // Bounded: a model that fills its reply here too (it wrote
                // dozens of calls natively) would otherwise hold the round
                // to the run's time limit. Longer than the retries' bound:
                // this request's prompt is new to the server's cache, and a
                // 1.5B model on 2 CPU threads reads a few thousand tokens
                // of it in about half a minute.
                let bound = self
                    .opts
                    .model_output_retry_time
                    .saturating_mul(PROMPT_ATTEMPT_FACTOR);
                tokio::select! {
                    biased;
                    stop = self.interrupted() => Err(stop),
                    r = crate::provider::prompt::complete_through_prompt(
                        self.provider,
                        crate::provider::prompt::PromptProfile::Json,
                        &request,
                        &on_delta,
                        &self.opts.abort,
                    ) => Ok(r),
                    () = tokio::time::sleep(bound) => {
                        warn!(round, ?bound, "the json prompt protocol gave no reply in time");
                        run.unparsable = true;
                        Err(Stop {
                            status: Status::Error,
                            error: Some(format!(
                                "the server could not parse the model's own output ({attempts} \
                                 attempts), and the json prompt protocol gave no reply within {bound:?}"
                            )),
                        })
                    }
                }
            }
            other => other,
        };
        if lent {
            let mut history = std::mem::take(&mut request.messages);
            history.truncate(history.len() - extras);
            run.messages = history;
        }
        let keep_partial = |run: &mut RunState| {
            let text = partial.lock().map(|p| p.clone()).unwrap_or_default();
            if !text.is_empty() {
                run.text.clone_from(&text);
                run.messages.push(Message::assistant(text));
            }
        };
        pieces(think.lock().map(|mut f| f.finish()).unwrap_or_default());
        match result {
            Ok(Ok(mut completion)) => {
                run.usage += completion.usage;
                let sent = if managed {
                    run.messages
                        .iter()
                        .chain(extra_sent.iter())
                        .fold(fixed_chars, |sum, m| {
                            sum.saturating_add(crate::context::message_chars(m))
                        })
                } else {
                    0
                };
                self.opts
                    .context
                    .counter
                    .observe(sent, completion.usage.input_tokens);
                let (answer, _reasoning) = crate::think::split_think(&completion.message.content);
                completion.message.content = answer;
                Ok(completion)
            }
            Ok(Err(ProviderError::Cancelled)) if self.stop_now().is_some() => {
                keep_partial(run);
                Err(self.stop_now().unwrap_or(Stop {
                    status: Status::Aborted,
                    error: Some("aborted".to_owned()),
                }))
            }
            Ok(Err(e)) => {
                // Recovered from, or the run's status says it (its
                // `error`): the log has it at info, not on stderr again.
                info!(round, error = %e, "provider request failed");
                keep_partial(run);
                run.overflowed = is_context_overflow(&e);
                run.unparsable = is_model_output_error(&e);
                if let (true, ProviderError::Status { body, .. }) = (run.overflowed, &e)
                    && let Some(window) = crate::context::window_in_refusal(body)
                {
                    self.opts.context.counter.learn_window(window);
                }
                let error = if run.overflowed {
                    format!("the conversation no longer fits the model's context: {e}")
                } else if is_model_output_error(&e) || through_prompt {
                    let then = if through_prompt {
                        ", then once through the json prompt protocol"
                    } else {
                        ""
                    };
                    format!(
                        "the server could not parse the model's own output ({attempts} attempts{then}): {e}"
                    )
                } else {
                    format!("model request failed: {e}")
                };
                Err(Stop {
                    status: Status::Error,
                    error: Some(error),
                })
            }
            Err(stop) => {
                keep_partial(run);
                Err(stop)
            }
        }
    }
}

/// Applies the options, the transforms and the hooks to `request`, in the
/// order [`request`](crate::request) documents.
async fn prepare(opts: &AgentOptions, request: &mut CompletionRequest) {
    opts.model_options.apply_to(request);
    if let Some(transform) = &opts.system_transform {
        let mut system = request.system.take().unwrap_or_default();
        transform(&mut system);
        request.system = Some(system);
    }
    for hook in &opts.request_hooks {
        let before = RequestEdit {
            system: request.system.clone().unwrap_or_default(),
            params: ModelOptions::of_request(request).into(),
        };
        let after = match hook.edit(&before).await {
            Ok(after) => after,
            Err(e) => {
                warn!(hook = hook.name(), error = %e, "request hook failed; the request goes out without its changes");
                continue;
            }
        };
        let options = ModelOptions::from(after.params);
        if let Err(e) = options.validate() {
            let e = RequestHookError::InvalidParams(e);
            warn!(hook = hook.name(), error = %e, "request hook ignored; the request goes out without its changes");
            continue;
        }
        debug!(hook = hook.name(), "request hook applied");
        options.replace_in(request);
        request.system = Some(after.system);
    }
    if let Some(transform) = &opts.params_transform {
        transform(request);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::request::{CommandRequestHook, RequestHook};

    fn request() -> CompletionRequest {
        CompletionRequest {
            system: Some("base".into()),
            temperature: Some(0.5),
            ..Default::default()
        }
    }

    fn sh(name: &str, script: &str) -> Arc<dyn RequestHook> {
        Arc::new(CommandRequestHook::argv(name, ["sh", "-c", script]))
    }

    #[tokio::test]
    async fn options_then_system_transform_then_hooks_then_params_transform() {
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (o1, o2) = (order.clone(), order.clone());
        let opts = AgentOptions::new("m")
            .model_options(ModelOptions {
                top_p: Some(0.9),
                ..Default::default()
            })
            .system_transform(move |s| {
                o1.lock().unwrap().push("system");
                s.push_str(" + transformed");
            })
            .params_transform(move |r| {
                o2.lock().unwrap().push("params");
                // Sees what the options set.
                assert_eq!(r.top_p, Some(0.9));
                r.temperature = Some(0.1);
            });
        let mut req = request();
        prepare(&opts, &mut req).await;
        assert_eq!(req.system.as_deref(), Some("base + transformed"));
        assert_eq!(req.top_p, Some(0.9));
        assert_eq!(req.temperature, Some(0.1));
        assert_eq!(*order.lock().unwrap(), vec!["system", "params"]);
    }

    #[tokio::test]
    async fn a_command_hook_changes_the_temperature_and_the_system_prompt() {
        // Reads the request, checks it, answers a changed one.
        let script = r#"read -r line
case "$line" in
  *'"temperature":0.5'*'"extra":{"seed":1}'*) ;;
  *) echo "unexpected: $line" >&2; exit 1 ;;
esac
[ "$TOOLHOST_HOOK_EVENT" = before_request ] || exit 1
echo '{"system":"hooked","params":{"temperature":0.9,"extra":{"seed":1}}}'"#;
        let mut opts = AgentOptions::new("m").request_hook(sh("t", script));
        opts.model_options.extra.insert("seed".into(), json!(1));
        let mut req = request();
        prepare(&opts, &mut req).await;
        assert_eq!(req.temperature, Some(0.9));
        assert_eq!(req.system.as_deref(), Some("hooked"));
        assert_eq!(Value::Object(req.extra), json!({"seed": 1}));
    }

    #[tokio::test]
    async fn a_hanging_hook_is_killed_and_the_request_goes_out_unchanged() {
        let hook =
            CommandRequestHook::argv("slow", ["sleep", "30"]).timeout(Duration::from_millis(200));
        let opts = AgentOptions::new("m").request_hook(Arc::new(hook));
        let mut req = request();
        let started = std::time::Instant::now();
        prepare(&opts, &mut req).await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(req, request());
    }

    #[tokio::test]
    async fn failing_invalid_or_forbidden_answers_change_nothing() {
        for script in [
            "exit 3",
            "echo not json",
            r#"echo '{"params":{"temprature":1}}'"#,
            r#"echo '{"params":{"temperature":9}}'"#,
            r#"echo '{"params":{"extra":{"model":"other"}}}'"#,
            // Output over the limit.
            "head -c 200000 /dev/zero | tr '\\0' x",
        ] {
            let opts = AgentOptions::new("m").request_hook(sh("bad", script));
            let mut req = request();
            prepare(&opts, &mut req).await;
            assert_eq!(req, request(), "{script}");
        }
        // An empty answer keeps everything; a later hook still runs.
        let opts = AgentOptions::new("m")
            .request_hook(sh("quiet", "cat >/dev/null"))
            .request_hook(sh("bad", "exit 1"))
            .request_hook(sh("top", r#"echo '{"params":{"top_p":0.5}}'"#));
        let mut req = request();
        prepare(&opts, &mut req).await;
        assert_eq!(req.top_p, Some(0.5));
        // `params` replaces every parameter.
        assert_eq!(req.temperature, None);
        assert_eq!(req.system.as_deref(), Some("base"));
    }
}
