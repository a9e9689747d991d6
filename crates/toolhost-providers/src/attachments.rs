//! A conversation's attachments ([`Message::attachments`]: the images,
//! audio and resources of tool results) as a model is given them: an image
//! as an image, to a model that reads images, when it is one a model can
//! read (PNG, JPEG, GIF or WebP whose bytes say so, at most
//! [`MAX_IMAGE_BYTES`]) and among the newest [`MAX_IMAGES`] of the request;
//! everything else as one line of text that stands in for it
//! ([`toolhost_content::stand_in`], saying why an image is not shown).
//! Each wire format (`openai.rs`, `anthropic.rs`) places what this gives.

use toolhost_content::Content;
use toolhost_content::media::{self, ModelImage};

use crate::message::Message;

/// The most images one request carries (Anthropic's API takes 100 and
/// OpenAI's 500; a conversation that gathers more keeps its newest).
pub const MAX_IMAGES: usize = 20;

/// The largest image given to a model, in bytes (Anthropic's API refuses
/// images over 5 MB).
pub const MAX_IMAGE_BYTES: usize = 5 * 1024 * 1024;

/// What a model is given of one attachment.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Given<'a> {
    /// The image itself.
    Image(ModelImage<'a>),
    /// A line of text in its place.
    Line(String),
}

/// What a model is given of each message's attachments, message by message
/// (`reads_images`: whether the model reads images at all).
pub(crate) fn given(messages: &[Message], reads_images: bool) -> Vec<Vec<Given<'_>>> {
    let mut images_left = MAX_IMAGES;
    let mut out: Vec<Vec<Given<'_>>> = vec![Vec::new(); messages.len()];
    // Newest first, so that the image budget keeps the latest ones.
    for (m, given) in messages.iter().zip(out.iter_mut()).rev() {
        let mut these: Vec<Given<'_>> = m
            .attachments
            .iter()
            .rev()
            .map(|a| one(a, reads_images, &mut images_left))
            .collect();
        these.reverse();
        *given = these;
    }
    out
}

fn one<'a>(block: &'a Content, reads_images: bool, images_left: &mut usize) -> Given<'a> {
    let Content::Image(image) = block else {
        return Given::Line(toolhost_content::stand_in(block));
    };
    let not_shown = |why: &str| {
        Given::Line(format!(
            "{} (not shown: {why})",
            toolhost_content::stand_in(block)
        ))
    };
    if !reads_images {
        return not_shown("this model does not read images");
    }
    if *images_left == 0 {
        return not_shown(&format!("only the last {MAX_IMAGES} images are sent"));
    }
    match media::for_model(image, MAX_IMAGE_BYTES) {
        Ok(image) => {
            *images_left -= 1;
            Given::Image(image)
        }
        Err(e) => not_shown(&e.to_string()),
    }
}

/// `text` and then, one per line, the lines standing in for attachments
/// (and `shown` for each image given apart from the text, as the OpenAI
/// wire format gives a tool result's images in a message of their own).
pub(crate) fn text_with_lines(text: &str, given: &[Given<'_>], shown: Option<&str>) -> String {
    let mut out = text.to_owned();
    for g in given {
        let line = match g {
            Given::Line(line) => line.clone(),
            Given::Image(image) => match shown {
                Some(note) => format!(
                    "[image {}, {} bytes: {note}]",
                    image.mime_type,
                    media::decoded_len(image.data)
                ),
                None => continue,
            },
        };
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn png() -> Content {
        Content::image_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "image/png")
    }

    fn result_with(attachments: Vec<Content>) -> Message {
        let call = ToolCall {
            id: "c".into(),
            name: "t".into(),
            arguments: "{}".into(),
        };
        Message::tool_result(&call, "out", false).with_attachments(attachments)
    }

    #[test]
    fn a_model_that_reads_images_gets_them_and_a_line_for_everything_else() {
        let messages = [result_with(vec![
            png(),
            Content::audio("UklGRg==", "audio/wav"),
            Content::image_bytes(b"GIF89a", "image/png"),
        ])];
        let given = given(&messages, true);
        assert!(matches!(
            given[0][0],
            Given::Image(ModelImage {
                mime_type: "image/png",
                ..
            })
        ));
        assert_eq!(
            given[0][1],
            Given::Line("[audio audio/wav, 4 bytes]".into())
        );
        assert_eq!(
            given[0][2],
            Given::Line(
                "[image image/png, 6 bytes] (not shown: the data is not an image of type image/png)".into()
            )
        );
        let blind = super::given(&messages, false);
        assert!(
            matches!(&blind[0][0], Given::Line(l) if l.ends_with("(not shown: this model does not read images)"))
        );
    }

    #[test]
    fn only_the_newest_images_of_a_request_are_sent() {
        let messages: Vec<Message> = (0..MAX_IMAGES + 2)
            .map(|_| result_with(vec![png()]))
            .collect();
        let given = given(&messages, true);
        let images = given
            .iter()
            .flatten()
            .filter(|g| matches!(g, Given::Image(_)))
            .count();
        assert_eq!(images, MAX_IMAGES);
        assert!(matches!(&given[0][0], Given::Line(l) if l.contains("only the last")));
        assert!(matches!(given[MAX_IMAGES + 1][0], Given::Image(_)));
    }
}
