//! What a tool call costs, next to baselines measured in the same run.
//!
//! The same work each time: evaluate `2*(3+4)` from JSON arguments and
//! return the number with JSON details.
//!
//! - `native`: the plugin's own evaluator compiled into this binary, with the
//!   same JSON parsing and formatting (the floor).
//! - `reused_instance`: a call into an instance kept across calls.
//! - `fresh_instance`: the default; a new sandbox (store, WASI context,
//!   instance) per call.
//! - `fresh_instance_paced`: the same with a 200 µs pause before each call
//!   (untimed), as an agent or a server between requests: the threads have
//!   gone idle and the caches have cooled when the call starts;
//!   `native_paced` is the native work paced the same way.
//! - `fresh_instance_decommit`: the same with the pool's memory decommitted
//!   between sandboxes instead of kept resident (a naive pooling host).
//! - `subprocess`: a native process spawned per call (this binary, re-run as a
//!   child that does the `native` work), what a CLI-tool host pays.
//!
//! And start-up: all example plugins compiled (`cold_compile`) versus loaded
//! from the compile cache (`warm_cache`).
//!
//! Run with `cargo xtask bench` (it builds the plugins first).

#[path = "../../../plugins/calc/src/expr.rs"]
#[allow(dead_code)]
mod expr;

#[path = "support.rs"]
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use support::*;
use toolhost_runtime::{CallContext, EngineSettings, Runtime};

const ARGS: &str = r#"{"expression":"2*(3+4)"}"#;
const CHILD_ENV: &str = "TOOLHOST_BENCH_CHILD_ARGS";

/// The `native` work: parse arguments, evaluate, format, build details.
fn native_calculate(args: &str) -> (String, String) {
    let v: Value = serde_json::from_str(args).unwrap_or(Value::Null);
    let expression = v["expression"].as_str().unwrap_or_default();
    let value = expr::evaluate(expression).unwrap_or(f64::NAN);
    let details = json!({"expression": expression, "value": value}).to_string();
    (expr::format_number(value), details)
}

fn calls(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    let runtime = rt.block_on(async {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(cache.path().to_owned()))
            .build()
            .await
            .unwrap()
    });
    let args: Value = serde_json::from_str(ARGS).unwrap();
    let check = rt
        .block_on(runtime.call("calculate", args.clone(), CallContext::new()))
        .unwrap();
    assert_eq!(check.output, "14");

    let mut g = c.benchmark_group("call_calculate");
    g.bench_function("native", |b| {
        b.iter(|| native_calculate(std::hint::black_box(ARGS)));
    });
    let mut reused = rt.block_on(runtime.reused_instance("calc")).unwrap();
    g.bench_function("reused_instance", |b| {
        b.iter(|| {
            rt.block_on(reused.call("calculate", args.clone(), CallContext::new()))
                .unwrap()
        });
    });
    drop(reused);
    g.bench_function("fresh_instance", |b| {
        b.iter(|| {
            rt.block_on(runtime.call("calculate", args.clone(), CallContext::new()))
                .unwrap()
        });
    });
    // A caller that pauses between calls (an agent between model turns, a
    // server between requests): only the call is timed, next to the native
    // work paced the same way.
    let paced = |b: &mut criterion::Bencher, call: &dyn Fn()| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                std::thread::sleep(Duration::from_micros(200));
                let t0 = std::time::Instant::now();
                call();
                total += t0.elapsed();
            }
            total
        });
    };
    g.bench_function("native_paced", |b| {
        paced(b, &|| {
            std::hint::black_box(native_calculate(std::hint::black_box(ARGS)));
        });
    });
    g.bench_function("fresh_instance_paced", |b| {
        paced(b, &|| {
            rt.block_on(runtime.call("calculate", args.clone(), CallContext::new()))
                .unwrap();
        });
    });
    // The same, with pooled memory decommitted between sandboxes (what a
    // pooling host does by default): every call page-faults its memory in.
    let decommit = rt.block_on(async {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(cache.path().to_owned()))
            .engine_settings(EngineSettings {
                memory_keep_resident: 0,
                ..EngineSettings::default()
            })
            .build()
            .await
            .unwrap()
    });
    g.bench_function("fresh_instance_decommit", |b| {
        b.iter(|| {
            rt.block_on(decommit.call("calculate", args.clone(), CallContext::new()))
                .unwrap()
        });
    });
    drop(decommit);
    let exe = std::env::current_exe().unwrap();
    g.bench_function("subprocess", |b| {
        b.iter(|| {
            let out = Command::new(&exe).env(CHILD_ENV, ARGS).output().unwrap();
            assert_eq!(out.stdout, b"14\n");
        });
    });
    g.finish();
}

fn startup(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    let load = |cache_dir: Option<PathBuf>| {
        rt.block_on(async {
            let r = Runtime::builder()
                .plugin_dir(plugins_dir())
                .cache_dir(cache_dir)
                .build()
                .await
                .unwrap();
            assert!(r.load_report().failures.is_empty());
            r
        })
    };
    // Fill the cache once.
    drop(load(Some(cache.path().to_owned())));
    let mut g = c.benchmark_group("start_all_example_plugins");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.bench_function("cold_compile", |b| b.iter(|| load(None)));
    g.bench_function("warm_cache", |b| {
        b.iter(|| load(Some(cache.path().to_owned())));
    });
    g.finish();
}

criterion_group!(benches, calls, startup);

fn main() {
    // Re-run as the `subprocess` baseline's child: do the native work once.
    if let Ok(args) = std::env::var(CHILD_ENV) {
        println!("{}", native_calculate(&args).0);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
