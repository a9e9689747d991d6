//! Patterns: globs on tool and plugin names, and the three kinds of argument pattern
//! (a glob on the raw string, a glob on a lexically normalised path, a host pattern on a
//! URL). Everything is compiled once, when the policy is loaded or built.

use std::fmt;

use serde_json::Value;
use std::path::Path;
pub(crate) use toolhost_patterns::NameGlob;

use toolhost_patterns::{HostPattern, PathGlob};

use crate::PathContext;

/// Compiles a name glob (tool, plugin), with the message for the policy's errors.
pub(crate) fn name_glob(pattern: &str) -> Result<NameGlob, String> {
    NameGlob::new(pattern).map_err(|e| e.to_string())
}

/// A pattern on the value of one argument of a tool call.
///
/// ```
/// use toolhost_policy::ArgPattern;
///
/// // In a policy file: args.path = "*.md", args.path = { path = "/etc/**" },
/// // args.url = { host = "*.example.com" }.
/// let patterns = [
///     ArgPattern::Glob("*.md".into()),
///     ArgPattern::Path("/etc/**".into()),
///     ArgPattern::Host("*.example.com".into()),
/// ];
/// assert_eq!(patterns[1].to_string(), "path /etc/**");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ArgPattern {
    /// A glob on the raw string value, where `*` also crosses `/`
    /// (file form: a plain string, or `{ glob = "..." }`).
    Glob(String),
    /// A glob on a path (file form: `{ path = "..." }`). The value is normalised
    /// lexically before matching (`.`, `..`, repeated and trailing `/` resolved, so
    /// `/etc/x/../passwd` is `/etc/passwd`); `*` stays within one component and `**`
    /// crosses components. A pattern ending in `/**` also matches the directory itself.
    Path(String),
    /// A host pattern on a URL value (file form: `{ host = "..." }`): `*`, `host`, or
    /// `*.domain` (any subdomain of `domain`, not `domain` itself), then an optional
    /// `:port`, optionally preceded by `scheme://`. The value's real host is used, so
    /// `http://example.com@evil.net/` is a request to `evil.net`.
    Host(String),
}

impl fmt::Display for ArgPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgPattern::Glob(p) => write!(f, "glob {p}"),
            ArgPattern::Path(p) => write!(f, "path {p}"),
            ArgPattern::Host(p) => write!(f, "host {p}"),
        }
    }
}

/// One compiled `args.<key>` pattern of a rule.
#[derive(Debug, Clone)]
pub(crate) struct ArgMatcher {
    /// The key split on `.`: a path into nested objects.
    key: Box<[Box<str>]>,
    kind: ArgKind,
    /// How a list of values matches; see [`ArgMatcher::is_match`].
    lists: ListMatch,
}

#[derive(Debug, Clone)]
enum ArgKind {
    Glob(NameGlob),
    /// A path glob; `relative` for a pattern like `secret/**`, which is
    /// matched against paths relative to the tool's base.
    Path {
        glob: PathGlob,
        relative: bool,
    },
    Host(HostPattern),
}

/// How an argument that is a list matches a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListMatch {
    /// When any element matches: for deny and ask rules, so that one bad
    /// element among good ones is still caught.
    Any,
    /// When every element matches (and there is one): for allow rules, so
    /// that one matching element does not let the others through.
    All,
}

impl ArgMatcher {
    /// Compiles the pattern for argument `key` (a name, or a dotted path into objects).
    pub(crate) fn new(key: &str, pattern: &ArgPattern, lists: ListMatch) -> Result<Self, String> {
        if key.is_empty() || key.split('.').any(str::is_empty) {
            return Err(format!(
                "invalid argument name {key:?} (a name, or names joined by `.`)"
            ));
        }
        let kind = match pattern {
            ArgPattern::Glob(p) => ArgKind::Glob(name_glob(p)?),
            ArgPattern::Path(p) => ArgKind::Path {
                glob: PathGlob::new(p).map_err(|e| e.to_string())?,
                relative: !p.starts_with('/'),
            },
            ArgPattern::Host(p) => ArgKind::Host(HostPattern::new(p).map_err(|e| e.to_string())?),
        };
        Ok(ArgMatcher {
            key: key.split('.').map(Box::from).collect(),
            kind,
            lists,
        })
    }

