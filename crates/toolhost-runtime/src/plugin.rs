//! Loading one plugin file: manifest, compile (or cache), link, `describe()`,
//! tool validation.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use wasmtime::Engine;

use crate::api::{
    self, Annotations, ComponentKind, HookPre, Linked, Linkers, PluginPre, RawToolSpec,
};
use crate::cache_settings::CacheRule;
use crate::compile_cache::CompileCache;
use crate::error::{LoadError, SandboxFault};
use crate::grants::PluginSettings;
use crate::limits::Limits;
use crate::lockfile::{GrantState, Lock, digest_of};
use crate::manifest::{Capabilities, Manifest};
use crate::ready::ReadyInstances;
use crate::sandbox::{Sandbox, SandboxSpec};

/// A loaded plugin: one version of one component, ready to run calls.
pub(crate) struct Plugin {
    pub name: String,
    pub version: semver::Version,
    /// `version` as text (hooks receive it on every call).
    pub version_text: String,
    pub path: PathBuf,
    pub description: Option<String>,
    pub usage: Option<String>,
    pub api_version: semver::Version,
    pub requested: Capabilities,
    pub pre: Linked,
    pub tools: Vec<Tool>,
    pub sandbox: Arc<SandboxSpec>,
    /// The compile cache key of the component's bytes: equal keys, equal code.
    pub content_key: String,
    /// Its identity: `sha256:` of the component's bytes (`lockfile.rs`).
    pub digest: String,
    /// Whether the user's grants for its name apply to this code.
    pub grants: GrantState,
    /// The manifest it was loaded with (a changed manifest is a reload too).
    pub manifest: Manifest,
    /// One permit per sandbox of this plugin that may be alive at once
    /// (`max-instances`).
    pub instances: Arc<tokio::sync::Semaphore>,
    /// What the result cache knows it by: its digest, grants, config and
    /// limits (`result_cache.rs`).
    pub cache_identity: [u8; 32],
    /// Instances made ready off the call path, when its sandbox is costly
    /// (`ready.rs`).
    pub ready: ReadyInstances,
}

impl Plugin {
    /// Whether its file is named for it (see [`is_named_for`]); a tool
    /// source has no file and counts as named.
    pub fn has_named_file(&self) -> bool {
        if self.source().is_some() {
            return true;
        }
        let stem = self.path.file_stem().and_then(|s| s.to_str());
        stem.is_some_and(|stem| is_named_for(stem, &self.name))
    }

    /// Whether this is a hook plugin (no tools; runs in the hook chain).
    pub fn is_hook(&self) -> bool {
        matches!(self.pre, Linked::Hook(_))
    }

    /// Whether it is a plain component (no contract; `api/plain/`).
    pub fn is_plain(&self) -> bool {
        matches!(self.pre, Linked::Tool(api::PluginPre::Plain(_)))
    }

    /// The tool source behind it, when it is not a component (`source.rs`).
    pub fn source(&self) -> Option<&Arc<dyn crate::source::ToolSource>> {
        match &self.pre {
            Linked::Source(source) => Some(source),
            _ => None,
        }
    }

    /// Whether a source built into the host provides it
    /// ([`ToolSource::is_builtin`](crate::ToolSource::is_builtin)).
    pub fn is_builtin(&self) -> bool {
        self.source().is_some_and(|s| s.is_builtin())
    }

