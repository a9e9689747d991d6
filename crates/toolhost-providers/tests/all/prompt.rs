//! The prompt protocols (json, xml) around a real provider: rendering,
//! parsing, constrained decoding and its fallback.

use serde_json::{Value, json};
use toolhost_providers::prompt::{Constrain, PromptProfile, PromptTools, parse_tool_calls};
use toolhost_providers::{Delta, FinishReason, Provider};
use toolhost_test_support::fake_model::FakeModel as Server;

use crate::support::*;

#[tokio::test]
async fn prompt_json_profile_round_trip() {
    bounded(async {
        let answer = "I'll use the calculator.\n```json\n{\"tool_calls\": [{\"name\": \"calc\", \"arguments\": {\"expr\": \"6*7\"}}]}\n```";
        let pieces: Vec<Value> = answer
            .as_bytes()
            .chunks(7)
            .map(|c| text_chunk(std::str::from_utf8(c).unwrap()))
            .chain([finish_chunk("stop")])
            .collect();
        let server = Server::replies(vec![sse(openai_frames(&pieces))]).await;
        let provider =
            PromptTools::new(openai(&server), PromptProfile::Json).with_constrain(Constrain::Off);
        assert_eq!(provider.name(), "openai+json");
        let (r, deltas) = run(&provider, &request_with_history()).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "I'll use the calculator.");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        assert_eq!(c.message.tool_calls.len(), 1);
        assert_eq!(c.message.tool_calls[0].name, "calc");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"expr":"6*7"}"#);
        assert!(!c.message.tool_calls[0].id.is_empty());
        // The UI saw the text but not the raw call.
        let shown = texts(&deltas).concat();
        assert_eq!(shown, "I'll use the calculator.\n");
        assert!(deltas.iter().any(|d| matches!(d, Delta::ToolCallStarted { name, .. } if name == "calc")));

        let b = &server.received()[0].body;
        assert!(b.get("tools").is_none());
        assert!(b.get("tool_choice").is_none());
        let m = b["messages"].as_array().unwrap();
        let system = m[0]["content"].as_str().unwrap();
        assert_eq!(m[0]["role"], "system");
        assert!(system.starts_with("You are terse."));
        assert!(system.contains("## calc"));
        assert!(system.contains("Evaluates an arithmetic expression."));
        assert!(system.contains(r#""required":["expr"]"#));
        assert!(system.contains(r#"{"tool_calls": [{"name": "<tool name>""#));
        // History: the assistant's calls as text, the results as one user message.
        assert_eq!(m.len(), 4);
        assert!(m[2].get("tool_calls").is_none());
        let earlier = m[2]["content"].as_str().unwrap();
        assert!(earlier.starts_with("Computing.\n\n```json\n"), "{earlier}");
        let (_, calls) = parse_tool_calls(PromptProfile::Json, earlier);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[1].arguments, r#"{"expr":"1/0"}"#);
        assert_eq!(m[3]["role"], "user");
        assert_eq!(
            m[3]["content"],
            "Tool result (calc, call call_a):\n42\n\nTool error (calc, call call_b):\ndivision by zero"
        );
    })
    .await;
}

#[tokio::test]
async fn the_json_protocol_asks_for_constrained_decoding_and_reads_the_answer_form() {
    bounded(async {
        let reply = r#"{"answer": "It is 42."}"#;
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk(reply),
            finish_chunk("stop"),
        ]))])
        .await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Json);
        let (r, deltas) = run(&provider, &request_with_history()).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "It is 42.");
        assert!(c.message.tool_calls.is_empty());
        assert_eq!(
            texts(&deltas).concat(),
            "It is 42.",
            "the UI sees the answer, not the JSON"
        );
        let body = &server.received()[0].body;
        let format = &body["response_format"];
        assert_eq!(format["type"], "json_schema", "{body}");
        let schema = &format["json_schema"]["schema"];
        let call = &schema["anyOf"][0]["properties"]["tool_calls"]["items"]["anyOf"][0];
        assert_eq!(call["properties"]["name"]["const"], "calc");
        assert_eq!(call["properties"]["arguments"]["required"][0], "expr");
        assert_eq!(schema["anyOf"][1]["required"][0], "answer");
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(
            system.contains(r#"{"answer": "<your answer>"}"#),
            "{system}"
        );
    })
    .await;
}

