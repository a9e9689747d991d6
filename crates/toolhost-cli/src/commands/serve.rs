//! `host serve`: serves every tool over MCP's Streamable HTTP transport,
//! with `/healthz`, `/readyz`, `/metrics` and (with `--console`) the
//! operator's console beside it.

use std::path::PathBuf;

use clap::Parser;

use super::HostCommand;
use crate::notices::{self, report_load_problems};
use crate::setup::Setup;
use crate::shared_flags::{GRANTS, Global, PLUGINS, POLICY, Shows};
use crate::{serving, settings};

/// Serve every tool over MCP's Streamable HTTP transport at `/mcp`, with
/// `/healthz` and `/readyz` beside it.
#[derive(Debug, Parser)]
#[command(name = "serve")]
pub struct Serve {
    /// Address to listen on (a non-loopback address needs a token).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: std::net::SocketAddr,
    /// File of bearer tokens: one per line, each optionally followed by
    /// the policy profile its client's calls run under (`TOKEN
    /// reviewer`), then `ask=client|operator|deny` (who answers its
    /// calls' asks); `TOKEN role=operator` is an operator's token, which
    /// signs in to the console and calls nothing.
    #[arg(long, value_name = "FILE", conflicts_with = "token_env")]
    token_file: Option<PathBuf>,
    /// Environment variable holding the bearer token clients must send.
    #[arg(long, value_name = "VAR")]
    token_env: Option<String>,
    /// A `Host` header value to accept besides loopback names, i.e. a
    /// name clients reach this server by (repeatable).
    #[arg(long, value_name = "HOST")]
    accept_host: Vec<String>,
    /// A browser origin to accept, e.g. `https://app.example.com:443`
    /// (repeatable); any other `Origin` is refused.
    #[arg(long, value_name = "ORIGIN")]
    accept_origin: Vec<String>,
    /// No sessions for any protocol revision, so any replica can answer
    /// any request.
    #[arg(long)]
    stateless: bool,
    /// Most requests served at once (HTTP 503 beyond).
    #[arg(long, value_name = "N", default_value_t = toolhost_mcp::server::DEFAULT_MAX_CONCURRENT_REQUESTS)]
    max_concurrent: usize,
    /// Largest request body in bytes (HTTP 413 beyond).
    #[arg(long, value_name = "BYTES", default_value_t = toolhost_mcp::server::DEFAULT_MAX_REQUEST_BYTES)]
    max_request_bytes: usize,
    /// Serve /metrics without a bearer token even when tokens are set
    /// (the figures tell who calls which tool how often).
    #[arg(long)]
    metrics_public: bool,
    /// Who answers a policy's or hook's `ask`: `client` (the caller,
    /// through MCP elicitation), `operator` (the call waits in the
    /// console's approvals queue; needs --console) or `deny` (the call
    /// is refused, saying why). Default: `client` on a loopback address,
    /// `deny` on any other, so a remote caller never approves its own
    /// calls. A token's `ask=` wins for its calls.
    #[arg(long, value_name = "client|operator|deny")]
    asks: Option<String>,
    /// Serve the operator's console at /console: plugins, policy, live
    /// calls, the approvals queue and saved approvals. With tokens set,
    /// only an operator's token (`role=operator`) signs in.
    #[arg(long)]
    console: bool,
}

/// A server: its callers are elsewhere (no person to sign in here);
/// plugins that change are reloaded.
const SETUP: Setup = Setup {
    one_worker: false,
    watches: true,
    read_var: false,
    person: false,
    serves_mcp: true,
};

impl HostCommand for Serve {
    const SHOWS: Shows = Shows::Only {
        headings: &[PLUGINS, GRANTS, POLICY],
        flags: &["tool_search", "sessions_dir"],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        let loaded = SETUP.load(global)?;
        let (rt, runtime, file) = (loaded.rt, loaded.runtime, loaded.file);
        report_load_problems(&runtime);
        let tokens = serving::tokens(self.token_file.as_deref(), self.token_env.as_deref())?;
        for (line, agent) in tokens
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((i, t.agent.as_deref()?)))
        {
            let what = format!("token {} of the token file", line + 1);
            settings::check_profile(agent, &what, &runtime.policy(), &file)?;
        }
        if let Some(oauth) = &file.oauth {
            serving::check_oauth_profiles(oauth, &runtime.policy(), &file)?;
        }
        let options = toolhost_mcp::HttpOptions {
            listen: self.listen,
            tokens,
            oauth: file.oauth.clone(),
            allowed_hosts: self.accept_host,
            allowed_origins: self.accept_origin,
            max_request_bytes: self.max_request_bytes,
            max_concurrent_requests: self.max_concurrent,
            stateless: self.stateless,
            metrics_public: self.metrics_public,
            console: self.console,
        };
        let asks = serving::asks(self.asks.as_deref(), &options.listen)?;
        notices::print_plugin_events(&rt, &runtime, None);
        rt.block_on(serving::http(global, &file, runtime, options, asks))
    }
}
