//! toolhost-mcp's end-to-end tests (one binary): the MCP client against the
//! reference servers installed by `cargo xtask test` and a misbehaving one
//! (`client.rs`), the process sandbox around the servers (`sandbox.rs`),
//! the HTTP server as an OAuth resource server (`oauth.rs`), what an
//! upstream server offers besides tools passed on by the gateway
//! (`offers.rs`), an upstream server's sampling and elicitation
//! reaching the calling client (`requests.rs`), and the approvals of a
//! program's calls in code mode, each call asked about on its own
//! (`approvals.rs`).

mod approvals;
mod client;
mod oauth;
mod offers;
mod requests;
mod sandbox;
mod static_tokens;
