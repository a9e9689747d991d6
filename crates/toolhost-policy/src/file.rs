//! The policy file: TOML parsed into spanned raw types, checked, and compiled with every
//! error located at its line and column.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use crate::compile::{At, Origin, PolicyBuilder, compile};
use crate::decision::Decision;
use crate::error::{PolicyError, line_column};
use crate::pattern::ArgPattern;
use crate::policy::Policy;
use crate::rule::{Profile, Rule, RulePart};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawPolicy {
    default: Option<Spanned<String>>,
    approve_results: Option<Vec<Spanned<String>>>,
    always_allow: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    rules: Vec<Spanned<RawRule>>,
    #[serde(default)]
    profiles: BTreeMap<String, Spanned<RawProfile>>,
    plugins: Option<toml::Table>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawProfile {
    default: Option<Spanned<String>>,
    approve_results: Option<Vec<Spanned<String>>>,
    ask: Option<Spanned<String>>,
    #[serde(default)]
    rules: Vec<Spanned<RawRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: Option<Spanned<String>>,
    /// A glob on a resource's URI, in place of `tool` (`access.rs`).
    resource: Option<Spanned<String>>,
    /// A glob on a prompt's name, in place of `tool` (`access.rs`).
    prompt: Option<Spanned<String>>,
    /// `server` reads better for a tool source such as an MCP server.
    #[serde(alias = "server")]
    plugin: Option<Spanned<String>>,
    decision: Option<Spanned<String>>,
    reason: Option<String>,
    #[serde(default)]
    args: BTreeMap<String, Spanned<RawArg>>,
}

/// `"glob"`, `{ glob = "..." }`, `{ path = "..." }` or `{ host = "..." }`.
struct RawArg(ArgPattern);

impl<'de> Deserialize<'de> for RawArg {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ArgVisitor)
    }
}

struct ArgVisitor;

impl<'de> Visitor<'de> for ArgVisitor {
    type Value = RawArg;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a glob string, or a table with one of `path`, `host` or `glob`")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<RawArg, E> {
        Ok(RawArg(ArgPattern::Glob(v.to_owned())))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawArg, A::Error> {
        let mut found: Option<ArgPattern> = None;
        while let Some(key) = map.next_key::<String>()? {
            let make: fn(String) -> ArgPattern = match key.as_str() {
                "path" => ArgPattern::Path,
                "host" => ArgPattern::Host,
                "glob" => ArgPattern::Glob,
                other => {
                    return Err(de::Error::custom(format!(
                        "unknown argument pattern `{other}` (expected path, host or glob; \
                         write a nested argument name quoted: args.\"a.b\")"
                    )));
                }
            };
            let value: String = map.next_value()?;
            if found.is_some() {
                return Err(de::Error::custom(
                    "an argument pattern has exactly one of path, host or glob",
                ));
            }
            found = Some(make(value));
        }
        found.map(RawArg).ok_or_else(|| {
            de::Error::custom("empty argument pattern (expected one of path, host or glob)")
        })
    }
}

/// Byte ranges of the parts of one rule.
#[derive(Debug, Default)]
struct RuleSpans {
    whole: Range<usize>,
    tool: Range<usize>,
    plugin: Option<Range<usize>>,
    args: Vec<Range<usize>>,
}

#[derive(Debug, Default)]
struct ProfileSpans {
    default: Option<Range<usize>>,
    approve_results: Vec<Range<usize>>,
    rules: Vec<RuleSpans>,
}

/// A policy file being compiled: its text and where each part of it is.
struct InFile<'a> {
    path: &'a Path,
    text: &'a str,
    default: Option<Range<usize>>,
    approve_results: Vec<Range<usize>>,
    always_allow: Vec<Range<usize>>,
    rules: Vec<RuleSpans>,
    profiles: HashMap<String, ProfileSpans>,
}

