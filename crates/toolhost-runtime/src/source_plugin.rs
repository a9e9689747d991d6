//! A tool source as the registry lists it: a "plugin" of kind `source`
//! named after it, whose tools carry the source's prefix and compiled
//! schemas, within the same load budget as a plugin's (`source.rs` holds
//! the [`ToolSource`] trait itself; `catalog.rs` follows each source's
//! changes).

use std::sync::Arc;

use serde_json::Value;

use crate::api::Linked;
use crate::grants::PluginSettings;
use crate::limits::Limits;
use crate::lockfile::{GrantState, digest_of};
use crate::plugin::{MAX_DESCRIBE_BYTES, MAX_TOOLS, Plugin, Tool, is_valid_tool_name};
use crate::sandbox::SandboxSpec;
use crate::source::{SourceStatus, SourceTool, ToolSource};

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
    let no_cache_settings = crate::cache_settings::CacheSettings::default();
    for t in &mut tools {
        // A source has no manifest: the host's settings alone (by the
        // name the source lists the tool under).
        let host = settings.map_or(&no_cache_settings, |s| &s.cache);
        let listed = t.remote_name.as_deref().unwrap_or(&t.name);
        t.cache = crate::cache_settings::CacheRule::resolve(
            listed,
            &t.annotations,
            host,
            &no_cache_settings,
        );
    }
    let digest = source_digest(source.as_ref(), &status);
    let sandbox = Arc::new(SandboxSpec {
        plugin: name.clone(),
        limits,
        config: settings.map(|s| s.config.clone()).unwrap_or_default(),
        ..SandboxSpec::default()
    });
    let cache_identity = crate::plugin::cache_identity(&digest, &sandbox, &tools);
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

/// What a source is, as the digest its saved approvals are bound to (an
/// approval is asked again when it changes): its kind and location (the
/// command line or URL), its own settings
/// ([`ToolSource::settings_digest`]: an MCP server's environment, headers
/// and process sandbox), what it says it is (an MCP server's name and
/// version) and every tool's definition as it lists them (name,
/// description, schemas, annotations). Not the code behind it, which the
/// host cannot see: a server that changes its code and none of these keeps
/// its digest.
fn source_digest(source: &dyn ToolSource, status: &SourceStatus) -> String {
    let tools: Vec<Value> = source
        .tools()
        .iter()
        .map(|t| {
            serde_json::json!({
                "name": t.name,
                "description": t.description,
                "input": t.input_schema,
                "output": t.output_schema,
                "annotations": t.annotations,
            })
        })
        .collect();
    let identity = serde_json::json!({
        "kind": status.kind,
        "location": status.location,
        "settings": source.settings_digest(),
        "server": status.server,
        "tools": tools,
    });
    digest_of(identity.to_string().as_bytes())
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
            cache: crate::cache_settings::CacheRule::default(),
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
