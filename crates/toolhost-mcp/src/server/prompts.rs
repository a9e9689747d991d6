//! Prompts of the upstream MCP servers, served to the gateway's clients
//! (`prompts/list`, `prompts/get`), and `completion/complete` for their
//! prompts and resource templates.
//!
//! A prompt is named as the server's tools are (its prefix, `NAME__`, or
//! none); a client is listed only the prompts its profile may get
//! ([`Runtime::may_access`](toolhost_runtime::Runtime::may_access):
//! `prompt = "..."` rules on the name as listed), and a get goes through
//! the runtime's steps as a call of `prompts/get` from that server
//! ([`Runtime::access`](toolhost_runtime::Runtime::access)): policy,
//! hooks, approval, limits, the after-hooks and the audit. A prompt it may
//! not get is, for it, not there (-32602, as for an unknown name), and
//! so is completion for it. Completion for a resource template is
//! answered when the caller may read the template.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, ListPromptsResult, Reference,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};
use toolhost_runtime::Access;

use super::McpServer;
use super::round_trip::OuterCall;
use super::upstream::UpstreamServer;
use toolhost_runtime::policy::GET_PROMPT;

fn not_found(name: &str) -> McpError {
    McpError::invalid_params(
        format!("Prompt {} not found", toolhost_text::line(name, 200)),
        None,
    )
}

fn offers_resources(source: &dyn UpstreamServer) -> bool {
    source.capabilities().is_some_and(|c| c.resources.is_some())
}

fn offers_prompts(source: &dyn UpstreamServer) -> bool {
    source.capabilities().is_some_and(|c| c.prompts.is_some())
}

fn prompt_access(name: &str, arguments: Map<String, Value>) -> Access {
    Access::Prompt {
        name: name.to_owned(),
        arguments,
    }
}

impl McpServer {
    pub(super) async fn prompts(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let agent = self.agent(context);
        let mut all = Vec::new();
        let offering: Vec<Arc<dyn UpstreamServer>> = self
            .upstreams
            .of(&self.runtime)
            .into_iter()
            .filter(|s| offers_prompts(s.as_ref()))
            .collect();
        if offering.is_empty() {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                "prompts/list",
                None,
            ));
        }
        for source in &offering {
            match source.prompts().await {
                Ok(listed) => all.extend(listed.into_iter().filter(|p| {
                    self.runtime.may_access(
                        source.name(),
                        &prompt_access(&p.name, Map::new()),
                        agent.as_deref(),
                        None,
                    )
                })),
                Err(e) => {
                    tracing::warn!(server = %source.name(), "prompts/list failed: {}", e.message);
                }
            }
        }
        Ok(ListPromptsResult::with_all_items(all))
    }

    /// The server whose prompt `name` is (the longest prefix that fits),
    /// when the caller may get it.
    fn prompt_source(
        &self,
        name: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Arc<dyn UpstreamServer>, McpError> {
        let source = self
            .upstreams
            .of(&self.runtime)
            .into_iter()
            .filter(|s| offers_prompts(s.as_ref()) && s.declared_prompt(name).is_some())
            .max_by_key(|s| s.prefix().len())
            .ok_or_else(|| not_found(name))?;
        let agent = self.agent(context);
        if !self.runtime.may_access(
            source.name(),
            &prompt_access(name, Map::new()),
            agent.as_deref(),
            None,
        ) {
            return Err(not_found(name));
        }
        Ok(source)
    }

    /// `prompts/get` of `request`'s prompt for the client of `context`.
    /// For a 2026-07-28 caller, an upstream server's question on the way
    /// goes on to it as an `input_required` result, its state sealed to
    /// this get (`round_trip.rs`), as a tool call's does.
    pub(super) async fn prompt(
        &self,
        request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let name = request.name.as_str();
        let source = self.prompt_source(name, context)?;
        let arguments = request.arguments.unwrap_or_default();
        let modern = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let round_trip = if modern {
            let client = super::identity::ClientIdentity::of_request(context).0;
            let outer = OuterCall::of(
                &client,
                self.agent(context).as_deref(),
                &format!("{GET_PROMPT} {name}"),
                &Value::Object(arguments.clone()),
            );
            Some(self.round_trip(
                outer,
                request.request_state.as_deref(),
                request.input_responses.as_ref(),
                context,
            )?)
        } else {
            None
        };
        let relay = round_trip.as_ref().map(|(_, _, relay)| relay.clone());
        let result = self
            .run_access(
                source.as_ref(),
                &prompt_access(name, arguments),
                context,
                relay.clone(),
            )
            .await;
        if let (Some((outer, approver, _)), Some(relay)) = (&round_trip, &relay) {
            if let Some(error) = relay.lacking() {
                return Err(error);
            }
            if let Some(upstream) = relay.asked() {
                return match self.round_trips.ask(outer, approver, Some(upstream)) {
                    Ok(Some(input)) => Ok(GetPromptResponse::InputRequired(input)),
                    Ok(None) => Err(McpError::internal_error("the prompt asked nothing", None)),
                    Err(e) => Err(McpError::internal_error(
                        format!("cannot pass the server's question on: {e}"),
                        None,
                    )),
                };
            }
        }
        let result = result?;
        // The result as the server sent it (or as an after-hook made it),
        // each message's block as the hooks left it.
        let mut prompt: GetPromptResult = result
            .structured
            .and_then(|s| serde_json::from_value(s).ok())
            .ok_or_else(|| McpError::internal_error("the prompt's result is not a prompt", None))?;
        if result.content.len() == prompt.messages.len() {
            for (message, block) in prompt.messages.iter_mut().zip(result.content) {
                if let Some(block) = serde_json::to_value(block)
                    .ok()
                    .and_then(|b| serde_json::from_value(b).ok())
                {
                    message.content = block;
                }
            }
        }
        Ok(prompt.into())
    }

    pub(super) async fn complete_for(
        &self,
        params: CompleteRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let source = match &params.r#ref {
            Reference::Prompt(prompt) => self.prompt_source(&prompt.name, context)?,
            Reference::Resource(template) => {
                let agent = self.agent(context);
                let all = self.upstreams.of(&self.runtime);
                for s in all.iter().filter(|s| offers_resources(s.as_ref())) {
                    let _ = s.resource_templates().await;
                }
                all.into_iter()
                    .find(|s| {
                        s.lists_template(&template.uri)
                            && self.runtime.may_access(
                                s.name(),
                                &Access::Resource {
                                    uri: template.uri.clone(),
                                },
                                agent.as_deref(),
                                None,
                            )
                    })
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            format!(
                                "Resource template {} not found",
                                toolhost_text::line(&template.uri, 200)
                            ),
                            None,
                        )
                    })?
            }
            _ => {
                return Err(McpError::invalid_params(
                    "completion for this kind of reference is not offered",
                    None,
                ));
            }
        };
        source.complete(params).await
    }
}
