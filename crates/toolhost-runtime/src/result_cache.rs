//! The result cache: what a read-only, idempotent tool returned, kept in
//! memory for a while so the same call again is answered without running
//! the tool.
//!
//! It replaces one step of a call, **execute** (`call/mod.rs`): lookup,
//! validation, the policy, the before-hooks and the approvals run for a hit
//! as for any call, and the after-hooks and result approval run on the
//! cached raw output (so a change of hooks needs no invalidation).
//!
//! - **What is cached:** successful results of tools whose annotations say
//!   both `read-only` and `idempotent`, unless the host's settings or the
//!   plugin's manifest opt out ([`CacheSettings`]). Errors of any kind
//!   (tool errors, traps, timeouts, invalid output) never are.
//! - **The key:** a SHA-256 of the plugin's identity (its content digest —
//!   for a tool source, its kind and location and the tools it lists —
//!   and the grants, config and limits it runs with: `identity`), the
//!   tool's name, the arguments as canonical JSON (sorted keys, after the
//!   before-hooks rewrote them), and the call's session and agent (which the
//!   plugin sees in its call context). A reload that changes the code, the
//!   grants, the config or the limits thus makes old entries unreachable.
//! - **Invalidation:** a change of policy clears the cache
//!   ([`Runtime::set_policy`](crate::Runtime::set_policy)); so does every
//!   call that runs a tool not annotated read-only (it may have changed what
//!   read-only tools see), unless [`CacheOptions::clear_after_writes`] is
//!   off. A result computed while the cache was cleared is not stored.
//! - **Bounds:** at most [`CacheOptions::max_entries`] entries and
//!   [`CacheOptions::max_bytes`] bytes, least recently used first out; an
//!   entry larger than an eighth of the byte budget is not cached; each
//!   entry expires after its TTL.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lru::LruCache;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::api::Annotations;
use crate::call::{Call, ToolResult};
use crate::error::CallError;
use crate::permission::CallStep;
use crate::sandbox::SandboxSpec;

/// The runtime-wide switch and bounds of the result cache
/// ([`RuntimeBuilder::result_cache`](crate::RuntimeBuilder::result_cache)).
///
/// ```
/// use std::time::Duration;
/// use toolhost_runtime::CacheOptions;
///
/// let small = CacheOptions { max_entries: 100, ttl: Duration::from_secs(30), ..CacheOptions::default() };
/// assert!(small.enabled);
/// assert!(!CacheOptions::disabled().enabled);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheOptions {
    /// Whether results are cached at all (on by default).
    pub enabled: bool,
    /// The most entries kept (1,000 by default).
    pub max_entries: usize,
    /// The most bytes of results kept (32 MiB by default); a result larger
    /// than an eighth of this is not cached.
    pub max_bytes: usize,
    /// How long an entry is kept when neither the host's settings nor the
    /// manifest say otherwise (5 minutes by default).
    pub ttl: Duration,
    /// Clears the cache after every call that runs a tool not annotated
    /// read-only (on by default): such a call may change what read-only
    /// tools would see, e.g. write the file `read_file` returned.
    pub clear_after_writes: bool,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            enabled: true,
            max_entries: 1_000,
            max_bytes: 32 * 1024 * 1024,
            ttl: Duration::from_secs(5 * 60),
            clear_after_writes: true,
        }
    }
}

impl CacheOptions {
    /// No result cache: every call runs its tool.
    pub fn disabled() -> Self {
        CacheOptions {
            enabled: false,
            ..CacheOptions::default()
        }
    }

    /// The largest entry that is cached: an eighth of the byte budget.
    fn max_entry_bytes(&self) -> usize {
        self.max_bytes / 8
    }
}

/// Caching of one plugin's results, as the host's settings
/// (`[plugins.NAME.cache]`, [`PluginSettings::cache`](crate::PluginSettings::cache))
/// or the plugin's manifest (`[cache]`, [`Manifest::cache`](crate::Manifest::cache))
/// say it. Only tools annotated read-only *and* idempotent are ever cached;
/// these settings can only keep results out or change how long they stay.
/// The host's TTL may go either way from the runtime's default; a
/// manifest may only lower what the host allows (`enabled = true` or a
/// longer TTL in a manifest changes nothing).
///
/// ```toml
/// [plugins.fs.cache]
/// ttl-ms = 60000                          # every tool of fs
/// tools.list_dir = { enabled = false }    # but never list_dir
/// ```
///
/// ```
/// use toolhost_runtime::CacheSettings;
/// let s: CacheSettings = toml::from_str("ttl-ms = 1000\ntools.list_dir = { enabled = false }").unwrap();
/// assert_eq!(s.ttl_ms, Some(1000));
/// assert_eq!(s.tools["list_dir"].enabled, Some(false));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CacheSettings {
    /// `false` keeps every tool of the plugin out of the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How long its results are kept, in milliseconds (0: not cached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// The same, per tool (by the name the plugin declares); wins over the
    /// plugin-wide values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, ToolCacheSettings>,
}