impl InFile<'_> {
    fn span(&self, at: At<'_>) -> Option<Range<usize>> {
        match at {
            At::Default => self.default.clone(),
            At::ApproveResults(i) => self.approve_results.get(i).cloned(),
            At::AlwaysAllow(i) => self.always_allow.get(i).cloned(),
            At::ProfileDefault(p) => self.profiles.get(p)?.default.clone(),
            At::ProfileApproveResults(p, i) => {
                self.profiles.get(p)?.approve_results.get(i).cloned()
            }
            At::Rule {
                profile,
                index,
                part,
            } => {
                let rules = match profile {
                    Some(p) => &self.profiles.get(p)?.rules,
                    None => &self.rules,
                };
                let rule = rules.get(index)?;
                match part {
                    None => Some(rule.whole.clone()),
                    Some(RulePart::Tool) => Some(rule.tool.clone()),
                    Some(RulePart::Plugin) => rule.plugin.clone(),
                    Some(RulePart::Arg(i)) => rule.args.get(i).cloned(),
                }
            }
        }
    }

    fn error_at(&self, span: Range<usize>, message: String) -> PolicyError {
        PolicyError::in_file(self.path, self.text, span.start, message)
    }
}

impl Origin for InFile<'_> {
    fn error(&self, at: At<'_>, message: String) -> PolicyError {
        PolicyError::in_file_span(self.path, self.text, self.span(at), message)
    }

    fn place(&self, at: At<'_>) -> String {
        match self.span(at) {
            Some(span) => {
                let (line, _) = line_column(self.text, span.start);
                format!(" in {}:{line}", self.path.display())
            }
            None => String::new(),
        }
    }

    fn path(&self) -> Option<&Path> {
        Some(self.path)
    }
}

fn decision(file: &InFile<'_>, word: &Spanned<String>) -> Result<Decision, PolicyError> {
    word.get_ref()
        .parse()
        .map_err(|e: crate::decision::UnknownDecision| file.error_at(word.span(), e.to_string()))
}

fn globs(list: Option<Vec<Spanned<String>>>) -> (Vec<String>, Vec<Range<usize>>) {
    list.unwrap_or_default()
        .into_iter()
        .map(|g| {
            let span = g.span();
            (g.into_inner(), span)
        })
        .unzip()
}

fn rules(
    file: &InFile<'_>,
    raw: Vec<Spanned<RawRule>>,
) -> Result<(Vec<Rule>, Vec<RuleSpans>), PolicyError> {
    let mut rules = Vec::with_capacity(raw.len());
    let mut spans = Vec::with_capacity(raw.len());
    for r in raw {
        let whole = r.span();
        let r = r.into_inner();
        // A resource or a prompt is judged as a call of an unlisted tool
        // with its URI or name as an argument (`access.rs`).
        let access = match (r.resource, r.prompt) {
            (Some(_), Some(_)) => {
                return Err(file.error_at(
                    whole.clone(),
                    "a rule names a resource or a prompt, not both".into(),
                ));
            }
            (Some(uri), None) => Some((crate::READ_RESOURCE, crate::URI_ARG, uri)),
            (None, Some(name)) => Some((crate::GET_PROMPT, crate::NAME_ARG, name)),
            (None, None) => None,
        };
        if let (Some((_, _, named)), Some(_)) = (&access, &r.tool) {
            return Err(file.error_at(
                named.span(),
                "a rule names a tool, a resource or a prompt, only one of them".into(),
            ));
        }
        // A rule on a plugin (or server) alone covers all its tools.
        let tool = match (&access, r.tool, &r.plugin) {
            (Some((tool, _, named)), _, _) => Spanned::new(named.span(), (*tool).to_owned()),
            (None, Some(tool), _) => tool,
            (None, None, Some(p)) => Spanned::new(p.span(), "*".to_owned()),
            (None, None, None) => {
                return Err(file.error_at(
                    whole.clone(),
                    "rule without `tool` or `plugin`/`server` (a glob on the tool name, \
                     or on the plugin or MCP server that provides it)"
                        .into(),
                ));
            }
        };
        let word = r.decision.ok_or_else(|| {
            file.error_at(
                whole.clone(),
                "rule without `decision` (expected allow, ask or deny)".into(),
            )
        })?;
        let mut rule = Rule::new(decision(file, &word)?, tool.get_ref().clone());
        let mut s = RuleSpans {
            whole,
            tool: tool.span(),
            plugin: None,
            args: Vec::with_capacity(r.args.len()),
        };
        if let Some(p) = r.plugin {
            s.plugin = Some(p.span());
            rule = rule.plugin(p.into_inner());
        }
        if let Some(reason) = r.reason {
            rule = rule.reason(reason);
        }
        if let Some((_, key, named)) = access {
            s.args.push(named.span());
            rule = rule.arg(key, ArgPattern::Glob(named.into_inner()));
        }
        for (key, pattern) in r.args {
            s.args.push(pattern.span());
            rule = rule.arg(key, pattern.into_inner().0);
        }
        rules.push(rule);
        spans.push(s);
    }
    Ok((rules, spans))
}

