//! Rules and profiles: as written (the builder types [`Rule`] and [`Profile`]) and as
//! compiled for matching.

use std::sync::Arc;

use serde_json::Value;

use crate::decision::Decision;
use crate::pattern::{ArgMatcher, ArgPattern, ListMatch, NameGlob, name_glob};

/// One rule: a decision for the calls whose tool name (and optionally plugin name and
/// argument values) match its patterns.
///
/// The builder counterpart of a `[[rules]]` table in a policy file.
///
/// ```
/// use toolhost_policy::Rule;
///
/// let rule = Rule::deny("read_file")
///     .plugin("fs")
///     .arg_path("path", "/etc/**")
///     .reason("system files are off limits");
/// # let _ = rule;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub(crate) decision: Decision,
    pub(crate) tool: String,
    pub(crate) plugin: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) args: Vec<(String, ArgPattern)>,
}

impl Rule {
    /// A rule giving `decision` for tools whose name matches the glob `tool`.
    pub fn new(decision: Decision, tool: impl Into<String>) -> Self {
        Rule {
            decision,
            tool: tool.into(),
            plugin: None,
            reason: None,
            args: Vec::new(),
        }
    }

    /// `Rule::new(Decision::Allow, tool)`.
    pub fn allow(tool: impl Into<String>) -> Self {
        Self::new(Decision::Allow, tool)
    }

    /// `Rule::new(Decision::Ask, tool)`.
    pub fn ask(tool: impl Into<String>) -> Self {
        Self::new(Decision::Ask, tool)
    }

    /// `Rule::new(Decision::Deny, tool)`.
    pub fn deny(tool: impl Into<String>) -> Self {
        Self::new(Decision::Deny, tool)
    }

    /// A rule giving `decision` for the reads of resources whose URI matches
    /// the glob `uri` (`*` crosses `/`): a rule on [`READ_RESOURCE`](crate::READ_RESOURCE)
    /// with that glob on its `uri` argument (`resource = "..."` in a file).
    ///
    /// ```
    /// use toolhost_policy::{Decision, Rule};
    /// let rule = Rule::resource(Decision::Deny, "file:///secret/*").plugin("files");
    /// assert_eq!(rule.tool(), toolhost_policy::READ_RESOURCE);
    /// ```
    pub fn resource(decision: Decision, uri: impl Into<String>) -> Self {
        Self::new(decision, crate::READ_RESOURCE).arg_glob(crate::URI_ARG, uri)
    }

    /// A rule giving `decision` for the gets of prompts whose name matches
    /// the glob `name`: a rule on [`GET_PROMPT`](crate::GET_PROMPT) with
    /// that glob on its `name` argument (`prompt = "..."` in a file).
    ///
    /// ```
    /// use toolhost_policy::{Decision, Rule};
    /// let rule = Rule::prompt(Decision::Deny, "secret_*");
    /// assert_eq!(rule.tool(), toolhost_policy::GET_PROMPT);
    /// ```
    pub fn prompt(decision: Decision, name: impl Into<String>) -> Self {
        Self::new(decision, crate::GET_PROMPT).arg_glob(crate::NAME_ARG, name)
    }

    /// Also require the providing plugin's name to match this glob.
    pub fn plugin(mut self, glob: impl Into<String>) -> Self {
        self.plugin = Some(glob.into());
        self
    }

    /// The reason shown to the model and the user when this rule decides.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// Also require argument `key` (a name, or a dotted path into nested objects) to match
    /// `pattern`: a string, a number or boolean by its JSON text (plain globs), or a list
    /// (any element for deny and ask rules, every element for allow rules).
    pub fn arg(mut self, key: impl Into<String>, pattern: ArgPattern) -> Self {
        self.args.push((key.into(), pattern));
        self
    }

    /// `self.arg(key, ArgPattern::Glob(glob))`: a glob on the raw string value.
    pub fn arg_glob(self, key: impl Into<String>, glob: impl Into<String>) -> Self {
        self.arg(key, ArgPattern::Glob(glob.into()))
    }

