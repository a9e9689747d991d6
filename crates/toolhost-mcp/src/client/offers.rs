//! What an upstream MCP server offers besides its tools: resources and
//! their templates, prompts, completion and logging, for the gateway's
//! server (`server/upstream.rs`) to pass on.
//!
//! - Lists (`resources/list`, `resources/templates/list`, `prompts/list`)
//!   are read page by page, bounded in pages and items; a prompt is named
//!   the way the server's tools are, with its prefix (`NAME__`, or none).
//!   A resource keeps its URI, which is its identity (a client may open a
//!   `file://` URI itself); the gateway routes a read to the server whose
//!   list or templates hold the URI.
//! - A read (`resources/read`) or a get (`prompts/get`) is not made from
//!   here directly: it comes as a call of the unlisted tool
//!   `resources/read` or `prompts/get` ([`toolhost_runtime::Access`]),
//!   after the runtime's policy, hooks and approvals; its answer goes back
//!   through the after-hooks and the audit. A resource's contents become
//!   embedded resource blocks, a prompt's messages content blocks (the
//!   whole result as `structured`).
//! - `resources/subscribe`, `logging/setLevel` and `completion/complete`
//!   are forwarded as they are (a prompt's name without the prefix).
//! - The server's `notifications/resources/updated`, `…/list_changed` for
//!   resources and prompts, and `notifications/message` are broadcast to
//!   whoever listens ([`Offered::notices`]).
//!
//! Every request is dropped with the caller's: dropping it tells the
//! server `notifications/cancelled` (`CancelOnDrop`).

#![allow(deprecated)] // logging (SEP-2577) and resources/subscribe are deprecated in rmcp; every revision served here has them

use std::collections::HashSet;

use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    ClientRequest, CompleteRequest, CompleteRequestParams, CompleteResult, GetPromptRequest,
    GetPromptRequestParams, GetPromptResult, ListResourcesResult, LoggingLevel,
    PaginatedRequestParams, Prompt, ReadResourceDirectoryRequest,
    ReadResourceDirectoryRequestParams, ReadResourceRequest, ReadResourceRequestParams,
    ReadResourceResult, Reference, Resource, ResourceTemplate, ServerCapabilities, ServerResult,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, ServiceError};
use serde_json::Value;
use tokio::sync::{broadcast, watch};
use toolhost_runtime::source::{SourceCall, SourceError, SourceOutcome};

use super::link::{self, CancelOnDrop, Link, MAX_LIST_PAGES};
use crate::peer::UpstreamNotice;
use crate::tools;

/// The most resources, templates or prompts read from one server's list.
const MAX_LISTED: usize = 2000;
/// How many notifications from upstream may wait for a slow listener;
/// past it the oldest are dropped for that listener.
const UPSTREAM_QUEUE: usize = 256;

/// What the source keeps about its server's offers: where notifications
/// go, and the URIs and templates its lists held (to route a read).
pub(crate) struct Offers {
    upstream: broadcast::Sender<UpstreamNotice>,
    uris: Mutex<HashSet<String>>,
    templates: Mutex<Vec<String>>,
}

impl Default for Offers {
    fn default() -> Self {
        Offers {
            upstream: broadcast::channel(UPSTREAM_QUEUE).0,
            uris: Mutex::new(HashSet::new()),
            templates: Mutex::new(Vec::new()),
        }
    }
}

impl Offers {
    /// Passes a notification on to whoever listens (nobody: dropped).
    pub(crate) fn tell(&self, note: UpstreamNotice) {
        let _ = self.upstream.send(note);
    }
}

/// Why a request to the server failed: its own JSON-RPC error, passed on
/// as it was, or the host's.
fn refused(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            ErrorData::internal_error("the upstream MCP server went away", None)
        }
        other => ErrorData::internal_error(
            format!(
                "the upstream MCP server: {}",
                toolhost_text::line(&other.to_string(), 300)
            ),
            None,
        ),
    }
}

/// The request of the page at `cursor` (the first: `None`).
fn page_at(cursor: Option<String>) -> Option<PaginatedRequestParams> {
    Some(PaginatedRequestParams::default().with_cursor(cursor))
}

