//! The content blocks of a tool result, one to one with MCP's
//! `ContentBlock` (revision 2025-11-25): text, image, audio, a resource
//! link, an embedded resource. Each carries its `annotations` and `_meta`
//! as they were sent (kept as JSON objects, never interpreted), so a block
//! read from one MCP peer serializes to the same JSON for the next.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object, as `annotations` and `_meta` are kept.
pub type JsonObject = Map<String, Value>;

/// One block of a tool result.
///
/// Its JSON is MCP's: `{"type": "image", "data": "…", "mimeType": "image/png"}`.
///
/// ```
/// use toolhost_content::Content;
///
/// let png = Content::image_bytes(b"\x89PNG\r\n\x1a\n", "image/png");
/// let json = serde_json::to_value(&png).unwrap();
/// assert_eq!(json["type"], "image");
/// assert_eq!(json["data"], "iVBORw0KGgo=");
/// assert_eq!(json["mimeType"], "image/png");
/// let back: Content = serde_json::from_value(json).unwrap();
/// assert_eq!(back, png);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Text.
    Text(Text),
    /// An image: base64 data and its MIME type.
    Image(Media),
    /// An audio clip: base64 data and its MIME type.
    Audio(Media),
    /// A link to a resource the client may read.
    ResourceLink(ResourceLink),
    /// A resource's contents, embedded.
    Resource(Embedded),
}

/// A text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Text {
    /// The text.
    pub text: String,
    /// How a client should use it (MCP's `annotations`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonObject>,
    /// MCP's `_meta`, as sent.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// An image or audio block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Media {
    /// The bytes, base64-encoded (as sent: checked only where a model or a
    /// person gets them, [`crate::media`]).
    pub data: String,
    /// Its MIME type (`image/png`, `audio/wav`).
    pub mime_type: String,
    /// How a client should use it (MCP's `annotations`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonObject>,
    /// MCP's `_meta`, as sent.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A link to a resource (MCP's `ResourceLink`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its MIME type, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its size in bytes, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Icons a client may show for it, as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Value>>,
    /// How a client should use it (MCP's `annotations`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonObject>,
    /// MCP's `_meta`, as sent.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// An embedded resource (MCP's `EmbeddedResource`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Embedded {
    /// Its contents.
    pub resource: ResourceContents,
    /// How a client should use it (MCP's `annotations`), as sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonObject>,
    /// MCP's `_meta`, as sent.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A resource's contents: text, or base64 bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ResourceContents {
    /// Text contents.
    #[serde(rename_all = "camelCase")]
    Text {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The text.
        text: String,
        /// MCP's `_meta`, as sent.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<JsonObject>,
    },
    /// Binary contents.
    #[serde(rename_all = "camelCase")]
    Blob {
        /// The resource's URI.
        uri: String,
        /// Its MIME type, if known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// The bytes, base64-encoded.
        blob: String,
        /// MCP's `_meta`, as sent.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<JsonObject>,
    },
}

impl ResourceContents {
    /// The resource's URI.
    pub fn uri(&self) -> &str {
        match self {
            ResourceContents::Text { uri, .. } | ResourceContents::Blob { uri, .. } => uri,
        }
    }

