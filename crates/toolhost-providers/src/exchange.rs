//! One HTTP exchange with a model server, shared by the OpenAI-compatible
//! and the Anthropic clients: post the request (through the transport's
//! retries), then read the answer either as one JSON body or as
//! server-sent events, and accumulate it into a [`Completion`], sending
//! deltas as they arrive.
//!
//! A client brings only what its wire format makes different
//! ([`WireFormat`]): the path, its headers, the parser of a whole body and
//! the [`Assembler`] of a stream. What every client holds besides
//! (name, base URL, default model, streaming, retries) is an [`Endpoint`].

use std::fmt;

use eventsource_stream::Event;
use reqwest::{RequestBuilder, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::message::{Message, ToolCall, Usage};
use crate::transport::{self, RetryPolicy, excerpt};
use crate::turns;
use crate::{Completion, CompletionRequest, Delta, DeltaSink, FinishReason, ProviderError};

/// What an HTTP client holds whatever its wire format.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The name used in errors and logs.
    pub(crate) name: String,
    /// The part of the URL before the wire format's path.
    pub(crate) base_url: String,
    /// The model asked for when a request names none.
    pub(crate) model: String,
    /// Whether responses are asked for as server-sent events.
    pub(crate) stream: bool,
    policy: RetryPolicy,
    client: reqwest::Client,
}

impl Endpoint {
    /// An endpoint that streams, with the default [`RetryPolicy`].
    pub(crate) fn new(name: &str, base_url: String, model: String) -> Self {
        let policy = RetryPolicy::default();
        Endpoint {
            name: name.to_owned(),
            base_url,
            model,
            stream: true,
            client: transport::http_client(&policy),
            policy,
        }
    }

    /// Sets the retries and timeouts (the HTTP client is built again for
    /// its connect timeout).
    pub(crate) fn set_retry(&mut self, policy: RetryPolicy) {
        self.client = transport::http_client(&policy);
        self.policy = policy;
    }

    /// The model `request` names, else the default one.
    pub(crate) fn model_for<'a>(&'a self, request: &'a CompletionRequest) -> &'a str {
        if request.model.is_empty() {
            &self.model
        } else {
            &request.model
        }
    }
}

/// What a wire format makes different in an exchange.
pub(crate) trait WireFormat: Sync {
    /// Accumulates a streamed response.
    type Assembler: Assembler;

    /// The path posted to, after [`Endpoint::base_url`].
    const PATH: &'static str;

    /// The client's [`Endpoint`].
    fn endpoint(&self) -> &Endpoint;

    /// `request` with the format's own headers (credentials, version).
    fn headers(&self, request: RequestBuilder) -> RequestBuilder;

    /// Parses a response that arrived whole.
    fn parse_response(provider: &str, body: &[u8]) -> Result<Completion, ProviderError>;
}

/// Accumulates a streamed response, event by event, into a completion.
pub(crate) trait Assembler: Default + Send {
    /// The answer text so far (kept in the error when the stream breaks).
    fn text(&self) -> &str;

    /// Takes one server-sent event, sending deltas to `on_delta`; `true`
    /// once the response is complete.
    fn on_event(
        &mut self,
        provider: &str,
        event: &Event,
        on_delta: DeltaSink<'_>,
    ) -> Result<bool, ProviderError>;

    /// The completion, or an error when the stream ended too early.
    fn finish(self, provider: &str) -> Result<Completion, ProviderError>;

    /// The reply ends here although the stream has not said so (a turn
    /// marker written as text, `turns.rs`): [`finish`](Self::finish) then
    /// completes it with [`FinishReason::Stop`].
    fn end_here(&mut self);
}

