//! # toolhost-patterns
//!
//! The patterns every part of toolhost matches with, written once: globs on
//! tool and plugin names ([`NameGlob`]) and on paths ([`PathGlob`]), and
//! host patterns ([`HostPattern`]), and what "this path is inside that
//! directory" means ([`within`], [`resolve`], [`normalize_path`]). Plugin
//! grants and the HTTP allowlist (`toolhost-runtime`), policy rules
//! (`toolhost-policy`) and hook matchers (`toolhost-hooks`) all use these,
//! so one syntax means one thing everywhere.

mod glob;
mod host;
mod path;

pub use glob::{GlobError, NameGlob, PathGlob};
pub use host::{HostPattern, HostPatternError};
pub use path::{normalize_path, resolve, within};
