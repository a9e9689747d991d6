//! Bindings for `toolhost:plugin@0.3.0` (`wit/0.3.0/`, frozen): 0.2.0 plus
//! content blocks (`tool-output.content`: text, images, audio, resource
//! links and embedded resources, with their annotations and `_meta`), in
//! both worlds. The conversions are shared with 0.4.0 (`since_v0_3.rs`).

version_bindings! {
    path: "wit/0.3.0",
    version: (0, 3, 0),
}

include!("since_v0_3.rs");

/// The `hook-plugin` world of this version: a component that exports
/// `hooks` (`before-execute`, `after-execute`), whose outcomes carry
/// content blocks. It imports the same `host` interface as a tool plugin,
/// whose bindings above it reuses.
pub(crate) mod hook {
    wasmtime::component::bindgen!({
        world: "hook-plugin",
        path: "wit/0.3.0",
        exports: { default: async },
        with: {
            "toolhost:plugin/types": super::toolhost::plugin::types,
            "toolhost:plugin/host": super::toolhost::plugin::host,
        },
    });

    include!("since_v0_3_hook.rs");
}
