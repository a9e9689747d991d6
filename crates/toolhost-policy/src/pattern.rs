//! Patterns: globs on tool and plugin names, and the three kinds of argument pattern
//! (a glob on the raw string, a glob on a lexically normalised path, a host pattern on a
//! URL). Everything is compiled once, when the policy is loaded or built.

use std::borrow::Cow;
use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde_json::Value;

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

/// A compiled glob on a name (tool, plugin): the common shapes (`*`, a literal, `prefix*`,
/// `*suffix`) are matched without a regex.
#[derive(Debug, Clone)]
pub(crate) struct NameGlob {
    text: Box<str>,
    kind: NameKind,
}

#[derive(Debug, Clone)]
enum NameKind {
    Any,
    Literal,
    Prefix(Box<str>),
    Suffix(Box<str>),
    Glob(Compiled),
}

fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

/// A compiled glob with a cheap test first: every match starts with `prefix` and ends
/// with `suffix` (the literal text before the first and after the last special
/// character), so most non-matching names are rejected without running the regex.
#[derive(Debug, Clone)]
struct Compiled {
    prefix: Box<str>,
    suffix: Box<str>,
    matcher: GlobMatcher,
}

impl Compiled {
    fn new(pattern: &str, literal_separator: bool) -> Result<Self, String> {
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()
            .map(|g| g.compile_matcher())
            .map_err(|e| format!("invalid glob {pattern:?}: {}", e.kind()))?;
        let is_meta = |c: char| matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\');
        let mut prefix = pattern.find(is_meta).map_or(pattern, |i| &pattern[..i]);
        let mut suffix = pattern.rfind(is_meta).map_or("", |i| &pattern[i + 1..]);
        // `**` next to a `/` can match nothing, `/` included (`a/**/b` matches `a/b`).
        if pattern[prefix.len()..].starts_with("**") {
            prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        }
        if pattern[..pattern.len() - suffix.len()].ends_with("**") {
            suffix = suffix.strip_prefix('/').unwrap_or(suffix);
        }
        Ok(Compiled {
            prefix: prefix.into(),
            suffix: suffix.into(),
            matcher,
        })
    }

    #[inline]
    fn is_match(&self, s: &str) -> bool {
        s.starts_with(&*self.prefix) && s.ends_with(&*self.suffix) && self.matcher.is_match(s)
    }
}

impl NameGlob {
    /// Compiles `pattern`; `*` matches any run of characters.
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Err("empty glob".into());
        }
        let kind = if pattern == "*" || pattern == "**" {
            NameKind::Any
        } else if !has_glob_meta(pattern) {
            NameKind::Literal
        } else if let Some(rest) = pattern.strip_suffix('*').filter(|r| !has_glob_meta(r)) {
            NameKind::Prefix(rest.into())
        } else if let Some(rest) = pattern.strip_prefix('*').filter(|r| !has_glob_meta(r)) {
            NameKind::Suffix(rest.into())
        } else {
            NameKind::Glob(Compiled::new(pattern, false)?)
        };
        Ok(NameGlob {
            text: pattern.into(),
            kind,
        })
    }

    /// Whether `name` matches.
    #[inline]
    pub(crate) fn is_match(&self, name: &str) -> bool {
        match &self.kind {
            NameKind::Any => true,
            NameKind::Literal => *self.text == *name,
            NameKind::Prefix(p) => name.starts_with(&**p),
            NameKind::Suffix(s) => name.ends_with(&**s),
            NameKind::Glob(g) => g.is_match(name),
        }
    }

    /// The pattern as written.
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }
}

/// A compiled path glob; see [`ArgPattern::Path`].
#[derive(Debug, Clone)]
pub(crate) struct PathGlob {
    main: Compiled,
    /// For a pattern `dir/**`: `dir`, so the directory itself matches too.
    dir: Option<Compiled>,
}

impl PathGlob {
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        if pattern.is_empty() {
            return Err("empty path glob".into());
        }
        let pattern = normalize_path(pattern);
        let main = Compiled::new(&pattern, true)?;
        let dir = match pattern.strip_suffix("/**") {
            Some("") => Some(Compiled::new("/", true)?),
            Some(dir) => Some(Compiled::new(dir, true)?),
            None => None,
        };
        Ok(PathGlob { main, dir })
    }

    pub(crate) fn is_match(&self, value: &str) -> bool {
        let path = normalize_path(value);
        let path: &str = &path;
        self.main.is_match(path) || self.dir.as_ref().is_some_and(|d| d.is_match(path))
    }
}

