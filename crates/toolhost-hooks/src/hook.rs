//! The [`Hook`] trait and the values that flow through it.

use std::fmt;

use serde_json::Value;

use crate::decision::TraceDecision;
use crate::stage::Stages;
use toolhost_content::ErrorKind;

/// The future a [`Hook`] returns: boxed, `Send`, borrowing the hook and the
/// call for `'a`. The same type as `futures::future::BoxFuture<'a, Result<T, HookError>>`.
pub type HookFuture<'a, T> = futures::future::BoxFuture<'a, Result<T, HookError>>;

/// One tool call as hooks see it.
///
/// Every field borrows from the caller, so building one per call allocates
/// nothing. `tool` is the name the model calls the tool by (after any
/// renaming on a clash), `plugin` and `plugin_version` say which plugin
/// provides it.
///
/// ```
/// use toolhost_hooks::HookCall;
///
/// let args = serde_json::json!({"path": "README.md"});
/// let call = HookCall::new("read_file", &args)
///     .plugin("fs", "0.1.0")
///     .call_id("call_1")
///     .session_id(Some("s1"));
/// assert_eq!(call.tool, "read_file");
/// assert_eq!(call.agent, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HookCall<'a> {
    /// The tool's exposed name.
    pub tool: &'a str,
    /// The name its plugin declared, when a clash exposes it under another
    /// (`read_file` for `fs__read_file`); matchers match either.
    pub declared: Option<&'a str>,
    /// The plugin that provides the tool.
    pub plugin: &'a str,
    /// That plugin's version.
    pub plugin_version: &'a str,
    /// The arguments, already validated against the tool's schema.
    pub args: &'a Value,
    /// The id of this call.
    pub call_id: &'a str,
    /// The session the call belongs to, if any.
    pub session_id: Option<&'a str>,
    /// The agent profile making the call, if any.
    pub agent: Option<&'a str>,
    /// Who is calling, when a client is (an MCP caller: `token:…` for a
    /// static bearer token, `oauth:SUBJECT` for an OAuth caller); never a
    /// secret.
    pub client: Option<&'a str>,
}

impl<'a> HookCall<'a> {
    /// A call of `tool` with `args`; every other field is empty.
    pub fn new(tool: &'a str, args: &'a Value) -> Self {
        Self {
            tool,
            declared: None,
            plugin: "",
            plugin_version: "",
            args,
            call_id: "",
            session_id: None,
            agent: None,
            client: None,
        }
    }

    /// Sets the plugin and its version.
    pub fn plugin(mut self, plugin: &'a str, version: &'a str) -> Self {
        self.plugin = plugin;
        self.plugin_version = version;
        self
    }

    /// Sets the name the tool's plugin declared (kept only when it differs
    /// from the exposed name).
    pub fn declared(mut self, declared: &'a str) -> Self {
        self.declared = (declared != self.tool).then_some(declared);
        self
    }

    /// Sets the call id.
    pub fn call_id(mut self, call_id: &'a str) -> Self {
        self.call_id = call_id;
        self
    }

    /// Sets the session id.
    pub fn session_id(mut self, session_id: Option<&'a str>) -> Self {
        self.session_id = session_id;
        self
    }

    /// Sets the agent profile.
    pub fn agent(mut self, agent: Option<&'a str>) -> Self {
        self.agent = agent;
        self
    }

    /// Sets who is calling (see [`HookCall::client`]).
    pub fn client(mut self, client: Option<&'a str>) -> Self {
        self.client = client;
        self
    }

    /// The same call with other arguments (what the next hook sees after a
    /// [`BeforeDecision::Rewrite`]).
    ///
    /// ```
    /// # use toolhost_hooks::HookCall;
    /// let args = serde_json::json!({"path": "a"});
    /// let call = HookCall::new("read_file", &args).call_id("c1");
    /// let new_args = serde_json::json!({"path": "b"});
    /// let next = call.with_args(&new_args);
    /// assert_eq!(next.args["path"], "b");
    /// assert_eq!(next.call_id, "c1");
    /// ```
    pub fn with_args<'b>(&self, args: &'b Value) -> HookCall<'b>
    where
        'a: 'b,
    {
        HookCall { args, ..*self }
    }
}

