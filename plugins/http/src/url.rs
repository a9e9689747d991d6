//! Just enough URL handling for `http_get`: parse absolute http(s) URLs
//! and resolve redirect locations.

use std::fmt;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP (default port 80).
    Http,
    /// HTTP over TLS (default port 443).
    Https,
}

/// An absolute http(s) URL, split the way wasi:http wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// The scheme.
    pub scheme: Scheme,
    /// Host name or IP address, lower-cased; IPv6 addresses keep brackets.
    pub host: String,
    /// The port, when the URL gives one.
    pub port: Option<u16>,
    /// Path and query, always starting with `/` (the fragment is dropped).
    pub path_and_query: String,
}

impl Url {
    /// `host` or `host:port`, as the request's authority.
    pub fn authority(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        write!(f, "{scheme}://{}{}", self.authority(), self.path_and_query)
    }
}

/// Parses an absolute `http://` or `https://` URL. Characters that may not
/// appear in a URL (spaces, non-ASCII) are percent-encoded in the path and
/// query; the fragment is dropped.
pub fn parse(input: &str) -> Result<Url, String> {
    let s = input.trim();
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err(format!(
            "'{s}' is not an absolute URL: it must start with http:// or https://"
        ));
    };
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(format!(
                "only http and https URLs are supported, not '{other}'"
            ));
        }
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (host, port) = parse_authority(authority)?;
    let tail = tail.split('#').next().unwrap_or_default();
    let path_and_query = if tail.is_empty() {
        "/".to_string()
    } else if tail.starts_with('?') {
        format!("/{}", encode(tail))
    } else {
        encode(tail)
    };
    Ok(Url {
        scheme,
        host,
        port,
        path_and_query,
    })
}

fn parse_authority(authority: &str) -> Result<(String, Option<u16>), String> {
    if authority.contains('@') {
        return Err("URLs with credentials (user@host) are not supported".to_string());
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Err(format!("invalid IPv6 address in '{authority}'"));
        };
        if addr.is_empty()
            || !addr
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err(format!("invalid IPv6 address '[{addr}]'"));
        }
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| format!("invalid authority '{authority}'"))?,
            ),
        };
        (format!("[{}]", addr.to_ascii_lowercase()), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
            None => (authority.to_ascii_lowercase(), None),
        }
    };
    if host.is_empty() {
        return Err("the URL has no host".to_string());
    }
    if !host.is_ascii() {
        return Err(format!(
            "'{host}': internationalized host names are not supported; use the xn-- (punycode) form"
        ));
    }
    if !host.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    {
        return Err(format!("invalid host name '{host}'"));
    }
    let port = match port {
        None | Some("") => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("invalid port '{p}'")),
        },
    };
    Ok((host, port))
}

/// Percent-encodes the bytes that may not appear in a URL as they are.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_graphic()
            && !matches!(
                b,
                b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
            )
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Resolves a redirect's `Location` against the URL that was fetched.
pub fn join(base: &Url, location: &str) -> Result<Url, String> {
    let location = location.trim();
    if location.contains("://") {
        return parse(location);
    }
    if let Some(rest) = location.strip_prefix("//") {
        let scheme = match base.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        return parse(&format!("{scheme}://{rest}"));
    }
    let path_and_query = if location.starts_with('/') {
        location.to_string()
    } else if location.starts_with('?') {
        let path = base.path_and_query.split('?').next().unwrap_or("/");
        format!("{path}{location}")
    } else {
        let path = base.path_and_query.split('?').next().unwrap_or("/");
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        format!("{dir}{location}")
    };
    let tail = path_and_query.split('#').next().unwrap_or_default();
    Ok(Url {
        path_and_query: encode(if tail.is_empty() { "/" } else { tail }),
        ..base.clone()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_common_urls() {
        let u = url("https://Example.COM/a/b?x=1&y=2#frag");
        assert_eq!(u.scheme, Scheme::Https);
        assert_eq!(u.host, "example.com");
        assert_eq!(u.port, None);
        assert_eq!(u.path_and_query, "/a/b?x=1&y=2");
        assert_eq!(u.to_string(), "https://example.com/a/b?x=1&y=2");

        let u = url("http://127.0.0.1:8080");
        assert_eq!(
            (u.host.as_str(), u.port, u.path_and_query.as_str()),
            ("127.0.0.1", Some(8080), "/")
        );
        assert_eq!(u.authority(), "127.0.0.1:8080");

        let u = url("HTTP://[::1]:3000?q");
        assert_eq!((u.host.as_str(), u.port), ("[::1]", Some(3000)));
        assert_eq!(u.path_and_query, "/?q");
        assert_eq!(url("http://[::1]").authority(), "[::1]");
        assert_eq!(url("  http://a.b/  ").host, "a.b");
        assert_eq!(url("http://host:/x").port, None);
    }

    #[test]
    fn encodes_unsafe_characters() {
        assert_eq!(
            url("http://h/a b/é?q=a b").path_and_query,
            "/a%20b/%C3%A9?q=a%20b"
        );
        assert_eq!(url("http://h/%20ok").path_and_query, "/%20ok");
    }

    #[test]
    fn rejects_what_it_cannot_fetch() {
        let err = |s: &str| parse(s).unwrap_err();
        assert!(err("example.com").contains("must start with http:// or https://"));
        assert!(err("ftp://example.com").contains("not 'ftp'"));
        assert!(err("file:///etc/passwd").contains("not 'file'"));
        assert!(err("http://user:pw@host/").contains("credentials"));
        assert!(err("http:///path").contains("no host"));
        assert!(err("http://host:99999/").contains("invalid port '99999'"));
        assert!(err("http://host:0/").contains("invalid port '0'"));
        assert!(err("http://host:abc/").contains("invalid port"));
        assert!(err("http://bücher.de/").contains("punycode"));
        assert!(err("http://a b/").contains("invalid host name"));
        assert!(err("http://[zz]/").contains("invalid IPv6"));
        assert!(err("http://[::1/").contains("invalid IPv6"));
    }

    #[test]
    fn joins_redirect_locations() {
        let base = url("https://example.com/docs/guide/page?x=1");
        let j = |l: &str| join(&base, l).unwrap().to_string();
        assert_eq!(j("http://other.org/x"), "http://other.org/x");
        assert_eq!(j("//cdn.example.com/a"), "https://cdn.example.com/a");
        assert_eq!(j("/root"), "https://example.com/root");
        assert_eq!(j("next"), "https://example.com/docs/guide/next");
        assert_eq!(j("?y=2"), "https://example.com/docs/guide/page?y=2");
        assert_eq!(j("/a#frag"), "https://example.com/a");
        assert!(join(&base, "ftp://x/").is_err());
    }
}
