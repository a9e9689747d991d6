//! What the runtime's benchmarks share: where the built plugins are (from
//! `toolhost-test-support`, like the tests), and a two-worker tokio runtime
//! like the host's on this machine.

#![allow(dead_code)]

use std::path::PathBuf;

pub use toolhost_test_support::{fixtures_dir, plugins_dir};

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