/// Every item of a list the server pages: `page(cursor)` asks for one
/// page, its items and the next cursor. At most [`MAX_LIST_PAGES`] pages
/// and [`MAX_LISTED`] items (a server whose cursor never ends, or whose
/// pages are huge, is cut there).
async fn paged<T, F, Fut>(mut page: F) -> Result<Vec<T>, ServiceError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let (items, next) = page(cursor).await?;
        all.extend(items);
        if all.len() >= MAX_LISTED {
            all.truncate(MAX_LISTED);
            break;
        }
        match next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(all)
}

/// A source's offers, with its link and prefix: what the gateway asks of
/// its server beside tools.
pub(crate) struct Offered<'a> {
    pub(crate) link: &'a watch::Sender<Link>,
    pub(crate) offers: &'a Offers,
    pub(crate) prefix: String,
}

impl Offered<'_> {
    /// The server's capabilities, while it is connected.
    pub(crate) fn capabilities(&self) -> Option<ServerCapabilities> {
        match &*self.link.borrow() {
            Link::Up(peer) => peer.peer_info().map(|info| info.capabilities.clone()),
            _ => None,
        }
    }

    /// Notifications from the server from now on.
    pub(crate) fn notices(&self) -> broadcast::Receiver<UpstreamNotice> {
        self.offers.upstream.subscribe()
    }

    async fn connected_peer(&self) -> Result<Peer<RoleClient>, ErrorData> {
        link::peer(self.link)
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    /// Sends `request`, telling the server when it is dropped before the answer.
    async fn ask(&self, request: ClientRequest) -> Result<ServerResult, ErrorData> {
        let peer = self.connected_peer().await?;
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(refused)?;
        let mut cancel = CancelOnDrop {
            peer: Some(peer),
            id: handle.id.clone(),
        };
        let answer = handle.await_response().await;
        cancel.peer = None;
        answer.map_err(refused)
    }

    /// Every resource the server lists (bounded), URIs as they are.
    pub(crate) async fn resources(&self) -> Result<Vec<Resource>, ErrorData> {
        let peer = self.connected_peer().await?;
        let all = paged(|cursor| {
            let peer = &peer;
            async move {
                let page = peer.list_resources(page_at(cursor)).await?;
                Ok((page.resources, page.next_cursor))
            }
        })
        .await
        .map_err(refused)?;
        {
            let mut uris = self.offers.uris.lock();
            uris.clear();
            uris.extend(all.iter().map(|r| r.uri.clone()));
        }
        Ok(all)
    }

    /// Every resource template the server lists (bounded).
    pub(crate) async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>, ErrorData> {
        let peer = self.connected_peer().await?;
        let all = paged(|cursor| {
            let peer = &peer;
            async move {
                let page = peer.list_resource_templates(page_at(cursor)).await?;
                Ok((page.resource_templates, page.next_cursor))
            }
        })
        .await
        .map_err(refused)?;
        *self.offers.templates.lock() = all.iter().map(|t| t.uri_template.clone()).collect();
        Ok(all)
    }

    /// Every skill the server lists (`skills/list`, every page, bounded);
    /// `server` names it in the errors.
    pub(crate) async fn skills(
        &self,
        server: &str,
    ) -> Result<Vec<rmcp::model::Skill>, crate::client::SkillError> {
        use crate::client::SkillError;
        if !self.capabilities().is_some_and(|c| c.supports_skills()) {
            return Err(SkillError::NotOffered(server.to_owned()));
        }
        let failed = |e: ErrorData| SkillError::List {
            server: server.to_owned(),
            message: toolhost_text::line(&e.message, 300),
        };
        let peer = self.connected_peer().await.map_err(failed)?;
        paged(|cursor| {
            let peer = &peer;
            async move {
                let page = peer.list_skills(page_at(cursor)).await?;
                Ok((page.skills, page.next_cursor))
            }
        })
        .await
        .map_err(|e| failed(refused(e)))
    }

    /// Every prompt the server lists (bounded), named with the prefix.
    pub(crate) async fn prompts(&self) -> Result<Vec<Prompt>, ErrorData> {
        let peer = self.connected_peer().await?;
        let prefix = &self.prefix;
        let all = paged(|cursor| {
            let peer = &peer;
            async move {
                let page = peer.list_prompts(page_at(cursor)).await?;
                Ok((page.prompts, page.next_cursor))
            }
        })
        .await
        .map_err(refused)?;
        Ok(all
            .into_iter()
            .map(|mut p| {
                p.name = format!("{prefix}{}", p.name);
                p
            })
            .collect())
    }

    /// The server's own name of the prompt listed as `name`, when it has
    /// this source's prefix.
    pub(crate) fn declared_prompt<'n>(&self, name: &'n str) -> Option<&'n str> {
        name.strip_prefix(self.prefix.as_str())
    }

    /// Whether a read of `uri` belongs to this server: its last list held
    /// the URI, or one of its templates could make it (the template's
    /// text before its first `{`).
    pub(crate) fn may_hold(&self, uri: &str) -> bool {
        self.offers.uris.lock().contains(uri)
            || self.holds_template(uri, |template, uri| {
                let literal = template.split('{').next().unwrap_or(template);
                !literal.is_empty() && uri.starts_with(literal)
            })
    }

    /// Whether this server listed the template `template`.
    pub(crate) fn lists_template(&self, template: &str) -> bool {
        self.holds_template(template, |t, wanted| t == wanted)
    }

    fn holds_template(&self, wanted: &str, matches: impl Fn(&str, &str) -> bool) -> bool {
        self.offers
            .templates
            .lock()
            .iter()
            .any(|t| matches(t, wanted))
    }

    /// `resources/subscribe` (`on`) or `resources/unsubscribe` for `uri`.
    #[allow(deprecated)] // legacy-only in rmcp; the revisions before 2026-07-28 have it
    pub(crate) async fn subscribe(&self, uri: &str, on: bool) -> Result<(), ErrorData> {
        let peer = self.connected_peer().await?;
        if on {
            peer.subscribe(SubscribeRequestParams::new(uri)).await
        } else {
            peer.unsubscribe(UnsubscribeRequestParams::new(uri)).await
        }
        .map_err(refused)
    }

    /// `logging/setLevel`.
    #[allow(deprecated)] // deprecated by SEP-2577; still in every revision served here
    pub(crate) async fn set_level(&self, level: LoggingLevel) -> Result<(), ErrorData> {
        let peer = self.connected_peer().await?;
        peer.set_level(SetLevelRequestParams::new(level))
            .await
            .map_err(refused)
    }

    /// `completion/complete`, a prompt named as the server knows it.
    pub(crate) async fn complete(
        &self,
        mut params: CompleteRequestParams,
    ) -> Result<CompleteResult, ErrorData> {
        if let Reference::Prompt(prompt) = &mut params.r#ref
            && let Some(declared) = self.declared_prompt(&prompt.name)
        {
            prompt.name = declared.to_owned();
        }
        match self
            .ask(ClientRequest::CompleteRequest(CompleteRequest::new(params)))
            .await?
        {
            ServerResult::CompleteResult(result) => Ok(result),
            _ => Err(ErrorData::internal_error(
                "the upstream server's answer to completion/complete is not a completion",
                None,
            )),
        }
    }

    /// A read or a get (`SourceCall` of [`toolhost_policy`]'s
    /// `resources/read` or `prompts/get`), after the runtime's steps.
    pub(crate) async fn access(
        &self,
        call: &SourceCall<'_>,
    ) -> Option<Result<SourceOutcome, SourceError>> {
        let policy = toolhost_runtime::policy::READ_RESOURCE;
        if call.tool == policy {
            let uri = call.args[toolhost_runtime::policy::URI_ARG]
                .as_str()
                .unwrap_or_default();
            if call.args.get(toolhost_runtime::Access::DIRECTORY_ARG) == Some(&Value::Bool(true)) {
                return Some(self.directory(uri).await);
            }
            let request = ReadResourceRequest::new(ReadResourceRequestParams::new(uri));
            return Some(
                match self.ask(ClientRequest::ReadResourceRequest(request)).await {
                    Ok(ServerResult::ReadResourceResult(r)) => Ok(read_outcome(r)),
                    Ok(_) => Err(SourceError::Protocol(
                        "the answer to resources/read is not a resource".into(),
                    )),
                    Err(e) => Ok(SourceOutcome::Failed(e.message.to_string())),
                },
            );
        }
        if call.tool == toolhost_runtime::policy::GET_PROMPT {
            let listed = call.args[toolhost_runtime::policy::NAME_ARG]
                .as_str()
                .unwrap_or_default();
            let Some(name) = self.declared_prompt(listed) else {
                return Some(Ok(SourceOutcome::Failed(format!(
                    "no prompt `{}` here",
                    toolhost_text::line(listed, 100)
                ))));
            };
            let mut params = GetPromptRequestParams::new(name);
            if let Some(Value::Object(arguments)) = call.args.get("arguments")
                && !arguments.is_empty()
            {
                params = params.with_arguments(arguments.clone());
            }
            let request = GetPromptRequest::new(params);
            return Some(
                match self.ask(ClientRequest::GetPromptRequest(request)).await {
                    Ok(ServerResult::GetPromptResult(r)) => prompt_outcome(r),
                    Ok(_) => Err(SourceError::Protocol(
                        "the answer to prompts/get is not a prompt".into(),
                    )),
                    Err(e) => Ok(SourceOutcome::Failed(e.message.to_string())),
                },
            );
        }
        None
    }
}

