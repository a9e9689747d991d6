//! Building a [`Policy`]: in code ([`PolicyBuilder`]) or from a file
//! (`file.rs`), both compiled here into the rules [`Policy`] evaluates, with
//! errors located by where the policy came from ([`Origin`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::decision::Decision;
use crate::error::PolicyError;
use crate::pattern::{NameGlob, name_glob};
use crate::policy::{AlwaysAllow, CompiledProfile, Policy};
use crate::rule::{CompiledRule, Profile, Rule, RulePart, RuleSet};

impl Policy {
    /// Starts a policy in code; see [`PolicyBuilder`].
    pub fn builder() -> PolicyBuilder {
        <PolicyBuilder as Default>::default()
    }
}

/// Builds a [`Policy`] in code, with the same structure as a policy file.
///
/// ```
/// use toolhost_policy::{Decision, Policy, Profile, Rule};
///
/// let policy = Policy::builder()
///     .default(Decision::Allow)
///     .approve_results(["http_get"])
///     .always_allow(["list_dir"])
///     .rule(Rule::deny("http_get").reason("no network in this project"))
///     .rule(Rule::ask("read_file").plugin("fs"))
///     .rule(Rule::allow("http_get").arg_host("url", "*.example.com"))
///     .profile("reviewer", Profile::new().default(Decision::Deny).rule(Rule::allow("read_file")))
///     .build()
///     .unwrap();
/// assert!(policy.approve_result("http_get", None));
/// ```
#[derive(Debug, Clone, Default)]
pub struct PolicyBuilder {
    pub(crate) default: Decision,
    pub(crate) approve_results: Vec<String>,
    pub(crate) always_allow: Vec<String>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) profiles: Vec<(String, Profile)>,
}

impl PolicyBuilder {
    /// The decision for calls no rule matches (allow unless set).
    pub fn default(mut self, decision: Decision) -> Self {
        self.default = decision;
        self
    }

    /// Adds a rule.
    pub fn rule(mut self, rule: Rule) -> Self {
        self.rules.push(rule);
        self
    }

    /// Adds rules.
    pub fn rules(mut self, rules: impl IntoIterator<Item = Rule>) -> Self {
        self.rules.extend(rules);
        self
    }

    /// Adds (or replaces) the profile for the agent named `agent`.
    pub fn profile(mut self, agent: impl Into<String>, profile: Profile) -> Self {
        let agent = agent.into();
        self.profiles.retain(|(name, _)| *name != agent);
        self.profiles.push((agent, profile));
        self
    }

    /// Adds tool globs whose results the user approves before the model sees them.
    pub fn approve_results<I, S>(mut self, globs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.approve_results
            .extend(globs.into_iter().map(Into::into));
        self
    }

    /// Adds tool globs for which an `ask` is answered `allow` without asking.
    pub fn always_allow<I, S>(mut self, globs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.always_allow.extend(globs.into_iter().map(Into::into));
        self
    }

    /// Compiles the policy; fails on a glob or host pattern that does not compile.
    pub fn build(self) -> Result<Policy, PolicyError> {
        compile(&self, &InCode, None)
    }
}

