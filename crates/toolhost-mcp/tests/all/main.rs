//! toolhost-mcp's end-to-end tests (one binary): the MCP client against the
//! reference servers installed by `cargo xtask test` and a misbehaving one
//! (`client.rs`), the process sandbox around the servers (`sandbox.rs`),
//! and the HTTP server as an OAuth resource server (`oauth.rs`).

mod client;
mod oauth;
mod sandbox;
