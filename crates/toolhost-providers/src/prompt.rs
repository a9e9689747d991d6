//! A prompt-based tool protocol, for models without native tool calling.
//!
//! [`PromptTools`] wraps any [`Provider`]: it describes the tools in the
//! system prompt with the calling convention of a [`PromptProfile`], sends the
//! request without native tools, and parses the calls back out of the text.
//! Earlier calls and results in the history are written in the same
//! convention (results go back as user messages).
//!
//! ```
//! use toolhost_providers::prompt::{PromptProfile, parse_tool_calls};
//!
//! let (text, calls) = parse_tool_calls(
//!     PromptProfile::Xml,
//!     "Let me check.\n<tool_code>{\"name\": \"calc\", \"arguments\": {\"e\": \"2+2\"}}</tool_code>",
//! );
//! assert_eq!(text, "Let me check.");
//! assert_eq!(calls[0].name, "calc");
//! assert_eq!(calls[0].arguments, r#"{"e":"2+2"}"#);
//! ```

use std::fmt;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    BoxFuture, Completion, CompletionRequest, Delta, DeltaSink, FinishReason, Provider,
    ProviderError, ToolChoice, ToolDefinition,
};
use crate::grammar::xml_reply_grammar;
use crate::message::{Message, Role, ToolCall};

/// How the model writes tool calls in its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptProfile {
    /// A `{"tool_calls":[{"name":…,"arguments":{…}}]}` object, fenced or not.
    Json,
    /// `<tool_code>{"name":…,"arguments":{…}}</tool_code>` blocks; results
    /// come back as `<tool_result name="…">…</tool_result>`.
    Xml,
}

