//! [`McpSource`]: one external MCP server as a tool source, a handle on
//! the state it shares with its connection task (`state.rs`,
//! `session.rs`); its calls go out through `call.rs`, its reads and gets
//! through `offers.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{Notify, watch};
use toolhost_runtime::{
    ToolSource, source::SourceCall, source::SourceError, source::SourceFuture,
    source::SourceOutcome, source::SourceState, source::SourceStatus, source::SourceTool,
};

use super::config::{HttpEndpoint, McpServerConfig, McpTransport, Start};
use super::error::McpClientError;
use super::link::Link;
use super::offers::{Offered, Offers};
use super::state::Shared;
use super::{call, connect, oauth, prompt, session};

/// An external MCP server as a tool source. Dropping it stops the
/// connection (and a stdio server's process group).
pub struct McpSource {
    shared: Arc<Shared>,
    manager: tokio::task::JoinHandle<()>,
}

impl Drop for McpSource {
    fn drop(&mut self) {
        self.manager.abort();
    }
}

impl McpSource {
    /// Checks `config` and starts connecting (in a task; within a Tokio
    /// runtime). A server that cannot be started or reached is not an
    /// error here: the source reports it in its status and keeps trying.
    pub fn start(config: McpServerConfig) -> Result<McpSource, McpClientError> {
        if !toolhost_runtime::contract::is_valid_tool_name(&config.name) {
            return Err(McpClientError::InvalidName(config.name));
        }
        if let McpTransport::Http(HttpEndpoint {
            oauth: Some(settings),
            ..
        }) = &config.transport
        {
            oauth::check(&config.name, settings)?;
        }
        connect::check(&config).map_err(|message| McpClientError::Invalid {
            name: config.name.clone(),
            message,
        })?;
        let shared = Arc::new(Shared {
            config,
            link: watch::channel(Link::Starting).0,
            state: Mutex::new((SourceState::Starting, None)),
            tools: Mutex::new(Arc::new([])),
            changes: watch::channel(0).0,
            relist: Notify::new(),
            progress: Mutex::new(HashMap::new()),
            oauth: tokio::sync::OnceCell::new(),
            offers: Offers::default(),
            requests: Arc::default(),
            per_request: Mutex::new(None),
        });
        if matches!(shared.config.transport, McpTransport::Http(_)) {
            // HTTPS through rustls with ring; a provider installed before stays.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let manager = tokio::spawn(session::manage(shared.clone()));
        Ok(McpSource { shared, manager })
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.shared.config
    }

    /// Waits until the connection is up or has failed (for tests and
    /// embedders that want to know), and returns the state.
    pub async fn connected(&self) -> SourceState {
        let mut link = self.shared.link.subscribe();
        let _ = link.wait_for(|l| !matches!(l, Link::Starting)).await;
        self.shared.state.lock().0.clone()
    }

    /// What its server offers besides tools, for the gateway (`gateway.rs`).
    /// The server's own name of the prompt `call` gets, when it is a get
    /// of a 2026-07-28 caller (it carries a relay) and the server has a
    /// 2026-07-28 side.
    fn relayed_prompt(&self, call: &SourceCall<'_>) -> Option<String> {
        if call.tool != toolhost_runtime::policy::GET_PROMPT
            || call.extensions.get::<crate::peer::InputRelay>().is_none()
            || self.shared.per_request.lock().is_none()
        {
            return None;
        }
        let listed = call.args[toolhost_runtime::policy::NAME_ARG].as_str()?;
        self.offered().declared_prompt(listed).map(str::to_owned)
    }

    pub(crate) fn offered(&self) -> Offered<'_> {
        Offered {
            link: &self.shared.link,
            offers: &self.shared.offers,
            prefix: self.prefix(),
        }
    }
}

impl ToolSource for McpSource {
    fn name(&self) -> &str {
        &self.shared.config.name
    }

    fn prefix(&self) -> String {
        match &self.shared.config.prefix {
            Some(prefix) => prefix.clone(),
            None => format!("{}__", self.shared.config.name),
        }
    }

    fn status(&self) -> SourceStatus {
        let (state, server) = self.shared.state.lock().clone();
        let kind = match self.shared.config.transport {
            McpTransport::Stdio(_) => "mcp-stdio",
            McpTransport::Http(_) => "mcp-http",
        };
        // Only once the sign-in state is made (`status` cannot wait).
        let sign_in = self
            .shared
            .oauth
            .get()
            .and_then(Option::as_ref)
            .map(|oauth| oauth.describe());
        SourceStatus {
            server,
            sign_in,
            ..SourceStatus::new(kind, self.shared.config.location(), state)
        }
    }

    fn settings_digest(&self) -> Option<String> {
        Some(self.shared.config.settings_digest())
    }

    fn tools(&self) -> Arc<[SourceTool]> {
        self.shared.tools.lock().clone()
    }

    fn changes(&self) -> watch::Receiver<u64> {
        self.shared.changes.subscribe()
    }

    fn ready(&self) -> SourceFuture<'_, ()> {
        Box::pin(async move {
            if self.shared.config.start == Start::Eager {
                // The connection task gives up within `connect_timeout`.
                let _ = self.connected().await;
            }
        })
    }

    fn call<'a>(
        &'a self,
        call: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
        Box::pin(async move {
            // A 2026-07-28 caller's get of a prompt, where the server has
            // that side (`prompt.rs`).
            if let Some(name) = self.relayed_prompt(&call) {
                return prompt::get(&self.shared, &call, &name).await;
            }
            // A read of a resource or a get of a prompt (`offers.rs`).
            match self.offered().access(&call).await {
                Some(answer) => answer,
                None => call::run(&self.shared, call).await,
            }
        })
    }
}
