//! What the client answers its server ([`Handler`], rmcp's
//! `ClientHandler`): list changes, progress, the notifications the gateway
//! passes on (`offers.rs`), and the server's requests during a call
//! (`requests.rs`); and what it declares (form elicitation and sampling,
//! unless the operator turned them off).

use std::sync::{Arc, Weak};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RoleClient};
use rmcp::{ClientHandler, ErrorData};

use super::requests;
use super::state::{Shared, token_key};
use crate::peer::UpstreamNotice;

/// gateway passes on (`offers.rs`).
#[derive(Clone)]
pub(crate) struct Handler {
    shared: Weak<Shared>,
}

impl Handler {
    /// The handler of `shared`'s connection.
    pub(crate) fn new(shared: &Arc<Shared>) -> Handler {
        Handler {
            shared: Arc::downgrade(shared),
        }
    }

    fn tell(&self, note: UpstreamNotice) -> std::future::Ready<()> {
        if let Some(shared) = self.shared.upgrade() {
            shared.offers.tell(note);
        }
        std::future::ready(())
    }
}

impl ClientHandler for Handler {
    fn on_resource_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(UpstreamNotice::ResourcesChanged)
    }

    fn on_prompt_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(UpstreamNotice::PromptsChanged)
    }

    fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(UpstreamNotice::ResourceUpdated(params.uri))
    }

    #[allow(deprecated)] // logging (SEP-2577): every revision served here has it
    fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        self.tell(UpstreamNotice::Log(params))
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        if let Some(shared) = self.shared.upgrade() {
            shared.relist.notify_one();
        }
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + Send + '_ {
        let token = token_key(&params.progress_token);
        let sink = self
            .shared
            .upgrade()
            .and_then(|shared| shared.progress.lock().get(&token).cloned());
        if let Some(sink) = sink {
            #[allow(clippy::cast_possible_truncation)]
            let fraction = params
                .total
                .filter(|t| *t > 0.0)
                .map(|t| (params.progress / t).clamp(0.0, 1.0) as f32);
            let message = toolhost_text::line(&params.message.unwrap_or_default(), 200);
            sink(&message, fraction);
        }
        std::future::ready(())
    }

    #[expect(
        deprecated,
        reason = "sampling is deprecated by SEP-2577, and still served"
    )]
    fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::CreateMessageResult, ErrorData>> + Send + '_ {
        let shared = self.shared.upgrade();
        async move {
            match shared {
                Some(shared) => {
                    requests::sample(
                        &shared.config.name,
                        &shared.config.requests,
                        &shared.requests,
                        params,
                        context,
                    )
                    .await
                }
                None => Err(ErrorData::internal_error("the client stopped", None)),
            }
        }
    }

    fn create_elicitation(
        &self,
        params: rmcp::model::ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ElicitResult, ErrorData>> + Send + '_ {
        let shared = self.shared.upgrade();
        async move {
            match shared {
                Some(shared) => {
                    requests::elicit(
                        &shared.config.name,
                        &shared.config.requests,
                        &shared.requests,
                        params,
                        context,
                    )
                    .await
                }
                None => Ok(rmcp::model::ElicitResult::new(
                    rmcp::model::ElicitationAction::Decline,
                )),
            }
        }
    }

    #[expect(
        deprecated,
        reason = "roots are deprecated by SEP-2577, and still served"
    )]
    fn list_roots(
        &self,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ListRootsResult, ErrorData>> + Send + '_ {
        let shared = self.shared.upgrade();
        async move {
            match shared {
                Some(shared) => {
                    requests::roots(
                        &shared.config.name,
                        &shared.config.requests,
                        &shared.requests,
                        context,
                    )
                    .await
                }
                None => Err(ErrorData::internal_error("the client stopped", None)),
            }
        }
    }

    /// Declares form elicitation, sampling and roots, unless the operator
    /// turned them off for this server (`requests.rs`).
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if let Some(shared) = self.shared.upgrade() {
            let settings = &shared.config.requests;
            if settings.elicitation != toolhost_runtime::policy::Decision::Deny {
                capabilities.elicitation = Some(
                    rmcp::model::ElicitationCapability::new()
                        .with_form(rmcp::model::FormElicitationCapability::new()),
                );
            }
            if settings.sampling != toolhost_runtime::policy::Decision::Deny {
                capabilities.sampling = Some(rmcp::model::SamplingCapability::default());
            }
            if settings.roots != toolhost_runtime::policy::Decision::Deny {
                capabilities.roots = Some(rmcp::model::RootsCapabilities::default());
            }
        }
        // A call a server runs as a task is followed to its end (`task.rs`).
        requests::declare_tasks(&mut capabilities);
        ClientConfig::new(
            capabilities,
            Implementation::new("toolhost", env!("CARGO_PKG_VERSION")),
        )
    }
}
