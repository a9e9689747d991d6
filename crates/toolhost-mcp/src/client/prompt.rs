//! `prompts/get` of a 2026-07-28 caller, to a server that has a
//! 2026-07-28 side: sent there, and an `input_required` answer handled as
//! a tool call's is (`input.rs`): relayed to the caller, its answer sent
//! back to the same get only. Any other get goes through the session
//! (`offers.rs`).

use std::sync::Arc;

use rmcp::model::{ClientRequest, GetPromptRequest, GetPromptRequestParams, ServerResult};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;
use toolhost_runtime::{source::SourceCall, source::SourceError, source::SourceOutcome};

use super::input::{self, Rounds};
use super::link::CancelOnDrop;
use super::offers::prompt_outcome;
use super::state::Shared;

/// Gets the prompt `name` (as the server declared it) for `call`.
pub(crate) async fn get(
    shared: &Arc<Shared>,
    call: &SourceCall<'_>,
    name: &str,
) -> Result<SourceOutcome, SourceError> {
    let mut rounds = Rounds::of(shared, call);
    loop {
        let peer = shared.peer_for(call.tool, rounds.relayed()).await?;
        let mut params = GetPromptRequestParams::new(name.to_owned());
        if let Some(Value::Object(arguments)) = call.args.get("arguments")
            && !arguments.is_empty()
        {
            params = params.with_arguments(arguments.clone());
        }
        let mut options = PeerRequestOptions::no_options();
        if let Some((responses, state)) =
            rounds.answers(&peer, &shared.config.requests, &mut options)
        {
            params.input_responses = Some(responses);
            params.request_state = state;
        }
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        let handle = peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| SourceError::Unavailable(format!("cannot send prompts/get: {e}")))?;
        let mut cancel = CancelOnDrop {
            peer: Some(peer),
            id: handle.id.clone(),
        };
        let response = handle.await_response().await;
        cancel.peer = None;
        let asked = match response {
            Ok(ServerResult::GetPromptResult(result)) => return prompt_outcome(result),
            Ok(ServerResult::InputRequiredResult(asked)) => asked,
            Ok(_) => {
                return Err(SourceError::Protocol(
                    "the answer to prompts/get is not a prompt".into(),
                ));
            }
            Err(ServiceError::McpError(e)) => {
                if e.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY {
                    rounds.lacks(e.clone());
                }
                return Ok(SourceOutcome::Failed(e.message.to_string()));
            }
            Err(e) => return Ok(SourceOutcome::Failed(e.to_string())),
        };
        match rounds.answer(shared, call, asked).await {
            input::Next::Retry => {}
            input::Next::End(outcome) => return outcome,
        }
    }
}