impl fmt::Display for PromptProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PromptProfile::Json => "json",
            PromptProfile::Xml => "xml",
        })
    }
}

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

    /// Whether the next request with tools asks for constrained decoding.
    pub fn constrains(&self) -> bool {
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

/// `request` as sent in `profile`'s convention: tools described in the
/// system prompt, none sent natively, the history in text form.
fn rewrite(
    profile: PromptProfile,
    request: &CompletionRequest,
    constrain: bool,
) -> CompletionRequest {
    let mut system = request.system.clone().unwrap_or_default();
    let constrain =
        constrain && !request.tools.is_empty() && request.tool_choice != ToolChoice::None;
    let response_schema =
        (constrain && profile == PromptProfile::Json).then(|| reply_schema(&request.tools));
    let grammar = if constrain && profile == PromptProfile::Xml {
        xml_reply_grammar(&request.tools)
    } else {
        None
    };
    if !request.tools.is_empty() {
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(&tool_instructions(
            profile,
            &request.tools,
            request.tool_choice,
        ));
        if response_schema.is_some() {
            system.push_str(ANSWER_FORM);
        }
    }
    CompletionRequest {
        model: request.model.clone(),
        system: (!system.is_empty()).then_some(system),
        messages: history_as_text(profile, &request.messages),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        parallel_tool_calls: false,
        max_tokens: request.max_tokens,
        temperature: request.temperature,
        // A JSON reply is never cut by the result markers: one inside an
        // answer's string would break it (and the schema ends the reply).
        stop: stop_sequences(profile, request, response_schema.is_some()),
        response_schema,
        grammar,
        top_p: request.top_p,
        reasoning_effort: request.reasoning_effort,
        extra: request.extra.clone(),
    }
}

/// Most stop sequences OpenAI's API takes in one request (fewer than a
/// config may set, [`crate::options::MAX_STOP_SEQUENCES`]: the markers are
/// added only while there is room).
const OPENAI_STOP_SEQUENCES: usize = 4;

/// The caller's stop sequences, and when the model may call tools and is not
/// constrained to JSON, the starts of result messages ([`result_markers`]): a small
/// model that goes on to write its call's result itself is stopped there
/// (the parser drops such a result in any case).
fn stop_sequences(
    profile: PromptProfile,
    request: &CompletionRequest,
    constrained: bool,
) -> Vec<String> {
    let mut stop = request.stop.clone();
    if request.tools.is_empty() || request.tool_choice == ToolChoice::None || constrained {
        return stop;
    }
    for m in result_markers(profile) {
        if stop.len() < OPENAI_STOP_SEQUENCES && !stop.iter().any(|s| s == m) {
            stop.push((*m).to_owned());
        }
    }
    stop
}

/// Added to the instructions when the reply is constrained to JSON.
const ANSWER_FORM: &str = "\n\nYour whole reply is one JSON object: the tool calls as above, \
or, when you call no tool, {\"answer\": \"<your answer>\"}.";

/// The JSON Schema a constrained reply follows: tool calls of the offered
/// tools, each with its own arguments schema, or an answer.
pub fn reply_schema(tools: &[ToolDefinition]) -> Value {
    let calls: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                "required": ["name", "arguments"],
            })
        })
        .collect();
    json!({"anyOf": [
        {
            "type": "object",
            "properties": {"tool_calls": {"type": "array", "minItems": 1, "items": {"anyOf": calls}}},
            "required": ["tool_calls"],
        },
        {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    ]})
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

/// The system prompt section that lists `tools` and explains how to call them.
pub fn tool_instructions(
    profile: PromptProfile,
    tools: &[ToolDefinition],
    choice: ToolChoice,
) -> String {
    let mut s = String::from("# Tools\n\nYou can use these tools:\n");
    for t in tools {
        s.push_str(&format!(
            "\n## {}\n{}\nArguments (JSON Schema): {}\n",
            t.name,
            t.description.trim(),
            t.parameters
        ));
    }
    s.push_str("\n# How to call tools\n\n");
    match profile {
        PromptProfile::Json => s.push_str(
            "To call tools, write a JSON object of this form (you may put it in a ```json block), \
             then stop:\n\n\
             {\"tool_calls\": [{\"name\": \"<tool name>\", \"arguments\": {<arguments matching the tool's schema>}}]}\n\n\
             You may list several calls in the array. The results come back in the next user message. \
             When you need no tool, answer in plain text without such an object.",
        ),
        PromptProfile::Xml => s.push_str(
            "To call a tool, write a block of this form, then stop:\n\n\
             <tool_code>{\"name\": \"<tool name>\", \"arguments\": {<arguments matching the tool's schema>}}</tool_code>\n\n\
             Write one block per call; you may write several. The results come back in the next user \
             message as <tool_result name=\"<tool name>\" id=\"<call id>\">…</tool_result>. \
             When you need no tool, answer in plain text without such a block.",
        ),
    }
    match choice {
        ToolChoice::Auto => {}
        ToolChoice::Required => s.push_str("\n\nYou must call at least one tool now."),
        ToolChoice::None => {
            s.push_str("\n\nDo not call any tool now: answer with what you already know.");
        }
    }
    s
}

/// `calls` written in the profile's convention (as the model would have).
pub fn render_tool_calls(profile: PromptProfile, calls: &[ToolCall]) -> String {
    // In the order the instructions (and the xml grammar) give: the name,
    // the arguments, then the id the result will carry.
    let call_json = |c: &ToolCall| {
        let args = serde_json::from_str::<Value>(&c.arguments)
            .unwrap_or_else(|_| Value::String(c.arguments.clone()));
        format!(
            r#"{{"name": {}, "arguments": {args}, "id": {}}}"#,
            Value::String(c.name.clone()),
            Value::String(c.id.clone())
        )
    };
    match profile {
        PromptProfile::Json => {
            let all: Vec<String> = calls.iter().map(call_json).collect();
            format!("```json\n{{\"tool_calls\": [{}]}}\n```", all.join(", "))
        }
        PromptProfile::Xml => calls
            .iter()
            .map(|c| format!("<tool_code>{}</tool_code>", call_json(c)))
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// One tool result written in the profile's convention, with the id of the
/// call it answers (so two calls of one tool are told apart by more than
/// their order).
pub fn render_tool_result(
    profile: PromptProfile,
    name: &str,
    id: Option<&str>,
    output: &str,
    is_error: bool,
) -> String {
    match profile {
        PromptProfile::Json => {
            let head = if is_error {
                "Tool error"
            } else {
                "Tool result"
            };
            match id {
                Some(id) => format!("{head} ({name}, call {id}):\n{output}"),
                None => format!("{head} ({name}):\n{output}"),
            }
        }
        PromptProfile::Xml => {
            let err = if is_error { " error=\"true\"" } else { "" };
            let id = id.map(|id| format!(" id=\"{id}\"")).unwrap_or_default();
            format!("<tool_result name=\"{name}\"{id}{err}>{output}</tool_result>")
        }
    }
}

/// The history with tool calls and results as text; results become user
/// messages, and consecutive messages of one role are merged.
fn history_as_text(profile: PromptProfile, messages: &[Message]) -> Vec<Message> {
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    for m in messages {
        let converted = match m.role {
            Role::Assistant if !m.tool_calls.is_empty() => {
                let calls = render_tool_calls(profile, &m.tool_calls);
                let text = if m.content.trim().is_empty() {
                    calls
                } else {
                    format!("{}\n\n{calls}", m.content.trim_end())
                };
                Message::assistant(text)
            }
            Role::Tool => Message::user(render_tool_result(
                profile,
                m.tool_name.as_deref().unwrap_or("tool"),
                m.tool_call_id.as_deref(),
                &m.content,
                m.is_error,
            )),
            _ => m.clone(),
        };
        match out.last_mut() {
            Some(last)
                if last.role == converted.role
                    && last.role != Role::System
                    && last.tool_calls.is_empty()
                    && converted.tool_calls.is_empty() =>
            {
                last.content.push_str("\n\n");
                last.content.push_str(&converted.content);
            }
            _ => out.push(converted),
        }
    }
    out
}

/// Where a value was found: outside an explicit call (a `tool_calls` list or
/// a call tag) a call needs both a name and arguments.
#[derive(Clone, Copy, PartialEq)]
enum Context {
    Bare,
    Fenced,
    Tag,
}

const ARG_KEYS: [&str; 4] = ["arguments", "parameters", "args", "input"];

fn one_call(v: &Value, ctx: Context) -> Option<(String, String)> {
    let obj = v.as_object()?;
    if let Some(f) = obj.get("function").filter(|f| f.is_object()) {
        return one_call(f, ctx);
    }
    let name = obj.get("name")?.as_str()?.trim();
    if name.is_empty() {
        return None;
    }
    let args = ARG_KEYS.iter().find_map(|k| obj.get(*k));
    if args.is_none() && ctx != Context::Tag {
        return None;
    }
    let arguments = match args {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    Some((name.to_owned(), arguments))
}

/// The calls `v` holds, or `None` when it is not a tool call value.
fn calls_in(v: &Value, ctx: Context) -> Option<Vec<(String, String)>> {
    match v {
        Value::Object(obj) => {
            if let Some(list) = obj.get("tool_calls").and_then(Value::as_array) {
                return Some(
                    list.iter()
                        .filter_map(|c| one_call(c, Context::Tag))
                        .collect(),
                );
            }
            if let Some(c) = obj.get("tool_call") {
                return one_call(c, Context::Tag).map(|c| vec![c]);
            }
            one_call(v, ctx).map(|c| vec![c])
        }
        Value::Array(list) if ctx != Context::Bare && !list.is_empty() => {
            let calls: Vec<_> = list.iter().filter_map(|c| one_call(c, ctx)).collect();
            (calls.len() == list.len()).then_some(calls)
        }
        _ => None,
    }
}

/// A fenced block (three backticks): its whole span and its body's span.
struct Fence {
    start: usize,
    end: usize,
    body: (usize, usize),
}

fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(off) = text[i..].find("```") {
        let start = i + off;
        let after = start + 3;
        // The info string (language) runs to the end of the line. (The search
        // stops at the next fence too: scanning on to a far newline made
        // many fences on one line quadratic.)
        let rest = &text[after..];
        let body_start = match rest
            .match_indices(['\n', '`'])
            .find(|(k, m)| *m == "\n" || rest[*k..].starts_with("```"))
        {
            Some((nl, "\n")) => after + nl + 1,
            _ => after,
        };
        let (body_end, end) = match text[body_start..].find("```") {
            Some(c) => (body_start + c, body_start + c + 3),
            None => (text.len(), text.len()),
        };
        out.push(Fence {
            start,
            end,
            body: (body_start, body_end),
        });
        i = end;
    }
    out
}

/// The first JSON value at `text[pos..]` and where it ends.
fn json_at(text: &str, pos: usize) -> Option<(Value, usize)> {
    let mut it = serde_json::Deserializer::from_str(&text[pos..]).into_iter::<Value>();
    match it.next() {
        Some(Ok(v)) => Some((v, pos + it.byte_offset())),
        _ => None,
    }
}

/// A span of the text holding calls.
type Span = (usize, usize, Vec<(String, String)>);

fn json_spans(text: &str) -> Vec<Span> {
    let fences = fences(text);
    let mut spans = Vec::new();
    for f in &fences {
        let body = text[f.body.0..f.body.1].trim();
        if let Ok(v) = serde_json::from_str::<Value>(body)
            && let Some(calls) = calls_in(&v, Context::Fenced)
        {
            spans.push((f.start, f.end, calls));
        }
    }
    // Bare objects outside fences.
    let mut i = 0;
    let mut next_fence = 0;
    while let Some(off) = text[i..].find('{') {
        let pos = i + off;
        // The fences are in order and `pos` only grows.
        while fences.get(next_fence).is_some_and(|f| f.end <= pos) {
            next_fence += 1;
        }
        if let Some(f) = fences.get(next_fence).filter(|f| f.start <= pos) {
            i = f.end;
            continue;
        }
        match json_at(text, pos) {
            Some((v, end)) => {
                if let Some(calls) = calls_in(&v, Context::Bare) {
                    spans.push((pos, end, calls));
                }
                i = end;
            }
            None => i = pos + 1,
        }
    }
    spans
}

const OPEN_TAGS: [(&str, &str); 2] = [
    ("<tool_code>", "</tool_code>"),
    ("<tool_call>", "</tool_call>"),
];

/// `text[from..].find(pattern)` as a position in `text`, for calls whose
/// `from` never decreases: the last answer is reused while it is still ahead,
/// so that many opening tags without (or far from) a closing one do not make
/// the search quadratic.
struct Finder<'a> {
    text: &'a str,
    pattern: &'static str,
    /// The last answer, once there is one.
    last: Option<Option<usize>>,
}

impl<'a> Finder<'a> {
    fn new(text: &'a str, pattern: &'static str) -> Self {
        Finder {
            text,
            pattern,
            last: None,
        }
    }

    fn find(&mut self, from: usize) -> Option<usize> {
        match self.last {
            Some(None) => return None,
            Some(Some(p)) if p >= from => return Some(p),
            _ => {}
        }
        let found = self.text[from..].find(self.pattern).map(|p| from + p);
        self.last = Some(found);
        found
    }
}

fn xml_spans(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut tags: Vec<_> = OPEN_TAGS
        .iter()
        .map(|(o, c)| (*o, *c, Finder::new(text, o), Finder::new(text, c)))
        .collect();
    let mut i = 0;
    loop {
        let next = tags
            .iter_mut()
            .enumerate()
            .filter_map(|(k, (_, _, opens, _))| opens.find(i).map(|p| (p, k)))
            .min();
        let Some((start, k)) = next else {
            break;
        };
        let (open, close, _, closes) = &mut tags[k];
        let body_start = start + open.len();
        let (body_end, end) = match closes.find(body_start) {
            Some(c) => (c, c + close.len()),
            None => (text.len(), text.len()),
        };
        let body = strip_fence(text[body_start..body_end].trim());
        match serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| calls_in(&v, Context::Tag))
        {
            Some(calls) => {
                spans.push((start, end, calls));
                i = end;
            }
            None => i = body_start,
        }
    }
    spans
}

fn strip_fence(body: &str) -> &str {
    let Some(rest) = body.strip_prefix("```") else {
        return body;
    };
    let rest = match rest.find('\n') {
        Some(nl) => &rest[nl + 1..],
        None => rest,
    };
    rest.trim_end().strip_suffix("```").unwrap_or(rest).trim()
}

/// How each convention's result messages start ([`render_tool_result`]):
/// what a model writes when it imitates a result instead of waiting for it.
/// Also sent as stop sequences, so a server stops the model there.
pub fn result_markers(profile: PromptProfile) -> &'static [&'static str] {
    match profile {
        PromptProfile::Json => &["Tool result (", "Tool error ("],
        PromptProfile::Xml => &["<tool_result"],
    }
}

