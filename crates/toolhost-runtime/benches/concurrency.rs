//! Calls under load: N callers share one [`Runtime`] on a two-worker tokio
//! runtime (the host's shape on this machine), each calling `calculate` in a
//! loop; throughput and the latency tail per number of callers.
//!
//! Each caller awaits once before each call (as a server task awaits its
//! next request) and times the call from there, so the wait for a worker is
//! in the latency. `--tight` drops that await: a caller whose calls all
//! complete within one poll then keeps its worker for up to an epoch tick
//! of calls, and the others wait (the tail the calls-under-load issue saw).
//!
//! A **native baseline** runs under the same harness in the same run: the
//! same JSON work (parse the arguments, evaluate, serialise the result and
//! details) as a plain function, so the executor's, the harness's and the
//! machine's share of the tail shows in both. `--contention` repeats every
//! row with a thread spinning on one core; `--kinds sandbox` runs one kind.
//!
//! `--sandboxes 1,32,128 [--pool N]` measures memory instead: resident
//! memory with that many sandboxes in flight.
//!
//! ```text
//! cargo bench -p toolhost-runtime --bench concurrency -- [--seconds 3] [--callers 1,2,8,32,64,256] [--contention] [--tight] [--kinds native,sandbox] [--runs 1] [--max-instances N]
//! cargo bench -p toolhost-runtime --bench concurrency -- --sandboxes 1,32,128 [--pool N]
//! ```
//!
//! Prints one Markdown table row per (contention, kind, callers).

#[path = "support.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use support::*;
use toolhost_runtime::{CallContext, PluginSettings, Runtime, engine::EngineSettings};
use toolhost_test_support::{copy_plugin, rss};

const ARGS: &str = r#"{"expression":"2*(3+4)"}"#;

/// The native baseline's work: what the plugin does, compiled into the host.
async fn native_call(args: &str) -> String {
    let (output, details) = native_calculate(args);
    std::hint::black_box(details);
    output
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Native,
    Sandbox,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Native => "native",
            Kind::Sandbox => "sandbox",
        }
    }
}

struct Row {
    calls_per_sec: f64,
    histogram: Histogram<u64>,
}

/// Runs `callers` tasks for `warmup + seconds`, recording each call's latency
/// (in nanoseconds) after the warm-up.
async fn measure(runtime: &Runtime, kind: Kind, callers: usize, seconds: f64, tight: bool) -> Row {
    let warmup = Duration::from_millis(300);
    let start = Instant::now() + warmup;
    let end = start + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::with_capacity(callers);
    for _ in 0..callers {
        let runtime = runtime.clone();
        tasks.push(tokio::spawn(async move {
            let mut h =
                Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
            let mut n = 0u64;
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                if !tight {
                    tokio::task::yield_now().await;
                }
                // Other arguments on every call (`N*0+2*(3+4)`), for both
                // kinds: the result cache, on by default, never answers.
                n += 1;
                let args = format!(r#"{{"expression":"{n}*0+2*(3+4)"}}"#);
                let out = match kind {
                    Kind::Native => native_call(&args).await,
                    Kind::Sandbox => {
                        runtime
                            .call_json("calculate", &args, CallContext::new())
                            .await
                            .expect("calculate succeeds")
                            .output
                    }
                };
                debug_assert_eq!(out, "14");
                if t0 >= start {
                    let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
                    h.saturating_record(ns.max(1));
                }
            }
            h
        }));
    }
    let mut histogram =
        Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
    for t in tasks {
        histogram
            .add(t.await.expect("caller task"))
            .expect("same bounds");
    }
    Row {
        calls_per_sec: histogram.len() as f64 / seconds,
        histogram,
    }
}

/// A thread that keeps one core busy until dropped.
struct Hog(Arc<AtomicBool>, Option<std::thread::JoinHandle<()>>);

impl Hog {
    fn start() -> Hog {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut x = 0u64;
            while !flag.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        Hog(stop, Some(handle))
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        if let Some(h) = self.1.take() {
            let _ = h.join();
        }
    }
}

fn us(ns: u64) -> String {
    let us = ns as f64 / 1000.0;
    if us >= 100.0 {
        format!("{us:.0} µs")
    } else {
        format!("{us:.1} µs")
    }
}

struct Options {
    seconds: f64,
    callers: Vec<usize>,
    contention: bool,
    runs: usize,
    /// `calc`'s `max-instances` (the default when not given).
    max_instances: Option<usize>,
    tight: bool,
    /// Which rows to run (both by default).
    kinds: Vec<Kind>,
    /// `--sandboxes 1,32,128`: measure memory with this many sandboxes in
    /// flight instead of calls under load.
    sandboxes: Vec<usize>,
    /// The instance pool's size for `--sandboxes` (the default when not given).
    pool: Option<u32>,
}

