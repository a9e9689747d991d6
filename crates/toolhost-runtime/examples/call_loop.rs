//! Calls one tool in a loop for a while, for a profiler: the process loads
//! one plugin directory (nothing else the gate benchmark sets up), waits a
//! second, then calls for `SECONDS`, each call with distinct arguments (so
//! the result cache never answers), and prints the time per call.
//!
//! ```sh
//! cargo build --release -p toolhost-runtime --example call_loop
//! perf record -g -D 1500 -- target/release/examples/call_loop \
//!     target/plugins calculate expression 5 [--bare|--traced] [--cache-off] [--callers N]
//! ```
//!
//! The argument `ARG` is a string argument of the tool: each call sends
//! `{"ARG": "N*0+2*(3+4)"}` for the calculator, and `{"ARG": "one two N"}`
//! for any other tool. `--bare` calls through
//! [`Runtime::bare_wasmtime`] (store, instantiate, one `execute`, drop:
//! the floor `fresh_over_bare` divides by); `--traced` exports traces to a
//! local OTLP collector, as the gate's `fresh_instance_traced` does.
//! `--callers N` makes the calls from N tasks at once (the time per call is
//! then 1 / throughput). With one caller it also prints the loop thread's
//! CPU time per call (from `/proc/thread-self/schedstat`): unlike the wall
//! time, it leaves out the time the thread waited for a core, so it says
//! more on a machine others are using. `--cache-off` turns the result cache off (it is on by default, and a
//! call with distinct arguments misses it). `KEEP_RESIDENT_MIB=N` sets [`EngineSettings::memory_keep_resident`]
//! (default 4 MiB), for trying the pooling allocator's reset.
//! `POOL_SIZE=N` sets [`EngineSettings::pool_size`] (default 128): a small
//! pool reserves little address space, so the loop runs under valgrind
//! (`valgrind --tool=cachegrind --cache-sim=no` counts the instructions
//! of a call exactly, whatever else the machine is doing).
//!
//! [`EngineSettings::memory_keep_resident`]: toolhost_runtime::engine::EngineSettings::memory_keep_resident
//! [`EngineSettings::pool_size`]: toolhost_runtime::engine::EngineSettings::pool_size

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_runtime::{CallContext, Runtime};

#[tokio::main(worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, tool, arg, seconds, rest @ ..] = args.as_slice() else {
        anyhow::bail!(
            "usage: call_loop DIR TOOL ARG SECONDS [--bare|--traced] [--cache-off] [--callers N]"
        );
    };
    let seconds: u64 = seconds.parse()?;
    let bare = rest.iter().any(|a| a == "--bare");
    let traced = rest.iter().any(|a| a == "--traced");
    let callers: u64 = rest
        .iter()
        .position(|a| a == "--callers")
        .and_then(|i| rest.get(i + 1))
        .map_or(Ok(1), |v| v.parse())?;
    let cache = if rest.iter().any(|a| a == "--cache-off") {
        toolhost_runtime::cache::CacheOptions::disabled()
    } else {
        toolhost_runtime::cache::CacheOptions::default()
    };
    let mut engine = toolhost_runtime::engine::EngineSettings::default();
    if let Ok(mib) = std::env::var("KEEP_RESIDENT_MIB") {
        engine.memory_keep_resident = mib.parse::<usize>()? << 20;
    }
    if let Ok(n) = std::env::var("POOL_SIZE") {
        engine.pool_size = n.parse()?;
    }
    let runtime = Runtime::builder()
        .engine_settings(engine)
        .result_cache(cache)
        .plugin_dir(dir)
        .build()
        .await?;
    for failure in &runtime.load_report().failures {
        eprintln!("not loaded: {}: {}", failure.path.display(), failure.error);
    }
    let is_calc = tool == "calculate";
    let value = move |i: u64| {
        if is_calc {
            format!("{i}*0+2*(3+4)")
        } else {
            format!("one two {i}")
        }
    };
    let collector = traced.then(toolhost_test_support::otlp::Collector::start);
    let _guard = match &collector {
        Some(collector) => {
            let telemetry = toolhost_telemetry::Telemetry::start(&toolhost_telemetry::Settings {
                endpoint: Some(collector.url()),
                ..Default::default()
            })?
            .ok_or_else(|| anyhow::anyhow!("no exporter"))?;
            use tracing_subscriber::layer::SubscriberExt;
            let dispatch =
                tracing::Dispatch::new(tracing_subscriber::registry().with(telemetry.layer()));
            Some((tracing::dispatcher::set_default(&dispatch), telemetry))
        }
        None => None,
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let end = Instant::now() + Duration::from_secs(seconds);
    let t0 = Instant::now();
    let cpu0 = thread_cpu_ns();
    let mut n = 0u64;
    if bare {
        let plugin = runtime
            .tools()
            .iter()
            .find(|t| t.name == *tool)
            .map(|t| t.plugin.clone())
            .ok_or_else(|| anyhow::anyhow!("no tool {tool}"))?;
        let floor = runtime
            .bare_wasmtime(&plugin)
            .ok_or_else(|| anyhow::anyhow!("no plugin {plugin}"))?;
        while Instant::now() < end {
            n += 1;
            let args = json!({ arg.as_str(): value(n) }).to_string();
            floor.call(tool, &args).await.map_err(anyhow::Error::msg)?;
        }
    } else if callers > 1 {
        let mut tasks = Vec::new();
        for k in 0..callers {
            let (runtime, tool, arg) = (runtime.clone(), tool.clone(), arg.clone());
            tasks.push(tokio::spawn(async move {
                let mut i = k;
                let mut times = Vec::new();
                while Instant::now() < end {
                    i += callers;
                    let args = json!({ arg.as_str(): value(i) });
                    let t = Instant::now();
                    runtime.call(&tool, args, CallContext::new()).await?;
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                anyhow::Ok(times)
            }));
        }
        let mut times = Vec::new();
        for task in tasks {
            times.extend(task.await??);
        }
        n = times.len() as u64;
        times.sort_by(f64::total_cmp);
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
        println!(
            "latency µs: p50 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
            at(0.5),
            at(0.99),
            at(0.999),
            at(1.0)
        );
    } else {
        while Instant::now() < end {
            n += 1;
            let args = json!({ arg.as_str(): value(n) });
            runtime.call(tool, args, CallContext::new()).await?;
        }
    }
    let per_call = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let cpu = match (cpu0, thread_cpu_ns()) {
        (Some(a), Some(b)) if callers == 1 => {
            format!(", {:.2} µs of CPU", (b - a) as f64 / 1e3 / n as f64)
        }
        _ => String::new(),
    };
    println!("{n} calls, {per_call:.2} µs per call{cpu}");
    Ok(())
}

/// The time this thread has run on a core, in nanoseconds (Linux's
/// `schedstat`; `None` elsewhere).
fn thread_cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