    /// Whether the argument is present and matches. A string matches by its
    /// text; a number or boolean by its JSON text, for a plain glob only; a
    /// list by its elements ([`ListMatch`]); objects and null never match.
    #[cfg(test)]
    pub(crate) fn is_match(&self, args: &Value) -> bool {
        self.is_match_in(args, PathContext::default())
    }

    /// [`is_match`](Self::is_match) for a call whose path arguments resolve
    /// as `paths` says (see [`ArgMatcher::path_forms`]).
    pub(crate) fn is_match_in(&self, args: &Value, paths: PathContext<'_>) -> bool {
        let mut v = args;
        for seg in &self.key {
            match v.get(&**seg) {
                Some(next) => v = next,
                None => return false,
            }
        }
        match v {
            Value::Array(items) => match self.lists {
                ListMatch::Any => items
                    .iter()
                    .any(|item| self.scalar_match(item, paths, None)),
                ListMatch::All => {
                    !items.is_empty()
                        && items
                            .iter()
                            .all(|item| self.scalar_match(item, paths, None))
                }
            },
            // The argument a per-call grant opened: where what it opened is.
            scalar => self.scalar_match(scalar, paths, paths.opened_at(&self.key)),
        }
    }

    fn scalar_match(
        &self,
        v: &Value,
        paths: PathContext<'_>,
        opened: Option<Option<&Path>>,
    ) -> bool {
        let path_base = paths.base;
        match (v, &self.kind) {
            (Value::String(s), ArgKind::Glob(g)) => g.is_match(s),
            (Value::String(s), ArgKind::Path { glob, relative }) => {
                // Every spelling of the path the tool will open: as written,
                // resolved against the tool's base, and with symlinks
                // followed; for a relative pattern, those spellings relative
                // to the base. A deny or ask rule matches when any does; an
                // allow rule only when all do (and there is one).
                let mut forms = Self::path_forms(s, path_base, opened);
                if *relative {
                    let escapes;
                    (forms, escapes) = Self::relative_forms(&forms, path_base);
                    // A path that leaves the base is never allowed by a
                    // pattern relative to it.
                    if escapes && self.lists == ListMatch::All {
                        return false;
                    }
                }
                match self.lists {
                    ListMatch::Any => forms.iter().any(|f| glob.is_match(f)),
                    ListMatch::All => !forms.is_empty() && forms.iter().all(|f| glob.is_match(f)),
                }
            }
            (Value::String(s), ArgKind::Host(h)) => h.matches_url(s),
            (Value::Number(_) | Value::Bool(_), ArgKind::Glob(g)) => g.is_match(&v.to_string()),
            _ => false,
        }
    }
}

impl ArgMatcher {
    /// `forms` as a relative pattern sees them: the relative ones as they
    /// are, the absolute ones inside `base` (as written or canonical)
    /// relative to it; an absolute path outside the base has none. Also
    /// says whether a form leaves the base (`..` after normalising, or an
    /// absolute form outside it).
    fn relative_forms(forms: &[String], base: Option<&Path>) -> (Vec<String>, bool) {
        let bases: Vec<std::path::PathBuf> = base
            .into_iter()
            .flat_map(|b| [Some(b.to_path_buf()), std::fs::canonicalize(b).ok()])
            .flatten()
            .collect();
        let mut out = Vec::new();
        let mut escapes = false;
        let mut keep = |rel: String, escapes: &mut bool| {
            let normal = toolhost_patterns::normalize_path(&rel).into_owned();
            if normal == ".." || normal.starts_with("../") {
                *escapes = true;
            } else {
                out.push(normal);
            }
        };
        for form in forms {
            let path = Path::new(form);
            if path.is_relative() {
                keep(form.clone(), &mut escapes);
                continue;
            }
            let mut inside = false;
            for b in &bases {
                if let Ok(rest) = path.strip_prefix(b) {
                    inside = true;
                    keep(rest.to_string_lossy().into_owned(), &mut escapes);
                }
            }
            escapes |= !inside;
        }
        out.sort();
        out.dedup();
        (out, escapes)
    }

