//! # toolhost-hooks
//!
//! Hooks that run before and after every tool call, whatever the path to it
//! (agent loop, `host call`, interactive `/call`, server modes): the runtime
//! calls [`HookChain::run_before`] after validating a call's arguments and
//! [`HookChain::run_after`] once the tool has produced an outcome.
//!
//! Three kinds of hooks implement the [`Hook`] trait:
//!
//! - Rust hooks, written by embedders: implement [`Hook`], or wrap closures
//!   in an [`FnHook`];
//! - [`CommandHook`]s: a program that reads the call as JSON on stdin and
//!   answers with its exit code and stdout (the convention of Claude Code and
//!   Codex hooks; see [`CommandHook`] for the protocol);
//! - hook plugins, sandboxed WebAssembly components, implemented by the
//!   runtime crate (this crate knows nothing of WebAssembly).
//!
//! ## Before the tool runs
//!
//! Each matching hook returns a [`BeforeDecision`]:
//!
//! - `Continue`: run the call (as far as this hook is concerned);
//! - `Rewrite(args)`: run it with other arguments. The next hook sees the
//!   new arguments; the runtime validates the final ones against the tool's
//!   schema again;
//! - `Block { reason }`: do not run it; the reason goes to the model as the
//!   tool's result. The first block stops the chain;
//! - `Ask { reason }`: run it only if the user approves. The chain goes on,
//!   and the asks are collected.
//!
//! The chain's [`BeforeVerdict`] is `Block` if any hook blocked, else `Ask`
//! (every reason, and the rewritten arguments if any) if any hook asked, else
//! `Rewrite` if any hook rewrote, else `Continue`.
//!
//! ## After the tool ran
//!
//! After-hooks see the [`HookOutcome`], failures included (`Err { kind,
//! message }` with kinds such as `timeout` or `invalid-arguments`), and
//! return an [`AfterDecision`]: `Keep`, `Replace` the output and/or the
//! details (the next hook sees the replacement), or `Fail` (the outcome
//! becomes `Err { kind: "hook", message }`; later hooks still run).
//!
//! ## When a call needs approval
//!
//! Hooks configured for the `permission` stage (never by default) run when
//! the policy or a before-hook asks about a call, before anyone is asked,
//! and return a [`PermissionDecision`]: `Allow`, `Deny { reason }` or
//! `Pass`. The first that allows or denies decides; when all pass, the
//! person is asked. A permission hook that fails or times out passes (the
//! person is asked): it can neither let a call through nor stop one by
//! failing. This is how automation answers routine asks (Claude Code's
//! `PermissionRequest` hook).
//!
//! ## Order, matching, time limits, failures
//!
//! Hooks run one at a time in the order configured, each only for the calls
//! its [`Matcher`] selects (globs on tool names and on plugin names) and at
//! the [`Stages`] it is configured for. Each stage of a hook has a timeout.
//! A hook that returns an error or times out is handled by its entry's
//! [`OnError`]: by default a before-hook fails *closed* (the call is blocked,
//! with a reason such as `hook "audit" timed out after 2000 ms`) and an
//! after-hook fails *open* (the outcome is kept); either can be set to
//! [`FailurePolicy::Closed`] or [`FailurePolicy::Open`]. Every hook that ran
//! leaves a serializable [`HookTrace`] (decision, duration, error) for events
//! and history.
//!
//! An empty chain, or one whose hooks do not match the call, allocates
//! nothing and adds about 0.1 µs to a call, before and after together
//! (`cargo bench -p toolhost-hooks`).
//!
//! The chain runs inside a Tokio runtime with the time driver enabled (for
//! the timeouts); command hooks also need its I/O and process support.
//!
//! ## Example
//!
//! ```
//! use std::sync::Arc;
//! use toolhost_hooks::{
//!     AfterDecision, BeforeDecision, BeforeVerdict, FnHook, HookCall, HookChain, HookEntry,
//!     HookOutcome, Matcher, TraceDecision,
//! };
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let chain = HookChain::new(vec![
//!     // Never read private keys.
//!     HookEntry::new(Arc::new(FnHook::before("no-keys", |call| {
//!         match call.args["path"].as_str() {
//!             Some(path) if path.contains("id_rsa") => BeforeDecision::block("private keys are off limits"),
//!             _ => BeforeDecision::Continue,
//!         }
//!     })))
//!     .matcher(Matcher::tools(["read_*"])?),
//!     // Keep outputs short.
//!     HookEntry::new(Arc::new(FnHook::after("truncate", |_, outcome| match outcome {
//!         HookOutcome::Ok { output, .. } if output.len() > 10 => {
//!             AfterDecision::replace_output(format!("{}…", &output[..10]))
//!         }
//!         _ => AfterDecision::Keep,
//!     }))),
//! ]);
//!
//! let args = serde_json::json!({"path": "/home/me/.ssh/id_rsa"});
//! let call = HookCall::new("read_file", &args).plugin("fs", "0.1.0").call_id("call_1");
//! let before = chain.run_before(&call).await;
//! assert!(matches!(before.decision, BeforeVerdict::Block { ref hook, .. } if hook == "no-keys"));
//!
//! let args = serde_json::json!({"path": "README.md"});
//! let call = HookCall::new("read_file", &args).plugin("fs", "0.1.0").call_id("call_2");
//! assert_eq!(chain.run_before(&call).await.decision, BeforeVerdict::Continue);
//! let after = chain.run_after(&call, HookOutcome::ok("# toolhost\n\nA host for…")).await;
//! assert_eq!(after.outcome, HookOutcome::ok("# toolhost…"));
//! assert_eq!(after.trace[0].decision, TraceDecision::Replace);
//! # Ok(()) }
//! ```
//!
//! From a configuration file, see [`HookConfig`] and [`build_chain`].

#![warn(missing_docs)]

mod chain;
mod command;
mod config;
mod decision;
mod hook;
mod matcher;
mod stage;

pub use chain::{
    AfterReport, BeforeReport, BeforeVerdict, DEFAULT_TIMEOUT, FailurePolicy, HOOK_FAILURE_KIND,
    HookChain, HookEntry, HookTrace, OnError, PermissionReport, PermissionVerdict,
};
pub use command::{
    BLOCK_EXIT_CODE, CommandHook, DEFAULT_MAX_OUTPUT, Finished, GroupKiller, Program, run_program,
};
pub use config::{ConfigError, HookConfig, HookKind, build_chain};
pub use decision::{TraceDecision, UnknownDecision};
pub use hook::{
    AfterDecision, BeforeDecision, FnHook, Hook, HookCall, HookError, HookFuture, HookOutcome,
    PermissionDecision,
};
pub use matcher::{Matcher, MatcherError};
pub use stage::{Stage, Stages};
