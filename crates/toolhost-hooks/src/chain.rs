//! The ordered list of hooks that runs around every tool call.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::Instant;

use crate::decision::TraceDecision;
use crate::hook::{
    AfterDecision, BeforeDecision, Hook, HookCall, HookError, HookOutcome, PermissionDecision,
};
use crate::matcher::Matcher;
use crate::stage::{Stage, Stages};
use toolhost_content::ErrorKind;

/// The timeout of a hook unless configured otherwise: 5 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The failure kind an after-hook's [`AfterDecision::Fail`] (or a failing
/// hook under [`FailurePolicy::Closed`]) gives the outcome.
pub const HOOK_FAILURE_KIND: ErrorKind = ErrorKind::Hook;

/// What the chain does when a hook fails (returns an error or times out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailurePolicy {
    /// Fail closed: before the tool, block the call; after it, fail the
    /// outcome.
    Closed,
    /// Fail open: before the tool, continue; after it, keep the outcome.
    /// The failure is still recorded in the trace and logged.
    Open,
}

/// The failure policy of an entry, per stage.
///
/// The default fails closed before the tool (a broken guard must not let
/// calls through) and open after it (a broken logger must not lose results).
///
/// ```
/// use toolhost_hooks::{FailurePolicy, OnError};
/// let default = OnError::default();
/// assert_eq!(default.before, FailurePolicy::Closed);
/// assert_eq!(default.after, FailurePolicy::Open);
/// assert_eq!(OnError::both(FailurePolicy::Open).before, FailurePolicy::Open);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OnError {
    /// Policy for a failing before-hook.
    pub before: FailurePolicy,
    /// Policy for a failing after-hook.
    pub after: FailurePolicy,
}

impl OnError {
    /// The same policy at both stages.
    pub const fn both(policy: FailurePolicy) -> Self {
        Self {
            before: policy,
            after: policy,
        }
    }
}

/// `Some(Closed)` when the result says the hook was not there to run
/// ([`HookError::Unavailable`]); `None` to go by the entry's `on-error`.
fn closed_if_unavailable<T>(
    result: &Result<Result<T, HookError>, tokio::time::error::Elapsed>,
) -> Option<FailurePolicy> {
    matches!(result, Ok(Err(HookError::Unavailable(_)))).then_some(FailurePolicy::Closed)
}

impl Default for OnError {
    fn default() -> Self {
        Self {
            before: FailurePolicy::Closed,
            after: FailurePolicy::Open,
        }
    }
}

/// One hook in a [`HookChain`], with which calls it sees and how long it
/// may take.
///
/// ```
/// use std::{sync::Arc, time::Duration};
/// use toolhost_hooks::{BeforeDecision, FailurePolicy, FnHook, HookEntry, Matcher, OnError, Stages};
///
/// let entry = HookEntry::new(Arc::new(FnHook::before("guard", |_| BeforeDecision::Continue)))
///     .matcher(Matcher::tools(["write_*"])?)
///     .stages(Stages::BEFORE)
///     .timeout(Duration::from_millis(500))
///     .on_error(OnError::both(FailurePolicy::Open));
/// assert_eq!(entry.timeout, Duration::from_millis(500));
/// # Ok::<(), toolhost_hooks::MatcherError>(())
/// ```
#[derive(Clone)]
pub struct HookEntry {
    /// The hook.
    pub hook: Arc<dyn Hook>,
    /// The calls it sees.
    pub matcher: Matcher,
    /// The stages it runs at.
    pub stages: Stages,
    /// How long one stage of it may take; past that, it counts as failed.
    pub timeout: Duration,
    /// What a failure does.
    pub on_error: OnError,
}

impl HookEntry {
    /// `hook` for every call, at the stages it takes part in
    /// ([`Hook::stages`]: before and after unless it says otherwise), with
    /// [`DEFAULT_TIMEOUT`] and the default [`OnError`].
    pub fn new(hook: Arc<dyn Hook>) -> Self {
        Self {
            hook,
            matcher: Matcher::any(),
            stages: Stages::ALL,
            timeout: DEFAULT_TIMEOUT,
            on_error: OnError::default(),
        }
    }

    /// Sets the matcher.
    pub fn matcher(mut self, matcher: Matcher) -> Self {
        self.matcher = matcher;
        self
    }

