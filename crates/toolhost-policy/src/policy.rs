//! The compiled policy and the questions the host asks it: may this call run, does the
//! model see this tool, does the user approve this result.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::decision::Decision;
use crate::error::PolicyError;
use crate::pattern::{NameGlob, name_glob};
use crate::rule::{Names, RuleSet};
use crate::session::SessionToggles;

/// A compiled permission policy.
///
/// Built from a policy file ([`Policy::load`], [`Policy::from_toml`]) or in code
/// ([`Policy::builder`]); both give the same rules. A `Policy` never changes once built:
/// to pick up an "allow always" answer use [`Policy::with_always_allow`] (and
/// [`persist_always_allow`](crate::persist_always_allow) to keep it), or load the file
/// again. Cloning copies the compiled rules; share one behind an `Arc` when it is read
/// from many places.
///
/// ```
/// use serde_json::json;
/// use toolhost_policy::{CallRequest, Decision, Policy, Rule, SessionToggles};
///
/// let policy = Policy::builder()
///     .default(Decision::Ask)
///     .rule(Rule::deny("read_file").arg_path("path", "/etc/**").reason("system files"))
///     .rule(Rule::allow("read_file"))
///     .build()
///     .unwrap();
/// let session = SessionToggles::new();
///
/// let args = json!({"path": "/home/me/../../etc/passwd"});
/// let eval = policy.evaluate(&CallRequest::new("read_file", &args), &session);
/// assert_eq!(eval.decision, Decision::Deny);
/// assert_eq!(eval.reason.as_deref(), Some("system files"));
///
/// let args = json!({"path": "/home/me/notes.md"});
/// let eval = policy.evaluate(&CallRequest::new("read_file", &args), &session);
/// assert_eq!(eval.decision, Decision::Allow);
///
/// let eval = policy.evaluate(&CallRequest::new("write_file", &args), &session);
/// assert_eq!(eval.decision, Decision::Ask);
/// ```
#[derive(Debug, Clone)]
pub struct Policy {
    pub(crate) path: Option<PathBuf>,
    pub(crate) default: Decision,
    pub(crate) default_description: Arc<str>,
    pub(crate) rules: RuleSet,
    pub(crate) approve_results: Box<[NameGlob]>,
    pub(crate) always_allow: Vec<AlwaysAllow>,
    pub(crate) profiles: HashMap<Box<str>, CompiledProfile>,
    pub(crate) plugins: Option<toml::Table>,
}

#[derive(Debug, Clone)]
pub(crate) struct AlwaysAllow {
    pub(crate) glob: NameGlob,
    pub(crate) description: Arc<str>,
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledProfile {
    pub(crate) default: Option<(Decision, Arc<str>)>,
    pub(crate) approve_results: Option<Box<[NameGlob]>>,
    pub(crate) rules: RuleSet,
    pub(crate) ask: Option<crate::AskRoute>,
}

/// One tool call, as the permission check sees it.
///
/// ```
/// use serde_json::json;
/// use toolhost_policy::CallRequest;
///
/// let args = json!({"path": "README.md"});
/// let call = CallRequest::new("read_file", &args).plugin("fs").agent("reviewer");
/// assert_eq!(call.plugin, Some("fs"));
/// ```
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    /// The tool's exposed name.
    pub tool: &'a str,
    /// The name its plugin declared, when a clash exposes it under another
    /// (`read_file` for `fs__read_file`): rules match either, so renaming
    /// never lets a call escape a rule.
    pub declared: Option<&'a str>,
    /// How its path arguments resolve (`fs`: against its first granted
    /// directory; its `path` opened once by a per-call grant): path
    /// patterns then match the path as resolved, and where what it names
    /// really is, as well as as written.
    pub paths: crate::PathContext<'a>,
    /// The name of the plugin providing the tool (`None` for tools that no plugin
    /// provides, such as native or MCP tools; rules with a `plugin` glob do not match them).
    pub plugin: Option<&'a str>,
    /// The agent making the call, which selects its profile.
    pub agent: Option<&'a str>,
    /// The validated arguments (a JSON object).
    pub args: &'a Value,
}

impl<'a> CallRequest<'a> {
    /// A call of `tool` with `args`, no plugin and no agent.
    pub fn new(tool: &'a str, args: &'a Value) -> Self {
        CallRequest {
            tool,
            declared: None,
            paths: crate::PathContext::default(),
            plugin: None,
            agent: None,
            args,
        }
    }

