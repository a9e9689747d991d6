//! What a tool call costs, next to baselines measured in the same run.
//!
//! The same work each time: evaluate `2*(3+4)` from JSON arguments and
//! return the number with JSON details.
//!
//! - `native`: the plugin's own evaluator compiled into this binary, with the
//!   same JSON parsing and formatting (the floor of the work itself).
//! - `bare_wasmtime`: the floor a sandbox is built on, on this machine: a new
//!   store, `InstancePre::instantiate_async` of the same component on the
//!   same engine and pooling allocator, one `execute` call, the store
//!   dropped — none of toolhost's pipeline (`toolhost_runtime::BareWasmtime`).
//!   `fresh_instance ÷ bare_wasmtime` is what toolhost adds;
//!   `bare_wasmtime ÷ native` is what the machine charges for a fresh sandbox.
//! - `reused_instance`: a call into an instance kept across calls.
//! - `fresh_instance`: the default a user gets (the result cache on); a new
//!   sandbox (store, WASI context, instance) per call, with other arguments
//!   on every call, so every call misses the cache and runs the tool.
//! - `fresh_instance_cache_off`: the same with the result cache off, so
//!   `fresh_instance ÷ fresh_instance_cache_off` is what a miss costs.
//! - `cache_hit`: the same arguments every call, answered from the cache.
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

#[path = "support.rs"]
mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use support::*;
use toolhost_runtime::{CallContext, Runtime, cache::CacheOptions, engine::EngineSettings};

const ARGS: &str = r#"{"expression":"2*(3+4)"}"#;
const CHILD_ENV: &str = "TOOLHOST_BENCH_CHILD_ARGS";

/// Arguments that evaluate to 14 but differ on every call (`N*0+2*(3+4)`),
/// so the result cache never answers them.
fn distinct_args() -> impl FnMut() -> Value {
    let mut n = 0u64;
    move || {
        n += 1;
        json!({ "expression": format!("{n}*0+2*(3+4)") })
    }
}

