//! How a plugin's results may be cached: the host's and the manifest's
//! settings (`[plugins.NAME.cache]`, a manifest's `[cache]`), and the rule
//! they resolve to for each tool when the plugin loads. The cache itself is
//! `result_cache.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::api::types::Annotations;

/// Caching of one plugin's results, as the host's settings
/// (`[plugins.NAME.cache]`, [`PluginSettings::cache`](crate::PluginSettings::cache))
/// or the plugin's manifest (`[cache]`, [`Manifest::cache`](crate::manifest::Manifest::cache))
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
/// use toolhost_runtime::cache::CacheSettings;
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

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
}
