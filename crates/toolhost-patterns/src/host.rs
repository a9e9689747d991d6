//! Host patterns: which network hosts a plugin may reach, and which URLs a
//! policy rule covers.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A network host: `*`, `host`, `*.domain` (any subdomain of `domain`, not
/// `domain` itself), then an optional `:port`, optionally preceded by
/// `http://` or `https://`. Without a port every port matches; without a
/// scheme, http and https match. Hosts are compared as the URL standard
/// reads them (IDNA, lowercase, IPv4 in any notation); `*` is allowed only
/// as the whole host or as a leading `*.` label.
///
/// One syntax for the whole host: plugin grants (`--allow-host`), the
/// HTTP allowlist every request of a plugin passes, and policy rules on URL
/// arguments (`args.url = { host = "…" }`).
///
/// ```
/// use toolhost_patterns::HostPattern;
///
/// let api: HostPattern = "*.example.com".parse().unwrap();
/// assert!(api.matches("https", "api.example.com", 443));
/// assert!(!api.matches("https", "example.com", 443));
/// assert!(api.matches_url("https://user@a.example.com/x"));
/// assert!(!api.matches_url("https://a.example.com@evil.net/"));
/// assert!("ex*ample.com".parse::<HostPattern>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPattern {
    scheme: Option<Box<str>>,
    host: HostKind,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HostKind {
    Any,
    /// Exactly this host (lowercase ASCII; IPv6 without brackets).
    Exact(Box<str>),
    /// Any subdomain of this domain (lowercase ASCII, without the leading dot).
    Subdomain(Box<str>),
}

/// A host pattern that does not parse, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid host pattern `{pattern}`: {reason}")]
pub struct HostPatternError {
    pattern: String,
    reason: String,
}

impl FromStr for HostPattern {
    type Err = HostPatternError;

    fn from_str(pattern: &str) -> Result<Self, Self::Err> {
        HostPattern::new(pattern)
    }
}

impl HostPattern {
    /// Parses `pattern`.
    pub fn new(pattern: &str) -> Result<Self, HostPatternError> {
        let err = |why: &str| HostPatternError {
            pattern: pattern.to_owned(),
            reason: why.to_owned(),
        };
        let (scheme, rest) = match pattern.split_once("://") {
            Some((scheme, rest)) => {
                if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
                    return Err(err("scheme must be http or https"));
                }
                (Some(scheme.to_ascii_lowercase().into_boxed_str()), rest)
            }
            None => (None, pattern),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(err("a host pattern has no user, path, query or fragment"));
        }
        let (host, port) = if rest.starts_with('[') {
            let end = rest.find(']').ok_or_else(|| err("unclosed `[`"))?;
            let (host, after) = rest.split_at(end + 1);
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(err("unexpected text after `]`")),
            };
            (host, port)
        } else {
            match rest.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (rest, None),
            }
        };
        let port = match port {
            Some(p) => Some(p.parse::<u16>().map_err(|_| err("port is not a number"))?),
            None => None,
        };
        if host.is_empty() {
            return Err(err("empty host"));
        }
        let kind = if host == "*" {
            HostKind::Any
        } else if let Some(domain) = host.strip_prefix("*.") {
            if domain.contains('*') {
                return Err(err("`*` only as the whole host or a leading `*.`"));
            }
            match url::Host::parse(domain) {
                Ok(url::Host::Domain(d)) => HostKind::Subdomain(trim_dot(&d).into()),
                Ok(_) => return Err(err("`*.` needs a domain name, not an IP address")),
                Err(e) => return Err(err(&e.to_string())),
            }
        } else {
            if host.contains('*') {
                return Err(err("`*` only as the whole host or a leading `*.`"));
            }
            match url::Host::parse(host) {
                Ok(h) => HostKind::Exact(
                    unbracket(trim_dot(&h.to_string()))
                        .to_ascii_lowercase()
                        .into(),
                ),
                Err(e) => return Err(err(&e.to_string())),
            }
        };
        Ok(HostPattern {
            scheme,
            host: kind,
            port,
        })
    }

    /// Whether the URL in `value` is a request this pattern covers. A value that is not
    /// a URL with a host does not match; a value without a scheme (`example.com:8080/x`)
    /// is read as `http://...`. The URL's real host counts, so
    /// `http://example.com@evil.net/` is a request to `evil.net`.
    pub fn matches_url(&self, value: &str) -> bool {
        let Some(url) = parse_url(value) else {
            return false;
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return false;
        };
        self.matches(url.scheme(), host, port)
    }

    /// Whether a request to `scheme://host:port` is covered by this pattern.
    /// `host` is compared case-insensitively; an IPv6 host may come with or
    /// without brackets.
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
        self.covers_host(unbracket(trim_dot(host)))
    }

    /// Whether this pattern's host part covers `host` (lowercase or not,
    /// without brackets or a trailing dot).
    fn covers_host(&self, host: &str) -> bool {
        match &self.host {
            HostKind::Any => true,
            HostKind::Exact(h) => h.eq_ignore_ascii_case(host),
            HostKind::Subdomain(d) => {
                host.len() > d.len() + 1
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.'
                    && host[host.len() - d.len()..].eq_ignore_ascii_case(d)
            }
        }
    }
}

