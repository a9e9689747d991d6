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
//!   [`CacheOptions::max_bytes`] bytes; past them the least recently used
//!   entry of the new entry's shard goes first (the entries are spread over
//!   16 independently locked shards by key, so concurrent calls rarely wait
//!   for each other), then the least recently used of all; an entry larger
//!   than an eighth of the byte budget is not cached; each entry expires
//!   after its TTL.
//! - **Cost of a miss:** one SHA-256 of the plugin's identity, the tool's
//!   name and the arguments' JSON text as validation wrote it (already
//!   canonical: `serde_json` sorts object keys in this build), one shard
//!   lock to look up and one to store. A tool that cannot be cached pays
//!   one branch.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lru::LruCache;
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::sandbox::SandboxSpec;

/// The runtime-wide switch and bounds of the result cache
/// ([`RuntimeBuilder::result_cache`](crate::RuntimeBuilder::result_cache)).
///
/// ```
/// use std::time::Duration;
/// use toolhost_runtime::cache::CacheOptions;
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
pub(crate) type Key = [u8; 32];

/// What each entry counts for besides its results: the key, the clock,
/// the bookkeeping of the LRU list.
const ENTRY_OVERHEAD: usize = 128;

/// The entries are spread over this many independently locked shards (by
/// the key's first byte), so concurrent calls rarely wait for each other;
/// the bounds, the counters and the generation are shared atomics.
const SHARDS: usize = 16;

/// A cached raw result (before the after-hooks).
struct Entry {
    result: Stored,
    bytes: usize,
    expires: Instant,
    /// When it was last stored or read, on the cache's own clock: the
    /// least recently used entry of all shards is the one with the
    /// smallest tick among the shards' least recently used ones.
    used: u64,
}

/// One shard: its part of the entries, least recently used first out.
struct Shard {
    entries: LruCache<Key, Entry>,
}

