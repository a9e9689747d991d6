//! The gateway's upstream MCP servers as its clients see them, beside
//! their tools: which servers there are (the runtime's tool sources that
//! are the client's `McpSource`s, found by `gateway.rs`), what each client asked to hear from them
//! (`resources/subscribe`, `logging/setLevel`), and the notifications
//! passed on to it:
//!
//! - `notifications/resources/list_changed` and `…/prompts/list_changed`
//!   to every client (it lists again, and sees what its profile allows);
//! - `notifications/resources/updated` to the clients that subscribed to
//!   that URI (a subscription is only taken for a resource the client may
//!   read);
//! - `notifications/message` to the clients that set a level with
//!   `logging/setLevel`, at or above it, from the servers the client's
//!   profile may use (one of their tools, or some of their resources or
//!   prompts). An upstream server has one session for all of
//!   the gateway's clients, so its log is the server's, not one caller's:
//!   a client hears it only by asking, and only from servers it may use.
//!
//! A client is known by its session (the peer's `initialize` parameters,
//! one value per session); its state goes when its connection closes.
//! Sessionless clients (2026-07-28) neither subscribe nor set a level.

#![allow(deprecated)] // logging (SEP-2577) and resources/subscribe are deprecated in rmcp; every revision served here has them

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::ErrorData;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, InitializeRequestParams, LoggingLevel, Prompt, Resource,
    ResourceTemplate, ResourceUpdatedNotificationParam, ServerCapabilities,
};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::broadcast;
use toolhost_runtime::Runtime;

use crate::peer::UpstreamNotice;

/// The most resources one client may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 1000;
/// How often a forwarding task checks that its client is still there.
const CLOSED_CHECK: std::time::Duration = std::time::Duration::from_secs(30);

/// An upstream MCP server as the gateway's server uses it, beside its
/// tools (those the runtime calls, as any tool source's). Declared here,
/// where it is used; implemented for the client's `McpSource` in
/// `gateway.rs`, so that the server never imports the client.
#[async_trait::async_trait]
pub(crate) trait UpstreamServer: Send + Sync {
    /// Its name (its tools' plugin name, what `server = "…"` rules match).
    fn name(&self) -> &str;
    /// The prefix of its tools' and prompts' names.
    fn prefix(&self) -> String;
    /// Its capabilities, while it is connected.
    fn capabilities(&self) -> Option<ServerCapabilities>;
    /// Its notifications from now on.
    fn notices(&self) -> broadcast::Receiver<UpstreamNotice>;
    /// Every resource it lists (bounded), URIs as they are.
    async fn resources(&self) -> Result<Vec<Resource>, ErrorData>;
    /// Every resource template it lists (bounded).
    async fn resource_templates(&self) -> Result<Vec<ResourceTemplate>, ErrorData>;
    /// Every prompt it lists (bounded), named with the prefix.
    async fn prompts(&self) -> Result<Vec<Prompt>, ErrorData>;
    /// Every skill it lists (SEP-2640, bounded), URIs as they are.
    async fn skills(&self) -> Result<Vec<rmcp::model::Skill>, ErrorData>;
    /// Its own name of the prompt listed as `name`, when it has the prefix.
    fn declared_prompt<'n>(&self, name: &'n str) -> Option<&'n str>;
    /// Whether a read of `uri` belongs to it (its lists or templates).
    fn may_hold(&self, uri: &str) -> bool;
    /// Whether it listed the template `template`.
    fn lists_template(&self, template: &str) -> bool;
    /// `resources/subscribe` (`on`) or `resources/unsubscribe` for `uri`.
    async fn subscribe(&self, uri: &str, on: bool) -> Result<(), ErrorData>;
    /// `logging/setLevel`.
    async fn set_level(&self, level: LoggingLevel) -> Result<(), ErrorData>;
    /// `completion/complete`, a prompt named as the server knows it.
    async fn complete(&self, params: CompleteRequestParams) -> Result<CompleteResult, ErrorData>;
}

/// Finds the upstream MCP servers among a runtime's tool sources
/// (`gateway.rs`: the client's `McpSource`s).
pub(crate) trait Upstreams: Send + Sync {
    /// The upstream servers among `runtime`'s tool sources.
    fn of(&self, runtime: &Runtime) -> Vec<Arc<dyn UpstreamServer>>;
}

/// What one client asked to hear.
struct Listener {
    /// Its session (kept, so that its address names no other session).
    session: Arc<InitializeRequestParams>,
    /// The profile it runs under, when it last asked.
    agent: Option<String>,
    level: Option<LoggingLevel>,
    subscriptions: HashSet<String>,
}

/// Every client's [`Listener`].
#[derive(Default)]
pub(crate) struct Listeners {
    all: Mutex<Vec<Listener>>,
}