#[tokio::test]
async fn through_the_anthropic_wire_the_json_protocol_neither_constrains_nor_asks_for_the_answer_form()
 {
    bounded(async {
        // That wire has no schema field: nothing holds the reply to JSON,
        // so the model is not told to answer in JSON, and its words stream
        // as they come.
        let server = Server::replies(vec![sse(anthropic_frames(&anthropic_text_events(
            "It is 42.",
        )))])
        .await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Json);
        assert!(!provider.constrains());
        let (r, deltas) = run(&provider, &request_with_history()).await;
        assert_eq!(r.unwrap().message.content, "It is 42.");
        assert_eq!(texts(&deltas).concat(), "It is 42.");
        let body = &server.received()[0].body;
        let system = body["system"].to_string();
        assert!(system.contains("## calc"), "{system}");
        assert!(system.contains("answer in plain text"), "{system}");
        assert!(!system.contains(r#"\"answer\""#), "{system}");
        assert!(body.get("response_format").is_none(), "{body}");
        // The result markers stop it, as in any unconstrained request.
        assert_eq!(
            body["stop_sequences"],
            json!(["Tool result (", "Tool error ("])
        );
    })
    .await;
}

#[tokio::test]
async fn a_server_that_refuses_constrained_decoding_is_asked_without_from_then_on() {
    bounded(async {
        let refusal = status_reply(
            400,
            r#"{"error": {"message": "response_format is not supported"}}"#,
        );
        let answer = || {
            sse(openai_frames(&[
                text_chunk("plain answer"),
                finish_chunk("stop"),
            ]))
        };
        let server = Server::replies(vec![refusal, answer(), answer()]).await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Json);
        assert!(provider.constrains());
        let (r, _) = run(&provider, &request_with_history()).await;
        assert_eq!(r.unwrap().message.content, "plain answer");
        assert!(!provider.constrains(), "remembered");
        let (r, _) = run(&provider, &request_with_history()).await;
        assert_eq!(r.unwrap().message.content, "plain answer");
        let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), 3);
        assert!(bodies[0].get("response_format").is_some());
        assert!(
            bodies[1].get("response_format").is_none(),
            "the same request again, without"
        );
        assert!(
            bodies[2].get("response_format").is_none(),
            "and every request after"
        );
        // Forced on, a refusal is an error.
        let server = Server::replies(vec![status_reply(400, "json_schema unsupported")]).await;
        let forced =
            PromptTools::new(openai(&server), PromptProfile::Json).with_constrain(Constrain::On);
        let (r, _) = run(&forced, &request_with_history()).await;
        assert!(r.is_err());
    })
    .await;
}

#[tokio::test]
async fn the_xml_protocol_is_constrained_by_a_grammar_and_falls_back_when_refused() {
    bounded(async {
        let answer = || {
            sse(openai_frames(&[
                text_chunk("<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"1\"}}</tool_code>"),
                finish_chunk("stop"),
            ]))
        };
        // OpenAI's answer to a field it does not know.
        let refusal = status_reply(
            400,
            r#"{"error": {"message": "Unrecognized request argument supplied: grammar", "type": "invalid_request_error"}}"#,
        );
        let server = Server::replies(vec![answer(), refusal, answer(), answer()]).await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Xml);
        assert!(provider.constrains());
        let (r, _) = run(&provider, &request(vec![calc_tool()])).await;
        assert_eq!(r.unwrap().message.tool_calls.len(), 1);
        let (r, _) = run(&provider, &request(vec![calc_tool()])).await;
        assert_eq!(r.unwrap().message.tool_calls[0].name, "calc");
        assert!(!provider.constrains(), "the refusal is remembered");
        let (r, _) = run(&provider, &request(vec![calc_tool()])).await;
        assert!(r.is_ok());
        let bodies: Vec<Value> = server.received().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), 4);
        let grammar = bodies[0]["grammar"].as_str().expect("a grammar is sent");
        assert!(
            grammar.starts_with(r#"root ::= call ("\n" call){0,3} ("\n"{0,2} "<tool_result")? | answer"#),
            "bounded calls, and a way out at an imitated result: {grammar}"
        );
        assert!(
            grammar.contains(r#"call-0 ::= "\"calc\"" ws"#),
            "the offered name: {grammar}"
        );
        assert!(bodies[0].get("response_format").is_none());
        // The grammar ends a call block; the result marker still stops a
        // server that ignores the grammar.
        assert_eq!(bodies[0]["stop"], json!(["<tool_result"]));
        assert!(bodies[1].get("grammar").is_some());
        assert!(bodies[2].get("grammar").is_none(), "asked again without");
        assert!(bodies[3].get("grammar").is_none(), "and from then on");
        // Off: never sent.
        let server = Server::replies(vec![answer()]).await;
        let off = PromptTools::new(openai(&server), PromptProfile::Xml).with_constrain(Constrain::Off);
        let _ = run(&off, &request(vec![calc_tool()])).await;
        assert!(server.received()[0].body.get("grammar").is_none());
        // The Anthropic wire format has no such field.
        let server = Server::replies(vec![]).await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Xml);
        let _ = run(&provider, &request(vec![calc_tool()])).await;
        assert!(server.received()[0].body.get("grammar").is_none());
    })
    .await;
}