/// The runtime's result cache (one per runtime, shared by its clones).
pub(crate) struct ResultCache {
    options: CacheOptions,
    shards: Box<[Mutex<Shard>]>,
    /// Entries and bytes over all shards (each changed under the lock of
    /// the shard whose entry it counts).
    entries: AtomicUsize,
    bytes: AtomicUsize,
    /// Bumped by every clear: a result whose call started before a clear
    /// is not stored after it.
    generation: AtomicU64,
    /// The clock of [`Entry::used`].
    clock: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ResultCache {
    pub(crate) fn new(options: CacheOptions) -> Self {
        ResultCache {
            options,
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        entries: LruCache::unbounded(),
                    })
                })
                .collect(),
            entries: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            clock: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &Key) -> &Mutex<Shard> {
        &self.shards[usize::from(key[0]) % SHARDS]
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    /// Forgets every entry; results of calls under way are not stored.
    pub(crate) fn clear(&self) {
        // The generation first: a store that sees the old one under a
        // shard's lock inserts before this clear empties that shard.
        self.generation.fetch_add(1, Ordering::SeqCst);
        if self.entries.load(Ordering::SeqCst) == 0 {
            return;
        }
        for shard in &*self.shards {
            let mut shard = shard.lock();
            for (_, gone) in &shard.entries {
                self.forget(gone);
            }
            shard.entries.clear();
        }
    }

    /// Takes `gone` out of the totals (called under its shard's lock).
    fn forget(&self, gone: &Entry) {
        self.entries.fetch_sub(1, Ordering::SeqCst);
        self.bytes.fetch_sub(gone.bytes, Ordering::SeqCst);
    }

    pub(crate) fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.entries.load(Ordering::SeqCst),
            bytes: self.bytes.load(Ordering::SeqCst),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// Whether the cache is on, and the TTL of a tool whose settings name
    /// none.
    pub(crate) fn enabled(&self) -> Option<Duration> {
        self.options.enabled.then_some(self.options.ttl)
    }

    /// After a call of a tool that may write, ran outside the cache: clears
    /// the cache (with `clear_after_writes`), so no read answers from before
    /// the write.
    pub(crate) fn after_write(&self) {
        if self.options.enabled && self.options.clear_after_writes {
            self.clear();
        }
    }

    /// The entry under `key` when there is a live one, or the generation
    /// a result for it must be stored under.
    pub(crate) fn lookup(&self, key: &Key, now: Instant) -> Result<Option<Hit>, u64> {
        // Read before the shard: a clear after this makes the store a no-op.
        let generation = self.generation.load(Ordering::SeqCst);
        let live = {
            let mut shard = self.shard(key).lock();
            match shard.entries.get_mut(key) {
                Some(entry) if entry.expires > now => {
                    entry.used = self.tick();
                    Some(entry.result.hit())
                }
                Some(_) => {
                    if let Some(gone) = shard.entries.pop(key) {
                        self.forget(&gone);
                    }
                    None
                }
                None => None,
            }
        };
        match live {
            Some(hit) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Ok(hit)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                Err(generation)
            }
        }
    }

    /// Keeps `result` under `key` for `ttl`, unless the cache was cleared
    /// since `generation` or the result is too large; then evicts the
    /// least recently used entries past the bounds.
    pub(crate) fn store(&self, key: Key, generation: u64, result: Cacheable<'_>, ttl: Duration) {
        let Some((stored, bytes)) = Stored::of(&result)
            .and_then(|s| s.bytes().map(|b| (s, b)))
            .filter(|(_, b)| *b <= self.options.max_entry_bytes())
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
            result: stored,
            bytes,
            expires,
            used: self.tick(),
        };
        {
            let mut shard = self.shard(&key).lock();
            // Counted before the generation is checked: a clear that bumps
            // the generation after this check sees the count and empties
            // this shard (it waits for this lock); one that bumped it
            // before is seen here. `bytes` is at most an eighth of
            // `max_bytes`, and the total is back under `max_bytes` once the
            // evictions below are done: no overflow.
            self.entries.fetch_add(1, Ordering::SeqCst);
            self.bytes.fetch_add(bytes, Ordering::SeqCst);
            if self.generation.load(Ordering::SeqCst) != generation {
                self.entries.fetch_sub(1, Ordering::SeqCst);
                self.bytes.fetch_sub(bytes, Ordering::SeqCst);
                return;
            }
            if let Some(old) = shard.entries.put(key, entry) {
                self.forget(&old);
            }
        }
        let over = || {
            self.entries.load(Ordering::SeqCst) > self.options.max_entries
                || self.bytes.load(Ordering::SeqCst) > self.options.max_bytes
        };
        if !over() {
            return;
        }
        // The common case, a full cache: the least recently used entry of
        // this key's shard goes (one lock; with keys spread evenly it is
        // among the oldest of all). The one just stored is never it while
        // the shard holds another.
        {
            let mut shard = self.shard(&key).lock();
            while over() && shard.entries.len() > 1 {
                match shard.entries.pop_lru() {
                    Some((_, gone)) => self.forget(&gone),
                    None => break,
                }
            }
        }
        // Else the least recently used of all shards.
        while over() {
            if !self.evict_oldest() {
                break;
            }
        }
    }

    /// Drops the least recently used entry of all shards; `false` when
    /// every shard is empty.
    fn evict_oldest(&self) -> bool {
        let oldest = self
            .shards
            .iter()
            .enumerate()
            .filter_map(|(i, shard)| shard.lock().entries.peek_lru().map(|(_, e)| (e.used, i)))
            .min();
        let Some((_, i)) = oldest else {
            return false;
        };
        // Another call may have used or dropped it meanwhile: then this
        // drops that shard's next oldest, still an old entry.
        let mut shard = self.shards[i].lock();
        if let Some((_, gone)) = shard.entries.pop_lru() {
            self.forget(&gone);
        }
        true
    }
}

/// A result as the cache keeps it: the output and its JSON values as text,
/// one after the other in one buffer — one allocation per entry, so that
/// storing one costs a write of the text (which also gives its size for the
/// byte budget) and evicting one a single free, not a walk of the value's
/// tree; a hit parses the values back.
#[derive(Clone)]
struct Stored {
    /// `output`, then `details`, `structured`, `content` and `meta` as
    /// JSON text.
    text: Vec<u8>,
    /// Where `output` ends.
    output_end: usize,
    /// Where `details`, `structured`, `content` and `meta` end (`None`:
    /// absent; for `content`, empty).
    details_end: Option<usize>,
    structured_end: Option<usize>,
    content_end: Option<usize>,
    meta_end: Option<usize>,
}

