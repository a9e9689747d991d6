//! The MCP clients people run (Claude Code, Codex, Gemini CLI, Qwen Code,
//! opencode; installed from npm by `cargo xtask test`), each configured
//! with nothing but what `host mcp config CLIENT` prints, and checked with
//! its own commands: over stdio (the client starts `host … mcp`) and over
//! HTTP with a bearer token (a `host serve`), both connect; a wrong token
//! does not, and is reported as far as the client reports anything. Where
//! a client runs a prompt against a local model server, a scripted model
//! calls a tool through toolhost from that client, and the call is in the
//! audit (`examples/hooks/audit.sh`) under the caller that made it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};
use toolhost_test_support::clients::{self, Client, listed};

use crate::mcp::{Served, host_args, serve};
use crate::support::*;

/// The token the `host serve` accepts, and the one it does not.
const TOKEN: &str = "clients-test-token-7f3a";
const WRONG: &str = "not-the-token";

/// A `host serve` of the calculator behind [`TOKEN`], the audit hook on,
/// and a home and a project directory for one client.
struct Scene {
    dir: tempfile::TempDir,
    served: Served,
    home: tempfile::TempDir,
    project: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        copy_plugin(&plugins_dir(), "calc", dir.path());
        let audit = root().join("examples/hooks/audit.sh");
        std::fs::write(
            dir.path().join("toolhost.toml"),
            format!(
                "[[hooks]]\nname = \"audit\"\ncommand = [\"sh\", \"{}\"]\nstages = [\"after\"]\n\
                 env = {{ TOOLHOST_AUDIT_LOG = \"{}\" }}\n",
                audit.display(),
                dir.path().join("audit.log").display()
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("tokens"), format!("{TOKEN}\n")).unwrap();
        let served = serve(&host_args(
            dir.path(),
            &[
                "-v",
                "--plugins",
                &dir.path().display().to_string(),
                "--config",
                &dir.path().join("toolhost.toml").display().to_string(),
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &dir.path().join("tokens").display().to_string(),
            ],
        ));
        Scene {
            dir,
            served,
            home: tempfile::tempdir().unwrap(),
            project: tempfile::tempdir().unwrap(),
        }
    }

