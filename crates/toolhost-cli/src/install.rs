//! `host publish`, `host install` and `host keygen`: plugins through OCI
//! registries (toolhost-oci), verified, recorded in the lock file.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Subcommand;
use toolhost_oci::{
    Credentials, FetchOptions, PublicKey, PublishOptions, SigningKey, Source, fetch, publish,
};

use crate::args::Global;

/// The registry commands (flattened into `host`'s commands).
#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Push a plugin (FILE.wasm and the NAME.toml beside it) to an OCI
    /// registry as a Wasm OCI artifact; with --key, sign it (cosign format).
    Publish {
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
    },
    /// Install a plugin from an OCI registry (`oci://REGISTRY/REPO:TAG`,
    /// `REGISTRY/REPO@sha256:…`) or a file into the first plugins directory,
    /// verified, and record it in the lock file.
    Install {
        /// `oci://REGISTRY/REPO:TAG`, `REGISTRY/REPO@sha256:…`, a path or `file://PATH`.
        reference: String,
        /// A trusted public key (PEM); adds to the config file's `trusted-keys`. Repeatable.
        #[arg(long = "key", value_name = "PUBLIC.pem")]
        keys: Vec<PathBuf>,
        /// Refuse the plugin unless a trusted key signed it (config: `require-signed = true`).
        #[arg(long)]
        require_signature: bool,
        /// The name the plugin must have.
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Plain HTTP to a registry that is not on loopback.
        #[arg(long)]
        insecure: bool,
    },
    /// Create a key pair that signs plugins: PREFIX.key (private, PKCS#8
    /// PEM, readable by you only) and PREFIX.pub (public, PEM).
    Keygen {
        /// Path prefix of the two files.
        #[arg(default_value = "toolhost")]
        prefix: PathBuf,
    },
}

/// Registry credentials from `TOOLHOST_REGISTRY_USERNAME` and
/// `TOOLHOST_REGISTRY_PASSWORD`; anonymous without them.
fn credentials() -> Option<Credentials> {
    let username = std::env::var("TOOLHOST_REGISTRY_USERNAME").ok()?;
    let password = std::env::var("TOOLHOST_REGISTRY_PASSWORD").unwrap_or_default();
    Some(Credentials { username, password })
}

/// Runs one registry command.
pub async fn run(global: &Global, command: &RegistryCommand) -> anyhow::Result<u8> {
    match command {
        RegistryCommand::Publish {
            file,
            reference,
            key,
            insecure,
        } => {
            let Source::Registry(reference) = Source::parse(reference)? else {
                bail!("`{reference}` is not a registry reference (oci://REGISTRY/REPO:TAG)");
            };
            let key = key.as_deref().map(SigningKey::from_file).transpose()?;
            let options = PublishOptions {
                insecure: *insecure,
                credentials: credentials(),
                key,
            };
            let published = publish(file, &reference, &options).await?;
            println!(
                "published {}{} as {}",
                published.name,
                published
                    .version
                    .as_ref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                published.reference
            );
            println!("component digest {}", published.digest);
            match &published.signer {
                Some(s) => println!("signed by {s}"),
                None => println!("unsigned (sign with --key PRIVATE.pem)"),
            }
            Ok(0)
        }
        RegistryCommand::Install {
            reference,
            keys,
            require_signature,
            name,
            insecure,
        } => {
            let file = crate::settings::config_file(global)?;
            let dir = crate::settings::primary_plugins_dir(global, &file)
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
            for path in keys.iter().chain(&file.trusted_keys) {
                trusted.push(PublicKey::from_file(path)?);
            }
            let options = FetchOptions {
                insecure: *insecure,
                credentials: credentials(),
                trusted_keys: trusted,
                require_signature: *require_signature || file.require_signed,
                expected_name: name.clone(),
                ..FetchOptions::default()
            };
            let source = Source::parse(reference)?;
            let fetched = fetch(&source, &options, &dir).await?;
            let record = toolhost_runtime::InstallRecord {
                name: fetched.name.clone(),
                digest: fetched.digest.clone(),
                version: fetched.version.as_ref().map(ToString::to_string),
                source: fetched.source.clone(),
                signer: fetched.signer.clone(),
            };
            let installed = fetched.install(&dir)?;
            let lock = crate::settings::lock_file(global, &file);
            toolhost_runtime::record_install(&lock, &record)?;
            println!(
                "installed {}{} into {}",
                record.name,
                record
                    .version
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                installed.wasm.display()
            );
            println!("digest {} from {}", record.digest, record.source);
            match &record.signer {
                Some(s) => println!("signed by {s}"),
                None => println!("not verified by a signature"),
            }
            println!(
                "recorded in {}: grants given to `{}` apply to this code",
                lock.display(),
                record.name
            );
            Ok(0)
        }
        RegistryCommand::Keygen { prefix } => {
            keygen(prefix)?;
            Ok(0)
        }
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
    println!("private key {} (keep it secret)", private.display());
    println!("public key  {}", public.display());
    println!("fingerprint {}", key.public_key().fingerprint());
    Ok(())
}
