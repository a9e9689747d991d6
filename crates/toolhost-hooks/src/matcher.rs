//! Which calls a hook sees: globs on tool names and plugin names.

use std::fmt;

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};

/// Selects calls by tool name and plugin name.
///
/// Each list holds globs (`*`, `?`, `[abc]`, `{a,b}`), compiled once. An
/// empty list matches everything; a call matches when its tool matches one
/// of the tool globs *and* its plugin matches one of the plugin globs.
///
/// ```
/// use toolhost_hooks::Matcher;
///
/// let m = Matcher::new(["read_*", "http_get"], ["fs", "http"])?;
/// assert!(m.matches("read_file", "fs"));
/// assert!(m.matches("http_get", "http"));
/// assert!(!m.matches("write_file", "fs"));
/// assert!(!m.matches("read_file", "other"));
/// assert!(Matcher::any().matches("anything", "at-all"));
/// # Ok::<(), toolhost_hooks::MatcherError>(())
/// ```
#[derive(Clone, Default)]
pub struct Matcher {
    tools: Patterns,
    plugins: Patterns,
}

#[derive(Clone, Default)]
struct Patterns {
    /// The globs as written.
    source: Vec<String>,
    /// No globs, or one of them is `*`: everything matches.
    any: bool,
    /// Globs without wildcards, and globs that are a plain prefix or suffix
    /// followed or preceded by `*`: matched by string comparison, the common
    /// case, in a few nanoseconds.
    literals: Vec<String>,
    prefixes: Vec<String>,
    suffixes: Vec<String>,
    /// Every other glob.
    globs: Option<GlobSet>,
}

/// A glob that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid glob `{pattern}`: {message}")]
pub struct MatcherError {
    /// The glob.
    pub pattern: String,
    /// What is wrong with it.
    pub message: String,
}

impl Matcher {
    /// Matches every call. Allocates nothing.
    pub const fn any() -> Self {
        Self {
            tools: Patterns::ANY,
            plugins: Patterns::ANY,
        }
    }

    /// Matches calls whose tool matches one of `tools` and whose plugin
    /// matches one of `plugins` (an empty list matches everything).
    pub fn new<T, P>(tools: T, plugins: P) -> Result<Self, MatcherError>
    where
        T: IntoIterator,
        T::Item: AsRef<str>,
        P: IntoIterator,
        P::Item: AsRef<str>,
    {
        Ok(Self {
            tools: Patterns::compile(tools)?,
            plugins: Patterns::compile(plugins)?,
        })
    }

    /// Matches calls of the tools that match one of `tools`, whatever the
    /// plugin.
    ///
    /// ```
    /// # use toolhost_hooks::Matcher;
    /// let m = Matcher::tools(["calc*"])?;
    /// assert!(m.matches("calculate", "calc"));
    /// # Ok::<(), toolhost_hooks::MatcherError>(())
    /// ```
    pub fn tools<T>(tools: T) -> Result<Self, MatcherError>
    where
        T: IntoIterator,
        T::Item: AsRef<str>,
    {
        Self::new(tools, std::iter::empty::<&str>())
    }

    /// Matches calls of the plugins that match one of `plugins`.
    pub fn plugins<P>(plugins: P) -> Result<Self, MatcherError>
    where
        P: IntoIterator,
        P::Item: AsRef<str>,
    {
        Self::new(std::iter::empty::<&str>(), plugins)
    }

    /// Whether a call of `tool` from `plugin` matches. Allocates nothing.
    #[inline]
    pub fn matches(&self, tool: &str, plugin: &str) -> bool {
        self.tools.matches(tool) && self.plugins.matches(plugin)
    }

    /// Whether it matches every call.
    pub fn is_any(&self) -> bool {
        self.tools.any && self.plugins.any
    }

    /// The tool globs as written.
    pub fn tool_patterns(&self) -> &[String] {
        &self.tools.source
    }

    /// The plugin globs as written.
    pub fn plugin_patterns(&self) -> &[String] {
        &self.plugins.source
    }
}

