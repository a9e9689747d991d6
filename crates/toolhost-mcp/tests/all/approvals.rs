//! Approvals of a program's calls over MCP: code mode's runner (`run-code`,
//! from `target/code/`, granted `call-tools = ["*"]`) beside the example
//! plugins, the policy asking about two of their tools, and a program that
//! calls both. Each call the program makes is asked about on its own:
//!
//! - on 2026-07-28 (an rmcp client in `server/discover` mode over an
//!   in-process pipe, retrying each `input_required` with `inputResponses`
//!   and the `requestState` as the wire carries them), one answer approves
//!   the one call it was asked about, once; the next call is asked, never
//!   run unasked;
//! - on 2025-11-25, each call is its own elicitation during the call.
//!
//! The live feed of calls (what the console's live view shows and keeps)
//! says, for each call of the program, who allowed it, or that it was
//! asked and not run.

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, FormElicitationCapability,
    Implementation, InputResponses, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceExt};
use serde_json::{Value, json};
use toolhost_mcp::{McpServer, ServerOptions};
use toolhost_runtime::policy::{Policy, Rule};
use toolhost_runtime::{PluginSettings, Runtime, feed::CallEvent, feed::CallPhase};
use toolhost_test_support::{code_dir, plugins_dir, root};

/// A program that calls two plugins (`calc` and `text`), both asked about.
const PROGRAM: &str = "const { value } = await tools.calculate({ expression: '6*7' });\n\
     const words = await tools.word_count({ text: 'one two three' });\n\
     return `${value} and ${words}`;";

/// What [`PROGRAM`] returns.
const ANSWER: &str = "42 and 3 words, 1 line, 13 characters";

/// The example plugins and the runner, granted every tool, under a policy
/// that asks about `calculate` and `word_count`.
async fn runtime() -> Runtime {
    let runner = PluginSettings {
        call_tools: vec!["*".to_owned()],
        ..PluginSettings::default()
    };
    let policy = Policy::builder()
        .rule(Rule::ask("calculate").reason("sums need a nod"))
        .rule(Rule::ask("word_count").reason("counting needs a nod"))
        .build()
        .unwrap();
    Runtime::builder()
        .plugin_dir(plugins_dir())
        .plugin_dir(code_dir())
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_settings("run-code", runner)
        .policy(policy)
        .build()
        .await
        .unwrap()
}

