//! The agent loop's integration tests, one binary with a module per
//! concern, against scripted providers and local fake servers (the
//! providers' own are in `crates/toolhost-providers/tests/all/`).

mod agent_loop;
mod agent_support;
mod cancellation;
mod context;
mod final_answer;
mod local_models;
mod provider_faults;
mod step;
mod stored_results;
mod tool_search;