/// Caching of one tool's results (see [`CacheSettings`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ToolCacheSettings {
    /// `false` keeps this tool out of the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// How long its results are kept, in milliseconds (0: not cached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

impl CacheSettings {
    /// Whether nothing is set (then it is left out when serialized).
    pub fn is_empty(&self) -> bool {
        self == &CacheSettings::default()
    }

    /// `(enabled, ttl)` for `tool`: the tool's own values, else the plugin's.
    fn for_tool(&self, tool: &str) -> (bool, Option<Duration>) {
        let own = self.tools.get(tool);
        let enabled = self.enabled.unwrap_or(true) && own.and_then(|t| t.enabled).unwrap_or(true);
        let ttl = own
            .and_then(|t| t.ttl_ms)
            .or(self.ttl_ms)
            .map(Duration::from_millis);
        (enabled, ttl)
    }
}

/// Whether one tool's results may be cached, and for how long, as its
/// annotations, the host's settings and its manifest decide (resolved when
/// the plugin loads; the runtime's [`CacheOptions`] apply at call time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheRule {
    /// Annotated read-only and idempotent, and neither the host nor the
    /// manifest opts out.
    pub allowed: bool,
    /// The host's TTL (`None`: the runtime's default).
    pub host_ttl: Option<Duration>,
    /// The manifest's TTL, a ceiling below the host's.
    pub manifest_ttl: Option<Duration>,
}

impl CacheRule {
    /// The rule for tool `tool` with `annotations`, under the host's
    /// settings `host` and the manifest's `manifest`.
    pub(crate) fn resolve(
        tool: &str,
        annotations: &Annotations,
        host: &CacheSettings,
        manifest: &CacheSettings,
    ) -> CacheRule {
        let (host_on, host_ttl) = host.for_tool(tool);
        let (manifest_on, manifest_ttl) = manifest.for_tool(tool);
        CacheRule {
            allowed: annotations.read_only && annotations.idempotent && host_on && manifest_on,
            host_ttl,
            manifest_ttl,
        }
    }

    /// How long a result is kept: the host's TTL (or `default`), lowered
    /// by the manifest's; `None` when it is not cached.
    pub(crate) fn ttl(&self, default: Duration) -> Option<Duration> {
        if !self.allowed {
            return None;
        }
        let host = self.host_ttl.unwrap_or(default);
        let ttl = self.manifest_ttl.map_or(host, |m| m.min(host));
        (!ttl.is_zero()).then_some(ttl)
    }
}

/// What the result cache holds now and how it was used
/// ([`Runtime::result_cache_stats`](crate::Runtime::result_cache_stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Entries kept.
    pub entries: usize,
    /// Bytes they count for (outputs, details, structured results and a
    /// fixed overhead per entry).
    pub bytes: usize,
    /// Calls answered from the cache.
    pub hits: u64,
    /// Cacheable calls that ran their tool.
    pub misses: u64,
}

/// What a call is cached under: a SHA-256 of everything its result depends on.
type Key = [u8; 32];

/// What each entry counts for besides its results: the key, the clock,
/// the bookkeeping of the LRU list.
const ENTRY_OVERHEAD: usize = 128;

/// A cached raw result (before the after-hooks).
struct Entry {
    output: String,
    details: Option<Value>,
    structured: Option<Value>,
    bytes: usize,
    expires: Instant,
}

struct State {
    entries: LruCache<Key, Entry>,
    bytes: usize,
    /// Bumped by every clear: a result whose call started before a clear
    /// is not stored after it.
    generation: u64,
    hits: u64,
    misses: u64,
}

/// The runtime's result cache (one per runtime, shared by its clones).
pub(crate) struct ResultCache {
    options: CacheOptions,
    state: Mutex<State>,
}

