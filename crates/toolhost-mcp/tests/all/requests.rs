//! The requests an upstream server sends back during a call
//! (`sampling/createMessage`, `elicitation/create`), through the gateway:
//! the reference "everything" server (npm) as the upstream, toolhost's
//! MCP server over it, and an MCP client of our own downstream (rmcp, over
//! an in-process pipe) that answers them and records what it was asked.

#![expect(
    deprecated,
    reason = "sampling is deprecated by SEP-2577, and still served"
)]

use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, CreateMessageRequestParams,
    CreateMessageResult, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, SamplingCapability,
    SamplingMessage,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::json;
use toolhost_mcp::client::ServerRequests;
use toolhost_mcp::{McpServer, McpServerConfig, McpSource, ServerOptions};
use toolhost_runtime::policy::Decision;
use toolhost_runtime::{Runtime, ToolSource};
use toolhost_test_support::outside_tool;

/// The downstream MCP client: declares what it is told to, answers
/// sampling with a fixed text, approval questions with `approve`, and
/// other forms with a name; records every request.
#[derive(Clone, Default)]
struct Client {
    sampling: bool,
    elicitation: bool,
    approve: bool,
    sampled: Arc<Mutex<Vec<CreateMessageRequestParams>>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.sampling {
            capabilities.sampling = Some(SamplingCapability::default());
        }
        if self.elicitation {
            capabilities.elicitation =
                Some(ElicitationCapability::new().with_form(FormElicitationCapability::new()));
        }
        ClientConfig::new(capabilities, Implementation::new("downstream", "1"))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.sampled.lock().push(params);
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text("the downstream model says hello"),
            "downstream-model".to_owned(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        self.asked.lock().push(message);
        let schema = serde_json::to_value(&requested_schema).unwrap();
        let content = if schema["properties"].get("approve").is_some() {
            json!({"approve": self.approve})
        } else {
            json!({"name": "Ada Lovelace", "check": true})
        };
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
    }
}

/// The everything server as `up`, under `requests`.
async fn gateway(requests: ServerRequests) -> Runtime {
    let program = outside_tool("node/node_modules/.bin/mcp-server-everything");
    let mut config = McpServerConfig::stdio("up", program.display().to_string(), &[]);
    config.requests = requests;
    let source = Arc::new(McpSource::start(config).unwrap());
    let _ = source.connected().await;
    Runtime::builder()
        .cache_dir(None)
        .source(source as Arc<dyn ToolSource>)
        .build()
        .await
        .unwrap()
}

/// `client` connected to an MCP server over `runtime`.
async fn connect(runtime: Runtime, client: Client) -> RunningService<RoleClient, Client> {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let server = McpServer::new(runtime, ServerOptions::default());
    tokio::spawn(async move {
        if let Ok(running) = server.serve(theirs).await {
            let _ = running.waiting().await;
        }
    });
    client.serve(ours).await.unwrap()
}

async fn call(
    client: &RunningService<RoleClient, Client>,
    tool: &str,
    args: serde_json::Value,
) -> String {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    if let serde_json::Value::Object(args) = args {
        params = params.with_arguments(args);
    }
    let result = client.peer().call_tool(params).await.unwrap();
    serde_json::to_string(&result).unwrap()
}

fn settings(sampling: Decision, elicitation: Decision) -> ServerRequests {
    ServerRequests {
        sampling,
        elicitation,
        max_sampling_tokens: 64,
        ..ServerRequests::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_sampling_request_reaches_the_calling_client_with_its_tokens_cut() {
    let runtime = gateway(settings(Decision::Allow, Decision::Allow)).await;
    let client = Client {
        sampling: true,
        ..Client::default()
    };
    let running = connect(runtime, client.clone()).await;
    let out = call(
        &running,
        "up__trigger-sampling-request",
        json!({"prompt": "say hi", "maxTokens": 100000}),
    )
    .await;
    assert!(out.contains("the downstream model says hello"), "{out}");
    let sampled = client.sampled.lock().clone();
    assert_eq!(sampled.len(), 1);
    assert_eq!(sampled[0].max_tokens, 64, "cut to max-sampling-tokens");
    let _ = running.cancel().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sampling_under_ask_waits_for_the_client_users_yes_and_a_no_refuses_it() {
    for approve in [true, false] {
        let runtime = gateway(ServerRequests::default()).await;
        let client = Client {
            sampling: true,
            elicitation: true,
            approve,
            ..Client::default()
        };
        let running = connect(runtime, client.clone()).await;
        let out = call(
            &running,
            "up__trigger-sampling-request",
            json!({"prompt": "say hi"}),
        )
        .await;
        let asked = client.asked.lock().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(asked[0].contains("asks to use your model"), "{asked:?}");
        assert_eq!(client.sampled.lock().len(), usize::from(approve), "{out}");
        assert_eq!(
            out.contains("the downstream model says hello"),
            approve,
            "{out}"
        );
        let _ = running.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sampling_is_refused_when_denied_or_when_the_client_cannot_sample() {
    for (decision, declares) in [(Decision::Deny, true), (Decision::Allow, false)] {
        let runtime = gateway(settings(decision, Decision::Allow)).await;
        let client = Client {
            sampling: declares,
            ..Client::default()
        };
        let running = connect(runtime, client.clone()).await;
        // Denied: the tool is not even offered (sampling is not declared upstream).
        let tools = running.peer().list_all_tools().await.unwrap();
        let offered = tools
            .iter()
            .any(|t| t.name == "up__trigger-sampling-request");
        assert_eq!(offered, decision != Decision::Deny);
        if offered {
            let out = call(
                &running,
                "up__trigger-sampling-request",
                json!({"prompt": "say hi"}),
            )
            .await;
            assert!(out.contains("isError") || out.contains("declared"), "{out}");
        }
        assert!(client.sampled.lock().is_empty());
        let _ = running.cancel().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_upstream_elicitation_reaches_the_calling_clients_user() {
    let runtime = gateway(settings(Decision::Deny, Decision::Allow)).await;
    let client = Client {
        elicitation: true,
        ..Client::default()
    };
    let running = connect(runtime, client.clone()).await;
    let out = call(&running, "up__trigger-elicitation-request", json!({})).await;
    assert!(out.contains("Ada Lovelace"), "{out}");
    assert_eq!(client.asked.lock().len(), 1);
    let _ = running.cancel().await;
}
