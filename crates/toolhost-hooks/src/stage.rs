//! When a hook runs: before a call, after it, or when the call needs a
//! person's approval.

use serde::{Deserialize, Serialize};

/// When a hook runs: before the tool, or after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Before the tool runs; may continue, rewrite, block or ask.
    Before,
    /// After the tool ran (or failed); may keep, replace or fail.
    After,
    /// When the call needs approval, before anyone is asked; may allow,
    /// deny or pass it on (Claude Code's `PermissionRequest`).
    Permission,
}

/// The stages an entry runs at.
///
/// ```
/// use toolhost_hooks::{Stage, Stages};
/// assert!(Stages::BOTH.contains(Stage::After));
/// assert!(!Stages::BEFORE.contains(Stage::After));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stages {
    /// Runs before the tool.
    pub before: bool,
    /// Runs after the tool.
    pub after: bool,
    /// Runs when the call needs approval (only when asked for: not in
    /// [`BOTH`](Self::BOTH)).
    pub permission: bool,
}

impl Stages {
    /// Before and after.
    pub const BOTH: Self = Self {
        before: true,
        after: true,
        permission: false,
    };
    /// Before only.
    pub const BEFORE: Self = Self {
        before: true,
        after: false,
        permission: false,
    };
    /// After only.
    pub const AFTER: Self = Self {
        before: false,
        after: true,
        permission: false,
    };
    /// At permission requests only.
    pub const PERMISSION: Self = Self {
        before: false,
        after: false,
        permission: true,
    };
    /// All three.
    pub const ALL: Self = Self {
        before: true,
        after: true,
        permission: true,
    };

    /// The stages in both.
    pub fn intersect(self, other: Self) -> Self {
        Self {
            before: self.before && other.before,
            after: self.after && other.after,
            permission: self.permission && other.permission,
        }
    }

    /// Whether `stage` is one of them.
    pub fn contains(self, stage: Stage) -> bool {
        match stage {
            Stage::Before => self.before,
            Stage::After => self.after,
            Stage::Permission => self.permission,
        }
    }
}

impl Default for Stages {
    fn default() -> Self {
        Self::BOTH
    }
}