impl HostPattern {
    /// The pattern of exactly the host a URL names: with its scheme and
    /// port when `exact`, or the host alone (any scheme, any port). `None`
    /// when `value` is not a URL with a host. The URL's real host counts
    /// (`http://example.com@evil.net/` names `evil.net`).
    ///
    /// ```
    /// use toolhost_patterns::HostPattern;
    ///
    /// let one = HostPattern::of_url("https://api.example.com/v1", true).unwrap();
    /// assert_eq!(one.to_string(), "https://api.example.com:443");
    /// assert!(!one.matches("https", "api.example.com", 8443));
    /// let host = HostPattern::of_url("http://a.example.com@evil.net:81/", false).unwrap();
    /// assert_eq!(host.to_string(), "evil.net");
    /// assert!(HostPattern::of_url("not a url", false).is_none());
    /// ```
    pub fn of_url(value: &str, exact: bool) -> Option<HostPattern> {
        let url = parse_url(value)?;
        let host = unbracket(trim_dot(url.host_str()?)).to_ascii_lowercase();
        if host.is_empty() {
            return None;
        }
        let port = url.port_or_known_default()?;
        Some(HostPattern {
            scheme: exact.then(|| url.scheme().into()),
            host: HostKind::Exact(host.into()),
            port: exact.then_some(port),
        })
    }
}

impl HostPattern {
    /// The IP address this pattern names, when its host is one (not a
    /// name or a wildcard).
    pub fn ip(&self) -> Option<IpAddr> {
        match &self.host {
            HostKind::Exact(h) => h.parse().ok(),
            _ => None,
        }
    }

