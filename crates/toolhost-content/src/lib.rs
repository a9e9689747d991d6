//! # toolhost-content
//!
//! What a tool result carries besides its text, as MCP sends it: images,
//! audio, resource links and embedded resources, each with its
//! `annotations` and `_meta` ([`Content`], MCP's `ContentBlock`). The
//! runtime, the hooks, the MCP server and client, the agent loop and the
//! model providers all speak this one type, so a block passes from a plugin
//! or an upstream MCP server to a client as it was sent, and is changed only
//! where someone has to see it:
//!
//! - [`ContentLimits`] bounds it (blocks, bytes per block, bytes in all)
//!   where it enters the host ([`limits`]);
//! - [`media`] checks it where it is used: a MIME type, base64 that
//!   decodes, an image a model can read;
//! - [`text_of`] is the text a model reads of it, [`with_text`] what a
//!   rewrite of that text makes of it, and [`stand_in`] one safe line for a
//!   block a model or a terminal cannot show ([`text`]).
//! - [`ErrorKind`] is what kind of failure a call ended in, when it
//!   did, the same for every crate that speaks of tool results.
//!
//! ```
//! use toolhost_content::{Content, ContentLimits, media, stand_in, text_of};
//!
//! let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
//! let content = vec![Content::text("A chart of sales:"), Content::image_bytes(png, "image/png")];
//! ContentLimits::within(1024 * 1024).check(&content).unwrap();
//! assert_eq!(text_of(&content), "A chart of sales:");
//!
//! let Content::Image(image) = &content[1] else { unreachable!() };
//! let for_model = media::for_model(image, 5 * 1024 * 1024).unwrap();
//! assert!(for_model.data_url().starts_with("data:image/png;base64,iVBORw0KGgo"));
//! assert_eq!(stand_in(&content[1]), "[image image/png, 16 bytes]");
//! ```

pub mod block;
mod error_kind;
pub mod limits;
pub mod media;
pub mod text;

pub use block::{
    Content, Embedded, JsonObject, Media, ResourceContents, ResourceLink, Text, encode, json_len,
};
pub use error_kind::ErrorKind;
pub use limits::{ContentError, ContentLimits, DEFAULT_MAX_BLOCKS};
pub use media::BlockError;
pub use text::{stand_in, text_of, with_text};
