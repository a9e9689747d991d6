//! Tool search for MCP clients without their own (`host serve --tool-search
//! on`): `tools/list` lists the pinned tools and `search_tools`; a search
//! answers with the best matching tools' full definitions (text for the
//! model, the same as `structuredContent.tools`); a call to any tool the
//! caller's profile allows is accepted by name, listed or not (it goes
//! through [`Runtime::call`](toolhost_runtime::Runtime::call) like every
//! call).
//!
//! The search runs over [`Runtime::offered_tools`](toolhost_runtime::Runtime::offered_tools)
//! for the caller's profile at the moment of the search, so a denied or
//! hidden tool is never found, and a policy change or a reload shows in the
//! next search. A plugin that offers its own `search_tools` keeps it.

use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Value, json};
use toolhost_runtime::ToolInfo;
use toolhost_search::{IndexCache, SEARCH_TOOLS, SearchArgs, ToolSearch, ToolText};

use crate::tools;

/// The search of one server: its settings and the index of the last catalog.
#[derive(Debug)]
pub(crate) struct Search {
    settings: ToolSearch,
    index: IndexCache,
}

impl Search {
    pub(crate) fn new(settings: ToolSearch) -> Search {
        Search {
            settings,
            index: IndexCache::default(),
        }
    }

    /// Whether this server answers `search_tools` for a caller offered
    /// `offered` (not when a tool of its own has the name).
    pub(crate) fn serves(&self, offered: &[ToolInfo]) -> bool {
        !offered.iter().any(|t| t.name == SEARCH_TOOLS)
    }

    /// What `tools/list` shows: the pinned tools, then `search_tools`.
    pub(crate) fn listed(&self, offered: &[ToolInfo]) -> Vec<Tool> {
        let mut listed: Vec<Tool> = offered
            .iter()
            .filter(|t| self.settings.is_pinned(&t.name))
            .map(tools::mcp_tool)
            .collect();
        if self.serves(offered) {
            let schema = match toolhost_search::input_schema(self.settings.results) {
                Value::Object(map) => map,
                _ => serde_json::Map::new(),
            };
            listed.push(
                Tool::new_with_raw(
                    SEARCH_TOOLS,
                    Some(toolhost_search::description(offered.len()).into()),
                    std::sync::Arc::new(schema),
                )
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(true)
                        .idempotent(true)
                        .destructive(false)
                        .open_world(false),
                ),
            );
        }
        listed
    }

    /// Answers a `search_tools` call over `offered`.
    pub(crate) fn answer(&self, offered: &[ToolInfo], args: &Value) -> CallToolResult {
        let SearchArgs { query, limit } = match SearchArgs::parse(args, &self.settings) {
            Ok(a) => a,
            Err(message) => return tools::error_result(&message, "invalid-arguments"),
        };
        let index =
            self.index.index(offered.iter().map(|t| {
                ToolText::new(&t.name, &t.description, &t.input_schema).source(&t.plugin)
            }));
        let found: Vec<Value> = index
            .search(&query, limit)
            .into_iter()
            .filter_map(|h| offered.get(h.position))
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "inputSchema": *t.input_schema,
                })
            })
            .collect();
        tracing::debug!(%query, found = found.len(), "search_tools");
        let text = if found.is_empty() {
            toolhost_search::nothing_found(&query)
        } else {
            toolhost_search::found_text(&query, &found)
        };
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        result.structured_content = Some(json!({ "tools": found }));
        result
    }
}
