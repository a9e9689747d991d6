//! The gateway: the one place where the MCP server and the MCP client meet
//! (neither imports the other). The server declares what it needs of an
//! upstream MCP server beside its tools ([`UpstreamServer`], and
//! [`Upstreams`] to find them among a runtime's tool sources, in
//! `server/upstream.rs`); this file implements both for the client's
//! [`McpSource`], and gives [`McpServer::new`], a server that serves the
//! resources, prompts, completion and logging of the `McpSource`s among
//! its runtime's sources.

#![allow(deprecated)] // logging (SEP-2577): every revision served here has it

use std::any::Any;
use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, LoggingLevel, Prompt, Resource, ResourceTemplate,
    ServerCapabilities,
};
use tokio::sync::broadcast;
use toolhost_runtime::{Runtime, ToolSource};

use crate::client::McpSource;
use crate::peer::UpstreamNotice;
use crate::server::upstream::{UpstreamServer, Upstreams};
use crate::server::{McpServer, ServerOptions};

impl McpServer {
    /// A server for `runtime`'s tools, and for what the upstream MCP
    /// servers among its sources ([`McpSource`]s) offer besides tools.
    pub fn new(runtime: Runtime, options: ServerOptions) -> McpServer {
        McpServer::with_upstreams(runtime, options, Arc::new(McpSources))
    }
}

/// Finds the [`McpSource`]s among a runtime's tool sources.
struct McpSources;

impl Upstreams for McpSources {
    fn of(&self, runtime: &Runtime) -> Vec<Arc<dyn UpstreamServer>> {
        mcp_sources(runtime)
            .into_iter()
            .map(|s| s as Arc<dyn UpstreamServer>)
            .collect()
    }
}

/// The MCP servers among `runtime`'s tool sources.
pub(crate) fn mcp_sources(runtime: &Runtime) -> Vec<Arc<McpSource>> {
    runtime
        .sources()
        .into_iter()
        .filter_map(|source| {
            let any: Arc<dyn Any + Send + Sync> = source;
            any.downcast::<McpSource>().ok()
        })
        .collect()
}

#[async_trait::async_trait]
impl UpstreamServer for McpSource {
    fn name(&self) -> &str {
        ToolSource::name(self)
    }

    fn prefix(&self) -> String {
        ToolSource::prefix(self)
    }

    fn capabilities(&self) -> Option<ServerCapabilities> {
        self.offered().capabilities()
    }

    fn notices(&self) -> broadcast::Receiver<UpstreamNotice> {
        self.offered().notices()
    }

    async fn resources(&self) -> Result<Vec<Resource>, ErrorData> {
        self.offered().resources().await
    }

    async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>, ErrorData> {
        self.offered().resource_templates().await
    }

    async fn prompts(&self) -> Result<Vec<Prompt>, ErrorData> {
        self.offered().prompts().await
    }

    async fn skills(&self) -> Result<Vec<rmcp::model::Skill>, ErrorData> {
        self.offered()
            .skills(ToolSource::name(self))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    fn declared_prompt<'n>(&self, name: &'n str) -> Option<&'n str> {
        name.strip_prefix(ToolSource::prefix(self).as_str())
    }

    fn may_hold(&self, uri: &str) -> bool {
        self.offered().may_hold(uri)
    }

    fn lists_template(&self, template: &str) -> bool {
        self.offered().lists_template(template)
    }

    async fn subscribe(&self, uri: &str, on: bool) -> Result<(), ErrorData> {
        self.offered().subscribe(uri, on).await
    }

    async fn set_level(&self, level: LoggingLevel) -> Result<(), ErrorData> {
        self.offered().set_level(level).await
    }

    async fn complete(&self, params: CompleteRequestParams) -> Result<CompleteResult, ErrorData> {
        self.offered().complete(params).await
    }
}
