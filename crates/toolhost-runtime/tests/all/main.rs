//! The runtime's end-to-end tests, one binary with a module per concern
//! (the built plugins come from `cargo xtask plugins`).

mod code_mode;
mod contract_versions;
mod fuzz_corpus_calls;
mod hook_plugins;
mod hooks;
mod hostile;
mod hot_reload;
mod limits;
mod permissions;
mod plain;
mod result_cache;
mod runtime;
mod soak;
mod source_access;
mod source_content;
mod trust;
mod watch;

/// What the tests share (the `toolhost-test-support` crate).
mod support {
    pub use toolhost_test_support::*;
}