    /// Its share of the instance pool (`max-instances`), as the pool sees it.
    pub(crate) fn quota(&self) -> crate::pool::Quota<'_> {
        crate::pool::Quota {
            permits: &self.instances,
            name: &self.name,
            version: &self.version,
            max: self.sandbox.limits.max_instances,
        }
    }

    /// `name@version`, as shown to users.
    pub fn id(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// A tool of a loaded plugin, with its schema compiled.
pub(crate) struct Tool {
    pub name: String,
    pub description: String,
    /// Shared, so listing tools (before every model request) does not copy it.
    pub schema: Arc<Value>,
    pub validator: jsonschema::Validator,
    pub annotations: Annotations,
    /// JSON Schema of the structured result, when the tool declares one (0.2.0).
    pub output_schema: Option<Arc<Value>>,
    pub output_validator: Option<jsonschema::Validator>,
    /// The name a tool source knows it by (`source.rs`); `None` for a
    /// plugin's tool, which is called by `name`.
    pub remote_name: Option<String>,
    /// Whether and how long its results may be cached (`result_cache.rs`).
    pub cache: CacheRule,
}

impl Tool {
    /// Checks what a call returned as `structured`: at most `max` bytes, valid
    /// JSON, and, when the tool declares an output schema, present and
    /// matching it (the first mismatch is reported with its JSON pointer).
    pub(crate) fn check_structured(
        &self,
        structured: Option<String>,
        max: usize,
    ) -> Result<Option<Value>, SandboxFault> {
        let value: Option<Value> =
            match structured {
                None => None,
                Some(text) if text.len() > max => {
                    return Err(SandboxFault::OutputTooLarge {
                        what: "structured",
                        size: text.len(),
                        limit: max,
                    });
                }
                Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                    SandboxFault::InvalidStructured {
                        message: e.to_string(),
                    }
                })?),
            };
        self.validate_structured(value.as_ref())?;
        Ok(value)
    }

    /// Checks a structured result against the tool's output schema, if it
    /// declares one (then the result is required).
    pub(crate) fn validate_structured(&self, value: Option<&Value>) -> Result<(), SandboxFault> {
        let Some(validator) = &self.output_validator else {
            return Ok(());
        };
        let Some(value) = value else {
            return Err(SandboxFault::StructuredMismatch {
                path: String::new(),
                message: "the tool declares an output schema but returned no structured content"
                    .into(),
            });
        };
        // The common case first: a result that matches skips the
        // error-collecting path.
        if validator.is_valid(value) {
            return Ok(());
        }
        if let Some(error) = validator.iter_errors(value).next() {
            return Err(SandboxFault::StructuredMismatch {
                path: error.instance_path().to_string(),
                message: error.to_string(),
            });
        }
        Ok(())
    }
}

/// One permit per call of a plugin (or source) that may run at once:
/// `max-instances`, held to what a semaphore can count (a manifest may say
/// anything).
pub(crate) fn instance_permits(limits: &Limits) -> Arc<tokio::sync::Semaphore> {
    Arc::new(tokio::sync::Semaphore::new(
        limits
            .max_instances
            .clamp(1, tokio::sync::Semaphore::MAX_PERMITS),
    ))
}

/// What loading needs from the runtime; cheap to clone into a task per file.
#[derive(Clone)]
pub(crate) struct Loader {
    pub engine: Engine,
    pub linkers: Arc<Linkers>,
    pub cache: Arc<CompileCache>,
    pub default_limits: Limits,
    pub settings: Arc<std::collections::BTreeMap<String, PluginSettings>>,
    pub max_wasm_stack: usize,
    /// The lock file binding grants to digests.
    pub lock: Arc<Lock>,
    /// Whether plugins with a costly sandbox get ready instances (`ready.rs`).
    pub ready_instances: bool,
}

/// Whether a file whose name without `.wasm` is `stem` is named for plugin
/// `name`: `NAME.wasm` or `NAME@VERSION.wasm`. Grants, hook bindings and
/// the choice between two files claiming one name follow this, never the
/// name a manifest gives itself.
///
/// ```ignore
/// assert!(is_named_for("fs", "fs") && is_named_for("fs@1.2.0", "fs"));
/// assert!(!is_named_for("weather", "fs") && !is_named_for("fsx", "fs"));
/// ```
pub(crate) fn is_named_for(stem: &str, name: &str) -> bool {
    stem.strip_prefix(name)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('@'))
}

/// Whether `name` is a valid tool (or plugin) name for OpenAI and Anthropic.
pub fn is_valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

const WASM_MAGIC: &[u8; 4] = b"\0asm";
const CORE_MODULE_VERSION: [u8; 4] = [1, 0, 0, 0];