    /// What `host … mcp config CLIENT ARGS…` prints, with the flags this
    /// scene's `host serve` has (so a stdio entry starts the same gate).
    fn config(&self, client: Client, args: &[&str]) -> String {
        let dir = self.dir.path().display().to_string();
        let config = self.dir.path().join("toolhost.toml").display().to_string();
        let mut all = vec!["--plugins", &dir, "--config", &config, "mcp", "config"];
        all.push(client.name());
        all.extend_from_slice(args);
        let argv = host_args(self.dir.path(), &all);
        let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
        assert!(
            out.status.success(),
            "host mcp config {}: {}",
            client.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The three entries, `th-stdio`, `th-http` (the token) and
    /// `th-wrong` (a wrong token), written where `client` reads them.
    fn configure(&self, client: Client) {
        let url = format!("{}/mcp", self.served.base);
        let stdio = self.config(client, &["--name", "th-stdio"]);
        let http = self.config(
            client,
            &[
                "--name",
                "th-http",
                "--url",
                &url,
                "--token-env",
                "TEST_TOOLHOST_TOKEN",
            ],
        );
        let wrong = self.config(
            client,
            &[
                "--name",
                "th-wrong",
                "--url",
                &url,
                "--token-env",
                "TEST_WRONG_TOKEN",
            ],
        );
        let home = self.home.path();
        let project = self.project.path();
        let trusted = json!({ project.display().to_string(): "TRUST_FOLDER" });
        match client {
            Client::Codex => {
                write_file(
                    &home.join(".codex/config.toml"),
                    &format!("{stdio}\n{http}\n{wrong}"),
                );
            }
            Client::Claude => {
                write_json(
                    &project.join(".mcp.json"),
                    &merged(&[&stdio, &http, &wrong]),
                );
                // What answering claude's "use this project's servers?" does.
                write_json(
                    &home.join(".claude/settings.json"),
                    &json!({"enableAllProjectMcpServers": true}),
                );
            }
            Client::Gemini => {
                write_json(
                    &home.join(".gemini/settings.json"),
                    &merged(&[&stdio, &http, &wrong]),
                );
                write_json(&home.join(".gemini/trustedFolders.json"), &trusted);
            }
            Client::Qwen => {
                write_json(
                    &home.join(".qwen/settings.json"),
                    &merged(&[&stdio, &http, &wrong]),
                );
                write_json(&home.join(".qwen/trustedFolders.json"), &trusted);
            }
            Client::Opencode => {
                write_json(
                    &project.join("opencode.json"),
                    &merged(&[&stdio, &http, &wrong]),
                );
            }
        }
    }

    /// `client args…` in this scene, the two tokens in its environment.
    fn client(&self, client: Client, args: &[&str]) -> Command {
        let mut cmd = clients::command(client, self.home.path(), self.project.path(), args);
        cmd.env("TEST_TOOLHOST_TOKEN", TOKEN)
            .env("TEST_WRONG_TOKEN", WRONG);
        cmd
    }

    /// Runs `client args…`; its stdout and stderr together.
    fn run(&self, client: Client, args: &[&str]) -> String {
        let out = self.client(client, args).output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// The audit's lines so far.
    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("audit.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Whether the server logged a refused token (not a missing one).
    fn refused_a_wrong_token(&self) -> bool {
        self.served
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("refused: the bearer token is not one this server accepts"))
    }
}

fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn write_json(path: &Path, value: &Value) {
    write_file(path, &serde_json::to_string_pretty(value).unwrap());
}

/// The JSON snippets merged into one file, object by object.
fn merged(snippets: &[&str]) -> Value {
    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (slot, v) => *slot = v,
        }
    }
    let mut all = json!({});
    for snippet in snippets {
        merge(&mut all, serde_json::from_str(snippet).unwrap());
    }
    all
}

/// Whether an entry's own line of `mcp list` (the next one is another
/// entry's, or opencode's reason) says it connected: "Connected" or
/// "connected", never "Disconnected", "failed" or "needs authentication".
fn connected(listed: &str) -> bool {
    let own = listed.lines().next().unwrap_or_default().to_lowercase();
    own.contains("connected")
        && !own.contains("disconnected")
        && !own.contains("failed")
        && !own.contains("needs authentication")
}

/// `mcp list` of `client`, checked: both good entries connected, the wrong
/// token not, its line returned.
fn listed_three(scene: &Scene, client: Client) -> String {
    scene.configure(client);
    let out = scene.run(client, &["mcp", "list"]);
    for name in ["th-stdio", "th-http"] {
        let line = listed(&out, name).unwrap_or_else(|| panic!("{name} not listed:\n{out}"));
        assert!(connected(&line), "{name} did not connect:\n{out}");
    }
    let line = listed(&out, "th-wrong").unwrap_or_else(|| panic!("th-wrong not listed:\n{out}"));
    let own = line.lines().next().unwrap_or_default();
    assert!(
        !connected(own) && !own.contains("✔") && !own.contains("✓"),
        "a wrong token connected:\n{out}"
    );
    assert!(
        scene.refused_a_wrong_token(),
        "the server saw no wrong token"
    );
    line
}

#[test]
fn claude_code_connects_over_both_transports_and_names_a_wrong_token() {
    let scene = Scene::new();
    let line = listed_three(&scene, Client::Claude);
    assert!(
        line.contains("401") && line.contains("not one this server accepts"),
        "{line}"
    );
}

#[test]
fn gemini_cli_connects_over_both_transports_and_a_wrong_token_does_not() {
    let scene = Scene::new();
    // Gemini CLI says only "Disconnected"; the server's log says why.
    let line = listed_three(&scene, Client::Gemini);
    assert!(line.contains("Disconnected"), "{line}");
}

#[test]
fn qwen_code_connects_over_both_transports_and_a_wrong_token_does_not() {
    let scene = Scene::new();
    let line = listed_three(&scene, Client::Qwen);
    assert!(line.contains("Disconnected"), "{line}");
}

#[test]
fn opencode_connects_over_both_transports_and_says_a_wrong_token_needs_authentication() {
    let scene = Scene::new();
    // After the 401, opencode looks for OAuth, reads toolhost's answer
    // that there is none, and says the server needs authentication.
    let line = listed_three(&scene, Client::Opencode);
    assert!(line.contains("needs authentication"), "{line}");
}

#[test]
fn codex_keeps_each_entry_as_host_mcp_config_printed_it() {
    let scene = Scene::new();
    scene.configure(Client::Codex);
    let out = scene.run(Client::Codex, &["mcp", "list", "--json"]);
    let start = out
        .find('[')
        .unwrap_or_else(|| panic!("no JSON list:\n{out}"));
    let end = out.rfind(']').unwrap();
    let list: Vec<Value> = serde_json::from_str(&out[start..=end]).unwrap();
    let entry = |name: &str| {
        list.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("{name} not in {out}"))
            .clone()
    };
    let stdio = entry("th-stdio");
    assert_eq!(
        PathBuf::from(stdio["transport"]["command"].as_str().unwrap()),
        Path::new(env!("CARGO_BIN_EXE_host"))
            .canonicalize()
            .unwrap(),
        "{stdio}"
    );
    let http = entry("th-http");
    assert_eq!(
        http["transport"]["bearer_token_env_var"], "TEST_TOOLHOST_TOKEN",
        "{http}"
    );
    assert!(
        !out.contains(TOKEN),
        "the token itself is never in the config"
    );
}

