//! # toolhost-patterns
//!
//! The patterns every part of toolhost matches with, written once: globs on
//! tool and plugin names ([`NameGlob`]) and on paths ([`PathGlob`]), and
//! host patterns ([`HostPattern`]). Plugin grants and the HTTP allowlist
//! (`toolhost-runtime`), policy rules (`toolhost-policy`) and hook matchers
//! (`toolhost-hooks`) all use these, so one syntax means one thing
//! everywhere.

mod glob;
mod host;

pub use glob::{GlobError, NameGlob, PathGlob, normalize_path};
pub use host::{HostPattern, HostPatternError};