/// What a before-hook decides about a call.
///
/// ```
/// use toolhost_hooks::BeforeDecision;
///
/// let decision = BeforeDecision::block("writing outside the project");
/// assert_eq!(decision.summary().to_string(), "block: writing outside the project");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeDecision {
    /// Run the call as it is.
    Continue,
    /// Run the call with these arguments instead. The runtime validates them
    /// against the tool's schema again before it runs the tool.
    Rewrite(Value),
    /// Do not run the call; `reason` goes to the model as the tool result.
    Block {
        /// Why, written for the model.
        reason: String,
    },
    /// Run the call only if the user approves; `reason` is shown to them.
    Ask {
        /// Why, written for the user.
        reason: String,
    },
}

impl BeforeDecision {
    /// [`BeforeDecision::Block`] with `reason`.
    pub fn block(reason: impl Into<String>) -> Self {
        Self::Block {
            reason: reason.into(),
        }
    }

    /// [`BeforeDecision::Ask`] with `reason`.
    pub fn ask(reason: impl Into<String>) -> Self {
        Self::Ask {
            reason: reason.into(),
        }
    }

    /// What a trace records of this decision: `continue`, `rewrite`,
    /// `block: REASON` or `ask: REASON`.
    pub fn summary(&self) -> TraceDecision {
        match self {
            Self::Continue => TraceDecision::Continue,
            Self::Rewrite(_) => TraceDecision::Rewrite,
            Self::Block { reason } => TraceDecision::Block {
                reason: reason.clone(),
            },
            Self::Ask { reason } => TraceDecision::Ask {
                reason: reason.clone(),
            },
        }
    }
}

impl From<BeforeDecision> for Result<BeforeDecision, HookError> {
    fn from(decision: BeforeDecision) -> Self {
        Ok(decision)
    }
}

/// What a tool call produced, as after-hooks see it.
///
/// ```
/// use toolhost_content::ErrorKind;
/// use toolhost_hooks::HookOutcome;
///
/// let ok = HookOutcome::ok("3 files");
/// assert!(ok.is_ok());
/// let err = HookOutcome::err(ErrorKind::SandboxFault, "the tool ran out of time");
/// assert_eq!(err.kind(), Some(&ErrorKind::SandboxFault));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome {
    /// The tool succeeded.
    Ok {
        /// The text the model reads.
        output: String,
        /// Data for user interfaces and logs (never for the model).
        details: Option<Value>,
        /// The structured result (MCP's `structuredContent`, contract
        /// 0.2.0+), which programs and some models read.
        structured: Option<Value>,
        /// The result as content blocks (MCP's `content`: images, audio,
        /// resources, and the text; contract 0.3.0+ and MCP servers).
        /// Empty: the result is `output` alone.
        content: Vec<toolhost_content::Content>,
    },
    /// The call failed (in the tool, in the sandbox, or in a hook).
    Err {
        /// What kind of failure, e.g. `sandbox-fault`, `invalid-arguments`,
        /// or `hook` when an after-hook failed the call.
        kind: ErrorKind,
        /// The message the model reads.
        message: String,
    },
}

impl HookOutcome {
    /// A success with `output`, no details and no structured result.
    pub fn ok(output: impl Into<String>) -> Self {
        Self::Ok {
            output: output.into(),
            details: None,
            structured: None,
            content: Vec::new(),
        }
    }

    /// A failure of `kind` with `message`.
    pub fn err(kind: impl Into<ErrorKind>, message: impl Into<String>) -> Self {
        Self::Err {
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        matches!(self, Self::Ok { .. })
    }

    /// The failure's kind, if it failed.
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            Self::Ok { .. } => None,
            Self::Err { kind, .. } => Some(kind),
        }
    }
}

