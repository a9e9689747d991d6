//! What an upstream MCP server tells the gateway's clients: the client
//! (`client/handler.rs`) hears it, the server (`server/upstream.rs`)
//! passes it on to the clients that asked for it.

#![allow(deprecated)] // logging (SEP-2577): every revision served here has it

use rmcp::model::LoggingMessageNotificationParam;

/// A notification from an upstream server, for the gateway's clients.
#[derive(Debug, Clone)]
pub(crate) enum UpstreamNotice {
    /// `notifications/resources/list_changed`.
    ResourcesChanged,
    /// `notifications/prompts/list_changed`.
    PromptsChanged,
    /// `notifications/resources/updated` for this URI.
    ResourceUpdated(String),
    /// `notifications/message`.
    Log(LoggingMessageNotificationParam),
}
