//! Content as text: the text a result's blocks carry (what a model reads,
//! and what a hook rewrites), and a short, safe stand-in for a block that
//! is not text, for a model that cannot read it and for a person's
//! terminal.

use crate::block::{Content, Embedded, ResourceContents};
use crate::media::decoded_len;

/// The longest URI, name or MIME type a stand-in quotes, in characters.
const QUOTED: usize = 120;

/// The text of `content`: its text blocks and embedded text resources, in
/// order, one per line. This is what a model reads as a result's text.
///
/// ```
/// use toolhost_content::{Content, text_of};
///
/// let content = [
///     Content::text("Here is the chart:"),
///     Content::image("iVBORw0KGgo=", "image/png"),
///     Content::embedded_text("file:///data.csv", "a,b\n1,2"),
/// ];
/// assert_eq!(text_of(&content), "Here is the chart:\na,b\n1,2");
/// ```
pub fn text_of(content: &[Content]) -> String {
    let mut text = String::new();
    for part in content.iter().filter_map(Content::as_text) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(part);
    }
    text
}

/// `content` with its text replaced by `text`: the text blocks and
/// embedded text resources give way to one text block of `text`, where the
/// first of them was (first, when there was none); every other block stays
/// as it was. What a hook that rewrote a result's text makes of its
/// content, so that the rewrite reaches every reader.
///
/// ```
/// use toolhost_content::{Content, with_text};
///
/// let content = vec![
///     Content::text("key=s3cret"),
///     Content::image("iVBORw0KGgo=", "image/png"),
///     Content::text("more s3cret"),
/// ];
/// let redacted = with_text(content, "key=[redacted]".into());
/// assert_eq!(redacted.len(), 2);
/// assert_eq!(redacted[0].as_text(), Some("key=[redacted]"));
/// assert_eq!(redacted[1].kind(), "image");
/// ```
pub fn with_text(content: Vec<Content>, text: String) -> Vec<Content> {
    let at = content
        .iter()
        .position(|c| c.as_text().is_some())
        .unwrap_or(0);
    let mut out = Vec::with_capacity(content.len().saturating_add(1));
    let mut text = Some(text);
    for (i, block) in content.into_iter().enumerate() {
        if i == at
            && let Some(text) = text.take()
        {
            out.push(Content::text(text));
        }
        if block.as_text().is_none() {
            out.push(block);
        }
    }
    if let Some(text) = text {
        out.push(Content::text(text));
    }
    out
}

/// One line that stands in for `block` where it cannot be shown as it is
/// (a model that does not read images, a terminal): its kind, type, size
/// and URI, each made safe to show ([`toolhost_text::line`]) and bounded.
/// A text block stands in for itself on one line.
///
/// ```
/// use toolhost_content::{Content, stand_in};
///
/// let png = Content::image_bytes(&[0; 96], "image/png");
/// assert_eq!(stand_in(&png), "[image image/png, 96 bytes]");
/// let link = Content::resource_link("file:///a\u{1b}[2J.txt", "a");
/// assert_eq!(stand_in(&link), "[resource link file:///a\\u{1b}[2J.txt (a)]");
/// ```
pub fn stand_in(block: &Content) -> String {
    let q = |s: &str| toolhost_text::line(s, QUOTED);
    match block {
        Content::Text(t) => q(&t.text),
        Content::Image(m) => format!(
            "[image {}, {} bytes]",
            q(&m.mime_type),
            decoded_len(&m.data)
        ),
        Content::Audio(m) => format!(
            "[audio {}, {} bytes]",
            q(&m.mime_type),
            decoded_len(&m.data)
        ),
        Content::ResourceLink(l) => format!("[resource link {} ({})]", q(&l.uri), q(&l.name)),
        Content::Resource(Embedded { resource, .. }) => {
            let mime = resource
                .mime_type()
                .map(|m| format!(" {}", q(m)))
                .unwrap_or_default();
            match resource {
                ResourceContents::Text { uri, text, .. } => {
                    format!("[resource {}{mime}, {} bytes of text]", q(uri), text.len())
                }
                ResourceContents::Blob { uri, blob, .. } => {
                    format!("[resource {}{mime}, {} bytes]", q(uri), decoded_len(blob))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_text_goes_where_the_first_text_was() {
        let content = vec![
            Content::image("", "image/png"),
            Content::embedded_text("u://a", "secret"),
            Content::audio("", "audio/wav"),
        ];
        let kinds: Vec<_> = with_text(content, "t".into())
            .iter()
            .map(Content::kind)
            .collect();
        assert_eq!(kinds, ["image", "text", "audio"]);
        let none = with_text(vec![Content::image("", "image/png")], "t".into());
        assert_eq!(none[0].as_text(), Some("t"));
        assert_eq!(none[1].kind(), "image");
        assert_eq!(with_text(Vec::new(), "t".into()).len(), 1);
    }

    #[test]
    fn a_stand_in_is_one_bounded_line() {
        let long = Content::resource_link(format!("https://x/{}", "a".repeat(1000)), "n\nm");
        let line = stand_in(&long);
        assert!(line.len() < 300, "{line}");
        assert!(!line.contains('\n'));
        let blob = Content::Resource(Embedded {
            resource: ResourceContents::Blob {
                uri: "u://b".into(),
                mime_type: Some("application/gzip".into()),
                blob: crate::encode(&[1; 10]),
                meta: None,
            },
            annotations: None,
            meta: None,
        });
        assert_eq!(
            stand_in(&blob),
            "[resource u://b application/gzip, 10 bytes]"
        );
    }
}
