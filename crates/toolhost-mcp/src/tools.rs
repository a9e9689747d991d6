//! How toolhost's tools and results look in MCP: [`ToolInfo`] becomes an MCP
//! `Tool`, a call's result or error a `CallToolResult`.
//!
//! A result's `output` is the text content, its `structured` value the
//! `structuredContent`, its `details` go under `_meta` (key
//! [`DETAILS_META_KEY`]), never into the text a model reads. An error is an
//! `isError` result whose text is the message the agent loop gives a model,
//! with its kind under `_meta` so a client can tell a denial from a trap.
//!
//! A result's content blocks ([`ToolResult::content`]: text, images, audio,
//! resource links, embedded resources, with their annotations and `_meta`)
//! are its `content` as they are; a result without blocks is its `output`
//! as one text block. A tool source's own result `_meta` goes under the
//! result's `_meta` beside toolhost's keys (which win).
//!
//! The other way, for the client (`client/mod.rs`): an external server's `Tool`
//! becomes a [`SourceTool`], its `CallToolResult` a [`SourceOutcome`] that
//! keeps every block, `structuredContent` and `_meta` as they were sent,
//! with the text of its blocks as the output a model reads.

use std::sync::Arc;

use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, MetaObject, Tool, ToolAnnotations as McpAnnotations,
};
use serde_json::Value;
use toolhost_content::Content;
use toolhost_runtime::{
    CallError, ToolInfo, ToolResult, contract::Annotations, source::SourceOutcome,
    source::SourceTool,
};

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

/// Whether `schema` annotates a parameter with `x-mcp-header` (SEP-2243),
/// along the `properties` chains from its root where the annotation
/// counts.
pub(crate) fn annotates_headers(schema: &Value) -> bool {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|properties| {
            properties
                .values()
                .any(|p| p.get("x-mcp-header").is_some() || annotates_headers(p))
        })
}

