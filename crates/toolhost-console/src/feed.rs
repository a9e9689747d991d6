//! The calls of late, for a page opened after they happened: the last
//! [`KEPT_CALLS`] finished calls and the last [`KEPT_FAILURES`] failed
//! ones, kept from the runtime's call feed (`Runtime::watch_calls`).
//!
//! The feed is read in batches, every [`TICK`], here and by each open
//! page's event stream: a reader woken for every event would cost each
//! call a task wake-up (about as much as the call itself, on the gate's
//! machine); a reader that sleeps costs the call only the event.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;
use toolhost_runtime::{Runtime, feed::CallEvent, feed::CallPhase};

use toolhost_runtime::failures::{Failure, FailureLog};

/// How often the feed is read: the most a call waits to be shown.
pub(crate) const TICK: Duration = Duration::from_millis(100);

/// What one read of the feed found.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) events: Vec<Arc<CallEvent>>,
    /// Events this reader missed (it fell more than the channel behind).
    pub(crate) missed: u64,
    /// The feed is closed (the runtime is gone).
    pub(crate) closed: bool,
}

/// Everything waiting on `rx`, without waiting.
pub(crate) fn drain(rx: &mut broadcast::Receiver<Arc<CallEvent>>) -> Batch {
    let mut batch = Batch::default();
    loop {
        match rx.try_recv() {
            Ok(event) => batch.events.push(event),
            Err(TryRecvError::Lagged(n)) => batch.missed = batch.missed.saturating_add(n),
            Err(TryRecvError::Empty) => return batch,
            Err(TryRecvError::Closed) => {
                batch.closed = true;
                return batch;
            }
        }
    }
}

/// A clock that ticks every [`TICK`], skipping the ticks it missed.
pub(crate) fn ticker() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    tick
}

/// Finished calls kept.
pub(crate) const KEPT_CALLS: usize = 100;
/// Failed calls kept.
pub(crate) const KEPT_FAILURES: usize = 50;

/// The calls of late (see the module docs), and the failures other
/// replicas shared when a [`FailureLog`] is given.
#[derive(Default)]
pub(crate) struct Recent {
    calls: Mutex<VecDeque<Arc<CallEvent>>>,
    failures: Mutex<VecDeque<Failure>>,
    shared: Option<Arc<dyn FailureLog>>,
    /// The runtime's feed ([`follow`]): read every tick, and before the
    /// lists are read, so that a page rendered just after a call ended
    /// shows it.
    feed: Mutex<Option<broadcast::Receiver<Arc<CallEvent>>>>,
}

impl Recent {
    pub(crate) fn new(shared: Option<Arc<dyn FailureLog>>) -> Recent {
        Recent {
            shared,
            ..Recent::default()
        }
    }

    /// Keeps what the feed has for it now; `false` once the feed is
    /// closed (the runtime is gone).
    fn catch_up(&self) -> bool {
        let batch = {
            let mut feed = self.feed.lock();
            let Some(rx) = feed.as_mut() else {
                return false;
            };
            let batch = drain(rx);
            if batch.closed {
                *feed = None;
            }
            batch
        };
        if batch.missed > 0 {
            tracing::debug!(
                missed = batch.missed,
                "the console's list of calls fell behind"
            );
        }
        for event in batch.events {
            self.keep(event);
        }
        !batch.closed
    }

    /// The calls kept, oldest first.
    pub(crate) fn calls(&self) -> Vec<Arc<CallEvent>> {
        self.catch_up();
        self.calls.lock().iter().cloned().collect()
    }

    /// This replica's failures and the others' (with a shared log), the
    /// last [`KEPT_FAILURES`] by time, oldest first; and why the others'
    /// cannot be read, if so.
    pub(crate) fn failures(&self) -> (Vec<Failure>, Option<String>) {
        self.catch_up();
        let mut all: Vec<Failure> = self.failures.lock().iter().cloned().collect();
        let trouble = self.shared.as_ref().and_then(|log| {
            all.extend(log.elsewhere());
            log.trouble()
        });
        all.sort_by_key(|f| f.at_ms);
        let extra = all.len().saturating_sub(KEPT_FAILURES);
        all.drain(..extra);
        (all, trouble)
    }

    fn keep(&self, event: Arc<CallEvent>) {
        if !matches!(event.phase, CallPhase::Finished { .. }) {
            return;
        }
        if let Some(failure) = Failure::of(&event) {
            if let Some(log) = &self.shared {
                log.record(failure.clone());
            }
            push(&self.failures, failure, KEPT_FAILURES);
        }
        push(&self.calls, event, KEPT_CALLS);
    }
}

fn push<T>(list: &Mutex<VecDeque<T>>, item: T, most: usize) {
    let mut list = list.lock();
    if list.len() >= most {
        list.pop_front();
    }
    list.push_back(item);
}

/// Keeps `runtime`'s finished calls in `recent` until the console is gone.
pub(crate) fn follow(runtime: &Runtime, recent: &Arc<Recent>) {
    *recent.feed.lock() = Some(runtime.watch_calls());
    let recent: Weak<Recent> = Arc::downgrade(recent);
    tokio::spawn(async move {
        let mut tick = ticker();
        loop {
            tick.tick().await;
            let Some(recent) = recent.upgrade() else {
                break;
            };
            if !recent.catch_up() {
                break;
            }
        }
    });
}
