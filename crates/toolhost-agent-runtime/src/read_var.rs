//! The agent loop's `read_var` as a built-in tool source, so a read of a stored result goes through the same steps as
//! every other call (`call/`): lookup, validation, the policy and the
//! session's toggles, hooks, approval, audit. A run's variables reach it
//! with the call ([`CallContext::extension`](toolhost_runtime::CallContext::extension),
//! attached by `executor.rs`); a call that carries none (`host call
//! read_var`, an MCP client) finds nothing to read.
//!
//! It is listed as the source `builtin`, so a policy names it as
//! `tool = "read_var"` or `plugin = "builtin"`; it is the only source that
//! may hold the reserved name `read_var`.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = toolhost_runtime::Runtime::builder()
//!     .plugin_dir("target/plugins")
//!     .source(toolhost_agent_runtime::read_var_source())
//!     .build()
//!     .await?;
//! # let _ = runtime;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use toolhost_agent::read_var::read_var_spec;
use toolhost_agent::{READ_VAR, RunVars, VarError};

use toolhost_runtime::{
    ToolSource, contract::Annotations, source::SourceCall, source::SourceError,
    source::SourceFuture, source::SourceOutcome, source::SourceState, source::SourceStatus,
    source::SourceTool,
};

/// The source's name, as `host plugins` and policies (`plugin = "builtin"`)
/// see it.
pub const BUILTIN_SOURCE: &str = "builtin";

/// The page size the tool's description states (the agent's default
/// `max_output_bytes`; a run reads pages of its own `max_output_bytes`).
const DESCRIBED_PAGE: usize = 16 * 1024;

/// The built-in `read_var` source, for a runtime an agent loop drives.
pub fn read_var_source() -> Arc<dyn ToolSource> {
    Arc::new(ReadVar {
        changes: tokio::sync::watch::channel(0).0,
    })
}

struct ReadVar {
    changes: tokio::sync::watch::Sender<u64>,
}

impl ToolSource for ReadVar {
    fn name(&self) -> &str {
        BUILTIN_SOURCE
    }

    fn prefix(&self) -> String {
        String::new()
    }

    fn status(&self) -> SourceStatus {
        SourceStatus::new("builtin", "in process", SourceState::Ready)
    }

    fn tools(&self) -> Arc<[SourceTool]> {
        let spec = read_var_spec(DESCRIBED_PAGE);
        let mut tool = SourceTool::new(spec.name, spec.description, (*spec.input_schema).clone());
        // Read-only (it may run beside other reads), but never cached: the
        // same name reads another run's value in another run.
        tool.annotations = Annotations {
            read_only: true,
            ..Annotations::default()
        };
        Arc::new([tool])
    }

    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn is_builtin(&self) -> bool {
        true
    }

    fn call<'a>(
        &'a self,
        call: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
        let outcome = match (call.tool, call.extensions.get::<RunVars>()) {
            (READ_VAR, Some(vars)) => match vars.read(call.args) {
                Ok(page) => SourceOutcome::text(page),
                Err(e @ VarError::Arguments(_)) => SourceOutcome::InvalidArguments(e.to_string()),
                Err(e) => SourceOutcome::Failed(e.to_string()),
            },
            (READ_VAR, None) => SourceOutcome::Failed(
                "no variables: read_var reads the stored results of an agent run, and this \
                 call is not part of one"
                    .to_owned(),
            ),
            (other, _) => SourceOutcome::Failed(format!("the built-in source has no `{other}`")),
        };
        Box::pin(async move { Ok(outcome) })
    }
}
