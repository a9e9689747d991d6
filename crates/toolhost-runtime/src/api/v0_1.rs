//! Bindings for `toolhost:plugin@0.1.0` (`wit/0.1.0/`, frozen): no
//! structured output.

version_bindings! {
    path: "../../wit/0.1.0",
    version: (0, 1, 0),
    |spec| output_schema: None,
    |out| structured: None,
}
