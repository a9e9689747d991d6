//! The parts a [`Runtime`](crate::Runtime) is made of, each owned and with
//! its own job: the **catalog** (what is loaded, `catalog.rs`), the **gate**
//! (policy, hooks, approver: `gate.rs`), the **pool** (engine and sandbox
//! slots: `pool.rs`), the **result cache** (`result_cache.rs`), the live
//! feed of calls (`call/watch.rs`), and the watcher that keeps the catalog current.
//! A call's steps (`call/`) and hook plugins reach the parts through here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::catalog::Catalog;
use crate::feed::Feed;
use crate::gate::Gate;
use crate::pool::Pool;
use crate::result_cache::ResultCache;
use crate::watch::Watcher;

/// Everything a runtime owns; every clone of the runtime shares one.
pub(crate) struct Parts {
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) gate: Gate,
    pub(crate) pool: Pool,
    /// Results of read-only, idempotent tools (`result_cache.rs`).
    pub(crate) results: ResultCache,
    /// The live feed of calls, for an operator's console (`call/watch.rs`).
    pub(crate) feed: Feed,
    /// Numbers the calls that come without an id.
    calls: AtomicU64,
    /// Watches the plugin directories, when asked to; stops when dropped.
    watcher: Mutex<Option<Watcher>>,
    /// The `Arc` these parts live in, for the calls plugins make to other
    /// tools (`call/nested.rs`), which outlive no call.
    pub(crate) me: std::sync::Weak<Parts>,
}

impl Parts {
    pub(crate) fn new(
        catalog: Arc<Catalog>,
        gate: Gate,
        pool: Pool,
        results: ResultCache,
        me: std::sync::Weak<Parts>,
    ) -> Parts {
        Parts {
            catalog,
            gate,
            pool,
            results,
            feed: Feed::new(),
            calls: AtomicU64::new(0),
            watcher: Mutex::new(None),
            me,
        }
    }

    /// The caller's call id, or a new one (`call-N`).
    pub(crate) fn call_id(&self, given: Option<&str>) -> String {
        match given {
            Some(id) => id.to_owned(),
            None => format!("call-{}", self.calls.fetch_add(1, Ordering::Relaxed) + 1),
        }
    }

    /// Keeps `watcher` running for as long as the runtime lives.
    pub(crate) fn set_watcher(&self, watcher: Watcher) {
        *self.watcher.lock() = Some(watcher);
    }

    pub(crate) fn is_watching(&self) -> bool {
        self.watcher.lock().is_some()
    }
}
