//! `cargo xtask package-check`: every library crate can be published, so
//! an embedder can depend on it from a registry. `cargo package` packs
//! each (the files a registry would get, nothing from elsewhere in the
//! repository), and instead of `cargo package`'s own verification, which
//! needs the other toolhost crates already on crates.io, the packed
//! crates are unpacked into a workspace of their own whose dependencies on
//! each other point at the unpacked copies, and built from there,
//! offline: a crate that reads a file outside its directory (`wit/`, a
//! template) fails here as it would on crates.io. The guest SDK
//! (`crates/toolhost-sdk`) goes through `cargo package` whole.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

use crate::{cargo, run};

/// What is not a library crate an embedder depends on: the command, the
/// test support, the fuzz targets and this task runner.
const NOT_LIBRARIES: [&str; 4] = [
    "toolhost-cli",
    "toolhost-test-support",
    "toolhost-fuzz",
    "xtask",
];

pub fn check(root: &Path) -> anyhow::Result<()> {
    let mut package = cargo();
    package.current_dir(root).args([
        "package",
        "--workspace",
        "--no-verify",
        "--exclude-lockfile",
        "--allow-dirty",
    ]);
    for name in NOT_LIBRARIES {
        package.args(["--exclude", name]);
    }
    run(&mut package)?;
    let packed = root.join("target/package");
    let unpacked = root.join("target/package-check");
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked)?;
    let mut members = Vec::new();
    for entry in std::fs::read_dir(&packed)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "crate") {
            continue;
        }
        // `-m`: the files dated now, not as packed (cargo packs every file
        // with one old date, which would let the check below take an
        // earlier build of other contents as fresh).
        let status = Command::new("tar")
            .arg("-xzmf")
            .arg(&path)
            .arg("-C")
            .arg(&unpacked)
            .status()
            .context("tar is needed to unpack the packed crates")?;
        anyhow::ensure!(status.success(), "tar could not unpack {}", path.display());
        let dir = path
            .file_stem()
            .and_then(|s| s.to_str())
            .context("a .crate file's name")?
            .to_owned();
        members.push(dir);
    }
    members.sort();
    anyhow::ensure!(!members.is_empty(), "cargo package packed nothing");
    let mut manifest = String::from("[workspace]\nresolver = \"3\"\nmembers = [\n");
    for dir in &members {
        manifest.push_str(&format!("  \"{dir}\",\n"));
    }
    manifest.push_str("]\n\n[patch.crates-io]\n");
    for dir in &members {
        // `toolhost-runtime-0.1.0` is the crate `toolhost-runtime`.
        let name = dir.rsplit_once('-').map_or(dir.as_str(), |(n, _)| n);
        manifest.push_str(&format!("{name} = {{ path = \"{dir}\" }}\n"));
    }
    std::fs::write(unpacked.join("Cargo.toml"), manifest)?;
    // The repository's versions of every other crate, so nothing is
    // fetched and nothing else is built.
    std::fs::copy(root.join("Cargo.lock"), unpacked.join("Cargo.lock"))?;
    run(cargo()
        .current_dir(&unpacked)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .args(["check", "--workspace", "--offline"]))
    .context("a packed crate does not build from its own files")?;
    // The guest SDK (a workspace of its own) depends on crates.io alone:
    // `cargo package`'s own verification builds it from its packed files.
    run(cargo()
        .current_dir(root.join("crates/toolhost-sdk"))
        .env("CARGO_TARGET_DIR", root.join("target"))
        .args(["package", "--allow-dirty", "--offline"]))
    .context("the SDK does not build from its packed files")
}
