//! The console's end-to-end tests: a real runtime (the built plugins, from
//! `cargo xtask plugins`) behind the console's router, asked as a browser
//! would. The `host serve --console` binary and Chromium are tested in
//! `toolhost-cli` (`tests/all/console.rs`).

mod pages;

/// What the tests share (the `toolhost-test-support` crate).
mod support {
    pub use toolhost_test_support::*;
}
