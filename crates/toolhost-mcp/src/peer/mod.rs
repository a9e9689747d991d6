//! What the MCP server and the MCP client both know, below both of them
//! (neither imports the other; `gateway.rs` joins them):
//!
//! - the client a call came from, as an upstream server's requests during
//!   that call reach it ([`Downstream`], `downstream.rs`), and how long a
//!   person has to answer ([`ELICITATION_TIMEOUT`]);
//! - what an upstream server tells the gateway's clients
//!   ([`UpstreamNotice`], `notice.rs`);
//! - an upstream server's questions for a 2026-07-28 caller, and the
//!   caller's answers ([`InputRelay`], `relay.rs`), bound to one call by a
//!   digest of its arguments (`canonical.rs`).

pub(crate) mod canonical;
mod downstream;
mod notice;
pub(crate) mod relay;

pub(crate) use downstream::Downstream;
pub use downstream::ELICITATION_TIMEOUT;
pub(crate) use notice::UpstreamNotice;
pub(crate) use relay::InputRelay;
