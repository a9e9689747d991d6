//! The `search_tools` tool as every entry point offers it (the agent loop,
//! the MCP server): when it is offered ([`ToolSearch`]), its definition
//! ([`description`], [`input_schema`]), and its arguments read
//! ([`SearchArgs::parse`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The name of the built-in search tool.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Most results one search may ask for.
pub const MAX_RESULTS: usize = 20;

/// The longest query read (characters).
const MAX_QUERY_CHARS: usize = 500;

/// When a model searches the tools instead of reading every definition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolSearchMode {
    /// When the catalog is over the budget ([`ToolSearch`]); MCP clients
    /// get the full list (they may search on their own).
    #[default]
    Auto,
    /// Always, MCP clients included.
    On,
    /// Never: every tool in every request.
    Off,
}

impl FromStr for ToolSearchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(ToolSearchMode::Auto),
            "on" => Ok(ToolSearchMode::On),
            "off" => Ok(ToolSearchMode::Off),
            other => Err(format!("tool search is auto, on or off, not `{other}`")),
        }
    }
}

impl fmt::Display for ToolSearchMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolSearchMode::Auto => "auto",
            ToolSearchMode::On => "on",
            ToolSearchMode::Off => "off",
        })
    }
}

/// Tool search settings (the config file's `[tool-search]` table).
///
/// ```
/// use toolhost_search::{ToolSearch, ToolSearchMode};
///
/// let s: ToolSearch = toml_like(r#"{"mode": "on", "pinned": ["calculate", "fs_*"]}"#);
/// # fn toml_like(j: &str) -> ToolSearch { serde_json::from_str(j).unwrap() }
/// assert_eq!(s.mode, ToolSearchMode::On);
/// assert!(s.is_pinned("fs_read") && !s.is_pinned("http_get"));
/// assert_eq!(s.max_tools, 32);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct ToolSearch {
    /// When (default `auto`).
    pub mode: ToolSearchMode,
    /// `auto` searches past this many tools (default 32).
    pub max_tools: usize,
    /// ... or past this many bytes of definitions (default 24 KiB, about
    /// 6,000 tokens).
    pub max_bytes: usize,
    /// Tools always offered in full: names, or a prefix ending in `*`.
    pub pinned: Vec<String>,
    /// Tools one search returns unless the model asks for fewer (default 5,
    /// at most [`MAX_RESULTS`]).
    pub results: usize,
}

impl Default for ToolSearch {
    fn default() -> Self {
        ToolSearch {
            mode: ToolSearchMode::Auto,
            max_tools: 32,
            max_bytes: 24 * 1024,
            pinned: Vec::new(),
            results: 5,
        }
    }
}

impl ToolSearch {
    /// Whether a model is offered `search_tools` instead of a catalog of
    /// `tools` tools whose definitions take `bytes()` bytes, when its
    /// context window is `window` tokens (if known). `bytes` is asked only
    /// when the count alone does not decide (the agent loop asks before
    /// every request).
    ///
    /// ```
    /// use toolhost_search::ToolSearch;
    /// let search = ToolSearch::default(); // auto: past 32 tools or 24 KiB
    /// assert!(search.applies(33, || unreachable!(), None));
    /// assert!(!search.applies(7, || 4_500, None));
    /// ```
    pub fn applies(
        &self,
        tools: usize,
        bytes: impl FnOnce() -> usize,
        window: Option<u32>,
    ) -> bool {
        match self.mode {
            ToolSearchMode::On => true,
            ToolSearchMode::Off => false,
            ToolSearchMode::Auto => self.over_budget(tools, bytes, window),
        }
    }

    /// Whether a catalog of `tools` tools whose definitions take `bytes()`
    /// bytes is past the budget `auto` searches beyond, whatever the mode:
    /// more than [`max_tools`](Self::max_tools) tools, more than
    /// [`max_bytes`](Self::max_bytes), or more than a quarter of a context
    /// window of `window` tokens (code mode's `auto` uses the same budget).
    /// `bytes` is asked only when the count does not decide.
    ///
    /// ```
    /// use toolhost_search::{ToolSearch, ToolSearchMode};
    /// let off = ToolSearch { mode: ToolSearchMode::Off, ..ToolSearch::default() };
    /// assert!(off.over_budget(300, || 90_000, None) && !off.applies(300, || 90_000, None));
    /// assert!(!off.over_budget(12, || 6_000, None));
    /// assert!(off.over_budget(12, || 6_000, Some(4_096)), "a quarter of a small window");
    /// ```
    pub fn over_budget(
        &self,
        tools: usize,
        bytes: impl FnOnce() -> usize,
        window: Option<u32>,
    ) -> bool {
        if tools > self.max_tools {
            return true;
        }
        // A token is about four bytes: bytes over the window in tokens is
        // a quarter of the window.
        let bytes = bytes();
        bytes > self.max_bytes
            || window.is_some_and(|w| bytes > usize::try_from(w).unwrap_or(usize::MAX))
    }