/// What an after-hook decides about a call's outcome.
///
/// ```
/// use toolhost_hooks::{AfterDecision, TraceDecision};
///
/// // Replace the output, keep the details.
/// let decision = AfterDecision::replace_output("[redacted]");
/// assert_eq!(decision.summary(), TraceDecision::Replace);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum AfterDecision {
    /// Keep the outcome as it is.
    Keep,
    /// Replace the output, the details, the structured result and/or the
    /// content. `None` keeps that part; `Some(None)` removes the details or
    /// the structured result. The runtime checks a replaced structured
    /// result against the tool's output schema again, and replaced content
    /// against its limits.
    ///
    /// Output and content stay in step, so that a rewrite reaches the model
    /// and every client alike: a new output without new content replaces
    /// the content's text (its text blocks and embedded text resources
    /// become one text block of the new output,
    /// [`toolhost_content::with_text`]); new content without a new output
    /// makes the output its text ([`toolhost_content::text_of`]). Content
    /// equal to what the hook was given counts as not replaced.
    ///
    /// On a failed outcome, a `Some` output turns it into a success with that
    /// output (and the given details, structured result and content, or
    /// none); without an output the failure is kept.
    Replace {
        /// The new output, or `None` to keep it.
        output: Option<String>,
        /// The new details, or `None` to keep them.
        details: Option<Option<Value>>,
        /// The new structured result, or `None` to keep it.
        structured: Option<Option<Value>>,
        /// The new content blocks, or `None` to keep them.
        content: Option<Vec<toolhost_content::Content>>,
    },
    /// Turn the outcome into a failure of kind `hook` with this message.
    Fail {
        /// The message the model reads.
        message: String,
    },
}

impl AfterDecision {
    /// [`AfterDecision::Replace`] of the output only.
    pub fn replace_output(output: impl Into<String>) -> Self {
        Self::Replace {
            output: Some(output.into()),
            details: None,
            structured: None,
            content: None,
        }
    }

    /// [`AfterDecision::Fail`] with `message`.
    pub fn fail(message: impl Into<String>) -> Self {
        Self::Fail {
            message: message.into(),
        }
    }

    /// What a trace records of this decision: `keep`, `replace` or
    /// `fail: MESSAGE`.
    pub fn summary(&self) -> TraceDecision {
        match self {
            Self::Keep => TraceDecision::Keep,
            Self::Replace { .. } => TraceDecision::Replace,
            Self::Fail { message } => TraceDecision::Fail {
                message: message.clone(),
            },
        }
    }
}

impl From<AfterDecision> for Result<AfterDecision, HookError> {
    fn from(decision: AfterDecision) -> Self {
        Ok(decision)
    }
}

/// Why a hook could not decide. The chain handles it by the entry's
/// [`FailurePolicy`](crate::FailurePolicy).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookError {
    /// The hook failed for a reason of its own.
    #[error("{0}")]
    Failed(String),
    /// A command hook's program could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// A command hook's program exited with a status other than 0 or 2.
    #[error("{}", exit_message(*.code, stderr))]
    Exit {
        /// The exit code, or `None` when a signal ended it.
        code: Option<i32>,
        /// What it wrote on stderr (trimmed, bounded).
        stderr: String,
    },
    /// A command hook's program wrote something that is not a valid reply.
    #[error("invalid reply: {0}")]
    InvalidReply(String),
    /// Talking to a command hook's program failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The hook the entry names is not there to run: a hook plugin that is
    /// not loaded, or a plugin that is not the code the binding follows.
    /// Always fails closed, whatever the entry's `on-error` says: a hook
    /// that was configured must never be skipped silently because something
    /// else took its name.
    #[error("{0}")]
    Unavailable(String),
}

impl HookError {
    /// [`HookError::Failed`] with `message`.
    ///
    /// ```
    /// # use toolhost_hooks::HookError;
    /// assert_eq!(HookError::msg("audit log is full").to_string(), "audit log is full");
    /// ```
    pub fn msg(message: impl fmt::Display) -> Self {
        Self::Failed(message.to_string())
    }
}