/// Rejects files that are not components before the compiler sees them, with a helpful reason.
fn check_header(bytes: &[u8]) -> Result<(), LoadError> {
    if bytes.len() < 8 || &bytes[..4] != WASM_MAGIC {
        return Err(LoadError::NotAComponent(
            "the file does not start with the WebAssembly magic number".into(),
        ));
    }
    if bytes[4..8] == CORE_MODULE_VERSION {
        return Err(LoadError::NotAComponent(
            "this is a core WebAssembly module; build the plugin for wasm32-wasip2 \
             (or wrap it with `wasm-tools component new`)"
                .into(),
        ));
    }
    Ok(())
}

/// What identifies the current content of a plugin's two files (the
/// component and its manifest): size, modification time and inode of each.
type FilesStamp = [Option<(u64, Option<std::time::SystemTime>, u64)>; 2];

fn stamp(component: &Path) -> FilesStamp {
    let one = |p: &Path| {
        std::fs::metadata(p).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.len(), m.modified().ok(), m.ino())
        })
    };
    [one(component), one(&Manifest::path_for(component))]
}

/// How many times a load is repeated when its files change while it runs.
const LOAD_ATTEMPTS: usize = 3;

impl Loader {
    /// Loads the plugin at `path`. The component and its manifest are two
    /// files that a rebuild replaces one after the other: when either changed
    /// while they were being read, the load starts again, so a plugin is never
    /// loaded with one build's code and another build's manifest (unless the
    /// files keep changing, when the last attempt stands and the next change
    /// event loads them again).
    pub(crate) async fn load(&self, path: &Path) -> Result<Plugin, LoadError> {
        let mut attempt = 1;
        loop {
            let before = stamp(path);
            let result = self.load_once(path).await;
            if attempt == LOAD_ATTEMPTS || stamp(path) == before {
                return result;
            }
            tracing::debug!(path = %path.display(), attempt, "plugin files changed while loading; loading again");
            attempt += 1;
        }
    }

    async fn load_once(&self, path: &Path) -> Result<Plugin, LoadError> {
        let manifest = Manifest::load_for(path)?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let name = manifest.name.clone().unwrap_or_else(|| stem.clone());
        if !is_valid_tool_name(&name) {
            return Err(LoadError::NotAPlugin(format!(
                "plugin name `{name}` must match ^[a-zA-Z0-9_-]{{1,64}}$"
            )));
        }
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|e| LoadError::Io(Arc::new(e)))?;
        check_header(&bytes)?;
        let digest = digest_of(&bytes);

        let component = {
            // Compiling is CPU-bound: keep it off the async workers.
            let (engine, cache, origin) =
                (self.engine.clone(), self.cache.clone(), path.to_owned());
            tokio::task::spawn_blocking(move || {
                let key = cache.key(&bytes);
                let component = cache.load(&engine, &bytes, &key, &origin);
                (key, component)
            })
            .await
            .map_err(|e| LoadError::Task(format!("compiling: {e}")))?
        };
        let (content_key, component) = component;
        let component = component.map_err(|e| LoadError::NotAComponent(format!("{e:#}")))?;
        let kind = api::detect_kind(&self.engine, &component);
        let api_version = match kind {
            // A plain component was built against no contract version.
            ComponentKind::Plain => semver::Version::new(0, 0, 0),
            ComponentKind::Tool | ComponentKind::Hook => {
                api::detect_version(&self.engine, &component)?
            }
        };
        let pre = match kind {
            ComponentKind::Tool => {
                Linked::Tool(PluginPre::new(&self.linkers, &component, &api_version)?)
            }
            ComponentKind::Hook => {
                Linked::Hook(HookPre::new(&self.linkers.hooks, &component, &api_version)?)
            }
            ComponentKind::Plain => {
                let docs = api::plain::WitDocs::beside(path).unwrap_or_else(|why| {
                    tracing::warn!(plugin = %name, "the WIT beside it gives no docs: {why}");
                    api::plain::WitDocs::default()
                });
                let exports =
                    api::plain::PlainExports::read(&self.engine, &component, &|p| docs.of(p))?;
                for (function, why) in &exports.skipped {
                    tracing::warn!(plugin = %name, function, "not a tool: {why}");
                }
                Linked::Tool(PluginPre::plain(&self.engine, &component, exports)?)
            }
        };