    /// `self.arg(key, ArgPattern::Path(glob))`: a glob on the normalised path.
    pub fn arg_path(self, key: impl Into<String>, glob: impl Into<String>) -> Self {
        self.arg(key, ArgPattern::Path(glob.into()))
    }

    /// `self.arg(key, ArgPattern::Host(pattern))`: a host pattern on a URL.
    pub fn arg_host(self, key: impl Into<String>, pattern: impl Into<String>) -> Self {
        self.arg(key, ArgPattern::Host(pattern.into()))
    }

    /// The rule's decision.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// The glob on the tool name.
    pub fn tool(&self) -> &str {
        &self.tool
    }
}

/// The settings for one agent, selected by the agent's name.
///
/// The builder counterpart of a `[profiles.<name>]` table. A profile's rules are checked
/// before the base rules; its `default` and `approve-results`, when set, replace the
/// base ones for that agent.
///
/// ```
/// use toolhost_policy::{Decision, Profile, Rule};
///
/// let reviewer = Profile::new()
///     .default(Decision::Deny)
///     .approve_results(Vec::<String>::new())
///     .rule(Rule::allow("read_file"));
/// # let _ = reviewer;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Profile {
    pub(crate) default: Option<Decision>,
    pub(crate) approve_results: Option<Vec<String>>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) ask: Option<crate::AskRoute>,
}

impl Profile {
    /// A profile with no rules that changes nothing.
    pub fn new() -> Self {
        <Self as Default>::default()
    }

    /// The decision for calls no rule matches, for this agent.
    pub fn default(mut self, decision: Decision) -> Self {
        self.default = Some(decision);
        self
    }

    /// Who answers this profile's `ask`s when a server's callers run under
    /// it (`ask = "operator"` in the file).
    pub fn ask(mut self, route: crate::AskRoute) -> Self {
        self.ask = Some(route);
        self
    }

    /// Tool globs whose results the user approves, replacing the base list for this agent
    /// (an empty list means no approval).
    pub fn approve_results<I, S>(mut self, globs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.approve_results = Some(globs.into_iter().map(Into::into).collect());
        self
    }

    /// Adds a rule, checked before the base rules.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }
}

/// Which part of a rule a compile error is about, so file errors can point at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RulePart {
    Tool,
    Plugin,
    Arg(usize),
}

/// The names a call's tool goes by, for matching: the name it is exposed
/// (and called) under, the name its plugin declared when a clash renamed it
/// (`fs__read_file` is `read_file` declared by `fs`), and the plugin.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Names<'a> {
    pub(crate) tool: &'a str,
    pub(crate) declared: Option<&'a str>,
    pub(crate) plugin: Option<&'a str>,
    /// How the call's path arguments resolve (path patterns).
    pub(crate) paths: crate::PathContext<'a>,
}

impl<'a> Names<'a> {
    /// A tool exposed under the name its plugin declared.
    pub(crate) fn of(tool: &'a str, plugin: Option<&'a str>) -> Self {
        Names {
            tool,
            declared: None,
            plugin,
            paths: crate::PathContext::default(),
        }
    }
}

/// A rule ready for matching.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    pub(crate) decision: Decision,
    tool: NameGlob,
    plugin: Option<NameGlob>,
    args: Box<[ArgMatcher]>,
    pub(crate) reason: Option<Arc<str>>,
    /// For example `rule 3 (read_file, ask) in policy.toml:14`.
    pub(crate) description: Arc<str>,
}

