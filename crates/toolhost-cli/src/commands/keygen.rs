//! `host keygen [PREFIX]`: a key pair that signs plugins. Loads nothing.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Parser;
use toolhost_oci::SigningKey;

use super::HostCommand;
use crate::exit;
use crate::shared_flags::{Global, Shows};
use crate::stdout::outln;

/// Create a key pair that signs plugins: PREFIX.key (private, PKCS#8
/// PEM, readable by you only) and PREFIX.pub (public, PEM).
#[derive(Debug, Parser)]
#[command(name = "keygen")]
pub struct Keygen {
    /// Path prefix of the two files.
    #[arg(default_value = "toolhost")]
    prefix: PathBuf,
}

impl HostCommand for Keygen {
    const SHOWS: Shows = Shows::NONE;

    fn exec(self, _: &Global) -> anyhow::Result<u8> {
        keygen(&self.prefix)?;
        Ok(exit::OK)
    }
}

/// Writes PREFIX.key (mode 0600) and PREFIX.pub; refuses to overwrite.
fn keygen(prefix: &Path) -> anyhow::Result<()> {
    let with = |ext: &str| {
        let mut name = prefix.as_os_str().to_owned();
        name.push(ext);
        PathBuf::from(name)
    };
    let (private, public) = (with(".key"), with(".pub"));
    for p in [&private, &public] {
        if p.exists() {
            bail!("{} exists; not overwriting a key", p.display());
        }
    }
    let key = SigningKey::generate()?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&private)
        .with_context(|| format!("creating {}", private.display()))?;
    file.write_all(key.to_pem()?.as_bytes())?;
    std::fs::write(&public, key.public_key().to_pem()?)
        .with_context(|| format!("writing {}", public.display()))?;
    outln!("private key {} (keep it secret)", private.display())?;
    outln!("public key  {}", public.display())?;
    outln!("fingerprint {}", key.public_key().fingerprint())?;
    Ok(())
}
