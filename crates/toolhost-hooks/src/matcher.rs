//! Which calls a hook sees: globs on tool names and plugin names.

use std::fmt;

use toolhost_patterns::NameGlob;

/// Selects calls by tool name and plugin name.
///
/// Each list holds globs (`*`, `?`, `[abc]`, `{a,b}`), compiled once. An
/// empty list matches everything; a call matches when its tool matches one
/// of the tool globs *and* its plugin matches one of the plugin globs. A
/// tool glob `plugin:tool` names one plugin's tool. A tool glob matches the
/// exposed name or, after a clash renamed the tool (`fs__read_file`), the
/// name its plugin declared (`read_file`), so a hook cannot be escaped by
/// renaming.
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
///
/// let fs_only = Matcher::tools(["fs:read_file"])?;
/// assert!(fs_only.matches_declared("fs__read_file", Some("read_file"), "fs"));
/// assert!(!fs_only.matches("read_file", "a-tools"));
/// # Ok::<(), toolhost_hooks::MatcherError>(())
/// ```
#[derive(Clone, Default)]
pub struct Matcher {
    tools: Patterns,
    plugins: Patterns,
    /// `plugin:tool` tool globs, split.
    scoped: Vec<(NameGlob, NameGlob)>,
}

#[derive(Clone, Default)]
struct Patterns {
    /// The globs as written.
    source: Vec<String>,
    /// No globs, or one of them is `*`: everything matches.
    any: bool,
    /// The globs, compiled (literals, prefixes and suffixes are matched by
    /// string comparison, in a few nanoseconds; see [`NameGlob`]).
    globs: Vec<NameGlob>,
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
            scoped: Vec::new(),
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
        let written: Vec<String> = tools.into_iter().map(|t| t.as_ref().to_owned()).collect();
        let (scoped, plain): (Vec<String>, Vec<String>) =
            written.iter().cloned().partition(|t| t.contains(':'));
        let glob = |p: &str| {
            NameGlob::new(p).map_err(|e| MatcherError {
                pattern: p.to_owned(),
                message: e.message().to_owned(),
            })
        };
        let scoped = scoped
            .iter()
            .map(|s| {
                let (plugin, tool) = s.split_once(':').unwrap_or(("", s));
                Ok((glob(plugin)?, glob(tool)?))
            })
            .collect::<Result<Vec<_>, MatcherError>>()?;
        let mut tools = Patterns::compile(plain)?;
        if !scoped.is_empty() && tools.source.is_empty() {
            // Only `plugin:tool` globs: the plain list must not match everything.
            tools.any = false;
        }
        tools.source = written;
        Ok(Self {
            tools,
            plugins: Patterns::compile(plugins)?,
            scoped,
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
        self.matches_declared(tool, None, plugin)
    }

    /// Whether a call of `tool` from `plugin` matches, where `declared` is
    /// the name the plugin declared when a clash exposes the tool under
    /// another. Allocates nothing.
    #[inline]
    pub fn matches_declared(&self, tool: &str, declared: Option<&str>, plugin: &str) -> bool {
        let named = |g: &NameGlob| g.is_match(tool) || declared.is_some_and(|d| g.is_match(d));
        let tool_matches = self.tools.any
            || self.tools.globs.iter().any(named)
            || self
                .scoped
                .iter()
                .any(|(p, t)| p.is_match(plugin) && named(t));
        tool_matches && self.plugins.matches(plugin)
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
        globs: Vec::new(),
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
        let globs = source
            .iter()
            .map(|p| {
                NameGlob::new(p).map_err(|e| MatcherError {
                    pattern: p.clone(),
                    message: e.message().to_owned(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            any: source.is_empty() || source.iter().any(|p| p == "*" || p == "**"),
            source,
            globs,
        })
    }

    #[inline]
    fn matches(&self, name: &str) -> bool {
        self.any || self.globs.iter().any(|g| g.is_match(name))
    }
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
    fn a_bad_glob_is_an_error_naming_it() {
        let err = Matcher::tools(["read_[file"]).unwrap_err();
        assert_eq!(err.pattern, "read_[file");
        assert!(err.to_string().contains("read_[file"), "{err}");
    }
}
