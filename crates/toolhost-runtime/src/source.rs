//! Tool sources other than plugin files: an MCP server (`toolhost-mcp`'s
//! client), or anything an embedder writes, behind one trait,
//! [`ToolSource`]. A source's tools join the registry beside the plugins'
//! and every call to one goes through the same steps (`call/`): lookup,
//! validation, policy, hooks, approval, then the source instead of a
//! sandbox (under the source's `timeout-ms`, `max-instances` and
//! `max-output-bytes`), then after-hooks and result approval.
//!
//! A source is listed as a plugin of kind `source` named after it, so
//! policy rules match its tools by name (`tool = "git__*"`) and by source
//! (`plugin = "git"`, or `server = "git"` in a policy file), and hooks,
//! events and history see its calls like any other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::api::{Annotations, Linked};
use crate::grants::PluginSettings;
use crate::limits::Limits;
use crate::lockfile::{GrantState, digest_of};
use crate::plugin::{MAX_DESCRIBE_BYTES, MAX_TOOLS, Plugin, Tool, is_valid_tool_name};
use crate::sandbox::SandboxSpec;

/// A boxed future, as [`ToolSource`] returns them.
pub type SourceFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Receives a source's progress reports for one call: `(message, fraction)`.
pub type SourceProgress = Arc<dyn Fn(&str, Option<f32>) + Send + Sync>;

/// Tools that come from somewhere other than a plugin file.
///
/// ```
/// use std::sync::Arc;
/// use toolhost_runtime::{
///     SourceCall, SourceError, SourceFuture, SourceOutcome, SourceState, SourceStatus,
///     SourceTool, ToolSource,
/// };
///
/// /// One tool, answered in the host's own process.
/// struct Echo(tokio::sync::watch::Sender<u64>);
///
/// impl ToolSource for Echo {
///     fn name(&self) -> &str {
///         "echo"
///     }
///     fn status(&self) -> SourceStatus {
///         SourceStatus::new("native", "in process", SourceState::Ready)
///     }
///     fn tools(&self) -> Arc<[SourceTool]> {
///         Arc::new([SourceTool::new("say", "Repeats `text`.", serde_json::json!({"type": "object"}))])
///     }
///     fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
///         self.0.subscribe()
///     }
///     fn call<'a>(&'a self, call: SourceCall<'a>) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
///         Box::pin(async move { Ok(SourceOutcome::text(call.args["text"].to_string())) })
///     }
/// }
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let runtime = toolhost_runtime::Runtime::builder()
///     .source(Arc::new(Echo(tokio::sync::watch::channel(0).0)))
///     .build()
///     .await?;
/// assert_eq!(runtime.tools()[0].name, "echo__say");
/// # Ok(()) }
/// ```
pub trait ToolSource: Send + Sync + 'static {
    /// Its name: the plugin name its tools are listed under. It must match
    /// `^[a-zA-Z0-9_-]{1,64}$`.
    fn name(&self) -> &str;

    /// What every tool name of this source starts with (`NAME__` by default;
    /// empty for none). A name another source already holds still goes to
    /// that source, and this one's tool is exposed as `NAME__tool`.
    fn prefix(&self) -> String {
        format!("{}__", self.name())
    }

    /// What it is and how it is doing, for `host plugins`.
    fn status(&self) -> SourceStatus;

    /// Its tools now (none while it is not connected).
    fn tools(&self) -> Arc<[SourceTool]>;

    /// Changes each time [`tools`](Self::tools) or [`status`](Self::status)
    /// does: the runtime rebuilds the registry then.
    fn changes(&self) -> tokio::sync::watch::Receiver<u64>;

    /// Resolves when the runtime may list the source's tools at start-up
    /// (a source that connects at start-up resolves once it is connected or
    /// has given up, within its own time limit). At once by default.
    fn ready(&self) -> SourceFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Whether this source is built into the host (the `read_var` source):
    /// only a built-in source may hold a name reserved for one
    /// ([`RESERVED_TOOL_NAMES`](crate::RESERVED_TOOL_NAMES)). `false` by
    /// default.
    fn is_builtin(&self) -> bool {
        false
    }

    /// Runs one call. The runtime bounds it by the source's `timeout-ms`;
    /// dropping the future must cancel the call.
    fn call<'a>(
        &'a self,
        call: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>>;
}

