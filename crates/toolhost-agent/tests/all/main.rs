//! The agent loop's and the providers' integration tests, one binary with a
//! module per concern, against scripted providers and local fake servers.

mod agent_loop;
mod agent_support;
mod context;
mod fuzz_corpus;
mod local_models;
mod provider_faults;
mod providers;
mod step;
