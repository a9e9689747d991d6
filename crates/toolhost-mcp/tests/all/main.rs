//! toolhost-mcp's end-to-end tests (one binary): the MCP client against the
//! reference servers installed by `cargo xtask test` and a misbehaving one
//! (`client.rs`), and the process sandbox around the servers (`sandbox.rs`).

mod client;
mod sandbox;
