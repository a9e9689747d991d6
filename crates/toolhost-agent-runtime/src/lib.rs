//! The adapter that joins toolhost's agent loop and its runtime, which never
//! import each other (as rmcp's `serve_server(service, transport)` joins a
//! handler and a transport): the agent (`toolhost-agent`) knows tools only
//! through its `ToolExecutor` trait and builds without WebAssembly; the
//! runtime (`toolhost-runtime`) knows nothing of models. Here:
//!
//! - [`RuntimeTools`] (`executor.rs`): a [`Runtime`](toolhost_runtime::Runtime)
//!   as the agent loop's `ToolExecutor`, so an agent drives sandboxed
//!   plugins through the same call steps as every other caller;
//! - [`read_var_source`] (`read_var.rs`): the agent's `read_var` as one of
//!   the runtime's tool sources, so a read of a stored result passes the
//!   policy, hooks and audit like any call.
//!
//! ```no_run
//! # async fn run(provider: std::sync::Arc<dyn toolhost_agent::Provider>) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolhost_agent::{Agent, AgentOptions, Message};
//! use toolhost_agent_runtime::{RuntimeTools, read_var_source};
//! use toolhost_runtime::Runtime;
//!
//! let runtime = Runtime::builder()
//!     .plugin_dir("target/plugins")
//!     .source(read_var_source())
//!     .build()
//!     .await?;
//! let agent = Agent::new(provider, Arc::new(RuntimeTools::new(runtime)))
//!     .with_options(AgentOptions::new("my-model"));
//! let result = agent.run(vec![Message::user("What is 2*(3+4)?")]).await;
//! println!("{:?}", result.status);
//! # Ok(()) }
//! ```

mod executor;
mod read_var;

pub use executor::RuntimeTools;
pub use read_var::{BUILTIN_SOURCE, read_var_source};