/// Policies from files: the entry points that read TOML.
impl Policy {
    /// Reads and compiles the policy file at `path`.
    ///
    /// Every mistake in the file is an error with its line and column; a file with a
    /// mistake never gives a partly read policy.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, PolicyError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml(&text, path)
    }

    /// Compiles the policy in `text`; `origin` is the file it came from, used in error
    /// messages and rule descriptions (it is not read).
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, PolicyError> {
        let policy = parse(text, origin)?;
        let (rules, profiles) = policy.counts();
        tracing::debug!(path = %origin.display(), rules, profiles, "policy loaded");
        Ok(policy)
    }
}

/// Parses and compiles the policy file `text` read from `path`.
pub(crate) fn parse(text: &str, path: &Path) -> Result<Policy, PolicyError> {
    let raw: RawPolicy = toml::from_str(text).map_err(|e| {
        PolicyError::in_file_span(path, text, e.span(), e.message().trim_end().to_owned())
    })?;
    let mut file = InFile {
        path,
        text,
        default: None,
        approve_results: Vec::new(),
        always_allow: Vec::new(),
        rules: Vec::new(),
        profiles: HashMap::new(),
    };
    let mut spec = <PolicyBuilder as Default>::default();
    if let Some(word) = &raw.default {
        spec.default = decision(&file, word)?;
        file.default = Some(word.span());
    }
    (spec.approve_results, file.approve_results) = globs(raw.approve_results);
    (spec.always_allow, file.always_allow) = globs(raw.always_allow);
    (spec.rules, file.rules) = rules(&file, raw.rules)?;
    for (name, p) in raw.profiles {
        let p = p.into_inner();
        let mut profile = Profile::new();
        let mut spans = ProfileSpans::default();
        if let Some(word) = &p.default {
            profile.default = Some(decision(&file, word)?);
            spans.default = Some(word.span());
        }
        if let Some(word) = &p.ask {
            profile.ask = Some(word.get_ref().parse().map_err(
                |e: crate::decision::UnknownAskRoute| file.error_at(word.span(), e.to_string()),
            )?);
        }
        if p.approve_results.is_some() {
            let (globs, s) = globs(p.approve_results);
            profile.approve_results = Some(globs);
            spans.approve_results = s;
        }
        (profile.rules, spans.rules) = rules(&file, p.rules)?;
        file.profiles.insert(name.clone(), spans);
        spec.profiles.push((name, profile));
    }
    compile(&spec, &file, raw.plugins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CallRequest, Source};
    use crate::session::SessionToggles;
    use serde_json::json;

    #[test]
    fn a_profile_says_who_answers_its_asks_and_an_unknown_word_is_an_error_at_its_place() {
        let p = parse(
            "[profiles.remote]\nask = \"operator\"\n",
            Path::new("p.toml"),
        )
        .unwrap();
        assert_eq!(p.ask_route(Some("remote")), Some(crate::AskRoute::Operator));
        assert_eq!(p.ask_route(Some("other")), None);
        let e = parse("[profiles.remote]\nask = \"boss\"\n", Path::new("p.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("boss") && e.contains("p.toml:2"), "{e}");
    }

    const EXAMPLE: &str = r#"# Decision for a call no rule matches.
default = "allow"

# Results shown to the user first.
approve-results = ["http_get"]

always-allow = ["list_dir"]

[[rules]]
tool = "http_get"
decision = "deny"
reason = "no network in this project"

[[rules]]
tool = "read_file"
plugin = "fs"
decision = "ask"

[[rules]]
tool = "read_file"
decision = "deny"
args.path = { path = "/etc/**" }

[[rules]]
tool = "http_get"
decision = "allow"
args.url = { host = "*.example.com" }

[[rules]]
tool = "write_*"
decision = "ask"
args.path = "*.md"

[profiles.reviewer]
default = "deny"
approve-results = []
[[profiles.reviewer.rules]]
tool = "read_file"
decision = "allow"

[plugins.fs]
dirs = [{ path = ".", access = "read-only" }]
"#;

    fn example() -> Policy {
        Policy::from_toml(EXAMPLE, Path::new("policy.toml")).unwrap()
    }

    fn err(text: &str) -> String {
        match Policy::from_toml(text, Path::new("policy.toml")) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    fn decide(
        p: &Policy,
        tool: &str,
        plugin: Option<&str>,
        agent: Option<&str>,
        args: serde_json::Value,
    ) -> Decision {
        let call = CallRequest {
            declared: None,
            paths: crate::PathContext::default(),
            tool,
            plugin,
            agent,
            args: &args,
        };
        p.evaluate(&call, &SessionToggles::new()).decision
    }

    #[test]
    fn example_file_parses_and_decides() {
        let p = example();
        assert_eq!(p.path(), Some(Path::new("policy.toml")));
        assert_eq!(
            decide(
                &p,
                "http_get",
                None,
                None,
                json!({"url": "https://a.example.com"})
            ),
            Decision::Deny
        );
        assert_eq!(
            decide(
                &p,
                "read_file",
                Some("fs"),
                None,
                json!({"path": "/home/x"})
            ),
            Decision::Ask
        );
        assert_eq!(
            decide(
                &p,
                "read_file",
                Some("fs"),
                None,
                json!({"path": "/etc/../etc/passwd"})
            ),
            Decision::Deny
        );
        assert_eq!(
            decide(
                &p,
                "read_file",
                Some("other"),
                None,
                json!({"path": "/home/x"})
            ),
            Decision::Allow
        );
        assert_eq!(
            decide(&p, "write_file", None, None, json!({"path": "a/b.md"})),
            Decision::Ask
        );
        assert_eq!(
            decide(&p, "write_file", None, None, json!({"path": "a/b.rs"})),
            Decision::Allow
        );
        assert_eq!(
            decide(&p, "list_dir", None, None, json!({})),
            Decision::Allow
        );
        assert_eq!(
            decide(
                &p,
                "read_file",
                Some("fs"),
                Some("reviewer"),
                json!({"path": "/etc/passwd"})
            ),
            Decision::Allow
        );
        assert_eq!(
            decide(&p, "exec", None, Some("reviewer"), json!({})),
            Decision::Deny
        );
        assert!(p.approve_result("http_get", None));
        assert!(!p.approve_result("http_get", Some("reviewer")));
        let s = SessionToggles::new();
        assert!(!p.visible("http_get", None, None, &s));
        assert!(p.visible("read_file", Some("fs"), None, &s));
        assert!(!p.visible("exec", None, Some("reviewer"), &s));
    }

    #[test]
    fn descriptions_name_the_rule_the_file_and_the_line() {
        let p = example();
        let args = json!({});
        let s = SessionToggles::new();
        let e = p.evaluate(&CallRequest::new("http_get", &args), &s);
        assert_eq!(&*e.decided_by, "rule 1 (http_get, deny) in policy.toml:9");
        assert_eq!(e.reason.as_deref(), Some("no network in this project"));
        let e = p.evaluate(&CallRequest::new("read_file", &args).plugin("fs"), &s);
        assert_eq!(
            &*e.decided_by,
            "rule 2 (read_file from fs, ask) in policy.toml:14"
        );
        let e = p.evaluate(&CallRequest::new("read_file", &args).agent("reviewer"), &s);
        assert_eq!(
            &*e.decided_by,
            "rule 1 of profile reviewer (read_file, allow) in policy.toml:37"
        );
        let e = p.evaluate(&CallRequest::new("x", &args).agent("reviewer"), &s);
        assert_eq!(
            &*e.decided_by,
            "default (deny) of profile reviewer in policy.toml:35"
        );
        let e = p.evaluate(&CallRequest::new("x", &args), &s);
        assert_eq!(&*e.decided_by, "default (allow) in policy.toml:2");
        let e = p.evaluate(&CallRequest::new("list_dir", &args), &s);
        assert_eq!(e.source, Source::Default);
        let ask = Policy::from_toml(
            "default = \"ask\"\nalways-allow = [\"list_dir\"]\n",
            Path::new("p.toml"),
        )
        .unwrap();
        let e = ask.evaluate(&CallRequest::new("list_dir", &args), &s);
        assert_eq!(&*e.decided_by, "always-allow \"list_dir\" in p.toml:2");
    }

    #[test]
    fn plugins_table_is_kept_raw() {
        let p = example();
        let plugins = p.raw_plugins().unwrap();
        let fs = plugins["fs"].as_table().unwrap();
        assert_eq!(fs["dirs"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn empty_file_is_allow_all() {
        let p = Policy::from_toml("", Path::new("p.toml")).unwrap();
        assert_eq!(decide(&p, "x", None, None, json!({})), Decision::Allow);
    }

    #[test]
    fn file_and_builder_give_the_same_evaluations() {
        let built = Policy::builder()
            .default(Decision::Allow)
            .approve_results(["http_get"])
            .always_allow(["list_dir"])
            .rule(Rule::deny("http_get").reason("no network in this project"))
            .rule(Rule::ask("read_file").plugin("fs"))
            .rule(Rule::deny("read_file").arg_path("path", "/etc/**"))
            .rule(Rule::allow("http_get").arg_host("url", "*.example.com"))
            .rule(Rule::ask("write_*").arg_glob("path", "*.md"))
            .profile(
                "reviewer",
                Profile::new()
                    .default(Decision::Deny)
                    .approve_results(Vec::<String>::new())
                    .rule(Rule::allow("read_file")),
            )
            .build()
            .unwrap();
        let file = example();
        let s = SessionToggles::new();
        let tools = ["http_get", "read_file", "write_file", "list_dir", "exec"];
        let plugins = [None, Some("fs"), Some("other")];
        let agents = [None, Some("reviewer"), Some("coder")];
        let argss = [
            json!({}),
            json!({"path": "/etc/passwd"}),
            json!({"path": "/etc/x/../../home/a.md"}),
            json!({"url": "https://a.example.com/"}),
            json!({"url": "https://example.com.evil.net/"}),
        ];
        for tool in tools {
            for plugin in plugins {
                for agent in agents {
                    for args in &argss {
                        let call = CallRequest {
                            declared: None,
                            paths: crate::PathContext::default(),
                            tool,
                            plugin,
                            agent,
                            args,
                        };
                        let (a, b) = (built.evaluate(&call, &s), file.evaluate(&call, &s));
                        assert_eq!(
                            (a.decision, a.source, &a.reason),
                            (b.decision, b.source, &b.reason),
                            "{call:?}"
                        );
                        // Only the location differs in the descriptions.
                        assert!(
                            b.decided_by.starts_with(&*a.decided_by),
                            "{} / {}",
                            a.decided_by,
                            b.decided_by
                        );
                    }
                    assert_eq!(
                        built.visible(tool, plugin, agent, &s),
                        file.visible(tool, plugin, agent, &s)
                    );
                    assert_eq!(
                        built.approve_result(tool, agent),
                        file.approve_result(tool, agent)
                    );
                }
            }
        }
    }

    #[test]
    fn syntax_error_is_located() {
        assert_eq!(
            err("default = \"allow\"\ndefault = = 1\n"),
            "policy.toml:2:11: extra `=`, expected nothing"
        );
        let e = err("[[rules]\n");
        assert!(e.starts_with("policy.toml:1:"), "{e}");
    }

    #[test]
    fn unknown_key_is_located() {
        assert_eq!(
            err("default = \"allow\"\n\n[[rules]]\ntool = \"x\"\ndecison = \"deny\"\n"),
            "policy.toml:5:1: unknown field `decison`, expected one of `tool`, `resource`, `prompt`, `plugin`, `server`, `decision`, `reason`, `args`"
        );
        let e = err("[profiles.r]\nrule = []\n");
        assert!(
            e.starts_with("policy.toml:2:1: unknown field `rule`"),
            "{e}"
        );
        let e = err("limits = 3\n");
        assert!(
            e.starts_with("policy.toml:1:1: unknown field `limits`"),
            "{e}"
        );
    }

    #[test]
    fn bad_decision_word_is_located() {
        let text = "[[rules]]\ntool = \"read_file\"\ndecision = \"maybe\"\n";
        assert_eq!(
            err(text),
            "policy.toml:3:12: unknown decision \"maybe\" (expected allow, ask or deny)"
        );
        assert_eq!(
            err("default = \"nope\"\n"),
            "policy.toml:1:11: unknown decision \"nope\" (expected allow, ask or deny)"
        );
        let e = err("[profiles.r]\ndefault = \"Allow\"\n");
        assert!(
            e.starts_with("policy.toml:2:11: unknown decision \"Allow\""),
            "{e}"
        );
    }

    #[test]
    fn a_server_rule_covers_every_tool_of_that_server() {
        let text = "[[rules]]\nserver = \"git\"\ndecision = \"deny\"\n";
        let p = Policy::from_toml(text, Path::new("policy.toml")).unwrap();
        let at = |tool: &str, plugin: &str| decide(&p, tool, Some(plugin), None, json!({}));
        assert_eq!(at("git__status", "git"), Decision::Deny);
        assert_eq!(at("git__log", "git"), Decision::Deny);
        assert_eq!(at("git__status", "time"), Decision::Allow);
        assert!(!p.visible("git__log", Some("git"), None, &SessionToggles::new()));
    }

    #[test]
    fn resource_and_prompt_rules_decide_reads_and_gets_and_deny_wins() {
        let text = "[[rules]]\nresource = \"file:///secret/*\"\ndecision = \"deny\"\n\
                    [[rules]]\nprompt = \"leak_*\"\nserver = \"docs\"\ndecision = \"deny\"\n\
                    [[rules]]\nresource = \"*\"\ndecision = \"allow\"\n";
        let p = Policy::from_toml(text, Path::new("policy.toml")).unwrap();
        let read = |uri: &str| {
            decide(
                &p,
                crate::READ_RESOURCE,
                Some("docs"),
                None,
                json!({"uri": uri}),
            )
        };
        assert_eq!(read("file:///secret/a/b.pem"), Decision::Deny);
        assert_eq!(read("file:///public/a"), Decision::Allow);
        let get = |name: &str, server: &str| {
            decide(
                &p,
                crate::GET_PROMPT,
                Some(server),
                None,
                json!({"name": name}),
            )
        };
        assert_eq!(get("leak_all", "docs"), Decision::Deny);
        assert_eq!(get("leak_all", "other"), Decision::Allow);
        assert_eq!(get("summary", "docs"), Decision::Allow);
        // A resource rule says nothing about tools.
        assert_eq!(
            decide(
                &p,
                "read_file",
                None,
                None,
                json!({"uri": "file:///secret/x"})
            ),
            Decision::Allow
        );
        let e = err("[[rules]]\nresource = \"a\"\nprompt = \"b\"\ndecision = \"deny\"\n");
        assert!(e.contains("not both"), "{e}");
        let e = err("[[rules]]\ntool = \"a\"\nprompt = \"b\"\ndecision = \"deny\"\n");
        assert!(e.contains("only one of them"), "{e}");
    }

    #[test]
    fn rule_without_tool_or_decision_is_located() {
        let e = err("default = \"ask\"\n\n[[rules]]\ndecision = \"deny\"\n");
        assert_eq!(
            e,
            "policy.toml:3:1: rule without `tool` or `plugin`/`server` (a glob on the tool name, \
             or on the plugin or MCP server that provides it)"
        );
        let e = err("[[rules]]\ntool = \"x\"\ndecision = \"ask\"\n[[rules]]\ntool = \"y\"\n");
        assert_eq!(
            e,
            "policy.toml:4:1: rule without `decision` (expected allow, ask or deny)"
        );
        let e = err("rules = [{ tool = \"x\", decision = \"ask\" }, { decision = \"ask\" }]\n");
        assert!(
            e.starts_with("policy.toml:1:44: rule without `tool`"),
            "{e}"
        );
    }

    #[test]
    fn bad_glob_is_located() {
        let e = err("[[rules]]\ntool = \"read_[file\"\ndecision = \"deny\"\n");
        assert!(
            e.starts_with("policy.toml:2:8: invalid glob \"read_[file\""),
            "{e}"
        );
        let e = err("[[rules]]\ntool = \"x\"\nplugin = \"{a\"\ndecision = \"deny\"\n");
        assert!(
            e.starts_with("policy.toml:3:10: invalid glob \"{a\""),
            "{e}"
        );
        let e = err("always-allow = [\"ok\", \"[\"]\n");
        assert!(e.starts_with("policy.toml:1:23: invalid glob \"[\""), "{e}");
        let e = err("[profiles.r]\napprove-results = [\"[\"]\n");
        assert!(e.starts_with("policy.toml:2:20: invalid glob"), "{e}");
        let e = err(
            "[[rules]]\ntool = \"x\"\ndecision = \"deny\"\nargs.path = { path = \"/etc/[\" }\n",
        );
        assert!(e.starts_with("policy.toml:4:13: invalid glob"), "{e}");
        let e = err("[profiles.r]\n[[profiles.r.rules]]\ntool = \"[\"\ndecision = \"deny\"\n");
        assert!(e.starts_with("policy.toml:3:8: invalid glob"), "{e}");
    }

    #[test]
    fn bad_host_pattern_is_located() {
        let e = err(
            "[[rules]]\ntool = \"http_get\"\ndecision = \"allow\"\nargs.url = { host = \"exa*mple.com\" }\n",
        );
        assert!(
            e.starts_with("policy.toml:4:12: invalid host pattern `exa*mple.com`"),
            "{e}"
        );
    }

    #[test]
    fn bad_argument_pattern_shapes_are_located() {
        let base = "[[rules]]\ntool = \"t\"\ndecision = \"deny\"\n";
        let e = err(&format!("{base}args.path = {{ pth = \"/etc\" }}\n"));
        assert!(e.starts_with("policy.toml:4:"), "{e}");
        assert!(e.contains("unknown argument pattern `pth`"), "{e}");
        let e = err(&format!(
            "{base}args.path = {{ path = \"/etc\", host = \"x\" }}\n"
        ));
        assert!(
            e.starts_with("policy.toml:4:") && e.contains("exactly one"),
            "{e}"
        );
        let e = err(&format!("{base}args.path = 3\n"));
        assert!(e.starts_with("policy.toml:4:13:"), "{e}");
        let e = err(&format!("{base}args.path = {{ path = 3 }}\n"));
        assert!(e.starts_with("policy.toml:4:"), "{e}");
        let e = err(&format!("{base}args.a.b = \"x\"\n"));
        assert!(
            e.contains("args.\\\"a.b\\\"") || e.contains("args.\"a.b\""),
            "{e}"
        );
        let e = err(&format!("{base}args.\"a..b\" = \"x\"\n"));
        assert!(
            e.starts_with("policy.toml:4:") && e.contains("invalid argument name"),
            "{e}"
        );
    }

    #[test]
    fn quoted_dotted_argument_name_reaches_into_objects() {
        let text = "[[rules]]\ntool = \"t\"\ndecision = \"deny\"\nargs.\"req.url\" = { host = \"evil.net\" }\n";
        let p = Policy::from_toml(text, Path::new("p.toml")).unwrap();
        assert_eq!(
            decide(
                &p,
                "t",
                None,
                None,
                json!({"req": {"url": "https://evil.net/"}})
            ),
            Decision::Deny
        );
        assert_eq!(
            decide(&p, "t", None, None, json!({"req.url": "https://evil.net/"})),
            Decision::Allow
        );
    }

    #[test]
    fn wrong_types_are_located() {
        let e = err("approve-results = \"http_get\"\n");
        assert!(e.starts_with("policy.toml:1:19:"), "{e}");
        let e = err("[[rules]]\ntool = 3\ndecision = \"deny\"\n");
        assert!(e.starts_with("policy.toml:2:8:"), "{e}");
    }

    #[test]
    fn load_reads_the_file_and_reports_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.toml");
        std::fs::write(&path, EXAMPLE).unwrap();
        let p = Policy::load(&path).unwrap();
        assert_eq!(p.path(), Some(path.as_path()));
        let missing = dir.path().join("missing.toml");
        let e = Policy::load(&missing).unwrap_err();
        assert!(matches!(e, PolicyError::Read { .. }));
        assert!(
            e.to_string()
                .contains("missing.toml: cannot read the policy"),
            "{e}"
        );
    }
}
