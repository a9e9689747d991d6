//! How toolhost's tools and results look in MCP: [`ToolInfo`] becomes an MCP
//! `Tool`, a call's result or error a `CallToolResult`.
//!
//! A result's `output` is the text content, its `structured` value the
//! `structuredContent`, its `details` go under `_meta` (key
//! [`DETAILS_META_KEY`]), never into the text a model reads. An error is an
//! `isError` result whose text is the message the agent loop gives a model,
//! with its kind under `_meta` so a client can tell a denial from a trap.
//!
//! The other way, for the client (`client/mod.rs`): an external server's `Tool`
//! becomes a [`SourceTool`], its `CallToolResult` a [`SourceOutcome`] whose
//! output is the text content (other content is named, with its size, and
//! kept whole in `details`).

use std::sync::Arc;

use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, MetaObject, Tool, ToolAnnotations as McpAnnotations,
};
use serde_json::Value;
use toolhost_runtime::{Annotations, CallError, SourceOutcome, SourceTool, ToolInfo, ToolResult};

/// The `_meta` key a result's `details` go under.
pub const DETAILS_META_KEY: &str = "dev.toolhost/details";
/// The `_meta` key naming the plugin and version that answered.
pub const PLUGIN_META_KEY: &str = "dev.toolhost/plugin";
/// The `_meta` key of an error result's kind (`denied`, `timeout`, …).
pub const ERROR_KIND_META_KEY: &str = "dev.toolhost/error-kind";
/// The `_meta` key marking a result that came from the runtime's result
/// cache (`true`; absent when the tool ran).
pub const CACHED_META_KEY: &str = "dev.toolhost/cached";

/// `t` as an MCP tool: name, description, schemas and annotations one to
/// one. A schema that is not a JSON object (the runtime refuses those at
/// load, so this is belt and braces) is sent as an empty object schema.
pub(crate) fn mcp_tool(t: &ToolInfo) -> Tool {
    let annotations = McpAnnotations::new()
        .read_only(t.annotations.read_only)
        .idempotent(t.annotations.idempotent)
        .destructive(t.annotations.destructive)
        .open_world(t.annotations.open_world);
    let mut tool = Tool::new_with_raw(
        t.name.clone(),
        Some(t.description.clone().into()),
        object(&t.input_schema),
    )
    .with_annotations(annotations);
    if let Some(schema) = &t.output_schema {
        tool = tool.with_raw_output_schema(object(schema));
    }
    let mut meta = MetaObject::new();
    meta.insert(
        PLUGIN_META_KEY.to_owned(),
        serde_json::json!({ "name": t.plugin, "version": t.plugin_version.to_string(), "tool": t.declared_name }),
    );
    tool.meta = Some(meta);
    tool
}

fn object(schema: &Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(map) => Arc::new(map.clone()),
        _ => Arc::new(JsonObject::from_iter([(
            "type".to_owned(),
            Value::String("object".to_owned()),
        )])),
    }
}

/// A successful call as an MCP result.
pub(crate) fn success(r: ToolResult) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(r.output)]);
    result.structured_content = r.structured;
    let mut meta = MetaObject::new();
    meta.insert(
        PLUGIN_META_KEY.to_owned(),
        serde_json::json!({ "name": r.plugin, "version": r.plugin_version.to_string() }),
    );
    if let Some(details) = r.details {
        meta.insert(DETAILS_META_KEY.to_owned(), details);
    }
    if r.cached {
        meta.insert(CACHED_META_KEY.to_owned(), Value::Bool(true));
    }
    result.with_meta(Some(meta))
}

/// A failed call as an MCP `isError` result: the model's message as text,
/// the error's kind in `_meta`.
pub(crate) fn failure(e: &CallError) -> CallToolResult {
    error_result(&e.to_string(), e.kind().as_str())
}

/// An `isError` result with `message` and `kind`.
pub(crate) fn error_result(message: &str, kind: &str) -> CallToolResult {
    let result = CallToolResult::error(vec![ContentBlock::text(message.to_owned())]);
    let mut meta = MetaObject::new();
    meta.insert(
        ERROR_KIND_META_KEY.to_owned(),
        Value::String(kind.to_owned()),
    );
    result.with_meta(Some(meta))
}

