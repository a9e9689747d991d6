//! The sandbox pool: the engine every sandbox runs on, the slots of its
//! instance pool, and the queue of calls waiting for one.
//!
//! A call takes two permits before it gets a sandbox: one of its plugin's
//! `max-instances` and one of the engine's instance pool. Both are fair
//! semaphores; the calls waiting for either share one queue bound
//! (`max-queued-calls`), past which a call is answered [`CallError::Busy`]
//! at once instead of waiting.
//!
//! A plugin that may call tools (`call/nested.rs`) also takes one of the
//! pool's *caller* permits, half its slots: its calls wait for slots while
//! it holds one, and the tools they run cannot call tools, so half the
//! pool is always left to them and callers cannot deadlock the pool.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Engine;

use crate::engine::EpochTicker;
use crate::error::CallError;
use crate::sandbox::{Sandbox, SandboxSpec};

/// The engine and its sandbox slots, shared by every call. A clone is a
/// handle on the same pool (for work done off the call path, `ready.rs`).
#[derive(Clone)]
pub(crate) struct Pool {
    engine: Engine,
    /// One permit per slot of the engine's instance pool.
    slots: Arc<Semaphore>,
    /// Slots that ready instances (`ready.rs`) may hold at once, all
    /// plugins together: an eighth of the pool, so calls always keep most.
    ready_budget: Arc<Semaphore>,
    /// One permit per plugin call that may call tools at once: half the
    /// slots (at least one), so that the calls they make find the rest.
    callers: Arc<Semaphore>,
    /// Calls waiting for a permit right now.
    queued: Arc<AtomicUsize>,
    max_queued: usize,
    max_wasm_stack: usize,
    /// Empty scratch directories for per-call grants (`scratch.rs`).
    scratches: crate::scratch::Scratches,
    /// Advances the engine's epoch (timeouts); stops when the last handle
    /// on the pool is dropped.
    _ticker: Arc<EpochTicker>,
}

/// A sandbox slot: a permit of the plugin's `max-instances` and one of the
/// instance pool, both returned when dropped.
pub(crate) struct Slot {
    _instance: OwnedSemaphorePermit,
    _pool: OwnedSemaphorePermit,
}

impl Pool {
    pub(crate) fn new(
        engine: Engine,
        pool_size: u32,
        max_queued: usize,
        max_wasm_stack: usize,
        ticker: EpochTicker,
    ) -> Pool {
        Pool {
            engine,
            slots: Arc::new(Semaphore::new(pool_size as usize)),
            ready_budget: Arc::new(Semaphore::new(pool_size as usize / 8)),
            callers: Arc::new(Semaphore::new((pool_size as usize / 2).max(1))),
            queued: Arc::new(AtomicUsize::new(0)),
            max_queued,
            max_wasm_stack,
            scratches: crate::scratch::Scratches::default(),
            _ticker: Arc::new(ticker),
        }
    }

    /// The engine every sandbox runs on.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The empty scratch directories per-call grants take (`scratch.rs`).
    pub(crate) fn scratches(&self) -> &crate::scratch::Scratches {
        &self.scratches
    }

    /// A fresh sandbox (store, WASI context, limits) for one of `spec`'s plugin's calls.
    pub(crate) fn sandbox(&self, spec: &Arc<SandboxSpec>) -> Result<Sandbox, String> {
        Sandbox::new(&self.engine, spec, self.max_wasm_stack)
    }

    /// Waits until `plugin` may start another sandbox (`max-instances`) and
    /// a slot of the instance pool is free, or answers `Busy` when too many
    /// calls wait already.
    pub(crate) async fn acquire(&self, plugin: Quota<'_>) -> Result<Slot, CallError> {
        let instance = self.wait_for(plugin.permits, Some(&plugin)).await?;
        let pool = self.wait_for(&self.slots, None).await?;
        Ok(Slot {
            _instance: instance,
            _pool: pool,
        })
    }

    /// Waits until another call of a plugin that may call tools may run
    /// (half the pool's slots; see the module's doc), or answers `Busy`
    /// when too many calls wait already. Taken before the call's slot.
    pub(crate) async fn caller(&self) -> Result<OwnedSemaphorePermit, CallError> {
        self.wait_for(&self.callers, None).await
    }

    /// A slot for a ready instance of `plugin` (`ready.rs`), only when one
    /// is free now and no call waits for it (a fair semaphore hands a freed
    /// permit to its waiters first), and within the pool's budget for ready
    /// instances. The budget permit is the second value: dropped when a
    /// call takes the instance.
    pub(crate) fn try_spare(&self, plugin: Quota<'_>) -> Option<(Slot, OwnedSemaphorePermit)> {
        let budget = self.ready_budget.clone().try_acquire_owned().ok()?;
        let instance = plugin.permits.clone().try_acquire_owned().ok()?;
        let pool = self.slots.clone().try_acquire_owned().ok()?;
        Some((
            Slot {
                _instance: instance,
                _pool: pool,
            },
            budget,
        ))
    }

    /// Takes a permit of `semaphore`, waiting in the shared queue; `plugin`
    /// names the per-plugin limit when that is the one that is full.
    async fn wait_for(
        &self,
        semaphore: &Arc<Semaphore>,
        plugin: Option<&Quota<'_>>,
    ) -> Result<OwnedSemaphorePermit, CallError> {
        if let Ok(p) = semaphore.clone().try_acquire_owned() {
            return Ok(p);
        }
        let busy = |waiting| CallError::Busy {
            waiting,
            max_queued: self.max_queued,
            instance_limit: plugin.map(|p| (format!("{}@{}", p.name, p.version), p.max)),
        };
        let waiting = self.queued.fetch_add(1, Ordering::AcqRel);
        struct Dequeue<'a>(&'a AtomicUsize);
        impl Drop for Dequeue<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _dequeue = Dequeue(&self.queued);
        if waiting >= self.max_queued {
            return Err(busy(waiting));
        }
        semaphore
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| busy(waiting))
    }
}

/// What the pool needs of a plugin: its `max-instances` permits, and its
/// name, version and limit for a `Busy` error
/// (`Plugin::quota`).
#[derive(Clone, Copy)]
pub(crate) struct Quota<'a> {
    pub permits: &'a Arc<Semaphore>,
    pub name: &'a str,
    pub version: &'a semver::Version,
    pub max: usize,
}