    /// Sets the name the tool's plugin declared, when it differs from the
    /// exposed one.
    pub fn declared(mut self, declared: &'a str) -> Self {
        self.declared = (declared != self.tool).then_some(declared);
        self
    }

    /// Sets the providing plugin.
    pub fn plugin(mut self, plugin: &'a str) -> Self {
        self.plugin = Some(plugin);
        self
    }

    /// Sets what the tool resolves relative path arguments against.
    pub fn path_base(mut self, base: &'a std::path::Path) -> Self {
        self.paths = self.paths.base(base);
        self
    }

    /// Sets how the call's path arguments resolve, the argument a
    /// per-call grant opened included ([`PathContext`](crate::PathContext)).
    pub fn paths(mut self, paths: crate::PathContext<'a>) -> Self {
        self.paths = paths;
        self
    }

    /// Sets the calling agent.
    pub fn agent(mut self, agent: &'a str) -> Self {
        self.agent = Some(agent);
        self
    }
}

/// What decided an [`Evaluation`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// A rule matched.
    Rule,
    /// No rule matched: the profile's or the policy's default.
    Default,
    /// An ask (from a rule or the default) was turned into allow by `always-allow`.
    AlwaysAllow,
    /// The user switched the tool off for this session.
    Session,
}

/// The answer to one permission check.
///
/// Displays like `deny by rule 1 (http_get, deny) in policy.toml:8: no network`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evaluation {
    /// Allow, ask or deny.
    pub decision: Decision,
    /// What kind of thing decided.
    pub source: Source,
    /// Why, to show the model and the user: the deciding rule's `reason`, or the
    /// explanation of a session toggle; `None` when there is nothing to add.
    pub reason: Option<Arc<str>>,
    /// What decided, in words: `rule 3 (read_file, ask) in policy.toml:14`,
    /// `rule 1 of profile reviewer (read_file, allow) in policy.toml:30`,
    /// `default (allow)`, `always-allow "list_dir" in policy.toml:9`,
    /// `session toggle "http_*"`.
    pub decided_by: Arc<str>,
}

impl fmt::Display for Evaluation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} by {}", self.decision, self.decided_by)?;
        if let Some(r) = &self.reason {
            write!(f, ": {r}")?;
        }
        Ok(())
    }
}

/// Where a tool stands under a policy, whatever its arguments (see
/// [`Policy::standing`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Standing {
    /// Whether the model is offered the tool (it is not when the policy
    /// denies it outright).
    pub offered: bool,
    /// Whether a rule with argument patterns names it: some calls are
    /// decided otherwise than [`evaluation`](Self::evaluation) says.
    pub by_arguments: bool,
    /// What a call gets when no argument rule matches, and why.
    #[serde(flatten)]
    pub evaluation: Evaluation,
}

impl std::ops::Deref for Standing {
    type Target = Evaluation;
    fn deref(&self) -> &Evaluation {
        &self.evaluation
    }
}

/// The explanation given for a tool the user switched off.
const SWITCHED_OFF: &str = "the user switched this tool off for this session";

impl Default for Policy {
    /// [`Policy::allow_all`].
    fn default() -> Self {
        Policy::allow_all()
    }
}

impl Policy {
    /// A policy without rules whose default is allow.
    pub fn allow_all() -> Self {
        Policy {
            path: None,
            default: Decision::Allow,
            default_description: Arc::from("default (allow)"),
            rules: RuleSet::default(),
            approve_results: Box::new([]),
            always_allow: Vec::new(),
            profiles: HashMap::new(),
            plugins: None,
        }
    }

