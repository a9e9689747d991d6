//! Replays the kept corpus of the `call_arguments` fuzz target
//! (`fuzz/corpus/call_arguments/`) through `Runtime::call_json` on the example
//! plugins, on stable Rust: every call must return (a result or a typed
//! error) without a panic or a hang.

use std::time::Duration;

use toolhost_runtime::{CallContext, Runtime};

use crate::support::*;

#[path = "../../../../fuzz/call_input.rs"]
mod call_input;
use call_input::split;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_arguments_corpus() {
    let rt = Runtime::builder()
        .plugin_dir(plugins_dir())
        .cache_dir(Some(root().join("target/test-cache")))
        .build()
        .await
        .expect("runtime builds");
    let mut names: Vec<String> = rt.tools().into_iter().map(|t| t.name).collect();
    names.sort();
    let dir = root().join("fuzz/corpus/call_arguments");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    for path in files {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let (tool, args) = split(&names, &text);
        let call = rt.call_json(tool, args, CallContext::new());
        // Ok or a typed error are both fine; a panic fails the test.
        let result = tokio::time::timeout(Duration::from_secs(5), call)
            .await
            .unwrap_or_else(|_| panic!("{} did not return within 5 s", path.display()));
        if let Err(e) = &result {
            // Every error renders (the model sees it as text).
            assert!(!e.to_string().is_empty(), "{}", path.display());
        }
    }
}
