//! Choosing a provider from flags, config and environment.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_providers::ToolDefinition;
use toolhost_providers::prompt::Constrain;
use toolhost_providers::select::{self, ProviderConfig, ProviderKind};
use toolhost_test_support::fake_model::FakeModel as Server;

use crate::support::*;

#[tokio::test]
async fn select_prefers_explicit_then_keys_then_ollama() {
    bounded(async {
        let tags = json!({"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "size": 1}]});
        let server = Server::replies(vec![json_reply(tags.clone()), json_reply(tags)]).await;
        let root = server.url("");
        let no_env = |_: &str| None;

        let s = select::select_with(None, &no_env, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Ollama);
        assert_eq!(s.model, "qwen3:8b");
        assert_eq!(s.base_url, format!("{root}/v1"));
        assert_eq!(server.received()[0].path, "/api/tags");

        let keys = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "ak".to_owned());
        let s = select::select_with(None, &keys, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Anthropic);

        let both = |k: &str| k.ends_with("_API_KEY").then(|| "k".to_owned());
        let s = select::select_with(None, &both, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Openai);
        assert_eq!(s.model, select::OPENAI_DEFAULT_MODEL);

        let explicit = ProviderConfig {
            protocol: select::ToolProtocol::Json,
            ..ProviderConfig::new(ProviderKind::Ollama)
        };
        let s = select::select_with(Some(&explicit), &both, Some(&root))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(s.kind, ProviderKind::Ollama);
        assert_eq!(s.model, "qwen3:8b");
        assert_eq!(s.provider.name(), "ollama+json");
    })
    .await;
}

#[tokio::test]
async fn a_configured_constrain_reaches_both_prompt_protocols() {
    bounded(async {
        for (protocol, field) in [
            (select::ToolProtocol::Json, "response_format"),
            (select::ToolProtocol::Xml, "grammar"),
        ] {
            for (constrain, sent) in [(Constrain::Auto, true), (Constrain::Off, false)] {
                let server = Server::replies(vec![sse(openai_frames(&[
                    text_chunk("ok"),
                    finish_chunk("stop"),
                ]))])
                .await;
                let config = ProviderConfig {
                    base_url: Some(server.url("/v1")),
                    model: Some("m".into()),
                    protocol,
                    constrain,
                    ..ProviderConfig::new(ProviderKind::Openai)
                };
                let env = |_: &str| Some("key".to_owned());
                let selected = config.build_with(&env).unwrap();
                let _ = run(selected.provider.as_ref(), &request(vec![calc_tool()])).await;
                let body = &server.received()[0].body;
                assert_eq!(
                    body.get(field).is_some(),
                    sent,
                    "{protocol:?} with {constrain:?}: {body}"
                );
            }
        }
    })
    .await;
}

#[tokio::test]
async fn native_calls_constrained_on_send_strict_schemas_and_drop_the_nulls_they_cause() {
    bounded(async {
        let optional = ToolDefinition {
            name: "read".into(),
            description: "Reads.".into(),
            parameters: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]})
            .into(),
        };
        let reply = || {
            sse(openai_frames(&[
                tool_call_chunk(
                    0,
                    Some("c1"),
                    Some("read"),
                    r#"{"path": "a.txt", "limit": null}"#,
                ),
                finish_chunk("tool_calls"),
            ]))
        };
        for (constrain, strict) in [
            (Constrain::On, true),
            (Constrain::Auto, false),
            (Constrain::Off, false),
        ] {
            let server = Server::replies(vec![reply()]).await;
            let config = ProviderConfig {
                base_url: Some(server.url("/v1")),
                model: Some("m".into()),
                constrain,
                ..ProviderConfig::new(ProviderKind::Openai)
            };
            let env = |_: &str| Some("key".to_owned());
            let provider = config.build_with(&env).unwrap().provider;
            let (r, _) = run(provider.as_ref(), &request(vec![optional.clone()])).await;
            let call = &r.unwrap().message.tool_calls[0];
            let body = &server.received()[0].body;
            let function = &body["tools"][0]["function"];
            if strict {
                assert_eq!(function["strict"], true, "{body}");
                assert_eq!(function["parameters"]["additionalProperties"], false);
                assert_eq!(function["parameters"]["required"], json!(["limit", "path"]));
                // The tool sees the call it would have seen without strict mode.
                assert_eq!(call.arguments, r#"{"path":"a.txt"}"#);
            } else {
                assert!(function.get("strict").is_none(), "{constrain:?}: {body}");
                assert_eq!(function["parameters"], *optional.parameters);
                assert_eq!(call.arguments, r#"{"path": "a.txt", "limit": null}"#);
            }
        }
    })
    .await;
}

#[tokio::test]
async fn select_returns_none_quickly_without_any_model() {
    bounded(async {
        // A port nobody listens on, and a server that never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let silent_url = format!("http://{}", silent.local_addr().unwrap());
        let no_env = |_: &str| None;
        for root in [closed, silent_url] {
            let started = Instant::now();
            let s = select::select_with(None, &no_env, Some(&root))
                .await
                .unwrap();
            assert!(s.is_none());
            assert!(started.elapsed() < Duration::from_millis(1500));
        }
        drop(silent);
    })
    .await;
}