    /// Sets the stages.
    pub fn stages(mut self, stages: Stages) -> Self {
        self.stages = stages;
        self
    }

    /// Sets the timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the failure policy.
    pub fn on_error(mut self, on_error: OnError) -> Self {
        self.on_error = on_error;
        self
    }

    #[inline]
    fn applies(&self, stage: Stage, call: &HookCall<'_>) -> bool {
        self.stages.contains(stage)
            && self
                .matcher
                .matches_declared(call.tool, call.declared, call.plugin)
    }
}

impl std::fmt::Debug for HookEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookEntry")
            .field("hook", &self.hook.name())
            .field("matcher", &self.matcher)
            .field("stages", &self.stages)
            .field("timeout", &self.timeout)
            .field("on_error", &self.on_error)
            .finish()
    }
}

/// What one hook did, for events and history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookTrace {
    /// The hook's name.
    pub hook: String,
    /// The stage it ran at.
    pub stage: Stage,
    /// What it decided, in short: `continue`, `rewrite`, `block: REASON`,
    /// `ask: REASON`, `keep`, `replace`, `fail: MESSAGE`. For a failed hook,
    /// what its failure policy made of it.
    pub decision: TraceDecision,
    /// How long it took (serialized as `duration_ms`, a float).
    #[serde(rename = "duration_ms", with = "millis")]
    pub duration: Duration,
    /// Why it failed, if it did (an error, or `timed out after N ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1000.0).map_err(serde::de::Error::custom)
    }
}

/// The chain's decision before a call.
#[derive(Debug, Clone, PartialEq)]
pub enum BeforeVerdict {
    /// Run the call as it is.
    Continue,
    /// Run the call with these arguments (validate them against the tool's
    /// schema again first).
    Rewrite(Value),
    /// Do not run the call; `reason` goes to the model.
    Block {
        /// The hook that blocked.
        hook: String,
        /// Why (for a failed hook: `hook "NAME" timed out after N ms` or
        /// `hook "NAME" failed: ERROR`).
        reason: String,
    },
    /// Run the call only if the user approves.
    Ask {
        /// Every asking hook's reason, in chain order.
        reasons: Vec<String>,
        /// The rewritten arguments, if a hook rewrote them (validate them
        /// again before running the call).
        args: Option<Value>,
    },
}

impl BeforeVerdict {
    /// The reasons of an [`Ask`](Self::Ask) joined with `"; "`, or the
    /// reason of a [`Block`](Self::Block).
    ///
    /// ```
    /// # use toolhost_hooks::BeforeVerdict;
    /// let ask = BeforeVerdict::Ask { reasons: vec!["a".into(), "b".into()], args: None };
    /// assert_eq!(ask.reason().as_deref(), Some("a; b"));
    /// assert_eq!(BeforeVerdict::Continue.reason(), None);
    /// ```
    pub fn reason(&self) -> Option<String> {
        match self {
            Self::Continue | Self::Rewrite(_) => None,
            Self::Block { reason, .. } => Some(reason.clone()),
            Self::Ask { reasons, .. } => Some(reasons.join("; ")),
        }
    }
}

/// The chain's decision when a call needs approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionVerdict {
    /// A hook allowed it: nobody is asked.
    Allow {
        /// The hook.
        hook: String,
        /// Its reason, if it gave one.
        reason: Option<String>,
    },
    /// A hook denied it: nobody is asked, and the call does not run.
    Deny {
        /// The hook.
        hook: String,
        /// Why (goes to the model).
        reason: String,
    },
    /// No hook decided: ask the person.
    Pass,
}

/// What [`HookChain::run_permission`] decided, and what each hook did.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionReport {
    /// The decision.
    pub decision: PermissionVerdict,
    /// One entry per hook that ran, in order.
    pub trace: Vec<HookTrace>,
}

/// What [`HookChain::run_before`] decided, and what each hook did.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeReport {
    /// The decision.
    pub decision: BeforeVerdict,
    /// One entry per hook that ran, in order.
    pub trace: Vec<HookTrace>,
}

