//! [`PromptTools`]: the provider that offers tools through the prompt of
//! a wrapped one, rendering the request, filtering the streamed text and
//! parsing the calls out of the answer; and whether it asks the server for
//! constrained decoding ([`Constrain`]).

use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::parse::parse_tool_calls;
use super::profile::PromptProfile;
use super::render::rewrite;
use super::stream::DeltaFilter;
use crate::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice,
};

/// A provider that offers tools through the prompt instead of the API.
///
/// ```no_run
/// use toolhost_providers::openai::OpenAiCompatible;
/// use toolhost_providers::prompt::{PromptProfile, PromptTools};
///
/// let base = OpenAiCompatible::new("http://localhost:11434/v1", "gemma3:4b").with_name("ollama");
/// let provider = PromptTools::new(base, PromptProfile::Xml);
/// # let _ = provider;
/// ```
pub struct PromptTools {
    inner: Box<dyn Provider>,
    profile: PromptProfile,
    name: String,
    constrain: Constrain,
    /// Set when the server refused a constrained request (`Constrain::Auto`).
    refused_schema: std::sync::atomic::AtomicBool,
}

/// Whether a prompt protocol asks the server for constrained decoding.
///
/// - **json:** the reply is held to the JSON of tool calls or of an answer
///   (`{"answer": "…"}`), through OpenAI-style `response_format` with a JSON
///   Schema ([`reply_schema`]; llama.cpp turns it into a grammar, checked in
///   `cargo xtask eval`; vLLM, LM Studio and Ollama's `/v1` document it).
/// - **xml:** the reply is held to `<tool_code>` blocks, each a call of an
///   offered tool with JSON arguments, or to a plain answer, through
///   llama.cpp's `grammar` field ([`xml_reply_grammar`], GBNF; checked in
///   `cargo xtask eval`). A server without it refuses the field (OpenAI:
///   "Unrecognized request argument"), which `Auto` handles.
///
/// [`reply_schema`]: super::reply_schema
/// [`xml_reply_grammar`]: crate::grammar::xml_reply_grammar
///
/// The Anthropic wire format has neither field, so requests through it are
/// never constrained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Constrain {
    /// Ask, and when the server refuses it (an error naming
    /// `response_format`, `json_schema` or `grammar`), send that request
    /// again without and never ask this server again.
    #[default]
    Auto,
    /// Always ask; a refusal is an error.
    On,
    /// Never ask.
    Off,
}

