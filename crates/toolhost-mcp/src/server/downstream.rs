//! The client a call came from, as the tools' own servers reach it: when
//! an upstream MCP server (a tool source, `client/`) sends
//! `sampling/createMessage` or `elicitation/create` during a call that
//! came in over MCP, the request goes on to the client that made the call,
//! on that call's stream (SEP-2260: the HTTP response stream of its
//! `tools/call`), if that client declared the capability.
//!
//! [`McpServer`](super::McpServer) attaches a [`Downstream`] to every call
//! it runs ([`CallContext::extension`](toolhost_runtime::CallContext::extension));
//! the client side (`client/requests.rs`) finds it there and decides,
//! under the operator's settings for that server, whether to send.

#![expect(
    deprecated,
    reason = "sampling is deprecated by SEP-2577, and still served"
)]

use std::time::Duration;

use rmcp::model::{
    ClientResult, CreateMessageRequest, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequest, ElicitRequestParams, ElicitResult, RequestId, ServerRequest,
};
use rmcp::service::{
    OriginatingRequestId, Peer, PeerRequestOptions, RequestContext, RoleServer, ServiceError,
};

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

    async fn send(
        &self,
        request: ServerRequest,
        timeout: Duration,
    ) -> Result<ClientResult, ServiceError> {
        self.peer
            .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
            .await?
            .await_response()
            .await
    }
}