/// Resolves `.`, `..`, repeated `/` and a trailing `/` without touching the file system.
///
/// `..` at the root of an absolute path stays at the root; leading `..` of a relative path
/// are kept. Borrows when there is nothing to change.
pub(crate) fn normalize_path(path: &str) -> Cow<'_, str> {
    let absolute = path.starts_with('/');
    let body = if absolute { &path[1..] } else { path };
    let clean = !body.is_empty() && body.split('/').all(|s| !matches!(s, "" | "." | ".."))
        || (body.is_empty() && absolute);
    if clean {
        return Cow::Borrowed(path);
    }
    let mut parts: Vec<&str> = Vec::new();
    for seg in body.split('/') {
        match seg {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            s => parts.push(s),
        }
    }
    let mut out = String::with_capacity(path.len());
    if absolute {
        out.push('/');
    }
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push('/');
        }
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('.');
    }
    Cow::Owned(out)
}

/// A compiled host pattern; see [`ArgPattern::Host`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostPattern {
    scheme: Option<Box<str>>,
    host: HostKind,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostKind {
    Any,
    /// Exactly this host (lowercase ASCII; IPv6 in brackets).
    Exact(Box<str>),
    /// Any subdomain of this domain (lowercase ASCII, without the leading dot).
    Subdomain(Box<str>),
}

impl HostPattern {
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        let err = |why: &str| format!("invalid host pattern {pattern:?}: {why}");
        let (scheme, rest) = match pattern.split_once("://") {
            Some((scheme, rest)) => {
                let ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                    && scheme
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
                if !ok {
                    return Err(err("bad scheme"));
                }
                (Some(scheme.to_ascii_lowercase().into_boxed_str()), rest)
            }
            None => (None, pattern),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(err("a host pattern has no user, path, query or fragment"));
        }
        let (host, port) = if rest.starts_with('[') {
            let end = rest.find(']').ok_or_else(|| err("unclosed `[`"))?;
            let (host, after) = rest.split_at(end + 1);
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(err("unexpected text after `]`")),
            };
            (host, port)
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        let port = match port {
            Some(p) => Some(p.parse::<u16>().map_err(|_| err("port is not a number"))?),
            None => None,
        };
        if host.is_empty() {
            return Err(err("empty host"));
        }
        let kind = if host == "*" {
            HostKind::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            if domain.contains('*') {
                return Err(err("`*` only as the whole host or a leading `*.`"));
            }
            match url::Host::parse(domain) {
                Ok(url::Host::Domain(d)) => HostKind::Subdomain(trim_dot(&d).into()),
                Ok(_) => return Err(err("`*.` needs a domain name, not an IP address")),
                Err(e) => return Err(err(&e.to_string())),
            }
        } else {
            if host.contains('*') {
                return Err(err("`*` only as the whole host or a leading `*.`"));
            }
            match url::Host::parse(host) {
                Ok(h) => HostKind::Exact(trim_dot(&h.to_string()).to_ascii_lowercase().into()),
                Err(e) => return Err(err(&e.to_string())),
            }
        };
        Ok(HostPattern {
            scheme,
            host: kind,
            port,
        })
    }

    /// Whether the URL in `value` is a request this pattern covers. A value that is not
    /// a URL with a host does not match; a value without a scheme (`example.com:8080/x`)
    /// is read as `http://...`.
    pub(crate) fn is_match(&self, value: &str) -> bool {
        let Some(url) = parse_url(value) else {
            return false;
        };
        if let Some(s) = &self.scheme
            && **s != *url.scheme()
        {
            return false;
        }
        if let Some(p) = self.port
            && url.port_or_known_default() != Some(p)
        {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = trim_dot(host);
        match &self.host {
            HostKind::Any => true,
            HostKind::Exact(h) => h.eq_ignore_ascii_case(host),
            HostKind::Subdomain(d) => {
                host.len() > d.len() + 1
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.'
                    && host[host.len() - d.len()..].eq_ignore_ascii_case(d)
            }
        }
    }
}

