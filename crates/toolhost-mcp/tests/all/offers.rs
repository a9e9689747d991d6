//! The gateway passes on what an upstream server offers besides tools,
//! behind the policy: an upstream server of our own (rmcp, over Streamable
//! HTTP) with resources, subscriptions and a log; `McpServer` in front of
//! it; an rmcp client downstream that records what reaches it.

#![allow(deprecated)] // logging and resources/subscribe: legacy in rmcp, in every revision here

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{
    CancelledNotificationParam, ClientRequest, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ReadResourceRequest, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
    ResourcesCapability, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams,
};
use rmcp::service::{
    NotificationContext, PeerRequestOptions, RequestContext, RoleClient, RoleServer,
};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{
    StreamableHttpClientTransport, StreamableHttpServerConfig, StreamableHttpService,
};
use rmcp::{ClientHandler, ErrorData, ServerHandler, ServiceExt};
use toolhost_mcp::{HttpOptions, HttpServer, McpServer, McpServerConfig, McpSource, ServerOptions};
use toolhost_runtime::policy::{Decision, Policy, Rule};

/// What the upstream server was asked.
#[derive(Default)]
struct Seen {
    subscribed: Vec<String>,
    cancelled_reads: Vec<String>,
    levels: Vec<LoggingLevel>,
}

#[derive(Clone)]
struct Upstream(Arc<Mutex<Seen>>);

impl ServerHandler for Upstream {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut resources = ResourcesCapability::default();
        resources.subscribe = Some(true);
        capabilities.resources = Some(resources);
        capabilities.logging = Some(Default::default());
        ServerConfig::new(capabilities)
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, ErrorData> {
        Ok(rmcp::model::ListResourcesResult::with_all_items(vec![
            Resource::new("up://open", "open"),
            Resource::new("up://secret", "secret"),
            Resource::new("up://slow", "slow"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri == "up://slow" {
            context.ct.cancelled().await;
            self.0.lock().cancelled_reads.push(request.uri);
            return Err(ErrorData::internal_error("cancelled", None));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            format!("contents of {}", request.uri),
            request.uri,
        )])
        .into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.lock().subscribed.push(request.uri.clone());
        let peer = context.peer.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            for uri in ["up://secret", &request.uri] {
                let _ = peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await;
            }
            for (level, text) in [
                (LoggingLevel::Info, "routine"),
                (LoggingLevel::Error, "broken"),
            ] {
                let _ = peer
                    .notify_logging_message(LoggingMessageNotificationParam::new(
                        level,
                        serde_json::json!(text),
                    ))
                    .await;
            }
        });
        Ok(())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.0.lock().levels.push(request.level);
        Ok(())
    }
}

/// What reached the downstream client.
#[derive(Clone, Default)]
struct Downstream(Arc<Mutex<Vec<String>>>);

impl ClientHandler for Downstream {
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.0.lock().push(format!("updated {}", params.uri));
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.0.lock().push(format!("log {}", params.data));
    }
}

async fn upstream(seen: Arc<Mutex<Seen>>) -> String {
    let service: StreamableHttpService<Upstream, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(Upstream(seen.clone())),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().nest_service("/mcp", service);
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

#[tokio::test(flavor = "multi_thread")]
async fn subscriptions_logs_and_cancellation_pass_through_the_gateway_for_what_the_caller_may_read()
{
    let seen = Arc::new(Mutex::new(Seen::default()));
    let url = upstream(seen.clone()).await;
    let source = McpSource::start(McpServerConfig::http("up", url)).unwrap();
    let runtime = toolhost_runtime::Runtime::builder()
        .cache_dir(None)
        .policy(
            Policy::builder()
                .rule(Rule::resource(Decision::Deny, "up://secret"))
                .build()
                .unwrap(),
        )
        .source(Arc::new(source))
        .build()
        .await
        .unwrap();
    let http = HttpServer::bind(
        McpServer::new(runtime, ServerOptions::default()),
        HttpOptions::local(0),
    )
    .await
    .unwrap();
    let gateway = format!("http://{}/mcp", http.local_addr());
    tokio::spawn(http.run(std::future::pending()));

    let heard = Downstream::default();
    let client = heard
        .clone()
        .serve(StreamableHttpClientTransport::from_uri(gateway))
        .await
        .unwrap();
    let peer = client.peer().clone();

    let listed: Vec<String> = peer
        .list_resources(None)
        .await
        .unwrap()
        .resources
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert_eq!(
        listed,
        ["up://open", "up://slow"],
        "the denied one is not listed"
    );
    let open = peer
        .read_resource(ReadResourceRequestParams::new("up://open"))
        .await
        .unwrap();
    assert!(
        format!("{open:?}").contains("contents of up://open"),
        "{open:?}"
    );
    let secret = peer
        .read_resource(ReadResourceRequestParams::new("up://secret"))
        .await
        .unwrap_err();
    assert!(format!("{secret:?}").contains("-32002"), "{secret:?}");
    assert!(
        peer.subscribe(SubscribeRequestParams::new("up://secret"))
            .await
            .is_err(),
        "nor can it be watched"
    );

    peer.set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .unwrap();
    peer.subscribe(SubscribeRequestParams::new("up://open"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        *heard.0.lock(),
        ["updated up://open", "log \"broken\""],
        "the update of what it subscribed to, and the log at its level, only"
    );
    {
        let seen = seen.lock();
        assert_eq!(seen.subscribed, ["up://open"]);
        assert_eq!(seen.levels, [LoggingLevel::Warning]);
    }

    // A read the client cancels is cancelled upstream.
    let handle = peer
        .send_request_with_option(
            ClientRequest::ReadResourceRequest(ReadResourceRequest::new(
                ReadResourceRequestParams::new("up://slow"),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    peer.notify_cancelled(CancelledNotificationParam::new(
        Some(handle.id.clone()),
        Some("enough".into()),
    ))
    .await
    .unwrap();
    for _ in 0..50 {
        if !seen.lock().cancelled_reads.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.lock().cancelled_reads, ["up://slow"]);
}