/// Tool `name` with `schema`, no more: what the header check reads.
pub(crate) fn header_checked(name: &str, schema: &Value) -> Tool {
    Tool::new_with_raw(name.to_owned(), None, object(schema))
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

/// A successful call as an MCP result: its blocks as they are (or its
/// output as one text block), its structured result, and `_meta`: the
/// source's own, then toolhost's keys.
pub(crate) fn success(r: ToolResult) -> CallToolResult {
    let content = if r.content.is_empty() {
        vec![ContentBlock::text(r.output)]
    } else {
        r.content.into_iter().map(mcp_block).collect()
    };
    let mut result = CallToolResult::success(content);
    result.structured_content = r.structured;
    let mut meta = MetaObject::from(r.meta.unwrap_or_default());
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

/// A block as rmcp's: the same MCP JSON. (Every [`Content`] is one of
/// MCP's blocks; one rmcp would not read, which cannot happen, is sent as
/// its text stand-in rather than dropped.) Through JSON text, not a
/// `Value`: rmcp keeps a priority as an `f32`, which only its text form
/// gives back as it was written (`0.7`, not `0.699999988079071`).
fn mcp_block(block: Content) -> ContentBlock {
    serde_json::to_string(&block)
        .and_then(|text| serde_json::from_str(&text))
        .unwrap_or_else(|_| ContentBlock::text(toolhost_content::stand_in(&block)))
}

/// An rmcp block as ours: the same MCP JSON (through its text, as above).
pub(crate) fn our_block(block: ContentBlock) -> Content {
    serde_json::to_string(&block)
        .and_then(|text| serde_json::from_str(&text))
        .unwrap_or_else(|_| Content::text("[content of a kind this host does not know]"))
}

/// An external server's result as a tool source's outcome: every block,
/// `structuredContent` and `_meta` as they were sent, and the text of the
/// blocks (text blocks and embedded text resources) as the output a model
/// reads (the agent loop adds the images, and a stand-in line for each
/// other block). A result that is one plain text block is that text
/// alone. `isError` is a failure whose message is the blocks' text, with a
/// stand-in line for each other block.
pub(crate) fn source_outcome(r: CallToolResult) -> SourceOutcome {
    if r.is_error == Some(true) {
        let lines: Vec<String> = r
            .content
            .into_iter()
            .map(our_block)
            .map(|b| match b.as_text() {
                Some(text) => text.to_owned(),
                None => toolhost_content::stand_in(&b),
            })
            .collect();
        return SourceOutcome::Failed(lines.join("\n"));
    }
    let mut content: Vec<Content> = r.content.into_iter().map(our_block).collect();
    let plain = matches!(content.as_slice(),
        [Content::Text(t)] if t.annotations.is_none() && t.meta.is_none());
    let output = match content.pop() {
        Some(Content::Text(t)) if plain => t.text,
        Some(last) => {
            content.push(last);
            toolhost_content::text_of(&content)
        }
        None => String::new(),
    };
    SourceOutcome::Ok {
        output,
        details: None,
        structured: r.structured_content,
        content,
        meta: r.meta.map(|m| m.0).map(without_protocol_keys),
    }
}

/// A result's `_meta` without the keys MCP reserves for itself
/// (`io.modelcontextprotocol/serverInfo`, `modelcontextprotocol.io/…`,
/// `mcp.dev/…`: a prefix with a `modelcontextprotocol` or `mcp` label),
/// which belong to the hop between the server and toolhost's client, not to
/// the result: the gateway's own server writes its own.
fn without_protocol_keys(mut meta: JsonObject) -> JsonObject {
    meta.retain(|key, _| {
        let Some((prefix, _)) = key.split_once('/') else {
            return true;
        };
        !prefix
            .split('.')
            .any(|label| label == "modelcontextprotocol" || label == "mcp")
    });
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_schema_annotating_a_parameter_with_a_header_has_its_headers_checked() {
        let annotated = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}});
        let nested = serde_json::json!({"properties": {"where": {"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"}}}}});
        let plain = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "description": "x-mcp-header"}}});
        assert!(annotates_headers(&annotated));
        assert!(annotates_headers(&nested));
        assert!(!annotates_headers(&plain));
        assert!(!annotates_headers(
            &serde_json::json!({"x-mcp-header": "Root"})
        ));
        assert_eq!(
            header_checked("t", &annotated).input_schema["properties"],
            annotated["properties"]
        );
    }

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

    /// What `tools/call` answers, as JSON, for a server's `result`.
    fn through(result: Value) -> Value {
        let upstream: CallToolResult = serde_json::from_value(result).unwrap();
        let SourceOutcome::Ok {
            output,
            details,
            structured,
            content,
            meta,
        } = source_outcome(upstream)
        else {
            panic!("not a success")
        };
        let r = ToolResult {
            output,
            details,
            structured,
            content,
            meta,
            ..result_of("2", false)
        };
        // As the wire has it.
        serde_json::from_str(&serde_json::to_string(&success(r)).unwrap()).unwrap()
    }

    fn result_of(output: &str, cached: bool) -> ToolResult {
        ToolResult {
            output: output.into(),
            details: None,
            structured: None,
            content: Vec::new(),
            meta: None,
            tool: "calculate".into(),
            plugin: "calc".into(),
            plugin_version: "0.1.0".parse().unwrap(),
            duration: std::time::Duration::ZERO,
            cached,
        }
    }

    #[test]
    fn every_block_structured_content_and_meta_of_a_servers_result_pass_as_they_were_sent() {
        let content = serde_json::json!([
            {"type": "text", "text": "Here:", "annotations": {"audience": ["user"], "priority": 0.7}},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png", "_meta": {"k": 1}},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "test://static/resource/1", "name": "r1",
             "description": "one", "mimeType": "text/plain"},
            {"type": "resource", "resource": {"uri": "test://t", "mimeType": "text/plain", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "test://b", "mimeType": "application/octet-stream", "blob": "AAE="}},
        ]);
        let sent = serde_json::json!({
            "content": content,
            "structuredContent": {"temperature": 22.5},
            "_meta": {
                "x.example/trace": "abc",
                "io.modelcontextprotocol/serverInfo": {"name": "upstream"},
                "tools.mcp.dev/x": 1,
            },
        });
        let got = through(sent);
        assert_eq!(got["content"], content);
        assert_eq!(
            got["structuredContent"],
            serde_json::json!({"temperature": 22.5})
        );
        assert_eq!(got["_meta"]["x.example/trace"], "abc");
        assert!(
            got["_meta"]
                .get("io.modelcontextprotocol/serverInfo")
                .is_none()
                && got["_meta"].get("tools.mcp.dev/x").is_none(),
            "MCP's own keys are the hop's, not the result's: {got}"
        );
        assert_eq!(
            got["_meta"][PLUGIN_META_KEY]["name"], "calc",
            "toolhost's keys beside it"
        );
    }

    #[test]
    fn the_model_reads_the_text_of_a_servers_blocks() {
        let upstream: CallToolResult = serde_json::from_value(serde_json::json!({"content": [
            {"type": "text", "text": "Here's the image you requested:"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "text", "text": "The image above is the MCP logo."},
        ]}))
        .unwrap();
        let SourceOutcome::Ok {
            output,
            content,
            details,
            ..
        } = source_outcome(upstream)
        else {
            panic!()
        };
        assert_eq!(
            output,
            "Here's the image you requested:\nThe image above is the MCP logo."
        );
        assert_eq!(content.len(), 3);
        assert_eq!(details, None, "the blocks are the content, not details");

        let plain: CallToolResult = serde_json::from_value(
            serde_json::json!({"content": [{"type": "text", "text": "14"}]}),
        )
        .unwrap();
        let SourceOutcome::Ok {
            output, content, ..
        } = source_outcome(plain)
        else {
            panic!()
        };
        assert_eq!(
            (output.as_str(), content.len()),
            ("14", 0),
            "one plain text block is its text"
        );
    }

    #[test]
    fn a_servers_error_is_its_text_with_a_line_for_each_other_block() {
        let upstream: CallToolResult =
            serde_json::from_value(serde_json::json!({"isError": true, "content": [
                {"type": "text", "text": "failed"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            ]}))
            .unwrap();
        assert_eq!(
            source_outcome(upstream),
            SourceOutcome::Failed("failed\n[image image/png, 3 bytes]".into())
        );
    }

    #[test]
    fn a_result_from_the_cache_is_marked_in_meta() {
        let result = |cached| ToolResult {
            output: "2".into(),
            details: None,
            structured: None,
            content: Vec::new(),
            meta: None,
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
