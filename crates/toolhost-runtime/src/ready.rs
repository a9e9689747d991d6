//! Ready instances: for a plugin whose instantiation is costly (the
//! interpreters compiled to wasm: CPython's components take 0.45–2 ms to
//! instantiate, a Rust plugin's 10–40 µs), a few instances are instantiated
//! while the plugin is idle, so that a call finds one ready and runs only
//! the guest's `execute`.
//!
//! Every call still gets a fresh instance: a ready instance has run nothing
//! but the component's own instantiation (its start functions), and it
//! serves one call, then it is dropped. Its store has the plugin's grants as
//! every sandbox of that plugin version has (they are fixed at load time);
//! what belongs to the call (deadline, tool, progress, counters, the hop
//! check) is set when the call begins (`Sandbox::begin`).
//!
//! The work is done **when the plugin is quiet**, never beside its calls:
//! measured on 2 cores, instantiating (an `mmap` of the memory image) and
//! tearing down (`madvise`) a sandbox while another of the plugin's calls
//! runs made that call about 1.5× slower (page faults and TLB shootdowns
//! contend in the kernel), more than the instantiation it saved. So after a
//! call one task per plugin waits until no call of the plugin has started
//! for [`quiet`] (the plugin's own instantiation time, 1–20 ms), then drops
//! the used sandboxes and fills the ready set (`refill.rs`). Calls back to back run as
//! without ready instances; calls with pauses between them (an agent's
//! rounds, an MCP client's requests) find one ready.
//!
//! None are made before the plugin's first call, so a process that makes
//! one call (`host call`) pays nothing for them.
//!
//! Whether a plugin gets them is decided at load time from its measured
//! instantiation (`plugin.rs`, after `describe()`: the least of a few):
//! above [`COSTLY`] (200 µs). Each
//! plugin keeps at most [`PER_PLUGIN`] ready, and fewer than its
//! `max-instances`; all plugins together at most an eighth of the instance
//! pool (`Pool::try_spare`). A refill takes a slot only when one is free and
//! no call is waiting for it, so ready instances never hold a caller up.
//! [`RuntimeBuilder::ready_instances`](crate::RuntimeBuilder::ready_instances)
//! turns them off.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::OwnedSemaphorePermit;

use crate::api::PluginInstance;
use crate::pool::Slot;
use crate::sandbox::Sandbox;

/// An instantiation above this is costly enough to be done ahead of the
/// calls (a Rust plugin's takes 10–40 µs, JavaScript's about 35 µs,
/// CPython's and Go's 0.45–2 ms: on a faster 2-core machine, 2026-12-07,
/// CPython's took 470–490 µs, and a bound of 500 µs left it without
/// ready instances, its paced calls 1.9× slower).
pub(crate) const COSTLY: Duration = Duration::from_micros(200);

/// The most ready instances one plugin keeps.
pub(crate) const PER_PLUGIN: usize = 2;

/// A plugin version's ready instances.
#[derive(Default)]
pub(crate) struct ReadyInstances {
    /// How many to keep; 0 when the plugin's instantiation is cheap (or
    /// they are turned off).
    pub(crate) target: usize,
    /// How long the plugin must be quiet before the work is done.
    pub(crate) quiet: Duration,
    pub(crate) ready: Mutex<Vec<Prepared>>,
    /// Used sandboxes of ready instances, dropped when the plugin is quiet.
    pub(crate) used: Mutex<Vec<Fresh>>,
    /// Calls started, to tell a quiet plugin from a busy one.
    pub(crate) calls: AtomicU64,
    /// Calls that ran in a ready instance.
    served: AtomicU64,
    /// Whether a task waits to do the work.
    pub(crate) scheduled: AtomicBool,
    /// Set when making one failed: this plugin version gets no more.
    pub(crate) broken: AtomicBool,
}

/// An instance instantiated in its own sandbox, never called, with the
/// slot it holds.
pub(crate) struct Fresh {
    pub sandbox: Sandbox,
    pub instance: PluginInstance,
    /// Declared last, so dropped last: the slot is free only once the
    /// store has given its instance back to the engine's pool.
    pub(crate) _slot: Slot,
}

/// A [`Fresh`] instance waiting for a call, with its share of the pool's
/// budget for ready instances (returned when a call takes it).
pub(crate) struct Prepared {
    pub(crate) fresh: Fresh,
    pub(crate) _budget: OwnedSemaphorePermit,
}

/// How long a plugin whose instantiation takes `instantiation` must be
/// quiet before its ready instances are made: as long as one takes, within
/// 1–20 ms.
pub(crate) fn quiet(instantiation: Duration) -> Duration {
    instantiation.clamp(Duration::from_millis(1), Duration::from_millis(20))
}

impl ReadyInstances {
    /// Ready instances for a plugin whose instantiation took
    /// `instantiation`, with `max_instances` sandboxes at once; none when
    /// `enabled` is false or the instantiation is cheap.
    pub(crate) fn for_cost(instantiation: Duration, max_instances: usize, enabled: bool) -> Self {
        let target = if enabled && instantiation > COSTLY {
            PER_PLUGIN.min(max_instances.saturating_sub(1))
        } else {
            0
        };
        ReadyInstances {
            target,
            quiet: quiet(instantiation),
            ..Self::default()
        }
    }

    /// Whether this plugin keeps ready instances.
    pub(crate) fn enabled(&self) -> bool {
        self.target > 0
    }

    /// How many it keeps ready.
    pub(crate) fn kept(&self) -> usize {
        self.target
    }

    /// How many are ready now.
    pub(crate) fn count(&self) -> usize {
        self.ready.lock().len()
    }

    /// Counts a call of the plugin as started and gives it a ready
    /// instance, if there is one.
    pub(crate) fn take(&self) -> Option<Fresh> {
        if !self.enabled() {
            return None;
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let fresh = self.ready.lock().pop().map(|p| p.fresh);
        if fresh.is_some() {
            self.served.fetch_add(1, Ordering::Relaxed);
        }
        fresh
    }

    /// How many calls ran in a ready instance so far.
    pub(crate) fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_costly_instantiation_gets_ready_instances_and_fewer_than_max_instances() {
        let cheap = Duration::from_micros(30);
        let costly = Duration::from_millis(2);
        assert!(!ReadyInstances::for_cost(cheap, 32, true).enabled());
        // CPython's on a fast machine.
        assert!(ReadyInstances::for_cost(Duration::from_micros(470), 32, true).enabled());
        assert!(!ReadyInstances::for_cost(costly, 32, false).enabled());
        assert_eq!(
            ReadyInstances::for_cost(costly, 32, true).target,
            PER_PLUGIN
        );
        assert_eq!(ReadyInstances::for_cost(costly, 2, true).target, 1);
        // A plugin allowed one sandbox at a time keeps none: a ready one
        // would hold its only permit.
        assert!(!ReadyInstances::for_cost(costly, 1, true).enabled());
    }

    #[test]
    fn the_quiet_time_follows_the_instantiation_within_bounds() {
        assert_eq!(quiet(Duration::from_micros(300)), Duration::from_millis(1));
        assert_eq!(quiet(Duration::from_millis(3)), Duration::from_millis(3));
        assert_eq!(quiet(Duration::from_secs(5)), Duration::from_millis(20));
    }
}