/// Where a result the model wrote itself starts: the first result marker
/// after the first call, outside every call span.
fn imitated_result(profile: PromptProfile, text: &str, spans: &[Span]) -> Option<usize> {
    let first = spans.iter().find(|s| !s.2.is_empty())?.0;
    result_markers(profile)
        .iter()
        .filter_map(|m| {
            text[first..]
                .match_indices(m)
                .map(|(k, _)| first + k)
                .find(|&p| !spans.iter().any(|s| s.0 <= p && p < s.1))
        })
        .min()
}

/// Finds the tool calls in `text` written in `profile`'s convention.
///
/// Returns the text without the calls (the pieces around them, trimmed and
/// joined by blank lines; `text` unchanged when there is no call) and the
/// calls in order, with generated ids. Malformed JSON is not a call: it stays
/// in the text. Arguments are kept as JSON text (a string argument value is
/// taken as already-encoded JSON).
pub fn parse_tool_calls(profile: PromptProfile, text: &str) -> (String, Vec<ToolCall>) {
    // The answer form of a constrained reply (`{"answer": "…"}`), also
    // taken when a model writes it unasked.
    if profile == PromptProfile::Json
        && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(strip_fence(text.trim()))
        && map.len() == 1
        && let Some(Value::String(answer)) = map.get("answer")
    {
        return (answer.clone(), Vec::new());
    }
    let mut spans = match profile {
        PromptProfile::Json => json_spans(text),
        PromptProfile::Xml => xml_spans(text),
    };
    if spans.is_empty() {
        return (text.to_owned(), Vec::new());
    }
    spans.sort_by_key(|s| s.0);
    // A model that writes the result of its own call after it (imitating the
    // result messages) invented it: the reply ends where that starts, and
    // calls after it (made on the invented result) are dropped too.
    let text = match imitated_result(profile, text, &spans) {
        Some(cut) => {
            tracing::debug!(
                dropped_bytes = text.len() - cut,
                "dropped a tool result the model wrote after its own call"
            );
            spans.retain(|s| s.0 < cut);
            &text[..cut]
        }
        None => text,
    };
    let batch = fastrand::u32(..);
    let mut pieces = Vec::new();
    let mut calls = Vec::new();
    let mut at = 0;
    for (start, end, found) in spans {
        if start < at || found.is_empty() {
            // Overlaps an earlier span, or holds no valid call: it stays text.
            continue;
        }
        pieces.push(&text[at..start]);
        at = end;
        for (name, arguments) in found {
            calls.push(ToolCall {
                id: format!("call_{batch:08x}_{}", calls.len()),
                name,
                arguments,
            });
        }
    }
    if calls.is_empty() {
        // Found by fuzzing: a block shaped like calls but holding none must
        // not make the model's text disappear.
        return (text.to_owned(), Vec::new());
    }
    pieces.push(&text[at..]);
    let rest: Vec<&str> = pieces
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    (rest.join("\n\n"), calls)
}