impl Stored {
    /// `result`'s output and values as text (`None` if a value cannot be written).
    fn of(result: &Cacheable<'_>) -> Option<Stored> {
        let mut text = Vec::with_capacity(result.output.len().saturating_add(128));
        text.extend_from_slice(result.output.as_bytes());
        let output_end = text.len();
        fn write<T: serde::Serialize + ?Sized>(
            text: &mut Vec<u8>,
            v: Option<&T>,
        ) -> Option<Option<usize>> {
            match v {
                None => Some(None),
                Some(v) => {
                    serde_json::to_writer(&mut *text, v).ok()?;
                    Some(Some(text.len()))
                }
            }
        }
        let details_end = write(&mut text, result.details.as_ref())?;
        let structured_end = write(&mut text, result.structured.as_ref())?;
        let content = (!result.content.is_empty()).then_some(result.content);
        let content_end = write(&mut text, content)?;
        let meta_end = write(&mut text, result.meta.as_ref())?;
        // The budget counts the length; what the buffer holds beyond it
        // stays within the entry's fixed overhead.
        if text.capacity() > text.len().saturating_add(ENTRY_OVERHEAD) {
            text.shrink_to_fit();
        }
        Some(Stored {
            text,
            output_end,
            details_end,
            structured_end,
            content_end,
            meta_end,
        })
    }

    /// What it counts for in the byte budget; `None` past `usize`.
    fn bytes(&self) -> Option<usize> {
        ENTRY_OVERHEAD.checked_add(self.text.len())
    }

    /// The output and the values parsed back (`None` if the text does not
    /// parse, e.g. a value nested deeper than the parser allows: then the
    /// call runs).
    fn hit(&self) -> Option<Hit> {
        let output = std::str::from_utf8(self.text.get(..self.output_end)?).ok()?;
        let mut start = self.output_end;
        fn value<T: serde::de::DeserializeOwned>(
            text: &[u8],
            start: &mut usize,
            end: Option<usize>,
        ) -> Option<Option<T>> {
            let Some(end) = end else {
                return Some(None);
            };
            let v = serde_json::from_slice(text.get(*start..end)?).ok()?;
            *start = end;
            Some(Some(v))
        }
        let details = value(&self.text, &mut start, self.details_end)?;
        let structured = value(&self.text, &mut start, self.structured_end)?;
        let content = value(&self.text, &mut start, self.content_end)?;
        let meta = value(&self.text, &mut start, self.meta_end)?;
        Some(Hit {
            output: output.to_owned(),
            details,
            structured,
            content: content.unwrap_or_default(),
            meta,
        })
    }
}

/// A cached result, copied out.
pub(crate) struct Hit {
    pub output: String,
    pub details: Option<Value>,
    pub structured: Option<Value>,
    pub content: Vec<toolhost_content::Content>,
    pub meta: Option<toolhost_content::JsonObject>,
}

/// A successful result to keep: the tool's name (for logs), its output and
/// values.
pub(crate) struct Cacheable<'a> {
    pub tool: &'a str,
    pub output: &'a str,
    pub details: &'a Option<Value>,
    pub structured: &'a Option<Value>,
    pub content: &'a [toolhost_content::Content],
    pub meta: &'a Option<toolhost_content::JsonObject>,
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

/// A call's arguments: the value, and its JSON text as the plugin gets it.
#[derive(Clone, Copy)]
pub(crate) struct Args<'a> {
    pub value: &'a Value,
    pub text: &'a str,
}

