//! Checks of binary content where it is used: a MIME type that is one, base64
//! that decodes, and an image a model can read (PNG, JPEG, GIF or WebP, whose
//! bytes say the type the block declares, within a size).
//!
//! The gateway passes blocks on as they were sent; these checks run where a
//! plugin's blocks enter the host, and where a model or a person is given
//! one.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::block::Media;

/// Why a block is refused: its data, its type, its annotations or its `_meta`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    /// Not a MIME type (`type/subtype`, optionally with parameters).
    #[error("`{0}` is not a MIME type")]
    MimeType(String),
    /// The data is not base64.
    #[error("the data is not valid base64")]
    Base64,
    /// The data is larger than allowed.
    #[error("{size} bytes of data, over the limit of {limit} bytes")]
    TooLarge {
        /// Its size, decoded (or as an estimate from the base64's length).
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// An image type models do not read.
    #[error("`{0}` is not an image type a model reads (PNG, JPEG, GIF, WebP)")]
    UnsupportedImage(String),
    /// The bytes are not the image type the block declares.
    #[error("the data is not an image of type {declared}")]
    NotThatImage {
        /// The declared type.
        declared: &'static str,
    },
    /// A `_meta` that is not a JSON object.
    #[error("`_meta` is not a JSON object")]
    Meta,
    /// Annotations that MCP does not allow.
    #[error("annotations: {0}")]
    Annotations(&'static str),
}

/// Whether bytes begin as an image of one type does.
type Magic = fn(&[u8]) -> bool;

/// The image types models read, with their magic bytes.
const IMAGE_TYPES: [(&str, Magic); 4] = [
    ("image/png", |b| b.starts_with(b"\x89PNG\r\n\x1a\n")),
    ("image/jpeg", |b| b.starts_with(&[0xff, 0xd8, 0xff])),
    ("image/gif", |b| {
        b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a")
    }),
    ("image/webp", |b| {
        b.len() >= 12 && b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP")
    }),
];

/// Checks that `mime` is a MIME type: `type/subtype` of RFC 6838 tokens,
/// optionally followed by `;` and parameters; at most 255 bytes.
///
/// ```
/// use toolhost_content::media::check_mime_type;
/// assert!(check_mime_type("image/png").is_ok());
/// assert!(check_mime_type("audio/wav; codecs=1").is_ok());
/// assert!(check_mime_type("png").is_err());
/// assert!(check_mime_type("image/png\n<script>").is_err());
/// ```
pub fn check_mime_type(mime: &str) -> Result<(), BlockError> {
    let refuse = || BlockError::MimeType(toolhost_text::line(mime, 80));
    if mime.len() > 255 {
        return Err(refuse());
    }
    let essence = mime.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return Err(refuse());
    };
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let params_ok = mime
        .split(';')
        .skip(1)
        .all(|p| p.bytes().all(|b| b.is_ascii_graphic() || b == b' '));
    if token(kind) && token(subtype) && params_ok {
        Ok(())
    } else {
        Err(refuse())
    }
}

/// Standard base64 that accepts data with or without its padding.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes base64 `data` (standard alphabet, padding optional) of at most
/// `max_bytes` decoded bytes; larger data is refused before it is decoded.
///
/// ```
/// use toolhost_content::media::{BlockError, decode};
/// assert_eq!(decode("aGk=", 10), Ok(b"hi".to_vec()));
/// assert_eq!(decode("aGk", 10), Ok(b"hi".to_vec()));
/// assert_eq!(decode("not base64!", 10), Err(BlockError::Base64));
/// assert!(matches!(decode("aGVsbG8gd29ybGQ=", 4), Err(BlockError::TooLarge { .. })));
/// ```
pub fn decode(data: &str, max_bytes: usize) -> Result<Vec<u8>, BlockError> {
    let estimate = data.len() / 4 * 3 + data.len() % 4;
    // The estimate is at most two bytes over the decoded size.
    if estimate > max_bytes.saturating_add(2) {
        return Err(BlockError::TooLarge {
            size: estimate,
            limit: max_bytes,
        });
    }
    let bytes = BASE64.decode(data).map_err(|_| BlockError::Base64)?;
    if bytes.len() > max_bytes {
        return Err(BlockError::TooLarge {
            size: bytes.len(),
            limit: max_bytes,
        });
    }
    Ok(bytes)
}