impl Listeners {
    /// Changes the state of `peer`'s session (made on first use); `false`
    /// for a client without a session.
    fn with(
        &self,
        peer: &Peer<RoleServer>,
        agent: Option<&str>,
        change: impl FnOnce(&mut Listener) -> bool,
    ) -> bool {
        let Some(session) = peer.peer_info() else {
            return false;
        };
        let mut all = self.all.lock();
        let index = match all.iter().position(|l| Arc::ptr_eq(&l.session, &session)) {
            Some(i) => i,
            None => {
                all.push(Listener {
                    session,
                    agent: None,
                    level: None,
                    subscriptions: HashSet::new(),
                });
                all.len() - 1
            }
        };
        let listener = &mut all[index];
        listener.agent = agent.map(str::to_owned);
        change(listener)
    }

    /// Notes `peer`'s subscription to `uri` (or its end); `false` when it
    /// holds too many already, or has no session.
    pub(crate) fn subscribe(
        &self,
        peer: &Peer<RoleServer>,
        agent: Option<&str>,
        uri: &str,
        on: bool,
    ) -> bool {
        self.with(peer, agent, |l| {
            if !on {
                l.subscriptions.remove(uri);
                return true;
            }
            if l.subscriptions.len() >= MAX_SUBSCRIPTIONS {
                return false;
            }
            l.subscriptions.insert(uri.to_owned());
            true
        })
    }

    /// Notes the level `peer` wants log messages at.
    pub(crate) fn set_level(
        &self,
        peer: &Peer<RoleServer>,
        agent: Option<&str>,
        level: LoggingLevel,
    ) {
        self.with(peer, agent, |l| {
            l.level = Some(level);
            true
        });
    }

    /// What `peer`'s session asked for: whether it subscribed to `uri`,
    /// or the level and profile of its log.
    fn asked<T>(&self, peer: &Peer<RoleServer>, f: impl FnOnce(&Listener) -> T) -> Option<T> {
        let session = peer.peer_info()?;
        let all = self.all.lock();
        all.iter()
            .find(|l| Arc::ptr_eq(&l.session, &session))
            .map(f)
    }

    /// Forgets `peer`'s session.
    fn forget(&self, peer: &Peer<RoleServer>) {
        if let Some(session) = peer.peer_info() {
            self.all
                .lock()
                .retain(|l| !Arc::ptr_eq(&l.session, &session));
        }
    }
}

/// Passes every upstream server's notifications on to `peer` (see the
/// module docs) until its connection closes.
pub(crate) fn forward(
    runtime: Runtime,
    upstreams: &dyn Upstreams,
    listeners: Arc<Listeners>,
    peer: Peer<RoleServer>,
) {
    for source in upstreams.of(&runtime) {
        let mut notes = source.notices();
        let (runtime, listeners, peer) = (runtime.clone(), listeners.clone(), peer.clone());
        tokio::spawn(async move {
            loop {
                let note = tokio::select! {
                    n = notes.recv() => n,
                    () = tokio::time::sleep(CLOSED_CHECK) => {
                        if peer.is_transport_closed() {
                            break;
                        }
                        continue;
                    }
                };
                let note = match note {
                    Ok(note) => note,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                };
                if pass_on(&runtime, &listeners, source.as_ref(), &peer, note)
                    .await
                    .is_err()
                {
                    break;
                }
            }
            listeners.forget(&peer);
        });
    }
}

/// Sends `note` to `peer` when it asked for it and may hear it.
async fn pass_on(
    runtime: &Runtime,
    listeners: &Listeners,
    source: &dyn UpstreamServer,
    peer: &Peer<RoleServer>,
    note: UpstreamNotice,
) -> Result<(), rmcp::service::ServiceError> {
    match note {
        UpstreamNotice::ResourcesChanged => peer.notify_resource_list_changed().await,
        UpstreamNotice::PromptsChanged => peer.notify_prompt_list_changed().await,
        UpstreamNotice::ResourceUpdated(uri) => {
            if listeners
                .asked(peer, |l| l.subscriptions.contains(&uri))
                .unwrap_or(false)
            {
                peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                    .await
            } else {
                Ok(())
            }
        }
        UpstreamNotice::Log(message) => {
            let Some((Some(level), agent)) = listeners.asked(peer, |l| (l.level, l.agent.clone()))
            else {
                return Ok(());
            };
            if rank(&message.level) >= rank(&level)
                && may_use(runtime, source.name(), agent.as_deref())
            {
                peer.notify_logging_message(message).await
            } else {
                Ok(())
            }
        }
    }
}

/// Whether a caller under `agent` may use the server `name` at all: it is
/// offered one of its tools, or not denied all of its resources or all of
/// its prompts (a read of any URI, a get of any name).
fn may_use(runtime: &Runtime, name: &str, agent: Option<&str>) -> bool {
    use toolhost_runtime::Access;
    runtime
        .offered_tools(agent, None)
        .iter()
        .any(|t| t.plugin == name)
        || runtime.may_access(name, &Access::Resource { uri: String::new() }, agent, None)
        || runtime.may_access(
            name,
            &Access::Prompt {
                name: String::new(),
                arguments: serde_json::Map::new(),
            },
            agent,
            None,
        )
}