    /// Whether this pattern names the IP address `ip` itself (not a name or a wildcard).
    pub fn names_ip(&self, ip: &IpAddr) -> bool {
        match &self.host {
            HostKind::Exact(h) => h.parse::<IpAddr>().is_ok_and(|h| h == *ip),
            _ => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = &self.scheme {
            write!(f, "{s}://")?;
        }
        match &self.host {
            HostKind::Any => f.write_str("*")?,
            HostKind::Exact(h) if h.contains(':') => write!(f, "[{h}]")?,
            HostKind::Exact(h) => f.write_str(h)?,
            HostKind::Subdomain(d) => write!(f, "*.{d}")?,
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

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

fn trim_dot(host: &str) -> &str {
    host.strip_suffix('.').unwrap_or(host)
}

fn parse_url(value: &str) -> Option<url::Url> {
    let has_host = |u: &url::Url| u.host_str().is_some_and(|h| !h.is_empty());
    let without_scheme = match url::Url::parse(value) {
        Ok(u) if has_host(&u) => return Some(u),
        // `example.com:8080/x` and `localhost:3000` parse with the host as the scheme.
        Ok(u) => u.scheme().contains('.') || u.scheme() == "localhost",
        Err(e) => e == url::ParseError::RelativeUrlWithoutBase,
    };
    if !without_scheme {
        return None;
    }
    url::Url::parse(&format!("http://{value}"))
        .ok()
        .filter(has_host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(p: &str) -> HostPattern {
        HostPattern::new(p).unwrap()
    }

    #[test]
    fn subdomain_pattern_matches_subdomains_not_lookalikes() {
        let p = host("*.example.com");
        assert!(p.matches_url("https://a.example.com/x"));
        assert!(p.matches_url("https://a.b.example.com"));
        assert!(p.matches_url("http://A.Example.COM."));
        assert!(!p.matches_url("https://example.com/"));
        assert!(!p.matches_url("https://example.com.evil.net/"));
        assert!(!p.matches_url("https://badexample.com/"));
        assert!(!p.matches_url("https://evil.net/?q=a.example.com"));
        assert!(!p.matches_url("https://evil.net/a.example.com"));
    }

    #[test]
    fn host_pattern_uses_the_real_host_not_userinfo() {
        let example = host("example.com");
        assert!(example.matches_url("http://example.com/"));
        assert!(!example.matches_url("http://example.com@evil.net/"));
        assert!(!example.matches_url("http://example.com:80@evil.net/"));
        assert!(!example.matches_url("http://evil.net\\@example.com/"));
        assert!(host("evil.net").matches_url("http://example.com@evil.net/"));
        assert!(host("*.example.com").matches_url("http://user:pw@a.example.com/"));
    }

    #[test]
    fn host_pattern_ports_and_schemes() {
        let p = host("example.com:8080");
        assert!(p.matches_url("http://example.com:8080/"));
        assert!(!p.matches_url("http://example.com/"));
        assert!(!p.matches_url("http://example.com:8081/"));
        let https = host("example.com:443");
        assert!(
            https.matches_url("https://example.com/"),
            "default port counts"
        );
        assert!(!https.matches_url("http://example.com/"));
        let any = host("example.com");
        assert!(any.matches_url("http://example.com:9999/"));
        let s = host("https://example.com");
        assert!(s.matches_url("https://example.com/"));
        assert!(!s.matches_url("http://example.com/"));
        assert!(host("*:443").matches_url("https://anything.net/"));
        assert!(!host("*:443").matches_url("http://anything.net/"));
    }

    #[test]
    fn host_pattern_reads_scheme_less_values_and_ips() {
        let p = host("example.com:8080");
        assert!(p.matches_url("example.com:8080/x"));
        assert!(host("example.com").matches_url("example.com/x"));
        assert!(host("localhost:3000").matches_url("localhost:3000"));
        assert!(host("evil.net").matches_url("user@evil.net/x"));
        assert!(host("127.0.0.1").matches_url("http://0x7f.1/"));
        assert!(host("[::1]:8080").matches_url("http://[::1]:8080/"));
        assert!(!host("example.com").matches_url("not a url"));
        assert!(!host("example.com").matches_url("mailto:x@example.com"));
        assert!(!host("*").matches_url(""));
    }

    #[test]
    fn bad_host_patterns_are_rejected() {
        for bad in [
            "",
            "exa*mple.com",
            "*.*.com",
            "example.com/path",
            "user@example.com",
            "example.com:http",
            "[::1",
            "*.127.0.0.1",
            "exa mple.com",
            "1x://example.com",
        ] {
            assert!(HostPattern::new(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn host_and_port_must_both_match() {
        let pat = host("127.0.0.1:8080");
        assert!(pat.matches("http", "127.0.0.1", 8080));
        assert!(!pat.matches("http", "127.0.0.1", 8081));
        assert!(!pat.matches("http", "127.0.0.2", 8080));
    }

    #[test]
    fn pattern_without_port_matches_any_port_and_scheme_restricts() {
        let pat = host("https://Example.com");
        assert!(pat.matches("https", "example.COM", 443));
        assert!(pat.matches("https", "example.com", 8443));
        assert!(!pat.matches("http", "example.com", 80));
    }

    #[test]
    fn wildcard_subdomains_do_not_match_lookalikes() {
        let pat = host("*.example.com");
        assert!(pat.matches("https", "api.example.com", 443));
        assert!(!pat.matches("https", "example.com", 443));
        assert!(!pat.matches("https", "evilexample.com", 443));
    }

    #[test]
    fn ipv6_patterns_parse_and_match() {
        let pat = host("[::1]:9000");
        assert!(pat.matches("http", "[::1]", 9000));
        assert!(pat.matches("http", "::1", 9000));
        assert!(pat.names_ip(&"::1".parse().unwrap()));
        assert_eq!(pat.to_string(), "[::1]:9000");
    }

    #[test]
    fn malformed_patterns_are_errors() {
        for bad in ["", "ftp://x", "x:notaport", "x/y", "[::1"] {
            assert!(bad.parse::<HostPattern>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_star_inside_a_label_is_refused_with_the_rule() {
        let e = "ex*ample.com".parse::<HostPattern>().unwrap_err();
        assert!(
            e.to_string()
                .contains("`*` only as the whole host or a leading `*.`"),
            "{e}"
        );
    }

    #[test]
    fn patterns_print_as_they_parse() {
        for p in [
            "*",
            "example.com",
            "*.example.com:8443",
            "https://api.example.com",
            "127.0.0.1:8080",
        ] {
            assert_eq!(host(p).to_string(), p);
            assert_eq!(host(p).to_string().parse::<HostPattern>().unwrap(), host(p));
        }
        assert_eq!(host("EXAMPLE.com.").to_string(), "example.com");
    }

    #[test]
    fn names_ip_only_for_an_exact_ip() {
        let ip = "127.0.0.1".parse().unwrap();
        assert!(host("127.0.0.1:8080").names_ip(&ip));
        assert!(!host("localhost").names_ip(&ip));
        assert!(!host("*").names_ip(&ip));
    }
}
