//! The packages `cargo xtask dist` makes (`target/dist/`, or
//! `TOOLHOST_TEST_DIST`; `cargo xtask test` makes them first), each
//! installed from its file into a fresh environment and serving the
//! calculator to the MCP Python SDK from there, as a user would start it:
//! the wheel with pip into a new venv and with `uvx`, the npm packages
//! into a new prefix and with `npm exec` (what `npx -y toolhost` runs),
//! and the MCP Bundle unpacked by the bundle tool and started by its
//! manifest's own command.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::mcp::client;
use crate::support::*;

/// Where the packages are.
fn dist_dir() -> PathBuf {
    let dir = std::env::var_os("TOOLHOST_TEST_DIST")
        .map_or_else(|| root().join("target/dist"), PathBuf::from);
    assert!(
        dir.is_dir(),
        "{} is missing: run `cargo xtask dist` (or the tests with `cargo xtask test`, which makes it)",
        dir.display()
    );
    dir
}

/// The one package of `dist_dir()` whose file name `matches`.
fn package(what: &str, matches: impl Fn(&str) -> bool) -> PathBuf {
    let dir = dist_dir();
    let found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && matches(&p.file_name().unwrap().to_string_lossy()))
        .collect();
    assert_eq!(found.len(), 1, "{what} in {}: {found:?}", dir.display());
    found.into_iter().next().unwrap()
}

/// The wheel.
fn wheel() -> PathBuf {
    package("the wheel", |n| {
        n.starts_with("toolhost-") && n.ends_with(".whl")
    })
}

/// The npm launcher (`toolhost-VERSION.tgz`).
fn npm_launcher() -> PathBuf {
    package("the npm launcher", |n| {
        n.strip_prefix("toolhost-")
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            && n.ends_with(".tgz")
    })
}

/// This platform's npm package (`toolhost-linux-x64-VERSION.tgz`: npm
/// names `@toolhost/linux-x64`'s tarball so).
fn npm_platform() -> PathBuf {
    package("the platform's npm package", |n| {
        (n.starts_with("toolhost-linux-") || n.starts_with("toolhost-darwin-"))
            && n.ends_with(".tgz")
    })
}

/// A directory with the calculator, and `launch` (the installed command
/// and what goes before toolhost's own arguments) serving it over stdio:
/// the SDK lists it and `calculate` answers 14.
fn serves_the_calculator(launch: &[String], tmp: &Path) {
    let plugins = tmp.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    copy_plugin(&plugins_dir(), "calc", &plugins);
    let mut command = launch.to_vec();
    command.extend(
        [
            "--cache-dir",
            &root().join("target/test-cache").display().to_string(),
            "--lock",
            &tmp.join("toolhost.lock").display().to_string(),
            "--plugins",
            &plugins.display().to_string(),
            "mcp",
        ]
        .map(str::to_owned),
    );
    let report = client("basics", &["--mode", "2026-07-28"], &command);
    assert!(
        report["tools"].get("calculate").is_some(),
        "{command:?}: {report:#}"
    );
    assert!(
        report["calls"]["ok"].to_string().contains("14"),
        "{command:?}: {report:#}"
    );
}

fn ran(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?}: {said}");
    said
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_and_serves_mcp_from_there() {
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    ran(Command::new("python3").arg("-m").arg("venv").arg(&venv));
    ran(Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(wheel()));
    let installed = venv.join("bin/toolhost");
    assert!(
        installed.is_file(),
        "pip put no toolhost into {}",
        venv.display()
    );
    serves_the_calculator(&[installed.display().to_string()], tmp.path());
}

#[test]
fn uvx_runs_the_wheel_and_serves_mcp() {
    let tmp = tempfile::tempdir().unwrap();
    let uvx = outside_tool("uv/bin/uvx");
    // uvx makes its own environment from the file, offline, with a cache
    // of the test's own.
    let wrapper = tmp.path().join("uvx-toolhost");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexport UV_CACHE_DIR='{}' UV_TOOL_DIR='{}' UV_PYTHON_DOWNLOADS=never\n\
             exec '{}' --offline --no-index --from '{}' toolhost \"$@\"\n",
            tmp.path().join("uv-cache").display(),
            tmp.path().join("uv-tools").display(),
            uvx.display(),
            wheel().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    serves_the_calculator(&[wrapper.display().to_string()], tmp.path());
}

#[test]
fn the_npm_packages_install_into_a_fresh_prefix_and_serve_mcp_from_there() {
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    std::fs::create_dir_all(&prefix).unwrap();
    ran(Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&prefix)
        .arg(npm_launcher())
        .arg(npm_platform())
        .env("npm_config_cache", tmp.path().join("npm-cache")));
    let installed = prefix.join("node_modules/.bin/toolhost");
    assert!(
        installed.exists(),
        "npm put no toolhost into {}",
        prefix.display()
    );
    serves_the_calculator(&[installed.display().to_string()], tmp.path());
}

#[test]
fn npm_exec_runs_the_packages_as_npx_would_and_serves_mcp() {
    let tmp = tempfile::tempdir().unwrap();
    let launch = vec![
        "npm".to_owned(),
        "exec".to_owned(),
        "--yes".to_owned(),
        format!("--cache={}", tmp.path().join("npm-cache").display()),
        format!("--package={}", npm_launcher().display()),
        format!("--package={}", npm_platform().display()),
        "--".to_owned(),
        "toolhost".to_owned(),
    ];
    serves_the_calculator(&launch, tmp.path());
}

#[test]
fn the_mcp_bundle_unpacks_with_the_bundle_tool_and_its_manifest_starts_the_server() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = package("the bundle", |n| n.ends_with(".mcpb"));
    let mcpb = outside_tool("mcpb/node_modules/.bin/mcpb");
    let unpacked = tmp.path().join("bundle");
    ran(Command::new(&mcpb)
        .arg("unpack")
        .arg(&bundle)
        .arg(&unpacked));
    let info = ran(Command::new(&mcpb).arg("info").arg(&bundle));
    assert!(info.contains("toolhost"), "{info}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(unpacked.join("manifest.json")).unwrap())
            .unwrap();
    // What a desktop client does: ${__dirname} is where it unpacked.
    let dirname = unpacked.display().to_string();
    let config = &manifest["server"]["mcp_config"];
    let mut command = vec![
        config["command"]
            .as_str()
            .unwrap()
            .replace("${__dirname}", &dirname),
    ];
    command.extend(
        config["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().replace("${__dirname}", &dirname)),
    );
    assert_eq!(
        command.last().map(String::as_str),
        Some("mcp"),
        "{command:?}"
    );
    // The bundle's own plugins, served as the manifest says.
    let report = client("basics", &["--mode", "2026-07-28"], &command);
    assert!(
        report["calls"]["ok"].to_string().contains("14"),
        "{command:?}: {report:#}"
    );
    for tool in ["calculate", "word_count", "bar_chart"] {
        assert!(report["tools"].get(tool).is_some(), "{tool}: {report:#}");
    }
}
