//! What a source and its connection task share ([`Shared`]): the
//! configuration, the link, the state reported, the tools listed, the
//! progress sinks of the calls in flight, the OAuth sign-in state, what
//! the server offers besides tools, and the calls its requests belong to.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rmcp::model::ProgressToken;
use rmcp::service::{Peer, RoleClient};
use tokio::sync::{Notify, watch};
use toolhost_runtime::{
    source::SourceError, source::SourceProgress, source::SourceState, source::SourceTool,
};

use super::config::{McpServerConfig, McpTransport};
use super::link::{self, Link};
use super::oauth::Authorizer;
use super::offers::Offers;
use super::requests::InFlight;

/// What the source and its connection task share.
pub(crate) struct Shared {
    pub(crate) config: McpServerConfig,
    pub(crate) link: watch::Sender<Link>,
    pub(crate) state: Mutex<(SourceState, Option<String>)>,
    pub(crate) tools: Mutex<Arc<[SourceTool]>>,
    pub(crate) changes: watch::Sender<u64>,
    /// Set by `notifications/tools/list_changed`.
    pub(crate) relist: Notify,
    /// Where each running call's progress goes, by progress token.
    pub(crate) progress: Mutex<HashMap<String, SourceProgress>>,
    /// The OAuth sign-in state of an HTTP server that has OAuth settings,
    /// made at the first connection.
    pub(crate) oauth: tokio::sync::OnceCell<Option<Arc<Authorizer>>>,
    /// Its resources, prompts and notifications (`offers.rs`).
    pub(crate) offers: Offers,
    /// The calls in flight, for the requests the server sends back
    /// during them (`requests.rs`).
    pub(crate) requests: Arc<InFlight>,
    /// The server's 2026-07-28 side, when it speaks that revision too
    /// (HTTP only): its peer, and the tools it lists only there.
    pub(crate) per_request: Mutex<Option<PerRequest>>,
}

/// A server's 2026-07-28 side: its peer, and the tools listed only there.
pub(crate) type PerRequest = (Peer<RoleClient>, Arc<std::collections::HashSet<String>>);

impl Shared {
    pub(crate) fn set_link(&self, link: Link, state: SourceState, server: Option<String>) {
        {
            let mut now = self.state.lock();
            now.0 = state;
            if server.is_some() {
                now.1 = server;
            }
        }
        self.link.send_replace(link);
    }

    pub(crate) fn set_tools(&self, tools: Vec<SourceTool>) {
        let changed = {
            let mut now = self.tools.lock();
            let changed = **now != *tools;
            *now = tools.into();
            changed
        };
        if changed {
            self.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// The OAuth sign-in state, made at its first use; `None` for a server
    /// without OAuth settings.
    pub(crate) async fn authorizer(&self) -> Result<Option<Arc<Authorizer>>, String> {
        let made = self
            .oauth
            .get_or_try_init(|| async {
                let McpTransport::Http(endpoint) = &self.config.transport else {
                    return Ok(None);
                };
                let Some(settings) = &endpoint.oauth else {
                    return Ok(None);
                };
                Authorizer::new(&self.config.name, &endpoint.url, settings)
                    .await
                    .map(|a| Some(Arc::new(a)))
                    .map_err(|e| e.to_string())
            })
            .await?;
        Ok(made.clone())
    }

    /// The connection, waiting while it is being made; an error at once
    /// when it is down.
    pub(crate) async fn peer(&self) -> Result<Peer<RoleClient>, SourceError> {
        link::peer(&self.link).await
    }

    /// The connection for a call of `tool`: the server's 2026-07-28 side
    /// for a caller that speaks it (`modern`) or a tool listed only there,
    /// else the session.
    pub(crate) async fn peer_for(
        &self,
        tool: &str,
        modern: bool,
    ) -> Result<Peer<RoleClient>, SourceError> {
        let session = self.peer().await?;
        let per_request = self.per_request.lock().clone();
        Ok(match per_request {
            Some((peer, only)) if modern || only.contains(tool) => peer,
            _ => session,
        })
    }
}

/// A progress token as the key of the progress table.
pub(crate) fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        rmcp::model::NumberOrString::String(s) => format!("s:{s}"),
        rmcp::model::NumberOrString::Number(n) => format!("n:{n}"),
    }
}

/// Why a 401 ends a server that has no OAuth settings.
pub(crate) fn not_set_up(challenge: &str) -> String {
    let asks = if challenge.trim().is_empty() {
        String::new()
    } else {
        format!(" ({})", toolhost_text::line(challenge, 200))
    };
    format!(
        "the server answered 401: it wants a token{asks}, and neither a bearer token nor OAuth is set for it"
    )
}