/// A tool as a source describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTool {
    /// The source's own name for it (any text; the runtime makes the name
    /// the model sees from the source's prefix and this).
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, if it declares one.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Annotations,
}

impl SourceTool {
    /// A tool with no output schema and no annotations.
    pub fn new(name: impl Into<String>, description: impl Into<String>, input: Value) -> Self {
        SourceTool {
            name: name.into(),
            description: description.into(),
            input_schema: input,
            output_schema: None,
            annotations: Annotations::default(),
        }
    }
}

/// One call, as a source receives it (its arguments validated, admitted by
/// the policy and the hooks).
#[non_exhaustive]
pub struct SourceCall<'a> {
    /// The source's own name for the tool ([`SourceTool::name`]).
    pub tool: &'a str,
    /// The arguments.
    pub args: &'a Value,
    /// The call id.
    pub call_id: &'a str,
    /// The session, if the caller named one.
    pub session_id: Option<&'a str>,
    /// Where progress reports go, when the caller listens.
    pub progress: Option<SourceProgress>,
    /// The largest result the runtime will accept, in bytes; a source may
    /// stop reading a larger one.
    pub max_output_bytes: usize,
    /// What the caller attached to the call
    /// ([`CallContext::extension`](crate::CallContext::extension)).
    pub extensions: &'a http::Extensions,
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceOutcome {
    /// A result.
    Ok {
        /// Text for the model.
        output: String,
        /// Data for user interfaces and logs.
        details: Option<Value>,
        /// The structured result.
        structured: Option<Value>,
    },
    /// The tool refused its arguments.
    InvalidArguments(String),
    /// The tool ran and failed.
    Failed(String),
}

impl SourceOutcome {
    /// A result that is only text.
    pub fn text(output: impl Into<String>) -> Self {
        SourceOutcome::Ok {
            output: output.into(),
            details: None,
            structured: None,
        }
    }
}

/// Why a source could not run a call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SourceError {
    /// It is not connected (not started, exited, unreachable), or it went
    /// away during the call.
    #[error("the tool source is unavailable: {0}")]
    Unavailable(String),
    /// It answered something that is not a valid reply.
    #[error("the tool source broke the protocol: {0}")]
    Protocol(String),
    /// Its reply was larger than `max-output-bytes`.
    #[error("the tool source's reply is over the limit of {limit} bytes (`max-output-bytes`)")]
    TooLarge {
        /// The limit.
        limit: usize,
    },
}

/// What a source is and how it is doing.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceStatus {
    /// What kind of source (e.g. `mcp-stdio`, `mcp-http`).
    pub kind: String,
    /// Where it is (a command line, a URL).
    pub location: String,
    /// Its state now.
    pub state: SourceState,
    /// What it says it is (e.g. an MCP server's name and version).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl SourceStatus {
    /// A status with no server description.
    pub fn new(kind: impl Into<String>, location: impl Into<String>, state: SourceState) -> Self {
        SourceStatus {
            kind: kind.into(),
            location: location.into(),
            state,
            server: None,
        }
    }
}

/// How a source is doing.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum SourceState {
    /// Not connected yet (or connecting).
    Starting,
    /// Connected; its tools are listed.
    Ready,
    /// Not connected, and why; it is retried after `retry_in` if set.
    Down {
        /// Why.
        reason: String,
        /// When the next attempt is.
        #[serde(skip_serializing_if = "Option::is_none", with = "opt_millis")]
        retry_in: Option<Duration>,
    },
}

impl std::fmt::Display for SourceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceState::Starting => f.write_str("starting"),
            SourceState::Ready => f.write_str("ready"),
            SourceState::Down {
                reason,
                retry_in: Some(wait),
            } => write!(f, "down ({reason}; retrying in {} ms)", wait.as_millis()),
            SourceState::Down { reason, .. } => write!(f, "down ({reason})"),
        }
    }
}

mod opt_millis {
    // serde's `with` passes the field by reference.
    #[allow(clippy::ref_option)]
    pub fn serialize<S: serde::Serializer>(
        d: &Option<std::time::Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }
}

/// Each source's changes, subscribed to before its tools are first read
/// (so a change in between is not missed).
pub(crate) fn subscribe(
    catalog: &crate::catalog::Catalog,
) -> Vec<(String, tokio::sync::watch::Receiver<u64>)> {
    catalog
        .sources_in_use
        .iter()
        .map(|s| (s.name().to_owned(), s.changes()))
        .collect()
}