/// The tools named `…calculate…` a client offered in a model request,
/// sorted (one from `th-http`, one from `th-stdio`; `th-wrong` never
/// connected). A tool in a namespace (Codex's one per MCP server) is
/// `NAMESPACE/NAME`.
fn calculators(body: &Value) -> Vec<String> {
    let mut names = Vec::new();
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] == "namespace" {
            let space = tool["name"].as_str().unwrap_or_default();
            for inner in tool["tools"].as_array().into_iter().flatten() {
                if let Some(name) = inner["name"].as_str() {
                    names.push(format!("{space}/{name}"));
                }
            }
        } else if let Some(name) = tool["name"].as_str().or(tool["function"]["name"].as_str()) {
            names.push(name.to_owned());
        }
    }
    names.retain(|n| n.contains("calculate"));
    names.sort();
    names
}

/// Answers the model requests of one client run: each asks for the next
/// calculator it has not called yet (`results` counts the tool results its
/// messages carry), and then the answer; every other request (titles,
/// token counts) gets a short text.
fn scripted(
    received: &fake_model::Received,
    results: fn(&Value) -> usize,
    call: fn(&str, &Value) -> String,
    text: fn(&Value, &str) -> String,
) -> fake_model::Reply {
    let body = &received.body;
    let names = calculators(body);
    let done = results(body);
    let reply = match names.get(done) {
        Some(name) => call(name, body),
        None if done > 0 => text(body, "6*7 is 42, twice."),
        None => text(body, "ok"),
    };
    raw(&reply)
}

/// A whole reply: JSON, or SSE when it starts with `event:`/`data:`.
fn raw(reply: &str) -> fake_model::Reply {
    let kind = if reply.starts_with('{') {
        "application/json"
    } else {
        "text/event-stream"
    };
    fake_model::Reply::Full {
        status: 200,
        headers: vec![("content-type", kind.to_owned())],
        body: reply.to_owned(),
    }
}

