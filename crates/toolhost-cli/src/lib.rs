//! The `host` command (also installed as `toolhost`, since `host` is also
//! bind9's DNS tool on many machines): list, call and chat with sandboxed
//! WebAssembly tool plugins, serve them over MCP, install them from
//! registries. Both binaries (`src/main.rs`, `src/bin/toolhost.rs`) call
//! [`main`]; this library is the command, not an API.
//!
//! One file per command in `commands/` (its arguments, the shared flags
//! its help shows, what it needs loaded, how it runs); the shared flags in
//! `shared_flags.rs`; the setup of the commands that load plugins in
//! `setup.rs`; the other modules are what the commands share.

mod agent;
mod approve;
mod call_output;
mod client_config;
mod code_mode;
mod commands;
mod exit;
mod failure;
mod form;
mod generated;
mod logging;
mod mcp_servers;
mod model_options;
mod notices;
mod registry;
mod repl;
mod serving;
mod sessions;
mod settings;
mod setup;
mod shared_flags;
mod shown;
mod sign_in;
mod stdout;
mod tool_listing;

use std::process::ExitCode;

/// Runs the command line of the process and returns its exit code.
pub fn main() -> ExitCode {
    let line = commands::parse();
    let telemetry = logging::init(&line.global);
    let code = match commands::exec(&line) {
        Ok(code) => ExitCode::from(code),
        // The reader of stdout went away (`host tools | head -1`).
        Err(e) if stdout::closed(&e) => ExitCode::from(exit::STDOUT_CLOSED),
        Err(e) => {
            eprintln!("error: {}", failure::said_once(&e));
            ExitCode::from(exit::FAILURE)
        }
    };
    // The last spans leave before the process does.
    if let Some(t) = telemetry {
        t.shutdown();
    }
    code
}
