//! The connection to one server as requests see it: [`Link`] (being made,
//! up, or down and why), the wait for it, and the `notifications/cancelled`
//! a dropped request owes the server ([`CancelOnDrop`]).

use rmcp::model::CancelledNotificationParam;
use rmcp::service::{Peer, RoleClient};
use tokio::sync::watch;
use toolhost_runtime::source::SourceError;

/// The most pages of a list (`tools/list`, `resources/list`, …) read from
/// one server.
pub(crate) const MAX_LIST_PAGES: usize = 100;

/// The connection as calls see it.
#[derive(Clone)]
pub(crate) enum Link {
    /// Being made.
    Starting,
    /// Up.
    Up(Peer<RoleClient>),
    /// Down, and why.
    Down(String),
}

/// The connection of `link`, waiting while it is being made; an error at
/// once when it is down.
pub(crate) async fn peer(link: &watch::Sender<Link>) -> Result<Peer<RoleClient>, SourceError> {
    let mut link = link.subscribe();
    let link = link
        .wait_for(|l| !matches!(l, Link::Starting))
        .await
        .map_err(|_| SourceError::Unavailable("the client stopped".into()))?
        .clone();
    match link {
        Link::Up(peer) => Ok(peer),
        Link::Down(reason) => Err(SourceError::Unavailable(reason)),
        Link::Starting => Err(SourceError::Unavailable("not connected".into())),
    }
}

/// Tells the server a call was dropped before its answer (a timeout, or
/// the caller went away): `notifications/cancelled`.
pub(crate) struct CancelOnDrop {
    pub(crate) peer: Option<Peer<RoleClient>>,
    pub(crate) id: rmcp::model::RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let id = self.id.clone();
        if let Ok(tokio) = tokio::runtime::Handle::try_current() {
            tokio.spawn(async move {
                let cancelled = CancelledNotificationParam::new(
                    Some(id),
                    Some("the host stopped waiting for the call".into()),
                );
                let _ = peer.notify_cancelled(cancelled).await;
            });
        }
    }
}