impl ResultCache {
    pub(crate) fn new(options: CacheOptions) -> Self {
        ResultCache {
            options,
            state: Mutex::new(State {
                entries: LruCache::unbounded(),
                bytes: 0,
                generation: 0,
                hits: 0,
                misses: 0,
            }),
        }
    }

    /// Forgets every entry; results of calls under way are not stored.
    pub(crate) fn clear(&self) {
        let mut state = self.state.lock();
        state.entries.clear();
        state.bytes = 0;
        state.generation = state.generation.wrapping_add(1);
    }

    pub(crate) fn stats(&self) -> CacheStats {
        let state = self.state.lock();
        CacheStats {
            entries: state.entries.len(),
            bytes: state.bytes,
            hits: state.hits,
            misses: state.misses,
        }
    }

    /// The execute step of `call` with `args` (as admitted) through the
    /// cache: a hit answers from it (and is reported as a
    /// [`CallStep::Cached`] step); a miss runs `execute` and stores its
    /// result when it succeeded.
    pub(crate) async fn execute(
        &self,
        call: &Call<'_>,
        args: &Value,
        execute: impl AsyncFnOnce() -> Result<ToolResult, CallError>,
    ) -> Result<ToolResult, CallError> {
        if !self.options.enabled {
            return execute().await;
        }
        let spec = call.target.spec();
        let Some(ttl) = spec.cache.ttl(self.options.ttl) else {
            let result = execute().await;
            if self.options.clear_after_writes && !spec.annotations.read_only {
                self.clear();
            }
            return result;
        };
        let started = Instant::now();
        let key = key(
            &call.target.plugin.cache_identity,
            &spec.name,
            args,
            call.cx.session_id.as_deref(),
            call.cx.agent.as_deref(),
        );
        let generation = match self.lookup(&key, started) {
            Ok(hit) => {
                // A hit never waits for anything: without this, a task
                // making cached calls back to back would keep its worker
                // thread forever. It yields once its cooperative budget is
                // spent, as tokio's own resources do.
                tokio::task::coop::consume_budget().await;
                call.cx.step(|| CallStep::Cached);
                tracing::debug!(tool = call.target.tool, plugin = %call.target.plugin.id(), call_id = %call.id, "answered from the result cache");
                let plugin = &call.target.plugin;
                return Ok(ToolResult {
                    output: hit.output,
                    details: hit.details,
                    structured: hit.structured,
                    tool: call.target.tool.to_owned(),
                    plugin: plugin.name.clone(),
                    plugin_version: plugin.version.clone(),
                    duration: started.elapsed(),
                    cached: true,
                });
            }
            Err(generation) => generation,
        };
        let result = execute().await;
        if let Ok(r) = &result {
            self.store(key, generation, r, ttl);
        }
        result
    }

    /// The entry under `key` when there is a live one, or the generation
    /// a result for it must be stored under.
    fn lookup(&self, key: &Key, now: Instant) -> Result<Hit, u64> {
        let mut state = self.state.lock();
        let live = match state.entries.get(key) {
            Some(entry) if entry.expires > now => Some(Hit {
                output: entry.output.clone(),
                details: entry.details.clone(),
                structured: entry.structured.clone(),
            }),
            Some(_) => {
                if let Some(gone) = state.entries.pop(key) {
                    state.bytes = state.bytes.saturating_sub(gone.bytes);
                }
                None
            }
            None => None,
        };
        match live {
            Some(hit) => {
                state.hits = state.hits.saturating_add(1);
                Ok(hit)
            }
            None => {
                state.misses = state.misses.saturating_add(1);
                Err(state.generation)
            }
        }
    }

