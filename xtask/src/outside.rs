//! The outside software the tests prove interoperability with, installed
//! from the package registries into `target/tools/` (kept between runs; a
//! version change reinstalls). A missing `python3` or `npm`, or a registry
//! that cannot be reached, fails the test command: nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::run;

/// The MCP Python SDK (PyPI), the official client the MCP server is tested with.
pub const MCP_PYTHON_SDK: &str = "mcp==2.3.0";
/// The MCP Inspector (npm), whose CLI mode lists and calls tools.
pub const MCP_INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";

/// Where the tools are, for the tests (as environment variables).
pub struct Installed {
    /// A Python with the MCP SDK.
    pub python: PathBuf,
    /// The Inspector's CLI.
    pub inspector: PathBuf,
}

impl Installed {
    /// Sets the variables the tests read.
    pub fn export(&self, cmd: &mut Command) {
        cmd.env("TOOLHOST_TEST_PYTHON", &self.python)
            .env("TOOLHOST_TEST_INSPECTOR", &self.inspector);
    }
}

/// Installs what is missing and says where everything is.
pub fn install(root: &Path) -> anyhow::Result<Installed> {
    let dir = root.join("target").join("tools");
    std::fs::create_dir_all(&dir)?;
    let venv = dir.join("py");
    let python = venv.join("bin").join("python");
    let marker = venv.join(format!(".installed-{MCP_PYTHON_SDK}"));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&venv);
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))
            .context("python3 (3.10 or later, with venv) is needed for the MCP tests")?;
        run(Command::new(&python).args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            MCP_PYTHON_SDK,
        ]))
        .context("installing the MCP Python SDK from PyPI")?;
        std::fs::write(&marker, "")?;
    }
    let node = dir.join("node");
    let inspector = node.join("node_modules").join(".bin").join("mcp-inspector");
    let marker = node.join(format!(
        ".installed-{}",
        MCP_INSPECTOR.replace(['/', '@'], "_")
    ));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&node);
        std::fs::create_dir_all(&node)?;
        std::fs::write(node.join("package.json"), "{\"private\": true}\n")?;
        run(Command::new("npm").current_dir(&node).args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            MCP_INSPECTOR,
        ]))
        .context("npm (Node 20 or later) is needed to install the MCP Inspector")?;
        std::fs::write(&marker, "")?;
    }
    Ok(Installed { python, inspector })
}
