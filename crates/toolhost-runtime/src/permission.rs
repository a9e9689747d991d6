//! What the permission layer asks the user and reports: the [`Approver`]
//! that answers calls the policy (or a hook) asks about and results that
//! need approval, and the [`CallStep`]s of every call for events and history.
//!
//! The rules themselves live in `toolhost-policy`; the gate (`gate.rs`)
//! holds them, and the call's steps (`call/admit.rs`, `call/conclude.rs`)
//! apply them.

use serde::Serialize;
use serde_json::Value;
use toolhost_policy::Decision;

/// A boxed future, as the [`Approver`] returns.
pub type ApprovalFuture<'a, T> = futures::future::BoxFuture<'a, T>;

/// A call that needs the user's approval before it runs.
#[derive(Debug, Clone)]
pub struct CallApprovalRequest<'a> {
    /// The tool's exposed name.
    pub tool: &'a str,
    /// The plugin that provides it.
    pub plugin: &'a str,
    /// That plugin's digest (`sha256:` of its component's bytes; for
    /// another tool source, the identity it gives its tools): the build an
    /// answer is about. An approver that keeps an answer (a saved
    /// approval, a 2026-07-28 round trip's sealed state) binds it to this
    /// digest, the tool and the whole arguments, so that it answers this
    /// call and no other.
    pub digest: &'a str,
    /// The arguments it would run with (after any rewrite by a hook).
    pub args: &'a Value,
    /// Why approval is needed: the policy rule and/or the hooks that asked.
    pub reasons: &'a [String],
    /// The session, if the caller gave one.
    pub session_id: Option<&'a str>,
    /// The agent profile, if the caller gave one.
    pub agent: Option<&'a str>,
    /// The narrower scopes an approval of this call may be saved for,
    /// besides these arguments and any arguments: the directory of its
    /// path, the host of its URL (when the tool's manifest names those
    /// arguments). [`CallApproval::AllowWithin`] picks one.
    pub scopes: &'a [toolhost_policy::approvals::Scope],
}

/// The user's answer to a [`CallApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallApproval {
    /// Run this call.
    AllowOnce,
    /// Run this call, and do not ask again about this tool with exactly
    /// these arguments, for this build of the plugin: a saved approval
    /// (`toolhost_policy::approvals`), listed and revocable. A deny rule
    /// still wins.
    AllowAlways,
    /// Run this call, and do not ask again about this tool with any
    /// arguments, for this build of the plugin (a saved approval too).
    AllowTool,
    /// Run this call, and do not ask again about this tool with arguments
    /// in this scope (one of the request's
    /// [`scopes`](CallApprovalRequest::scopes): this directory, this host),
    /// for this build of the plugin (a saved approval too). A scope the
    /// request did not offer saves nothing: the call runs once.
    AllowWithin(toolhost_policy::approvals::Scope),
    /// Do not run it; the message (if any) goes to the model.
    Deny {
        /// What the user wants the model to know.
        message: Option<String>,
    },
    /// Do not run it, and stop: the call fails with
    /// [`CallError::Stopped`](crate::CallError::Stopped) (kind `aborted`),
    /// and the agent loop ends the run there (status `aborted`). Other
    /// entry points answer it as a denial.
    DenyAndStop {
        /// Why, for the record.
        message: Option<String>,
    },
}

/// A result waiting for the user's approval before the model sees it.
#[derive(Debug, Clone)]
pub struct ResultApprovalRequest<'a> {
    /// The tool's exposed name.
    pub tool: &'a str,
    /// The plugin that provides it.
    pub plugin: &'a str,
    /// The arguments it ran with.
    pub args: &'a Value,
    /// The text the model would read, then one line for each content
    /// block that is not text (`[image image/png, 1234 bytes]`: the
    /// result's images, audio and resources, which reach the model and an
    /// MCP client too).
    pub output: &'a str,
    /// The details (for the user only).
    pub details: Option<&'a Value>,
}

/// The user's answer to a [`ResultApprovalRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultApproval {
    /// The model may see the result.
    Accept,
    /// The model sees `{"status":"rejected","message":…}` instead.
    Reject {
        /// What the user wants the model to know.
        message: Option<String>,
    },
}