/// The outcome after [`HookChain::run_after`], and what each hook did.
#[derive(Debug, Clone, PartialEq)]
pub struct AfterReport {
    /// The final outcome, after every replacement or failure.
    pub outcome: HookOutcome,
    /// One entry per hook that ran, in order.
    pub trace: Vec<HookTrace>,
    /// Whether a hook put a structured result of its own in the outcome (the
    /// caller checks it against the tool's output schema again).
    pub structured_replaced: bool,
    /// Whether a hook put content blocks of its own in the outcome (the
    /// caller checks them against its limits again).
    pub content_replaced: bool,
}

/// The hooks that run around every tool call, in the order configured.
///
/// See the [crate documentation](crate) for the semantics.
///
/// ```
/// use std::sync::Arc;
/// use toolhost_hooks::{BeforeDecision, BeforeVerdict, FnHook, HookCall, HookChain, HookEntry};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let chain = HookChain::new(vec![HookEntry::new(Arc::new(FnHook::before("ask", |_| {
///     BeforeDecision::ask("this tool spends money")
/// })))]);
/// let args = serde_json::json!({});
/// let report = chain.run_before(&HookCall::new("buy", &args)).await;
/// assert_eq!(
///     report.decision,
///     BeforeVerdict::Ask { reasons: vec!["this tool spends money".into()], args: None }
/// );
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct HookChain {
    entries: Vec<HookEntry>,
    any_before: bool,
    any_after: bool,
    any_permission: bool,
}

impl HookChain {
    /// An empty chain: every call continues and keeps its outcome.
    pub const fn empty() -> Self {
        Self {
            entries: Vec::new(),
            any_before: false,
            any_after: false,
            any_permission: false,
        }
    }

    /// A chain of `entries`, run in this order.
    pub fn new(entries: Vec<HookEntry>) -> Self {
        let mut chain = Self::empty();
        for entry in entries {
            chain.push(entry);
        }
        chain
    }

    /// Appends `entry` at the end. Its stages become those both the entry
    /// and the hook ([`Hook::stages`]) take part in.
    pub fn push(&mut self, mut entry: HookEntry) {
        entry.stages = entry.stages.intersect(entry.hook.stages());
        self.any_before |= entry.stages.before;
        self.any_after |= entry.stages.after;
        self.any_permission |= entry.stages.permission;
        self.entries.push(entry);
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[HookEntry] {
        &self.entries
    }

    /// How many entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any hook would run before or after a call of `tool` from
    /// `plugin`; `declared` is the name the plugin declared when a clash
    /// exposes the tool under another.
    pub fn matches(&self, tool: &str, declared: Option<&str>, plugin: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.matcher.matches_declared(tool, declared, plugin))
    }

    /// Runs the before-hooks that match `call`, in order.
    ///
    /// A rewrite passes the new arguments to the next hook; the first block
    /// stops the chain; asks are collected and the chain goes on. A hook
    /// that fails or times out is handled by its entry's
    /// [`OnError::before`]. With no matching hook this allocates nothing.
    pub async fn run_before(&self, call: &HookCall<'_>) -> BeforeReport {
        let mut report = BeforeReport {
            decision: BeforeVerdict::Continue,
            trace: Vec::new(),
        };
        if !self.any_before {
            return report;
        }
        let mut args: Option<Value> = None;
        let mut asks: Vec<String> = Vec::new();
        for entry in &self.entries {
            if !entry.applies(Stage::Before, call) {
                continue;
            }
            let name = entry.hook.name();
            let current = match &args {
                Some(args) => call.with_args(args),
                None => *call,
            };
            let started = Instant::now();
            let result = within(entry.timeout, entry.hook.before(&current)).await;
            let duration = started.elapsed();
            let unavailable = closed_if_unavailable(&result);
            let mut trace = HookTrace {
                hook: name.to_owned(),
                stage: Stage::Before,
                decision: TraceDecision::Continue,
                duration,
                error: None,
            };
            match flatten(result, entry.timeout) {
                Ok(decision) => {
                    trace.decision = decision.summary();
                    tracing::debug!(hook = name, tool = call.tool, decision = %trace.decision, ?duration, "before-hook");
                    report.trace.push(trace);
                    match decision {
                        BeforeDecision::Continue => {}
                        BeforeDecision::Rewrite(new_args) => args = Some(new_args),
                        BeforeDecision::Block { reason } => {
                            report.decision = BeforeVerdict::Block {
                                hook: name.to_owned(),
                                reason,
                            };
                            return report;
                        }
                        BeforeDecision::Ask { reason } => asks.push(reason),
                    }
                }
                Err(error) => {
                    let policy = unavailable.unwrap_or(entry.on_error.before);
                    tracing::warn!(hook = name, tool = call.tool, %error, ?policy, "before-hook failed");
                    match policy {
                        FailurePolicy::Open => {
                            trace.decision = TraceDecision::Continue;
                            trace.error = Some(error);
                            report.trace.push(trace);
                        }
                        FailurePolicy::Closed => {
                            let reason = failure_reason(name, &error);
                            trace.decision = TraceDecision::Block {
                                reason: reason.clone(),
                            };
                            trace.error = Some(error);
                            report.trace.push(trace);
                            report.decision = BeforeVerdict::Block {
                                hook: name.to_owned(),
                                reason,
                            };
                            return report;
                        }
                    }
                }
            }
        }
        report.decision = if !asks.is_empty() {
            BeforeVerdict::Ask {
                reasons: asks,
                args,
            }
        } else if let Some(args) = args {
            BeforeVerdict::Rewrite(args)
        } else {
            BeforeVerdict::Continue
        };
        report
    }