/// The MCP client: declares form elicitation, says yes to every question
/// it is sent (2025-11-25) and records it.
#[derive(Clone, Default)]
struct Client {
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation =
            Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        ClientConfig::new(capabilities, Implementation::new("approvals-test", "1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().push(message);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"approve": true})))
    }
}

/// `client` connected to an MCP server over `runtime` through an
/// in-process pipe, in `revision` (2026-07-28: `server/discover`, else
/// `initialize`).
async fn connect(
    runtime: Runtime,
    client: Client,
    modern: bool,
) -> RunningService<RoleClient, Client> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let server = McpServer::new(runtime, ServerOptions::default());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    if modern {
        client
            .serve_with_lifecycle(
                ours,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .unwrap()
    } else {
        client.serve(ours).await.unwrap()
    }
}

fn run_code() -> CallToolRequestParams {
    let Value::Object(args) = json!({ "code": PROGRAM }) else {
        unreachable!()
    };
    CallToolRequestParams::new("run_code").with_arguments(args)
}

/// What the feed recorded of one call: its tool, who called, its outcome
/// and what its approval step says.
#[derive(Debug, Clone, PartialEq)]
struct Audited {
    tool: String,
    client: Option<String>,
    outcome: String,
    approval: Option<String>,
}

/// The calls the feed finished since the last look.
fn audited(feed: &mut tokio::sync::broadcast::Receiver<Arc<CallEvent>>) -> Vec<Audited> {
    let mut calls = Vec::new();
    while let Ok(event) = feed.try_recv() {
        if let CallPhase::Finished { outcome, steps, .. } = &event.phase {
            calls.push(Audited {
                tool: event.tool.clone(),
                client: event.client.clone(),
                outcome: outcome.clone(),
                approval: steps
                    .iter()
                    .find(|s| s.step == "approval")
                    .and_then(|s| s.note.clone()),
            });
        }
    }
    calls
}

/// The program's calls in `calls` (not `run_code` itself).
fn nested(calls: &[Audited]) -> Vec<(&str, &str, Option<&str>)> {
    calls
        .iter()
        .filter(|c| c.tool != "run_code")
        .map(|c| (c.tool.as_str(), c.outcome.as_str(), c.approval.as_deref()))
        .collect()
}

/// The question of an `input_required` result, and its state.
fn question(response: CallToolResponse) -> (String, String) {
    let CallToolResponse::InputRequired(input) = response else {
        panic!("not input_required: {response:?}");
    };
    let wire = serde_json::to_value(&input).unwrap();
    let message = wire["inputRequests"]["toolhost-approval"]["params"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{wire}"))
        .to_owned();
    (message, input.request_state.expect("a requestState"))
}

fn complete(response: CallToolResponse) -> rmcp::model::CallToolResult {
    match response {
        CallToolResponse::Complete(result) => result,
        other => panic!("not a result: {other:?}"),
    }
}

fn yes() -> InputResponses {
    [(
        "toolhost-approval".to_owned(),
        json!({"action": "accept", "content": {"approve": true}}),
    )]
    .into_iter()
    .collect()
}

const WAITING: &str = "denied by mcp-input-required: waiting for the user's answer";
const ALLOWED: &str = "allowed once by mcp-input-required";

#[tokio::test(flavor = "multi_thread")]
async fn on_2026_07_28_one_answer_runs_only_the_call_it_was_asked_about_and_the_next_is_asked() {
    let runtime = runtime().await;
    let mut feed = runtime.watch_calls();
    let running = connect(runtime, Client::default(), true).await;
    let peer = running.peer();

    // The first call of the program is asked about; nothing runs.
    let (asked, state) = question(peer.call_tool_once(run_code()).await.unwrap());
    assert!(
        asked.contains("`calculate`") && asked.contains("sums need a nod"),
        "{asked}"
    );
    assert!(!asked.contains("word_count"), "{asked}");
    let calls = audited(&mut feed);
    assert_eq!(
        nested(&calls),
        [("calculate", "permission-denied", Some(WAITING))],
        "{calls:#?}"
    );

    // One yes: that call runs, once; the second is asked, not run.
    let mut retry = run_code();
    retry.input_responses = Some(yes());
    retry.request_state = Some(state);
    let (asked, state) = question(peer.call_tool_once(retry).await.unwrap());
    assert!(
        asked.contains("`word_count`") && asked.contains("counting needs a nod"),
        "the second call is a question of its own: {asked}"
    );
    let calls = audited(&mut feed);
    assert_eq!(
        nested(&calls),
        [
            ("calculate", "ok", Some(ALLOWED)),
            ("word_count", "permission-denied", Some(WAITING)),
        ],
        "{calls:#?}"
    );
    assert!(
        calls
            .iter()
            .all(|c| c.client.as_deref() == Some("mcp-stdio")),
        "who called and answered: {calls:#?}"
    );

    // A yes to that too: both run, each once, and the program answers.
    let mut answered = run_code();
    answered.input_responses = Some(yes());
    answered.request_state = Some(state);
    let done = complete(peer.call_tool_once(answered.clone()).await.unwrap());
    let text = serde_json::to_value(&done).unwrap()["content"][0]["text"].clone();
    assert_eq!(text, ANSWER, "{done:?}");
    let calls = audited(&mut feed);
    assert_eq!(
        nested(&calls),
        [
            ("calculate", "ok", Some(ALLOWED)),
            ("word_count", "ok", Some(ALLOWED)),
        ],
        "{calls:#?}"
    );

    // The same answer and state again approve nothing: the retry is
    // refused as a protocol error (SEP-2322), and nothing runs.
    let refused = peer.call_tool_once(answered).await.unwrap_err();
    assert!(refused.to_string().contains("already used"), "{refused}");
    let calls = audited(&mut feed);
    assert!(calls.is_empty(), "{calls:#?}");
    let _ = running.cancel().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_2026_07_28_a_no_to_the_second_call_leaves_it_unrun() {
    let runtime = runtime().await;
    let mut feed = runtime.watch_calls();
    let running = connect(runtime, Client::default(), true).await;
    let peer = running.peer();
    let (_, state) = question(peer.call_tool_once(run_code()).await.unwrap());
    let mut retry = run_code();
    retry.input_responses = Some(yes());
    retry.request_state = Some(state);
    let (_, state) = question(peer.call_tool_once(retry).await.unwrap());
    let _ = audited(&mut feed);

    let mut no = run_code();
    no.input_responses = Some(
        [("toolhost-approval".to_owned(), json!({"action": "decline"}))]
            .into_iter()
            .collect(),
    );
    no.request_state = Some(state);
    let result = complete(peer.call_tool_once(no).await.unwrap());
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let calls = audited(&mut feed);
    assert_eq!(
        nested(&calls),
        [
            ("calculate", "ok", Some(ALLOWED)),
            (
                "word_count",
                "permission-denied",
                Some("denied by mcp-input-required: the user declined")
            ),
        ],
        "{calls:#?}"
    );
    let _ = running.cancel().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_2025_11_25_each_call_of_a_program_is_its_own_elicitation() {
    let runtime = runtime().await;
    let mut feed = runtime.watch_calls();
    let client = Client::default();
    let running = connect(runtime, client.clone(), false).await;
    let done = running.peer().call_tool(run_code()).await.unwrap();
    let text = serde_json::to_value(&done).unwrap()["content"][0]["text"].clone();
    assert_eq!(text, ANSWER, "{done:?}");
    let asked = client.asked.lock().clone();
    assert_eq!(asked.len(), 2, "{asked:#?}");
    assert!(asked[0].contains("`calculate`"), "{asked:#?}");
    assert!(asked[1].contains("`word_count`"), "{asked:#?}");
    let calls = audited(&mut feed);
    let allowed = Some("allowed once by mcp-elicitation");
    assert_eq!(
        nested(&calls),
        [("calculate", "ok", allowed), ("word_count", "ok", allowed)],
        "{calls:#?}"
    );
    let _ = running.cancel().await;
}