    /// Keeps `result` under `key` for `ttl`, unless the cache was cleared
    /// since `generation` or the result is too large; then evicts the
    /// least recently used entries past the bounds.
    fn store(&self, key: Key, generation: u64, result: &ToolResult, ttl: Duration) {
        let Some(bytes) = entry_bytes(result).filter(|b| *b <= self.options.max_entry_bytes())
        else {
            tracing::debug!(
                tool = %result.tool,
                "result too large for the result cache; not cached"
            );
            return;
        };
        let Some(expires) = Instant::now().checked_add(ttl) else {
            return;
        };
        let entry = Entry {
            output: result.output.clone(),
            details: result.details.clone(),
            structured: result.structured.clone(),
            bytes,
            expires,
        };
        let mut state = self.state.lock();
        if state.generation != generation {
            return;
        }
        if let Some(old) = state.entries.put(key, entry) {
            state.bytes = state.bytes.saturating_sub(old.bytes);
        }
        // `bytes` is at most an eighth of `max_bytes`, and the total stays
        // at most `max_bytes` after every store: no overflow.
        state.bytes = state.bytes.saturating_add(bytes);
        while state.entries.len() > self.options.max_entries || state.bytes > self.options.max_bytes
        {
            let Some((_, gone)) = state.entries.pop_lru() else {
                state.bytes = 0;
                break;
            };
            state.bytes = state.bytes.saturating_sub(gone.bytes);
        }
    }
}

/// A cached result, copied out.
struct Hit {
    output: String,
    details: Option<Value>,
    structured: Option<Value>,
}

/// What `result` counts for in the byte budget; `None` past `usize`.
fn entry_bytes(result: &ToolResult) -> Option<usize> {
    let json = |v: &Option<Value>| v.as_ref().map_or(Some(0), json_len);
    ENTRY_OVERHEAD
        .checked_add(result.output.len())?
        .checked_add(json(&result.details)?)?
        .checked_add(json(&result.structured)?)
}

/// The length of `value` as JSON text, without building the text.
fn json_len(value: &Value) -> Option<usize> {
    struct Count(Option<usize>);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.and_then(|n| n.checked_add(buf.len()));
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(Some(0));
    serde_json::to_writer(&mut count, value).ok()?;
    count.0
}

/// Feeds `Sha256` as an [`std::io::Write`].
struct HashWriter<'a>(&'a mut Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Adds one length-prefixed field to `hash`, so that no two sequences of
/// fields hash alike.
fn field(hash: &mut Sha256, bytes: &[u8]) {
    hash.update(u64::try_from(bytes.len()).unwrap_or(u64::MAX).to_le_bytes());
    hash.update(bytes);
}

/// Writes `value` to `out` as canonical JSON: object keys sorted, no
/// whitespace, so `{"a":1,"b":2}` and `{"b":2,"a":1}` are one key.
fn canonical_json(value: &Value, out: &mut impl std::io::Write) -> std::io::Result<()> {
    match value {
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.write_all(b"{")?;
            for (i, (k, v)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                serde_json::to_writer(&mut *out, k)?;
                out.write_all(b":")?;
                canonical_json(v, out)?;
            }
            out.write_all(b"}")
        }
        Value::Array(items) => {
            out.write_all(b"[")?;
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                canonical_json(v, out)?;
            }
            out.write_all(b"]")
        }
        scalar => Ok(serde_json::to_writer(&mut *out, scalar)?),
    }
}

/// The key of a call to tool `tool` (its declared name) of the plugin whose
/// identity is `identity`, with `args`, in `session` for `agent`.
fn key(
    identity: &[u8; 32],
    tool: &str,
    args: &Value,
    session: Option<&str>,
    agent: Option<&str>,
) -> Key {
    let mut hash = Sha256::new();
    field(&mut hash, identity);
    field(&mut hash, tool.as_bytes());
    let mut text = Vec::new();
    // Writing to a vector cannot fail.
    let _ = canonical_json(args, &mut text);
    field(&mut hash, &text);
    for part in [session, agent] {
        match part {
            Some(s) => {
                hash.update([1]);
                field(&mut hash, s.as_bytes());
            }
            None => hash.update([0]),
        }
    }
    hash.finalize().into()
}