/// Streams `chunks` through the filter that holds back calls and flushes it,
/// as [`PromptTools`] does: the text a user interface would show. For the
/// fuzz targets and their regression tests only.
pub(crate) fn filter_deltas(profile: PromptProfile, chunks: &[&str], no_calls: bool) -> String {
    let mut filter = DeltaFilter::new(profile, true);
    let mut shown = String::new();
    for chunk in chunks {
        if let Some(out) = filter.push(chunk) {
            shown.push_str(&out);
        }
    }
    if let Some(rest) = filter.flush(no_calls) {
        shown.push_str(&rest);
    }
    shown
}

/// Holds back streamed text from the point a tool call starts, so user
/// interfaces do not show the raw call.
struct DeltaFilter {
    profile: PromptProfile,
    active: bool,
    all: String,
    forwarded: usize,
    suppressed: bool,
}

enum Verdict {
    Call,
    NotCall,
    Undecided,
}

impl DeltaFilter {
    fn new(profile: PromptProfile, active: bool) -> Self {
        DeltaFilter {
            profile,
            active,
            all: String::new(),
            forwarded: 0,
            suppressed: false,
        }
    }

    fn push(&mut self, text: &str) -> Option<String> {
        if !self.active {
            return Some(text.to_owned());
        }
        self.all.push_str(text);
        if self.suppressed {
            return None;
        }
        let mut i = self.forwarded;
        let mut until = self.all.len();
        while let Some(off) = self.all[i..].find(['{', '`', '<']) {
            let pos = i + off;
            match self.verdict(pos) {
                Verdict::NotCall => i = pos + 1,
                Verdict::Call => {
                    self.suppressed = true;
                    until = pos;
                    break;
                }
                Verdict::Undecided => {
                    until = pos;
                    break;
                }
            }
        }
        let out = self.all[self.forwarded..until].to_owned();
        self.forwarded = until;
        (!out.is_empty()).then_some(out)
    }

