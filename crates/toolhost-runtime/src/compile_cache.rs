//! On-disk cache of compiled components.
//!
//! An entry's name is the SHA-256 of the component's bytes together with the
//! engine's compatibility hash (wasmtime version, target CPU, settings), so a
//! cache written by another wasmtime or for another CPU is never read. Each
//! entry starts with the SHA-256 of its payload: a truncated or corrupted
//! entry is detected, recompiled and rewritten, never fatal. Entries are
//! written to a temporary file and renamed into place, so a reader never sees
//! a half-written one.
//!
//! Loading an entry runs the native code in it, so an entry is read only
//! when this host can tell it wrote it (issue 59: anyone who can write a
//! cache volume shared by replicas would otherwise run code in each):
//!
//! - with a cache key (`TOOLHOST_CACHE_KEY`, a secret the deployment holds,
//!   [`RuntimeBuilder::cache_key`](crate::RuntimeBuilder::cache_key)), the
//!   leading 32 bytes are an HMAC-SHA256 of the payload under that key, and
//!   an entry whose MAC does not verify is recompiled and rewritten — the
//!   same one pass over the bytes as the plain checksum;
//! - without one, the leading bytes are the payload's SHA-256 and, on Linux,
//!   an entry is read only when it and its directory belong to this
//!   process's user and nobody else may write them; elsewhere the directory
//!   is trusted as the user's own.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

const CHECKSUM_LEN: usize = 32;

/// Where compiled components are kept, and how often it helped.
#[derive(Debug)]
pub(crate) struct CompileCache {
    dir: Option<PathBuf>,
    engine_hash: [u8; 32],
    /// The deployment's cache key, when it has one.
    key: Option<CacheKey>,
    pub(crate) compiled: AtomicU64,
    pub(crate) cache_hits: AtomicU64,
}

