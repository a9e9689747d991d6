//! Resources of the upstream MCP servers, served to the gateway's
//! clients (`resources/list`, `resources/templates/list`,
//! `resources/read`, `resources/subscribe`, `resources/unsubscribe`).
//!
//! A client is listed only the resources (and templates) its profile may
//! read ([`Runtime::may_access`](toolhost_runtime::Runtime::may_access):
//! `resource = "..."` rules on the URI), and a read goes through the
//! runtime's steps as a call of `resources/read` from that server
//! ([`Runtime::access`](toolhost_runtime::Runtime::access)): policy,
//! hooks, approval, limits, the after-hooks and the audit. A resource it
//! may not read is, for it, not there: the answer is the one for an
//! unknown URI (-32002), to a read and to a subscription alike.
//!
//! A URI is sent to the server whose last list held it, or whose
//! templates could make it; else to the only server that offers
//! resources.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, ResourceContents,
};
use rmcp::service::{RequestContext, RoleServer};
use toolhost_content::Content;
use toolhost_runtime::Access;

use super::McpServer;
use super::upstream::{UpstreamServer, Upstreams};

/// The answer for a resource that is not there, or not for this caller.
fn not_found(uri: &str) -> McpError {
    McpError::resource_not_found(
        "Resource not found",
        Some(serde_json::json!({ "uri": toolhost_text::line(uri, 300) })),
    )
}

fn offers_resources(source: &dyn UpstreamServer) -> bool {
    source.capabilities().is_some_and(|c| c.resources.is_some())
}

/// The servers that offer resources; none: the method is not there (the
/// capability is not declared either).
fn offering(
    runtime: &toolhost_runtime::Runtime,
    upstreams: &dyn Upstreams,
    method: &'static str,
) -> Result<Vec<Arc<dyn UpstreamServer>>, McpError> {
    let offering: Vec<Arc<dyn UpstreamServer>> = upstreams
        .of(runtime)
        .into_iter()
        .filter(|s| offers_resources(s.as_ref()))
        .collect();
    if offering.is_empty() {
        return Err(McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            method,
            None,
        ));
    }
    Ok(offering)
}

impl McpServer {
    fn resource_access(uri: &str) -> Access {
        Access::Resource {
            uri: uri.to_owned(),
        }
    }

    pub(super) async fn resources(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let agent = self.agent(context);
        // The plugins' skills first (`skills.rs`), then the servers'.
        let mut all = self.skill_resources(context).await;
        let upstream = offering(&self.runtime, self.upstreams.as_ref(), "resources/list");
        let upstream = match upstream {
            Err(_) if self.skills.any(&self.runtime, self.upstreams.as_ref()) => Vec::new(),
            other => other?,
        };
        for source in upstream {
            let name = source.name();
            match source.resources().await {
                Ok(listed) => all.extend(listed.into_iter().filter(|r| {
                    self.runtime.may_access(
                        name,
                        &Self::resource_access(&r.uri),
                        agent.as_deref(),
                        None,
                    )
                })),
                Err(e) => tracing::warn!(server = %name, "resources/list failed: {}", e.message),
            }
        }
        Ok(ListResourcesResult::with_all_items(all))
    }

    pub(super) async fn resource_templates(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let agent = self.agent(context);
        let mut all = Vec::new();
        for source in offering(
            &self.runtime,
            self.upstreams.as_ref(),
            "resources/templates/list",
        )? {
            let name = source.name();
            match source.resource_templates().await {
                Ok(listed) => all.extend(listed.into_iter().filter(|t| {
                    self.runtime.may_access(
                        name,
                        &Self::resource_access(&t.uri_template),
                        agent.as_deref(),
                        None,
                    )
                })),
                Err(e) => {
                    tracing::warn!(server = %name, "resources/templates/list failed: {}", e.message);
                }
            }
        }
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    /// The server that answers for `uri`, when the caller may read it.
    async fn resource_source(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<dyn UpstreamServer>, McpError> {
        let offering = match offering(&self.runtime, self.upstreams.as_ref(), "resources/read") {
            // Resources are the plugins' skills alone: not one of them.
            Err(_) if self.skills.any(&self.runtime, self.upstreams.as_ref()) => {
                return Err(not_found(uri));
            }
            other => other?,
        };
        let mut found = offering.iter().find(|s| s.may_hold(uri)).cloned();
        if found.is_none() && offering.len() > 1 {
            // Lists read since may hold it now.
            for s in &offering {
                let _ = s.resources().await;
                let _ = s.resource_templates().await;
            }
            found = offering.iter().find(|s| s.may_hold(uri)).cloned();
        }
        let source = match found {
            Some(s) => s,
            None if offering.len() == 1 => offering[0].clone(),
            None => return Err(not_found(uri)),
        };
        let agent = self.agent(context);
        let name = source.name();
        if !self
            .runtime
            .may_access(name, &Self::resource_access(uri), agent.as_deref(), None)
        {
            return Err(not_found(uri));
        }
        Ok(source)
    }

    pub(super) async fn read(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, McpError> {
        // A plugin's skill, then an upstream server's (verified against
        // its listing), then any other resource.
        if let Some(file) = self.read_skill_file(uri, context).await {
            return Ok(file);
        }
        if let Some(file) = self.read_upstream_skill_file(uri, context).await {
            return file;
        }
        let source = self.resource_source(uri, context).await?;
        let result = self
            .run_access(source.as_ref(), &Self::resource_access(uri), context, None)
            .await?;
        Ok(read_result(uri, result))
    }

    pub(super) async fn subscription(
        &self,
        uri: &str,
        on: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let source = self.resource_source(uri, context).await?;
        let agent = self.agent(context);
        if !self
            .listeners
            .subscribe(&context.peer, agent.as_deref(), uri, on)
        {
            return Err(McpError::invalid_request(
                "cannot subscribe: too many subscriptions, or no session",
                None,
            ));
        }
        source.subscribe(uri, on).await
    }
}

/// A read's `result` (after the hooks) as the answer to `resources/read`.
pub(super) fn read_result(uri: &str, result: toolhost_runtime::ToolResult) -> ReadResourceResult {
    // An after-hook that left only text: that text, as the contents.
    let blocks = if result.content.is_empty() && !result.output.is_empty() {
        vec![Content::text(result.output)]
    } else {
        result.content
    };
    let contents = blocks
        .into_iter()
        .filter_map(|block| contents_of(uri, block))
        .collect();
    let mut read = ReadResourceResult::new(contents);
    read.meta = result.meta.map(rmcp::model::MetaObject);
    read
}

/// A block of a read's result as resource contents: an embedded
/// resource as it was sent; a text or a media block (an after-hook's)
/// as contents of `uri`.
fn contents_of(uri: &str, block: Content) -> Option<ResourceContents> {
    let json = match block {
        Content::Resource(embedded) => serde_json::to_value(&embedded.resource).ok()?,
        Content::Text(t) => serde_json::json!({ "uri": uri, "text": t.text }),
        Content::Image(m) | Content::Audio(m) => {
            serde_json::json!({ "uri": uri, "blob": m.data, "mimeType": m.mime_type })
        }
        Content::ResourceLink(_) => return None,
    };
    serde_json::from_value(json).ok()
}
