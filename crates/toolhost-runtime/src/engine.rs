//! The one wasmtime [`Engine`] of a runtime, its pooling allocator and the epoch ticker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::error::RuntimeError;

/// How often the epoch ticker advances the engine's epoch. A running guest
/// yields to the async executor at every tick and is interrupted at the first
/// tick past its deadline, so this is also the resolution of timeouts.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Engine-wide settings, fixed for the runtime's life.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    /// Sandboxes that may exist at once (size of the instance pool).
    pub pool_size: u32,
    /// Largest linear memory any plugin may be granted, in bytes (the pool's slot size).
    pub max_memory_bytes: u64,
    /// Wasm stack a call may use, in bytes.
    pub max_wasm_stack: usize,
    /// Bytes at the start of each pooled linear memory that stay resident
    /// between sandboxes (reset in place instead of being decommitted), so a
    /// fresh instance does not page-fault its memory in again. 0 turns it off.
    pub memory_keep_resident: usize,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            pool_size: 128,
            max_memory_bytes: 1024 * 1024 * 1024,
            max_wasm_stack: 512 * 1024,
            memory_keep_resident: 4 * 1024 * 1024,
        }
    }
}

/// Bytes of each pooled table kept resident between sandboxes (see
/// [`EngineSettings::memory_keep_resident`]): the indirect-function tables
/// of interpreters compiled to wasm (CPython, SpiderMonkey) hold 5,000–8,000
/// entries, 40–64 KiB, several tables per component.
const TABLE_KEEP_RESIDENT: usize = 1024 * 1024;

/// Builds the engine: component model, async, epoch interruption, pooling
/// allocator with copy-on-write memory images.
pub(crate) fn build_engine(s: &EngineSettings) -> Result<Engine, RuntimeError> {
    let mut pool = PoolingAllocationConfig::default();
    let n = s.pool_size.max(1);
    pool.total_component_instances(n)
        .total_core_instances(n.saturating_mul(8))
        .total_memories(n.saturating_mul(2))
        .total_tables(n.saturating_mul(8))
        .total_stacks(n)
        .max_memory_size(usize::try_from(s.max_memory_bytes).unwrap_or(usize::MAX))
        .max_component_instance_size(1 << 20)
        .max_core_instances_per_component(16)
        .max_memories_per_component(2)
        .max_tables_per_component(8)
        .table_elements(100_000)
        // Keep the first pages of a memory slot resident when a sandbox is
        // returned to the pool: they are reset in place instead of being
        // decommitted, so the next call does not page-fault them in again
        // (page faults are most of the cost of a first call into a fresh
        // instance). With PAGEMAP_SCAN (Linux 6.7+) only the pages the guest
        // actually touched are reset.
        .linear_memory_keep_resident(s.memory_keep_resident)
        .table_keep_resident(if s.memory_keep_resident > 0 {
            TABLE_KEEP_RESIDENT
        } else {
            0
        })
        .async_stack_keep_resident(if s.memory_keep_resident > 0 {
            s.max_wasm_stack + 1024 * 1024
        } else {
            0
        })
        .pagemap_scan(Enabled::Auto);

    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .memory_init_cow(true)
        .max_wasm_stack(s.max_wasm_stack)
        .async_stack_size(s.max_wasm_stack + 1024 * 1024)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(|e| RuntimeError::Engine(e.into()))
}

/// Settles the process-wide state of wasmtime's pooling allocator before
/// this process forks (to start an MCP server, a command hook, …). Call it
/// before spawning a process from a program that may build runtimes on
/// other threads at the same time; a runtime's own code does.
///
/// Why: wasmtime 48 registers a fork handler while it opens
/// `/proc/self/pagemap` once per process (for `pagemap_scan`), before it
/// marks that done. A child forked in that window runs the handler, finds
/// the opening "in progress" (a copy of another thread's state, which never
/// finishes in the child) and waits forever, and so does the parent's
/// `spawn`. Seen in the MCP client's tests: an MCP source starts its server
/// as soon as it is made, which may be while a runtime builds its engine.
/// After this returns, the opening is done in this process.
///
/// ```
/// toolhost_runtime::engine::settle_before_fork();
/// let status = std::process::Command::new("true").status();
/// # let _ = status;
/// ```
pub fn settle_before_fork() {
    static SETTLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    SETTLED.get_or_init(|| {
        // Opens the pagemap as every pooling engine does (or waits for
        // another thread that is opening it); no engine is built.
        let _ = PoolingAllocationConfig::is_pagemap_scan_available();
    });
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a dedicated thread
/// until dropped.
pub(crate) struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub(crate) fn start(engine: &Engine) -> Result<EpochTicker, RuntimeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.weak();
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("toolhost-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| RuntimeError::Engine(Box::new(e)))?;
        Ok(EpochTicker { stop })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