    /// Whether `name` is always offered.
    pub fn is_pinned(&self, name: &str) -> bool {
        self.pinned.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => p == name,
        })
    }

    /// How many results a search returns: the model's `limit`, else the
    /// default, within 1 and [`MAX_RESULTS`].
    fn results(&self, asked: Option<usize>) -> usize {
        asked.unwrap_or(self.results).clamp(1, MAX_RESULTS)
    }
}

/// The description of `search_tools` over a catalog of `total` tools.
pub fn description(total: usize) -> String {
    format!(
        "Finds tools for a task among the {total} tools available (only a few are listed). \
         Describe what you need in a few words, e.g. \"convert currency\" or \"list open \
         tickets\". Returns the best matching tools with their parameters; then call the one \
         you need by its name."
    )
}

/// The JSON Schema of `search_tools`' arguments.
pub fn input_schema(default_results: usize) -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What the tool should do, in a few words."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                      "description": format!("How many tools to return (default {default_results}).")}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// A `search_tools` call's arguments, read and bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchArgs {
    /// The query, trimmed, at most 500 characters.
    pub query: String,
    /// How many tools to return.
    pub limit: usize,
}

impl SearchArgs {
    /// Reads `args`; the error is for the model.
    pub fn parse(args: &Value, settings: &ToolSearch) -> Result<SearchArgs, String> {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .ok_or_else(|| {
                "`search_tools` needs a `query`: what the tool should do, in a few words".to_owned()
            })?;
        let asked = args
            .get("limit")
            .and_then(Value::as_u64)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Ok(SearchArgs {
            query: query.chars().take(MAX_QUERY_CHARS).collect(),
            limit: settings.results(asked),
        })
    }
}

/// What a search that found nothing tells the model.
pub fn nothing_found(query: &str) -> String {
    format!(
        "No tool matches \"{query}\". Try other words (what the tool does, not the task), or \
         answer without a tool."
    )
}

/// What a search that found `found` (tool definitions as JSON) tells the
/// model.
pub fn found_text(query: &str, found: &[Value]) -> String {
    format!(
        "{} tools match \"{query}\", best first; call one by its name with arguments that \
         follow its parameters:\n{}",
        found.len(),
        serde_json::to_string_pretty(found).unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_keeps_a_small_catalog_and_searches_a_large_one() {
        let s = ToolSearch::default();
        assert!(!s.applies(7, || 4_500, None));
        assert!(!s.applies(7, || 4_500, Some(8192)));
        assert!(s.applies(33, || 100, None));
        assert!(s.applies(1, || 30_000, None), "over max_bytes");
        assert!(!s.applies(1, || 5_000, None));
        assert!(
            s.applies(1, || 5_000, Some(4096)),
            "a quarter of a small window"
        );
        let on = ToolSearch {
            mode: ToolSearchMode::On,
            ..ToolSearch::default()
        };
        assert!(on.applies(1, || 1, None));
        let off = ToolSearch {
            mode: ToolSearchMode::Off,
            ..ToolSearch::default()
        };
        assert!(!off.applies(1000, || 1 << 20, Some(1024)));
    }

    #[test]
    fn pins_are_names_or_prefixes() {
        let s = ToolSearch {
            pinned: vec!["calculate".into(), "fs_*".into()],
            ..ToolSearch::default()
        };
        assert!(s.is_pinned("calculate"));
        assert!(!s.is_pinned("calculate2"));
        assert!(s.is_pinned("fs_read"));
        assert!(!s.is_pinned("http_get"));
    }

    #[test]
    fn arguments_are_read_and_bounded() {
        let s = ToolSearch::default();
        let a = SearchArgs::parse(&json!({"query": "  currency  "}), &s).unwrap();
        assert_eq!((a.query.as_str(), a.limit), ("currency", 5));
        let a = SearchArgs::parse(&json!({"query": "x", "limit": 1_000_000}), &s).unwrap();
        assert_eq!(a.limit, MAX_RESULTS);
        let a = SearchArgs::parse(&json!({"query": "x", "limit": 0}), &s).unwrap();
        assert_eq!(a.limit, 1);
        let long = "q".repeat(10_000);
        assert_eq!(
            SearchArgs::parse(&json!({ "query": long }), &s)
                .unwrap()
                .query
                .len(),
            500
        );
        assert!(SearchArgs::parse(&json!({"query": " "}), &s).is_err());
        assert!(SearchArgs::parse(&json!({"limit": 3}), &s).is_err());
        assert!(SearchArgs::parse(&json!("currency"), &s).is_err());
    }
}