fn calls(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    let load = |options: CacheOptions| {
        rt.block_on(async {
            Runtime::builder()
                .result_cache(options)
                .plugin_dir(plugins_dir())
                .cache_dir(Some(cache.path().to_owned()))
                .build()
                .await
                .unwrap()
        })
    };
    // The defaults a user gets (the result cache on) ...
    let runtime = load(CacheOptions::default());
    // ... and the same without the result cache.
    let uncached = load(CacheOptions::disabled());
    let args: Value = serde_json::from_str(ARGS).unwrap();
    let check = rt
        .block_on(runtime.call("calculate", args.clone(), CallContext::new()))
        .unwrap();
    assert_eq!(check.output, "14");
    let floor = runtime.bare_wasmtime("calc").unwrap();
    assert_eq!(rt.block_on(floor.call("calculate", ARGS)).unwrap(), "14");

    let mut g = c.benchmark_group("call_calculate");
    g.bench_function("native", |b| {
        b.iter(|| native_calculate(std::hint::black_box(ARGS)));
    });
    g.bench_function("bare_wasmtime", |b| {
        b.iter(|| rt.block_on(floor.call("calculate", std::hint::black_box(ARGS))));
    });
    let mut reused = rt.block_on(runtime.reused_instance("calc")).unwrap();
    g.bench_function("reused_instance", |b| {
        b.iter(|| {
            rt.block_on(reused.call("calculate", args.clone(), CallContext::new()))
                .unwrap()
        });
    });
    drop(reused);
    for (name, runtime) in [
        ("fresh_instance", &runtime),
        ("fresh_instance_cache_off", &uncached),
    ] {
        let mut next = distinct_args();
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(runtime.call("calculate", next(), CallContext::new()))
                    .unwrap()
            });
        });
    }
    g.bench_function("cache_hit", |b| {
        b.iter(|| {
            let r = rt
                .block_on(runtime.call("calculate", args.clone(), CallContext::new()))
                .unwrap();
            assert!(r.cached);
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
    let next = std::cell::RefCell::new(distinct_args());
    g.bench_function("fresh_instance_paced", |b| {
        paced(b, &|| {
            let args = (next.borrow_mut())();
            rt.block_on(runtime.call("calculate", args, CallContext::new()))
                .unwrap();
        });
    });
    // The same, with pooled memory decommitted between sandboxes (what a
    // pooling host does by default): every call page-faults its memory in.
    let decommit = rt.block_on(async {
        Runtime::builder()
            // Fresh calls are measured, not the result cache.
            .result_cache(CacheOptions::disabled())
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
                // Fresh calls are measured, not the result cache.
                .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
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

/// A plugin per language, each called with a small text task.
struct Lang {
    name: &'static str,
    file: PathBuf,
    tool: &'static str,
    args: &'static str,
    /// Whether to measure the reused instance. Not for Go: its garbage
    /// collector runs inside `cabi_realloc` once the heap has grown over
    /// calls, reads the clock through WASI there, and the call traps with
    /// "cannot leave component instance" (wasmtime#14318, the preview1
    /// adapter of wasmtime 48; componentize-go#77).
    reuse: bool,
}

/// The Rust `calc` plugin next to the Python, JavaScript and Go examples
/// (`cargo xtask plugins-foreign` builds those into `target/plugins-{py,js,go}`).
fn languages_under_test() -> Vec<Lang> {
    let target = toolhost_test_support::root().join("target");
    let foreign = |dir: &str, file: &str| {
        let path = target.join(dir).join(file);
        assert!(
            path.is_file(),
            "{} is missing: build it with `cargo xtask plugins-foreign`",
            path.display()
        );
        path
    };
    vec![
        Lang {
            name: "rust",
            file: built("plugins", "calc.wasm"),
            tool: "calculate",
            args: ARGS,
            reuse: true,
        },
        Lang {
            name: "python",
            file: foreign("plugins-py", "text-stats.wasm"),
            tool: "text_stats",
            args: r#"{"text":"one two three"}"#,
            reuse: true,
        },
        Lang {
            name: "js",
            file: foreign("plugins-js", "text-case.wasm"),
            tool: "shout",
            args: r#"{"text":"hi"}"#,
            reuse: true,
        },
        Lang {
            name: "go",
            file: foreign("plugins-go", "file-digest.wasm"),
            tool: "sha256",
            args: r#"{"text":"hi"}"#,
            reuse: false,
        },
    ]
}

/// One plugin file loaded with `keep_resident` bytes of each pooled memory
/// kept resident between sandboxes.
fn load_one(
    rt: &tokio::runtime::Runtime,
    file: &std::path::Path,
    cache: Option<PathBuf>,
    keep_resident: usize,
) -> Runtime {
    rt.block_on(async {
        // No result cache: every call runs the tool (the examples are
        // read-only and idempotent, so the cache would answer them).
        let r = Runtime::builder()
            .plugin_dir(file)
            .cache_dir(cache)
            .result_cache(CacheOptions::disabled())
            .engine_settings(EngineSettings {
                memory_keep_resident: keep_resident,
                ..EngineSettings::default()
            })
            .build()
            .await
            .unwrap();
        assert!(r.load_report().failures.is_empty());
        r
    })
}

/// Plugins in other languages (`docs/log.md`, "Plugins in other
/// languages"): per language, the fresh-instance call with the pool's
/// resident memory as it was (4 MiB), as it is (the default) and at 64 MiB, the
/// reused instance, two concurrent callers (time per call, i.e. the inverse
/// of throughput), and start-up (cold compile, warm cache) of the one file.
fn languages(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    // The pool's resident bytes per memory: as they were (4 MiB), as they
    // are (the default), and more.
    let before = 4 << 20;
    let now = EngineSettings::default().memory_keep_resident;
    let mut g = c.benchmark_group("languages");
    for lang in languages_under_test() {
        let size = std::fs::metadata(&lang.file).map_or(0, |m| m.len());
        eprintln!("languages/{}: component of {size} bytes", lang.name);
        let args: Value = serde_json::from_str(lang.args).unwrap();
        let mut settings = vec![before, now, 16 << 20, 64 << 20];
        settings.sort_unstable();
        settings.dedup();
        for keep in settings {
            let label = format!("keep_{}MiB", keep >> 20);
            let runtime = load_one(&rt, &lang.file, Some(cache.path().to_owned()), keep);
            g.bench_function(format!("{}/fresh_instance/{label}", lang.name), |b| {
                b.iter(|| {
                    rt.block_on(runtime.call(lang.tool, args.clone(), CallContext::new()))
                        .unwrap()
                });
            });
            // Two callers at once, each on its own task: the figure is the
            // time per call of both together (1 / throughput).
            g.bench_function(format!("{}/two_callers/{label}", lang.name), |b| {
                b.iter_custom(|iters| {
                    let t0 = std::time::Instant::now();
                    rt.block_on(async {
                        let mut tasks = Vec::new();
                        for k in 0..2u64 {
                            let (runtime, args) = (runtime.clone(), args.clone());
                            let n = iters / 2 + (iters % 2) * k;
                            tasks.push(tokio::spawn(async move {
                                for _ in 0..n {
                                    runtime
                                        .call(lang.tool, args.clone(), CallContext::new())
                                        .await
                                        .unwrap();
                                    tokio::task::yield_now().await;
                                }
                            }));
                        }
                        for t in tasks {
                            t.await.unwrap();
                        }
                    });
                    t0.elapsed()
                });
            });
            if keep == now && lang.reuse {
                let plugin = lang
                    .file
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let mut reused = rt.block_on(runtime.reused_instance(&plugin)).unwrap();
                g.bench_function(format!("{}/reused_instance", lang.name), |b| {
                    b.iter(|| {
                        rt.block_on(reused.call(lang.tool, args.clone(), CallContext::new()))
                            .unwrap()
                    });
                });
            }
        }
    }
    g.finish();
    let mut g = c.benchmark_group("languages_start");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for lang in languages_under_test() {
        g.bench_function(format!("{}/cold_compile", lang.name), |b| {
            b.iter(|| load_one(&rt, &lang.file, None, now));
        });
        g.bench_function(format!("{}/warm_cache", lang.name), |b| {
            b.iter(|| load_one(&rt, &lang.file, Some(cache.path().to_owned()), now));
        });
    }
    g.finish();
}

criterion_group!(benches, calls, startup, languages);

fn main() {
    // Re-run as the `subprocess` baseline's child: do the native work once.
    if let Ok(args) = std::env::var(CHILD_ENV) {
        println!("{}", native_calculate(&args).0);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
