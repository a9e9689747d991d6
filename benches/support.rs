//! What the runtime's benchmarks share: where the built plugins are, and a
//! two-worker tokio runtime like the host's on this machine.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `target/<dir>/<file>`, built by `cargo xtask plugins`.
pub fn built(dir: &str, file: &str) -> PathBuf {
    let path = root().join("target").join(dir).join(file);
    assert!(
        path.is_file(),
        "{} is missing: build the plugins first with `cargo xtask plugins`",
        path.display()
    );
    path
}

/// `target/plugins`: the example plugins.
pub fn plugins_dir() -> PathBuf {
    built("plugins", "calc.wasm")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A multi-threaded tokio runtime with two workers.
pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