        let empty = PluginSettings::default();
        let settings = self.settings.get(&name).unwrap_or(&empty);
        let has_grants = !(settings.dirs.is_empty()
            && settings.hosts.is_empty()
            && settings.env.is_empty()
            && settings.call_tools.is_empty());
        let grants = if has_grants && !is_named_for(&stem, &name) {
            // Grants follow the file the user named, not the name a
            // manifest claims (`weather.wasm` saying `name = "fs"`).
            GrantState::NotItsFile { file: stem.clone() }
        } else {
            self.lock.check(&name, &digest, has_grants)
        };
        let withheld;
        let settings = if has_grants && !grants.is_active() {
            // Other code than the grants were given to: limits and config
            // still apply, the capabilities do not.
            withheld = PluginSettings {
                dirs: Vec::new(),
                hosts: Vec::new(),
                env: Vec::new(),
                call_tools: Vec::new(),
                ..settings.clone()
            };
            &withheld
        } else {
            settings
        };
        let sandbox = Arc::new(resolve_sandbox(
            &name,
            &manifest,
            settings,
            &self.default_limits,
        )?);

        let (mut tools, instantiation) = match &pre {
            Linked::Tool(tool) => {
                let (specs, first) = self.describe(tool, &sandbox).await?;
                (
                    validate_tools(specs)?,
                    self.instantiation(tool, &sandbox, first).await,
                )
            }
            // A hook plugin has no tools; it runs in the hook chain.
            Linked::Hook(_) | Linked::Source(_) => (Vec::new(), Duration::ZERO),
        };
        let ready = ReadyInstances::for_cost(
            instantiation,
            sandbox.limits.max_instances,
            self.ready_instances,
        );
        tracing::debug!(plugin = %name, instantiation_us = u64::try_from(instantiation.as_micros()).unwrap_or(u64::MAX), ready_instances = ready.enabled(), "instantiation measured");
        for t in &mut tools {
            t.cache = CacheRule::resolve(&t.name, &t.annotations, &settings.cache, &manifest.cache);
        }
        let cache_identity = crate::plugin::cache_identity(&digest, &sandbox, &tools);
        let version = manifest
            .version
            .clone()
            .unwrap_or_else(|| semver::Version::new(0, 0, 0));
        Ok(Plugin {
            version_text: version.to_string(),
            version,
            name,
            path: path.to_owned(),
            description: manifest.description.clone(),
            usage: manifest.usage.clone(),
            api_version,
            requested: manifest.capabilities.clone(),
            pre,
            tools,
            content_key,
            digest,
            grants,
            instances: instance_permits(&sandbox.limits),
            sandbox,
            manifest,
            cache_identity,
            ready,
        })
    }

    /// What instantiating the plugin takes, which decides whether it gets
    /// ready instances (`ready.rs`): `first`, the time `describe()`'s
    /// instantiation took, when that was cheap; else the least of up to
    /// [`INSTANTIATION_SAMPLES`] more, each timed alone (stopping at the
    /// first cheap one), since a first instantiation is slower than the
    /// ones after it (the memory image is mapped in, caches are cold) and
    /// a busy machine slows any one of them.
    async fn instantiation(
        &self,
        pre: &PluginPre,
        spec: &Arc<SandboxSpec>,
        first: Duration,
    ) -> Duration {
        let mut least = first;
        for _ in 0..INSTANTIATION_SAMPLES {
            if !self.ready_instances || least <= crate::ready::COSTLY {
                break;
            }
            let Ok(mut sandbox) = Sandbox::new(&self.engine, spec, self.max_wasm_stack) else {
                break;
            };
            sandbox.begin("(instantiation)", None, None);
            let started = std::time::Instant::now();
            match sandbox
                .call(async |store| pre.instantiate(&mut *store).await)
                .await
            {
                Ok(_) => least = least.min(started.elapsed()),
                Err(_) => break,
            }
        }
        least
    }

    /// Runs `describe()` in a sandbox under the load budget. Also returns
    /// what its instantiation took (see [`Loader::instantiation`]).
    async fn describe(
        &self,
        pre: &PluginPre,
        spec: &Arc<SandboxSpec>,
    ) -> Result<(Vec<RawToolSpec>, Duration), LoadError> {
        // Describing runs under the load budget, not under the call timeout
        // the plugin's limits allow: one slow plugin must not hold up
        // start-up or a reload for long.
        let budget = Arc::new(SandboxSpec {
            limits: Limits {
                timeout: spec.limits.timeout.min(DESCRIBE_TIMEOUT),
                ..spec.limits.clone()
            },
            ..(**spec).clone()
        });
        let mut sandbox =
            Sandbox::new(&self.engine, &budget, self.max_wasm_stack).map_err(LoadError::Grant)?;
        sandbox.begin("describe", None, None);
        let mut instantiation = Duration::ZERO;
        let specs = sandbox
            .call(async |store| {
                let started = std::time::Instant::now();
                let instance = pre.instantiate(&mut *store).await?;
                instantiation = started.elapsed();
                instance.describe(store).await
            })
            .await
            .map_err(|fault| match fault {
                SandboxFault::Timeout { limit } => LoadError::Describe(format!(
                    "did not finish within {limit:?}, the load budget for describe()"
                )),
                fault => LoadError::Describe(fault.to_string()),
            })?;
        within_load_budget(&specs)?;
        Ok((specs, instantiation))
    }
}