    /// Its MIME type, if known.
    pub fn mime_type(&self) -> Option<&str> {
        match self {
            ResourceContents::Text { mime_type, .. } | ResourceContents::Blob { mime_type, .. } => {
                mime_type.as_deref()
            }
        }
    }
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text(Text {
            text: text.into(),
            annotations: None,
            meta: None,
        })
    }

    /// An image block from base64 `data`.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Image(Media::new(data, mime_type))
    }

    /// An image block from raw bytes (encoded as base64 here).
    pub fn image_bytes(bytes: &[u8], mime_type: impl Into<String>) -> Self {
        Content::Image(Media::new(encode(bytes), mime_type))
    }

    /// An audio block from base64 `data`.
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Content::Audio(Media::new(data, mime_type))
    }

    /// A resource link.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Content::ResourceLink(ResourceLink {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            icons: None,
            annotations: None,
            meta: None,
        })
    }

    /// An embedded text resource.
    pub fn embedded_text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Content::Resource(Embedded {
            resource: ResourceContents::Text {
                uri: uri.into(),
                mime_type: None,
                text: text.into(),
                meta: None,
            },
            annotations: None,
            meta: None,
        })
    }

    /// What kind of block it is, as MCP's `type` names it (`image`,
    /// `resource_link`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Content::Text(_) => "text",
            Content::Image(_) => "image",
            Content::Audio(_) => "audio",
            Content::ResourceLink(_) => "resource_link",
            Content::Resource(_) => "resource",
        }
    }

    /// Its text, for a text block or an embedded text resource: the part
    /// of it a model reads as text.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Content::Text(t) => Some(&t.text),
            Content::Resource(Embedded {
                resource: ResourceContents::Text { text, .. },
                ..
            }) => Some(text),
            _ => None,
        }
    }

    /// Whether it is meant for the model: its `annotations.audience` is
    /// absent, or names `assistant` (MCP: a block for the `user` only is
    /// for the person, not the model).
    ///
    /// ```
    /// use toolhost_content::Content;
    /// let mut block: Content = serde_json::from_value(serde_json::json!(
    ///     {"type": "image", "data": "", "mimeType": "image/png", "annotations": {"audience": ["user"]}}
    /// )).unwrap();
    /// assert!(!block.is_for_assistant());
    /// assert!(Content::image("", "image/png").is_for_assistant());
    /// ```
    pub fn is_for_assistant(&self) -> bool {
        match self.annotations().and_then(|a| a.get("audience")) {
            Some(Value::Array(roles)) => roles.iter().any(|r| r == "assistant"),
            _ => true,
        }
    }

    /// Its `annotations`, as sent.
    pub fn annotations(&self) -> Option<&JsonObject> {
        match self {
            Content::Text(t) => t.annotations.as_ref(),
            Content::Image(m) | Content::Audio(m) => m.annotations.as_ref(),
            Content::ResourceLink(l) => l.annotations.as_ref(),
            Content::Resource(e) => e.annotations.as_ref(),
        }
    }

    /// Its `_meta`, as sent.
    pub fn meta(&self) -> Option<&JsonObject> {
        match self {
            Content::Text(t) => t.meta.as_ref(),
            Content::Image(m) | Content::Audio(m) => m.meta.as_ref(),
            Content::ResourceLink(l) => l.meta.as_ref(),
            Content::Resource(e) => e.meta.as_ref(),
        }
    }

    /// Its size as MCP JSON, in bytes: what the limits count
    /// ([`ContentLimits`](crate::ContentLimits)). Counted by writing it to
    /// a counter, not to memory.
    pub fn wire_len(&self) -> usize {
        json_len(self)
    }
}

impl Media {
    /// Media with base64 `data` and no annotations.
    pub fn new(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Media {
            data: data.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        }
    }
}

/// `bytes` in standard base64 with padding, as MCP sends binary data.
///
/// ```
/// assert_eq!(toolhost_content::encode(b"hi"), "aGk=");
/// ```
pub fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The length of `value` as JSON text, counted without writing it to memory
/// (0 if it cannot be serialized, which strings and JSON values always can).
///
/// ```
/// let meta = serde_json::json!({"k": [1, 2]});
/// assert_eq!(toolhost_content::json_len(&meta), meta.to_string().len());
/// ```
pub fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => 0,
    }
}

/// Counts the bytes written to it.
struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every block of MCP's schema, with annotations and `_meta` where it
    /// has them, reads and writes back to the same JSON.
    #[test]
    fn every_mcp_block_round_trips_to_the_same_json() {
        let blocks = json!([
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.7},
             "_meta": {"x.example/k": 1}},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png",
             "annotations": {"lastModified": "2025-01-01T00:00:00Z"}},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav", "_meta": {"a": [1]}},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a", "title": "A",
             "description": "d", "mimeType": "text/plain", "size": 3,
             "icons": [{"src": "https://example.com/i.png"}], "_meta": {}},
            {"type": "resource", "resource": {"uri": "test://t", "mimeType": "text/plain", "text": "x",
             "_meta": {"r": true}}, "annotations": {"priority": 1}},
            {"type": "resource", "resource": {"uri": "test://b", "blob": "AAE="}},
        ]);
        let read: Vec<Content> = serde_json::from_value(blocks.clone()).unwrap();
        assert_eq!(
            read.iter().map(Content::kind).collect::<Vec<_>>(),
            [
                "text",
                "image",
                "audio",
                "resource_link",
                "resource",
                "resource"
            ]
        );
        assert_eq!(serde_json::to_value(&read).unwrap(), blocks);
        assert!(matches!(
            &read[5],
            Content::Resource(Embedded {
                resource: ResourceContents::Blob { .. },
                ..
            })
        ));
    }

    #[test]
    fn the_wire_length_is_the_length_of_the_json() {
        let block = Content::image_bytes(&[0u8; 300], "image/png");
        assert_eq!(
            block.wire_len(),
            serde_json::to_string(&block).unwrap().len()
        );
    }

    #[test]
    fn text_is_read_from_text_blocks_and_embedded_text_resources_only() {
        assert_eq!(Content::text("a").as_text(), Some("a"));
        assert_eq!(Content::embedded_text("u://x", "b").as_text(), Some("b"));
        assert_eq!(Content::image("", "image/png").as_text(), None);
        assert_eq!(Content::resource_link("u://x", "x").as_text(), None);
    }
}
