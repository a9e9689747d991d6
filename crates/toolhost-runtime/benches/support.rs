//! What the runtime's benchmarks share: where the built plugins are (from
//! `toolhost-test-support`, like the tests), a two-worker tokio runtime
//! like the host's on this machine, and the native baseline of a call.

#![allow(dead_code)]

use std::path::PathBuf;

use serde_json::{Value, json};

pub use toolhost_test_support::{fixtures_dir, plugins_dir};

#[path = "../../../plugins/calc/src/expr.rs"]
#[allow(dead_code)]
mod expr;

/// The native baseline of a `calculate` call: the plugin's own evaluator
/// compiled into the benchmark, with the same JSON work (parse the
/// arguments, evaluate, format, build the details). Returns (output, details).
pub fn native_calculate(args: &str) -> (String, String) {
    let v: Value = serde_json::from_str(args).unwrap_or(Value::Null);
    let expression = v["expression"].as_str().unwrap_or_default();
    let value = expr::evaluate(expression).unwrap_or(f64::NAN);
    let details = json!({"expression": expression, "value": value}).to_string();
    (expr::format_number(value), details)
}

/// `target/<dir>/<file>`, built by `cargo xtask plugins`.
pub fn built(dir: &str, file: &str) -> PathBuf {
    let dir = match dir {
        "fixtures" => fixtures_dir(),
        _ => plugins_dir(),
    };
    let path = dir.join(file);
    assert!(
        path.is_file(),
        "{} is missing: build the plugins first with `cargo xtask plugins`",
        path.display()
    );
    path
}

/// A multi-threaded tokio runtime with two workers.
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