fn exit_message(code: Option<i32>, stderr: &str) -> String {
    let status = match code {
        Some(code) => format!("exited with code {code}"),
        None => "was killed by a signal".to_owned(),
    };
    if stderr.is_empty() {
        status
    } else {
        format!("{status}: {stderr}")
    }
}

/// A hook's answer when a call needs approval (stage
/// [`Permission`](crate::Stage::Permission)), before anyone is asked.
///
/// ```
/// use toolhost_hooks::{PermissionDecision, TraceDecision};
/// let d = PermissionDecision::Deny { reason: "not on Fridays".into() };
/// assert_eq!(d.summary(), TraceDecision::Deny { reason: "not on Fridays".into() });
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionDecision {
    /// Allow the call without asking anyone.
    Allow {
        /// Why, for the record.
        reason: Option<String>,
    },
    /// Deny it without asking anyone; `reason` goes to the model.
    Deny {
        /// Why.
        reason: String,
    },
    /// No opinion: the next permission hook, then the person, decides.
    Pass,
}

impl PermissionDecision {
    /// What the trace records.
    pub fn summary(&self) -> TraceDecision {
        match self {
            PermissionDecision::Allow { reason } => TraceDecision::Allow {
                reason: reason.clone(),
            },
            PermissionDecision::Deny { reason } => TraceDecision::Deny {
                reason: reason.clone(),
            },
            PermissionDecision::Pass => TraceDecision::Pass,
        }
    }
}

/// Code that runs before and after tool calls.
///
/// Implement [`before`](Hook::before), [`after`](Hook::after) or both; the
/// defaults continue and keep. A hook only sees the calls its
/// [`HookEntry`](crate::HookEntry)'s matcher selects, under that entry's
/// timeout (the chain drops the future when it runs out). For a hook written
/// as a closure, see [`FnHook`].
///
/// ```
/// use toolhost_hooks::{BeforeDecision, Hook, HookCall, HookFuture};
///
/// /// Blocks every call on Sundays (here: always, to keep the example short).
/// struct Sabbath;
///
/// impl Hook for Sabbath {
///     fn name(&self) -> &str {
///         "sabbath"
///     }
///     fn before<'a>(&'a self, call: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
///         Box::pin(async move {
///             Ok(BeforeDecision::block(format!("no {} today", call.tool)))
///         })
///     }
/// }
/// ```
pub trait Hook: Send + Sync {
    /// The hook's name, for traces, logs and block reasons.
    fn name(&self) -> &str;

    /// The stages the hook takes part in (default both). The chain skips it
    /// at the others, whatever its entry says, so a hook that only guards
    /// calls costs nothing after them.
    fn stages(&self) -> Stages {
        Stages::BOTH
    }

    /// Decides whether and how a call runs.
    fn before<'a>(&'a self, call: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
        let _ = call;
        Box::pin(std::future::ready(Ok(BeforeDecision::Continue)))
    }

    /// Answers for the person when the call needs approval (only for hooks
    /// whose [`stages`](Self::stages) include `permission`); `reasons` are
    /// why it is asked (the policy's rule, a before-hook's ask).
    fn permission<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        reasons: &'a [String],
    ) -> HookFuture<'a, PermissionDecision> {
        let _ = (call, reasons);
        Box::pin(std::future::ready(Ok(PermissionDecision::Pass)))
    }

    /// Decides what becomes of a call's outcome. Runs for failures too.
    fn after<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        outcome: &'a HookOutcome,
    ) -> HookFuture<'a, AfterDecision> {
        let _ = (call, outcome);
        Box::pin(std::future::ready(Ok(AfterDecision::Keep)))
    }
}

