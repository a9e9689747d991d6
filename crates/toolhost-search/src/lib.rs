//! Finds the tools that fit a request among hundreds: a BM25 index over each
//! tool's name, description, parameter names and descriptions, and the name
//! of the plugin or server it comes from.
//!
//! A model given a large catalog reads only a `search_tools` tool and the
//! tools it found (the agent loop, `toolhost-agent`; and MCP clients of
//! `host serve --tool-search on`, `toolhost-mcp`). The ranking:
//!
//! - a tool whose whole name is the query, or one word of it, comes first;
//! - then BM25 (k1 1.2, b 0.75) over the fields, the name counting three
//!   times and parameter names twice, since they say most about what a tool
//!   does; identifiers split into words and words reduced to their stem
//!   (`words.rs`);
//! - ties in catalog order, so one query over one catalog always gives one
//!   answer.
//!
//! The index knows only what it was built from: the caller builds it from
//! the tools its policy lets it see, so a search can never show anything
//! else.
//!
//! ```
//! use serde_json::json;
//! use toolhost_search::{ToolIndex, ToolText};
//!
//! let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}});
//! let none = json!({});
//! let index = ToolIndex::build([
//!     ToolText::new("get_forecast", "The weather for the next days", &schema),
//!     ToolText::new("send_email", "Sends an e-mail", &none),
//! ]);
//! let hits = index.search("will it rain in Paris tomorrow? weather please", 5);
//! assert_eq!(hits[0].position, 0);
//! assert_eq!(index.search("send_email", 5)[0].position, 1);
//! ```

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;

use bm25::{Embedder, EmbedderBuilder, Scorer};
use serde_json::Value;

mod tool;
mod words;

pub use tool::{
    MAX_RESULTS, SEARCH_TOOLS, SearchArgs, ToolSearch, ToolSearchMode, description, found_text,
    input_schema, nothing_found,
};
use words::{MAX_FIELD_CHARS, Words};

/// How many parameters of one tool are indexed.
const MAX_PARAMETERS: usize = 64;

/// What is indexed of one tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolText<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// Its description.
    pub description: &'a str,
    /// The JSON Schema of its arguments: the names and descriptions of the
    /// top-level `properties` are indexed.
    pub parameters: &'a Value,
    /// The plugin or server it comes from, when known.
    pub source: Option<&'a str>,
}

impl<'a> ToolText<'a> {
    /// A tool with no source name.
    pub fn new(name: &'a str, description: &'a str, parameters: &'a Value) -> Self {
        ToolText {
            name,
            description,
            parameters,
            source: None,
        }
    }

    /// The same, from `source`.
    #[must_use]
    pub fn source(mut self, source: &'a str) -> Self {
        self.source = Some(source);
        self
    }

    /// The text BM25 reads: each field once, the name three times and the
    /// parameter names twice (their weight).
    fn document(&self) -> String {
        let mut doc = String::new();
        let mut push = |text: &str, times: usize| {
            let text = bounded(text);
            for _ in 0..times {
                doc.push_str(text);
                doc.push('\n');
            }
        };
        push(self.name, 3);
        if let Some(source) = self.source {
            push(source, 1);
        }
        push(self.description, 1);
        if let Some(props) = self.parameters.get("properties").and_then(Value::as_object) {
            for (name, schema) in props.iter().take(MAX_PARAMETERS) {
                push(name, 2);
                if let Some(d) = schema.get("description").and_then(Value::as_str) {
                    push(d, 1);
                }
            }
        }
        doc
    }
}

/// At most [`MAX_FIELD_CHARS`] characters of `text`.
fn bounded(text: &str) -> &str {
    match text.char_indices().nth(MAX_FIELD_CHARS) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// One tool found, by its position in the catalog the index was built from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Its position in the catalog.
    pub position: usize,
    /// How well it matched (higher is better; an exact name is
    /// `f32::INFINITY`).
    pub score: f32,
}

/// A search index over one catalog; see the crate docs. Build it once per
/// catalog (a few milliseconds for a thousand tools) and search it many
/// times (well under a millisecond each: `benches/search.rs`).
pub struct ToolIndex {
    embedder: Embedder<u32, Words>,
    scorer: Scorer<u32>,
    /// Lower-cased names, to their first position.
    names: HashMap<String, usize>,
    len: usize,
}

impl std::fmt::Debug for ToolIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolIndex")
            .field("tools", &self.len)
            .finish_non_exhaustive()
    }
}

