//! `host publish FILE REFERENCE`: pushes a plugin to an OCI registry as a
//! Wasm OCI artifact, signed with `--key`. Loads no plugins.

use std::path::PathBuf;

use anyhow::bail;
use clap::Parser;
use toolhost_oci::{PublishOptions, SigningKey, Source, publish};

use super::HostCommand;
use crate::shared_flags::{Global, Shows};
use crate::stdout::outln;
use crate::{registry, setup};

/// Push a plugin (FILE.wasm and the NAME.toml beside it) to an OCI
/// registry as a Wasm OCI artifact; with --key, sign it (cosign format).
#[derive(Debug, Parser)]
#[command(name = "publish")]
pub struct Publish {
    /// The component file.
    file: PathBuf,
    /// Where to push: `oci://REGISTRY/REPO:TAG` or `REGISTRY/REPO:TAG`.
    reference: String,
    /// Sign the pushed manifest with this private key (P-256, PEM; see `host keygen`).
    #[arg(long, value_name = "PRIVATE.pem")]
    key: Option<PathBuf>,
    /// Plain HTTP to a registry that is not on loopback.
    #[arg(long)]
    insecure: bool,
}

impl HostCommand for Publish {
    const SHOWS: Shows = Shows::Only {
        headings: &[],
        flags: &["config"],
    };

    fn exec(self, _: &Global) -> anyhow::Result<u8> {
        setup::tokio()?.block_on(self.push())
    }
}

impl Publish {
    async fn push(&self) -> anyhow::Result<u8> {
        let Source::Registry(reference) = Source::parse(&self.reference)? else {
            bail!(
                "`{}` is not a registry reference (oci://REGISTRY/REPO:TAG)",
                self.reference
            );
        };
        let key = self.key.as_deref().map(SigningKey::from_file).transpose()?;
        let options = PublishOptions {
            insecure: self.insecure,
            credentials: registry::credentials(),
            key,
        };
        // A push to a far registry takes a while: say what is going on.
        eprintln!("pushing {} to {reference}…", self.file.display());
        let published = publish(&self.file, &reference, &options).await?;
        outln!(
            "published {}{} as {}",
            published.name,
            published
                .version
                .as_ref()
                .map(|v| format!(" {v}"))
                .unwrap_or_default(),
            published.reference
        )?;
        outln!("component digest {}", published.digest)?;
        match &published.signer {
            Some(s) => outln!("signed by {s}")?,
            None => outln!("unsigned (sign with --key PRIVATE.pem)")?,
        }
        Ok(0)
    }
}
