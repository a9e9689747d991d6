//! Serving the tools over MCP (`host mcp` on stdio, `host serve` over
//! HTTP): the shared flags and the config file wired to `toolhost-mcp`.

use std::path::Path;

use anyhow::{Context, bail};
use toolhost_mcp::server::Asks;
use toolhost_mcp::{ClientToken, HttpOptions, HttpServer, McpServer, ServerOptions};
use toolhost_runtime::Runtime;
use toolhost_runtime::operator::{OperatorQueue, QueueSettings};

use crate::exit;
use crate::settings::ConfigFile;
use crate::shared_flags::Global;

/// The variable holding the key that seals 2026-07-28 approval round trips
/// (replicas behind one load balancer need the same one).
const STATE_KEY_VAR: &str = "TOOLHOST_MCP_STATE_KEY";

/// `--asks`: who answers an `ask` (see [`Asks`]); by default the caller
/// on a loopback address and nobody on any other.
pub fn asks(flag: Option<&str>, listen: &std::net::SocketAddr) -> anyhow::Result<Asks> {
    match flag {
        Some("client") => Ok(Asks::Client),
        Some("deny") => Ok(Asks::Deny),
        Some("operator") => Ok(Asks::Operator),
        Some(other) => bail!("--asks must be client, operator or deny, got `{other}`"),
        None if listen.ip().is_loopback() => Ok(Asks::Client),
        None => Ok(Asks::Deny),
    }
}

fn server(
    global: &Global,
    file: &ConfigFile,
    runtime: Runtime,
    asks: Asks,
    console: bool,
) -> anyhow::Result<McpServer> {
    let state_key = match std::env::var(STATE_KEY_VAR) {
        Ok(key) if key.len() < 32 => bail!("{STATE_KEY_VAR} must be at least 32 bytes long"),
        Ok(key) => Some(key.into_bytes()),
        Err(_) => None,
    };
    // With the console, any `ask` sent to the operator waits there: in
    // this process, or with `[state]` in the database replicas share.
    let operator_queue = match (console, &file.state) {
        (false, _) => None,
        (true, None) => Some(OperatorQueue::new(QueueSettings::default())),
        (true, Some(state)) => Some(OperatorQueue::with_store(
            QueueSettings::default(),
            state.queue()?,
        )),
    };
    let failures = match (console, &file.state) {
        (true, Some(state)) => Some(state.failures()?),
        _ => None,
    };
    let tasks = file.tasks.settings()?;
    // Tasks are shared only where any tool runs as one.
    let task_store = match &file.state {
        Some(state) if tasks.enabled() => Some(state.tasks()?),
        _ => None,
    };
    Ok(McpServer::new(
        runtime,
        ServerOptions {
            agent: global.agent.clone(),
            state_key,
            asks,
            operator_queue,
            failures,
            // MCP clients may search on their own: the full list unless
            // search is on outright.
            tool_search: Some(crate::settings::tool_search(global, file))
                .filter(|s| s.mode == toolhost_search::ToolSearchMode::On),
            tasks,
            task_store,
        },
    ))
}

/// Serves one client on stdin and stdout (logs go to stderr).
pub async fn stdio(global: &Global, file: &ConfigFile, runtime: Runtime) -> anyhow::Result<u8> {
    // Over stdio the client is the user's own.
    server(global, file, runtime, Asks::Client, false)?
        .serve_stdio()
        .await?;
    Ok(exit::OK)
}

/// Serves over Streamable HTTP until Ctrl-C or SIGTERM, then finishes the
/// requests in flight.
pub async fn http(
    global: &Global,
    file: &ConfigFile,
    runtime: Runtime,
    options: HttpOptions,
    asks: Asks,
) -> anyhow::Result<u8> {
    let console = options.console;
    let bound = HttpServer::bind(server(global, file, runtime, asks, console)?, options).await?;
    if console {
        eprintln!("toolhost console on http://{}/console", bound.local_addr());
        // No operator token configured: the console made a one-time one,
        // shown only here, to whoever started the server (as Jupyter does).
        if let Some(token) = bound.console_token() {
            eprintln!(
                "toolhost console: sign in at http://{}/console?token={token} \
                 (a one-time operator token, until the server stops; a line with \
                 role=operator in --token-file sets one of your own)",
                bound.local_addr()
            );
        }
    }
    if let Some(oauth) = bound.oauth_resource() {
        eprintln!(
            "toolhost MCP server takes OAuth access tokens for {} from {}",
            oauth.0, oauth.1
        );
    }
    eprintln!("toolhost MCP server on http://{}/mcp", bound.local_addr());
    bound.run(shutdown_signal()).await?;
    Ok(exit::OK)
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("cannot listen for SIGTERM: {e}");
                    let _ = tokio::signal::ctrl_c().await;
                    return;
                }
            };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

/// Checks the profiles `[oauth]` names (its callers' and `unmapped`)
/// against the profiles that exist, as a token file's are.
pub fn check_oauth_profiles(
    oauth: &toolhost_mcp::server::OAuthOptions,
    policy: &toolhost_runtime::policy::Policy,
    file: &ConfigFile,
) -> anyhow::Result<()> {
    for (i, rule) in oauth.callers.iter().enumerate() {
        if let Some(profile) = &rule.profile {
            let what = format!("[[oauth.callers]] rule {}", i + 1);
            crate::settings::check_profile(profile, &what, policy, file)?;
        }
    }
    if let Some(profile) = &oauth.unmapped {
        crate::settings::check_profile(profile, "[oauth] unmapped", policy, file)?;
    }
    Ok(())
}

/// The bearer tokens from `--token-file` (one per line, each optionally
/// followed by the profile its client's calls run under) or `--token-env`.
pub fn tokens(file: Option<&Path>, env: Option<&str>) -> anyhow::Result<Vec<ClientToken>> {
    let tokens = match (file, env) {
        (Some(path), _) => ClientToken::parse(
            &std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?,
        )
        .with_context(|| format!("in the token file {}", path.display()))?,
        (None, Some(var)) => ClientToken::parse(
            &std::env::var(var).with_context(|| format!("the token variable {var} is not set"))?,
        )
        .with_context(|| format!("in the token variable {var}"))?,
        (None, None) => return Ok(Vec::new()),
    };
    if tokens.is_empty() {
        bail!("no bearer token given (the token file or variable is empty)");
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_caller_never_answers_its_own_asks_unless_told() {
        let loopback: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let anywhere: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
        assert_eq!(asks(None, &loopback).unwrap(), Asks::Client);
        assert_eq!(asks(None, &anywhere).unwrap(), Asks::Deny);
        assert_eq!(asks(Some("client"), &anywhere).unwrap(), Asks::Client);
        assert_eq!(asks(Some("deny"), &loopback).unwrap(), Asks::Deny);
        assert_eq!(asks(Some("operator"), &anywhere).unwrap(), Asks::Operator);
        assert!(asks(Some("anyone"), &loopback).is_err());
    }
}