/// Feeds `Hash` output into SHA-256 so the engine hash is stable across runs.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl CompileCache {
    /// A cache in `dir` (created on first write), or none at all; its
    /// entries sealed with `key` when there is one.
    pub(crate) fn new(
        engine: &Engine,
        dir: Option<PathBuf>,
        key: Option<CacheKey>,
    ) -> CompileCache {
        let mut h = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut h);
        CompileCache {
            dir,
            engine_hash: h.0.finalize().into(),
            key,
            compiled: AtomicU64::new(0),
            cache_hits: AtomicU64::new(0),
        }
    }

    /// The cache key of a component: hash of its bytes and of the engine.
    pub(crate) fn key(&self, wasm: &[u8]) -> String {
        let mut h = Sha256::new();
        h.update(self.engine_hash);
        h.update(wasm);
        hex::encode(h.finalize())
    }

    /// The compiled component for `wasm` (whose [`key`](Self::key) is `key`):
    /// from the cache when a valid entry exists, otherwise compiled (and stored).
    pub(crate) fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
        key: &str,
        origin: &Path,
    ) -> wasmtime::Result<Component> {
        let Some(dir) = &self.dir else {
            self.compiled.fetch_add(1, Ordering::Relaxed);
            return Component::new(engine, wasm);
        };
        let entry = dir.join(format!("{key}.cwasm"));
        if let Some(component) = self.read(engine, &entry) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(plugin = %origin.display(), entry = %entry.display(), "loaded compiled component from cache");
            record_origin(dir, key, origin);
            touch(&entry);
            return Ok(component);
        }
        let started = std::time::Instant::now();
        let component = Component::new(engine, wasm)?;
        self.compiled.fetch_add(1, Ordering::Relaxed);
        tracing::info!(plugin = %origin.display(), ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX), "compiled component");
        if let Err(e) = self.write(&component, dir, &entry) {
            tracing::warn!(entry = %entry.display(), "cannot write the compile cache: {e}");
        }
        record_origin(dir, key, origin);
        Ok(component)
    }

    /// Removes entries no plugin file needs any more: an entry is kept while
    /// one of the files recorded as its origin exists and was not just loaded
    /// with other content, or while it was used within `grace` (switching
    /// back to a recent build does not recompile). `live` maps every file
    /// this runtime loaded to the key of its current content. Entries of
    /// other hosts sharing the directory survive as long as their files
    /// exist; leftover temporary files of interrupted writes are removed
    /// after an hour. Returns how many entries were removed.
    pub(crate) fn prune(&self, live: &BTreeMap<PathBuf, String>, grace: Duration) -> usize {
        let Some(dir) = &self.dir else { return 0 };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".tmp-") {
                let old = age(&path).is_some_and(|age| age > Duration::from_secs(3600));
                if old && std::fs::remove_file(&path).is_ok() {
                    tracing::debug!(file = %path.display(), "removed a leftover temporary cache file");
                }
                continue;
            }
            let Some(key) = name.strip_suffix(".origins") else {
                continue;
            };
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let needed = text.lines().any(|origin| {
                let origin = Path::new(origin);
                match live.get(origin) {
                    Some(current) => current == key,
                    None => origin.exists(),
                }
            });
            let entry = dir.join(format!("{key}.cwasm"));
            if !needed && age(&entry).is_none_or(|age| age >= grace) {
                let _ = std::fs::remove_file(&entry);
                let _ = std::fs::remove_file(&path);
                removed += 1;
                tracing::debug!(
                    key,
                    "pruned a compile cache entry whose plugin files are gone"
                );
            }
        }
        removed
    }

    fn read(&self, engine: &Engine, entry: &Path) -> Option<Component> {
        let bytes = match std::fs::read(entry) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(entry = %entry.display(), "cannot read cache entry, recompiling: {e}");
                return None;
            }
        };
        let Some((seal, payload)) = bytes.split_at_checked(CHECKSUM_LEN) else {
            tracing::warn!(entry = %entry.display(), "corrupt cache entry (too short), recompiling");
            return None;
        };
        let sealed = match &self.key {
            Some(key) => key.verifies(payload, seal),
            None => seal == &Sha256::digest(payload)[..],
        };
        if !sealed {
            let what = if self.key.is_some() {
                "not sealed with this deployment's cache key"
            } else {
                "checksum mismatch"
            };
            tracing::warn!(entry = %entry.display(), "corrupt cache entry ({what}), recompiling");
            return None;
        }
        if self.key.is_none()
            && let Err(why) = owned_by_this_user(entry)
        {
            tracing::warn!(entry = %entry.display(), "a cache entry this host cannot tell it wrote ({why}), recompiling in memory; set TOOLHOST_CACHE_KEY to share a cache between users or replicas");
            return None;
        }
        // SAFETY: the payload is exactly what `Component::serialize` wrote for
        // this engine configuration: the file name binds it to the engine's
        // compatibility hash, and either the deployment's key seals it or it
        // sits, with its checksum, where only this user could have written it.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize(engine, payload) };
        match component {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(entry = %entry.display(), "unusable cache entry, recompiling: {e}");
                None
            }
        }
    }

    fn write(&self, component: &Component, dir: &Path, entry: &Path) -> std::io::Result<()> {
        let payload = component.serialize().map_err(std::io::Error::other)?;
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile_in(dir)?;
        {
            use std::io::Write;
            match &self.key {
                Some(key) => tmp.write_all(&key.seal(&payload))?,
                None => tmp.write_all(&Sha256::digest(&payload))?,
            }
            tmp.write_all(&payload)?;
            tmp.as_file().sync_data()?;
        }
        tmp.persist(entry).map(drop).map_err(|e| e.error)
    }
}

/// The secret that seals compile cache entries (at least 32 bytes): what
/// lets replicas share a cache volume that someone else might write.
///
/// ```
/// let key = toolhost_runtime::cache::CacheKey::new(b"a secret of at least 32 bytes, from a vault".to_vec());
/// assert!(key.is_ok());
/// assert!(toolhost_runtime::cache::CacheKey::new(b"short".to_vec()).is_err());
/// ```
#[derive(Clone)]
pub struct CacheKey(Vec<u8>);

impl std::fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheKey(..)")
    }
}

/// A cache key shorter than [`CacheKey::MIN_LEN`] bytes.
#[derive(Debug, thiserror::Error)]
#[error("a compile cache key needs at least {min} bytes, this one has {len}", min = CacheKey::MIN_LEN)]
pub struct CacheKeyTooShort {
    /// How many bytes it has.
    pub len: usize,
}