/// How many instantiations past `describe()`'s are timed, at most, to
/// tell a costly instantiation from a cold or unlucky one.
const INSTANTIATION_SAMPLES: usize = 3;

/// The longest `describe()` may take at load time (or the plugin's own
/// timeout, when shorter).
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The most tools one plugin may describe.
pub const MAX_TOOLS: usize = 1000;
/// The most bytes of names, descriptions and schemas one plugin may describe.
pub const MAX_DESCRIBE_BYTES: usize = 4 * 1024 * 1024;

/// Refuses a description past [`MAX_TOOLS`] or [`MAX_DESCRIBE_BYTES`]
/// before anything is compiled from it.
fn within_load_budget(specs: &[RawToolSpec]) -> Result<(), LoadError> {
    if specs.len() > MAX_TOOLS {
        return Err(LoadError::Describe(format!(
            "describes {} tools, more than the {MAX_TOOLS} of the load budget",
            specs.len()
        )));
    }
    let bytes = specs
        .iter()
        .map(|s| {
            s.name.len()
                + s.description.len()
                + s.input_schema.len()
                + s.output_schema.as_ref().map_or(0, String::len)
        })
        .fold(0usize, usize::saturating_add);
    if bytes > MAX_DESCRIBE_BYTES {
        return Err(LoadError::Describe(format!(
            "describes {bytes} bytes of names, descriptions and schemas, more than the \
             {MAX_DESCRIBE_BYTES} of the load budget"
        )));
    }
    Ok(())
}

/// Combines defaults, the manifest and the host's settings into what a sandbox gets.
fn resolve_sandbox(
    name: &str,
    manifest: &Manifest,
    settings: &PluginSettings,
    default_limits: &Limits,
) -> Result<SandboxSpec, LoadError> {
    // The host's limits are ceilings the manifest may only lower; the
    // user's settings for this plugin may go either way.
    let lowered = default_limits.lowered_by(&manifest.limits);
    if lowered != default_limits.with(&manifest.limits) {
        tracing::warn!(
            plugin = name,
            asked = %default_limits.with(&manifest.limits),
            given = %lowered,
            "the manifest asks for limits above the host's; held at the host's (per-plugin settings can raise them)"
        );
    }
    let limits = lowered.with(&settings.limits);
    let mut dirs = Vec::new();
    for grant in &settings.dirs {
        let canonical = std::fs::canonicalize(&grant.path)
            .map_err(|e| LoadError::Grant(format!("directory {}: {e}", grant.path.display())))?;
        if !canonical.is_dir() {
            return Err(LoadError::Grant(format!(
                "{} is not a directory",
                canonical.display()
            )));
        }
        let guest = canonical.to_string_lossy().into_owned();
        dirs.push(crate::sandbox::Preopen {
            host: crate::sandbox::HostDir::Path(canonical),
            guest,
            access: grant.access,
        });
    }
    let mut env = Vec::new();
    for entry in &settings.env {
        match entry.split_once('=') {
            Some((k, v)) => env.push((k.to_owned(), v.to_owned())),
            None => match std::env::var(entry) {
                Ok(v) => env.push((entry.clone(), v)),
                Err(_) => tracing::warn!(
                    plugin = name,
                    "granted environment variable {entry} is not set on the host"
                ),
            },
        }
    }
    let mut config = manifest.config.clone();
    config.extend(settings.config.clone());
    Ok(SandboxSpec {
        plugin: name.to_owned(),
        limits,
        dirs,
        hosts: settings.hosts.clone().into(),
        only_host: None,
        env,
        config,
        call_tools: crate::plugin_calls::CallGrant::new(&settings.call_tools, settings.call_bounds)
            .map_err(|e| LoadError::Grant(e.to_string()))?
            .map(Arc::new),
    })
}

