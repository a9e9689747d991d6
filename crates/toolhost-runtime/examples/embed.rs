//! Embedding toolhost in your own program: load the example plugins, list
//! their tools, and call them from several tasks at once.
//!
//! ```sh
//! cargo xtask plugins
//! cargo run -p toolhost-runtime --example embed -- target/plugins
//! ```

use serde_json::json;
use toolhost_runtime::{CallContext, DirGrant, PluginSettings, Runtime};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/plugins".into());

    // Grant the `fs` plugin read-only access to the current directory; every
    // other plugin gets nothing beyond computing.
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only("."));
    let runtime = Runtime::builder()
        .plugin_dir(&dir)
        .plugin_settings("fs", fs)
        .build()
        .await?;

    let report = runtime.load_report();
    for failure in &report.failures {
        eprintln!("not loaded: {}: {}", failure.path.display(), failure.error);
    }
    println!(
        "loaded {} tools in {:?} ({} compiled, {} from cache)",
        runtime.tools().len(),
        report.duration,
        report.compiled,
        report.cache_hits
    );
    for tool in runtime.tools() {
        println!(
            "  {:<14} {}@{}",
            tool.name, tool.plugin, tool.plugin_version
        );
    }

    // The runtime is cheap to clone and serves calls from many tasks at once.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 1..=8 {
        let runtime = runtime.clone();
        tasks.spawn(async move {
            let expression = format!("{i} * (3 + 4)");
            let result = runtime
                .call(
                    "calculate",
                    json!({ "expression": expression }),
                    CallContext::new().call_id(format!("task-{i}")),
                )
                .await;
            (expression, result)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        let (expression, result) = joined?;
        match result {
            Ok(r) => println!("{expression} = {} ({:?})", r.output, r.duration),
            Err(e) => println!("{expression}: {e}"),
        }
    }

    // Errors are values a model can read: here, a misspelt tool name.
    if let Err(e) = runtime
        .call("calculat", json!({}), CallContext::new())
        .await
    {
        println!("{e}");
    }
    Ok(())
}
