// What contracts 0.3.0 and 0.4.0 share (their types are the same): the
// conversions of a tool plugin's specs, contexts and outcomes, content
// blocks included, to and from the runtime's neutral types. Included
// (`include!`) into each version's module, after its `bindgen!`, so that
// `tool` and `wit` name that version's generated types.
//
// A plugin's blocks become [`Content`] here, checked on the way in (MIME
// types, `meta` a JSON object, a priority between 0 and 1) and their bytes
// encoded as base64; a hook's outcome goes the other way.

use serde_json::{Map, Value};
use toolhost_content::media::check_mime_type;
use toolhost_content::{BlockError, Content, ContentError, Embedded, ResourceContents};

use super::types::{Annotations, RawContext, RawOutcome, RawToolSpec};

use exports::toolhost::plugin::tool;
use toolhost::plugin::types as wit;

impl From<tool::ToolSpec> for RawToolSpec {
    fn from(spec: tool::ToolSpec) -> Self {
        RawToolSpec {
            name: spec.name,
            description: spec.description,
            input_schema: spec.input_schema,
            output_schema: spec.output_schema,
            annotations: spec.annotations.into(),
        }
    }
}

impl From<wit::Annotations> for Annotations {
    fn from(a: wit::Annotations) -> Self {
        Annotations {
            read_only: a.read_only,
            idempotent: a.idempotent,
            destructive: a.destructive,
            open_world: a.open_world,
        }
    }
}

impl From<RawContext<'_>> for tool::CallContext {
    fn from(cx: RawContext<'_>) -> Self {
        tool::CallContext {
            call_id: cx.call_id.to_owned(),
            session_id: cx.session_id.map(str::to_owned),
            agent: cx.agent.map(str::to_owned),
        }
    }
}

impl From<Result<tool::ToolOutput, tool::ToolError>> for RawOutcome {
    fn from(result: Result<tool::ToolOutput, tool::ToolError>) -> Self {
        match result {
            Ok(out) => match content_from_wit(out.content) {
                Ok(content) => RawOutcome::Ok {
                    output: out.output,
                    details: out.details,
                    structured: out.structured,
                    content,
                },
                Err(e) => RawOutcome::InvalidContent(e),
            },
            Err(tool::ToolError::InvalidArguments(m)) => RawOutcome::InvalidArguments(m),
            Err(tool::ToolError::Failed(m)) => RawOutcome::Failed(m),
        }
    }
}

/// A plugin's blocks as [`Content`], each checked; at most
/// [`toolhost_content::DEFAULT_MAX_BLOCKS`] of them (their sizes are
/// checked with the rest of the result, `call/execute.rs`).
fn content_from_wit(blocks: Vec<wit::ContentBlock>) -> Result<Vec<Content>, ContentError> {
    if blocks.len() > toolhost_content::DEFAULT_MAX_BLOCKS {
        return Err(ContentError::TooManyBlocks {
            count: blocks.len(),
            limit: toolhost_content::DEFAULT_MAX_BLOCKS,
        });
    }
    blocks
        .into_iter()
        .enumerate()
        .map(|(index, block)| {
            block_from_wit(block).map_err(|(kind, problem)| ContentError::Invalid {
                index,
                kind,
                problem,
            })
        })
        .collect()
}

/// One block as [`Content`], or its kind and what is wrong with it.
fn block_from_wit(block: wit::ContentBlock) -> Result<Content, (&'static str, BlockError)> {
    let kind = match &block.content {
        wit::Content::Text(_) => "text",
        wit::Content::Image(_) => "image",
        wit::Content::Audio(_) => "audio",
        wit::Content::ResourceLink(_) => "resource_link",
        wit::Content::Embedded(_) => "resource",
    };
    let fail = |problem| (kind, problem);
    let meta = match block.meta {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Some(map),
            _ => return Err(fail(BlockError::Meta)),
        },
    };
    let annotations = block
        .annotations
        .map(annotations_json)
        .transpose()
        .map_err(fail)?;
    let media = |m: wit::Media| -> Result<toolhost_content::Media, (&'static str, BlockError)> {
        check_mime_type(&m.mime_type).map_err(fail)?;
        Ok(toolhost_content::Media {
            data: toolhost_content::encode(&m.data),
            mime_type: m.mime_type,
            annotations: annotations.clone(),
            meta: meta.clone(),
        })
    };
    let optional_mime = |m: &Option<String>| match m {
        Some(m) => check_mime_type(m).map_err(fail),
        None => Ok(()),
    };
    Ok(match block.content {
        wit::Content::Text(text) => Content::Text(toolhost_content::Text {
            text,
            annotations,
            meta,
        }),
        wit::Content::Image(m) => Content::Image(media(m)?),
        wit::Content::Audio(m) => Content::Audio(media(m)?),
        wit::Content::ResourceLink(l) => {
            optional_mime(&l.mime_type)?;
            Content::ResourceLink(toolhost_content::ResourceLink {
                uri: l.uri,
                name: l.name,
                title: l.title,
                description: l.description,
                mime_type: l.mime_type,
                size: l.size,
                icons: None,
                annotations,
                meta,
            })
        }
        wit::Content::Embedded(e) => {
            optional_mime(&e.mime_type)?;
            let resource = match e.body {
                wit::ResourceBody::Text(text) => ResourceContents::Text {
                    uri: e.uri,
                    mime_type: e.mime_type,
                    text,
                    meta: None,
                },
                wit::ResourceBody::Blob(bytes) => ResourceContents::Blob {
                    uri: e.uri,
                    mime_type: e.mime_type,
                    blob: toolhost_content::encode(&bytes),
                    meta: None,
                },
            };
            Content::Resource(Embedded {
                resource,
                annotations,
                meta,
            })
        }
    })
}