/// A place in a policy, for error messages and rule descriptions.
#[derive(Debug, Clone, Copy)]
pub(crate) enum At<'a> {
    Default,
    ApproveResults(usize),
    AlwaysAllow(usize),
    ProfileDefault(&'a str),
    ProfileApproveResults(&'a str, usize),
    /// A rule (`part: None` for the rule as a whole).
    Rule {
        profile: Option<&'a str>,
        index: usize,
        part: Option<RulePart>,
    },
}

/// Where a policy comes from: turns places into error locations and description suffixes.
pub(crate) trait Origin {
    /// An error about the thing at `at`.
    fn error(&self, at: At<'_>, message: String) -> PolicyError;
    /// ` in policy.toml:14` for things in a file, empty otherwise.
    fn place(&self, at: At<'_>) -> String;
    /// The file, if any.
    fn path(&self) -> Option<&Path>;
}

/// A policy built in code.
struct InCode;

impl Origin for InCode {
    fn error(&self, at: At<'_>, message: String) -> PolicyError {
        let context = match at {
            At::Default => "default".to_owned(),
            At::ApproveResults(i) => format!("approve-results[{i}]"),
            At::AlwaysAllow(i) => format!("always-allow[{i}]"),
            At::ProfileDefault(p) => format!("profile {p}, default"),
            At::ProfileApproveResults(p, i) => format!("profile {p}, approve-results[{i}]"),
            At::Rule { profile, index, .. } => match profile {
                Some(p) => format!("profile {p}, rule {}", index + 1),
                None => format!("rule {}", index + 1),
            },
        };
        PolicyError::Invalid {
            message: format!("{context}: {message}"),
        }
    }

    fn place(&self, _: At<'_>) -> String {
        String::new()
    }

    fn path(&self) -> Option<&Path> {
        None
    }
}

fn compile_globs(
    globs: &[String],
    origin: &dyn Origin,
    at: impl Fn(usize) -> At<'static>,
) -> Result<Box<[NameGlob]>, PolicyError> {
    globs
        .iter()
        .enumerate()
        .map(|(i, g)| name_glob(g).map_err(|e| origin.error(at(i), e)))
        .collect()
}

fn compile_rules(
    rules: &[Rule],
    profile: Option<&str>,
    origin: &dyn Origin,
) -> Result<RuleSet, PolicyError> {
    let mut compiled = Vec::with_capacity(rules.len());
    for (index, rule) in rules.iter().enumerate() {
        let label = match profile {
            Some(p) => format!("rule {} of profile {p}", index + 1),
            None => format!("rule {}", index + 1),
        };
        let whole = At::Rule {
            profile,
            index,
            part: None,
        };
        let place = origin.place(whole);
        let c = CompiledRule::compile(rule, &label, &place).map_err(|(part, e)| {
            let at = At::Rule {
                profile,
                index,
                part: Some(part),
            };
            origin.error(at, e)
        })?;
        compiled.push(c);
    }
    Ok(RuleSet::new(compiled))
}

/// Compiles a policy from its parts; `origin` locates errors.
pub(crate) fn compile(
    spec: &PolicyBuilder,
    origin: &dyn Origin,
    plugins: Option<toml::Table>,
) -> Result<Policy, PolicyError> {
    let approve_results = compile_globs(&spec.approve_results, origin, At::ApproveResults)?;
    let always_allow_globs = compile_globs(&spec.always_allow, origin, At::AlwaysAllow)?;
    let always_allow = always_allow_globs
        .into_vec()
        .into_iter()
        .enumerate()
        .map(|(i, glob)| {
            let description = format!(
                "always-allow {:?}{}",
                glob.as_str(),
                origin.place(At::AlwaysAllow(i))
            );
            AlwaysAllow {
                glob,
                description: description.into(),
            }
        })
        .collect();
    let rules = compile_rules(&spec.rules, None, origin)?;
    let mut profiles = HashMap::with_capacity(spec.profiles.len());
    for (name, p) in &spec.profiles {
        let approve_results = match &p.approve_results {
            Some(globs) => Some(
                globs
                    .iter()
                    .enumerate()
                    .map(|(i, g)| {
                        name_glob(g)
                            .map_err(|e| origin.error(At::ProfileApproveResults(name, i), e))
                    })
                    .collect::<Result<Box<[_]>, _>>()?,
            ),
            None => None,
        };
        let default = p.default.map(|d| {
            let place = origin.place(At::ProfileDefault(name));
            (
                d,
                Arc::from(format!("default ({d}) of profile {name}{place}")),
            )
        });
        let compiled = CompiledProfile {
            default,
            approve_results,
            rules: compile_rules(&p.rules, Some(name), origin)?,
            ask: p.ask,
        };
        profiles.insert(Box::from(name.as_str()), compiled);
    }
    let default_description = format!("default ({}){}", spec.default, origin.place(At::Default));
    Ok(Policy {
        path: origin.path().map(Path::to_path_buf),
        default: spec.default,
        default_description: default_description.into(),
        rules,
        approve_results,
        always_allow,
        profiles,
        plugins,
    })
}
