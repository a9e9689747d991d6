//! `cargo xtask dist`: toolhost packaged the way MCP servers are installed,
//! from the release binary of this machine's platform, into `target/dist/`:
//!
//! - a Python wheel holding only the binary (as maturin's `bin` bindings
//!   make: `toolhost-VERSION.data/scripts/toolhost`), so that
//!   `uvx toolhost …` and `pipx install toolhost` work;
//! - two npm packages in the layout esbuild and biome use: `toolhost`, a
//!   launcher whose optional dependencies are one package per platform,
//!   and this platform's (`@toolhost/linux-x64` …) with the binary, so
//!   that `npx -y toolhost …` works;
//! - an MCP Bundle (`toolhost-VERSION.mcpb`: the binary, the example
//!   plugins, a manifest), validated and packed with the bundle tool from
//!   npm (`@anthropic-ai/mcpb`), for one-click install in desktop clients.
//!
//! Each is named and versioned from the workspace's `Cargo.toml`. The
//! binary is `toolhost` (the same program as `host`, whose name bind9's
//! DNS tool often has). `crates/toolhost-cli/tests/all/dist.rs` installs
//! each into a fresh environment and serves the plugins from it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use base64::Engine as _;
use sha2::Digest as _;

use crate::{cargo, outside, run};

/// The bundle tool (npm): validates and packs the MCP Bundle.
pub const MCPB: &str = "@anthropic-ai/mcpb@2.1.2";

/// The example plugins the bundle carries (they need no grant).
const BUNDLED_PLUGINS: [&str; 3] = ["calc", "text", "chart"];

/// The npm scope of the per-platform packages.
const NPM_SCOPE: &str = "@toolhost";

/// The platforms the launcher knows (`process.platform process.arch` →
/// its package), as the release workflow builds them.
const NPM_PLATFORMS: [(&str, &str); 4] = [
    ("linux x64", "linux-x64"),
    ("linux arm64", "linux-arm64"),
    ("darwin x64", "darwin-x64"),
    ("darwin arm64", "darwin-arm64"),
];

/// What `dist` made.
pub struct Dist {
    /// The wheel.
    pub wheel: PathBuf,
    /// The launcher's npm tarball.
    pub npm_launcher: PathBuf,
    /// This platform's npm tarball.
    pub npm_platform: PathBuf,
    /// The MCP Bundle.
    pub mcpb: PathBuf,
}

/// `cargo xtask dist [--binary FILE]`: builds the release binary (unless
/// given one) and every package from it.
pub fn dist(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let binary = match args {
        [flag, file] if flag == "--binary" => PathBuf::from(file),
        [] => {
            run(cargo().current_dir(root).args([
                "build",
                "--release",
                "-p",
                "toolhost-cli",
                "--bin",
                "toolhost",
            ]))?;
            root.join("target/release/toolhost")
        }
        _ => bail!("usage: cargo xtask dist [--binary FILE]"),
    };
    let made = build(root, &binary)?;
    for file in [
        &made.wheel,
        &made.npm_launcher,
        &made.npm_platform,
        &made.mcpb,
    ] {
        eprintln!("xtask: {}", file.display());
    }
    Ok(())
}

/// Every package from `binary`, into `target/dist/` (made anew).
pub fn build(root: &Path, binary: &Path) -> anyhow::Result<Dist> {
    let version = workspace_version(root)?;
    let platform = Platform::here()?;
    let out = root.join("target/dist");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out)?;
    let stripped = out.join("stage/toolhost");
    std::fs::create_dir_all(stripped.parent().unwrap_or(&out))?;
    std::fs::copy(binary, &stripped)
        .with_context(|| format!("copying the binary {}", binary.display()))?;
    // Symbols are a third of the binary; a machine without `strip` ships
    // them.
    if Command::new("strip").arg(&stripped).status().is_err() {
        eprintln!("xtask: no `strip` here: the packages keep the binary's symbols");
    }
    let bytes = std::fs::read(&stripped)?;
    let wheel = wheel(&out, &version, &platform, &bytes)?;
    let (npm_launcher, npm_platform) = npm(&out, &version, &platform, &stripped)?;
    let mcpb = bundle(root, &out, &version, &platform, &stripped)?;
    Ok(Dist {
        wheel,
        npm_launcher,
        npm_platform,
        mcpb,
    })
}

