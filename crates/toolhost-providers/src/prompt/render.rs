//! Rendering in a prompt protocol: the request as the wrapped provider gets
//! it ([`rewrite`]), with the tool definitions written into the system
//! prompt ([`tool_instructions`]), earlier calls and results written into
//! the history as text, the result markers as stop sequences, and what a
//! constrained reply is held to ([`reply_schema`], or the xml grammar).

use serde_json::{Value, json};

use super::profile::PromptProfile;
use crate::grammar::{xml_call_grammar, xml_reply_grammar};
use crate::message::{Message, Role, ToolCall};
use crate::{CompletionRequest, ToolChoice, ToolDefinition};

/// `request` as sent in `profile`'s convention: tools described in the
/// system prompt, none sent natively, the history in text form.
pub(super) fn rewrite(
    profile: PromptProfile,
    request: &CompletionRequest,
    constrain: bool,
) -> CompletionRequest {
    let mut system = request.system.clone().unwrap_or_default();
    let constrain =
        constrain && !request.tools.is_empty() && request.tool_choice != ToolChoice::None;
    // A call required: the reply may not be an answer.
    let required = request.tool_choice == ToolChoice::Required;
    let response_schema = (constrain && profile == PromptProfile::Json).then(|| {
        if required {
            call_schema(&request.tools)
        } else {
            reply_schema(&request.tools)
        }
    });
    let grammar = match (constrain && profile == PromptProfile::Xml, required) {
        (false, _) => None,
        (true, false) => xml_reply_grammar(&request.tools),
        (true, true) => xml_call_grammar(&request.tools),
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
        if response_schema.is_some() && !required {
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

/// The JSON Schema a constrained reply follows: one to
/// [`MAX_CALLS`](crate::grammar::MAX_CALLS) tool calls of the offered tools,
/// each with its own arguments schema (as the xml grammar allows; without
/// the bound a small model lists calls until the server's limit), or an
/// answer.
pub fn reply_schema(tools: &[ToolDefinition]) -> Value {
    json!({"anyOf": [
        call_schema(tools),
        {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        },
    ]})
}

/// The JSON Schema of a constrained reply when a call is required
/// (`tool_choice: required`): [`reply_schema`] without the answer.
pub fn call_schema(tools: &[ToolDefinition]) -> Value {
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
    json!({
        "type": "object",
        "properties": {"tool_calls": {
            "type": "array",
            "minItems": 1,
            "maxItems": crate::grammar::MAX_CALLS,
            "items": {"anyOf": calls},
        }},
        "required": ["tool_calls"],
    })
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

/// How each convention's result messages start ([`render_tool_result`]):
/// what a model writes when it imitates a result instead of waiting for it.
/// Also sent as stop sequences, so a server stops the model there.
pub fn result_markers(profile: PromptProfile) -> &'static [&'static str] {
    match profile {
        PromptProfile::Json => &["Tool result (", "Tool error ("],
        PromptProfile::Xml => &["<tool_result"],
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
            ))
            .with_attachments(m.attachments.clone()),
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
                last.attachments.extend(converted.attachments);
            }
            _ => out.push(converted),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A tool `t` taking any object.
    fn tool_t() -> ToolDefinition {
        ToolDefinition {
            name: "t".into(),
            description: String::new(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        }
    }

    #[test]
    fn a_constrained_reply_holds_at_most_as_many_calls_as_the_xml_grammar() {
        // Unbounded, a small model lists calls until the server's limit.
        let tool = tool_t();
        let schema = reply_schema(&[tool]);
        let calls = &schema["anyOf"][0]["properties"]["tool_calls"];
        assert_eq!(calls["minItems"], 1);
        assert_eq!(calls["maxItems"], crate::grammar::MAX_CALLS);
    }

    #[test]
    fn a_required_call_leaves_no_answer_in_the_schema_nor_the_grammar() {
        let tool = tool_t();
        let mut request = CompletionRequest {
            tools: vec![tool],
            ..CompletionRequest::default()
        };
        let auto = rewrite(PromptProfile::Json, &request, true);
        let schema = auto.response_schema.expect("constrained");
        assert!(schema.to_string().contains("\"answer\""), "{schema}");
        assert!(auto.system.unwrap_or_default().contains(ANSWER_FORM));
        request.tool_choice = ToolChoice::Required;
        let required = rewrite(PromptProfile::Json, &request, true);
        let schema = required.response_schema.expect("constrained");
        assert!(!schema.to_string().contains("\"answer\""), "{schema}");
        assert_eq!(schema["required"], json!(["tool_calls"]));
        let system = required.system.unwrap_or_default();
        assert!(!system.contains(ANSWER_FORM), "{system}");
        assert!(system.contains("You must call at least one tool now."));
        let xml = rewrite(PromptProfile::Xml, &request, true)
            .grammar
            .expect("constrained");
        assert!(!xml.contains("answer"), "{xml}");
        request.tool_choice = ToolChoice::Auto;
        let xml = rewrite(PromptProfile::Xml, &request, true)
            .grammar
            .expect("constrained");
        assert!(xml.contains("| answer\n"), "{xml}");
    }

    #[test]
    fn result_markers_are_stop_sequences_only_when_tools_may_be_called() {
        let tool = tool_t();
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
}
