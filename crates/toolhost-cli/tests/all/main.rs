//! The `host` binary's end-to-end tests, one binary with a module per
//! concern, against the real example plugins and a local fake model server.

mod agent_plugins;
mod cli;
mod cli_grants;
mod cli_help;
mod cli_hostile;
mod cli_model_options;
mod cli_output;
mod cli_policy;
mod cli_reload;
mod cli_run;
mod clients;
mod code_mode;
mod conformance;
mod console;
mod container;
mod deploy;
mod dist;
mod docs;
mod explain;
mod interrupted_writes;
mod languages;
mod mcp;
mod mcp_client_scenarios;
mod mcp_elicitation;
mod mcp_gateway;
mod mcp_oauth;
mod mcp_revisions;
mod new;
mod oauth;
mod plain_components;
mod registry;
mod replicas;
mod sessions;
mod shared_state;
mod skills;
mod tasks;
mod telemetry;
mod tool_search;

/// What the tests share (the `toolhost-test-support` crate), and the binary.
mod support {
    pub use toolhost_test_support::*;

    /// The `host` binary with a clean environment (see
    /// [`toolhost_test_support::host_command`]).
    pub fn host(cache: &std::path::Path) -> std::process::Command {
        host_command(env!("CARGO_BIN_EXE_host"), cache)
    }
}