impl ToolIndex {
    /// Indexes `tools`; a hit's position is its place in this sequence.
    pub fn build<'a>(tools: impl IntoIterator<Item = ToolText<'a>>) -> ToolIndex {
        let (names, docs) = documents(tools);
        ToolIndex::from_documents(names, &docs)
    }

    fn from_documents(names: Vec<String>, docs: &[String]) -> ToolIndex {
        let mut first = HashMap::new();
        for (position, name) in names.into_iter().enumerate() {
            first.entry(name).or_insert(position);
        }
        let corpus: Vec<&str> = docs.iter().map(String::as_str).collect();
        let embedder = EmbedderBuilder::<u32, Words>::with_tokenizer_and_fit_to_corpus(
            Words::default(),
            &corpus,
        )
        .build();
        let mut scorer = Scorer::new();
        for (position, doc) in docs.iter().enumerate() {
            // Positions past u32::MAX are not indexed (no catalog is that big).
            if let Ok(id) = u32::try_from(position) {
                scorer.upsert(&id, embedder.embed(doc));
            }
        }
        ToolIndex {
            embedder,
            scorer,
            names: first,
            len: docs.len(),
        }
    }

    /// How many tools it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The best `limit` tools for `query`, best first (see the crate docs
    /// for the order). Tools that share no term with the query are not
    /// returned, so the answer may be shorter than `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let query = bounded(query);
        let mut exact: Vec<usize> = Vec::new();
        let whole = query.trim().to_lowercase();
        let words = std::iter::once(whole.as_str()).chain(
            whole
                .split(|c: char| c.is_whitespace() || matches!(c, ',' | '?' | '!' | '`' | '"'))
                .filter(|w| !w.is_empty()),
        );
        for word in words {
            if let Some(&p) = self.names.get(word)
                && !exact.contains(&p)
            {
                exact.push(p);
            }
        }
        let mut scored: Vec<Hit> = self
            .scorer
            .matches(&self.embedder.embed(query))
            .into_iter()
            .filter_map(|d| {
                let position = usize::try_from(d.id).ok()?;
                (!exact.contains(&position)).then_some(Hit {
                    position,
                    score: d.score,
                })
            })
            .collect();
        scored.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.position.cmp(&b.position))
        });
        exact
            .into_iter()
            .map(|position| Hit {
                position,
                score: f32::INFINITY,
            })
            .chain(scored)
            .take(limit)
            .collect()
    }
}

/// Each tool's lower-cased name and the text BM25 reads of it.
fn documents<'a>(tools: impl IntoIterator<Item = ToolText<'a>>) -> (Vec<String>, Vec<String>) {
    tools
        .into_iter()
        .map(|t| (t.name.to_lowercase(), t.document()))
        .unzip()
}

/// The indexes of the last few catalogs searched ([`CACHED_CATALOGS`]),
/// each built again only when its catalog changes (a tool added, removed or
/// described differently). The agent loop keeps one per agent, the MCP
/// server one per server, whose callers' profiles may each see another
/// catalog: alternating profiles do not rebuild the index every time.
///
/// ```
/// use serde_json::json;
/// use toolhost_search::{IndexCache, ToolText};
///
/// let cache = IndexCache::default();
/// let schema = json!({});
/// let tools = [ToolText::new("ping", "Is a host up?", &schema)];
/// let first = cache.index(tools);
/// let again = cache.index(tools);
/// assert!(std::sync::Arc::ptr_eq(&first, &again));
/// ```
#[derive(Debug)]
pub struct IndexCache {
    /// The most recently used last.
    recent: Mutex<Vec<Cached>>,
    /// The quick key of a catalog (a 64-bit hash of its documents).
    fingerprint: fn(&[String], &[String]) -> u64,
}

/// One catalog's index, with what it was built from: a hit needs the same
/// names and documents, not only the same fingerprint (two catalogs may
/// share a 64-bit hash, by chance or made on purpose by a server that
/// chooses its tools' descriptions).
#[derive(Debug)]
struct Cached {
    fingerprint: u64,
    names: Vec<String>,
    docs: Vec<String>,
    index: Arc<ToolIndex>,
}

impl Default for IndexCache {
    fn default() -> Self {
        IndexCache {
            recent: Mutex::default(),
            fingerprint: fingerprint_of,
        }
    }
}

fn fingerprint_of(names: &[String], docs: &[String]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    names.hash(&mut hasher);
    docs.hash(&mut hasher);
    hasher.finish()
}

/// How many catalogs' indexes an [`IndexCache`] keeps.
pub const CACHED_CATALOGS: usize = 4;