fn options() -> Options {
    let mut o = Options {
        seconds: 3.0,
        callers: vec![1, 2, 8, 32, 64, 256],
        contention: false,
        runs: 1,
        max_instances: None,
        tight: false,
        kinds: vec![Kind::Native, Kind::Sandbox],
        sandboxes: Vec::new(),
        pool: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => o.seconds = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0),
            "--callers" => {
                o.callers = args
                    .next()
                    .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
                    .unwrap_or_default();
            }
            "--contention" => o.contention = true,
            "--tight" => o.tight = true,
            "--sandboxes" => {
                o.sandboxes = args
                    .next()
                    .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
                    .unwrap_or_default();
            }
            "--pool" => o.pool = args.next().and_then(|s| s.parse().ok()),
            "--kinds" => {
                o.kinds = args
                    .next()
                    .map(|s| {
                        s.split(',')
                            .filter_map(|k| match k.trim() {
                                "native" => Some(Kind::Native),
                                "sandbox" => Some(Kind::Sandbox),
                                _ => None,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
            }
            "--runs" => o.runs = args.next().and_then(|s| s.parse().ok()).unwrap_or(1),
            "--max-instances" => o.max_instances = args.next().and_then(|s| s.parse().ok()),
            // `cargo bench` passes `--bench`; criterion-style flags are ignored.
            _ => {}
        }
    }
    o
}

/// Memory with `n` sandboxes in flight: `n` calls of `hostile-sleep` (a
/// Rust plugin built with the SDK, like the examples) that wait inside the
/// guest, so each holds its store, instance, linear memory and fiber stack.
/// Prints the process's resident memory before and during, and the
/// difference per sandbox.
fn memory(o: &Options) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().expect("a temp dir");
    let dir = tempfile::tempdir().expect("a temp dir");
    copy_plugin(&fixtures_dir(), "hostile-sleep", dir.path());
    let most = o.sandboxes.iter().copied().max().unwrap_or(1);
    let mut sleeper = PluginSettings::default();
    sleeper.limits.max_instances = Some(most);
    sleeper.limits.timeout_ms = Some(60_000);
    let mut engine = EngineSettings::default();
    if let Some(pool) = o.pool {
        engine.pool_size = pool;
    }
    let pool_size = engine.pool_size;
    let runtime = rt.block_on(async {
        Runtime::builder()
            // Fresh calls are measured, not the result cache.
            .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
            .plugin_dir(dir.path())
            .cache_dir(Some(cache.path().to_owned()))
            .engine_settings(engine)
            .max_queued_calls(100_000)
            .plugin_settings("hostile-sleep", sleeper)
            .build()
            .await
            .expect("the runtime starts")
    });
    let baseline = rss();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "pool size {pool_size}; RSS with the plugin loaded, before any call: {:.1} MiB",
        mib(baseline)
    );
    println!("| sandboxes in flight | RSS during | per sandbox | RSS after (kept by the pool) |");
    println!("|---:|---:|---:|---:|");
    for &n in &o.sandboxes {
        // Two rounds at this size; the second is reported (the first may
        // grow the allocator's and the pool's bookkeeping).
        for round in 0..2 {
            let hold = Duration::from_millis(1500);
            let args = format!(r#"{{"ms":{}}}"#, hold.as_millis());
            let calls: Vec<_> = (0..n)
                .map(|_| {
                    let (runtime, args) = (runtime.clone(), args.clone());
                    rt.spawn(async move {
                        runtime
                            .call_json("sleep", &args, CallContext::new())
                            .await
                            .expect("sleep succeeds")
                    })
                })
                .collect();
            std::thread::sleep(hold / 2);
            let during = rss();
            for c in calls {
                rt.block_on(c).expect("caller task");
            }
            if round == 1 {
                let in_flight = n.min(pool_size as usize).max(1) as u64;
                let per = during.saturating_sub(baseline) / in_flight;
                println!(
                    "| {n} | {:.1} MiB | {:.0} KiB | {:.1} MiB |",
                    mib(during),
                    per as f64 / 1024.0,
                    mib(rss()),
                );
            }
        }
    }
}

fn main() {
    let o = options();
    if !o.sandboxes.is_empty() {
        memory(&o);
        return;
    }
    let rt = tokio_rt();
    let cache = tempfile::tempdir().expect("a temp dir");
    let mut calc = PluginSettings::default();
    calc.limits.max_instances = o.max_instances;
    let load = |options: toolhost_runtime::cache::CacheOptions| {
        rt.block_on(async {
            Runtime::builder()
                .result_cache(options)
                .plugin_dir(plugins_dir())
                .cache_dir(Some(cache.path().to_owned()))
                .plugin_settings("calc", calc.clone())
                .build()
                .await
                .expect("the runtime starts")
        })
    };
    // The defaults a user gets (the result cache on), and a row with it off.
    let runtime = load(toolhost_runtime::cache::CacheOptions::default());
    let uncached = load(toolhost_runtime::cache::CacheOptions::disabled());
    let check = rt
        .block_on(runtime.call_json("calculate", ARGS, CallContext::new()))
        .expect("calculate succeeds");
    assert_eq!(check.output, "14");

    println!("| run | load | kind | callers | calls/s | p50 | p99 | p99.9 | max |");
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|");
    let loads: &[bool] = if o.contention {
        &[false, true]
    } else {
        &[false]
    };
    for run in 1..=o.runs {
        for &hogged in loads {
            let _hog = hogged.then(Hog::start);
            for &callers in &o.callers {
                let rows = o.kinds.iter().flat_map(|&kind| match kind {
                    Kind::Native => vec![(kind, &runtime, kind.name())],
                    Kind::Sandbox => vec![
                        (kind, &runtime, kind.name()),
                        (kind, &uncached, "sandbox, cache off"),
                    ],
                });
                for (kind, runtime, name) in rows {
                    let row = rt.block_on(measure(runtime, kind, callers, o.seconds, o.tight));
                    let h = &row.histogram;
                    println!(
                        "| {run} | {} | {name} | {callers} | {:.0} | {} | {} | {} | {} |",
                        if hogged { "one core hogged" } else { "quiet" },
                        row.calls_per_sec,
                        us(h.value_at_quantile(0.5)),
                        us(h.value_at_quantile(0.99)),
                        us(h.value_at_quantile(0.999)),
                        us(h.max()),
                    );
                }
            }
        }
    }
}