impl CacheKey {
    /// The fewest bytes a key may have.
    pub const MIN_LEN: usize = 32;

    /// A key from the deployment's secret.
    pub fn new(secret: Vec<u8>) -> Result<CacheKey, CacheKeyTooShort> {
        if secret.len() < Self::MIN_LEN {
            return Err(CacheKeyTooShort { len: secret.len() });
        }
        Ok(CacheKey(secret))
    }

    fn mac(&self) -> Hmac<Sha256> {
        // An HMAC takes a key of any length.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!())
    }

    fn seal(&self, payload: &[u8]) -> [u8; CHECKSUM_LEN] {
        let mut mac = self.mac();
        mac.update(payload);
        mac.finalize().into_bytes().into()
    }

    /// Whether `seal` is this key's MAC of `payload` (in constant time).
    fn verifies(&self, payload: &[u8], seal: &[u8]) -> bool {
        let mut mac = self.mac();
        mac.update(payload);
        mac.verify_slice(seal).is_ok()
    }
}

/// Whether `entry` and its directory belong to this process's user with
/// nobody else allowed to write them (Linux; elsewhere, always).
#[cfg(target_os = "linux")]
fn owned_by_this_user(entry: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::geteuid().as_raw();
    let dir = entry.parent().unwrap_or(Path::new("."));
    for path in [dir, entry] {
        let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.uid() != me {
            return Err(format!(
                "{} belongs to uid {}, this host runs as {me}",
                path.display(),
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} may be written by others (mode {:o})",
                path.display(),
                meta.mode() & 0o777
            ));
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn owned_by_this_user(_entry: &Path) -> Result<(), String> {
    Ok(())
}

/// How long ago `path` was last modified.
fn age(path: &Path) -> Option<Duration> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
}

/// Marks a cache entry as used now (its modification time), for pruning.
fn touch(entry: &Path) {
    let result = std::fs::File::options()
        .write(true)
        .open(entry)
        .and_then(|f| f.set_modified(std::time::SystemTime::now()));
    if let Err(e) = result {
        tracing::debug!(entry = %entry.display(), "cannot mark a cache entry as used: {e}");
    }
}

/// Notes that `origin` uses the entry `key` (in `<key>.origins`, one path per
/// line), so [`CompileCache::prune`] knows when nothing needs the entry.
/// Best effort: a lost line only makes an entry prunable earlier.
fn record_origin(dir: &Path, key: &str, origin: &Path) {
    let list = dir.join(format!("{key}.origins"));
    let Some(origin) = origin.to_str() else {
        return;
    };
    let text = std::fs::read_to_string(&list).unwrap_or_default();
    if text.lines().any(|l| l == origin) {
        return;
    }
    let updated = format!("{text}{origin}\n");
    let result = tempfile_in(dir).and_then(|mut tmp| {
        use std::io::Write;
        tmp.write_all(updated.as_bytes())?;
        tmp.persist(&list).map(drop).map_err(|e| e.error)
    });
    if let Err(e) = result {
        tracing::debug!(file = %list.display(), "cannot record a cache entry's origin: {e}");
    }
}

/// A uniquely named temporary file in `dir` (`.tmp-…`, removed if it is
/// dropped before being persisted; one left by a crash is pruned later).
fn tempfile_in(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    tempfile::Builder::new().prefix(".tmp-").tempfile_in(dir)
}

/// The default cache directory: `$XDG_CACHE_HOME/toolhost` or the platform's equivalent.
pub fn default_cache_dir() -> Option<PathBuf> {
    directories::ProjectDirs::from("", "", "toolhost").map(|d| d.cache_dir().join("components"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_bytes_under_another_engine_are_another_cache_entry() {
        let plain = Engine::default();
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let other = Engine::new(&config).unwrap();
        let bytes = b"\0asm not really a component";
        let a = CompileCache::new(&plain, None, None);
        let b = CompileCache::new(&other, None, None);
        assert_eq!(
            a.key(bytes),
            CompileCache::new(&plain, None, None).key(bytes)
        );
        assert_ne!(
            a.key(bytes),
            b.key(bytes),
            "an entry compiled for one engine is never read by another"
        );
    }
}