impl IndexCache {
    /// The index of `tools`: the cached one when they are the catalog it was
    /// built from (the same names and documents, in the same order).
    pub fn index<'a>(&self, tools: impl IntoIterator<Item = ToolText<'a>>) -> Arc<ToolIndex> {
        let (names, docs) = documents(tools);
        let fingerprint = (self.fingerprint)(&names, &docs);
        let mut recent = self.recent.lock();
        if let Some(at) = recent
            .iter()
            .position(|c| c.fingerprint == fingerprint && c.names == names && c.docs == docs)
        {
            let hit = recent.remove(at);
            let index = hit.index.clone();
            recent.push(hit);
            return index;
        }
        let index = Arc::new(ToolIndex::from_documents(names.clone(), &docs));
        if recent.len() >= CACHED_CATALOGS {
            recent.remove(0);
        }
        recent.push(Cached {
            fingerprint,
            names,
            docs,
            index: index.clone(),
        });
        index
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(params: &[(&str, &str)]) -> Value {
        let props: serde_json::Map<String, Value> = params
            .iter()
            .map(|(n, d)| ((*n).to_owned(), json!({"type": "string", "description": d})))
            .collect();
        json!({"type": "object", "properties": props})
    }

    #[test]
    fn an_exact_name_comes_first_even_when_other_tools_say_it_more_often() {
        let s = schema(&[]);
        let index = ToolIndex::build([
            ToolText::new("weather_report", "weather weather weather", &s),
            ToolText::new("weather", "Current conditions", &s),
        ]);
        let hits = index.search("weather", 5);
        assert_eq!(hits[0].position, 1);
        assert_eq!(hits[0].score, f32::INFINITY);
        assert_eq!(hits[1].position, 0);
        // One word of the query naming a tool is enough.
        assert_eq!(index.search("call Weather now", 5)[0].position, 1);
    }

    #[test]
    fn parameters_and_sources_are_searched() {
        let index = ToolIndex::build([
            ToolText::new(
                "a",
                "does one thing",
                &schema(&[("latitude", "degrees north")]),
            ),
            ToolText::new("b", "does another", &schema(&[])).source("github"),
        ]);
        assert_eq!(index.search("latitude", 5)[0].position, 0);
        assert_eq!(index.search("degrees", 5)[0].position, 0);
        assert_eq!(index.search("github issues", 5)[0].position, 1);
    }

    #[test]
    fn ties_keep_catalog_order_and_unrelated_tools_are_left_out() {
        let s = schema(&[]);
        let index = ToolIndex::build([
            ToolText::new("zeta", "reads a file", &s),
            ToolText::new("alpha", "reads a file", &s),
            ToolText::new("other", "sends mail", &s),
        ]);
        let hits = index.search("read file", 10);
        let order: Vec<usize> = hits.iter().map(|h| h.position).collect();
        assert_eq!(order, [0, 1]);
        assert_eq!(index.search("read file", 1).len(), 1);
        assert!(index.search("", 5).is_empty());
        assert!(index.search("xylophone", 5).is_empty());
    }

    #[test]
    fn the_cache_builds_again_only_when_the_catalog_changes() {
        let s = schema(&[]);
        let cache = IndexCache::default();
        let one = cache.index([ToolText::new("a", "reads", &s)]);
        assert!(Arc::ptr_eq(
            &one,
            &cache.index([ToolText::new("a", "reads", &s)])
        ));
        let other = cache.index([ToolText::new("a", "writes", &s)]);
        assert!(!Arc::ptr_eq(&one, &other));
        assert_eq!(other.search("write", 1)[0].position, 0);
        // Two catalogs in turn (two profiles) keep both indexes.
        assert!(Arc::ptr_eq(
            &one,
            &cache.index([ToolText::new("a", "reads", &s)])
        ));
        // Past the bound, the least recently used goes.
        for n in 0..CACHED_CATALOGS {
            cache.index([ToolText::new("a", &format!("more {n}"), &s)]);
        }
        assert!(!Arc::ptr_eq(
            &one,
            &cache.index([ToolText::new("a", "reads", &s)])
        ));
    }

    #[test]
    fn two_catalogs_with_one_fingerprint_each_get_their_own_index() {
        let s = schema(&[]);
        // Every catalog collides, as a server choosing its descriptions
        // could make two collide.
        let cache = IndexCache {
            fingerprint: |_, _| 7,
            ..IndexCache::default()
        };
        let reads = cache.index([ToolText::new("a", "reads", &s)]);
        let writes = cache.index([ToolText::new("b", "writes", &s)]);
        assert!(!Arc::ptr_eq(&reads, &writes));
        assert_eq!(
            writes.search("b", 1)[0].position,
            0,
            "b is in its own index"
        );
        assert!(
            writes.search("reads", 5).is_empty(),
            "{:?}",
            writes.search("reads", 5)
        );
        assert!(Arc::ptr_eq(
            &reads,
            &cache.index([ToolText::new("a", "reads", &s)])
        ));
    }

    #[test]
    fn an_empty_catalog_finds_nothing() {
        let index = ToolIndex::build([]);
        assert!(index.is_empty());
        assert!(index.search("anything", 5).is_empty());
    }
}