    /// How many rules and profiles it has (for the log).
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.rules.len(), self.profiles.len())
    }

    /// The file this policy was loaded from (`None` when built in code).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The `[plugins]` table as written in the file (capability grants), for the host to
    /// parse with its own types; `None` when there is none.
    pub fn raw_plugins(&self) -> Option<&toml::Table> {
        self.plugins.as_ref()
    }

    /// The base default decision (for calls no rule matches).
    pub fn default_decision(&self) -> Decision {
        self.default
    }

    /// The names of its profiles, sorted. A host checks a profile name it
    /// is given (a flag, a token file) against these: an unknown name
    /// would run under the base policy, not the profile meant.
    ///
    /// ```
    /// use toolhost_policy::{Decision, Policy, Profile};
    /// let policy = Policy::builder()
    ///     .profile("reviewer", Profile::new().default(Decision::Deny))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(policy.profile_names(), ["reviewer"]);
    /// ```
    pub fn profile_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.profiles.keys().map(AsRef::as_ref).collect();
        names.sort_unstable();
        names
    }

    /// Who answers the `ask`s of calls under `agent`'s profile, when the
    /// profile says (`ask = "operator"`); `None`: whoever the server says.
    ///
    /// ```
    /// use toolhost_policy::{AskRoute, Policy, Profile};
    /// let policy = Policy::builder()
    ///     .profile("remote", Profile::new().ask(AskRoute::Operator))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(policy.ask_route(Some("remote")), Some(AskRoute::Operator));
    /// assert_eq!(policy.ask_route(None), None);
    /// ```
    pub fn ask_route(&self, agent: Option<&str>) -> Option<crate::AskRoute> {
        self.profile(agent).and_then(|p| p.ask)
    }

    fn profile(&self, agent: Option<&str>) -> Option<&CompiledProfile> {
        agent.and_then(|a| self.profiles.get(a))
    }

    /// Decides one tool call.
    ///
    /// In order: a tool the user switched off in `session` is denied. Otherwise the
    /// agent's profile rules are checked, and if none matches, the base rules; among
    /// matching rules deny wins over ask over allow. With no matching rule the profile's
    /// default applies, else the base default. Finally an `ask` for a tool listed in
    /// `always-allow` becomes `allow` (a deny stays a deny).
    ///
    /// Cheap: no allocation unless the call is switched off, or a host pattern has to
    /// parse a URL argument.
    pub fn evaluate(&self, call: &CallRequest<'_>, session: &SessionToggles) -> Evaluation {
        // A toggle for a name holds for the tool a clash renamed too.
        if !session.is_empty()
            && let Some(glob) = session
                .disabled_by(call.tool)
                .or_else(|| call.declared.and_then(|d| session.disabled_by(d)))
        {
            return Evaluation {
                decision: Decision::Deny,
                source: Source::Session,
                reason: Some(Arc::from(SWITCHED_OFF)),
                decided_by: Arc::from(format!("session toggle {glob:?}")),
            };
        }
        let profile = self.profile(call.agent);
        let names = Names {
            tool: call.tool,
            declared: call.declared,
            plugin: call.plugin,
            paths: call.paths,
        };
        let hit = profile
            .and_then(|p| p.rules.decide(names, call.args))
            .or_else(|| self.rules.decide(names, call.args));
        let (decision, source, reason, decided_by) = match hit {
            Some(rule) => (
                rule.decision,
                Source::Rule,
                rule.reason.as_ref(),
                &rule.description,
            ),
            None => {
                let (d, by) = match profile.and_then(|p| p.default.as_ref()) {
                    Some((d, by)) => (*d, by),
                    None => (self.default, &self.default_description),
                };
                (d, Source::Default, None, by)
            }
        };
        if decision == Decision::Ask
            && let Some(a) = self
                .always_allow
                .iter()
                .find(|a| a.glob.is_match(call.tool))
        {
            return Evaluation {
                decision: Decision::Allow,
                source: Source::AlwaysAllow,
                reason: None,
                decided_by: a.description.clone(),
            };
        }
        Evaluation {
            decision,
            source,
            reason: reason.cloned(),
            decided_by: decided_by.clone(),
        }
    }

    /// Whether the model may see `tool` (for `agent`, in `session`).
    ///
    /// A tool is hidden when it is denied outright: switched off in the session; or
    /// matched by a deny rule without argument patterns (that no profile rule can
    /// override); or the applicable default is deny and no allow or ask rule could match
    /// the tool's name. A tool whose fate depends on its arguments stays visible, and
    /// the call is decided by [`Policy::evaluate`]. Runs without allocating.
    ///
    /// This is the rule-level answer; the permission filter that applies it
    /// to the tools a model is offered is the runtime's
    /// `Runtime::offered_tools`.
    pub fn visible(
        &self,
        tool: &str,
        plugin: Option<&str>,
        agent: Option<&str>,
        session: &SessionToggles,
    ) -> bool {
        self.visible_names(Names::of(tool, plugin), agent, session)
    }

    /// [`visible`](Self::visible) for a tool exposed as `tool` that its
    /// plugin declared as `declared` (they differ after a clash): rules
    /// written for either name apply.
    pub fn visible_as(
        &self,
        tool: &str,
        declared: &str,
        plugin: Option<&str>,
        agent: Option<&str>,
        session: &SessionToggles,
    ) -> bool {
        let names = Names {
            tool,
            declared: (declared != tool).then_some(declared),
            plugin,
            paths: crate::PathContext::default(),
        };
        self.visible_names(names, agent, session)
    }

    /// Where `tool` stands for `agent`, whatever the session: whether the
    /// model is offered it ([`visible_as`](Self::visible_as)), what a call
    /// with no argument rule matching gets and which rule or default says
    /// so, and whether some rule decides by its arguments. A listing of
    /// tools shows this; what one call gets is [`evaluate`](Self::evaluate).
    ///
    /// ```
    /// use toolhost_policy::{Decision, Policy, Rule};
    /// let policy = Policy::builder()
    ///     .rule(Rule::ask("read_file"))
    ///     .rule(Rule::deny("read_file").arg_path("path", "/etc/**"))
    ///     .rule(Rule::deny("http_get"))
    ///     .build()
    ///     .unwrap();
    /// let read = policy.standing("read_file", "read_file", Some("fs"), None);
    /// assert_eq!(read.decision, Decision::Ask);
    /// assert!(read.offered && read.by_arguments);
    /// let get = policy.standing("http_get", "http_get", Some("http"), None);
    /// assert!(!get.offered);
    /// ```
    pub fn standing(
        &self,
        tool: &str,
        declared: &str,
        plugin: Option<&str>,
        agent: Option<&str>,
    ) -> Standing {
        let names = Names {
            tool,
            declared: (declared != tool).then_some(declared),
            plugin,
            paths: crate::PathContext::default(),
        };
        let none = SessionToggles::default();
        let offered = self.visible_names(names, agent, &none);
        let by_arguments = self
            .profile(agent)
            .is_some_and(|p| p.rules.reach(names).by_arguments)
            || self.rules.reach(names).by_arguments;
        let no_args = Value::Object(serde_json::Map::new());
        let mut request = CallRequest::new(tool, &no_args).declared(declared);
        if let Some(plugin) = plugin {
            request = request.plugin(plugin);
        }
        if let Some(agent) = agent {
            request = request.agent(agent);
        }
        Standing {
            offered,
            by_arguments,
            evaluation: self.evaluate(&request, &none),
        }
    }

    fn visible_names(
        &self,
        names: Names<'_>,
        agent: Option<&str>,
        session: &SessionToggles,
    ) -> bool {
        if !session.is_empty()
            && (session.is_disabled(names.tool)
                || names.declared.is_some_and(|d| session.is_disabled(d)))
        {
            return false;
        }
        let profile = self.profile(agent);
        let mut default = self.default;
        if let Some(p) = profile {
            let reach = p.rules.reach(names);
            if reach.always_denied {
                return false;
            }
            if reach.maybe_allowed {
                return true;
            }
            if let Some((d, _)) = &p.default {
                default = *d;
            }
        }
        let reach = self.rules.reach(names);
        if reach.always_denied {
            return false;
        }
        reach.maybe_allowed || default != Decision::Deny
    }

    /// Whether the user approves the results of `tool` (called by `agent`) before the
    /// model sees them: `tool` matches `approve-results` (the profile's list when the
    /// agent's profile sets one, else the base list).
    pub fn approve_result(&self, tool: &str, agent: Option<&str>) -> bool {
        self.approve_result_of(tool, None, agent)
    }

    /// [`approve_result`](Self::approve_result) for a tool a clash exposes
    /// under another name: the name its plugin `declared` matches too, so
    /// a renamed tool keeps the result approval written for its name.
    /// (`always-allow`, which only ever widens, matches the exposed name alone.)
    pub fn approve_result_of(
        &self,
        tool: &str,
        declared: Option<&str>,
        agent: Option<&str>,
    ) -> bool {
        let globs = self
            .profile(agent)
            .and_then(|p| p.approve_results.as_deref())
            .unwrap_or(&self.approve_results);
        globs
            .iter()
            .any(|g| g.is_match(tool) || declared.is_some_and(|d| g.is_match(d)))
    }

    /// Whether an `ask` for `tool` is answered `allow` by `always-allow`.
    pub fn always_allowed(&self, tool: &str) -> bool {
        self.always_allow.iter().any(|a| a.glob.is_match(tool))
    }

    /// This policy with `tool_glob` added to `always-allow`: the in-memory counterpart of
    /// [`persist_always_allow`](crate::persist_always_allow), for the answer "allow
    /// always" to take effect at once. Adding a glob already listed changes nothing.
    pub fn with_always_allow(mut self, tool_glob: &str) -> Result<Self, PolicyError> {
        if self
            .always_allow
            .iter()
            .any(|a| a.glob.as_str() == tool_glob)
        {
            return Ok(self);
        }
        let glob = name_glob(tool_glob).map_err(|message| PolicyError::Invalid {
            message: format!("always-allow: {message}"),
        })?;
        self.always_allow.push(AlwaysAllow {
            glob,
            description: Arc::from(format!("always-allow {tool_glob:?}")),
        });
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::{Profile, Rule};
    use serde_json::json;

    fn eval(policy: &Policy, tool: &str, args: Value) -> Evaluation {
        policy.evaluate(&CallRequest::new(tool, &args), &SessionToggles::new())
    }

    fn eval_as(policy: &Policy, agent: &str, tool: &str) -> Evaluation {
        let args = json!({});
        policy.evaluate(
            &CallRequest::new(tool, &args).agent(agent),
            &SessionToggles::new(),
        )
    }

    fn build(b: crate::PolicyBuilder) -> Policy {
        b.build().unwrap()
    }

    #[test]
    fn policy_and_session_can_be_shared_across_threads() {
        fn shared<T: Send + Sync + 'static>() {}
        shared::<Policy>();
        shared::<SessionToggles>();
        shared::<Evaluation>();
    }

    #[test]
    fn allow_all_allows_everything_and_shows_everything() {
        let p = Policy::allow_all();
        let e = eval(&p, "anything", json!({}));
        assert_eq!(e.decision, Decision::Allow);
        assert_eq!(e.source, Source::Default);
        assert_eq!(&*e.decided_by, "default (allow)");
        assert!(p.visible("anything", None, None, &SessionToggles::new()));
        assert!(!p.approve_result("anything", None));
        assert!(p.path().is_none());
        assert!(p.raw_plugins().is_none());
    }

    #[test]
    fn each_decision_comes_from_its_rule_with_reason_and_description() {
        let p = build(
            Policy::builder()
                .rule(Rule::allow("a"))
                .rule(Rule::ask("b"))
                .rule(Rule::deny("c").reason("not here")),
        );
        let a = eval(&p, "a", json!({}));
        assert_eq!((a.decision, a.source), (Decision::Allow, Source::Rule));
        assert_eq!(&*a.decided_by, "rule 1 (a, allow)");
        assert_eq!(eval(&p, "b", json!({})).decision, Decision::Ask);
        let c = eval(&p, "c", json!({}));
        assert_eq!(c.decision, Decision::Deny);
        assert_eq!(c.reason.as_deref(), Some("not here"));
        assert_eq!(c.to_string(), "deny by rule 3 (c, deny): not here");
    }

    #[test]
    fn default_applies_when_no_rule_matches() {
        for d in [Decision::Allow, Decision::Ask, Decision::Deny] {
            let p = build(Policy::builder().default(d).rule(Rule::allow("x")));
            let e = eval(&p, "y", json!({}));
            assert_eq!((e.decision, e.source), (d, Source::Default));
            assert_eq!(eval(&p, "x", json!({})).decision, Decision::Allow);
        }
    }

    #[test]
    fn deny_wins_over_ask_wins_over_allow() {
        let p = build(
            Policy::builder()
                .rule(Rule::allow("*"))
                .rule(Rule::ask("read_*"))
                .rule(Rule::deny("read_secret")),
        );
        assert_eq!(eval(&p, "list", json!({})).decision, Decision::Allow);
        assert_eq!(eval(&p, "read_file", json!({})).decision, Decision::Ask);
        assert_eq!(eval(&p, "read_secret", json!({})).decision, Decision::Deny);
    }

    #[test]
    fn argument_patterns_decide_only_when_they_match() {
        let p = build(
            Policy::builder()
                .rule(Rule::deny("read_file").arg_path("path", "/etc/**"))
                .rule(Rule::allow("http_get").arg_host("url", "*.example.com"))
                .rule(Rule::ask("write_*").arg_glob("path", "*.md"))
                .default(Decision::Ask),
        );
        let deny = |path: &str| eval(&p, "read_file", json!({ "path": path })).decision;
        assert_eq!(deny("/etc/passwd"), Decision::Deny);
        assert_eq!(deny("/etc/x/../passwd"), Decision::Deny);
        assert_eq!(deny("/home/me/../../etc/shadow"), Decision::Deny);
        assert_eq!(deny("/home/me/file"), Decision::Ask);
        let get = |url: &str| eval(&p, "http_get", json!({ "url": url })).decision;
        assert_eq!(get("https://a.example.com/x"), Decision::Allow);
        assert_eq!(get("https://example.com.evil.net/"), Decision::Ask);
        assert_eq!(get("http://a.example.com@evil.net/"), Decision::Ask);
        let write = |path: &str| eval(&p, "write_file", json!({ "path": path })).decision;
        assert_eq!(write("docs/intro.md"), Decision::Ask);
    }

    #[test]
    fn a_missing_argument_or_an_object_does_not_match() {
        let p = build(
            Policy::builder()
                .rule(Rule::deny("read_file").arg_path("path", "/etc/**"))
                .rule(Rule::deny("fetch").arg_glob("req.url", "*evil*")),
        );
        for args in [
            json!({}),
            json!({"path": 3}),
            json!({"path": {"p": "/etc/passwd"}}),
        ] {
            assert_eq!(eval(&p, "read_file", args).decision, Decision::Allow);
        }
        assert_eq!(
            eval(&p, "fetch", json!({"req": {"url": "http://evil.net"}})).decision,
            Decision::Deny
        );
        assert_eq!(
            eval(&p, "fetch", json!({"req": {"uri": "http://evil.net"}})).decision,
            Decision::Allow
        );
    }

    #[test]
    fn a_list_argument_cannot_hide_a_denied_value_or_borrow_an_allowed_one() {
        let p = build(
            Policy::builder()
                .rule(Rule::deny("read_many").arg_path("paths", "/etc/**"))
                .rule(Rule::allow("read_many").arg_path("paths", "/work/**"))
                .default(Decision::Ask),
        );
        let read = |paths: Value| eval(&p, "read_many", json!({ "paths": paths })).decision;
        assert_eq!(read(json!(["/work/a", "/etc/passwd"])), Decision::Deny);
        assert_eq!(read(json!(["/work/a", "/home/me/b"])), Decision::Ask);
        assert_eq!(read(json!(["/work/a", "/work/b"])), Decision::Allow);
        assert_eq!(read(json!([])), Decision::Ask);
    }

    #[test]
    fn profile_rules_win_over_base_rules_when_they_match() {
        let p = build(
            Policy::builder()
                .rule(Rule::deny("read_file"))
                .rule(Rule::ask("write_file"))
                .profile(
                    "reviewer",
                    Profile::new()
                        .rule(Rule::allow("read_file"))
                        .rule(Rule::deny("write_file").arg_glob("path", "*.rs")),
                ),
        );
        let e = eval_as(&p, "reviewer", "read_file");
        assert_eq!(e.decision, Decision::Allow);
        assert_eq!(
            &*e.decided_by,
            "rule 1 of profile reviewer (read_file, allow)"
        );
        // No profile rule matches: the base rules decide.
        assert_eq!(
            eval_as(&p, "reviewer", "write_file").decision,
            Decision::Ask
        );
        let args = json!({"path": "main.rs"});
        let e = p.evaluate(
            &CallRequest::new("write_file", &args).agent("reviewer"),
            &SessionToggles::new(),
        );
        assert_eq!(e.decision, Decision::Deny);
        // Other agents and calls without an agent get the base rules.
        assert_eq!(eval_as(&p, "coder", "read_file").decision, Decision::Deny);
        assert_eq!(eval(&p, "read_file", json!({})).decision, Decision::Deny);
    }

    #[test]
    fn profile_default_replaces_base_default_and_falls_back_when_unset() {
        let p = build(
            Policy::builder()
                .default(Decision::Ask)
                .profile("reviewer", Profile::new().default(Decision::Deny))
                .profile("helper", Profile::new().rule(Rule::allow("x"))),
        );
        let e = eval_as(&p, "reviewer", "anything");
        assert_eq!(e.decision, Decision::Deny);
        assert_eq!(&*e.decided_by, "default (deny) of profile reviewer");
        assert_eq!(eval_as(&p, "helper", "anything").decision, Decision::Ask);
        assert_eq!(eval_as(&p, "helper", "x").decision, Decision::Allow);
    }

    #[test]
    fn profile_approve_results_replace_the_base_list() {
        let p = build(
            Policy::builder()
                .approve_results(["http_*"])
                .profile("reviewer", Profile::new().approve_results(["read_file"]))
                .profile(
                    "quiet",
                    Profile::new().approve_results(Vec::<String>::new()),
                )
                .profile("plain", Profile::new()),
        );
        assert!(p.approve_result("http_get", None));
        assert!(!p.approve_result("read_file", None));
        assert!(
            p.approve_result_of("web__http_get", Some("http_get"), None),
            "a clash-renamed tool keeps its result approval"
        );
        assert!(p.approve_result("read_file", Some("reviewer")));
        assert!(!p.approve_result("http_get", Some("reviewer")));
        assert!(!p.approve_result("http_get", Some("quiet")));
        assert!(p.approve_result("http_get", Some("plain")));
    }

    #[test]
    fn always_allow_turns_ask_into_allow_but_never_a_deny() {
        let p = build(
            Policy::builder()
                .default(Decision::Ask)
                .always_allow(["list_*", "rm"])
                .rule(Rule::ask("list_dir"))
                .rule(Rule::deny("rm")),
        );
        let e = eval(&p, "list_dir", json!({}));
        assert_eq!(
            (e.decision, e.source),
            (Decision::Allow, Source::AlwaysAllow)
        );
        assert_eq!(&*e.decided_by, "always-allow \"list_*\"");
        // An ask from the default is turned too.
        assert_eq!(eval(&p, "list_files", json!({})).decision, Decision::Allow);
        let e = eval(&p, "rm", json!({}));
        assert_eq!((e.decision, e.source), (Decision::Deny, Source::Rule));
        assert_eq!(eval(&p, "other", json!({})).decision, Decision::Ask);
    }

    #[test]
    fn with_always_allow_takes_effect_and_is_idempotent() {
        let p = build(Policy::builder().rule(Rule::ask("read_file")));
        assert_eq!(eval(&p, "read_file", json!({})).decision, Decision::Ask);
        let p = p.with_always_allow("read_file").unwrap();
        let p = p.with_always_allow("read_file").unwrap();
        assert_eq!(p.always_allow.len(), 1);
        assert!(p.always_allowed("read_file"));
        assert_eq!(eval(&p, "read_file", json!({})).decision, Decision::Allow);
        assert!(p.with_always_allow("[bad").is_err());
    }

    #[test]
    fn switched_off_tool_is_denied_with_a_reason_naming_the_user() {
        let p = build(Policy::builder().rule(Rule::allow("http_get")));
        let mut session = SessionToggles::new();
        session.disable("http_*").unwrap();
        let args = json!({});
        let e = p.evaluate(&CallRequest::new("http_get", &args), &session);
        assert_eq!((e.decision, e.source), (Decision::Deny, Source::Session));
        assert!(e.reason.as_deref().unwrap().contains("user switched"));
        assert_eq!(&*e.decided_by, "session toggle \"http_*\"");
        assert!(!p.visible("http_get", None, None, &session));
        session.enable("http_*").unwrap();
        let e = p.evaluate(&CallRequest::new("http_get", &args), &session);
        assert_eq!(e.decision, Decision::Allow);
        assert!(p.visible("http_get", None, None, &session));
    }

    #[test]
    fn a_switched_off_name_holds_for_the_tool_a_clash_renamed() {
        let p = build(Policy::builder().rule(Rule::allow("*")));
        let mut session = SessionToggles::new();
        session.disable("http_get").unwrap();
        let args = json!({});
        let renamed = CallRequest::new("web__http_get", &args).declared("http_get");
        assert_eq!(p.evaluate(&renamed, &session).decision, Decision::Deny);
        assert!(!p.visible_as("web__http_get", "http_get", Some("web"), None, &session));
    }

    #[test]
    fn outright_deny_is_hidden_and_argument_dependent_deny_is_visible() {
        let p = build(
            Policy::builder()
                .rule(Rule::deny("http_get"))
                .rule(Rule::deny("read_file").arg_path("path", "/etc/**"))
                .rule(Rule::deny("exec").plugin("shell")),
        );
        let s = SessionToggles::new();
        assert!(!p.visible("http_get", None, None, &s));
        assert!(p.visible("read_file", None, None, &s));
        assert!(p.visible("other", None, None, &s));
        assert!(!p.visible("exec", Some("shell"), None, &s));
        assert!(p.visible("exec", Some("other"), None, &s));
    }

    #[test]
    fn default_deny_hides_tools_unless_an_allow_or_ask_rule_could_match() {
        let p = build(
            Policy::builder()
                .default(Decision::Deny)
                .rule(Rule::allow("http_get").arg_host("url", "*.example.com"))
                .rule(Rule::ask("read_*"))
                .rule(Rule::deny("write_file").arg_glob("path", "*.md")),
        );
        let s = SessionToggles::new();
        assert!(p.visible("http_get", None, None, &s));
        assert!(p.visible("read_file", None, None, &s));
        assert!(!p.visible("write_file", None, None, &s));
        assert!(!p.visible("exec", None, None, &s));
    }

    #[test]
    fn visibility_follows_profiles() {
        let p = build(
            Policy::builder()
                .rule(Rule::deny("http_get"))
                .rule(Rule::allow("read_file"))
                .profile(
                    "reviewer",
                    Profile::new()
                        .default(Decision::Deny)
                        .rule(Rule::allow("http_get").arg_host("url", "docs.rs"))
                        .rule(Rule::deny("read_file")),
                )
                .profile("strict", Profile::new().default(Decision::Deny)),
        );
        let s = SessionToggles::new();
        // The profile's conditional allow can rescue a base outright deny.
        assert!(p.visible("http_get", None, Some("reviewer"), &s));
        assert!(!p.visible("http_get", None, None, &s));
        // A profile outright deny hides whatever the base says.
        assert!(!p.visible("read_file", None, Some("reviewer"), &s));
        assert!(p.visible("read_file", None, None, &s));
        // The profile default deny hides tools no rule could allow.
        assert!(!p.visible("exec", None, Some("reviewer"), &s));
        assert!(p.visible("exec", None, Some("nobody"), &s));
        // A base allow rule still applies under a profile with no matching rule.
        assert!(p.visible("read_file", None, Some("strict"), &s));
        assert!(!p.visible("exec", None, Some("strict"), &s));
    }

    #[test]
    fn visible_agrees_with_evaluate_on_outright_decisions() {
        let p = build(
            Policy::builder()
                .default(Decision::Deny)
                .rule(Rule::deny("a"))
                .rule(Rule::allow("b"))
                .profile(
                    "r",
                    Profile::new().rule(Rule::allow("a")).rule(Rule::deny("b")),
                ),
        );
        let s = SessionToggles::new();
        for agent in [None, Some("r"), Some("x")] {
            for tool in ["a", "b", "c"] {
                let args = json!({});
                let mut call = CallRequest::new(tool, &args);
                call.agent = agent;
                let denied = p.evaluate(&call, &s).decision == Decision::Deny;
                assert_eq!(
                    p.visible(tool, None, agent, &s),
                    !denied,
                    "{agent:?} {tool}"
                );
            }
        }
    }

    #[test]
    fn builder_errors_name_the_rule() {
        let e = Policy::builder()
            .rule(Rule::allow("ok"))
            .rule(Rule::deny("x").arg_host("url", "exa*mple.com"))
            .build()
            .unwrap_err();
        assert!(
            e.to_string().starts_with("rule 2: invalid host pattern"),
            "{e}"
        );
        let e = Policy::builder()
            .profile("r", Profile::new().rule(Rule::deny("[")))
            .build()
            .unwrap_err();
        assert!(
            e.to_string().starts_with("profile r, rule 1: invalid glob"),
            "{e}"
        );
        let e = Policy::builder()
            .always_allow(["ok", "{"])
            .build()
            .unwrap_err();
        assert!(
            e.to_string().starts_with("always-allow[1]: invalid glob"),
            "{e}"
        );
    }

    #[test]
    fn builder_profile_with_the_same_name_replaces_the_earlier_one() {
        let p = build(
            Policy::builder()
                .profile("r", Profile::new().default(Decision::Deny))
                .profile("r", Profile::new().default(Decision::Ask)),
        );
        assert_eq!(eval_as(&p, "r", "x").decision, Decision::Ask);
    }

    #[test]
    fn evaluation_serialises_for_events() {
        let p = build(Policy::builder().rule(Rule::deny("x").reason("no")));
        let e = eval(&p, "x", json!({}));
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"decision": "deny", "source": "rule", "reason": "no", "decided_by": "rule 1 (x, deny)"})
        );
    }
}
