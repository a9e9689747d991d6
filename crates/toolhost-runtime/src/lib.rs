//! # toolhost-runtime
//!
//! Loads tool plugins (WebAssembly components built against the
//! `toolhost:plugin` WIT contract) and runs calls into them, each in a fresh
//! sandbox with time, memory and capability limits. It knows nothing of LLMs:
//! the agent loop drives it through [`Runtime::tools`] and [`Runtime::call`].
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use toolhost_runtime::{CallContext, DirGrant, PluginSettings, Runtime};
//!
//! let mut fs = PluginSettings::default();
//! fs.dirs.push(DirGrant::read_only("."));
//! let runtime = Runtime::builder()
//!     .plugin_dir("target/plugins")
//!     .plugin_settings("fs", fs)
//!     .build()
//!     .await?;
//! for tool in runtime.tools() {
//!     println!("{} ({}@{})", tool.name, tool.plugin, tool.plugin_version);
//! }
//! let result = runtime
//!     .call_json("read_file", r#"{"path": "README.md", "limit": 5}"#, CallContext::new())
//!     .await?;
//! println!("{}", result.output);
//! # Ok(()) }
//! ```

mod api;
mod builder;
mod cache_settings;
mod call;
mod catalog;
mod compile_cache;
pub mod engine;
pub mod error;
pub mod failures;
pub mod feed;
mod floor;
mod gate;
pub mod grants;
mod hook_plugin;
mod http;
mod http_connect;
pub mod limits;
pub mod lockfile;
pub mod manifest;
pub mod operator;
mod parts;
pub mod permission;
mod plugin;
mod plugin_calls;
mod pool;
mod ready;
mod refill;
mod registry;
mod reload;
mod result_cache;
pub mod reuse;
mod runtime;
mod sandbox;
mod scratch;
mod shown_args;
pub mod source;
mod source_plugin;
pub mod tasks;
mod tool;
mod watch;

// What nearly every embedder names. The rest is in the public modules
// below, one per concept (as wasmtime-wasi keeps its root to a few
// names and the rest in modules).
/// The newest `toolhost:plugin` version this host has bindings for (what
/// `wit/plugin.wit` declares).
pub use api::latest::VERSION as CONTRACT_VERSION;
pub use builder::RuntimeBuilder;
pub use call::access::Access;
pub use call::{CallContext, StepSink};
pub use error::{CallError, LoadError, RuntimeError};
#[doc(hidden)]
pub use floor::BareWasmtime;
pub use grants::{DirGrant, PluginSettings};
pub use limits::Limits;
pub use permission::Approver;
pub use registry::PluginInfo;
pub use runtime::Runtime;
pub use sandbox::ProgressSink;
pub use source::ToolSource;
pub use tool::{ToolInfo, ToolResult};
/// A result's content blocks, their limits and checks (re-exported from
/// `toolhost-content`).
pub use toolhost_content as content;
pub use toolhost_content::Content;
/// Hooks before and after every call (re-exported from `toolhost-hooks`).
pub use toolhost_hooks as hooks;
/// The permission rules (re-exported from `toolhost-policy`).
pub use toolhost_policy as policy;

/// The plugin contract: its package, the versions this host loads, and
/// what a plugin may declare.
pub mod contract {
    pub use crate::CONTRACT_VERSION as VERSION;
    pub use crate::api::{Annotations, PACKAGE, supported_versions};
    pub use crate::plugin::{DESCRIBE_TIMEOUT, MAX_DESCRIBE_BYTES, MAX_TOOLS, is_valid_tool_name};
    pub use crate::registry::RESERVED_TOOL_NAMES;
}

/// Loading plugins: what a load or a reload reports, what a plugin is and
/// what it was granted.
pub mod load {
    pub use crate::catalog::{LOAD_PROBLEMS_TARGET, LoadFailure, LoadReport, PluginEvent};
    pub use crate::registry::{Granted, PluginInfo, PluginKind, ReadyInfo};
    pub use crate::watch::DEFAULT_DEBOUNCE;
}

/// Caches: compiled components on disk, and results of read-only tools.
pub mod cache {
    pub use crate::cache_settings::{CacheSettings, ToolCacheSettings};
    pub use crate::catalog::DEFAULT_CACHE_GRACE;
    pub use crate::compile_cache::{CacheKey, CacheKeyTooShort, default_cache_dir};
    pub use crate::result_cache::{CacheOptions, CacheStats};
}

/// [`Runtime::explain`]: what a call would meet, without running it.
pub mod explain {
    pub use crate::call::explain::{Explanation, HookMatch, PathGrant, Verdict};
}

/// What the host shows of what a caller or a model sent: names and
/// arguments bounded and made safe to print.
pub mod shown {
    pub use crate::call::named::{MAX_SHOWN_NAME_CHARS, shown_name};
    pub use crate::shown_args::{
        MAX_SHOWN_ARGUMENTS, MAX_SHOWN_VALUE_CHARS, ShownArgument, ShownArguments,
    };
}
