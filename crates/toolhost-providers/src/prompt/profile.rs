//! The calling conventions of the prompt protocols ([`PromptProfile`]): how
//! a model without native tool calls writes its calls in its text.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How the model writes tool calls in its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptProfile {
    /// A `{"tool_calls":[{"name":…,"arguments":{…}}]}` object, fenced or not.
    Json,
    /// `<tool_code>{"name":…,"arguments":{…}}</tool_code>` blocks; results
    /// come back as `<tool_result name="…">…</tool_result>`.
    Xml,
}

impl fmt::Display for PromptProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PromptProfile::Json => "json",
            PromptProfile::Xml => "xml",
        })
    }
}
