//! Content blocks a result may carry besides its text (MCP's `content`):
//! images, audio, resource links, embedded resources, more text; with
//! annotations and `_meta`. Attach them with [`Output::with_content`]
//! (or [`Output::with_image`]); `toolhost:plugin@0.3.0`.
//!
//! [`Output::with_content`]: crate::Output::with_content
//! [`Output::with_image`]: crate::Output::with_image

use serde_json::{Map, Value};

/// Who a block is meant for (MCP's `audience`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    /// The person using the client.
    User,
    /// The model.
    Assistant,
}

/// One content block.
///
/// ```
/// use toolhost_sdk::{Audience, Content};
///
/// let chart = Content::image(vec![0x89, b'P', b'N', b'G'], "image/png")
///     .with_audience(&[Audience::User])
///     .with_priority(0.8);
/// assert_eq!(chart.kind(), "image");
/// let link = Content::resource_link("file:///report.csv", "report.csv").with_mime_type("text/csv");
/// assert_eq!(link.kind(), "resource_link");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    pub(crate) body: Body,
    pub(crate) audience: Vec<Audience>,
    pub(crate) priority: Option<f64>,
    pub(crate) last_modified: Option<String>,
    pub(crate) meta: Option<String>,
}

/// What a block holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Body {
    Text(String),
    Image {
        data: Vec<u8>,
        mime_type: String,
    },
    Audio {
        data: Vec<u8>,
        mime_type: String,
    },
    ResourceLink {
        uri: String,
        name: String,
        title: Option<String>,
        description: Option<String>,
        mime_type: Option<String>,
        size: Option<u64>,
    },
    Resource {
        uri: String,
        mime_type: Option<String>,
        text: Option<String>,
        blob: Vec<u8>,
    },
}

impl Content {
    fn of(body: Body) -> Self {
        Content {
            body,
            audience: Vec::new(),
            priority: None,
            last_modified: None,
            meta: None,
        }
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Content::of(Body::Text(text.into()))
    }

    /// An image: its bytes and MIME type. Models read `image/png`,
    /// `image/jpeg`, `image/gif` and `image/webp`; the host sends the bytes
    /// as base64.
    pub fn image(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Content::of(Body::Image {
            data: data.into(),
            mime_type: mime_type.into(),
        })
    }

    /// An audio clip: its bytes and MIME type (`audio/wav`, `audio/mpeg`, …).
    pub fn audio(data: impl Into<Vec<u8>>, mime_type: impl Into<String>) -> Self {
        Content::of(Body::Audio {
            data: data.into(),
            mime_type: mime_type.into(),
        })
    }

    /// A link to a resource a client may read.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Content::of(Body::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        })
    }

    /// A resource's text, embedded.
    pub fn embedded_text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Content::of(Body::Resource {
            uri: uri.into(),
            mime_type: None,
            text: Some(text.into()),
            blob: Vec::new(),
        })
    }

    /// A resource's bytes, embedded.
    pub fn embedded_blob(uri: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Content::of(Body::Resource {
            uri: uri.into(),
            mime_type: None,
            text: None,
            blob: bytes.into(),
        })
    }

    /// Sets the MIME type of a resource link or an embedded resource (an
    /// image's or audio clip's is given when it is made).
    pub fn with_mime_type(mut self, mime: impl Into<String>) -> Self {
        match &mut self.body {
            Body::ResourceLink { mime_type, .. } | Body::Resource { mime_type, .. } => {
                *mime_type = Some(mime.into());
            }
            Body::Text(_) | Body::Image { .. } | Body::Audio { .. } => {}
        }
        self
    }

    /// Sets a resource link's title, description and size (each when `Some`).
    pub fn with_link_details(
        mut self,
        title: Option<String>,
        description: Option<String>,
        size: Option<u64>,
    ) -> Self {
        if let Body::ResourceLink {
            title: t,
            description: d,
            size: s,
            ..
        } = &mut self.body
        {
            *t = title.or(t.take());
            *d = description.or(d.take());
            *s = size.or(*s);
        }
        self
    }

    /// Who the block is for (MCP's `annotations.audience`).
    pub fn with_audience(mut self, audience: &[Audience]) -> Self {
        self.audience = audience.to_vec();
        self
    }

    /// How important it is, from 0.0 to 1.0 (MCP's
    /// `annotations.priority`; the host refuses other values).
    pub fn with_priority(mut self, priority: f64) -> Self {
        self.priority = Some(priority);
        self
    }

    /// When it last changed, an ISO 8601 timestamp (MCP's
    /// `annotations.lastModified`).
    pub fn with_last_modified(mut self, timestamp: impl Into<String>) -> Self {
        self.last_modified = Some(timestamp.into());
        self
    }

    /// MCP's `_meta` for the block.
    pub fn with_meta(mut self, meta: Map<String, Value>) -> Self {
        self.meta = Some(Value::Object(meta).to_string());
        self
    }

    /// Its kind, as MCP's `type` names it (`text`, `image`, `audio`,
    /// `resource_link`, `resource`).
    pub fn kind(&self) -> &'static str {
        match self.body {
            Body::Text(_) => "text",
            Body::Image { .. } => "image",
            Body::Audio { .. } => "audio",
            Body::ResourceLink { .. } => "resource_link",
            Body::Resource { .. } => "resource",
        }
    }

    /// Its text, for a text block or an embedded text resource.
    pub fn as_text(&self) -> Option<&str> {
        match &self.body {
            Body::Text(t) | Body::Resource { text: Some(t), .. } => Some(t),
            _ => None,
        }
    }

    /// The bytes of an image, an audio clip or an embedded binary resource.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.body {
            Body::Image { data, .. } | Body::Audio { data, .. } => Some(data),
            Body::Resource {
                text: None, blob, ..
            } => Some(blob),
            _ => None,
        }
    }

    /// The MIME type, when the block has one.
    pub fn mime_type(&self) -> Option<&str> {
        match &self.body {
            Body::Image { mime_type, .. } | Body::Audio { mime_type, .. } => Some(mime_type),
            Body::ResourceLink { mime_type, .. } | Body::Resource { mime_type, .. } => {
                mime_type.as_deref()
            }
            Body::Text(_) => None,
        }
    }
}
