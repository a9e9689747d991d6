//! `host publish`, `host install` and `host keygen`: plugins through OCI
//! registries (toolhost-oci), verified, recorded in the lock file.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use toolhost_oci::{
    Credentials, FetchOptions, PublicKey, PublishOptions, SigningKey, Source, fetch, publish,
};

use crate::args::{Global, RegistryCommand};
use crate::stdout::outln;

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
            // A push to a far registry takes a while: say what is going on.
            eprintln!("pushing {} to {reference}…", file.display());
            let published = publish(file, &reference, &options).await?;
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
        RegistryCommand::Install {
            reference,
            keys,
            require_signature,
            name,
            replace,
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
            let source = Source::parse(reference)?;
            // The name comes from the reference (or `--name`), never from
            // the artifact alone: `weather.wasm` saying `name = "fs"` is
            // refused rather than installed over fs.
            let expected = name.clone().or_else(|| source.default_name());
            let options = FetchOptions {
                insecure: *insecure,
                credentials: credentials(),
                trusted_keys: trusted,
                require_signature: *require_signature || file.require_signed,
                expected_name: expected,
                ..FetchOptions::default()
            };
            eprintln!("fetching {reference} and verifying it…");
            let fetched = fetch(&source, &options, &dir).await?;
            let lock = crate::settings::lock_file(global, &file);
            let replacing = check_replace(&dir, &lock, &fetched, *replace)?;
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
    outln!("private key {} (keep it secret)", private.display())?;
    outln!("public key  {}", public.display())?;
    outln!("fingerprint {}", key.public_key().fingerprint())?;
    Ok(())
}