/// Whether `serde_json` writes object keys sorted (its maps are ordered by
/// key unless some crate in the build turns on `preserve_order`): then a
/// value's JSON text is already canonical and is hashed as it is, without
/// writing it again.
static SORTED_MAPS: LazyLock<bool> = LazyLock::new(|| {
    let probe: Value = serde_json::from_str(r#"{"b":0,"a":0}"#).unwrap_or(Value::Null);
    serde_json::to_string(&probe).is_ok_and(|text| text == r#"{"a":0,"b":0}"#)
});

/// The key of a call to tool `tool` (its declared name) of the plugin whose
/// identity is `identity`, with `args`, from `caller`: its session, agent
/// profile and client identity.
pub(crate) fn key(
    identity: &[u8; 32],
    tool: &str,
    args: Args<'_>,
    caller: [Option<&str>; 3],
) -> Key {
    let mut hash = Sha256::new();
    field(&mut hash, identity);
    field(&mut hash, tool.as_bytes());
    if *SORTED_MAPS {
        field(&mut hash, args.text.as_bytes());
    } else {
        let mut text = Vec::new();
        // Writing to a vector cannot fail.
        let _ = canonical_json(args.value, &mut text);
        field(&mut hash, &text);
    }
    for part in caller {
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

/// What of one tool goes into a plugin's cache identity.
pub(crate) struct ToolIdentity<'a> {
    pub name: &'a str,
    pub remote_name: Option<&'a str>,
    pub schema: &'a Value,
    pub output_schema: Option<&'a Value>,
}

/// A plugin's identity for the cache: what its code is (`digest`; for a
/// tool source, which lists its tools itself, also each tool's name and
/// schemas) and what it runs with (`sandbox`: limits, granted directories,
/// hosts and environment, config). Two plugins with equal identities
/// answer equal calls alike, as far as the host can tell.
pub(crate) fn identity<'a>(
    digest: &str,
    sandbox: &SandboxSpec,
    tools: impl IntoIterator<Item = ToolIdentity<'a>>,
) -> [u8; 32] {
    let mut hash = Sha256::new();
    field(&mut hash, b"toolhost result cache 1");
    field(&mut hash, digest.as_bytes());
    field(&mut hash, sandbox.plugin.as_bytes());
    field(&mut hash, sandbox.limits.to_string().as_bytes());
    for dir in &sandbox.dirs {
        field(&mut hash, dir.host.to_string().as_bytes());
        field(&mut hash, dir.guest.as_bytes());
        field(&mut hash, format!("{:?}", dir.access).as_bytes());
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
        field(&mut hash, t.remote_name.unwrap_or("").as_bytes());
        let _ = serde_json::to_writer(HashWriter(&mut hash), t.schema);
        hash.update(b"/");
        if let Some(schema) = t.output_schema {
            let _ = serde_json::to_writer(HashWriter(&mut hash), schema);
        }
        hash.update(b"/");
    }
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MIN: Duration = Duration::from_secs(60);

    /// The key of a call with `args`, whose text is what validation writes,
    /// from session `s` and agent `a` (no client).
    fn k(id: &[u8; 32], tool: &str, args: &Value, s: Option<&str>, a: Option<&str>) -> Key {
        kc(id, tool, args, [s, a, None])
    }

    /// The same, from `caller` (session, agent, client).
    fn kc(id: &[u8; 32], tool: &str, args: &Value, caller: [Option<&str>; 3]) -> Key {
        let text = args.to_string();
        key(
            id,
            tool,
            Args {
                value: args,
                text: &text,
            },
            caller,
        )
    }

    #[test]
    fn the_arguments_text_is_canonical_in_this_build() {
        // The key hashes the validated text as it is only when it is
        // canonical JSON; in this build it is (no `preserve_order`).
        assert!(*SORTED_MAPS);
        let v = json!({"z": {"b": 1, "a": [true, {"y": 0, "x": "é"}]}, "a": null});
        let mut canonical = Vec::new();
        canonical_json(&v, &mut canonical).unwrap();
        assert_eq!(v.to_string().into_bytes(), canonical);
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
        assert_eq!(k(&id, "t", &a, None, None), k(&id, "t", &b, None, None));
        assert_ne!(
            k(&id, "t", &a, None, None),
            k(&id, "t", &json!({"a": false}), None, None)
        );
    }

    #[test]
    fn the_key_separates_tools_sessions_agents_clients_and_identities() {
        let args = json!({});
        let base = k(&[0; 32], "t", &args, None, None);
        assert_ne!(base, kc(&[0; 32], "t", &args, [None, None, Some("s")]));
        assert_ne!(
            kc(&[0; 32], "t", &args, [None, None, Some("token:a")]),
            kc(&[0; 32], "t", &args, [None, None, Some("token:b")])
        );
        assert_ne!(base, k(&[1; 32], "t", &args, None, None));
        assert_ne!(base, k(&[0; 32], "u", &args, None, None));
        assert_ne!(base, k(&[0; 32], "t", &args, Some("s"), None));
        assert_ne!(base, k(&[0; 32], "t", &args, None, Some("s")));
        // No shifting of bytes between fields makes two calls alike.
        assert_ne!(
            k(&[0; 32], "t", &args, Some("ab"), Some("c")),
            k(&[0; 32], "t", &args, Some("a"), Some("bc"))
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
                .map(|i| crate::sandbox::Preopen {
                    host: crate::sandbox::HostDir::Path(format!("/d{i}").into()),
                    guest: format!("/d{i}"),
                    access: crate::grants::DirAccess::ReadOnly,
                })
                .collect(),
            ..SandboxSpec::default()
        }
    }

    #[test]
    fn the_identity_changes_with_code_grants_config_and_limits() {
        let base = identity("sha256:a", &spec(&[], 0), []);
        assert_eq!(base, identity("sha256:a", &spec(&[], 0), []));
        assert_ne!(base, identity("sha256:b", &spec(&[], 0), []));
        assert_ne!(base, identity("sha256:a", &spec(&[("K", "v")], 0), []));
        assert_ne!(base, identity("sha256:a", &spec(&[], 1), []));
        let mut config = spec(&[], 0);
        config.config.insert("k".into(), "v".into());
        assert_ne!(base, identity("sha256:a", &config, []));
        let mut limits = spec(&[], 0);
        limits.limits.max_output_bytes = 1;
        assert_ne!(base, identity("sha256:a", &limits, []));
        let mut hosts = spec(&[], 0);
        hosts.hosts = vec!["example.com".parse().unwrap()].into();
        assert_ne!(base, identity("sha256:a", &hosts, []));
    }

    /// A result to store, as the call step hands one over.
    struct Owned {
        output: String,
        details: Option<Value>,
        structured: Option<Value>,
        content: Vec<toolhost_content::Content>,
        meta: Option<toolhost_content::JsonObject>,
    }

    impl Owned {
        fn kept(&self) -> Cacheable<'_> {
            Cacheable {
                tool: "t",
                output: &self.output,
                details: &self.details,
                structured: &self.structured,
                content: &self.content,
                meta: &self.meta,
            }
        }
    }

    fn result(output: &str) -> Owned {
        Owned {
            output: output.to_owned(),
            details: None,
            structured: None,
            content: Vec::new(),
            meta: None,
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
        cache.store([1; 32], generation, result("old").kept(), MIN);
        assert_eq!(cache.stats().entries, 0);
        let Err(generation) = cache.lookup(&[1; 32], now) else {
            panic!("empty")
        };
        cache.store([1; 32], generation, result("new").kept(), MIN);
        assert_eq!(
            cache.lookup(&[1; 32], now).ok().flatten().unwrap().output,
            "new"
        );
    }

    #[test]
    fn the_byte_budget_counts_outputs_details_and_structured_results() {
        let mut r = result("abcd");
        r.details = Some(json!({"k": "v"}));
        r.structured = Some(json!([1, 2]));
        assert_eq!(
            Stored::of(&r.kept()).unwrap().bytes(),
            Some(ENTRY_OVERHEAD + 4 + r#"{"k":"v"}"#.len() + "[1,2]".len())
        );
        let cache = ResultCache::new(CacheOptions {
            max_bytes: 8 * (ENTRY_OVERHEAD + 10),
            ..CacheOptions::default()
        });
        cache.store([1; 32], 0, result(&"x".repeat(11)).kept(), MIN);
        assert_eq!(cache.stats().entries, 0, "past an eighth of the budget");
        for i in 0..9u8 {
            cache.store([i; 32], 0, result(&"x".repeat(10)).kept(), MIN);
        }
        let stats = cache.stats();
        assert_eq!(stats.entries, 8);
        assert_eq!(stats.bytes, 8 * (ENTRY_OVERHEAD + 10));
        assert!(cache.lookup(&[0; 32], Instant::now()).is_err(), "evicted");
        assert!(cache.lookup(&[8; 32], Instant::now()).is_ok());
    }

    #[test]
    fn a_hit_gives_back_the_stored_output_details_and_structured_result() {
        let cache = ResultCache::new(CacheOptions::default());
        let mut r = result("14");
        r.details = Some(json!({"expression": "2*(3+4)", "value": 14.0, "nested": [{"b": null}]}));
        r.structured = Some(json!({"value": 14}));
        cache.store([3; 32], 0, r.kept(), MIN);
        let hit = cache
            .lookup(&[3; 32], Instant::now())
            .ok()
            .flatten()
            .unwrap();
        assert_eq!(hit.output, r.output);
        assert_eq!(hit.details, r.details);
        assert_eq!(hit.structured, r.structured);
    }

    #[test]
    fn a_hit_gives_back_the_content_blocks_and_meta_as_they_were_stored() {
        let cache = ResultCache::new(CacheOptions::default());
        let mut r = result("a chart");
        r.content = vec![
            toolhost_content::Content::text("a chart"),
            toolhost_content::Content::image_bytes(b"\x89PNG\r\n\x1a\n", "image/png"),
        ];
        r.meta = json!({"x.example/k": 1}).as_object().cloned();
        let stored = Stored::of(&r.kept()).unwrap();
        let content_len = serde_json::to_string(&r.content).unwrap().len();
        assert_eq!(
            stored.bytes(),
            Some(ENTRY_OVERHEAD + "a chart".len() + content_len + r#"{"x.example/k":1}"#.len()),
            "the budget counts the content and meta too"
        );
        cache.store([4; 32], 0, r.kept(), MIN);
        let hit = cache
            .lookup(&[4; 32], Instant::now())
            .ok()
            .flatten()
            .unwrap();
        assert_eq!(hit.content, r.content);
        assert_eq!(hit.meta, r.meta);
        assert_eq!(hit.details, None);
    }

    #[test]
    fn a_full_cache_stays_within_its_entry_bound_and_keeps_the_newest() {
        let cache = ResultCache::new(CacheOptions {
            max_entries: 10,
            ..CacheOptions::default()
        });
        let key_of = |i: u32| -> Key {
            let mut hash = Sha256::new();
            hash.update(i.to_le_bytes());
            hash.finalize().into()
        };
        for i in 0..1_000u32 {
            cache.store(key_of(i), 0, result("r").kept(), MIN);
            assert!(cache.stats().entries <= 10);
        }
        assert_eq!(cache.stats().entries, 10);
        assert_eq!(cache.stats().bytes, 10 * (ENTRY_OVERHEAD + 1));
        assert!(
            cache.lookup(&key_of(999), Instant::now()).is_ok(),
            "the newest stays"
        );
    }

    #[test]
    fn a_full_cache_evicts_the_oldest_of_the_new_entrys_shard_else_the_oldest_of_all() {
        let cache = ResultCache::new(CacheOptions {
            max_entries: 2,
            ..CacheOptions::default()
        });
        // The first byte picks the shard.
        let key = |shard: u8, n: u8| -> Key {
            let mut k = [n; 32];
            k[0] = shard;
            k
        };
        let now = Instant::now();
        let (a, b, c, d) = (key(1, 1), key(2, 2), key(3, 3), key(1, 4));
        cache.store(a, 0, result("a").kept(), MIN);
        cache.store(b, 0, result("b").kept(), MIN);
        assert!(
            matches!(cache.lookup(&a, now), Ok(Some(_))),
            "a is now the most recent"
        );
        // c's shard holds nothing else: the oldest of all goes, b.
        cache.store(c, 0, result("c").kept(), MIN);
        assert!(cache.lookup(&b, now).is_err(), "b was evicted");
        assert!(matches!(cache.lookup(&a, now), Ok(Some(_))));
        // d shares a's shard: a goes though c is older (one lock, no scan).
        cache.store(d, 0, result("d").kept(), MIN);
        assert!(cache.lookup(&a, now).is_err(), "a was evicted");
        assert!(matches!(cache.lookup(&c, now), Ok(Some(_))));
        assert!(matches!(cache.lookup(&d, now), Ok(Some(_))));
        assert_eq!(cache.stats().entries, 2);
    }

    #[test]
    fn the_totals_match_the_shards_after_concurrent_stores_and_clears() {
        let cache = std::sync::Arc::new(ResultCache::new(CacheOptions {
            max_entries: 50,
            ..CacheOptions::default()
        }));
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let cache = cache.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000u32 {
                        let mut key = [t; 32];
                        key[..4].copy_from_slice(&i.to_le_bytes());
                        let Err(generation) = cache.lookup(&key, Instant::now()) else {
                            continue;
                        };
                        cache.store(key, generation, result("r").kept(), MIN);
                        if t == 0 && i % 97 == 0 {
                            cache.clear();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let held: usize = cache.shards.iter().map(|s| s.lock().entries.len()).sum();
        let stats = cache.stats();
        assert_eq!(stats.entries, held);
        assert_eq!(stats.bytes, held * (ENTRY_OVERHEAD + 1));
        assert!(held <= 50);
    }
}
