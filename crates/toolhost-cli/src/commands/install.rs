//! `host install REFERENCE`: a plugin from an OCI registry (or a file)
//! into the first plugins directory, verified, and recorded in the lock
//! file; refused when it would move a name (and its grants) to other code.
//! Loads no plugins.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Parser;
use toolhost_oci::{FetchOptions, PublicKey, Source, fetch};

use super::HostCommand;
use crate::shared_flags::{Global, Shows};
use crate::stdout::outln;
use crate::{registry, settings, setup};

/// Install a plugin from an OCI registry (`oci://REGISTRY/REPO:TAG`,
/// `REGISTRY/REPO@sha256:…`) or a file into the first plugins directory,
/// verified, and record it in the lock file.
#[derive(Debug, Parser)]
#[command(name = "install")]
pub struct Install {
    /// `oci://REGISTRY/REPO:TAG`, `REGISTRY/REPO@sha256:…`, a path or `file://PATH`.
    reference: String,
    /// A trusted public key (PEM); adds to the config file's `trusted-keys`. Repeatable.
    #[arg(long = "key", value_name = "PUBLIC.pem")]
    keys: Vec<PathBuf>,
    /// Refuse the plugin unless a trusted key signed it (config: `require-signed = true`).
    #[arg(long)]
    require_signature: bool,
    /// The name to install it under; the artifact's own name must be
    /// this. Default: the reference's (the file's stem, the
    /// repository's last part).
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Replace a plugin of that name installed or trusted as other code
    /// (another digest, source or signer); its grants then apply to the
    /// new code. Without it, such an install is refused.
    #[arg(long)]
    replace: bool,
    /// Plain HTTP to a registry that is not on loopback.
    #[arg(long)]
    insecure: bool,
}

impl HostCommand for Install {
    const SHOWS: Shows = Shows::Only {
        headings: &[],
        flags: &["plugins", "config", "lock"],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        setup::tokio()?.block_on(self.install(global))
    }
}

impl Install {
    async fn install(&self, global: &Global) -> anyhow::Result<u8> {
        let file = settings::config_file(global)?;
        let dir = settings::primary_plugins_dir(global, &file)
            .context(
                "no plugins directory to install into: give one with --plugins DIR (or plugins-dirs in the config file)",
            )?
            .to_owned();
        if dir.extension().is_some_and(|e| e == "wasm") {
            bail!(
                "{} is a plugin file; install into a directory (--plugins DIR)",
                dir.display()
            );
        }
        let mut trusted = Vec::new();
        for path in self.keys.iter().chain(&file.trusted_keys) {
            trusted.push(PublicKey::from_file(path)?);
        }
        let source = Source::parse(&self.reference)?;
        // The name comes from the reference (or `--name`), never from
        // the artifact alone: `weather.wasm` saying `name = "fs"` is
        // refused rather than installed over fs.
        let expected = self.name.clone().or_else(|| source.default_name());
        let options = FetchOptions {
            insecure: self.insecure,
            credentials: registry::credentials(),
            trusted_keys: trusted,
            require_signature: self.require_signature || file.require_signed,
            expected_name: expected,
            ..FetchOptions::default()
        };
        eprintln!("fetching {} and verifying it…", self.reference);
        let fetched = fetch(&source, &options, &dir).await?;
        let lock = settings::lock_file(global, &file);
        let replacing = check_replace(&dir, &lock, &fetched, self.replace)?;
        let record = toolhost_runtime::lockfile::InstallRecord {
            name: fetched.name.clone(),
            digest: fetched.digest.clone(),
            version: fetched.version.as_ref().map(ToString::to_string),
            source: fetched.source.clone(),
            signer: fetched.signer.clone(),
        };
        let installed = fetched.install(&dir)?;
        toolhost_runtime::lockfile::record_install(&lock, &record)?;
        outln!(
            "installed {}{} into {}",
            record.name,
            record
                .version
                .as_deref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default(),
            installed.wasm.display()
        )?;
        if let Some(skills) = &installed.skills {
            outln!("with its skills in {}", skills.display())?;
        }
        outln!("digest {} from {}", record.digest, record.source)?;
        match &record.signer {
            Some(s) => outln!("signed by {s}")?,
            None => outln!("not verified by a signature")?,
        }
        outln!(
            "recorded in {}: grants given to `{}` apply to this code",
            lock.display(),
            record.name
        )?;
        if replacing {
            outln!(
                "REPLACED: `{}` was other code before (above); its grants now apply to this one",
                record.name
            )?;
        }
        Ok(0)
    }
}

