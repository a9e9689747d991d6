//! Where a plugin comes from: a registry reference or a local file.

use std::path::PathBuf;

use oci_client::Reference;

use crate::OciError;

/// Where a plugin is installed from.
#[derive(Debug, Clone)]
pub enum Source {
    /// An OCI registry: `oci://REGISTRY/REPO:TAG`, `REGISTRY/REPO@sha256:…`.
    Registry(Reference),
    /// A component file (its `NAME.toml` beside it): a path or `file://`.
    File(PathBuf),
}

impl Source {
    /// Parses a reference: `oci://…` is a registry, `file://…`, a path that
    /// exists or one ending in `.wasm` is a file, anything else a registry
    /// reference.
    ///
    /// ```
    /// use toolhost_oci::Source;
    ///
    /// assert!(matches!(Source::parse("oci://127.0.0.1:5000/calc:1.0").unwrap(), Source::Registry(_)));
    /// assert!(matches!(Source::parse("file:///tmp/calc.wasm").unwrap(), Source::File(_)));
    /// assert!(Source::parse("oci://").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Source, OciError> {
        let invalid = |message: &str| OciError::InvalidReference {
            reference: text.to_owned(),
            message: message.to_owned(),
        };
        if let Some(path) = text.strip_prefix("file://") {
            if path.is_empty() {
                return Err(invalid("no path after file://"));
            }
            return Ok(Source::File(PathBuf::from(path)));
        }
        let explicit = text.strip_prefix("oci://");
        if explicit.is_none() {
            if text.starts_with("http://") || text.starts_with("https://") {
                return Err(invalid(
                    "plugins are installed from OCI registries (oci://REGISTRY/REPO:TAG) or files, not URLs",
                ));
            }
            let path = PathBuf::from(text);
            if path.exists()
                || path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("wasm"))
            {
                return Ok(Source::File(path));
            }
        }
        let text_ref = explicit.unwrap_or(text);
        if text_ref.is_empty() {
            return Err(invalid("no registry reference"));
        }
        let reference: Reference = text_ref.parse().map_err(|e| invalid(&format!("{e}")))?;
        if let Some(digest) = reference.digest()
            && !crate::is_sha256_digest(digest)
        {
            return Err(invalid("only sha256 digests are supported"));
        }
        Ok(Source::Registry(reference))
    }
}

impl Source {
    /// The plugin name the reference gives: a file's stem (`weather.wasm`,
    /// `weather@1.2.0.wasm`: `weather`), a registry repository's last part
    /// (`oci://host/tools/weather:1`: `weather`). `host install` installs
    /// under this name unless `--name` says another, and refuses an
    /// artifact whose own name differs, so that installing a file cannot
    /// take another plugin's name (and its grants).
    ///
    /// ```
    /// use toolhost_oci::Source;
    /// let name = |r: &str| Source::parse(r).unwrap().default_name();
    /// assert_eq!(name("plugins/weather.wasm").as_deref(), Some("weather"));
    /// assert_eq!(name("weather@1.2.0.wasm").as_deref(), Some("weather"));
    /// assert_eq!(name("oci://localhost:5000/tools/weather:1").as_deref(), Some("weather"));
    /// ```
    pub fn default_name(&self) -> Option<String> {
        let name = match self {
            Source::File(path) => path.file_stem()?.to_str()?,
            Source::Registry(r) => r.repository().rsplit('/').next()?,
        };
        let name = name.split_once('@').map_or(name, |(n, _)| n);
        (!name.is_empty()).then(|| name.to_owned())
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Registry(r) => write!(f, "oci://{}", r.whole()),
            Source::File(p) => write!(f, "file://{}", p.display()),
        }
    }
}

/// Whether a registry (`host[:port]`) is on this machine, where plain HTTP
/// cannot be intercepted on the way.
pub(crate) fn is_loopback(registry: &str) -> bool {
    let host = if let Some(rest) = registry.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        registry.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_references_keep_their_registry_repository_tag_and_digest() {
        let Source::Registry(r) = Source::parse("oci://127.0.0.1:5000/tools/calc:1.2").unwrap()
        else {
            panic!("not a registry reference")
        };
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "tools/calc");
        assert_eq!(r.tag(), Some("1.2"));
        let d = crate::sha256_digest(b"m");
        let Source::Registry(r) = Source::parse(&format!("localhost:5000/calc@{d}")).unwrap()
        else {
            panic!("not a registry reference")
        };
        assert_eq!(r.digest(), Some(d.as_str()));
    }

    #[test]
    fn files_urls_and_other_digests_are_told_apart() {
        assert!(matches!(
            Source::parse("./build/calc.wasm").unwrap(),
            Source::File(_)
        ));
        assert!(Source::parse("https://example.com/calc.wasm").is_err());
        assert!(Source::parse("oci://r.example/calc@sha512:00").is_err());
    }

    #[test]
    fn only_loopback_registries_count_as_local() {
        for local in ["127.0.0.1:5000", "localhost:80", "[::1]:5000", "127.8.0.1"] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in ["ghcr.io", "10.0.0.1:5000", "localhost.evil.com", "[::2]:1"] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }
}