impl fmt::Debug for PromptTools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromptTools")
            .field("name", &self.name)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl PromptTools {
    /// Wraps `inner`.
    pub fn new(inner: impl Provider + 'static, profile: PromptProfile) -> Self {
        Self::from_boxed(Box::new(inner), profile)
    }

    /// Wraps an already boxed provider.
    pub fn from_boxed(inner: Box<dyn Provider>, profile: PromptProfile) -> Self {
        let name = format!("{}+{profile}", inner.name());
        PromptTools {
            inner,
            profile,
            name,
            constrain: Constrain::Auto,
            refused_schema: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Sets whether replies are constrained ([`Constrain`]; `Auto` by default).
    pub fn with_constrain(mut self, constrain: Constrain) -> Self {
        self.constrain = constrain;
        self
    }

    /// Whether the next request with tools asks for constrained decoding:
    /// never through a provider whose wire has no field for it
    /// ([`Provider::constrains_replies`]; the Anthropic one).
    pub fn constrains(&self) -> bool {
        if !self.inner.constrains_replies() {
            return false;
        }
        match self.constrain {
            Constrain::Off => false,
            Constrain::On => true,
            Constrain::Auto => !self
                .refused_schema
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The calling convention.
    pub fn profile(&self) -> PromptProfile {
        self.profile
    }

    /// The request actually sent to the wrapped provider: tools described in
    /// the system prompt, none sent natively, the history in text form.
    pub fn rewrite_request(&self, request: &CompletionRequest) -> CompletionRequest {
        rewrite(self.profile, request, self.constrains())
    }
}

/// Sends `request` to `inner` with its tools offered through the prompt in
/// `profile`'s convention, and parses the calls out of the answer: what
/// [`PromptTools`] does for every request, for one request. The agent loop
/// uses it for a round that a server failed to parse natively.
pub async fn complete_through_prompt(
    inner: &dyn Provider,
    profile: PromptProfile,
    request: &CompletionRequest,
    on_delta: DeltaSink<'_>,
    cancel: &CancellationToken,
) -> Result<Completion, ProviderError> {
    complete_prompt(inner, profile, false, request, on_delta, cancel).await
}

/// [`complete_through_prompt`], constrained when `constrained` (and the
/// request offers tools): then the reply is JSON, held back until it is
/// parsed, and only the answer in it reaches `on_delta`.
async fn complete_prompt(
    inner: &dyn Provider,
    profile: PromptProfile,
    constrained: bool,
    request: &CompletionRequest,
    on_delta: DeltaSink<'_>,
    cancel: &CancellationToken,
) -> Result<Completion, ProviderError> {
    let rewritten = rewrite(profile, request, constrained);
    let constrained = rewritten.response_schema.is_some();
    let parse = !request.tools.is_empty() && request.tool_choice != ToolChoice::None;
    let filter = Mutex::new(DeltaFilter::new(profile, parse));
    let sink = |d: Delta| match d {
        Delta::Text(_) if constrained => {}
        Delta::Text(t) => {
            let out = match filter.lock() {
                Ok(mut f) => f.push(&t),
                Err(_) => Some(t),
            };
            if let Some(out) = out {
                on_delta(Delta::Text(out));
            }
        }
        other => on_delta(other),
    };
    let mut completion = inner.complete(&rewritten, &sink, cancel).await?;
    let (text, calls) = if parse {
        parse_tool_calls(profile, &completion.message.content)
    } else {
        (std::mem::take(&mut completion.message.content), Vec::new())
    };
    // Held-back text reaches the sink unless it really was a call.
    if constrained {
        if !text.is_empty() {
            on_delta(Delta::Text(text.clone()));
        }
    } else if let Ok(mut f) = filter.lock()
        && let Some(rest) = f.flush(calls.is_empty())
    {
        on_delta(Delta::Text(rest));
    }
    for c in &calls {
        on_delta(Delta::ToolCallStarted {
            id: c.id.clone(),
            name: c.name.clone(),
        });
    }
    completion.message.content = text;
    completion.message.tool_calls.extend(calls);
    if !completion.message.tool_calls.is_empty() && completion.finish_reason == FinishReason::Stop {
        completion.finish_reason = FinishReason::ToolCalls;
    }
    Ok(completion)
}

/// Whether `e` is a server refusing `response_format` (it does not do
/// constrained decoding, or not with this schema).
fn refuses_schema(e: &ProviderError) -> bool {
    let ProviderError::Status { status, body, .. } = e else {
        return false;
    };
    let body = body.to_ascii_lowercase();
    matches!(*status, 400 | 404 | 415 | 422 | 500 | 501)
        && ["response_format", "json_schema", "grammar", "schema"]
            .iter()
            .any(|w| body.contains(w))
}

impl Provider for PromptTools {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        on_delta: DeltaSink<'a>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(async move {
            let constrained = self.constrains();
            let inner = self.inner.as_ref();
            let first =
                complete_prompt(inner, self.profile, constrained, request, on_delta, cancel).await;
            match first {
                Err(e)
                    if constrained && self.constrain == Constrain::Auto && refuses_schema(&e) =>
                {
                    tracing::warn!(provider = %self.name, error = %e, "the server refuses constrained decoding; asking without from now on");
                    self.refused_schema
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    complete_prompt(inner, self.profile, false, request, on_delta, cancel).await
                }
                other => other,
            }
        })
    }

    fn prompt_profile(&self) -> Option<PromptProfile> {
        Some(self.profile)
    }
}