/// What is known of plugin `name` before an install: its lock entry and
/// the component and manifest now in the plugins directory.
struct Present {
    entry: Option<toolhost_runtime::lockfile::LockEntry>,
    digest: Option<String>,
    manifest: Option<toolhost_runtime::manifest::Manifest>,
}

/// Checks whether installing `fetched` into `dir` would move its name (and
/// the grants given to it) to other code: a lock entry with another digest,
/// source or signer, or a component of that name with another digest.
/// Refused unless `replace`, naming the old and the new side by side;
/// returns whether other code is replaced.
fn check_replace(
    dir: &Path,
    lock: &Path,
    fetched: &toolhost_oci::Fetched,
    replace: bool,
) -> anyhow::Result<bool> {
    let name = &fetched.name;
    let wasm = dir.join(format!("{name}.wasm"));
    let present = Present {
        entry: toolhost_runtime::lockfile::lock_entry(lock, name)?,
        digest: std::fs::read(&wasm)
            .ok()
            .map(|b| toolhost_runtime::lockfile::digest_of(&b)),
        manifest: toolhost_runtime::manifest::Manifest::load_for(&wasm).ok(),
    };
    let other_entry = present.entry.as_ref().is_some_and(|e| {
        e.digest != fetched.digest
            || e.source.as_deref().is_some_and(|s| s != fetched.source)
            || e.signer != fetched.signer
    });
    let other_file = present
        .digest
        .as_ref()
        .is_some_and(|d| *d != fetched.digest);
    if !(other_entry || other_file) {
        return Ok(false);
    }
    let new_manifest = fetched
        .manifest_text()
        .and_then(|t| toolhost_runtime::manifest::Manifest::parse(t, Path::new("new.toml")).ok());
    let or_none = |v: Option<&str>| v.unwrap_or("none").to_owned();
    let entry = present.entry.as_ref();
    let rows = [
        (
            "digest",
            or_none(
                entry
                    .map(|e| e.digest.as_str())
                    .or(present.digest.as_deref()),
            ),
            fetched.digest.clone(),
        ),
        (
            "version",
            or_none(
                entry
                    .and_then(|e| e.version.clone())
                    .or_else(|| {
                        present
                            .manifest
                            .as_ref()?
                            .version
                            .as_ref()
                            .map(ToString::to_string)
                    })
                    .as_deref(),
            ),
            or_none(fetched.version.as_ref().map(ToString::to_string).as_deref()),
        ),
        (
            "source",
            or_none(entry.and_then(|e| e.source.as_deref())),
            fetched.source.clone(),
        ),
        (
            "signer",
            or_none(entry.and_then(|e| e.signer.as_deref())),
            or_none(fetched.signer.as_deref()),
        ),
        (
            "requests",
            present
                .manifest
                .as_ref()
                .map_or_else(|| "none".to_owned(), |m| m.capabilities.to_string()),
            new_manifest
                .as_ref()
                .map_or_else(|| "none".to_owned(), |m| m.capabilities.to_string()),
        ),
    ];
    let mut table = String::new();
    for (what, old, new) in &rows {
        table.push_str(&format!("  {what:<9} now: {old}\n  {:<9} new: {new}\n", ""));
    }
    if !replace {
        bail!(
            "`{name}` is already installed or trusted as other code, and its grants are given \
             to that code:\n{table}install with --replace to put the new code in its place \
             (the grants then apply to it), or under another name with --name"
        );
    }
    eprintln!("replacing `{name}`: its grants move to the new code\n{table}");
    Ok(true)
}
