//! Tool search for large catalogs: past a budget, the model is offered the
//! built-in `search_tools` tool and the pinned tools instead of every
//! definition; a tool it found (or called by name) is offered in full from
//! the next round on, for the rest of the run.
//!
//! - [`ToolSearch`] says when: `auto` (the default) turns it on when the
//!   tools the policy lets through exceed [`ToolSearch::max_tools`] or
//!   [`ToolSearch::max_bytes`] of definitions, or take more than a quarter
//!   of the model's context window; a small catalog is offered exactly as
//!   without it. `on` and `off` force it.
//! - The search only ever sees what the executor offered for this call's
//!   agent and session, after the policy and the caller's filter: a denied
//!   or hidden tool can neither be found nor named by it. The ranking is
//!   `toolhost-search`'s (BM25 over names, descriptions and parameters).
//! - Every tool of that catalog can be called by name, listed or not.
//! - The prompt protocols (json, xml) render the same offered list, so a
//!   model without native tool calls searches the same way.
//!
//! ```
//! use toolhost_agent::tool_search::{ToolSearch, ToolSearchMode};
//! use toolhost_agent::AgentOptions;
//!
//! let options = AgentOptions::new("qwen2.5-1.5b-instruct").tool_search(ToolSearch {
//!     mode: ToolSearchMode::Auto,
//!     pinned: vec!["calculate".into(), "fs_*".into()],
//!     ..ToolSearch::default()
//! });
//! assert_eq!(options.tool_search.max_tools, 32);
//! ```

use serde_json::{Value, json};
pub use toolhost_search::{MAX_RESULTS, SEARCH_TOOLS, ToolSearch, ToolSearchMode};
use toolhost_search::{SearchArgs, ToolIndex, ToolText};

use crate::tools::ToolSpec;

/// The spec of `search_tools`, for a catalog of `total` tools.
pub fn search_tools_spec(total: usize, results: usize) -> ToolSpec {
    ToolSpec {
        name: SEARCH_TOOLS.to_owned(),
        description: toolhost_search::description(total),
        input_schema: toolhost_search::input_schema(results).into(),
        read_only: true,
    }
}

/// The index text of a tool spec.
pub(crate) fn tool_text(t: &ToolSpec) -> ToolText<'_> {
    ToolText::new(&t.name, &t.description, &t.input_schema)
}

/// Answers a `search_tools` call over `catalog` (the tools `index` was
/// built from): the result for the model and the names found, or an error
/// the model can act on.
pub(crate) fn answer(
    index: &ToolIndex,
    catalog: &[ToolSpec],
    args: &Value,
    settings: &ToolSearch,
) -> Result<(String, Vec<String>), String> {
    let SearchArgs { query, limit } = SearchArgs::parse(args, settings)?;
    let found: Vec<&ToolSpec> = index
        .search(&query, limit)
        .into_iter()
        .filter_map(|h| catalog.get(h.position))
        .collect();
    if found.is_empty() {
        return Ok((toolhost_search::nothing_found(&query), Vec::new()));
    }
    let tools: Vec<Value> = found
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": *t.input_schema}))
        .collect();
    Ok((
        toolhost_search::found_text(&query, &tools),
        found.iter().map(|t| t.name.clone()).collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: json!({"type": "object"}).into(),
            read_only: false,
        }
    }

    #[test]
    fn an_answer_lists_the_best_tools_with_their_parameters() {
        let catalog = vec![
            spec("convert_currency", "Converts money between currencies"),
            spec("send_sms", "Sends a text message"),
        ];
        let index = ToolIndex::build(catalog.iter().map(tool_text));
        let s = ToolSearch::default();
        let (text, names) = answer(&index, &catalog, &json!({"query": "currency"}), &s).unwrap();
        assert_eq!(names, ["convert_currency"]);
        assert!(text.contains("\"parameters\""), "{text}");
        let q = json!({"query": "convert_currency send_sms", "limit": 1});
        assert_eq!(answer(&index, &catalog, &q, &s).unwrap().1.len(), 1);
        let (text, names) = answer(&index, &catalog, &json!({"query": "weather"}), &s).unwrap();
        assert!(
            names.is_empty() && text.starts_with("No tool matches"),
            "{text}"
        );
        assert!(answer(&index, &catalog, &json!({}), &s).is_err());
    }
}
