//! Bindings for `toolhost:plugin@0.1.0` (`wit/0.1.0/`, frozen): no
//! structured output.

use super::types::{Annotations, RawContext, RawOutcome, RawToolSpec};

version_bindings! {
    path: "wit/0.1.0",
    version: (0, 1, 0),
}

use exports::toolhost::plugin::tool;

impl From<tool::ToolSpec> for RawToolSpec {
    fn from(spec: tool::ToolSpec) -> Self {
        RawToolSpec {
            name: spec.name,
            description: spec.description,
            input_schema: spec.input_schema,
            // 0.1.0 has no structured output.
            output_schema: None,
            annotations: spec.annotations.into(),
        }
    }
}

impl From<toolhost::plugin::types::Annotations> for Annotations {
    fn from(a: toolhost::plugin::types::Annotations) -> Self {
        Annotations {
            read_only: a.read_only,
            idempotent: a.idempotent,
            destructive: a.destructive,
            open_world: a.open_world,
        }
    }
}

impl From<RawContext<'_>> for tool::CallContext {
    fn from(cx: RawContext<'_>) -> Self {
        tool::CallContext {
            call_id: cx.call_id.to_owned(),
            session_id: cx.session_id.map(str::to_owned),
            agent: cx.agent.map(str::to_owned),
        }
    }
}

impl From<Result<tool::ToolOutput, tool::ToolError>> for RawOutcome {
    fn from(result: Result<tool::ToolOutput, tool::ToolError>) -> Self {
        match result {
            Ok(out) => RawOutcome::Ok {
                output: out.output,
                details: out.details,
                structured: None,
                content: Vec::new(),
            },
            Err(tool::ToolError::InvalidArguments(m)) => RawOutcome::InvalidArguments(m),
            Err(tool::ToolError::Failed(m)) => RawOutcome::Failed(m),
        }
    }
}
