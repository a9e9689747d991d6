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

#[cfg(feature = "agent")]
mod agent_tools;
mod api;
mod builder;
mod cache_settings;
mod call;
mod catalog;
mod compile_cache;
mod engine;
mod error;
pub mod failures;
mod floor;
mod gate;
mod grants;
mod hook_plugin;
mod http;
mod http_connect;
mod limits;
mod lockfile;
mod manifest;
pub mod operator;
mod parts;
mod permission;
mod plugin;
mod pool;
#[cfg(feature = "agent")]
mod read_var;
mod ready;
mod refill;
mod registry;
mod reload;
mod result_cache;
mod reuse;
mod runtime;
mod sandbox;
mod scratch;
mod shown_args;
mod source;
mod source_plugin;
mod watch;

/// The newest `toolhost:plugin` version this host has bindings for (what
/// `wit/plugin.wit` declares).
pub use api::latest::VERSION as CONTRACT_VERSION;
pub use api::{Annotations, PACKAGE as CONTRACT_PACKAGE, supported_versions};
pub use builder::RuntimeBuilder;
pub use cache_settings::{CacheSettings, ToolCacheSettings};
pub use call::access::Access;
pub use call::explain::{Explanation, HookMatch, PathGrant, Verdict};
pub use call::named::{MAX_SHOWN_NAME_CHARS, shown_name};
pub use call::nested::CallBounds;
pub use call::watch::{CallEvent, CallPhase, StepTiming};
pub use call::{CallContext, StepSink, ToolResult};
pub use catalog::{
    DEFAULT_CACHE_GRACE, LOAD_PROBLEMS_TARGET, LoadFailure, LoadReport, PluginEvent,
};
pub use compile_cache::default_cache_dir;
pub use engine::{EPOCH_TICK, EngineSettings, settle_before_fork};
pub use error::{ArgumentIssue, CallError, LoadError, RuntimeError, SandboxFault, ToolErrorKind};
#[doc(hidden)]
pub use floor::BareWasmtime;
pub use grants::{DirAccess, DirGrant, HostPattern, HostPatternError, PluginSettings};
pub use limits::{LimitOverrides, Limits};
pub use lockfile::{
    GrantState, InstallRecord, LockEntry, LockError, default_lock_file, digest_of, lock_entry,
    record_install,
};
pub use manifest::{Capabilities, DirRequest, Manifest, ToolManifest};
pub use permission::{
    ApprovalAnswer, ApprovalFuture, ApprovalOf, Approver, CallApproval, CallApprovalRequest,
    CallStep, FormAnswer, FormRequest, ResultApproval, ResultApprovalRequest,
};
pub use plugin::{DESCRIBE_TIMEOUT, MAX_DESCRIBE_BYTES, MAX_TOOLS, is_valid_tool_name};
#[cfg(feature = "agent")]
pub use read_var::{BUILTIN_SOURCE, read_var_source};
pub use registry::{Granted, PluginInfo, PluginKind, RESERVED_TOOL_NAMES, ReadyInfo, ToolInfo};
pub use result_cache::{CacheOptions, CacheStats};
pub use reuse::ReusedInstance;
pub use runtime::Runtime;
pub use sandbox::ProgressSink;
pub use shown_args::{MAX_SHOWN_ARGUMENTS, MAX_SHOWN_VALUE_CHARS, ShownArgument, ShownArguments};
pub use source::{
    SourceCall, SourceError, SourceFuture, SourceOutcome, SourceProgress, SourceState,
    SourceStatus, SourceTool, ToolSource,
};
/// A result's content blocks, their limits and checks (re-exported from
/// `toolhost-content`).
pub use toolhost_content as content;
pub use toolhost_content::Content;
/// Hooks before and after every call (re-exported from `toolhost-hooks`).
pub use toolhost_hooks as hooks;
pub use toolhost_hooks::ErrorKind;
/// The permission rules (re-exported from `toolhost-policy`).
pub use toolhost_policy as policy;
pub use watch::DEFAULT_DEBOUNCE;
