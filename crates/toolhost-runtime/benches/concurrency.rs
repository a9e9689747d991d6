//! Calls under load: N callers share one [`Runtime`] on a two-worker tokio
//! runtime (the host's shape on this machine), each calling `calculate` in a
//! loop; throughput and the latency tail per number of callers.
//!
//! A **native baseline** runs under the same harness in the same run: the
//! same JSON work (parse the arguments, evaluate, serialise the result and
//! details) as a plain async function that yields once, so the executor's,
//! the harness's and the machine's share of the tail shows in both.
//! `--contention` repeats every row with a thread spinning on one core.
//!
//! ```text
//! cargo bench -p toolhost-runtime --bench concurrency -- [--seconds 3] [--callers 1,2,8,32,64,256] [--contention] [--runs 1] [--max-instances N]
//! ```
//!
//! Prints one Markdown table row per (contention, kind, callers).

#[path = "../../../plugins/calc/src/expr.rs"]
#[allow(dead_code)]
mod expr;

#[path = "support.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use support::*;
use toolhost_runtime::{CallContext, PluginSettings, Runtime};

const ARGS: &str = r#"{"expression":"2*(3+4)"}"#;

/// The native baseline's work: what the plugin does, compiled into the host.
async fn native_call(args: &str) -> String {
    let v: Value = serde_json::from_str(args).unwrap_or(Value::Null);
    let expression = v["expression"].as_str().unwrap_or_default();
    let value = expr::evaluate(expression).unwrap_or(f64::NAN);
    let details = json!({"expression": expression, "value": value}).to_string();
    tokio::task::yield_now().await;
    std::hint::black_box(details);
    expr::format_number(value)
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
async fn measure(runtime: &Runtime, kind: Kind, callers: usize, seconds: f64) -> Row {
    let warmup = Duration::from_millis(300);
    let start = Instant::now() + warmup;
    let end = start + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::with_capacity(callers);
    for _ in 0..callers {
        let runtime = runtime.clone();
        tasks.push(tokio::spawn(async move {
            let mut h =
                Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("histogram bounds");
            loop {
                let t0 = Instant::now();
                if t0 >= end {
                    break;
                }
                let out = match kind {
                    Kind::Native => native_call(ARGS).await,
                    Kind::Sandbox => {
                        runtime
                            .call_json("calculate", ARGS, CallContext::new())
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
}

fn options() -> Options {
    let mut o = Options {
        seconds: 3.0,
        callers: vec![1, 2, 8, 32, 64, 256],
        contention: false,
        runs: 1,
        max_instances: None,
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
            "--runs" => o.runs = args.next().and_then(|s| s.parse().ok()).unwrap_or(1),
            "--max-instances" => o.max_instances = args.next().and_then(|s| s.parse().ok()),
            // `cargo bench` passes `--bench`; criterion-style flags are ignored.
            _ => {}
        }
    }
    o
}

fn main() {
    let o = options();
    let rt = tokio_rt();
    let cache = tempfile::tempdir().expect("a temp dir");
    let mut calc = PluginSettings::default();
    calc.limits.max_instances = o.max_instances;
    let runtime = rt.block_on(async {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(cache.path().to_owned()))
            .plugin_settings("calc", calc)
            .build()
            .await
            .expect("the runtime starts")
    });
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
                for kind in [Kind::Native, Kind::Sandbox] {
                    let row = rt.block_on(measure(&runtime, kind, callers, o.seconds));
                    let h = &row.histogram;
                    println!(
                        "| {run} | {} | {} | {callers} | {:.0} | {} | {} | {} | {} |",
                        if hogged { "one core hogged" } else { "quiet" },
                        kind.name(),
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
