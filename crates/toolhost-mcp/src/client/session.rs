//! The connection task of one source: connect (signing in when the
//! server asks for a token), list the tools, follow list changes until the
//! session ends, then again, at once the first time and then with a
//! backoff.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::PaginatedRequestParams;
use rmcp::service::{Peer, RoleClient, ServiceError};
use toolhost_runtime::{source::SourceState, source::SourceTool};

use super::connect::{self, OpenError, Session};
use super::link::{Link, MAX_LIST_PAGES};
use super::oauth::{Asked, Authorizer};
use super::revisions::{self, Connection};
use super::state::{Shared, not_set_up};
use crate::tools;

/// The most tools read from one server (the runtime keeps at most 1000).
const MAX_LISTED_TOOLS: usize = 2000;
/// How long a server's list must be quiet after `tools/list_changed`
/// before it is read again: a server that announces changes without end
/// rebuilds the catalog a few times a second at most.
const RELIST_DEBOUNCE: Duration = Duration::from_millis(250);
/// The first wait before reconnecting after a failed attempt, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(500), Duration::from_secs(30));

/// The connection task: connect (signing in when the server asks for a
/// token), list, follow list changes until the session ends, then again,
/// with backoff after failures.
pub(crate) async fn manage(shared: Arc<Shared>) {
    let name = shared.config.name.clone();
    let mut backoff = BACKOFF.0;
    let mut last_quick_retry: Option<Instant> = None;
    let mut sign_ins = 0;
    loop {
        if !matches!(*shared.link.borrow(), Link::Starting) {
            shared.set_link(Link::Starting, SourceState::Starting, None);
        }
        let reason = match shared.authorizer().await {
            Err(why) => why,
            Ok(oauth) => {
                match revisions::open(&shared, oauth.as_deref()).await {
                    Err(OpenError::Failed(reason)) => reason,
                    Err(OpenError::Challenge(challenge)) => match &oauth {
                        // The sign-in's own time does not count as connecting.
                        Some(oauth) => {
                            match oauth.answer(&challenge, sign_ins, Asked::Connect).await {
                                Ok(()) => {
                                    sign_ins += 1;
                                    continue;
                                }
                                Err(e) => e.to_string(),
                            }
                        }
                        None => not_set_up(&challenge),
                    },
                    Ok(connection) => {
                        sign_ins = 0;
                        let reason = serve(&shared, connection, oauth.as_deref()).await;
                        // A server that worked and went away is retried at once,
                        // once in a while; one that keeps failing waits longer.
                        let quick =
                            last_quick_retry.is_none_or(|t| t.elapsed() > Duration::from_secs(10));
                        if reason.1 && quick {
                            last_quick_retry = Some(Instant::now());
                            backoff = BACKOFF.0;
                            tracing::warn!(server = %name, "MCP server: {}; reconnecting", reason.0);
                            continue;
                        }
                        reason.0
                    }
                }
            }
        };
        sign_ins = 0;
        tracing::warn!(server = %name, "MCP server: {reason}; retrying in {} ms", backoff.as_millis());
        shared.set_link(
            Link::Down(reason.clone()),
            SourceState::Down {
                reason,
                retry_in: Some(backoff),
            },
            None,
        );
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(BACKOFF.1);
    }
}