    /// The forms of a path argument a rule is matched against: `raw`; when
    /// it is relative and the call has a base, `base/raw` (how a tool such
    /// as `fs` resolves it, against its first granted directory); and the
    /// canonical path of whichever of those exists (symlinks followed), so
    /// neither a relative spelling nor a symlink inside a grant gets past a
    /// rule written for the real path. For the argument a per-call grant
    /// opened (`opened` is `Some`), the real path is that of the object it
    /// opened, the one the tool will be handed: the file system is not
    /// asked again.
    fn path_forms(raw: &str, base: Option<&Path>, opened: Option<Option<&Path>>) -> Vec<String> {
        let mut forms = vec![raw.to_owned()];
        let path = Path::new(raw);
        let resolved = match base {
            Some(base) if path.is_relative() => {
                let joined = base.join(path);
                forms.push(joined.to_string_lossy().into_owned());
                joined
            }
            _ => path.to_path_buf(),
        };
        match opened {
            Some(Some(real)) => forms.push(real.to_string_lossy().into_owned()),
            Some(None) => {}
            // Only an absolute path is canonicalised: a relative one would
            // be resolved against the host's working directory, which is
            // not what the plugin sees.
            None => {
                if resolved.is_absolute()
                    && let Ok(real) = std::fs::canonicalize(&resolved)
                {
                    forms.push(real.to_string_lossy().into_owned());
                }
            }
        }
        forms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_pattern_holds_for_every_spelling_of_a_path_under_the_base() {
        let scene = tempfile::tempdir().unwrap();
        let base = scene.path().join("grant");
        std::fs::create_dir_all(base.join("secret")).unwrap();
        std::fs::write(base.join("secret/key.txt"), "k").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), base.join("alias")).unwrap();
        let deny = ArgMatcher::new(
            "path",
            &ArgPattern::Path("secret/**".into()),
            ListMatch::Any,
        )
        .unwrap();
        let b = base.display().to_string();
        for spelling in [
            "secret/key.txt".to_owned(),
            "./secret/key.txt".to_owned(),
            "sub/../secret/key.txt".to_owned(),
            format!("{b}/secret/key.txt"),
            format!("{b}//secret/./key.txt"),
            "alias/key.txt".to_owned(),
            format!("{b}/alias/key.txt"),
            "secret/".to_owned(),
        ] {
            assert!(
                deny.is_match_in(
                    &json!({ "path": spelling }),
                    PathContext::default().base(&base)
                ),
                "{spelling}"
            );
        }
        for other in ["public/a.txt".to_owned(), "/etc/passwd".to_owned()] {
            assert!(
                !deny.is_match_in(
                    &json!({ "path": other }),
                    PathContext::default().base(&base)
                ),
                "{other}"
            );
        }
        // An allow rule with a relative pattern never allows a path outside the base.
        let allow =
            ArgMatcher::new("path", &ArgPattern::Path("**".into()), ListMatch::All).unwrap();
        assert!(!allow.is_match_in(
            &json!({ "path": "/etc/passwd" }),
            PathContext::default().base(&base)
        ));
        assert!(!allow.is_match_in(
            &json!({ "path": "../outside" }),
            PathContext::default().base(&base)
        ));
        assert!(!allow.is_match_in(
            &json!({ "path": "secret/../../x" }),
            PathContext::default().base(&base)
        ));
        assert!(allow.is_match_in(
            &json!({ "path": "secret/key.txt" }),
            PathContext::default().base(&base)
        ));
    }

    #[test]
    fn a_relative_path_without_a_base_is_not_resolved_against_the_hosts_directory() {
        let here = std::env::current_dir().unwrap();
        let forms = ArgMatcher::path_forms("Cargo.toml", None, None);
        assert_eq!(forms, ["Cargo.toml"], "{here:?}");
        let forms = ArgMatcher::path_forms("Cargo.toml", Some(&here), None);
        assert_eq!(forms.len(), 3, "as written, joined, canonical: {forms:?}");
    }

    #[test]
    fn the_opened_argument_is_judged_by_what_was_opened_not_by_a_second_look() {
        let scene = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(scene.path()).unwrap();
        std::fs::create_dir_all(base.join("secret")).unwrap();
        std::fs::create_dir_all(base.join("notes")).unwrap();
        std::fs::write(base.join("secret/key.txt"), "k").unwrap();
        let deny = ArgMatcher::new(
            "path",
            &ArgPattern::Path("secret/**".into()),
            ListMatch::Any,
        )
        .unwrap();
        let args = json!({ "path": "notes/todo.txt" });
        // What was opened is the secret (a link swapped in before the
        // opening): the rule holds, though the name says notes.
        let secret = base.join("secret/key.txt");
        let opened = PathContext::default()
            .base(&base)
            .opened("/path", Some(&secret));
        assert!(deny.is_match_in(&args, opened));
        // What was opened is the note: a link swapped in after the opening
        // changes nothing, the file system is not asked again.
        std::os::unix::fs::symlink(&secret, base.join("notes/todo.txt")).unwrap();
        let note = base.join("notes/todo.txt.opened");
        let opened = PathContext::default()
            .base(&base)
            .opened("/path", Some(&note));
        assert!(!deny.is_match_in(&args, opened));
        // Not opened: the file system is asked, and the link is seen.
        assert!(deny.is_match_in(&args, PathContext::default().base(&base)));
    }
    use serde_json::json;

    #[test]
    fn arg_matcher_follows_dotted_keys_and_ignores_missing_values_and_objects() {
        let host = ArgPattern::Host("example.com".into());
        let m = ArgMatcher::new("req.url", &host, ListMatch::Any).unwrap();
        assert!(m.is_match(&json!({"req": {"url": "https://example.com/"}})));
        assert!(!m.is_match(&json!({"req": {"url": 3}})));
        assert!(!m.is_match(&json!({"req": "https://example.com/"})));
        assert!(!m.is_match(&json!({})));
        assert!(!m.is_match(&json!(null)));
        let g = ArgMatcher::new("path", &ArgPattern::Glob("*.md".into()), ListMatch::Any).unwrap();
        assert!(g.is_match(&json!({"path": "docs/a.md"})));
        assert!(!g.is_match(&json!({"path": {"p": "a.md"}})));
        assert!(!g.is_match(&json!({"path": null})));
        let glob = ArgPattern::Glob("*".into());
        assert!(ArgMatcher::new("a..b", &glob, ListMatch::Any).is_err());
        assert!(ArgMatcher::new("", &glob, ListMatch::Any).is_err());
    }

    #[test]
    fn numbers_and_booleans_match_a_glob_by_their_json_text() {
        let port = ArgMatcher::new("port", &ArgPattern::Glob("22".into()), ListMatch::Any).unwrap();
        assert!(port.is_match(&json!({"port": 22})));
        assert!(port.is_match(&json!({"port": "22"})));
        assert!(!port.is_match(&json!({"port": 2222})));
        let force =
            ArgMatcher::new("force", &ArgPattern::Glob("true".into()), ListMatch::Any).unwrap();
        assert!(force.is_match(&json!({"force": true})));
        assert!(!force.is_match(&json!({"force": false})));
        let path = ArgMatcher::new("p", &ArgPattern::Path("/etc/**".into()), ListMatch::Any);
        assert!(
            !path.unwrap().is_match(&json!({"p": 1})),
            "paths are strings"
        );
    }

    #[test]
    fn a_list_matches_on_any_element_for_deny_and_on_every_element_for_allow() {
        let etc = ArgPattern::Path("/etc/**".into());
        let any = ArgMatcher::new("paths", &etc, ListMatch::Any).unwrap();
        let all = ArgMatcher::new("paths", &etc, ListMatch::All).unwrap();
        let mixed = json!({"paths": ["/home/a", "/etc/passwd"]});
        let inside = json!({"paths": ["/etc/a", "/etc/b"]});
        let empty = json!({"paths": []});
        assert!(any.is_match(&mixed) && any.is_match(&inside) && !any.is_match(&empty));
        assert!(!all.is_match(&mixed) && all.is_match(&inside) && !all.is_match(&empty));
    }
}
