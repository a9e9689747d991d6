//! [`RuntimeTools`]: the runtime as the agent loop's tool executor.

use serde_json::Value;
use toolhost_agent::READ_VAR;
use toolhost_agent::provider::BoxFuture;
use toolhost_agent::{ToolCallInfo, ToolExecutor, ToolOutcome, ToolSpec};

use toolhost_runtime::{CallContext, CallError, Runtime, ToolInfo, error::ToolErrorKind};

/// A [`Runtime`] as the agent loop's [`ToolExecutor`]: the tools the
/// policy offers, each call through the runtime's whole pipeline, with the
/// run's variables, round and progress carried into the call.
///
/// ```no_run
/// # async fn run(runtime: toolhost_runtime::Runtime) {
/// use toolhost_agent::ToolExecutor;
/// let tools = toolhost_agent_runtime::RuntimeTools::new(runtime);
/// println!("{} tools", tools.tools().len());
/// # }
/// ```
#[derive(Clone)]
pub struct RuntimeTools(Runtime);

impl RuntimeTools {
    /// The executor over `runtime` (a handle: clones share one runtime).
    pub fn new(runtime: Runtime) -> RuntimeTools {
        RuntimeTools(runtime)
    }

    /// The runtime it calls.
    pub fn runtime(&self) -> &Runtime {
        &self.0
    }
}

impl From<Runtime> for RuntimeTools {
    fn from(runtime: Runtime) -> RuntimeTools {
        RuntimeTools(runtime)
    }
}

fn spec(t: ToolInfo) -> ToolSpec {
    ToolSpec {
        name: t.name,
        description: t.description,
        input_schema: t.input_schema,
        read_only: t.annotations.read_only,
    }
}

impl ToolExecutor for RuntimeTools {
    fn tools(&self) -> Vec<ToolSpec> {
        self.0.tools().into_iter().map(spec).collect()
    }

    /// The runtime's permission filter, [`Runtime::offered_tools`];
    /// `read_var` only while the run has variables to read.
    fn tools_for(&self, info: &ToolCallInfo) -> Vec<ToolSpec> {
        let no_vars = info.vars.as_ref().is_none_or(|v| v.store.is_empty());
        self.0
            .offered_tools(info.agent.as_deref(), info.session_id.as_deref())
            .into_iter()
            .filter(|t| !(no_vars && t.name == READ_VAR))
            .map(spec)
            .collect()
    }

    /// [`Runtime::withheld_tools`]: what the policy denies outright and the
    /// session switched off.
    fn withheld_tools(&self, info: &ToolCallInfo) -> Vec<String> {
        self.0
            .withheld_tools(info.agent.as_deref(), info.session_id.as_deref())
    }

    /// Whether the built-in `read_var` source is loaded
    /// ([`read_var_source`](crate::read_var_source)): its calls then go
    /// through the runtime's steps like every other.
    fn serves_read_var(&self) -> bool {
        // Only a built-in source may hold the reserved name. Asked every
        // round: one map lookup, no listing.
        self.0.has_tool(READ_VAR)
    }

    /// The `usage` of each plugin with a tool offered now.
    fn usage_rules(&self, info: &ToolCallInfo) -> Vec<(String, String)> {
        let offered = self
            .0
            .offered_tools(info.agent.as_deref(), info.session_id.as_deref());
        self.0
            .plugins()
            .into_iter()
            .filter(|p| offered.iter().any(|t| t.plugin == p.name))
            .filter_map(|p| p.usage.map(|u| (p.name, u)))
            .collect()
    }

    fn call<'a>(
        &'a self,
        name: &'a str,
        args: Value,
        info: ToolCallInfo,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let steps = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = steps.clone();
            let mut cx = CallContext::new()
                .call_id(info.call_id)
                .on_step(move |step| {
                    if let (Ok(v), Ok(mut all)) = (serde_json::to_value(step), sink.lock()) {
                        all.push(v);
                    }
                });
            if let Some(s) = info.session_id {
                cx = cx.session_id(s);
            }
            if let Some(a) = info.agent {
                cx = cx.agent(a);
            }
            if let Some(vars) = info.vars {
                cx = cx.extension(vars);
            }
            if let Some(report) = info.progress {
                cx = cx.on_progress(move |_tool, message, fraction| report(message, fraction));
            }
            let result = self.0.call(name, args, cx).await;
            let steps = match steps.lock() {
                Ok(mut s) => std::mem::take(&mut *s),
                Err(_) => Vec::new(),
            };
            match result {
                Ok(r) => ToolOutcome {
                    output: r.output,
                    details: r.details,
                    content: r.content,
                    is_error: false,
                    error_kind: None,
                    steps,
                    cached: r.cached,
                },
                Err(e) => ToolOutcome {
                    output: e.to_string(),
                    details: Some(error_details(&self.0, name, &e)),
                    content: Vec::new(),
                    is_error: true,
                    error_kind: Some(e.kind()),
                    steps,
                    cached: false,
                },
            }
        })
    }
}

/// [`CallError::details`], with the tool's
/// argument schema when the arguments were wrong (the loop adds the
/// arguments it sent).
fn error_details(runtime: &Runtime, name: &str, e: &CallError) -> Value {
    let mut details = e.details();
    if matches!(
        e,
        CallError::InvalidArguments { .. }
            | CallError::Tool {
                kind: ToolErrorKind::InvalidArguments,
                ..
            }
    ) && let Some(tool) = runtime.tools().into_iter().find(|t| t.name == name)
        && let Some(d) = details.as_object_mut()
    {
        d.insert("schema".into(), (*tool.input_schema).clone());
    }
    details
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_agents_built_in_tool_names_are_reserved() {
        assert!(
            toolhost_runtime::contract::RESERVED_TOOL_NAMES.contains(&toolhost_agent::READ_VAR)
        );
    }
}