impl CompiledRule {
    /// Compiles `rule`; `label` is the start of its description (`rule 3`, `rule 1 of
    /// profile reviewer`) and `place` its end (` in policy.toml:14`, or empty).
    pub(crate) fn compile(
        rule: &Rule,
        label: &str,
        place: &str,
    ) -> Result<Self, (RulePart, String)> {
        // `plugin:tool` names the tool of one plugin (tool names never
        // contain `:`), the same as `tool` with a `plugin` glob.
        let (tool_text, plugin_text) = match (rule.tool.split_once(':'), &rule.plugin) {
            (Some((plugin, tool)), None) => (tool, Some(plugin)),
            (Some(_), Some(_)) => {
                return Err((
                    RulePart::Tool,
                    "names its plugin twice (`plugin:tool` and `plugin`)".to_owned(),
                ));
            }
            (None, plugin) => (rule.tool.as_str(), plugin.as_deref()),
        };
        let tool = name_glob(tool_text).map_err(|e| (RulePart::Tool, e))?;
        let plugin = match plugin_text {
            Some(p) => Some(name_glob(p).map_err(|e| (RulePart::Plugin, e))?),
            None => None,
        };
        // An allow rule matches a list only when every element does; deny
        // and ask rules when any does.
        let lists = match rule.decision {
            Decision::Allow => ListMatch::All,
            Decision::Ask | Decision::Deny => ListMatch::Any,
        };
        let args = rule
            .args
            .iter()
            .enumerate()
            .map(|(i, (key, pat))| {
                ArgMatcher::new(key, pat, lists).map_err(|e| (RulePart::Arg(i), e))
            })
            .collect::<Result<Box<[_]>, _>>()?;
        let from = match &rule.plugin {
            Some(p) => format!(" from {p}"),
            None => String::new(),
        };
        let description = format!("{label} ({}{from}, {}){place}", rule.tool, rule.decision);
        Ok(CompiledRule {
            decision: rule.decision,
            tool,
            plugin,
            args,
            reason: rule.reason.as_deref().map(Arc::from),
            description: description.into(),
        })
    }

    /// Whether the tool and plugin names match (the arguments are not
    /// looked at). The tool pattern may match the exposed name or the
    /// declared one, so a rule written for `read_file` still holds when a
    /// clash exposes the tool as `fs__read_file`.
    #[inline]
    fn names_match(&self, n: Names<'_>) -> bool {
        (self.tool.is_match(n.tool) || n.declared.is_some_and(|d| self.tool.is_match(d)))
            && match (&self.plugin, n.plugin) {
                (None, _) => true,
                (Some(g), Some(p)) => g.is_match(p),
                (Some(_), None) => false,
            }
    }

    #[inline]
    fn matches(&self, n: Names<'_>, args: &Value) -> bool {
        self.names_match(n) && self.args.iter().all(|a| a.is_match_in(args, n.paths))
    }
}

/// What the rules of one set could do to a tool, whatever its arguments.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Reach {
    /// A deny rule without argument patterns matches the tool.
    pub(crate) always_denied: bool,
    /// An allow or ask rule could match the tool (for some arguments).
    pub(crate) maybe_allowed: bool,
    /// A rule with argument patterns matches the tool's names: what it
    /// decides depends on the arguments.
    pub(crate) by_arguments: bool,
}

/// An ordered list of compiled rules.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleSet {
    rules: Box<[CompiledRule]>,
}

