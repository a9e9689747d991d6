//! What a code-mode program costs to start: a fresh instance of the
//! program runner (`target/code/run-code.wasm`) running a tiny program,
//! against a fresh call of the Rust `calc` plugin, both on bare wasmtime
//! (`BareWasmtime`: store, instantiate, one `execute`, drop) and through
//! the whole pipeline (`Runtime::call`), and a program that makes one tool
//! call against that call made directly. Prints the median and the 90th
//! percentile of each, in µs.
//!
//! ```sh
//! cargo xtask plugins
//! cargo run --release -p toolhost-runtime --example code_start -- 200 [DIR]
//! ```
//!
//! With `DIR`, a directory holding `run-code-js.wasm` (a componentize-js
//! plugin whose tool `run_code_js` runs `new Function(code)()`; how it was
//! built is in `docs/log.md`), its fresh call is timed the same
//! way, for the choice of engine.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_runtime::{CallContext, PluginSettings, Runtime};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(200);
    let js_dir = std::env::args().nth(2);
    let code = PluginSettings {
        call_tools: vec!["calculate".into()],
        ..PluginSettings::default()
    };
    let mut builder = Runtime::builder()
        .plugin_dir("target/plugins")
        .plugin_dir("target/code")
        .plugin_settings("run-code", code);
    if let Some(dir) = &js_dir {
        builder = builder.plugin_dir(dir);
    }
    let runtime = builder.build().await?;
    for failure in &runtime.load_report().failures {
        eprintln!("not loaded: {}: {}", failure.path.display(), failure.error);
    }
    let size = |path: &str| std::fs::metadata(path).map_or(0, |m| m.len());
    println!(
        "component size: run-code {} KB, calc {} KB",
        size("target/code/run-code.wasm") / 1000,
        size("target/plugins/calc.wasm") / 1000
    );
    let (runner, calc) = (
        runtime.bare_wasmtime("run-code").expect("run-code loaded"),
        runtime.bare_wasmtime("calc").expect("calc loaded"),
    );
    let tiny = json!({ "code": "const { a, b } = { a: 20, b: 22 }; return a + b;" }).to_string();
    let expression = json!({ "expression": "20+22" }).to_string();
    report(
        "bare: run_code, tiny program",
        time(n, async || runner.call("run_code", &tiny).await.map(drop)).await?,
    );
    if let Some(js) = runtime.bare_wasmtime("run-code-js") {
        let tiny =
            json!({ "code": "const { a, b } = { a: 20, b: 22 }; return a + b;" }).to_string();
        report(
            "bare: componentize-js, tiny program",
            time(n, async || js.call("run_code_js", &tiny).await.map(drop)).await?,
        );
    }
    report(
        "bare: calc",
        time(n, async || {
            calc.call("calculate", &expression).await.map(drop)
        })
        .await?,
    );
    let call = async |tool: &str, args: serde_json::Value| {
        runtime
            .call(tool, args, CallContext::new())
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    };
    runtime.clear_result_cache();
    report(
        "pipeline: run_code, tiny program",
        time(n, async || {
            call("run_code", json!({ "code": "return 20 + 22;" })).await
        })
        .await?,
    );
    report(
        "pipeline: run_code, one call of calculate",
        time(n, async || {
            runtime.clear_result_cache();
            call(
                "run_code",
                json!({ "code": "return (await tools.calculate({ expression: '20+22' })).value;" }),
            )
            .await
        })
        .await?,
    );
    report(
        "pipeline: calculate directly",
        time(n, async || {
            runtime.clear_result_cache();
            call("calculate", json!({ "expression": "20+22" })).await
        })
        .await?,
    );
    Ok(())
}

/// Times `n` runs of `f` after a tenth of them as warm-up.
async fn time(n: usize, f: impl AsyncFn() -> Result<(), String>) -> anyhow::Result<Vec<Duration>> {
    for _ in 0..n / 10 {
        f().await.map_err(anyhow::Error::msg)?;
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        f().await.map_err(anyhow::Error::msg)?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times)
}

fn report(what: &str, times: Vec<Duration>) {
    // The `percent`th percentile (nearest rank below).
    let at = |percent: usize| {
        let i = times.len().saturating_sub(1) * percent / 100;
        times.get(i).map_or(0, Duration::as_micros)
    };
    println!("{what}: p50 {} µs, p90 {} µs", at(50), at(90));
}