/// Rebuilds a source's plugin, and the registry, each time the source
/// says it changed; one task per source, which ends with the catalog.
pub(crate) fn follow(
    catalog: &Arc<crate::catalog::Catalog>,
    subscribed: Vec<(String, tokio::sync::watch::Receiver<u64>)>,
) {
    for (name, mut changes) in subscribed {
        let name = [name];
        let catalog = Arc::downgrade(catalog);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                let Some(catalog) = catalog.upgrade() else {
                    break;
                };
                catalog.refresh_sources(Some(&name)).await;
            }
        });
    }
}

/// A source's tools as a loaded "plugin" (kind `source`), with the
/// warnings about tools that were left out.
pub(crate) fn source_plugin(
    source: &Arc<dyn ToolSource>,
    default_limits: &Limits,
    settings: Option<&PluginSettings>,
) -> (Plugin, Vec<String>) {
    let name = source.name().to_owned();
    let status = source.status();
    let limits = match settings {
        Some(s) => default_limits.with(&s.limits),
        None => default_limits.clone(),
    };
    let (mut tools, warnings) = source_tools(&name, &source.prefix(), &source.tools());
    let no_cache_settings = crate::result_cache::CacheSettings::default();
    for t in &mut tools {
        // A source has no manifest: the host's settings alone (by the
        // name the source lists the tool under).
        let host = settings.map_or(&no_cache_settings, |s| &s.cache);
        let listed = t.remote_name.as_deref().unwrap_or(&t.name);
        t.cache = crate::result_cache::CacheRule::resolve(
            listed,
            &t.annotations,
            host,
            &no_cache_settings,
        );
    }
    let digest = digest_of(format!("{}\n{}", status.kind, status.location).as_bytes());
    let sandbox = Arc::new(SandboxSpec {
        plugin: name.clone(),
        limits,
        config: settings.map(|s| s.config.clone()).unwrap_or_default(),
        ..SandboxSpec::default()
    });
    let cache_identity = crate::result_cache::identity(&digest, &sandbox, &tools);
    let version = semver::Version::new(0, 0, 0);
    let plugin = Plugin {
        version_text: version.to_string(),
        version,
        path: format!("{}:{name}", status.kind).into(),
        description: status.server.clone(),
        usage: None,
        api_version: semver::Version::new(0, 0, 0),
        requested: Default::default(),
        pre: Linked::Source(source.clone()),
        content_key: digest.clone(),
        digest,
        grants: GrantState::NoGrants,
        manifest: Default::default(),
        instances: crate::plugin::instance_permits(&sandbox.limits),
        cache_identity,
        sandbox,
        tools,
        name,
        ready: Default::default(),
    };
    (plugin, warnings)
}

/// The tools of source `source` with names the model can call
/// (`prefix` + the source's name, with characters providers refuse turned
/// into `_`), their schemas compiled. A tool whose schema does not compile,
/// whose name cannot be made valid or is taken twice, or past the load
/// budget ([`MAX_TOOLS`], [`MAX_DESCRIBE_BYTES`]) is left out with a warning.
fn source_tools(source: &str, prefix: &str, listed: &[SourceTool]) -> (Vec<Tool>, Vec<String>) {
    let mut tools: Vec<Tool> = Vec::new();
    let mut warnings = Vec::new();
    let mut bytes = 0usize;
    for t in listed {
        if tools.len() == MAX_TOOLS {
            warnings.push(format!(
                "source `{source}` lists more than {MAX_TOOLS} tools; the rest are left out"
            ));
            break;
        }
        let size = t.name.len()
            + t.description.len()
            + t.input_schema.to_string().len()
            + t.output_schema.as_ref().map_or(0, |s| s.to_string().len());
        bytes = bytes.saturating_add(size);
        if bytes > MAX_DESCRIBE_BYTES {
            warnings.push(format!(
                "source `{source}` describes more than {MAX_DESCRIBE_BYTES} bytes of tools; \
                 `{}` and the rest are left out",
                printable(&t.name)
            ));
            break;
        }
        let name = exposed_name(prefix, &t.name);
        let skip = |why: String| {
            format!(
                "tool `{}` of source `{source}` is left out: {why}",
                printable(&t.name)
            )
        };
        if !is_valid_tool_name(&name) {
            warnings.push(skip("no valid tool name can be made from it".into()));
            continue;
        }
        if tools.iter().any(|u| u.name == name) {
            warnings.push(skip(format!(
                "another of its tools is also called `{name}`"
            )));
            continue;
        }
        let compile = |what: &str, schema: &Value| {
            if !schema.is_object() {
                return Err(format!("its {what} schema is not a JSON object"));
            }
            jsonschema::validator_for(schema)
                .map_err(|e| format!("its {what} schema does not compile: {e}"))
        };
        let validator = match compile("input", &t.input_schema) {
            Ok(v) => v,
            Err(why) => {
                warnings.push(skip(why));
                continue;
            }
        };
        let output_validator = match t.output_schema.as_ref().map(|s| compile("output", s)) {
            None => None,
            Some(Ok(v)) => Some(v),
            Some(Err(why)) => {
                warnings.push(skip(why));
                continue;
            }
        };
        tools.push(Tool {
            remote_name: Some(t.name.clone()),
            name,
            description: t.description.clone(),
            schema: Arc::new(t.input_schema.clone()),
            validator,
            annotations: t.annotations,
            output_schema: t.output_schema.clone().map(Arc::new),
            output_validator,
            cache: crate::result_cache::CacheRule::default(),
        });
    }
    (tools, warnings)
}