/// The workspace's `[workspace.package] version`.
fn workspace_version(root: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml"))?;
    let manifest: toml::Table = toml::from_str(&text)?;
    manifest
        .get("workspace")
        .and_then(|w| w.get("package"))
        .and_then(|p| p.get("version"))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .context("the workspace's Cargo.toml has no [workspace.package] version")
}

/// This machine's platform, as each package format names it.
struct Platform {
    /// npm's `os`/`cpu` pair as one name (`linux-x64`).
    npm: &'static str,
    os: &'static str,
    cpu: &'static str,
    /// The bundle manifest's platform (`linux`, `darwin`).
    mcpb: &'static str,
    /// The wheel's platform tag, less the glibc version on Linux.
    wheel_arch: &'static str,
}

impl Platform {
    fn here() -> anyhow::Result<Platform> {
        use std::env::consts::{ARCH, OS};
        Ok(match (OS, ARCH) {
            ("linux", "x86_64") => Platform {
                npm: "linux-x64",
                os: "linux",
                cpu: "x64",
                mcpb: "linux",
                wheel_arch: "x86_64",
            },
            ("linux", "aarch64") => Platform {
                npm: "linux-arm64",
                os: "linux",
                cpu: "arm64",
                mcpb: "linux",
                wheel_arch: "aarch64",
            },
            ("macos", "x86_64") => Platform {
                npm: "darwin-x64",
                os: "darwin",
                cpu: "x64",
                mcpb: "darwin",
                wheel_arch: "x86_64",
            },
            ("macos", "aarch64") => Platform {
                npm: "darwin-arm64",
                os: "darwin",
                cpu: "arm64",
                mcpb: "darwin",
                wheel_arch: "arm64",
            },
            _ => bail!("no package layout for {OS} {ARCH}"),
        })
    }

    /// The wheel's platform tag: `manylinux_2_N_ARCH` with N the newest
    /// glibc symbol version the binary needs, or macOS's.
    fn wheel_tag(&self, binary: &[u8]) -> anyhow::Result<String> {
        match self.os {
            "linux" => {
                let minor = newest_glibc_minor(binary)
                    .context("the binary names no GLIBC_2.N symbol version")?;
                Ok(format!("manylinux_2_{minor}_{}", self.wheel_arch))
            }
            _ if self.wheel_arch == "arm64" => Ok("macosx_11_0_arm64".to_owned()),
            _ => Ok("macosx_10_12_x86_64".to_owned()),
        }
    }
}

/// The newest `GLIBC_2.N` a binary's symbol versions name (the strings
/// of its `.gnu.version_r`; no ELF parser needed for that).
fn newest_glibc_minor(binary: &[u8]) -> Option<u32> {
    const PREFIX: &[u8] = b"GLIBC_2.";
    binary
        .windows(PREFIX.len())
        .enumerate()
        .filter(|(_, w)| *w == PREFIX)
        .filter_map(|(at, _)| {
            let digits: Vec<u8> = binary[at + PREFIX.len()..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .copied()
                .collect();
            std::str::from_utf8(&digits).ok()?.parse().ok()
        })
        .max()
}

/// The wheel: the binary as a script of the `.data` directory, the
/// metadata, and the RECORD of every file's digest.
fn wheel(out: &Path, version: &str, platform: &Platform, binary: &[u8]) -> anyhow::Result<PathBuf> {
    let tag = format!("py3-none-{}", platform.wheel_tag(binary)?);
    let file = out.join(format!("toolhost-{version}-{tag}.whl"));
    let info = format!("toolhost-{version}.dist-info");
    let metadata = format!(
        "Metadata-Version: 2.1\nName: toolhost\nVersion: {version}\n\
         Summary: Sandboxed WebAssembly tools for AI agents, served over MCP\n\
         License: Apache-2.0\n\n\
         The `toolhost` command: run `toolhost --plugins DIR mcp` to serve a directory of\n\
         WebAssembly tool plugins to an MCP client.\n"
    );
    let wheel_file = format!(
        "Wheel-Version: 1.0\nGenerator: toolhost xtask\nRoot-Is-Purelib: false\nTag: {tag}\n"
    );
    let mut files: Vec<(String, &[u8], u32)> = vec![
        (
            format!("toolhost-{version}.data/scripts/toolhost"),
            binary,
            0o755,
        ),
        (format!("{info}/METADATA"), metadata.as_bytes(), 0o644),
        (format!("{info}/WHEEL"), wheel_file.as_bytes(), 0o644),
    ];
    let mut record = String::new();
    for (name, bytes, _) in &files {
        let digest =
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(bytes));
        record.push_str(&format!("{name},sha256={digest},{}\n", bytes.len()));
    }
    record.push_str(&format!("{info}/RECORD,,\n"));
    files.push((format!("{info}/RECORD"), record.as_bytes(), 0o644));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&file)?);
    for (name, bytes, mode) in &files {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(*mode);
        zip.start_file(name.as_str(), options)?;
        zip.write_all(bytes)?;
    }
    zip.finish()?;
    Ok(file)
}