    fn verdict(&self, pos: usize) -> Verdict {
        let rest = &self.all[pos..];
        let starts = |patterns: &[&str], s: &str| {
            if patterns.iter().any(|p| s.starts_with(p)) {
                Verdict::Call
            } else if patterns.iter().any(|p| p.starts_with(s)) {
                Verdict::Undecided
            } else {
                Verdict::NotCall
            }
        };
        match (self.profile, rest.as_bytes().first()) {
            (PromptProfile::Xml, Some(b'<')) => starts(&["<tool_code>", "<tool_call>"], rest),
            (PromptProfile::Json, Some(b'{')) => {
                let key = rest[1..].trim_start();
                if key.is_empty() {
                    Verdict::Undecided
                } else {
                    starts(&["\"tool_calls\"", "\"tool_call\"", "\"name\""], key)
                }
            }
            (PromptProfile::Json, Some(b'`')) => {
                // Only the start matters (lowercasing all the rest for every
                // backtick was quadratic in a long delta).
                let head = rest
                    .char_indices()
                    .nth(17)
                    .map_or(rest, |(k, _)| &rest[..k]);
                let lower = head.to_ascii_lowercase();
                match starts(&["```json", "```\n{", "```\r\n{"], &lower) {
                    Verdict::NotCall if lower.starts_with("```") => {
                        // A fence whose info string is not complete yet.
                        let line = lower.split('\n').next().unwrap_or_default();
                        if !lower.contains('\n') && line.len() < 16 {
                            Verdict::Undecided
                        } else {
                            Verdict::NotCall
                        }
                    }
                    v => v,
                }
            }
            _ => Verdict::NotCall,
        }
    }

