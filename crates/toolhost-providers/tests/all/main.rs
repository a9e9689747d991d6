//! The providers' integration tests, one binary with a module per concern:
//! the HTTP providers against a local server speaking the real wire formats
//! (`toolhost_test_support::fake_model`), and the fuzz corpus replayed.

mod anthropic;
mod fuzz_corpus;
mod images;
mod openai;
mod options;
mod prompt;
mod select;
mod stream_errors;
mod support;
mod transport;