/// The two npm packages, packed with `npm pack`: the launcher and this
/// platform's binary.
fn npm(
    out: &Path,
    version: &str,
    platform: &Platform,
    binary: &Path,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let name = format!("{NPM_SCOPE}/{}", platform.npm);
    let dir = out.join("npm").join(platform.npm);
    std::fs::create_dir_all(dir.join("bin"))?;
    std::fs::copy(binary, dir.join("bin/toolhost"))?;
    write_json(
        &dir.join("package.json"),
        &serde_json::json!({
            "name": name,
            "version": version,
            "description": format!("The toolhost binary for {}", platform.npm),
            "license": "Apache-2.0",
            "os": [platform.os],
            "cpu": [platform.cpu],
            "files": ["bin/toolhost"],
            "preferUnplugged": true,
        }),
    )?;
    let platform_tgz = npm_pack(&dir, out)?;

    let dir = out.join("npm/toolhost");
    std::fs::create_dir_all(dir.join("bin"))?;
    let table: String = NPM_PLATFORMS
        .iter()
        .map(|(key, package)| format!("  \"{key}\": \"{NPM_SCOPE}/{package}\",\n"))
        .collect();
    std::fs::write(
        dir.join("bin/toolhost.js"),
        LAUNCHER.replace("{TABLE}", &table),
    )?;
    let optional: serde_json::Map<String, serde_json::Value> = NPM_PLATFORMS
        .iter()
        .map(|(_, package)| (format!("{NPM_SCOPE}/{package}"), version.into()))
        .collect();
    write_json(
        &dir.join("package.json"),
        &serde_json::json!({
            "name": "toolhost",
            "version": version,
            "description": "Sandboxed WebAssembly tools for AI agents, served over MCP: npx -y toolhost --plugins DIR mcp",
            "license": "Apache-2.0",
            "bin": {"toolhost": "bin/toolhost.js"},
            "files": ["bin/toolhost.js"],
            "optionalDependencies": optional,
            "engines": {"node": ">=18"},
        }),
    )?;
    let launcher_tgz = npm_pack(&dir, out)?;
    Ok((launcher_tgz, platform_tgz))
}

/// The launcher: runs this platform's binary with the same arguments,
/// stdin, stdout and stderr, and ends as it ends.
const LAUNCHER: &str = r#"#!/usr/bin/env node
// toolhost's launcher (npm): runs the binary of this platform's package,
// an optional dependency npm installs only where it fits.
"use strict";
const { spawnSync } = require("node:child_process");
const PACKAGES = {
{TABLE}};
const key = `${process.platform} ${process.arch}`;
const pkg = PACKAGES[key];
if (!pkg) {
  console.error(`toolhost: no build for ${key}; build it from source with cargo`);
  process.exit(1);
}
let binary;
try {
  binary = require.resolve(`${pkg}/bin/toolhost`);
} catch {
  console.error(`toolhost: ${pkg} is not installed (was it installed with --omit=optional?)`);
  process.exit(1);
}
const ran = spawnSync(binary, process.argv.slice(2), { stdio: "inherit" });
if (ran.error) {
  console.error(`toolhost: cannot start ${binary}: ${ran.error.message}`);
  process.exit(1);
}
if (ran.signal) {
  process.kill(process.pid, ran.signal);
}
process.exit(ran.status ?? 1);
"#;

