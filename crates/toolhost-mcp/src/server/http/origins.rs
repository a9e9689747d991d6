//! The `Host` and `Origin` values the endpoint answers to: its loopback
//! names and every `--accept-host` name (DNS rebinding: any other is
//! refused), as rmcp's checks and the extras' gate take them, and the
//! check of a request's `Host` against them ([`AllowedHosts`], as rmcp
//! makes it: the extras' gate and the stateless calls' make the same).

use http::{HeaderMap, header};

/// The `Host` names accepted: loopback's, and `accepted_hosts`.
pub(super) fn own_hosts(accepted_hosts: &[String]) -> Vec<String> {
    let mut hosts = vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ];
    hosts.extend(accepted_hosts.iter().cloned());
    hosts
}

/// The browser origins that are this server's own: its loopback names on
/// the port it listens on, and every `--accept-host` name (with the port it
/// names, or else this port, and the default ports behind a proxy). A page
/// served from one of them may call `/mcp`; any other origin is refused
/// (DNS rebinding), as is another port on loopback (another local app).
pub(super) fn own_origins(port: u16, accepted_hosts: &[String]) -> Vec<String> {
    let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{port}"))
        .collect();
    for host in accepted_hosts {
        let Ok(authority) = host.trim().parse::<axum::http::uri::Authority>() else {
            tracing::warn!("--accept-host {host:?} is not a host name: no origin of it accepted");
            continue;
        };
        match authority.port_u16() {
            Some(_) => {
                origins.push(format!("http://{authority}"));
                origins.push(format!("https://{authority}"));
            }
            // Ports always written: an origin rmcp is given without one
            // matches every port.
            None => {
                origins.push(format!("http://{authority}:{port}"));
                origins.push(format!("http://{authority}:80"));
                origins.push(format!("https://{authority}:443"));
            }
        }
    }
    origins
}

/// The `Host` values a server answers to, read once: rmcp's list, each
/// entry a name (lower case, without IPv6 brackets) and the port it names.
pub(super) struct AllowedHosts {
    /// No list: every host (rmcp's reading of an empty one).
    any: bool,
    entries: Vec<(String, Option<u16>)>,
}

impl AllowedHosts {
    /// rmcp's `allowed_hosts` as it reads each entry (an empty one matches
    /// nothing; one that is no authority is a bare name).
    pub(super) fn new(allowed: &[String]) -> AllowedHosts {
        let entries = allowed
            .iter()
            .map(|entry| entry.trim())
            .filter(|entry| !entry.is_empty())
            .map(|entry| match http::uri::Authority::try_from(entry) {
                Ok(a) => (bare(a.host()), a.port_u16()),
                Err(_) => (bare(entry), None),
            })
            .collect();
        AllowedHosts {
            any: allowed.is_empty(),
            entries,
        }
    }

    /// Whether the request's `Host` (else its URI's authority) is one of
    /// them, compared as rmcp does: names without case or brackets, a port
    /// only when the entry names one. A `Host` that cannot be read is
    /// rmcp's to refuse.
    pub(super) fn allow(&self, uri: &http::Uri, headers: &HeaderMap) -> bool {
        let authority = match headers.get(header::HOST) {
            Some(host) => host
                .to_str()
                .ok()
                .and_then(|h| http::uri::Authority::try_from(h).ok()),
            None => uri.authority().cloned(),
        };
        let Some(authority) = authority else {
            return false;
        };
        let host = authority.host().trim_matches('[').trim_matches(']');
        let port = authority.port_u16();
        self.any
            || self.entries.iter().any(|(name, allowed_port)| {
                name.eq_ignore_ascii_case(host) && allowed_port.is_none_or(|p| port == Some(p))
            })
    }
}

/// A host name as compared: lower case, without IPv6 brackets.
fn bare(host: &str) -> String {
    host.trim_matches('[')
        .trim_matches(']')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_own_origins_are_loopback_on_this_port_and_each_accepted_host() {
        let origins = own_origins(
            8931,
            &[
                "mcp.example.com".to_owned(),
                "gw.example.com:8443".to_owned(),
                "not a host".to_owned(),
            ],
        );
        for own in [
            "http://localhost:8931",
            "http://127.0.0.1:8931",
            "http://[::1]:8931",
            "https://mcp.example.com:443",
            "http://mcp.example.com:80",
            "http://mcp.example.com:8931",
            "https://gw.example.com:8443",
        ] {
            assert!(origins.iter().any(|o| o == own), "{own} in {origins:?}");
        }
        assert!(!origins.iter().any(|o| o.contains("not a host")));
        assert!(
            origins.iter().all(|o| o
                .rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok())),
            "every origin names its port: {origins:?}"
        );
        assert!(
            !origins
                .iter()
                .any(|o| o.starts_with("http://localhost:") && !o.ends_with(":8931"))
        );
    }
}