impl Offered<'_> {
    /// `resources/directory/read` of `uri`, every page (at most
    /// [`MAX_LIST_PAGES`]): the entries as the outcome's `structured` (a
    /// `resources/list` answer), their URIs as its text.
    async fn directory(&self, uri: &str) -> Result<SourceOutcome, SourceError> {
        let mut entries = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_LIST_PAGES {
            let mut params = ReadResourceDirectoryRequestParams::new(uri);
            params.cursor = cursor.take();
            let request = ReadResourceDirectoryRequest::new(params);
            match self
                .ask(ClientRequest::ReadResourceDirectoryRequest(request))
                .await
            {
                Ok(ServerResult::ListResourcesResult(page)) => {
                    entries.extend(page.resources);
                    match page.next_cursor {
                        Some(next) => cursor = Some(next),
                        None => break,
                    }
                }
                Ok(_) => {
                    return Err(SourceError::Protocol(
                        "the answer to resources/directory/read is not a listing".into(),
                    ));
                }
                Err(e) => return Ok(SourceOutcome::Failed(e.message.to_string())),
            }
        }
        let output = entries
            .iter()
            .map(|r| r.uri.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let listed = ListResourcesResult::with_all_items(entries);
        let structured =
            serde_json::to_value(&listed).map_err(|e| SourceError::Protocol(e.to_string()))?;
        Ok(SourceOutcome::Ok {
            output,
            details: None,
            structured: Some(structured),
            content: Vec::new(),
            meta: None,
        })
    }
}

