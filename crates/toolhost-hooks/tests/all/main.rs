//! The hooks' integration tests, one binary with a module per concern.

mod chain;
mod command;
mod config;