/// An external server's tool as a tool source's: schemas and annotations
/// one to one, with MCP's defaults for hints the server leaves out
/// (destructive and open-world unless it says otherwise). The title, when
/// the description is empty, describes it.
pub(crate) fn source_tool(t: &Tool) -> SourceTool {
    let hints = t.annotations.clone().unwrap_or_default();
    let read_only = hints.read_only_hint.unwrap_or(false);
    let description = match (&t.description, &t.title) {
        (Some(d), _) if !d.is_empty() => d.to_string(),
        (_, Some(title)) => title.clone(),
        _ => String::new(),
    };
    SourceTool {
        name: t.name.to_string(),
        description,
        input_schema: Value::Object((*t.input_schema).clone()),
        output_schema: t
            .output_schema
            .as_ref()
            .map(|s| Value::Object((**s).clone())),
        annotations: Annotations {
            read_only,
            idempotent: hints.idempotent_hint.unwrap_or(false),
            destructive: !read_only && hints.destructive_hint.unwrap_or(true),
            open_world: hints.open_world_hint.unwrap_or(true),
        },
    }
}

/// An external server's result as a tool source's outcome: the text blocks
/// (and embedded text resources) joined for the model; other content named
/// with its type and size, and the whole content kept in `details` for user
/// interfaces; `isError` a failure with that text.
pub(crate) fn source_outcome(r: CallToolResult) -> SourceOutcome {
    let mut parts = Vec::with_capacity(r.content.len());
    let mut only_text = true;
    for block in &r.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => {
                only_text = false;
                parts.push(format!(
                    "[image {}, {} bytes of base64]",
                    i.mime_type,
                    i.data.len()
                ));
            }
            ContentBlock::Audio(a) => {
                only_text = false;
                parts.push(format!(
                    "[audio {}, {} bytes of base64]",
                    a.mime_type,
                    a.data.len()
                ));
            }
            ContentBlock::Resource(e) => match &e.resource {
                rmcp::model::ResourceContents::TextResourceContents { text, .. } => {
                    parts.push(text.clone());
                }
                other => {
                    only_text = false;
                    let uri = match other {
                        rmcp::model::ResourceContents::BlobResourceContents { uri, .. } => {
                            uri.as_str()
                        }
                        _ => "",
                    };
                    parts.push(format!("[resource {uri}]"));
                }
            },
            ContentBlock::ResourceLink(link) => {
                only_text = false;
                parts.push(format!("[resource link {} ({})]", link.uri, link.name));
            }
            _ => {
                only_text = false;
                parts.push("[content of a kind this host does not know]".to_owned());
            }
        }
    }
    let output = parts.join("\n");
    if r.is_error == Some(true) {
        return SourceOutcome::Failed(output);
    }
    let details = (!only_text).then(|| serde_json::json!({ "content": r.content }));
    SourceOutcome::Ok {
        output,
        details,
        structured: r.structured_content,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_object_schema_is_sent_as_an_empty_object_schema() {
        let o = object(&Value::Bool(true));
        assert_eq!(o.get("type"), Some(&Value::String("object".into())));
        let real = serde_json::json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert_eq!(Value::Object((*object(&real)).clone()), real);
    }

    #[test]
    fn an_error_result_carries_its_message_as_text_and_its_kind_in_meta() {
        let r = error_result("no such tool", "not-found");
        assert_eq!(r.is_error, Some(true));
        let text = serde_json::to_value(&r).unwrap();
        assert_eq!(text["content"][0]["text"], "no such tool");
        assert_eq!(text["_meta"][ERROR_KIND_META_KEY], "not-found");
    }

    #[test]
    fn a_result_from_the_cache_is_marked_in_meta() {
        let result = |cached| ToolResult {
            output: "2".into(),
            details: None,
            structured: None,
            tool: "calculate".into(),
            plugin: "calc".into(),
            plugin_version: "0.1.0".parse().unwrap(),
            duration: std::time::Duration::ZERO,
            cached,
        };
        let hit = serde_json::to_value(success(result(true))).unwrap();
        assert_eq!(hit["_meta"][CACHED_META_KEY], true);
        let ran = serde_json::to_value(success(result(false))).unwrap();
        assert!(ran["_meta"].get(CACHED_META_KEY).is_none(), "{ran}");
    }
}
