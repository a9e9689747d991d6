//! Argument validation and dispatch: `Runtime::call_json` on a runtime over
//! the example plugins (`target/plugins`, built by `cargo xtask plugins`).
//!
//! An input is `NAME\nARGUMENTS`. `NAME` is a real tool's name, or `?` and any
//! name (looked up as given: unknown tools), or anything else, whose first byte
//! picks one of the real tools (so most inputs reach a real tool). Any result
//! is fine; a panic or a hang is a finding. `tests/fuzz_corpus_calls.rs`
//! replays the corpus the same way.

#![no_main]

use std::path::Path;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolhost_runtime::{CallContext, Runtime};

#[path = "../call_input.rs"]
mod call_input;
use call_input::split;

struct Fixture {
    tokio: tokio::runtime::Runtime,
    runtime: Runtime,
    names: Vec<String>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let plugins = root.join("target/plugins");
        assert!(
            plugins.join("calc.wasm").is_file(),
            "{} is missing: run `cargo xtask plugins` first",
            plugins.display()
        );
        let tokio = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let runtime = tokio
            .block_on(
                Runtime::builder()
                    .plugin_dir(plugins)
                    .cache_dir(Some(root.join("target/fuzz-cache")))
                    .build(),
            )
            .expect("runtime builds");
        let mut names: Vec<String> = runtime.tools().into_iter().map(|t| t.name).collect();
        names.sort();
        assert!(!names.is_empty(), "no tools loaded");
        Fixture {
            tokio,
            runtime,
            names,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let text = String::from_utf8_lossy(data);
    let (tool, args) = split(&f.names, &text);
    let _ = f
        .tokio
        .block_on(f.runtime.call_json(tool, args, CallContext::new()));
});
