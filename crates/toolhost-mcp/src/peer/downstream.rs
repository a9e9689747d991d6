//! The client a call came from, as the tools' own servers reach it: when
//! an upstream MCP server (a tool source, `client/`) sends
//! `sampling/createMessage` or `elicitation/create` during a call that
//! came in over MCP, the request goes on to the client that made the call,
//! on that call's stream (SEP-2260: the HTTP response stream of its
//! `tools/call`), if that client declared the capability.
//!
//! The server (`server/mod.rs`) attaches a [`Downstream`] to every call
//! it runs ([`CallContext::extension`](toolhost_runtime::CallContext::extension));
//! the client side (`client/requests.rs`) finds it there and decides,
//! under the operator's settings for that server, whether to send. It
//! lives here, below both, so that neither imports the other.

#![expect(
    deprecated,
    reason = "sampling is deprecated by SEP-2577, and still served"
)]

use std::time::Duration;

use rmcp::model::{
    ClientResult, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, ListRootsRequest, ListRootsResult, RequestId,
    ServerRequest,
};
use rmcp::service::{
    OriginatingRequestId, Peer, PeerRequestOptions, RequestContext, RoleServer, ServiceError,
};

/// How long the client's user has to answer a question (a policy `ask`
/// sent as an elicitation, or an upstream server's request passed on)
/// before it counts as unanswered.
pub const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// The client that made a call, and the request it made it with.
#[derive(Clone)]
pub(crate) struct Downstream {
    peer: Peer<RoleServer>,
    request: RequestId,
}

impl Downstream {
    /// The client of `context`'s request.
    pub(crate) fn of(context: &RequestContext<RoleServer>) -> Downstream {
        Downstream {
            peer: context.peer.clone(),
            request: context.id.clone(),
        }
    }

    /// Whether a server may still send it requests: 2026-07-28 forbids
    /// them (the `input_required` round trip replaces them).
    fn takes_requests(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.protocol_version.has_initialize())
    }

    /// Whether it declared `sampling`.
    pub(crate) fn can_sample(&self) -> bool {
        self.takes_requests()
            && self
                .peer
                .peer_info()
                .is_some_and(|info| info.capabilities.sampling.is_some())
    }

    /// Whether it declared elicitation in form mode (an empty
    /// `elicitation` object means form mode, as the spec says).
    pub(crate) fn can_elicit(&self, url: bool) -> bool {
        self.takes_requests()
            && self.peer.peer_info().is_some_and(|info| {
                info.capabilities.elicitation.as_ref().is_some_and(|e| {
                    if url {
                        e.url.is_some()
                    } else {
                        e.form.is_some() || e.url.is_none()
                    }
                })
            })
    }

    /// Whether it declared `roots`.
    pub(crate) fn can_list_roots(&self) -> bool {
        self.takes_requests()
            && self
                .peer
                .peer_info()
                .is_some_and(|info| info.capabilities.roots.is_some())
    }

    /// Sends `roots/list` on the call's stream and waits for the answer,
    /// `timeout` at most.
    pub(crate) async fn list_roots(
        &self,
        timeout: Duration,
    ) -> Result<ListRootsResult, ServiceError> {
        let mut request = ListRootsRequest::default();
        request
            .extensions
            .insert(OriginatingRequestId(self.request.clone()));
        match self
            .send(ServerRequest::ListRootsRequest(request), timeout)
            .await?
        {
            ClientResult::ListRootsResult(result) => Ok(result),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// Sends `sampling/createMessage` on the call's stream and waits for
    /// the answer, `timeout` at most.
    pub(crate) async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        timeout: Duration,
    ) -> Result<CreateMessageResult, ServiceError> {
        let mut request = CreateMessageRequest::new(params);
        request
            .extensions
            .insert(OriginatingRequestId(self.request.clone()));
        match self
            .send(ServerRequest::CreateMessageRequest(request), timeout)
            .await?
        {
            ClientResult::CreateMessageResult(result) => Ok(*result),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// Sends `elicitation/create` on the call's stream and waits for the
    /// answer, `timeout` at most.
    pub(crate) async fn elicit(
        &self,
        params: ElicitRequestParams,
        timeout: Duration,
    ) -> Result<ElicitResult, ServiceError> {
        let mut request = ElicitRequest::new(params);
        request
            .extensions
            .insert(OriginatingRequestId(self.request.clone()));
        match self
            .send(ServerRequest::ElicitRequest(request), timeout)
            .await?
        {
            ClientResult::ElicitResult(result) => Ok(result),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }

    /// Sends `request` from a task of its own: rmcp stamps a request sent
    /// while a handler runs with the request that handler answers (a
    /// task-local, which does not cross `tokio::spawn`), and here that is
    /// the upstream server's request, of another session; sent from the
    /// handler's task, the request lost its call's stream and went to the
    /// standalone one, which a client may not have open. The task is
    /// aborted when the caller stops waiting.
    async fn send(
        &self,
        request: ServerRequest,
        timeout: Duration,
    ) -> Result<ClientResult, ServiceError> {
        struct AbortOnDrop(tokio::task::AbortHandle);
        impl Drop for AbortOnDrop {
            fn drop(&mut self) {
                self.0.abort();
            }
        }
        let peer = self.peer.clone();
        let task = tokio::spawn(async move {
            peer.send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
                .await?
                .await_response()
                .await
        });
        let _abort = AbortOnDrop(task.abort_handle());
        task.await.unwrap_or_else(|e| {
            Err(ServiceError::Cancelled {
                reason: Some(e.to_string()),
            })
        })
    }
}