/// Answers the questions the permission layer asks: an interactive prompt in
/// the CLI, a UI dialog in an embedding host.
///
/// ```
/// use toolhost_runtime::Approver;
/// use toolhost_runtime::permission::{
///     ApprovalFuture, CallApproval, CallApprovalRequest, ResultApproval, ResultApprovalRequest,
/// };
///
/// /// Allows reads, denies everything else it is asked about.
/// struct ReadsOnly;
///
/// impl Approver for ReadsOnly {
///     fn approve_call<'a>(&'a self, req: &'a CallApprovalRequest<'a>) -> ApprovalFuture<'a, CallApproval> {
///         Box::pin(async move {
///             if req.tool.starts_with("read_") {
///                 CallApproval::AllowOnce
///             } else {
///                 CallApproval::Deny { message: Some("reads only, please".into()) }
///             }
///         })
///     }
///     fn approve_result<'a>(&'a self, _: &'a ResultApprovalRequest<'a>) -> ApprovalFuture<'a, ResultApproval> {
///         Box::pin(async { ResultApproval::Accept })
///     }
/// }
/// ```
pub trait Approver: Send + Sync {
    /// The prompt this approver asks at (`terminal`, `mcp-elicitation`,
    /// …), recorded with the approvals it saves.
    fn prompt_name(&self) -> &'static str {
        "approver"
    }

    /// Who answers at this prompt, recorded with the approvals it saves
    /// (`None`: the calling client, else the user running the host).
    fn who(&self) -> Option<String> {
        None
    }

    /// Whether the approvals saved at this prompt answer every caller
    /// (under the call's profile) rather than the caller of the call
    /// alone: `true` for an operator's prompt, whose answer speaks for the
    /// host. `false` by default.
    fn answers_everyone(&self) -> bool {
        false
    }

    /// Whether a call the policy or a hook asks about may run.
    fn approve_call<'a>(
        &'a self,
        request: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval>;

    /// Whether a result may go to the model (for tools under result approval).
    fn approve_result<'a>(
        &'a self,
        request: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval>;

    /// A question the tool's own server asks the user during the call (an
    /// MCP server's `elicitation/create`, form mode): the answer fills the
    /// form. Declined by default: an approver that cannot show a form
    /// answers nothing in the user's name.
    fn answer_form<'a>(&'a self, request: &'a FormRequest<'a>) -> ApprovalFuture<'a, FormAnswer> {
        let _ = request;
        Box::pin(async { FormAnswer::Decline })
    }
}

/// A form a tool's server asks the user to fill in during a call (MCP
/// elicitation, form mode), for [`Approver::answer_form`].
#[derive(Debug, Clone)]
pub struct FormRequest<'a> {
    /// The tool being called, by its exposed name.
    pub tool: &'a str,
    /// The plugin (tool source) whose server asks.
    pub plugin: &'a str,
    /// What the server says it wants, as it wrote it (escape it before
    /// showing it).
    pub message: &'a str,
    /// The form: a JSON Schema object of flat properties (string, number,
    /// integer, boolean, enums), each with an optional `default`, and its
    /// `required` list.
    pub schema: &'a Value,
}

/// The user's answer to a [`FormRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum FormAnswer {
    /// The form, filled in (fields left empty take their defaults).
    Accept(serde_json::Map<String, Value>),
    /// The user said no.
    Decline,
    /// The user dismissed the question without answering.
    Cancel,
}

/// One step of the permission layer or the hooks on a call, reported to
/// [`CallContext::on_step`](crate::CallContext::on_step) for events and history.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum CallStep {
    /// The policy's decision.
    Permission {
        /// allow, ask or deny.
        decision: Decision,
        /// The rule (or default, or session toggle) that decided.
        decided_by: String,
        /// The rule's reason, if it has one.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// One hook ran.
    Hook(toolhost_hooks::HookTrace),
    /// The user answered an approval question.
    Approval {
        /// Of the call, or of its result.
        of: ApprovalOf,
        /// The answer.
        answer: ApprovalAnswer,
        /// The user's message, if any.
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// The result came from the result cache: the tool did not run (the
    /// after-hooks and result approval still do).
    Cached,
}

/// What an approval question was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalOf {
    /// Whether the call may run.
    Call,
    /// Whether the model may see the result.
    Result,
}

/// The answer to an approval question, as a [`CallStep::Approval`] records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalAnswer {
    /// The call runs, this once.
    AllowOnce,
    /// The call runs, and an approval of these arguments is saved.
    AllowAlways,
    /// The call runs, and an approval of the tool (any arguments) is saved.
    AllowTool,
    /// The call runs, and an approval of a directory or host is saved.
    AllowWithin,
    /// Nobody was asked: an approval saved earlier covers the call.
    Saved,
    /// The call does not run.
    Deny,
    /// The call does not run, and the run stops.
    DenyAndStop,
    /// The model sees the result.
    Accept,
    /// The model reads that the result was rejected.
    Reject,
    /// Nobody could be asked (non-interactive); the builder's setting decided.
    NoApprover,
}

/// What the model reads when the user rejects a result.
pub(crate) fn rejected_json(message: Option<&str>) -> String {
    serde_json::json!({
        "status": "rejected",
        "message": message.unwrap_or("the user rejected this result"),
    })
    .to_string()
}