/// Parses and compiles a tool's `what` ("input" or "output") schema, given as
/// JSON text; the error says what is wrong.
fn compile_schema(what: &str, text: &str) -> Result<(Value, jsonschema::Validator), String> {
    let schema: Value =
        serde_json::from_str(text).map_err(|e| format!("{what} schema is not valid JSON: {e}"))?;
    if !schema.is_object() {
        return Err(format!("{what} schema must be a JSON object"));
    }
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| format!("{what} schema does not compile: {e}"))?;
    Ok((schema, validator))
}

/// Checks every tool spec and compiles its schemas.
fn validate_tools(specs: Vec<RawToolSpec>) -> Result<Vec<Tool>, LoadError> {
    let mut tools: Vec<Tool> = Vec::with_capacity(specs.len());
    for spec in specs {
        let invalid = |message: String| LoadError::InvalidTool {
            tool: spec.name.clone(),
            message,
        };
        if !is_valid_tool_name(&spec.name) {
            return Err(invalid(
                "the name must match ^[a-zA-Z0-9_-]{1,64}$ (OpenAI and Anthropic function names)"
                    .into(),
            ));
        }
        if tools.iter().any(|t| t.name == spec.name) {
            return Err(invalid("declared twice by the plugin".into()));
        }
        let (schema, validator) = compile_schema("input", &spec.input_schema).map_err(invalid)?;
        let (output_schema, output_validator) = match &spec.output_schema {
            Some(text) => {
                let (schema, validator) = compile_schema("output", text).map_err(invalid)?;
                (Some(Arc::new(schema)), Some(validator))
            }
            None => (None, None),
        };
        tools.push(Tool {
            remote_name: None,
            name: spec.name,
            description: spec.description,
            schema: Arc::new(schema),
            validator,
            annotations: spec.annotations,
            output_schema,
            output_validator,
            cache: CacheRule::default(),
        });
    }
    Ok(tools)
}

