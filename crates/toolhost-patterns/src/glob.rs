//! Globs on names (tools, plugins) and on paths, compiled once.

use globset::{GlobBuilder, GlobMatcher};

use crate::path::normalize_path;

/// A glob that does not compile, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid glob {pattern:?}: {message}")]
pub struct GlobError {
    pattern: String,
    message: String,
}

impl GlobError {
    fn new(pattern: &str, message: impl Into<String>) -> Self {
        GlobError {
            pattern: pattern.to_owned(),
            message: message.into(),
        }
    }

    /// The glob as written.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// What is wrong with it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// A compiled glob on a name (tool, plugin): `*` matches any run of
/// characters, `?` one, `[ab]` and `{x,y}` as usual, `\` escapes. The
/// common shapes (`*`, a literal, `prefix*`, `*suffix`) are matched without
/// a regex.
///
/// ```
/// use toolhost_patterns::NameGlob;
///
/// let g = NameGlob::new("read_*").unwrap();
/// assert!(g.is_match("read_file"));
/// assert!(!g.is_match("write_file"));
/// assert_eq!(g.as_str(), "read_*");
/// assert!(NameGlob::new("read_[file").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct NameGlob {
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
    fn new(pattern: &str, literal_separator: bool) -> Result<Self, GlobError> {
        let matcher = GlobBuilder::new(pattern)
            .literal_separator(literal_separator)
            .backslash_escape(true)
            .build()
            .map(|g| g.compile_matcher())
            .map_err(|e| GlobError::new(pattern, e.kind().to_string()))?;
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
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::new(pattern, "empty glob"));
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
    pub fn is_match(&self, name: &str) -> bool {
        match &self.kind {
            NameKind::Any => true,
            NameKind::Literal => *self.text == *name,
            NameKind::Prefix(p) => name.starts_with(&**p),
            NameKind::Suffix(s) => name.ends_with(&**s),
            NameKind::Glob(g) => g.is_match(name),
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A compiled glob on a path: the value is normalised lexically before
/// matching (`.`, `..`, repeated and trailing `/` resolved, so
/// `/etc/x/../passwd` is `/etc/passwd`); `*` stays within one component and
/// `**` crosses components. A pattern ending in `/**` also matches the
/// directory itself.
///
/// ```
/// use toolhost_patterns::PathGlob;
///
/// let etc = PathGlob::new("/etc/**").unwrap();
/// assert!(etc.is_match("/tmp/../etc/passwd"));
/// assert!(etc.is_match("/etc"));
/// assert!(!etc.is_match("/etcetera"));
/// ```
#[derive(Debug, Clone)]
pub struct PathGlob {
    main: Compiled,
    /// For a pattern `dir/**`: `dir`, so the directory itself matches too.
    dir: Option<Compiled>,
}

impl PathGlob {
    /// Compiles `pattern` (normalised like the values it will match).
    pub fn new(pattern: &str) -> Result<Self, GlobError> {
        if pattern.is_empty() {
            return Err(GlobError::new(pattern, "empty path glob"));
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

    /// Whether the path `value`, normalised lexically, matches.
    pub fn is_match(&self, value: &str) -> bool {
        let path = normalize_path(value);
        let path: &str = &path;
        self.main.is_match(path) || self.dir.as_ref().is_some_and(|d| d.is_match(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(p: &str) -> NameGlob {
        NameGlob::new(p).unwrap()
    }

    fn path(p: &str) -> PathGlob {
        PathGlob::new(p).unwrap()
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
        assert!(
            e.to_string().starts_with("invalid glob \"read_[file\""),
            "{e}"
        );
        assert!(NameGlob::new("").is_err());
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
    fn plain_comparisons_agree_with_the_glob_semantics() {
        let names = ["read_file", "read_", "xread_file", "file.rs", "rs", "a", ""];
        for pattern in [
            "read_*",
            "*.rs",
            "read_file",
            "r?ad_*",
            "*_*",
            "a*b*c",
            "[ab]",
        ] {
            let ours = name(pattern);
            let theirs = GlobBuilder::new(pattern)
                .backslash_escape(true)
                .build()
                .unwrap()
                .compile_matcher();
            for n in names {
                assert_eq!(ours.is_match(n), theirs.is_match(n), "{pattern} on {n}");
            }
        }
    }
}