/// Posts `body` to `wire`'s server (retrying transient failures) and reads
/// the answer: as server-sent events when the client streams and the server
/// did (a server may ignore `stream: true` and answer with one JSON body),
/// else as one JSON body, whose deltas are then sent at once.
pub(crate) async fn exchange<W: WireFormat>(
    wire: &W,
    body: &Value,
    on_delta: DeltaSink<'_>,
    cancel: &CancellationToken,
) -> Result<Completion, ProviderError> {
    let endpoint = wire.endpoint();
    let name = endpoint.name.as_str();
    let url = format!("{}{}", endpoint.base_url, W::PATH);
    // The model request joins the caller's trace (W3C `traceparent`) when
    // traces are exported.
    let trace = toolhost_telemetry::propagate::headers();
    let make = || {
        let mut rb = wire.headers(endpoint.client.post(&url)).json(body);
        if endpoint.stream {
            rb = rb.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        for (name, value) in &trace {
            rb = rb.header(name.as_str(), value.as_str());
        }
        rb
    };
    tracing::debug!(provider = %name, %url, stream = endpoint.stream, "model request");
    let resp = transport::send(name, &endpoint.policy, cancel, &make).await?;
    if endpoint.stream && !transport::is_json(&resp) {
        read_stream::<W::Assembler>(endpoint, resp, on_delta, cancel).await
    } else {
        let bytes = transport::read_body(name, resp, &endpoint.policy, cancel).await?;
        let mut completion = W::parse_response(name, &bytes)?;
        end_at_turn_marker(&mut completion);
        emit_completion(&completion, on_delta);
        Ok(completion)
    }
}

/// Cuts the reply at the first chat-template turn marker it wrote as text
/// (`turns.rs`): what follows is the model playing the next turns.
fn end_at_turn_marker(completion: &mut Completion) -> bool {
    let Some(end) = turns::reply_end(&completion.message.content) else {
        return false;
    };
    tracing::debug!(
        dropped = completion.message.content.len() - end,
        "the reply wrote a turn marker; it ends there"
    );
    completion.message.content.truncate(end);
    completion.finish_reason = FinishReason::Stop;
    true
}

/// Reads `resp` as server-sent events through an `A` until it says the
/// response is complete or the body ends.
async fn read_stream<A: Assembler>(
    endpoint: &Endpoint,
    resp: Response,
    on_delta: DeltaSink<'_>,
    cancel: &CancellationToken,
) -> Result<Completion, ProviderError> {
    let name = endpoint.name.as_str();
    let policy = &endpoint.policy;
    let mut events = transport::sse(resp, policy.idle_timeout, policy.max_response_bytes);
    let mut acc = A::default();
    let mut searched = 0;
    while let Some(event) = transport::next_event(name, &mut events, cancel, acc.text()).await? {
        if acc.on_event(name, &event, on_delta)? {
            break;
        }
        // A turn marker written as text: the reply is over, and closing
        // the stream stops the model writing the next turns.
        if turns::reply_end_from(acc.text(), searched).is_some() {
            acc.end_here();
            break;
        }
        searched = acc.text().len();
    }
    drop(events);
    let mut completion = acc.finish(name)?;
    end_at_turn_marker(&mut completion);
    Ok(completion)
}

/// Runs decoded server-sent events through `W`'s assembler, as a streamed
/// exchange does. For the fuzz targets and their regression tests only.
pub(crate) fn replay<W: WireFormat>(
    provider: &str,
    events: &[Event],
    on_delta: DeltaSink<'_>,
) -> Result<Completion, ProviderError> {
    let mut acc = W::Assembler::default();
    for event in events {
        if acc.on_event(provider, event, on_delta)? {
            break;
        }
    }
    acc.finish(provider)
}

/// Sends the deltas of a completion that arrived whole.
pub(crate) fn emit_completion(c: &Completion, on_delta: DeltaSink<'_>) {
    if !c.message.content.is_empty() {
        on_delta(Delta::Text(c.message.content.clone()));
    }
    for call in &c.message.tool_calls {
        on_delta(Delta::ToolCallStarted {
            id: call.id.clone(),
            name: call.name.clone(),
        });
    }
}

/// The completion of an assistant message of `text` and `calls`.
pub(crate) fn completion(
    text: String,
    calls: Vec<ToolCall>,
    finish_reason: FinishReason,
    usage: Usage,
) -> Completion {
    Completion {
        message: Message {
            tool_calls: calls,
            ..Message::assistant(text)
        },
        finish_reason,
        usage,
    }
}

/// The error for a response that cannot be understood.
pub(crate) fn invalid(provider: &str, message: String, partial_text: &str) -> ProviderError {
    ProviderError::InvalidResponse {
        provider: provider.to_owned(),
        message,
        partial_text: partial_text.to_owned(),
    }
}

/// A whole response body as JSON.
pub(crate) fn parse_body<T: DeserializeOwned>(
    provider: &str,
    body: &[u8],
) -> Result<T, ProviderError> {
    serde_json::from_slice(body).map_err(|e| {
        invalid(
            provider,
            format!(
                "the response is not valid JSON ({e}): {}",
                excerpt(&String::from_utf8_lossy(body))
            ),
            "",
        )
    })
}

/// An error the server sent in the middle of a stream, on either wire: an
/// event named `error` (Anthropic's `event: error`, and llama.cpp's on
/// both wires), or an event whose data is an error object (`{"error":
/// {...}}`, or `{"code": 500, "message": ..., "type": "server_error"}`).
/// `None` for any other event. The error says what the server said, in its
/// words (so the agent loop can tell a model-output parse failure, which it
/// recovers from, from the rest), and keeps the text streamed before it.
pub(crate) fn stream_error(
    provider: &str,
    name: &str,
    data: &str,
    partial_text: &str,
) -> Option<ProviderError> {
    // Cheap on the stream's every other event: only data that mentions an
    // error is parsed twice.
    if name != "error" && !data.contains("error") {
        return None;
    }
    let value: Option<Value> = serde_json::from_str(data.trim()).ok();
    let object = value.as_ref().and_then(Value::as_object);
    // The error object: `error` when there is one, else the event's own
    // data when it looks like one (a message, and a code or an error type,
    // and nothing a normal event has).
    let inner = object.and_then(|o| o.get("error")).filter(|e| !e.is_null());
    let looks_like_error = object.is_some_and(|o| {
        o.contains_key("message")
            && (o.contains_key("code")
                || o.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.ends_with("error")))
            && !o.contains_key("choices")
            && !o.contains_key("delta")
    });
    let error = match (inner, name == "error" || looks_like_error) {
        (Some(inner), _) => Some(inner),
        (None, true) => value.as_ref(),
        (None, false) => return None,
    };
    let field = |key: &str| -> Option<String> {
        match error?.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let message = match error {
        Some(Value::String(s)) => s.clone(),
        _ => field("message").unwrap_or_else(|| data.trim().to_owned()),
    };
    let what: Vec<String> = [field("code"), field("type")]
        .into_iter()
        .flatten()
        .filter(|w| w != "error")
        .collect();
    let what = if what.is_empty() {
        String::new()
    } else {
        format!(" ({})", what.join(" "))
    };
    Some(invalid(
        provider,
        format!(
            "the server sent an error in the stream{what}: {}",
            excerpt(&message)
        ),
        partial_text,
    ))
}

/// One streamed event's data as JSON; `what` names the event in the error,
/// which keeps `partial_text`.
pub(crate) fn parse_event<T: DeserializeOwned>(
    provider: &str,
    what: fmt::Arguments<'_>,
    data: &str,
    partial_text: &str,
) -> Result<T, ProviderError> {
    serde_json::from_str(data).map_err(|e| {
        invalid(
            provider,
            format!("{what} is not valid JSON ({e}): {}", excerpt(data)),
            partial_text,
        )
    })
}
