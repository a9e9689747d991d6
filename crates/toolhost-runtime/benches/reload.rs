//! Hot reload and start-up with many plugins.
//!
//! - `reload/watched_write_to_serving`: from the end of a file write (a
//!   rename into place, as a build does) to the first call that runs the new
//!   code, with the watcher and its default debounce. The component comes from
//!   the compile cache, so compile time is not in the figure.
//! - `reload/rescan_to_serving`: the same change picked up by an explicit
//!   `rescan()`: the load (cache hit, link, `describe`) and the swap, without
//!   the watcher's debounce.
//! - `reload/swap`: building the new registry and swapping it in (printed as
//!   the median of `LoadReport::swap` over the rescans above).
//! - `start/warm_20_plugins`: a runtime loading 20 plugins from a warm cache;
//!   `start/warm_4_plugins` is the same with the four example plugins, the
//!   baseline.
//!
//! Run with `cargo xtask bench` (it builds the plugins first).

#[path = "support.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use serde_json::json;
use support::*;
use toolhost_runtime::{CallContext, Runtime};

/// Renames `from` over `dir/calc.wasm`, by way of a staged copy.
fn put(dir: &Path, from: &Path) {
    let staged = dir.join("calc.wasm.part");
    std::fs::copy(from, &staged).unwrap();
    std::fs::rename(&staged, dir.join("calc.wasm")).unwrap();
}

async fn output(rt: &Runtime) -> String {
    rt.call(
        "calculate",
        json!({"expression": "1+2"}),
        CallContext::new(),
    )
    .await
    .map(|r| r.output)
    .unwrap_or_default()
}

fn reload(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let versions = [
        (built("plugins", "calc.wasm"), "3"),
        (built("fixtures", "dup-calc.wasm"), "dup"),
    ];
    put(dir.path(), &versions[0].0);
    let build = |watch: bool| {
        rt.block_on(
            Runtime::builder()
                // Fresh calls are measured, not the result cache.
                .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
                .plugin_dir(dir.path())
                .cache_dir(Some(cache.path().to_owned()))
                .watch(watch)
                .build(),
        )
        .unwrap()
    };
    // Both versions in the compile cache.
    for (wasm, _) in &versions {
        put(dir.path(), wasm);
        drop(build(false));
    }

    let mut g = c.benchmark_group("reload");
    g.sample_size(20).measurement_time(Duration::from_secs(15));
    let watched = build(true);
    let mut next = 0;
    g.bench_function("watched_write_to_serving", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                next = 1 - next;
                let (wasm, want) = &versions[next];
                put(dir.path(), wasm);
                let written = Instant::now();
                rt.block_on(async {
                    while output(&watched).await != *want {
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                });
                total += written.elapsed();
            }
            total
        });
    });
    drop(watched);

    let unwatched = build(false);
    let mut swaps = Vec::new();
    g.bench_function("rescan_to_serving", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                next = 1 - next;
                let (wasm, want) = &versions[next];
                put(dir.path(), wasm);
                let written = Instant::now();
                rt.block_on(async {
                    unwatched.rescan().await;
                    assert_eq!(output(&unwatched).await, *want);
                });
                total += written.elapsed();
                swaps.push(unwatched.load_report().swap);
            }
            total
        });
    });
    g.finish();
    swaps.sort();
    if let Some(median) = swaps.get(swaps.len() / 2) {
        println!(
            "reload/swap: median {:.1} µs over {} reloads (LoadReport::swap)",
            median.as_secs_f64() * 1e6,
            swaps.len()
        );
    }
}

fn start(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    let four = tempfile::tempdir().unwrap();
    let twenty = tempfile::tempdir().unwrap();
    for name in ["calc", "text", "fs", "http"] {
        let wasm = built("plugins", &format!("{name}.wasm"));
        std::fs::copy(&wasm, four.path().join(format!("{name}.wasm"))).unwrap();
        for i in 0..5 {
            let file = format!("{name}{i}");
            std::fs::copy(&wasm, twenty.path().join(format!("{file}.wasm"))).unwrap();
        }
    }
    let load = |dir: &Path, plugins: usize| {
        rt.block_on(async {
            let r = Runtime::builder()
                // Fresh calls are measured, not the result cache.
                .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
                .plugin_dir(dir)
                .cache_dir(Some(cache.path().to_owned()))
                .build()
                .await
                .unwrap();
            assert_eq!(r.plugins().len(), plugins);
            r
        })
    };
    drop(load(twenty.path(), 20));
    let mut g = c.benchmark_group("start");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.bench_function("warm_4_plugins", |b| b.iter(|| load(four.path(), 4)));
    g.bench_function("warm_20_plugins", |b| b.iter(|| load(twenty.path(), 20)));
    g.finish();
}

criterion_group!(benches, reload, start);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
