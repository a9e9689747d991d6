//! What the runtime adds to a call of an external MCP server's tool, in
//! one process, against the baseline of calling the same server directly
//! with the same MCP client (rmcp) in the same run: lookup, validation,
//! policy, hooks (none configured), limits and the source adapter.
//!
//! Servers: `hostile_server.py`'s `echo` (Python, standard library) and
//! `server-everything`'s `echo` (Node), each started twice (once per arm).
//!
//! ```sh
//! cargo bench -p toolhost-mcp --bench source -- [--calls N] [--runs N]
//! ```
//! Figures in `docs/log.md` ("MCP gateway").

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::CallToolRequestParams;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde_json::{Value, json};
use toolhost_mcp::{McpServerConfig, McpSource};
use toolhost_runtime::{CallContext, Runtime};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (calls, runs) = (flag("--calls", 2000), flag("--runs", 3));
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let hostile = root.join("crates/toolhost-test-support/mcp/hostile_server.py");
    let everything = root.join("target/tools/node/node_modules/.bin/mcp-server-everything");
    assert!(
        everything.is_file(),
        "{} is missing: cargo xtask test installs it",
        everything.display()
    );
    let servers: [(&str, Vec<String>, Value); 2] = [
        (
            "python echo",
            vec!["python3".into(), hostile.display().to_string()],
            json!({"text": "hi"}),
        ),
        (
            "server-everything echo",
            vec![everything.display().to_string()],
            json!({"message": "hi"}),
        ),
    ];
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("One call at a time, {calls} calls per arm, p50/p99 in µs");
    tokio.block_on(async {
        for (label, command, arguments) in &servers {
            for run in 1..=runs {
                let direct = direct_calls(command, arguments, calls).await;
                let through = runtime_calls(command, arguments, calls).await;
                println!(
                    "{label:<24} run {run}: direct {:>6.1} / {:>6.1}   runtime.call {:>6.1} / {:>6.1}   added p50 {:>5.1}",
                    at(&direct, 0.5),
                    at(&direct, 0.99),
                    at(&through, 0.5),
                    at(&through, 0.99),
                    at(&through, 0.5) - at(&direct, 0.5)
                );
            }
        }
    });
}

/// Latencies (µs, sorted) of `calls` calls of `echo` by an rmcp client.
async fn direct_calls(command: &[String], arguments: &Value, calls: usize) -> Vec<f64> {
    let mut child = tokio::process::Command::new(&command[0])
        .args(&command[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let transport =
        AsyncRwTransport::new_client(child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let client = rmcp::serve_client((), transport).await.unwrap();
    let Value::Object(args) = arguments.clone() else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("echo").with_arguments(args);
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls + 200 {
        let started = Instant::now();
        client.peer().call_tool(params.clone()).await.unwrap();
        if i >= 200 {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    times
}

/// Latencies (µs, sorted) of `calls` calls of `s__echo` through a runtime.
async fn runtime_calls(command: &[String], arguments: &Value, calls: usize) -> Vec<f64> {
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    let source = McpSource::start(McpServerConfig::stdio("s", &command[0], &args)).unwrap();
    let runtime = Runtime::builder()
        // Fresh calls are measured, not the result cache.
        .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
        .cache_dir(None)
        .source(Arc::new(source))
        .build()
        .await
        .unwrap();
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls + 200 {
        let started = Instant::now();
        runtime
            .call("s__echo", arguments.clone(), CallContext::new())
            .await
            .unwrap();
        if i >= 200 {
            times.push(started.elapsed().as_secs_f64() * 1e6);
        }
    }
    times.sort_by(f64::total_cmp);
    times
}

/// The value at quantile `q` of sorted `v` (nearest rank).
fn at(v: &[f64], q: f64) -> f64 {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((v.len() - 1) as f64 * q).round() as usize;
    v[i]
}