#[tokio::test]
async fn prompt_xml_profile_round_trip() {
    bounded(async {
        let answer = "Two at once.\n<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"1+1\"}}</tool_code>\n<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"2+2\"}}</tool_code>";
        let events = vec![
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": answer}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 30}}),
            json!({"type": "message_stop"}),
        ];
        let server = Server::replies(vec![sse(anthropic_frames(&events))]).await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Xml);
        let (r, _) = run(&provider, &request_with_history()).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "Two at once.");
        assert_eq!(c.finish_reason, FinishReason::ToolCalls);
        let args: Vec<&str> = c.message.tool_calls.iter().map(|t| t.arguments.as_str()).collect();
        assert_eq!(args, [r#"{"expr":"1+1"}"#, r#"{"expr":"2+2"}"#]);
        assert_ne!(c.message.tool_calls[0].id, c.message.tool_calls[1].id);
        assert_eq!(c.usage.output_tokens, 30);

        let b = &server.received()[0].body;
        assert!(b.get("tools").is_none());
        assert!(b.get("tool_choice").is_none());
        let system = b["system"][0]["text"].as_str().unwrap();
        assert!(system.contains("## calc") && system.contains("<tool_code>"));
        let m = b["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        let assistant = m[1]["content"][0]["text"].as_str().unwrap();
        assert!(assistant.starts_with("Computing.\n\n<tool_code>"), "{assistant}");
        assert!(m[1]["content"].as_array().unwrap().iter().all(|b| b["type"] == "text"));
        assert_eq!(
            m[2]["content"][0]["text"],
            "<tool_result name=\"calc\" id=\"call_a\">42</tool_result>\n\n<tool_result name=\"calc\" id=\"call_b\" error=\"true\">division by zero</tool_result>"
        );
    })
    .await;
}

#[tokio::test]
async fn a_result_the_model_invents_after_its_call_is_stopped_and_dropped() {
    bounded(async {
        // What Qwen2.5-Coder 1.5B wrote for "What is 2*(3+4)?" in the xml
        // protocol: its call, then the result it expected.
        let invented = "<tool_code>{\"name\": \"calc\", \"arguments\": {\"expr\": \"2*(3+4)\"}}</tool_code>\n\n<tool_result name=\"calc\" id=\"1\">14</tool_result>";
        let server = Server::replies(vec![sse(openai_frames(&[
            text_chunk(invented),
            finish_chunk("stop"),
        ]))])
        .await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Xml);
        let (r, deltas) = run(&provider, &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "", "the invented result is not kept");
        assert_eq!(c.message.tool_calls.len(), 1);
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"expr":"2*(3+4)"}"#);
        assert_eq!(texts(&deltas).concat(), "", "nor shown");
        // The server is asked to stop the model where a result would start.
        assert_eq!(server.received()[0].body["stop"], json!(["<tool_result"]));

        // The same through the Anthropic wire format, json protocol.
        let server = Server::replies(vec![]).await;
        let provider = PromptTools::new(anthropic(&server), PromptProfile::Json)
            .with_constrain(Constrain::Off);
        let _ = run(&provider, &request(vec![calc_tool()])).await;
        assert_eq!(
            server.received()[0].body["stop_sequences"],
            json!(["Tool result (", "Tool error ("])
        );
    })
    .await;
}

#[tokio::test]
async fn prompt_profile_without_calls_keeps_the_answer() {
    bounded(async {
        let chunks = vec![text_chunk("It is {about} 42."), finish_chunk("stop")];
        let server = Server::replies(vec![sse(openai_frames(&chunks))]).await;
        let provider = PromptTools::new(openai(&server), PromptProfile::Json);
        let (r, deltas) = run(&provider, &request(vec![calc_tool()])).await;
        let c = r.unwrap();
        assert_eq!(c.message.content, "It is {about} 42.");
        assert!(c.message.tool_calls.is_empty());
        assert_eq!(c.finish_reason, FinishReason::Stop);
        assert_eq!(texts(&deltas).concat(), "It is {about} 42.");
    })
    .await;
}