    /// Runs the permission hooks that match `call`, in order, when it needs
    /// approval for `reasons`: the first that allows or denies decides; a
    /// hook that fails or times out passes (logged, in the trace). With no
    /// matching hook this allocates nothing.
    pub async fn run_permission(
        &self,
        call: &HookCall<'_>,
        reasons: &[String],
    ) -> PermissionReport {
        let mut report = PermissionReport {
            decision: PermissionVerdict::Pass,
            trace: Vec::new(),
        };
        if !self.any_permission {
            return report;
        }
        for entry in &self.entries {
            if !entry.applies(Stage::Permission, call) {
                continue;
            }
            let name = entry.hook.name();
            let started = Instant::now();
            let result = within(entry.timeout, entry.hook.permission(call, reasons)).await;
            let duration = started.elapsed();
            let mut trace = HookTrace {
                hook: name.to_owned(),
                stage: Stage::Permission,
                decision: TraceDecision::Pass,
                duration,
                error: None,
            };
            match flatten(result, entry.timeout) {
                Ok(decision) => {
                    trace.decision = decision.summary();
                    tracing::debug!(hook = name, tool = call.tool, decision = %trace.decision, ?duration, "permission hook");
                    report.trace.push(trace);
                    match decision {
                        PermissionDecision::Pass => {}
                        PermissionDecision::Allow { reason } => {
                            report.decision = PermissionVerdict::Allow {
                                hook: name.to_owned(),
                                reason,
                            };
                            return report;
                        }
                        PermissionDecision::Deny { reason } => {
                            report.decision = PermissionVerdict::Deny {
                                hook: name.to_owned(),
                                reason,
                            };
                            return report;
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(hook = name, tool = call.tool, %error, "permission hook failed; the person is asked");
                    trace.error = Some(error);
                    report.trace.push(trace);
                }
            }
        }
        report
    }

    /// Runs the after-hooks that match `call` on `outcome`, in order (for
    /// failed calls too).
    ///
    /// A replacement updates the outcome the next hook sees; a fail turns it
    /// into `Err { kind: "hook", message }` and the chain goes on (so later
    /// hooks, e.g. an audit log, still see the call). A hook that fails or
    /// times out is handled by its entry's [`OnError::after`]. `call.args`
    /// should be the arguments the tool actually ran with.
    pub async fn run_after(&self, call: &HookCall<'_>, outcome: HookOutcome) -> AfterReport {
        let mut report = AfterReport {
            outcome,
            trace: Vec::new(),
            structured_replaced: false,
            content_replaced: false,
        };
        if !self.any_after {
            return report;
        }
        for entry in &self.entries {
            if !entry.applies(Stage::After, call) {
                continue;
            }
            let name = entry.hook.name();
            let started = Instant::now();
            let result = within(entry.timeout, entry.hook.after(call, &report.outcome)).await;
            let duration = started.elapsed();
            let unavailable = closed_if_unavailable(&result);
            let mut trace = HookTrace {
                hook: name.to_owned(),
                stage: Stage::After,
                decision: TraceDecision::Keep,
                duration,
                error: None,
            };
            match flatten(result, entry.timeout) {
                Ok(decision) => {
                    trace.decision = decision.summary();
                    tracing::debug!(hook = name, tool = call.tool, decision = %trace.decision, ?duration, "after-hook");
                    let replaced = apply(&mut report.outcome, decision);
                    report.structured_replaced |= replaced.structured;
                    report.content_replaced |= replaced.content;
                }
                Err(error) => {
                    let policy = unavailable.unwrap_or(entry.on_error.after);
                    tracing::warn!(hook = name, tool = call.tool, %error, ?policy, "after-hook failed");
                    match policy {
                        FailurePolicy::Open => trace.decision = TraceDecision::Keep,
                        FailurePolicy::Closed => {
                            let message = failure_reason(name, &error);
                            trace.decision = TraceDecision::Fail {
                                message: message.clone(),
                            };
                            report.outcome = HookOutcome::Err {
                                kind: HOOK_FAILURE_KIND,
                                message,
                            };
                        }
                    }
                    trace.error = Some(error);
                }
            }
            report.trace.push(trace);
        }
        report
    }
}

/// A hook's result, or a description of its failure (error or timeout).
fn flatten<T>(
    result: Result<Result<T, HookError>, tokio::time::error::Elapsed>,
    timeout: Duration,
) -> Result<T, String> {
    match result {
        Ok(Ok(decision)) => Ok(decision),
        Ok(Err(error)) => Err(format!("failed: {error}")),
        Err(_) => Err(format!("timed out after {} ms", timeout.as_millis())),
    }
}

fn failure_reason(hook: &str, error: &str) -> String {
    format!("hook \"{hook}\" {error}")
}

/// What of an outcome a hook put in of its own.
#[derive(Debug, Default, Clone, Copy)]
struct Replaced {
    structured: bool,
    content: bool,
}

/// Applies an after-hook's decision; returns whether it put a structured
/// result or content of its own in the outcome.
fn apply(outcome: &mut HookOutcome, decision: AfterDecision) -> Replaced {
    match decision {
        AfterDecision::Keep => Replaced::default(),
        AfterDecision::Fail { message } => {
            *outcome = HookOutcome::Err {
                kind: HOOK_FAILURE_KIND,
                message,
            };
            Replaced::default()
        }
        AfterDecision::Replace {
            output: new_output,
            details: new_details,
            structured: new_structured,
            content: new_content,
        } => match outcome {
            HookOutcome::Ok {
                output,
                details,
                structured,
                content,
            } => {
                let mut replaced = Replaced::default();
                if let Some(new_details) = new_details {
                    *details = new_details;
                }
                if let Some(new_structured) = new_structured {
                    replaced.structured = new_structured.is_some();
                    *structured = new_structured;
                }
                // Content given back as it was is not a replacement.
                let new_content = new_content.filter(|c| c != content);
                match (new_output, new_content) {
                    (None, None) => {}
                    (Some(new_output), None) => {
                        if !content.is_empty() {
                            *content = toolhost_content::with_text(
                                std::mem::take(content),
                                new_output.clone(),
                            );
                        }
                        *output = new_output;
                    }
                    (new_output, Some(new_content)) => {
                        *output = match new_output {
                            Some(o) => o,
                            None if new_content.is_empty() => std::mem::take(output),
                            None => toolhost_content::text_of(&new_content),
                        };
                        replaced.content = !new_content.is_empty();
                        *content = new_content;
                    }
                }
                replaced
            }
            HookOutcome::Err { .. } => match new_output {
                Some(output) => {
                    let structured = new_structured.flatten();
                    let content = new_content.unwrap_or_default();
                    let replaced = Replaced {
                        structured: structured.is_some(),
                        content: !content.is_empty(),
                    };
                    *outcome = HookOutcome::Ok {
                        output,
                        details: new_details.flatten(),
                        structured,
                        content,
                    };
                    replaced
                }
                None => Replaced::default(),
            },
        },
    }
}

/// `fut` with a time limit. A hook that answers at once (most Rust hooks)
/// is polled once and never arms a timer; only one that waits gets the
/// tokio timeout.
async fn within<F: std::future::Future>(
    limit: Duration,
    fut: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    let mut fut = std::pin::pin!(fut);
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(fut.as_mut().poll(cx))).await;
    if let std::task::Poll::Ready(output) = first {
        return Ok(output);
    }
    tokio::time::timeout(limit, fut).await
}