/// WIT annotations as MCP's JSON (`audience`, `priority`, `lastModified`;
/// each only when set).
fn annotations_json(a: wit::ContentAnnotations) -> Result<Map<String, Value>, BlockError> {
    let mut map = Map::new();
    if !a.audience.is_empty() {
        let roles = a
            .audience
            .iter()
            .map(|r| match r {
                wit::Audience::User => Value::from("user"),
                wit::Audience::Assistant => Value::from("assistant"),
            })
            .collect();
        map.insert("audience".into(), Value::Array(roles));
    }
    if let Some(p) = a.priority {
        if !(0.0..=1.0).contains(&p) {
            return Err(BlockError::Annotations(
                "the priority must be between 0.0 and 1.0",
            ));
        }
        map.insert("priority".into(), Value::from(p));
    }
    if let Some(t) = a.last_modified {
        map.insert("lastModified".into(), Value::String(t));
    }
    Ok(map)
}

/// A block as a 0.3.0 hook plugin sees it. What WIT cannot carry of it
/// (annotations beyond MCP's three, icons, a resource's own `_meta`) is
/// left out, and a block whose base64 does not decode is shown as its
/// text stand-in: the hook's answer is compared with what it was shown
/// (`hook::after`), never with the original.
fn block_to_wit(block: &Content) -> wit::ContentBlock {
    let annotations = block.annotations().map(annotations_to_wit);
    let meta = block.meta().map(|m| Value::Object(m.clone()).to_string());
    let bytes = |data: &str| toolhost_content::media::decode(data, usize::MAX).ok();
    let stand_in = || wit::Content::Text(toolhost_content::stand_in(block));
    let content = match block {
        Content::Text(t) => wit::Content::Text(t.text.clone()),
        Content::Image(m) | Content::Audio(m) => match bytes(&m.data) {
            Some(data) => {
                let media = wit::Media {
                    data,
                    mime_type: m.mime_type.clone(),
                };
                if matches!(block, Content::Image(_)) {
                    wit::Content::Image(media)
                } else {
                    wit::Content::Audio(media)
                }
            }
            None => stand_in(),
        },
        Content::ResourceLink(l) => wit::Content::ResourceLink(wit::ResourceLink {
            uri: l.uri.clone(),
            name: l.name.clone(),
            title: l.title.clone(),
            description: l.description.clone(),
            mime_type: l.mime_type.clone(),
            size: l.size,
        }),
        Content::Resource(e) => {
            let (uri, mime_type) = (
                e.resource.uri().to_owned(),
                e.resource.mime_type().map(str::to_owned),
            );
            let body = match &e.resource {
                ResourceContents::Text { text, .. } => Some(wit::ResourceBody::Text(text.clone())),
                ResourceContents::Blob { blob, .. } => bytes(blob).map(wit::ResourceBody::Blob),
            };
            match body {
                Some(body) => wit::Content::Embedded(wit::EmbeddedResource {
                    uri,
                    mime_type,
                    body,
                }),
                None => stand_in(),
            }
        }
    };
    wit::ContentBlock {
        content,
        annotations,
        meta,
    }
}

/// MCP's annotations as WIT's: the audience's known roles, a numeric
/// priority, a string `lastModified`.
fn annotations_to_wit(map: &Map<String, Value>) -> wit::ContentAnnotations {
    let audience = map
        .get("audience")
        .and_then(Value::as_array)
        .map(|roles| {
            roles
                .iter()
                .filter_map(|r| match r.as_str() {
                    Some("user") => Some(wit::Audience::User),
                    Some("assistant") => Some(wit::Audience::Assistant),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    wit::ContentAnnotations {
        audience,
        priority: map.get("priority").and_then(Value::as_f64),
        last_modified: map
            .get("lastModified")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }
}