/// The tools each model request offered, a line a request (for a
/// failure's message).
fn offered(model: &ModelServer) -> String {
    model
        .received()
        .iter()
        .map(|r| {
            let names: Vec<&str> = r.body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().or(t["function"]["name"].as_str()))
                .collect();
            format!("{} {}", r.path, names.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The audit's calls of `calculate`: one from the stdio client, one from
/// the HTTP client under its token's identity, both 42.
fn assert_audited_both(scene: &Scene, said: &str) {
    let calls: Vec<Value> = scene
        .audit()
        .into_iter()
        .filter(|l| l["call"]["tool"] == "calculate")
        .collect();
    assert_eq!(calls.len(), 2, "{calls:?}\n{said}");
    let by_token = calls
        .iter()
        .filter(|c| {
            c["call"]["client"]
                .as_str()
                .is_some_and(|c| c.starts_with("token:"))
        })
        .count();
    assert_eq!(by_token, 1, "one over HTTP, under its token: {calls:?}");
    for call in &calls {
        assert!(call.to_string().contains("42"), "{call}");
    }
}

#[test]
fn claude_code_calls_a_tool_over_each_transport_and_the_audit_has_both() {
    let scene = Scene::new();
    scene.configure(Client::Claude);
    let model = ModelServer::start_replies(|_, received| {
        if received.path.contains("count_tokens") {
            return raw(r#"{"input_tokens": 10}"#);
        }
        scripted(
            received,
            |body| {
                body["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|m| m["content"].as_array().into_iter().flatten())
                    .filter(|c| c["type"] == "tool_result")
                    .count()
            },
            |name, _| {
                anthropic_sse(&[
                    json!({"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant", "model": "fake", "content": [], "usage": {"input_tokens": 40, "output_tokens": 1}}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": format!("toolu_{name}"), "name": name, "input": {}}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"expression\": \"6*7\"}"}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 12}}),
                    json!({"type": "message_stop"}),
                ])
            },
            |body, text| {
                if body["stream"] == true {
                    anthropic_sse(&[
                        json!({"type": "message_start", "message": {"id": "m2", "type": "message", "role": "assistant", "model": "fake", "content": [], "usage": {"input_tokens": 60, "output_tokens": 1}}}),
                        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
                        json!({"type": "content_block_stop", "index": 0}),
                        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
                        json!({"type": "message_stop"}),
                    ])
                } else {
                    json!({"id": "m3", "type": "message", "role": "assistant", "model": "fake", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 5}}).to_string()
                }
            },
        )
    });
    let out = scene
        .client(
            Client::Claude,
            &[
                "-p",
                "What is 6*7? Ask both calculators.",
                "--model",
                "claude-fake",
                "--allowedTools",
                "mcp__th-http",
                "mcp__th-stdio",
            ],
        )
        // Every tool in the request, none deferred behind its tool search
        // (which a scripted model would have to drive first).
        .env("ENABLE_TOOL_SEARCH", "false")
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        )
        .env("ANTHROPIC_API_KEY", "fake-key")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = format!("{said}\n--- tools offered\n{}", offered(&model));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("42, twice"), "{said}");
    assert_audited_both(&scene, &said);
}

/// The OpenAI side of [`scripted`]: tool results are `role: tool`
/// messages; a tool call and a text, streamed or whole.
fn openai_scripted(received: &fake_model::Received) -> fake_model::Reply {
    scripted(
        received,
        |body| {
            body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "tool")
                .count()
        },
        |name, body| {
            if body["stream"] == true {
                openai_tool_call(&format!("call_{name}"), name, r#"{"expression": "6*7"}"#)
            } else {
                json!({"id": "c1", "object": "chat.completion", "model": "fake", "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": [{"id": format!("call_{name}"), "type": "function", "function": {"name": name, "arguments": "{\"expression\": \"6*7\"}"}}]}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).to_string()
            }
        },
        |body, text| {
            if body["stream"] == true {
                openai_text(text)
            } else {
                json!({"id": "c2", "object": "chat.completion", "model": "fake", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}).to_string()
            }
        },
    )
}

#[test]
fn qwen_code_calls_a_tool_over_each_transport_and_the_audit_has_both() {
    let scene = Scene::new();
    scene.configure(Client::Qwen);
    // Every tool in the request, none deferred behind its tool search.
    let settings = scene.home.path().join(".qwen/settings.json");
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    value["tools"] = json!({"toolSearch": {"enabled": false}});
    write_json(&settings, &value);
    let model = ModelServer::start_replies(|_, received| openai_scripted(received));
    let out = scene
        .client(
            Client::Qwen,
            &[
                "--yolo",
                "--auth-type",
                "openai",
                "--model",
                "fake-model",
                "--openai-api-key",
                "fake-key",
                "--openai-base-url",
                &format!("http://127.0.0.1:{}/v1", model.port),
                "What is 6*7? Ask both calculators.",
            ],
        )
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let said = format!("{said}\n--- tools offered\n{}", offered(&model));
    assert!(out.status.success(), "{said}");
    assert!(said.contains("42, twice"), "{said}");
    assert_audited_both(&scene, &said);
}

/// One Responses API event stream (`event: TYPE`, its data), as Codex reads it.
fn responses_sse(items: &[Value]) -> String {
    let mut events = vec![json!({"type": "response.created", "response": {"id": "resp_1"}})];
    events.extend(
        items
            .iter()
            .map(|item| json!({"type": "response.output_item.done", "item": item})),
    );
    events.push(json!({"type": "response.completed", "response": {"id": "resp_1", "usage": {"input_tokens": 10, "input_tokens_details": null, "output_tokens": 5, "output_tokens_details": null, "total_tokens": 15}}}));
    anthropic_sse(&events)
}