/// A read's contents as embedded resource blocks (the text a model would
/// read of them as the output), its `_meta` as it was sent.
fn read_outcome(r: ReadResourceResult) -> SourceOutcome {
    let content: Vec<toolhost_content::Content> = r
        .contents
        .into_iter()
        .map(|c| {
            let block = serde_json::json!({"type": "resource", "resource": c});
            serde_json::from_value(block).unwrap_or_else(|_| {
                toolhost_content::Content::text(
                    "[resource contents of a kind this host does not know]",
                )
            })
        })
        .collect();
    SourceOutcome::Ok {
        output: toolhost_content::text_of(&content),
        details: None,
        structured: None,
        content,
        meta: r.meta.map(|m| m.0),
    }
}

/// A prompt's messages' blocks as the content (their text as the output),
/// the whole result as `structured` (roles, description).
pub(crate) fn prompt_outcome(r: GetPromptResult) -> Result<SourceOutcome, SourceError> {
    let structured = serde_json::to_value(&r).map_err(|e| SourceError::Protocol(e.to_string()))?;
    let content: Vec<toolhost_content::Content> = r
        .messages
        .into_iter()
        .map(|m| tools::our_block(m.content))
        .collect();
    Ok(SourceOutcome::Ok {
        output: toolhost_content::text_of(&content),
        details: None,
        structured: Some(structured),
        content,
        meta: None,
    })
}