/// The plugin's identity for the result cache
/// ([`identity`](crate::result_cache::identity)) from its tools.
pub(crate) fn cache_identity(digest: &str, sandbox: &SandboxSpec, tools: &[Tool]) -> [u8; 32] {
    crate::result_cache::identity(
        digest,
        sandbox,
        tools.iter().map(|t| crate::result_cache::ToolIdentity {
            name: &t.name,
            remote_name: t.remote_name.as_deref(),
            schema: &t.schema,
            output_schema: t.output_schema.as_deref(),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(name: &str, schema: &str) -> RawToolSpec {
        RawToolSpec {
            name: name.into(),
            description: "d".into(),
            input_schema: schema.into(),
            output_schema: None,
            annotations: Annotations::default(),
        }
    }

    #[test]
    fn a_description_past_the_load_budget_is_refused() {
        let spec = |name: String, schema_bytes: usize| RawToolSpec {
            name,
            description: String::new(),
            input_schema: " ".repeat(schema_bytes),
            output_schema: None,
            annotations: Default::default(),
        };
        let many: Vec<_> = (0..=MAX_TOOLS).map(|i| spec(format!("t{i}"), 2)).collect();
        let err = within_load_budget(&many).unwrap_err().to_string();
        assert!(
            err.contains("1001 tools") && err.contains("load budget"),
            "{err}"
        );
        assert!(within_load_budget(&many[..MAX_TOOLS]).is_ok());
        let big = vec![spec("t".into(), MAX_DESCRIBE_BYTES)];
        let err = within_load_budget(&big).unwrap_err().to_string();
        assert!(
            err.contains("bytes") && err.contains("load budget"),
            "{err}"
        );
    }

    #[test]
    fn tool_names_follow_provider_rules() {
        assert!(is_valid_tool_name("read_file-2"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name("dotted.name"));
        assert!(!is_valid_tool_name(&"x".repeat(65)));
    }

    #[test]
    fn a_schema_that_does_not_compile_is_rejected_with_the_tool_name() {
        let err = validate_tools(vec![raw("t", r#"{"type": 12}"#)])
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(msg.contains("tool `t`"), "{msg}");
        assert!(msg.contains("does not compile"), "{msg}");
    }

    #[test]
    fn duplicate_and_badly_named_tools_are_rejected() {
        let ok = r#"{"type":"object"}"#;
        assert!(validate_tools(vec![raw("a", ok), raw("a", ok)]).is_err());
        assert!(validate_tools(vec![raw("a b", ok)]).is_err());
        assert!(validate_tools(vec![raw("a", "[]")]).is_err());
        assert_eq!(validate_tools(vec![raw("a", ok)]).unwrap().len(), 1);
    }

    fn with_output(output_schema: &str) -> RawToolSpec {
        RawToolSpec {
            output_schema: Some(output_schema.into()),
            ..raw("t", r#"{"type":"object"}"#)
        }
    }

    #[test]
    fn an_output_schema_that_does_not_compile_is_rejected() {
        for (schema, expected) in [
            (r#"{"type": 12}"#, "output schema does not compile"),
            ("{nope", "output schema is not valid JSON"),
            ("true", "output schema must be a JSON object"),
        ] {
            let err = validate_tools(vec![with_output(schema)]).err().unwrap();
            assert!(matches!(err, LoadError::InvalidTool { .. }), "{err:?}");
            assert!(err.to_string().contains(expected), "{err}");
        }
    }

    #[test]
    fn structured_content_is_parsed_and_checked_against_the_output_schema() {
        let schema =
            r#"{"type":"object","properties":{"value":{"type":"number"}},"required":["value"]}"#;
        let tools = validate_tools(vec![with_output(schema), raw("free", "{}")]).unwrap();
        let (typed, free) = (&tools[0], &tools[1]);
        assert!(typed.output_schema.is_some() && free.output_schema.is_none());
        let text = |s: &str| Some(s.to_owned());

        assert_eq!(
            typed.check_structured(text(r#"{"value":1.5}"#), 100),
            Ok(Some(serde_json::json!({"value": 1.5})))
        );
        match typed.check_structured(text(r#"{"value":"x"}"#), 100) {
            Err(SandboxFault::StructuredMismatch { path, .. }) => assert_eq!(path, "/value"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            typed.check_structured(None, 100),
            Err(SandboxFault::StructuredMismatch { path, .. }) if path.is_empty()
        ));
        assert!(matches!(
            typed.check_structured(text(r#"{"value":1}"#), 5),
            Err(SandboxFault::OutputTooLarge {
                what: "structured",
                size: 11,
                limit: 5
            })
        ));

        assert_eq!(free.check_structured(None, 100), Ok(None));
        assert_eq!(
            free.check_structured(text("[1]"), 100),
            Ok(Some(serde_json::json!([1])))
        );
        assert!(matches!(
            free.check_structured(text("{not json"), 100),
            Err(SandboxFault::InvalidStructured { .. })
        ));
    }

    #[test]
    fn header_check_explains_core_modules_and_garbage() {
        let core = [0, b'a', b's', b'm', 1, 0, 0, 0];
        assert!(
            check_header(&core)
                .unwrap_err()
                .to_string()
                .contains("core WebAssembly module")
        );
        assert!(
            check_header(b"hello world")
                .unwrap_err()
                .to_string()
                .contains("magic number")
        );
    }
}
