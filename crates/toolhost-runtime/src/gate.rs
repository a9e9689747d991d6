//! The gate every call passes: the policy in force, the per-session
//! toggles, the hooks and who answers the questions they ask.
//!
//! It is also **the permission filter**: [`Gate::offered_tools`] is the one
//! place that decides which tools a model is offered before a request (every
//! tool except those the policy denies outright for the agent, and those the
//! session switched off). The call's own steps that consult the gate are
//! `call/admit.rs` (before the sandbox) and `call/conclude.rs` (after it).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use toolhost_hooks::HookChain;
use toolhost_policy::approvals::Approvals;
use toolhost_policy::{Policy, PolicyError, SessionToggles};

use crate::permission::Approver;
use crate::tool::ToolInfo;

/// The policy, its per-session toggles, the hooks and the approver, shared
/// by every call.
pub(crate) struct Gate {
    /// Read on every call, replaced when the policy file changes.
    policy: ArcSwap<Policy>,
    sessions: Mutex<HashMap<String, SessionToggles>>,
    hooks: HookChain,
    approver: Option<Arc<dyn Approver>>,
    /// With no approver: `true` allows what the policy asks about, `false` denies it.
    allow_asks_without_approver: bool,
    /// The "allow always" answers, narrow and revocable (shared with the
    /// blocking threads that save them).
    approvals: Arc<Approvals>,
}

impl Gate {
    pub(crate) fn new(
        policy: Policy,
        hooks: HookChain,
        approver: Option<Arc<dyn Approver>>,
        allow_asks_without_approver: bool,
        approvals: Approvals,
    ) -> Self {
        Gate {
            policy: ArcSwap::from_pointee(policy),
            sessions: Mutex::new(HashMap::new()),
            hooks,
            approver,
            allow_asks_without_approver,
            approvals: Arc::new(approvals),
        }
    }

    /// The saved approvals.
    pub(crate) fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    /// The saved approvals, for a blocking thread that changes them.
    pub(crate) fn shared_approvals(&self) -> Arc<Approvals> {
        Arc::clone(&self.approvals)
    }

    /// The policy in force.
    pub(crate) fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    /// Replaces the policy for every call from now on.
    pub(crate) fn set_policy(&self, policy: Policy) {
        self.policy.store(Arc::new(policy));
    }

    /// The hook chain.
    pub(crate) fn hooks(&self) -> &HookChain {
        &self.hooks
    }

    /// Who answers questions, if anyone.
    pub(crate) fn approver(&self) -> Option<&Arc<dyn Approver>> {
        self.approver.as_ref()
    }

    /// With no approver: whether what is asked is allowed (`false`: denied).
    pub(crate) fn allow_asks_without_approver(&self) -> bool {
        self.allow_asks_without_approver
    }

    /// The permission filter: of `tools`, those a model may be offered for
    /// `agent` in `session` — all but the ones the policy denies outright
    /// (a deny rule without argument patterns, or a deny default no rule
    /// lifts) and the ones the session switched off. Applied before every
    /// request to a model, whatever the entry point.
    pub(crate) fn offered_tools(
        &self,
        tools: Vec<ToolInfo>,
        agent: Option<&str>,
        session: Option<&str>,
    ) -> Vec<ToolInfo> {
        self.partition(tools, agent, session).0
    }

    /// The names of `tools` that [`offered_tools`](Self::offered_tools)
    /// leaves out for `agent` in `session`, in the order given.
    pub(crate) fn withheld_tools(
        &self,
        tools: Vec<ToolInfo>,
        agent: Option<&str>,
        session: Option<&str>,
    ) -> Vec<String> {
        let (_, withheld) = self.partition(tools, agent, session);
        withheld.into_iter().map(|t| t.name).collect()
    }

    /// `tools` split into those offered to `agent` in `session` and those
    /// withheld, each in the order given.
    fn partition(
        &self,
        tools: Vec<ToolInfo>,
        agent: Option<&str>,
        session: Option<&str>,
    ) -> (Vec<ToolInfo>, Vec<ToolInfo>) {
        let policy = self.policy.load();
        self.with_session(session, |toggles| {
            tools.into_iter().partition(|t| {
                policy.visible_as(&t.name, &t.declared_name, Some(&t.plugin), agent, toggles)
            })
        })
    }

    /// The names in `registry` that `agent` in `session` may see (as
    /// [`offered_tools`](Self::offered_tools) decides), sorted: what a
    /// not-found error may list, so that it never names a tool the caller's
    /// profile hides.
    pub(crate) fn visible_names(
        &self,
        registry: &crate::registry::Registry,
        agent: Option<&str>,
        session: Option<&str>,
    ) -> Vec<String> {
        let policy = self.policy.load();
        self.with_session(session, |toggles| {
            registry
                .tools
                .iter()
                .filter(|(name, (p, i))| {
                    policy.visible_as(name, &p.tools[*i].name, Some(&p.name), agent, toggles)
                })
                .map(|(name, _)| name.clone())
                .collect()
        })
    }

    /// Whether the caller may see tool `name` (declared as `declared`) of
    /// plugin or source `plugin`.
    pub(crate) fn may_see(
        &self,
        name: &str,
        declared: &str,
        plugin: &str,
        agent: Option<&str>,
        session: Option<&str>,
    ) -> bool {
        let policy = self.policy.load();
        self.with_session(session, |toggles| {
            policy.visible_as(name, declared, Some(plugin), agent, toggles)
        })
    }

    /// Runs `f` on the toggles of `session` (an empty set for none).
    pub(crate) fn with_session<T>(
        &self,
        session: Option<&str>,
        f: impl FnOnce(&SessionToggles) -> T,
    ) -> T {
        static NONE: OnceLock<SessionToggles> = OnceLock::new();
        let empty = NONE.get_or_init(SessionToggles::new);
        let Some(id) = session else {
            return f(empty);
        };
        let sessions = self.sessions.lock();
        f(sessions.get(id).unwrap_or(empty))
    }

    /// Changes the toggles of `session`.
    pub(crate) fn toggle(
        &self,
        session: &str,
        f: impl FnOnce(&mut SessionToggles) -> Result<(), PolicyError>,
    ) -> Result<(), PolicyError> {
        let mut sessions = self.sessions.lock();
        f(sessions.entry(session.to_owned()).or_default())
    }
}