/// `prefix` + `name`, every character a provider refuses in a tool name
/// made `_`; a name past 64 characters is cut and ends in a hash of the
/// whole, so two long names stay apart.
fn exposed_name(prefix: &str, name: &str) -> String {
    let clean: String = format!("{prefix}{name}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= 64 {
        return clean;
    }
    let hash = &digest_of(format!("{prefix}{name}").as_bytes())["sha256:".len()..][..8];
    format!("{}_{hash}", &clean[..55])
}

/// `text` made safe for a warning, at most 80 characters.
fn printable(text: &str) -> String {
    toolhost_text::line(text, 80)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn source_tool_names_get_the_prefix_and_lose_what_providers_refuse() {
        assert_eq!(exposed_name("git__", "status"), "git__status");
        assert_eq!(exposed_name("", "files.read/all"), "files_read_all");
        let long = exposed_name("s__", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert_ne!(long, exposed_name("s__", &"x".repeat(101)));
        assert!(is_valid_tool_name(&exposed_name("é__", "ünï")));
    }

    #[test]
    fn a_source_tool_that_cannot_be_listed_is_left_out_with_the_reason() {
        let ok = json!({"type": "object"});
        let listed = vec![
            SourceTool::new("fine", "", ok.clone()),
            SourceTool::new("fine", "", ok.clone()),
            SourceTool::new("bad-schema", "", json!({"type": 12})),
            SourceTool::new("not-object", "", json!([1])),
            SourceTool {
                output_schema: Some(json!({"type": "nope"})),
                ..SourceTool::new("bad-output", "", ok.clone())
            },
            SourceTool::new("dotted.name", "", ok),
        ];
        let (tools, warnings) = source_tools("s", "s__", &listed);
        let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["s__fine", "s__dotted_name"]);
        assert_eq!(tools[1].remote_name.as_deref(), Some("dotted.name"));
        assert_eq!(tools[0].remote_name.as_deref(), Some("fine"));
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(
            warnings[0].contains("also called `s__fine`"),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("does not compile"), "{warnings:?}");
        assert!(warnings[2].contains("not a JSON object"), "{warnings:?}");
        assert!(warnings[3].contains("output schema"), "{warnings:?}");
    }

    #[test]
    fn a_source_past_the_load_budget_keeps_what_fits() {
        let many: Vec<_> = (0..=MAX_TOOLS)
            .map(|i| SourceTool::new(format!("t{i}"), "", json!({})))
            .collect();
        let (tools, warnings) = source_tools("s", "", &many);
        assert_eq!(tools.len(), MAX_TOOLS);
        assert!(warnings[0].contains("more than 1000 tools"), "{warnings:?}");
        let big = vec![SourceTool::new(
            "t",
            "x".repeat(MAX_DESCRIBE_BYTES),
            json!({}),
        )];
        let (tools, warnings) = source_tools("s", "", &big);
        assert!(
            tools.is_empty() && warnings[0].contains("bytes"),
            "{warnings:?}"
        );
    }
}
