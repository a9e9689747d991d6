//! The live feed of calls ([`Runtime::watch_calls`](crate::Runtime::watch_calls)):
//! what an operator's console receives ([`CallEvent`]) and the channel it
//! comes through ([`Feed`], in the runtime's parts). What a call records
//! on its way, and when it sends, is `call/watch.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tokio::sync::broadcast;

/// One call, as an operator's console shows it (see
/// [`Runtime::watch_calls`](crate::Runtime::watch_calls)).
///
/// Serialized flat, the phase as `"phase": "started" | "finished"`:
/// `{"seq":7,"id":"mcp-3","tool":"calculate","agent":null,"client":null,"at_ms":…,"phase":"finished","decision":"allow",…}`.
#[derive(Debug, Clone, Serialize)]
pub struct CallEvent {
    /// The call's number on this runtime's feed, the same in its `Started`
    /// and `Finished` events and never another call's: what a live view
    /// keys its rows by (two callers may give the same id).
    pub seq: u64,
    /// The call's id (the caller's, or the one the runtime made up), at
    /// most [`MAX_SHOWN_NAME_CHARS`](crate::shown::MAX_SHOWN_NAME_CHARS)
    /// characters and safe to show.
    pub id: String,
    /// The tool's name as the caller gave it, at most
    /// [`MAX_SHOWN_NAME_CHARS`](crate::shown::MAX_SHOWN_NAME_CHARS) characters
    /// and safe to show ([`shown_name`](crate::shown::shown_name)).
    pub tool: String,
    /// The agent profile the call came under.
    pub agent: Option<String>,
    /// Who called (see [`CallContext::client`]).
    pub client: Option<String>,
    /// When the event was made, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Started, or finished with what happened.
    #[serde(flatten)]
    pub phase: CallPhase,
}

/// Where a [`CallEvent`]'s call is.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "phase", rename_all = "kebab-case")]
pub enum CallPhase {
    /// The call has come in (before lookup).
    Started,
    /// The call is over.
    Finished {
        /// The plugin (or tool source) that answers the tool; `None` when
        /// lookup found no tool.
        plugin: Option<String>,
        /// That plugin's version.
        version: Option<String>,
        /// The policy's first decision: `allow`, `ask` or `deny`; `None`
        /// when the call never reached the policy (not found, invalid
        /// arguments).
        decision: Option<String>,
        /// What decided (the rule, the default, a session toggle).
        rule: Option<String>,
        /// The steps, in the order they started (`approval` lies within
        /// `admit`).
        steps: Vec<StepTiming>,
        /// `ok`, or the error's kind (`not-found`, `permission-denied`, …;
        /// `aborted` when the call was dropped before it finished).
        outcome: String,
        /// Whether the result came from the result cache.
        cached: bool,
        /// The whole call, in microseconds.
        micros: u64,
    },
}

/// One step of a watched call and its time.
#[derive(Debug, Clone, Serialize)]
pub struct StepTiming {
    /// `admit` (validation, policy, hooks, approval), `approval` (when
    /// someone or something answered whether the call may run), `execute`
    /// or `conclude` (after-hooks, result approval).
    pub step: &'static str,
    /// How long it took, in microseconds.
    pub micros: u64,
    /// What it decided, in a few words (at most 200 characters): the
    /// policy's decision and rule for `admit`, who answered and how for
    /// `approval`, `cached` for an `execute` the result cache answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How many events a receiver may fall behind before it skips the oldest.
pub(crate) const CAPACITY: usize = 1024;

/// The sending side of the feed, in the runtime's parts.
pub(crate) struct Feed {
    pub(crate) sender: broadcast::Sender<Arc<CallEvent>>,
    /// Whether anyone may be watching, in bit 0, with the number of
    /// subscriptions so far above it. A call reads this first (one atomic
    /// load, where counting receivers takes the channel's lock); the first
    /// call that finds every receiver gone clears the bit, unless someone
    /// subscribed meanwhile, which changed the count.
    state: AtomicU64,
    /// The next watched call's [`CallEvent::seq`].
    pub(crate) next_seq: AtomicU64,
}

impl Feed {
    pub(crate) fn new() -> Feed {
        let (sender, _) = broadcast::channel(CAPACITY);
        Feed {
            sender,
            state: AtomicU64::new(0),
            next_seq: AtomicU64::new(1),
        }
    }

    /// A new receiver of every call from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Arc<CallEvent>> {
        let receiver = self.sender.subscribe();
        // After the receiver exists: a call that reads this state counts it.
        let _ = self
            .state
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| {
                Some(((s >> 1).wrapping_add(1) << 1) | 1)
            });
        receiver
    }

    /// Whether anyone watches.
    pub(crate) fn watched(&self) -> bool {
        let state = self.state.load(Ordering::Acquire);
        if state & 1 == 0 {
            return false;
        }
        if self.sender.receiver_count() > 0 {
            return true;
        }
        // Everyone left: later calls stop at the load above. A subscription
        // since the load changed the state, and it stays set.
        let _ = self
            .state
            .compare_exchange(state, state & !1, Ordering::AcqRel, Ordering::Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_watching_is_noticed_once_everyone_left_and_a_new_watcher_is_seen() {
        let feed = Feed::new();
        assert!(!feed.watched());
        let rx = feed.subscribe();
        assert!(feed.watched());
        drop(rx);
        assert!(!feed.watched());
        assert_eq!(feed.state.load(Ordering::Relaxed) & 1, 0, "the bit cleared");
        let _rx = feed.subscribe();
        assert!(feed.watched());
    }
}