impl RuleSet {
    pub(crate) fn new(rules: Vec<CompiledRule>) -> Self {
        RuleSet {
            rules: rules.into_boxed_slice(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }

    /// The deciding rule among those matching the call: the first deny, else the first
    /// ask, else the first allow. `None` when no rule matches.
    pub(crate) fn decide(&self, names: Names<'_>, args: &Value) -> Option<&CompiledRule> {
        let mut best: Option<&CompiledRule> = None;
        for rule in &self.rules {
            if best.is_some_and(|b| b.decision >= rule.decision) {
                continue;
            }
            if rule.matches(names, args) {
                if rule.decision == Decision::Deny {
                    return Some(rule);
                }
                best = Some(rule);
            }
        }
        best
    }

    /// What these rules could decide for the tool, over all possible arguments.
    pub(crate) fn reach(&self, names: Names<'_>) -> Reach {
        let mut reach = Reach::default();
        for rule in &self.rules {
            if !rule.names_match(names) {
                continue;
            }
            if !rule.args.is_empty() {
                reach.by_arguments = true;
            }
            if rule.decision == Decision::Deny {
                if rule.args.is_empty() {
                    reach.always_denied = true;
                    return reach;
                }
            } else {
                reach.maybe_allowed = true;
            }
        }
        reach
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(rules: &[Rule]) -> RuleSet {
        RuleSet::new(
            rules
                .iter()
                .enumerate()
                .map(|(i, r)| CompiledRule::compile(r, &format!("rule {}", i + 1), "").unwrap())
                .collect(),
        )
    }

    #[test]
    fn a_rule_names_a_tool_by_its_exposed_or_declared_name_or_as_plugin_colon_tool() {
        let args = json!({});
        let renamed = Names {
            tool: "fs__read_file",
            declared: Some("read_file"),
            plugin: Some("fs"),
            paths: crate::PathContext::default(),
        };
        let s = set(&[Rule::deny("read_file")]);
        assert!(
            s.decide(renamed, &args).is_some(),
            "renaming escapes no rule"
        );
        let s = set(&[Rule::deny("fs:read_file")]);
        assert!(s.decide(renamed, &args).is_some());
        let other = Names {
            tool: "read_file",
            declared: None,
            plugin: Some("a-tools"),
            paths: crate::PathContext::default(),
        };
        assert!(s.decide(other, &args).is_none(), "only fs's read_file");
        let s = set(&[Rule::deny("fs__read_file")]);
        assert!(s.decide(renamed, &args).is_some(), "the exposed name too");
        let twice = Rule::deny("fs:read_file").plugin("fs");
        assert!(CompiledRule::compile(&twice, "rule 1", "").is_err());
    }

    #[test]
    fn deny_beats_ask_beats_allow_whatever_the_order() {
        let args = json!({});
        let s = set(&[Rule::allow("t"), Rule::ask("t"), Rule::deny("t")]);
        assert_eq!(
            s.decide(Names::of("t", None), &args).unwrap().decision,
            Decision::Deny
        );
        let s = set(&[Rule::deny("t"), Rule::ask("t"), Rule::allow("t")]);
        assert_eq!(
            s.decide(Names::of("t", None), &args).unwrap().decision,
            Decision::Deny
        );
        let s = set(&[Rule::allow("t"), Rule::ask("t")]);
        assert_eq!(
            s.decide(Names::of("t", None), &args).unwrap().decision,
            Decision::Ask
        );
        assert!(s.decide(Names::of("u", None), &args).is_none());
    }

    #[test]
    fn first_rule_of_the_winning_decision_is_reported() {
        let s = set(&[Rule::allow("t"), Rule::ask("*"), Rule::ask("t")]);
        let r = s.decide(Names::of("t", None), &json!({})).unwrap();
        assert_eq!(&*r.description, "rule 2 (*, ask)");
    }

    #[test]
    fn plugin_glob_must_match_and_a_tool_without_plugin_does_not_match_it() {
        let s = set(&[Rule::deny("read_file").plugin("fs*")]);
        let args = json!({});
        assert!(
            s.decide(Names::of("read_file", Some("fs-local")), &args)
                .is_some()
        );
        assert!(
            s.decide(Names::of("read_file", Some("other")), &args)
                .is_none()
        );
        assert!(s.decide(Names::of("read_file", None), &args).is_none());
    }

    #[test]
    fn every_arg_pattern_must_match() {
        let s = set(&[Rule::deny("t").arg_glob("a", "x*").arg_glob("b", "y*")]);
        assert!(
            s.decide(Names::of("t", None), &json!({"a": "x1", "b": "y1"}))
                .is_some()
        );
        assert!(
            s.decide(Names::of("t", None), &json!({"a": "x1", "b": "z"}))
                .is_none()
        );
        assert!(
            s.decide(Names::of("t", None), &json!({"a": "x1"}))
                .is_none()
        );
    }

    #[test]
    fn reach_tells_unconditional_denies_from_argument_dependent_ones() {
        let s = set(&[
            Rule::deny("a"),
            Rule::deny("b").arg_glob("p", "*"),
            Rule::ask("c"),
        ]);
        assert!(s.reach(Names::of("a", None)).always_denied);
        assert!(!s.reach(Names::of("b", None)).always_denied);
        assert!(!s.reach(Names::of("b", None)).maybe_allowed);
        assert!(s.reach(Names::of("c", None)).maybe_allowed);
        assert_eq!(s.reach(Names::of("d", None)), Reach::default());
    }
}