/// An image a model can be given: its checked MIME type and its base64
/// data as it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelImage<'a> {
    /// One of `image/png`, `image/jpeg`, `image/gif`, `image/webp`.
    pub mime_type: &'static str,
    /// The base64 data (it decodes, to bytes of that type).
    pub data: &'a str,
}

impl ModelImage<'_> {
    /// A `data:` URL of the image, as the OpenAI wire format takes it.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type, self.data)
    }
}

/// `image` if a model can read it: a type models read (PNG, JPEG, GIF,
/// WebP; the MIME type's case and parameters aside), base64 that decodes
/// to at most `max_bytes` bytes that are an image of that type.
///
/// ```
/// use toolhost_content::Media;
/// use toolhost_content::media::{BlockError, for_model};
///
/// let png = Media::new(toolhost_content::encode(b"\x89PNG\r\n\x1a\n...."), "image/png");
/// assert_eq!(for_model(&png, 1024).unwrap().mime_type, "image/png");
///
/// let lying = Media::new(toolhost_content::encode(b"GIF89a...."), "image/png");
/// assert_eq!(for_model(&lying, 1024), Err(BlockError::NotThatImage { declared: "image/png" }));
///
/// let svg = Media::new(toolhost_content::encode(b"<svg/>"), "image/svg+xml");
/// assert!(matches!(for_model(&svg, 1024), Err(BlockError::UnsupportedImage(_))));
/// ```
pub fn for_model(image: &Media, max_bytes: usize) -> Result<ModelImage<'_>, BlockError> {
    let essence = image
        .mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let essence = if essence == "image/jpg" {
        "image/jpeg".to_owned()
    } else {
        essence
    };
    let Some((mime_type, is_it)) = IMAGE_TYPES.iter().find(|(t, _)| *t == essence) else {
        return Err(BlockError::UnsupportedImage(toolhost_text::line(
            &image.mime_type,
            80,
        )));
    };
    let bytes = decode(&image.data, max_bytes)?;
    if !is_it(&bytes) {
        return Err(BlockError::NotThatImage {
            declared: mime_type,
        });
    }
    Ok(ModelImage {
        mime_type,
        data: &image.data,
    })
}

/// The size of base64 `data` once decoded, estimated from its length
/// (exact for padded data without whitespace).
pub fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take(2).filter(|b| *b == b'=').count();
    (data.len() / 4 * 3 + (data.len() % 4).saturating_sub(1)).saturating_sub(padding)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_image_type_a_model_reads_is_known_by_its_bytes() {
        let samples: [(&str, &[u8]); 5] = [
            ("image/png", b"\x89PNG\r\n\x1a\nrest"),
            ("image/jpeg", &[0xff, 0xd8, 0xff, 0xe0, 0]),
            ("image/jpg", &[0xff, 0xd8, 0xff, 0xe0, 0]),
            ("image/gif", b"GIF87a..."),
            ("IMAGE/WEBP", b"RIFF\0\0\0\0WEBPVP8 "),
        ];
        for (mime, bytes) in samples {
            let media = Media::new(crate::encode(bytes), mime);
            assert!(for_model(&media, 100).is_ok(), "{mime}");
        }
        let too_big = Media::new(crate::encode(&[0u8; 200]), "image/png");
        assert!(matches!(
            for_model(&too_big, 100),
            Err(BlockError::TooLarge { .. })
        ));
    }

    #[test]
    fn the_decoded_length_is_read_from_the_base64() {
        for n in 0..10 {
            let data = crate::encode(&vec![7u8; n]);
            assert_eq!(decoded_len(&data), n, "{data}");
        }
    }
}