#[test]
fn codex_calls_a_tool_over_each_transport_and_the_audit_has_both() {
    let scene = Scene::new();
    scene.configure(Client::Codex);
    let model = ModelServer::start_replies(|_, received| {
        scripted(
            received,
            |body| {
                body["input"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|i| i["type"] == "function_call_output")
                    .count()
            },
            |qualified, _| {
                let (space, name) = qualified.split_once('/').unwrap_or(("", qualified));
                let id = qualified.replace('/', "_");
                responses_sse(&[
                    json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": format!("call_{id}"), "namespace": space, "name": name, "arguments": "{\"expression\": \"6*7\"}"}),
                ])
            },
            |_, text| {
                responses_sse(&[
                    json!({"type": "message", "role": "assistant", "id": "msg_1", "content": [{"type": "output_text", "text": text}]}),
                ])
            },
        )
    });
    // The scripted model, before the servers `host mcp config` wrote.
    let config = scene.home.path().join(".codex/config.toml");
    let servers = std::fs::read_to_string(&config).unwrap();
    write_file(
        &config,
        &format!(
            "model = \"fake-model\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\n\
             name = \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nenv_key = \"FAKE_MODEL_KEY\"\n\
             wire_api = \"responses\"\n\n{servers}",
            model.port
        ),
    );
    let out = scene
        .client(
            Client::Codex,
            &[
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "What is 6*7? Ask both calculators.",
            ],
        )
        .env("FAKE_MODEL_KEY", "fake-key")
        .output()
        .unwrap();
    let said = format!(
        "{}{}\n--- tools offered\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        offered(&model)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("42, twice"), "{said}");
    assert_audited_both(&scene, &said);
    // Codex reports the wrong token's entry with toolhost's reason.
    assert!(
        said.contains("the bearer token is not one this server accepts"),
        "{said}"
    );
}

#[test]
fn opencode_calls_a_tool_over_each_transport_and_the_audit_has_both() {
    let scene = Scene::new();
    scene.configure(Client::Opencode);
    let model = ModelServer::start_replies(|_, received| openai_scripted(received));
    // The scripted model as an OpenAI-compatible provider, beside the
    // servers `host mcp config` wrote.
    let file = scene.project.path().join("opencode.json");
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    config["provider"] = json!({"fake": {
        "npm": "@ai-sdk/openai-compatible",
        "name": "fake",
        "options": {"baseURL": format!("http://127.0.0.1:{}/v1", model.port), "apiKey": "fake-key"},
        "models": {"fake-model": {"name": "fake model", "tool_call": true}},
    }});
    config["model"] = json!("fake/fake-model");
    write_json(&file, &config);
    let out = scene
        .client(
            Client::Opencode,
            &["run", "What is 6*7? Ask both calculators."],
        )
        .output()
        .unwrap();
    let said = format!(
        "{}{}\n--- tools offered\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        offered(&model)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("42, twice"), "{said}");
    assert_audited_both(&scene, &said);
}

#[test]
fn the_clients_page_shows_what_host_mcp_config_prints_for_every_client() {
    let page = std::fs::read_to_string(root().join("docs/guide/clients.md")).unwrap();
    let exe = Path::new(env!("CARGO_BIN_EXE_host"))
        .canonicalize()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    for client in ["claude", "codex", "gemini", "qwen", "opencode"] {
        for args in [
            &[
                "--plugins",
                "/path/to/plugins",
                "--policy",
                "/path/to/policy.toml",
                "mcp",
                "config",
                client,
            ][..],
            &[
                "mcp",
                "config",
                client,
                "--url",
                "https://tools.example.com/mcp",
                "--token-env",
                "TOOLHOST_TOKEN",
            ][..],
        ] {
            // Values from the environment become flags too: none here.
            let out = host(cache.path())
                .env_remove("TOOLHOST_CACHE_DIR")
                .env_remove("TOOLHOST_LOCK")
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let printed = String::from_utf8(out.stdout)
                .unwrap()
                .replace(&exe.display().to_string(), "/usr/local/bin/host");
            assert!(
                page.contains(&printed),
                "docs/guide/clients.md does not show what `host {}` prints:\n{printed}",
                args.join(" ")
            );
        }
    }
}
