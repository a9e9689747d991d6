//! Capabilities the host grants a plugin: directories, network hosts,
//! environment variables. Nothing is granted by default.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::limits::LimitOverrides;

/// What the host grants one plugin, plus its limit overrides and config values.
///
/// ```
/// use toolhost_runtime::{DirGrant, HostPattern, PluginSettings};
///
/// let mut fs = PluginSettings::default();
/// fs.dirs.push(DirGrant::read_only("."));
/// let mut http = PluginSettings::default();
/// http.hosts.push("127.0.0.1:8080".parse::<HostPattern>().unwrap());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSettings {
    /// Directories the plugin may open.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// Hosts the plugin may send HTTP requests to.
    #[serde(default)]
    pub hosts: Vec<HostPattern>,
    /// Environment variables the plugin may read: a name alone takes the value from the
    /// host's environment when the runtime starts; `NAME=value` sets it.
    #[serde(default)]
    pub env: Vec<String>,
    /// Limit overrides (they win over the manifest's).
    #[serde(default)]
    pub limits: LimitOverrides,
    /// Configuration values (they win over the manifest's defaults).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// A directory granted to a plugin. It appears in the plugin at the same absolute
/// path it has on the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The directory on the host (relative paths are resolved against the current directory).
    pub path: PathBuf,
    /// Whether the plugin may write.
    #[serde(default)]
    pub access: DirAccess,
}

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DirAccess {
    /// Read only (the default).
    #[default]
    ReadOnly,
    /// Read and write.
    ReadWrite,
}

impl DirGrant {
    /// A read-only grant of `path`.
    pub fn read_only(path: impl Into<PathBuf>) -> Self {
        DirGrant {
            path: path.into(),
            access: DirAccess::ReadOnly,
        }
    }

    /// A read-write grant of `path`.
    pub fn read_write(path: impl Into<PathBuf>) -> Self {
        DirGrant {
            path: path.into(),
            access: DirAccess::ReadWrite,
        }
    }
}

/// A network host a plugin may reach: `*`, `host`, `*.domain`, `host:port`,
/// optionally with a scheme (`https://host`). Without a port every port matches;
/// without a scheme, http and https match.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPattern {
    scheme: Option<String>,
    host: String,
    port: Option<u16>,
}

/// A host pattern that does not parse.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid host pattern `{pattern}`: {reason}")]
pub struct HostPatternError {
    pattern: String,
    reason: &'static str,
}

impl std::str::FromStr for HostPattern {
    type Err = HostPatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| HostPatternError {
            pattern: s.to_owned(),
            reason,
        };
        let (scheme, rest) = match s.split_once("://") {
            Some((scheme, rest)) => {
                let scheme = scheme.to_ascii_lowercase();
                if scheme != "http" && scheme != "https" {
                    return Err(err("scheme must be http or https"));
                }
                (Some(scheme), rest)
            }
            None => (None, s),
        };
        let rest = rest.trim_end_matches('/');
        if rest.contains('/') {
            return Err(err("a host pattern has no path"));
        }
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| err("unclosed `[`"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p.parse().map_err(|_| err("port is not a number"))?),
                None if after.is_empty() => None,
                None => return Err(err("unexpected text after `]`")),
            };
            (host.to_owned(), port)
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (
                    h.to_owned(),
                    Some(p.parse().map_err(|_| err("port is not a number"))?),
                ),
                None => (rest.to_owned(), None),
            }
        };
        if host.is_empty() {
            return Err(err("empty host"));
        }
        Ok(HostPattern {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl std::fmt::Display for HostPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.scheme {
            write!(f, "{s}://")?;
        }
        if self.host.contains(':') {
            write!(f, "[{}]", self.host)?;
        } else {
            write!(f, "{}", self.host)?;
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl Serialize for HostPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl HostPattern {
    /// Whether this pattern names the IP address `ip` itself (not a name or a wildcard).
    pub fn names_ip(&self, ip: &std::net::IpAddr) -> bool {
        self.host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|h| h == *ip)
    }

    /// Whether a request to `scheme://host:port` is allowed by this pattern.
    /// `host` is compared case-insensitively; IPv6 hosts are given without brackets.
    pub fn matches(&self, scheme: &str, host: &str, port: u16) -> bool {
        if let Some(s) = &self.scheme
            && !s.eq_ignore_ascii_case(scheme)
        {
            return false;
        }
        if let Some(p) = self.port
            && p != port
        {
            return false;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if self.host == "*" {
            return true;
        }
        if let Some(domain) = self.host.strip_prefix("*.") {
            let host = host.to_ascii_lowercase();
            return host.len() > domain.len() + 1
                && host.ends_with(domain)
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.';
        }
        self.host.eq_ignore_ascii_case(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> HostPattern {
        s.parse().unwrap()
    }

    #[test]
    fn host_and_port_must_both_match() {
        let pat = p("127.0.0.1:8080");
        assert!(pat.matches("http", "127.0.0.1", 8080));
        assert!(!pat.matches("http", "127.0.0.1", 8081));
        assert!(!pat.matches("http", "127.0.0.2", 8080));
    }

    #[test]
    fn pattern_without_port_matches_any_port_and_scheme_restricts() {
        let pat = p("https://Example.com");
        assert!(pat.matches("https", "example.COM", 443));
        assert!(pat.matches("https", "example.com", 8443));
        assert!(!pat.matches("http", "example.com", 80));
    }

    #[test]
    fn wildcard_subdomains_do_not_match_lookalikes() {
        let pat = p("*.example.com");
        assert!(pat.matches("https", "api.example.com", 443));
        assert!(!pat.matches("https", "example.com", 443));
        assert!(!pat.matches("https", "evilexample.com", 443));
    }

    #[test]
    fn ipv6_patterns_parse_and_match() {
        let pat = p("[::1]:9000");
        assert!(pat.matches("http", "[::1]", 9000));
        assert_eq!(pat.to_string(), "[::1]:9000");
    }

    #[test]
    fn malformed_patterns_are_errors() {
        for bad in ["", "ftp://x", "x:notaport", "x/y", "[::1"] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad}");
        }
    }
}