type BeforeFn = dyn Fn(&HookCall<'_>) -> Result<BeforeDecision, HookError> + Send + Sync;
type AfterFn =
    dyn Fn(&HookCall<'_>, &HookOutcome) -> Result<AfterDecision, HookError> + Send + Sync;

/// A [`Hook`] made of closures, for embedders.
///
/// The closures return a decision, or a `Result` of one when they can fail.
/// They run synchronously on the runtime's task, so keep them quick; for
/// anything slow implement [`Hook`] with an async body instead.
///
/// ```
/// use std::sync::Arc;
/// use toolhost_hooks::{AfterDecision, BeforeDecision, FnHook, HookChain, HookEntry, HookError};
///
/// let no_rm = FnHook::before("no-rm", |call| {
///     if call.args["command"].as_str().is_some_and(|c| c.contains("rm -rf")) {
///         BeforeDecision::block("rm -rf is not allowed")
///     } else {
///         BeforeDecision::Continue
///     }
/// });
/// let shout = FnHook::after("shout", |_call, outcome| match outcome {
///     toolhost_hooks::HookOutcome::Ok { output, .. } => {
///         Ok::<_, HookError>(AfterDecision::replace_output(output.to_uppercase()))
///     }
///     _ => Ok(AfterDecision::Keep),
/// });
/// let both = FnHook::new("log")
///     .on_before(|call| {
///         tracing::info!(tool = call.tool, "calling");
///         BeforeDecision::Continue
///     })
///     .on_after(|_, _| AfterDecision::Keep);
/// let chain = HookChain::new(vec![
///     HookEntry::new(Arc::new(no_rm)),
///     HookEntry::new(Arc::new(shout)),
///     HookEntry::new(Arc::new(both)),
/// ]);
/// assert_eq!(chain.len(), 3);
/// ```
pub struct FnHook {
    name: String,
    before: Option<Box<BeforeFn>>,
    after: Option<Box<AfterFn>>,
}

impl FnHook {
    /// A hook named `name` that continues and keeps (add closures with
    /// [`on_before`](Self::on_before) and [`on_after`](Self::on_after)).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            before: None,
            after: None,
        }
    }

    /// A hook named `name` that runs `f` before each call.
    pub fn before<F, R>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&HookCall<'_>) -> R + Send + Sync + 'static,
        R: Into<Result<BeforeDecision, HookError>>,
    {
        Self::new(name).on_before(f)
    }

    /// A hook named `name` that runs `f` after each call.
    pub fn after<F, R>(name: impl Into<String>, f: F) -> Self
    where
        F: Fn(&HookCall<'_>, &HookOutcome) -> R + Send + Sync + 'static,
        R: Into<Result<AfterDecision, HookError>>,
    {
        Self::new(name).on_after(f)
    }

    /// Runs `f` before each call.
    pub fn on_before<F, R>(mut self, f: F) -> Self
    where
        F: Fn(&HookCall<'_>) -> R + Send + Sync + 'static,
        R: Into<Result<BeforeDecision, HookError>>,
    {
        self.before = Some(Box::new(move |call| f(call).into()));
        self
    }

    /// Runs `f` after each call.
    pub fn on_after<F, R>(mut self, f: F) -> Self
    where
        F: Fn(&HookCall<'_>, &HookOutcome) -> R + Send + Sync + 'static,
        R: Into<Result<AfterDecision, HookError>>,
    {
        self.after = Some(Box::new(move |call, outcome| f(call, outcome).into()));
        self
    }
}

impl fmt::Debug for FnHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnHook")
            .field("name", &self.name)
            .field("before", &self.before.is_some())
            .field("after", &self.after.is_some())
            .finish()
    }
}

impl Hook for FnHook {
    fn name(&self) -> &str {
        &self.name
    }

    /// The stages it has a closure for.
    fn stages(&self) -> Stages {
        Stages {
            before: self.before.is_some(),
            after: self.after.is_some(),
            permission: false,
        }
    }

    fn before<'a>(&'a self, call: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
        let result = match &self.before {
            Some(f) => f(call),
            None => Ok(BeforeDecision::Continue),
        };
        Box::pin(std::future::ready(result))
    }

    fn after<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        outcome: &'a HookOutcome,
    ) -> HookFuture<'a, AfterDecision> {
        let result = match &self.after {
            Some(f) => f(call, outcome),
            None => Ok(AfterDecision::Keep),
        };
        Box::pin(std::future::ready(result))
    }
}