/// `npm pack` of `dir` into `out`; returns the tarball.
fn npm_pack(dir: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let output = Command::new("npm")
        .current_dir(dir)
        .args(["pack", "--json", "--pack-destination"])
        .arg(out)
        .output()
        .context("npm (Node 18 or later) is needed to pack the npm packages")?;
    anyhow::ensure!(
        output.status.success(),
        "npm pack in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let packed: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let name = packed[0]["filename"]
        .as_str()
        .context("npm pack named no file")?;
    Ok(out.join(name))
}

/// The MCP Bundle: the binary, the example plugins and the manifest,
/// validated and packed by the bundle tool.
fn bundle(
    root: &Path,
    out: &Path,
    version: &str,
    platform: &Platform,
    binary: &Path,
) -> anyhow::Result<PathBuf> {
    let tools = root.join("target/tools");
    let mcpb_dir = outside::npm_dir(&tools.join("mcpb"), &[MCPB], "the MCP Bundle tool")?;
    let mcpb = mcpb_dir.join("node_modules/.bin/mcpb");
    let dir = out.join("mcpb");
    std::fs::create_dir_all(dir.join("server"))?;
    std::fs::create_dir_all(dir.join("plugins"))?;
    std::fs::copy(binary, dir.join("server/toolhost"))?;
    let plugins = root.join("target/plugins");
    for name in BUNDLED_PLUGINS {
        for ext in ["wasm", "toml"] {
            let from = plugins.join(format!("{name}.{ext}"));
            if from.is_file() {
                std::fs::copy(&from, dir.join("plugins").join(format!("{name}.{ext}")))?;
            } else if ext == "wasm" {
                bail!(
                    "{} is missing: run `cargo xtask plugins` first",
                    from.display()
                );
            }
        }
    }
    write_json(
        &dir.join("manifest.json"),
        &serde_json::json!({
            "manifest_version": "0.3",
            "name": "toolhost",
            "display_name": "toolhost",
            "version": version,
            "description": "Sandboxed WebAssembly tools, behind a policy: a calculator, text tools and charts to start with, and any directory of plugins you choose.",
            "author": {"name": "toolhost contributors"},
            "license": "Apache-2.0",
            "server": {
                "type": "binary",
                "entry_point": "server/toolhost",
                "mcp_config": {
                    "command": "${__dirname}/server/toolhost",
                    "args": ["--plugins", "${__dirname}/plugins", "mcp"],
                },
            },
            "compatibility": {"platforms": [platform.mcpb]},
        }),
    )?;
    run(Command::new(&mcpb)
        .arg("validate")
        .arg(dir.join("manifest.json")))
    .context("the bundle's manifest is not valid")?;
    let file = out.join(format!("toolhost-{version}-{}.mcpb", platform.npm));
    run(Command::new(&mcpb).arg("pack").arg(&dir).arg(&file))?;
    Ok(file)
}

fn write_json(path: &Path, value: &serde_json::Value) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_glibc_version_a_binary_names_is_found() {
        let binary = b"\0GLIBC_2.2.5\0GLIBC_2.34\0GLIBC_2.17\0GLIBC_PRIVATE\0";
        assert_eq!(newest_glibc_minor(binary), Some(34));
        assert_eq!(newest_glibc_minor(b"no versions"), None);
    }

    #[test]
    fn the_launcher_knows_every_platform_the_packages_are_built_for() {
        for (key, package) in NPM_PLATFORMS {
            let (os, cpu) = key.split_once(' ').unwrap();
            assert_eq!(package, format!("{os}-{cpu}"));
        }
    }
}