    /// What was held back, once the response is complete: nothing after the
    /// start of a call, unless `no_calls` (the text held no call after all).
    fn flush(&mut self, no_calls: bool) -> Option<String> {
        if !self.active || (self.suppressed && !no_calls) || self.forwarded >= self.all.len() {
            return None;
        }
        let out = self.all[self.forwarded..].to_owned();
        self.forwarded = self.all.len();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calls_block_without_a_valid_call_stays_in_the_text() {
        let text = r#"{"tool_calls": [{"nameunction": {"name": "calculate", "arguments": "{\"expression\":\"1\"}"}}]}"#;
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
    }

    fn names(calls: &[ToolCall]) -> Vec<&str> {
        calls.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn json_bare_object() {
        let (text, calls) = parse_tool_calls(
            PromptProfile::Json,
            r#"{"tool_calls":[{"name":"calc","arguments":{"e":"1+1"}}]}"#,
        );
        assert_eq!(text, "");
        assert_eq!(names(&calls), ["calc"]);
        assert_eq!(calls[0].arguments, r#"{"e":"1+1"}"#);
        assert!(calls[0].id.starts_with("call_"));
    }

    #[test]
    fn json_fenced_with_text_around_and_several_calls() {
        let text = "I will compute both.\n```json\n{\n  \"tool_calls\": [\n    {\"name\": \"calc\", \"arguments\": {\"e\": \"1\"}},\n    {\"name\": \"echo\", \"arguments\": {\"s\": \"x\"}}\n  ]\n}\n```\nThen I answer.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calc", "echo"]);
        assert_eq!(rest, "I will compute both.\n\nThen I answer.");
        assert_ne!(calls[0].id, calls[1].id);
    }

    #[test]
    fn json_two_separate_objects_and_single_call_shape() {
        let text = r#"First {"name": "a", "arguments": {}} and {"tool_call": {"name": "b", "arguments": {"k": 1}}} done"#;
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["a", "b"]);
        assert_eq!(calls[1].arguments, r#"{"k":1}"#);
        assert_eq!(rest, "First\n\nand\n\ndone");
    }

    #[test]
    fn json_malformed_is_kept_as_text() {
        let text = "Here: {\"tool_calls\": [{\"name\": \"calc\", \"arguments\": {\"e\": }]}";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
    }

    #[test]
    fn json_ordinary_objects_and_code_are_not_calls() {
        let text =
            "A person: {\"name\": \"Ada\"}\n```python\nprint({\"name\": 1, \"arguments\": 2})\n```";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert!(calls.is_empty());
        assert_eq!(rest, text);
    }

    #[test]
    fn json_string_arguments_and_openai_shape() {
        let text = r#"{"tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"e\":\"2\"}"}}]}"#;
        let (_, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calc"]);
        assert_eq!(calls[0].arguments, r#"{"e":"2"}"#);
    }

    #[test]
    fn json_unclosed_fence() {
        let text = "```json\n{\"tool_calls\":[{\"name\":\"calc\",\"arguments\":{}}]}\n";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calc"]);
        assert_eq!(rest, "");
    }

    #[test]
    fn a_result_the_model_wrote_after_its_call_is_cut_with_what_follows() {
        // Qwen2.5-Coder 1.5B, asked "What is 2*(3+4)?" in the xml protocol.
        let text = "<tool_code>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"2*(3+4)\"}}</tool_code>\n\n<tool_result name=\"calculate\" id=\"1\">14</tool_result>\n<tool_code>{\"name\": \"calculate\", \"arguments\": {\"expression\": \"14\"}}</tool_code>";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(names(&calls), ["calculate"]);
        assert_eq!(calls[0].arguments, r#"{"expression":"2*(3+4)"}"#);
        assert_eq!(rest, "");
        let text = "```json\n{\"tool_calls\": [{\"name\": \"calculate\", \"arguments\": {\"expression\": \"1+1\"}}]}\n```\nTool result (calculate, call 1):\n2\n\nThe answer is 2.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Json, text);
        assert_eq!(names(&calls), ["calculate"]);
        assert_eq!(rest, "");
        // A marker inside a call's arguments, or before any call, is no
        // imitated result.
        let text = "Results look like <tool_result>.\n<tool_code>{\"name\": \"word_count\", \"arguments\": {\"text\": \"<tool_result name=x>\"}}</tool_code>\nDone.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(names(&calls), ["word_count"]);
        assert_eq!(rest, "Results look like <tool_result>.\n\nDone.");
    }

    #[test]
    fn every_rendered_result_starts_with_a_result_marker() {
        for profile in [PromptProfile::Json, PromptProfile::Xml] {
            for is_error in [false, true] {
                let r = render_tool_result(profile, "t", Some("c1"), "out", is_error);
                assert!(
                    result_markers(profile).iter().any(|m| r.starts_with(m)),
                    "{profile:?}: {r}"
                );
            }
        }
    }

    #[test]
    fn result_markers_are_stop_sequences_only_when_tools_may_be_called() {
        let tool = ToolDefinition {
            name: "t".into(),
            description: String::new(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        };
        let mut request = CompletionRequest {
            tools: vec![tool],
            stop: vec!["END".into()],
            ..CompletionRequest::default()
        };
        assert_eq!(
            rewrite(PromptProfile::Xml, &request, false).stop,
            ["END", "<tool_result"]
        );
        assert_eq!(
            rewrite(PromptProfile::Json, &request, false).stop,
            ["END", "Tool result (", "Tool error ("]
        );
        // Constrained: the grammar ends the reply.
        assert_eq!(rewrite(PromptProfile::Json, &request, true).stop, ["END"]);
        // At most four, as OpenAI takes.
        request.stop = vec!["a".into(), "b".into(), "c".into()];
        assert_eq!(rewrite(PromptProfile::Json, &request, false).stop.len(), 4);
        request.tool_choice = ToolChoice::None;
        assert_eq!(
            rewrite(PromptProfile::Xml, &request, false).stop,
            ["a", "b", "c"]
        );
    }

    #[test]
    fn calls_in_the_history_are_written_as_the_instructions_say_name_first() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "calc".into(),
            arguments: r#"{"expr": "1+1"}"#.into(),
        };
        assert_eq!(
            render_tool_calls(PromptProfile::Xml, std::slice::from_ref(&call)),
            r#"<tool_code>{"name": "calc", "arguments": {"expr":"1+1"}, "id": "call_1"}</tool_code>"#
        );
        assert_eq!(
            render_tool_calls(PromptProfile::Json, &[call]),
            "```json\n{\"tool_calls\": [{\"name\": \"calc\", \"arguments\": {\"expr\":\"1+1\"}, \"id\": \"call_1\"}]}\n```"
        );
    }

    #[test]
    fn xml_several_blocks_and_text() {
        let text = "Checking.\n<tool_code>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_code>\n<tool_code>\n```json\n{\"name\": \"b\"}\n```\n</tool_code>\nWait.";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, text);
        assert_eq!(names(&calls), ["a", "b"]);
        assert_eq!(calls[1].arguments, "{}");
        assert_eq!(rest, "Checking.\n\nWait.");
    }

    #[test]
    fn xml_malformed_and_unclosed() {
        let bad = "<tool_code>{\"name\": \"a\", \"arguments\": {</tool_code> ok";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, bad);
        assert!(calls.is_empty());
        assert_eq!(rest, bad);
        let unclosed = "<tool_code>{\"name\": \"a\", \"arguments\": {\"x\": 2}}";
        let (rest, calls) = parse_tool_calls(PromptProfile::Xml, unclosed);
        assert_eq!(names(&calls), ["a"]);
        assert_eq!(rest, "");
    }

    #[test]
    fn xml_ignores_json_convention_and_accepts_tool_call_tag() {
        let (_, calls) = parse_tool_calls(
            PromptProfile::Xml,
            r#"{"tool_calls":[{"name":"a","arguments":{}}]}"#,
        );
        assert!(calls.is_empty());
        let (_, calls) = parse_tool_calls(
            PromptProfile::Xml,
            r#"<tool_call>{"name":"a","arguments":{}}</tool_call>"#,
        );
        assert_eq!(names(&calls), ["a"]);
    }

    #[test]
    fn no_calls_returns_text_unchanged() {
        let text = "  plain answer with < and { and ``` \n";
        for p in [PromptProfile::Json, PromptProfile::Xml] {
            let (rest, calls) = parse_tool_calls(p, text);
            assert!(calls.is_empty());
            assert_eq!(rest, text);
        }
    }

    #[test]
    fn render_round_trips() {
        let calls = vec![
            ToolCall {
                id: "1".into(),
                name: "a".into(),
                arguments: r#"{"x":1}"#.into(),
            },
            ToolCall {
                id: "2".into(),
                name: "b".into(),
                arguments: "{}".into(),
            },
        ];
        for p in [PromptProfile::Json, PromptProfile::Xml] {
            let text = render_tool_calls(p, &calls);
            let (rest, parsed) = parse_tool_calls(p, &text);
            assert_eq!(rest, "");
            assert_eq!(names(&parsed), ["a", "b"]);
            assert_eq!(parsed[0].arguments, r#"{"x":1}"#);
        }
    }

    #[test]
    fn history_conversion_merges_results() {
        let call = ToolCall {
            id: "1".into(),
            name: "calc".into(),
            arguments: "{}".into(),
        };
        let msgs = vec![
            Message::user("q"),
            Message {
                tool_calls: vec![call.clone()],
                ..Message::assistant("thinking")
            },
            Message::tool_result(&call, "42", false),
            Message::tool_result(&call, "oops", true),
        ];
        let out = history_as_text(PromptProfile::Xml, &msgs);
        assert_eq!(out.len(), 3);
        assert!(out[1].tool_calls.is_empty());
        assert!(out[1].content.starts_with("thinking\n\n<tool_code>"));
        assert_eq!(out[2].role, Role::User);
        assert_eq!(
            out[2].content,
            "<tool_result name=\"calc\" id=\"1\">42</tool_result>\n\n<tool_result name=\"calc\" id=\"1\" error=\"true\">oops</tool_result>"
        );
    }

    #[test]
    fn delta_filter_holds_back_calls() {
        let mut f = DeltaFilter::new(PromptProfile::Xml, true);
        let mut shown = String::new();
        for piece in [
            "Let me ",
            "look. <",
            "tool_",
            "code>{\"name\"",
            "...",
            "</tool_code>",
        ] {
            if let Some(s) = f.push(piece) {
                shown.push_str(&s);
            }
        }
        assert_eq!(shown, "Let me look. ");
        assert_eq!(f.flush(false), None);

        let mut f = DeltaFilter::new(PromptProfile::Json, true);
        let mut shown = String::new();
        for piece in ["a {b} ", "c {", "\n  \"tool", "_calls\": []}"] {
            if let Some(s) = f.push(piece) {
                shown.push_str(&s);
            }
        }
        assert_eq!(shown, "a {b} c ");

        let mut f = DeltaFilter::new(PromptProfile::Json, true);
        assert_eq!(f.push("x <y> {").as_deref(), Some("x <y> "));
        assert_eq!(f.flush(true).as_deref(), Some("{"));

        // Looked like a call but was not: everything reaches the sink at the end.
        let mut f = DeltaFilter::new(PromptProfile::Json, true);
        assert_eq!(
            f.push("Ada is {\"name\": \"Ada\"} ok").as_deref(),
            Some("Ada is ")
        );
        assert_eq!(f.flush(true).as_deref(), Some("{\"name\": \"Ada\"} ok"));
    }
}
