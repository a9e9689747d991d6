//! The permission layer of toolhost: which tool calls are allowed, asked about or denied,
//! which tools the model sees, and whose results the user approves.
//!
//! Pure logic, no WebAssembly. The runtime asks [`Policy::evaluate`] before every tool
//! call (after argument validation, before hooks); the agent loop asks
//! [`Policy::visible`] to drop tools from what the model sees. The model can never change
//! policy: tool arguments are only ever matched against patterns; the policy comes from
//! the policy file, the builder, and the user's answers ([`persist_always_allow`],
//! [`Policy::with_always_allow`], [`SessionToggles`]).
//!
//! # The policy file
//!
//! ```toml
//! # Decision for a call no rule matches: "allow" (the default), "ask" or "deny".
//! default = "allow"
//!
//! # Tools whose results the user approves before the model sees them (globs).
//! approve-results = ["http_get"]
//!
//! # An ask for these tools is answered allow without asking ("allow always" answers
//! # are appended here). Never overrides a deny.
//! always-allow = ["list_dir"]
//!
//! [[rules]]
//! tool = "http_get"          # glob on the tool's exposed name (required)
//! decision = "deny"          # allow, ask or deny (required)
//! reason = "no network in this project"   # optional; shown to the model and the user
//!
//! [[rules]]
//! tool = "read_file"
//! plugin = "fs"              # optional glob on the providing plugin's name
//! decision = "ask"
//!
//! [[rules]]
//! tool = "read_file"
//! decision = "deny"
//! args.path = { path = "/etc/**" }       # path glob, after lexical normalisation
//!
//! [[rules]]
//! tool = "http_get"
//! decision = "allow"
//! args.url = { host = "*.example.com" }  # host pattern on a URL
//!
//! [[rules]]
//! tool = "write_*"
//! decision = "ask"
//! args.path = "*.md"                     # glob on the raw string (same as { glob = "*.md" })
//!
//! [profiles.reviewer]        # for the agent named "reviewer"
//! default = "deny"
//! approve-results = []
//! [[profiles.reviewer.rules]]
//! tool = "read_file"
//! decision = "allow"
//!
//! [plugins.fs]               # capability grants: kept raw for the host (Policy::raw_plugins)
//! dirs = [{ path = ".", access = "read-only" }]
//! ```
//!
//! Any other key is an error. Every error names the file, line and column:
//! `policy.toml:14:12: unknown decision "maybe" (expected allow, ask or deny)`. A file with
//! an error never yields a partly read policy. [`Policy::builder`] builds the same
//! structure in code.
//!
//! # Semantics
//!
//! - **Matching.** A rule matches a call when its `tool` glob matches the tool's name, its
//!   `plugin` glob (if any) matches the providing plugin's name (a tool without a plugin
//!   does not match a rule that has one), and every `args.<key>` pattern matches. The key
//!   is a top-level argument name, or a path into nested objects written quoted with dots
//!   (`args."request.url"`). Strings match; numbers and booleans match a plain glob by
//!   their JSON text; a list matches a deny or ask rule when any element matches and an
//!   allow rule when every element does (and it is not empty). A missing argument, null
//!   or an object does not match.
//! - **Globs.** On names and raw strings, `*` matches any run of characters, `?` one, and
//!   `[...]`, `{a,b}` and `\` escapes work as usual. A path glob (`{ path = ... }`) is
//!   matched against the value after `.`, `..`, repeated and trailing `/` are resolved
//!   lexically (so `/etc/x/../passwd` is `/etc/passwd`); there `*` stays within one
//!   component, `**` crosses components, and `dir/**` also matches `dir` itself. Relative
//!   paths are not resolved against any directory.
//! - **Host patterns** (`{ host = ... }`): `*`, `host` or `*.domain` (subdomains of
//!   `domain` at any depth, not `domain` itself), an optional `:port` (compared with the
//!   URL's port or its scheme's default), optionally `scheme://` first. The URL's real
//!   host is used: `http://example.com@evil.net/` is `evil.net`. A value without a scheme
//!   is read as `http://value`; one with no host does not match.
//! - **Precedence.** Among matching rules deny wins over ask, and ask over allow. No
//!   matching rule: the default.
//! - **Profiles.** For an agent with a profile, the profile's rules are checked first; if
//!   any matches, its result is used (deny over ask over allow among the profile's
//!   matches), otherwise the base rules decide. The default is the profile's `default`
//!   if set, else the base one. A profile's `approve-results`, if set, replaces the base
//!   list for that agent.
//! - **always-allow** turns an ask (from a rule or a default) into allow; a deny stays a
//!   deny.
//! - **Session toggles.** A tool the user switched off for the session
//!   ([`SessionToggles`]) is denied, with a reason saying so, whatever the rules say.
//! - **Visibility.** A tool is hidden from the model when it is denied outright: switched
//!   off in the session, or matched by a deny rule without `args` patterns (that the
//!   agent's profile cannot override), or the applicable default is deny and no allow or
//!   ask rule could match the tool's name. A tool with argument-dependent rules stays
//!   visible.
//! - **Resources and prompts.** A rule with `resource = "GLOB"` (on a resource's URI) or
//!   `prompt = "GLOB"` (on a prompt's name) in place of `tool` decides the reads of an MCP
//!   server's resources and the gets of its prompts, which are judged as calls of
//!   [`READ_RESOURCE`] and [`GET_PROMPT`] (see those); deny wins as for tools.
//!
//! # Example
//!
//! ```
//! use std::path::Path;
//! use serde_json::json;
//! use toolhost_policy::{CallRequest, Decision, Policy, SessionToggles};
//!
//! let policy = Policy::from_toml(
//!     r#"
//!     default = "ask"
//!     always-allow = ["list_dir"]
//!
//!     [[rules]]
//!     tool = "read_file"
//!     decision = "deny"
//!     args.path = { path = "/etc/**" }
//!     reason = "system files are off limits"
//!     "#,
//!     Path::new("policy.toml"),
//! )?;
//! let mut session = SessionToggles::new();
//!
//! let args = json!({"path": "/tmp/../etc/shadow"});
//! let eval = policy.evaluate(&CallRequest::new("read_file", &args), &session);
//! assert_eq!(eval.decision, Decision::Deny);
//! assert_eq!(eval.to_string(),
//!     "deny by rule 1 (read_file, deny) in policy.toml:5: system files are off limits");
//!
//! let none = json!({});
//! assert_eq!(policy.evaluate(&CallRequest::new("list_dir", &none), &session).decision,
//!     Decision::Allow);
//! assert_eq!(policy.evaluate(&CallRequest::new("http_get", &none), &session).decision,
//!     Decision::Ask);
//!
//! session.disable("http_*")?;
//! assert!(!policy.visible("http_get", None, None, &session));
//! assert!(policy.visible("read_file", None, None, &session));
//! # Ok::<(), toolhost_policy::PolicyError>(())
//! ```

#![warn(missing_docs)]

mod access;
pub mod approvals;
mod compile;
mod decision;
mod error;
mod file;
mod paths;
mod pattern;
mod persist;
mod policy;
mod rule;
mod session;

pub use access::{GET_PROMPT, NAME_ARG, READ_RESOURCE, URI_ARG};
pub use compile::PolicyBuilder;
pub use decision::{AskRoute, Decision, UnknownAskRoute, UnknownDecision};
pub use error::PolicyError;
pub use paths::{OpenedArg, PathContext};
pub use pattern::ArgPattern;
pub use persist::persist_always_allow;
pub use policy::{CallRequest, Evaluation, Policy, Source, Standing};
pub use rule::{Profile, Rule};
pub use session::SessionToggles;