/// Runs one session: lists the tools, marks the link up, re-lists on
/// every list change, and returns why it ended and whether it had worked.
async fn serve(
    shared: &Arc<Shared>,
    connection: Connection,
    oauth: Option<&Authorizer>,
) -> (String, bool) {
    let Connection {
        main: Session {
            service,
            process,
            stderr,
        },
        per_request,
    } = connection;
    let peer = service.peer().clone();
    let server = service
        .peer_info()
        .and_then(|info| info.server_info.clone())
        .map(|i| {
            format!(
                "{} {}",
                toolhost_text::line(&i.name, 64),
                toolhost_text::line(&i.version, 32)
            )
        });
    // A server may let anyone initialise and ask for a token from here on.
    let mut attempt = 0;
    loop {
        match tokio::time::timeout(shared.config.connect_timeout, list_tools(&peer)).await {
            Ok(Ok(tools)) => {
                shared.set_tools(tools);
                break;
            }
            // A server that offers no tools (only resources or prompts).
            Ok(Err(ServiceError::McpError(e)))
                if e.code == rmcp::model::ErrorCode::METHOD_NOT_FOUND =>
            {
                shared.set_tools(Vec::new());
                break;
            }
            Ok(Err(e)) => {
                let Some(challenge) = e.auth_challenge() else {
                    return (format!("tools/list failed: {e}"), false);
                };
                let Some(oauth) = oauth else {
                    return (not_set_up(challenge), false);
                };
                if let Err(e) = oauth.answer(challenge, attempt, Asked::Connect).await {
                    return (format!("tools/list: {e}"), false);
                }
                attempt += 1;
            }
            Err(_) => {
                return (
                    "tools/list did not answer within `connect-timeout-ms`".into(),
                    false,
                );
            }
        }
    }
    // An HTTP server that also speaks 2026-07-28 is reached in it too,
    // for the callers that speak it (`call.rs`), and lists its tools there;
    // one that speaks it alone is its own 2026-07-28 side.
    if let Some(modern) = &per_request {
        add_per_request_tools(shared, modern.peer()).await;
    } else if !peer
        .peer_info()
        .is_none_or(|info| info.protocol_version.has_initialize())
    {
        *shared.per_request.lock() = Some((peer.clone(), Arc::default()));
    }
    shared.set_link(Link::Up(peer.clone()), SourceState::Ready, server);
    tracing::info!(server = %shared.config.name, tools = shared.tools.lock().len(), "MCP server connected");
    let waiting = service.waiting();
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            _ = &mut waiting => break,
            () = shared.relist.notified() => {
                // Changes announced meanwhile are read with this one.
                tokio::select! {
                    _ = &mut waiting => break,
                    () = tokio::time::sleep(RELIST_DEBOUNCE) => {}
                }
                // A notice that came during the wait is read now, not again.
                let _ = futures::FutureExt::now_or_never(shared.relist.notified());
                match tokio::time::timeout(shared.config.connect_timeout, list_tools(&peer)).await {
                    Ok(Ok(tools)) => {
                        shared.set_tools(tools);
                        if let Some(modern) = &per_request {
                            add_per_request_tools(shared, modern.peer()).await;
                        }
                    }
                    Ok(Err(e)) => tracing::warn!(server = %shared.config.name, "re-listing tools failed: {e}"),
                    Err(_) => tracing::warn!(server = %shared.config.name, "re-listing tools timed out"),
                }
            }
        }
    }
    *shared.per_request.lock() = None;
    drop(per_request);
    let why = match process {
        Some(mut process) => match process.exited().await {
            Some(status) => format!("the server exited ({status})"),
            None => "the server closed its output".to_owned(),
        },
        None => "the server closed the session".to_owned(),
    };
    (connect::with_stderr(why, &stderr), true)
}

/// Adds the tools a server lists only in revision 2026-07-28 (through
/// `modern`) to those of its session, and notes which they are.
async fn add_per_request_tools(shared: &Shared, modern: &Peer<RoleClient>) {
    match tokio::time::timeout(shared.config.connect_timeout, list_tools(modern)).await {
        Ok(Ok(listed)) => {
            let mut tools = shared.tools.lock().to_vec();
            let (_, new): (Vec<SourceTool>, Vec<SourceTool>) = listed
                .into_iter()
                .partition(|t| tools.iter().any(|known| known.name == t.name));
            let only = new.iter().map(|t| t.name.clone()).collect();
            tools.extend(new);
            tools.truncate(MAX_LISTED_TOOLS);
            shared.set_tools(tools);
            *shared.per_request.lock() = Some((modern.clone(), Arc::new(only)));
        }
        Ok(Err(e)) => {
            tracing::debug!(server = %shared.config.name, "tools/list in 2026-07-28 failed: {e}");
        }
        Err(_) => {
            tracing::debug!(server = %shared.config.name, "tools/list in 2026-07-28 timed out");
        }
    }
}

/// Every page of `tools/list`, bounded in pages, tools and bytes: reading
/// stops once the tools read exceed the runtime's budget for one source's
/// definitions ([`MAX_DESCRIBE_BYTES`](toolhost_runtime::contract::MAX_DESCRIBE_BYTES),
/// which then leaves the source's tools out with a warning), so at most
/// one page more than the budget is ever held.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<SourceTool>, ServiceError> {
    let mut tools = Vec::new();
    let mut cursor = None;
    let mut bytes = 0usize;
    for _ in 0..MAX_LIST_PAGES {
        let page = peer
            .list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await?;
        for tool in &page.tools {
            let tool = tools::source_tool(tool);
            bytes = bytes.saturating_add(definition_bytes(&tool));
            tools.push(tool);
        }
        if tools.len() >= MAX_LISTED_TOOLS {
            tools.truncate(MAX_LISTED_TOOLS);
            break;
        }
        if bytes > toolhost_runtime::contract::MAX_DESCRIBE_BYTES {
            break;
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    Ok(tools)
}

/// About how many bytes a tool's definition takes (name, description,
/// schemas as JSON text).
fn definition_bytes(tool: &SourceTool) -> usize {
    let schema = |v: &serde_json::Value| serde_json::to_vec(v).map_or(0, |t| t.len());
    tool.name.len()
        + tool.description.len()
        + schema(&tool.input_schema)
        + tool.output_schema.as_ref().map_or(0, schema)
}
