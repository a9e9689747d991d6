//! The OTLP transports built in ([`Protocol`]); `export.rs` reads one
//! from text, `queue.rs` and `send.rs` write and send in it.

/// The OTLP transports built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `http/protobuf`, OTLP's default over HTTP.
    #[default]
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}