/// A level's severity, lowest first (RFC 5424's order, as MCP's).
fn rank(level: &LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl super::McpServer {
    /// The profile and call context of a read or a get (`resources.rs`,
    /// `prompts.rs`) by the client of `context`: its profile, identity and
    /// approver, as a tool call of that client has them.
    pub(super) fn access_context(
        &self,
        context: &rmcp::service::RequestContext<RoleServer>,
    ) -> (Option<String>, toolhost_runtime::CallContext) {
        let agent = self.agent(context);
        let asks = self.asks(context, agent.as_deref());
        let client = super::identity::ClientIdentity::of_request(context).0;
        let mut cx = toolhost_runtime::CallContext::new()
            .call_id(format!("mcp-{}", super::request_id(context)))
            .approver(self.approver(context, asks, &client, None))
            .client(client);
        if let Some(agent) = &agent {
            cx = cx.agent(agent.clone());
        }
        (agent, cx)
    }

    /// Runs `access` to `source` for the client of `context`, through the
    /// runtime's steps; dropped (and the upstream request cancelled) when
    /// the client cancels.
    /// A 2026-07-28 caller's get carries the `relay` of an upstream
    /// server's questions (`prompts.rs`).
    pub(super) async fn run_access(
        &self,
        source: &dyn UpstreamServer,
        access: &toolhost_runtime::Access,
        context: &rmcp::service::RequestContext<RoleServer>,
        relay: Option<crate::peer::InputRelay>,
    ) -> Result<toolhost_runtime::ToolResult, rmcp::ErrorData> {
        let (_, mut cx) = self.access_context(context);
        if let Some(relay) = relay {
            cx = cx.extension(relay);
        }
        let name = source.name();
        tokio::select! {
            r = self.runtime.access(name, access, cx) => r.map_err(|e| {
                // The caller's to fix (-32602), or the read's failure.
                let message = toolhost_text::line(&e.to_string(), 1000);
                match e.kind() {
                    toolhost_runtime::error::ErrorKind::InvalidArguments
                    | toolhost_runtime::error::ErrorKind::ToolInvalidArguments => {
                        rmcp::ErrorData::invalid_params(message, None)
                    }
                    _ => rmcp::ErrorData::internal_error(message, None),
                }
            }),
            () = context.ct.cancelled() => Err(rmcp::ErrorData::internal_error(
                "the client cancelled the request",
                None,
            )),
        }
    }
}

/// Adds to `capabilities` what the upstream servers offer besides tools:
/// resources (with subscriptions and list changes), prompts, completion
/// and logging, when any of them offers it.
pub(crate) fn offered(
    runtime: &Runtime,
    upstreams: &dyn Upstreams,
    capabilities: &mut rmcp::model::ServerCapabilities,
) {
    use rmcp::model::{PromptsCapability, ResourcesCapability};
    for source in upstreams.of(runtime) {
        let Some(theirs) = source.capabilities() else {
            continue;
        };
        if theirs.resources.is_some() {
            let mut resources = ResourcesCapability::default();
            resources.subscribe = Some(true);
            resources.list_changed = Some(true);
            capabilities.resources = Some(resources);
        }
        if theirs.prompts.is_some() {
            let mut prompts = PromptsCapability::default();
            prompts.list_changed = Some(true);
            capabilities.prompts = Some(prompts);
        }
        if theirs.completions.is_some() {
            capabilities.completions = theirs.completions.clone();
        }
        #[allow(deprecated)] // logging (SEP-2577): every revision served here has it
        if theirs.logging.is_some() {
            capabilities.logging = theirs.logging.clone();
        }
    }
}

impl super::McpServer {
    /// `logging/setLevel`: notes the client's level, and asks each
    /// upstream server its profile may use to log at it.
    #[allow(deprecated)] // logging (SEP-2577): every revision served here has it
    pub(super) async fn log_level(
        &self,
        level: LoggingLevel,
        context: &rmcp::service::RequestContext<RoleServer>,
    ) -> Result<(), rmcp::ErrorData> {
        let logging: Vec<Arc<dyn UpstreamServer>> = self
            .upstreams
            .of(&self.runtime)
            .into_iter()
            .filter(|s| s.capabilities().is_some_and(|c| c.logging.is_some()))
            .collect();
        if logging.is_empty() {
            // Not declared either: nobody upstream logs.
            return Err(rmcp::ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "logging/setLevel",
                None,
            ));
        }
        let agent = self.agent(context);
        self.listeners
            .set_level(&context.peer, agent.as_deref(), level);
        for source in logging {
            let name = source.name();
            if may_use(&self.runtime, name, agent.as_deref())
                && let Err(e) = source.set_level(level).await
            {
                tracing::warn!(server = %name, "logging/setLevel failed: {}", e.message);
            }
        }
        Ok(())
    }
}