fn trim_dot(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

fn parse_url(value: &str) -> Option<url::Url> {
    let has_host = |u: &url::Url| u.host_str().is_some_and(|h| !h.is_empty());
    let without_scheme = match url::Url::parse(value) {
        Ok(u) if has_host(&u) => return Some(u),
        // `example.com:8080/x` and `localhost:3000` parse with the host as the scheme.
        Ok(u) => u.scheme().contains('.') || u.scheme() == "localhost",
        Err(e) => e == url::ParseError::RelativeUrlWithoutBase,
    };
    if !without_scheme {
        return None;
    }
    url::Url::parse(&format!("http://{value}"))
        .ok()
        .filter(has_host)
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
    Path(PathGlob),
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
            ArgPattern::Glob(p) => ArgKind::Glob(NameGlob::new(p)?),
            ArgPattern::Path(p) => ArgKind::Path(PathGlob::new(p)?),
            ArgPattern::Host(p) => ArgKind::Host(HostPattern::new(p)?),
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
    pub(crate) fn is_match(&self, args: &Value) -> bool {
        let mut v = args;
        for seg in &self.key {
            match v.get(&**seg) {
                Some(next) => v = next,
                None => return false,
            }
        }
        match v {
            Value::Array(items) => match self.lists {
                ListMatch::Any => items.iter().any(|item| self.scalar_match(item)),
                ListMatch::All => {
                    !items.is_empty() && items.iter().all(|item| self.scalar_match(item))
                }
            },
            scalar => self.scalar_match(scalar),
        }
    }

    fn scalar_match(&self, v: &Value) -> bool {
        match (v, &self.kind) {
            (Value::String(s), ArgKind::Glob(g)) => g.is_match(s),
            (Value::String(s), ArgKind::Path(p)) => p.is_match(s),
            (Value::String(s), ArgKind::Host(h)) => h.is_match(s),
            (Value::Number(_) | Value::Bool(_), ArgKind::Glob(g)) => g.is_match(&v.to_string()),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn name(p: &str) -> NameGlob {
        NameGlob::new(p).unwrap()
    }

    fn path(p: &str) -> PathGlob {
        PathGlob::new(p).unwrap()
    }

    fn host(p: &str) -> HostPattern {
        HostPattern::new(p).unwrap()
    }

    #[test]
    fn name_globs_match_literals_prefixes_suffixes_and_full_globs() {
        assert!(name("read_file").is_match("read_file"));
        assert!(!name("read_file").is_match("read_files"));
        assert!(name("write_*").is_match("write_file"));
        assert!(name("write_*").is_match("write_"));
        assert!(!name("write_*").is_match("rewrite_file"));
        assert!(name("*_file").is_match("read_file"));
        assert!(!name("*_file").is_match("read_files"));
        assert!(name("*").is_match("anything/at all"));
        assert!(name("http_{get,post}").is_match("http_post"));
        assert!(!name("http_{get,post}").is_match("http_put"));
        assert!(name("r?ad_*").is_match("road_map"));
        assert!(name("*.md").is_match("docs/guide/intro.md"));
        assert!(name("a\\*b").is_match("a*b"));
        assert!(!name("a\\*b").is_match("axb"));
        assert!(name("**/x").is_match("x"));
        assert!(name("[ab]_{c,d}?").is_match("a_dz"));
    }

    #[test]
    fn name_glob_that_does_not_compile_is_an_error() {
        let e = NameGlob::new("read_[file").unwrap_err();
        assert!(e.starts_with("invalid glob \"read_[file\""), "{e}");
        assert!(NameGlob::new("").is_err());
    }

    #[test]
    fn path_normalisation_resolves_dots_and_slashes() {
        for (input, want) in [
            ("/etc/passwd", "/etc/passwd"),
            ("/etc/x/../passwd", "/etc/passwd"),
            ("/etc/./passwd", "/etc/passwd"),
            ("//etc//passwd/", "/etc/passwd"),
            ("/../../etc/passwd", "/etc/passwd"),
            ("/", "/"),
            ("src/../../x", "../x"),
            ("./src/lib.rs", "src/lib.rs"),
            ("a/..", "."),
            ("", "."),
        ] {
            assert_eq!(normalize_path(input), want, "{input}");
        }
        assert!(matches!(normalize_path("/etc/passwd"), Cow::Borrowed(_)));
        assert!(matches!(normalize_path("src/lib.rs"), Cow::Borrowed(_)));
    }

    #[test]
    fn path_glob_sees_through_dot_dot() {
        let etc = path("/etc/**");
        assert!(etc.is_match("/etc/passwd"));
        assert!(etc.is_match("/etc/x/../passwd"));
        assert!(etc.is_match("/tmp/../etc/passwd"));
        assert!(etc.is_match("/etc/ssh/sshd_config"));
        assert!(
            etc.is_match("/etc"),
            "dir/** also covers the directory itself"
        );
        assert!(etc.is_match("/etc/"));
        assert!(!etc.is_match("/etc/../tmp/x"));
        assert!(!etc.is_match("/etcetera"));
        assert!(
            !etc.is_match("etc/passwd"),
            "relative paths are not resolved"
        );
    }

    #[test]
    fn path_glob_star_stays_in_one_component() {
        let p = path("/home/*/.ssh/*");
        assert!(p.is_match("/home/ann/.ssh/id_rsa"));
        assert!(!p.is_match("/home/ann/x/.ssh/id_rsa"));
        let any_depth = path("**/id_rsa");
        assert!(any_depth.is_match("id_rsa"));
        assert!(any_depth.is_match("/home/a/.ssh/id_rsa"));
        assert!(!any_depth.is_match("/home/a/.ssh/id_rsa.pub"));
        let middle = path("/a/**/b");
        assert!(middle.is_match("/a/b"));
        assert!(middle.is_match("/a/x/y/b"));
        assert!(!middle.is_match("/a/x/y/c"));
        let rel = path("./src/**/*.rs");
        assert!(rel.is_match("src/a/b.rs"));
        assert!(rel.is_match("src/b.rs"));
        assert!(!rel.is_match("tests/b.rs"));
    }

    #[test]
    fn subdomain_pattern_matches_subdomains_not_lookalikes() {
        let p = host("*.example.com");
        assert!(p.is_match("https://a.example.com/x"));
        assert!(p.is_match("https://a.b.example.com"));
        assert!(p.is_match("http://A.Example.COM."));
        assert!(!p.is_match("https://example.com/"));
        assert!(!p.is_match("https://example.com.evil.net/"));
        assert!(!p.is_match("https://badexample.com/"));
        assert!(!p.is_match("https://evil.net/?q=a.example.com"));
        assert!(!p.is_match("https://evil.net/a.example.com"));
    }

    #[test]
    fn host_pattern_uses_the_real_host_not_userinfo() {
        let example = host("example.com");
        assert!(example.is_match("http://example.com/"));
        assert!(!example.is_match("http://example.com@evil.net/"));
        assert!(!example.is_match("http://example.com:80@evil.net/"));
        assert!(!example.is_match("http://evil.net\\@example.com/"));
        assert!(host("evil.net").is_match("http://example.com@evil.net/"));
        assert!(host("*.example.com").is_match("http://user:pw@a.example.com/"));
    }

    #[test]
    fn host_pattern_ports_and_schemes() {
        let p = host("example.com:8080");
        assert!(p.is_match("http://example.com:8080/"));
        assert!(!p.is_match("http://example.com/"));
        assert!(!p.is_match("http://example.com:8081/"));
        let https = host("example.com:443");
        assert!(
            https.is_match("https://example.com/"),
            "default port counts"
        );
        assert!(!https.is_match("http://example.com/"));
        let any = host("example.com");
        assert!(any.is_match("http://example.com:9999/"));
        let s = host("https://example.com");
        assert!(s.is_match("https://example.com/"));
        assert!(!s.is_match("http://example.com/"));
        assert!(host("*:443").is_match("https://anything.net/"));
        assert!(!host("*:443").is_match("http://anything.net/"));
    }

    #[test]
    fn host_pattern_reads_scheme_less_values_and_ips() {
        let p = host("example.com:8080");
        assert!(p.is_match("example.com:8080/x"));
        assert!(host("example.com").is_match("example.com/x"));
        assert!(host("localhost:3000").is_match("localhost:3000"));
        assert!(host("evil.net").is_match("user@evil.net/x"));
        assert!(host("127.0.0.1").is_match("http://0x7f.1/"));
        assert!(host("[::1]:8080").is_match("http://[::1]:8080/"));
        assert!(!host("example.com").is_match("not a url"));
        assert!(!host("example.com").is_match("mailto:x@example.com"));
        assert!(!host("*").is_match(""));
    }

    #[test]
    fn bad_host_patterns_are_rejected() {
        for bad in [
            "",
            "exa*mple.com",
            "*.*.com",
            "example.com/path",
            "user@example.com",
            "example.com:http",
            "[::1",
            "*.127.0.0.1",
            "exa mple.com",
            "1x://example.com",
        ] {
            assert!(HostPattern::new(bad).is_err(), "{bad:?} should be rejected");
        }
    }

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