/// A plugin's identity for the cache: what its code is (`digest`; for a
/// tool source, which lists its tools itself, also each tool's name and
/// schemas) and what it runs with (`sandbox`: limits, granted directories,
/// hosts and environment, config). Two plugins with equal identities
/// answer equal calls alike, as far as the host can tell.
pub(crate) fn identity(
    digest: &str,
    sandbox: &SandboxSpec,
    tools: &[crate::plugin::Tool],
) -> [u8; 32] {
    let mut hash = Sha256::new();
    field(&mut hash, b"toolhost result cache 1");
    field(&mut hash, digest.as_bytes());
    field(&mut hash, sandbox.plugin.as_bytes());
    field(&mut hash, sandbox.limits.to_string().as_bytes());
    for (host_path, guest_path, access) in &sandbox.dirs {
        field(&mut hash, host_path.as_os_str().as_encoded_bytes());
        field(&mut hash, guest_path.as_bytes());
        field(&mut hash, format!("{access:?}").as_bytes());
    }
    hash.update(b"hosts");
    for host in sandbox.hosts.iter() {
        field(&mut hash, host.to_string().as_bytes());
    }
    hash.update(b"env");
    for (k, v) in &sandbox.env {
        field(&mut hash, k.as_bytes());
        field(&mut hash, v.as_bytes());
    }
    hash.update(b"config");
    for (k, v) in &sandbox.config {
        field(&mut hash, k.as_bytes());
        field(&mut hash, v.as_bytes());
    }
    hash.update(b"tools");
    for t in tools {
        field(&mut hash, t.name.as_bytes());
        field(&mut hash, t.remote_name.as_deref().unwrap_or("").as_bytes());
        let _ = serde_json::to_writer(HashWriter(&mut hash), &*t.schema);
        hash.update(b"/");
        if let Some(schema) = &t.output_schema {
            let _ = serde_json::to_writer(HashWriter(&mut hash), &**schema);
        }
        hash.update(b"/");
    }
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn both() -> Annotations {
        Annotations {
            read_only: true,
            idempotent: true,
            ..Annotations::default()
        }
    }

    fn settings(toml: &str) -> CacheSettings {
        toml::from_str(toml).unwrap()
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn only_read_only_and_idempotent_tools_are_cached() {
        let none = CacheSettings::default();
        let rule = |a: Annotations| CacheRule::resolve("t", &a, &none, &none).ttl(MIN);
        assert_eq!(rule(both()), Some(MIN));
        let read_only = Annotations {
            idempotent: false,
            ..both()
        };
        let idempotent = Annotations {
            read_only: false,
            ..both()
        };
        assert_eq!(rule(read_only), None);
        assert_eq!(rule(idempotent), None);
        assert_eq!(rule(Annotations::default()), None);
    }

    #[test]
    fn a_manifest_may_only_lower_what_the_host_allows() {
        let rule = |host: &str, manifest: &str, tool: &str| {
            CacheRule::resolve(tool, &both(), &settings(host), &settings(manifest)).ttl(MIN)
        };
        // The manifest cannot switch on what the host switched off...
        assert_eq!(rule("enabled = false", "enabled = true", "t"), None);
        assert_eq!(
            rule("tools.t = { enabled = false }", "enabled = true", "t"),
            None
        );
        // ...nor keep results longer than the host does.
        assert_eq!(
            rule("ttl-ms = 1000", "ttl-ms = 3600000", "t"),
            Some(Duration::from_secs(1))
        );
        assert_eq!(rule("", "ttl-ms = 3600000", "t"), Some(MIN));
        // It may opt out, or keep them for less.
        assert_eq!(rule("", "tools.t = { enabled = false }", "t"), None);
        assert_eq!(rule("", "tools.t = { enabled = false }", "u"), Some(MIN));
        assert_eq!(
            rule("", "ttl-ms = 10", "t"),
            Some(Duration::from_millis(10))
        );
        // The host may raise the runtime's default, per tool too.
        assert_eq!(
            rule("ttl-ms = 3600000\ntools.t = { ttl-ms = 7200000 }", "", "t"),
            Some(Duration::from_secs(7200))
        );
        // A zero TTL is no caching.
        assert_eq!(rule("ttl-ms = 0", "", "t"), None);
    }

    #[test]
    fn unknown_cache_keys_are_rejected() {
        assert!(toml::from_str::<CacheSettings>("ttl = 5").is_err());
        assert!(toml::from_str::<CacheSettings>("tools.t = { ttl = 5 }").is_err());
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let text = |v: &Value| {
            let mut out = Vec::new();
            canonical_json(v, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let a = json!({"b": [1, {"y": "é", "x": null}], "a": true});
        assert_eq!(text(&a), r#"{"a":true,"b":[1,{"x":null,"y":"é"}]}"#);
        let id = [7; 32];
        let b = json!({"a": true, "b": [1, {"x": null, "y": "é"}]});
        assert_eq!(key(&id, "t", &a, None, None), key(&id, "t", &b, None, None));
        assert_ne!(
            key(&id, "t", &a, None, None),
            key(&id, "t", &json!({"a": false}), None, None)
        );
    }

    #[test]
    fn the_key_separates_tools_sessions_agents_and_identities() {
        let args = json!({});
        let base = key(&[0; 32], "t", &args, None, None);
        assert_ne!(base, key(&[1; 32], "t", &args, None, None));
        assert_ne!(base, key(&[0; 32], "u", &args, None, None));
        assert_ne!(base, key(&[0; 32], "t", &args, Some("s"), None));
        assert_ne!(base, key(&[0; 32], "t", &args, None, Some("s")));
        // No shifting of bytes between fields makes two calls alike.
        assert_ne!(
            key(&[0; 32], "t", &args, Some("ab"), Some("c")),
            key(&[0; 32], "t", &args, Some("a"), Some("bc"))
        );
    }

    fn spec(env: &[(&str, &str)], dirs: usize) -> SandboxSpec {
        SandboxSpec {
            plugin: "p".into(),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            dirs: (0..dirs)
                .map(|i| {
                    (
                        format!("/d{i}").into(),
                        format!("/d{i}"),
                        crate::grants::DirAccess::ReadOnly,
                    )
                })
                .collect(),
            ..SandboxSpec::default()
        }
    }

    #[test]
    fn the_identity_changes_with_code_grants_config_and_limits() {
        let base = identity("sha256:a", &spec(&[], 0), &[]);
        assert_eq!(base, identity("sha256:a", &spec(&[], 0), &[]));
        assert_ne!(base, identity("sha256:b", &spec(&[], 0), &[]));
        assert_ne!(base, identity("sha256:a", &spec(&[("K", "v")], 0), &[]));
        assert_ne!(base, identity("sha256:a", &spec(&[], 1), &[]));
        let mut config = spec(&[], 0);
        config.config.insert("k".into(), "v".into());
        assert_ne!(base, identity("sha256:a", &config, &[]));
        let mut limits = spec(&[], 0);
        limits.limits.max_output_bytes = 1;
        assert_ne!(base, identity("sha256:a", &limits, &[]));
        let mut hosts = spec(&[], 0);
        hosts.hosts = vec!["example.com".parse().unwrap()].into();
        assert_ne!(base, identity("sha256:a", &hosts, &[]));
    }

    fn result(output: &str) -> ToolResult {
        ToolResult {
            output: output.to_owned(),
            details: None,
            structured: None,
            tool: "t".into(),
            plugin: "p".into(),
            plugin_version: semver::Version::new(0, 0, 0),
            duration: Duration::ZERO,
            cached: false,
        }
    }

    #[test]
    fn a_result_stored_after_a_clear_that_followed_its_lookup_is_dropped() {
        let cache = ResultCache::new(CacheOptions::default());
        let now = Instant::now();
        let Err(generation) = cache.lookup(&[1; 32], now) else {
            panic!("empty")
        };
        cache.clear();
        cache.store([1; 32], generation, &result("old"), MIN);
        assert_eq!(cache.stats().entries, 0);
        let Err(generation) = cache.lookup(&[1; 32], now) else {
            panic!("empty")
        };
        cache.store([1; 32], generation, &result("new"), MIN);
        assert_eq!(cache.lookup(&[1; 32], now).ok().unwrap().output, "new");
    }

    #[test]
    fn the_byte_budget_counts_outputs_details_and_structured_results() {
        let mut r = result("abcd");
        r.details = Some(json!({"k": "v"}));
        r.structured = Some(json!([1, 2]));
        assert_eq!(
            entry_bytes(&r),
            Some(ENTRY_OVERHEAD + 4 + r#"{"k":"v"}"#.len() + "[1,2]".len())
        );
        let cache = ResultCache::new(CacheOptions {
            max_bytes: 8 * (ENTRY_OVERHEAD + 10),
            ..CacheOptions::default()
        });
        cache.store([1; 32], 0, &result(&"x".repeat(11)), MIN);
        assert_eq!(cache.stats().entries, 0, "past an eighth of the budget");
        for i in 0..9u8 {
            cache.store([i; 32], 0, &result(&"x".repeat(10)), MIN);
        }
        let stats = cache.stats();
        assert_eq!(stats.entries, 8);
        assert_eq!(stats.bytes, 8 * (ENTRY_OVERHEAD + 10));
        assert!(cache.lookup(&[0; 32], Instant::now()).is_err(), "evicted");
        assert!(cache.lookup(&[8; 32], Instant::now()).is_ok());
    }
}