impl Patterns {
    const ANY: Self = Self {
        source: Vec::new(),
        any: true,
        literals: Vec::new(),
        prefixes: Vec::new(),
        suffixes: Vec::new(),
        globs: None,
    };

    fn compile<I>(patterns: I) -> Result<Self, MatcherError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let source: Vec<String> = patterns
            .into_iter()
            .map(|p| p.as_ref().to_owned())
            .collect();
        let mut compiled = Self {
            any: source.is_empty() || source.iter().any(|p| p == "*" || p == "**"),
            ..Self::default()
        };
        let mut builder = GlobSetBuilder::new();
        let mut complex = false;
        for pattern in &source {
            // Compiled even when a plain comparison will do, to report bad
            // globs the same way whatever their shape.
            let glob = glob(pattern)?;
            if !has_meta(pattern) {
                compiled.literals.push(pattern.clone());
            } else if let Some(prefix) = pattern.strip_suffix('*').filter(|p| !has_meta(p)) {
                compiled.prefixes.push(prefix.to_owned());
            } else if let Some(suffix) = pattern.strip_prefix('*').filter(|p| !has_meta(p)) {
                compiled.suffixes.push(suffix.to_owned());
            } else {
                builder.add(glob);
                complex = true;
            }
        }
        if complex && !compiled.any {
            compiled.globs = Some(builder.build().map_err(|e| MatcherError {
                pattern: source.join(", "),
                message: e.to_string(),
            })?);
        }
        compiled.source = source;
        Ok(compiled)
    }

    #[inline]
    fn matches(&self, name: &str) -> bool {
        self.any
            || self.literals.iter().any(|l| l == name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()))
            || self.suffixes.iter().any(|s| name.ends_with(s.as_str()))
            || self.globs.as_ref().is_some_and(|g| g.is_match(name))
    }
}

/// Whether `pattern` has glob syntax (anything but a literal name).
fn has_meta(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', ']', '{', '}', '\\'])
}

fn glob(pattern: &str) -> Result<Glob, MatcherError> {
    GlobBuilder::new(pattern)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .map_err(|e| MatcherError {
            pattern: pattern.to_owned(),
            message: e.kind().to_string(),
        })
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Matcher")
            .field("tools", &self.tools.source)
            .field("plugins", &self.plugins.source)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_lists_match_everything() {
        let m = Matcher::new(Vec::<String>::new(), Vec::<String>::new()).unwrap();
        assert!(m.is_any());
        assert!(m.matches("x", "y"));
    }

    #[test]
    fn a_star_matches_everything_without_a_globset() {
        let m = Matcher::tools(["read_*", "*"]).unwrap();
        assert!(m.is_any());
        assert_eq!(m.tool_patterns(), ["read_*", "*"]);
    }

    #[test]
    fn tool_and_plugin_globs_must_both_match() {
        let m = Matcher::new(["read_?ile", "{list,stat}_dir"], ["f*"]).unwrap();
        assert!(m.matches("read_file", "fs"));
        assert!(m.matches("list_dir", "fs"));
        assert!(m.matches("stat_dir", "files"));
        assert!(!m.matches("list_dir", "http"));
        assert!(!m.matches("read_files", "fs"));
    }

    #[test]
    fn globs_are_case_sensitive_and_anchored() {
        let m = Matcher::tools(["read"]).unwrap();
        assert!(m.matches("read", "p"));
        assert!(!m.matches("READ", "p"));
        assert!(!m.matches("read_file", "p"));
        assert!(!m.matches("xread", "p"));
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
            let ours = Matcher::tools([pattern]).unwrap();
            let theirs = glob(pattern).unwrap().compile_matcher();
            for name in names {
                assert_eq!(
                    ours.matches(name, "p"),
                    theirs.is_match(name),
                    "{pattern} on {name}"
                );
            }
        }
    }

    #[test]
    fn a_bad_glob_is_an_error_naming_it() {
        let err = Matcher::tools(["read_[file"]).unwrap_err();
        assert_eq!(err.pattern, "read_[file");
        assert!(err.to_string().contains("read_[file"), "{err}");
    }
}
