//! Which revisions a connection to a server speaks. An HTTP server is
//! asked first in revision 2026-07-28 (`server/discover`, as that revision
//! asks of a client). One that answers is spoken to in 2026-07-28: alone
//! when no caller of an older revision comes through this client
//! ([`McpServerConfig::older_callers`](super::config::McpServerConfig::older_callers)
//! off: the host's own agent and commands), so it is never sent an
//! `initialize`; else with a session in the older revision beside it, if
//! it still speaks one, for those callers (the 2026-07-28 side serving
//! the callers that speak it, `state.rs`). A server's `supportedVersions`
//! does not say whether it still takes `initialize` (the suite's reference
//! server lists 2026-07-28 alone and does), so that is tried. One that
//! does not know 2026-07-28, and every stdio server, gets the session
//! alone.

use std::sync::Arc;

use rmcp::service::{RoleClient, RunningService};

use super::config::McpTransport;
use super::connect::{self, OpenError, Revision, Session};
use super::handler::Handler;
use super::oauth::Authorizer;
use super::state::Shared;

/// An open connection: its main session, and the server's 2026-07-28 side
/// when that is a second session beside it.
pub(crate) struct Connection {
    pub main: Session<Handler>,
    pub per_request: Option<RunningService<RoleClient, Handler>>,
}

/// Opens a connection to `shared`'s server, each step within the
/// configured `connect-timeout-ms`.
pub(crate) async fn open(
    shared: &Arc<Shared>,
    oauth: Option<&Authorizer>,
) -> Result<Connection, OpenError> {
    let legacy = || async {
        let opened = tokio::time::timeout(
            shared.config.connect_timeout,
            connect::open(
                &shared.config,
                Handler::new(shared),
                oauth,
                Revision::Session,
            ),
        )
        .await;
        match opened {
            Ok(opened) => opened,
            Err(_) => Err(OpenError::Failed(format!(
                "did not connect within {} ms (`connect-timeout-ms`)",
                shared.config.connect_timeout.as_millis()
            ))),
        }
    };
    if !matches!(shared.config.transport, McpTransport::Http(_)) {
        return legacy().await.map(|main| Connection {
            main,
            per_request: None,
        });
    }
    let modern = tokio::time::timeout(
        shared.config.connect_timeout,
        connect::open(
            &shared.config,
            Handler::new(shared),
            oauth,
            Revision::PerRequest,
        ),
    )
    .await;
    let modern = match modern {
        Ok(Ok(modern)) => modern,
        // A sign-in is the same for either revision.
        Ok(Err(OpenError::Challenge(challenge))) => return Err(OpenError::Challenge(challenge)),
        Ok(Err(OpenError::Failed(why))) => {
            tracing::debug!(server = %shared.config.name, "no 2026-07-28 side: {why}");
            return legacy().await.map(|main| Connection {
                main,
                per_request: None,
            });
        }
        // An older server may leave a method it does not know unanswered.
        Err(_) => {
            tracing::debug!(server = %shared.config.name, "server/discover was not answered in time");
            return legacy().await.map(|main| Connection {
                main,
                per_request: None,
            });
        }
    };
    if !shared.config.older_callers {
        return Ok(Connection {
            main: modern,
            per_request: None,
        });
    }
    match legacy().await {
        Ok(main) => Ok(Connection {
            main,
            per_request: Some(modern.service),
        }),
        // A server of 2026-07-28 alone: its 2026-07-28 side serves every
        // caller.
        Err(OpenError::Failed(why) | OpenError::Challenge(why)) => {
            tracing::debug!(server = %shared.config.name, "no session beside 2026-07-28: {why}");
            Ok(Connection {
                main: modern,
                per_request: None,
            })
        }
    }
}
