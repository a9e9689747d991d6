//! `cargo xtask <task>`: the project's set-up and test commands.
//!
//! - `plugins`: build every plugin in `plugins/` for wasm32-wasip2 into
//!   `target/plugins/` (examples) and `target/fixtures/` (test fixtures).
//! - `plugins-foreign`: install componentize-py and componentize-js into
//!   `target/tools/` and build the Python and JavaScript plugins
//!   (`plugins/{python,js}/`) into `target/plugins-{py,js}/` and
//!   `target/fixtures-{py,js}/` (`outside.rs`); Go from PyPI, wit-bindgen and
//!   wasm-tools from crates.io, and the Go plugins (`plugins/go/`) into
//!   `target/plugins-go/` and `target/fixtures-go/` (`golang.rs`).
//! - `test`: `plugins`, then formatting, clippy (host and fuzz targets,
//!   plugins, SDK), and every test of both workspaces, with the outside
//!   software they need (the MCP Python SDK, the MCP Inspector) installed
//!   into `target/tools/` (`outside.rs`).
//! - `demo`: `plugins`, a release build of `host`, then the interactive session.
//! - `bench`: `plugins`, then the criterion benchmarks (tool calls, agent loop).
//! - `bench-gate`: the performance gate, quick ratios against the values
//!   recorded in `benches/gate.toml` (`gate.rs`); `test` runs it before
//!   the workspace's tests.
//! - `test-env`: install the outside tools (as `test` does) and print the
//!   variables the tests read as shell `export` lines, so that one test
//!   runs alone with them: `eval "$(cargo xtask test-env)"`.
//! - `layering`: no circle between the crates or between any crate's
//!   modules, and the seams that must stay open (`layering.rs`); `test`
//!   runs it after formatting.
//! - `dist`: the release binary packaged as a Python wheel, npm packages
//!   and an MCP Bundle, into `target/dist/` (`dist.rs`); `test` makes them
//!   and tests each installed.
//! - `install-bench`: from installing each package of `dist` to the first
//!   answer through an MCP client, against the binary in place; writes
//!   the table in `docs/benchmarks.md` (`install_bench.rs`).
//! - `package-check`: every library crate packed with `cargo package` and
//!   built from its packed files alone (`package.rs`); `test` runs it.
//! - `eval`: the agent loop against a real model server, on the tasks of
//!   `xtask/eval/tasks.toml` (`eval.rs`); not part of `test`.
//!
//! Each installs the `wasm32-wasip2` target when it is missing.

mod dist;
mod eval;
mod gate;
mod golang;
mod install_bench;
mod layering;
mod outside;
mod package;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;

const WASM_TARGET: &str = "wasm32-wasip2";
/// The program runner of code mode (`plugins/code/run-code`), left out of
/// the plugins' native tests (see [`test`]).
const RUN_CODE_CRATE: &str = "toolhost-plugin-run-code";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = root();
    match args.first().map(String::as_str) {
        Some("plugins") => plugins(&root),
        Some("plugins-foreign") => plugins_foreign(&root),
        Some("test") => test(&root, &args[1..]),
        Some("demo") => demo(&root, &args[1..]),
        Some("bench") => bench(&root, &args[1..]),
        Some("bench-gate") => {
            plugins(&root)?;
            plugins_foreign(&root)?;
            gate::bench_gate(&root, &args[1..])
        }
        Some("eval") => eval::eval(&root, &args[1..]),
        Some("test-env") => test_env(&root),
        Some("layering") => layering::check(&root),
        Some("package-check") => package::check(&root),
        Some("install-bench") => install_bench::bench(&root, &args[1..]),
        Some("dist") => {
            plugins(&root)?;
            dist::dist(&root, &args[1..])
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <plugins|plugins-foreign|test|demo|bench|bench-gate|eval|layering|dist|package-check|test-env>\n\
                 \n  plugins   build the example and fixture plugins into target/plugins and target/fixtures\
                 \n  plugins-foreign  install componentize-py/-js and Go into target/tools and build the Python, JS and Go plugins into target/{{plugins,fixtures}}-{{py,js,go}}\
                 \n  test      build the plugins and run fmt, clippy and every test\
                 \n  demo      build everything (release) and start `host --plugins target/plugins`\
                 \n  bench     build the plugins and run the benchmarks (args go to criterion)\
                 \n  bench-gate  the performance gate: quick ratios against benches/gate.toml (--record writes it and the table in docs/benchmarks.md)\
                 \n  eval      the agent loop's tasks against a model server (--base-url URL --model NAME; xtask/src/eval.rs)\
                 \n  dist      the release binary as a Python wheel, npm packages and an MCP Bundle, into target/dist (xtask/src/dist.rs)\
                 \n  install-bench  time each package of target/dist from install to the first answer, into docs/benchmarks.md (xtask/src/install_bench.rs)\
                 \n  package-check  pack every library crate with cargo package and build it from its packed files (xtask/src/package.rs)\
                 \n  layering  check that no crates or modules import each other in a circle and the seams hold (xtask/src/layering.rs)\
                 \n  test-env  install the outside tools and print, as shell exports, the variables the tests read (`eval \"$(cargo xtask test-env)\"`, then one `cargo test`)"
            );
            std::process::exit(2);
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// `cargo`, as the one that started xtask. In CI (`CI` set) without
/// incremental compilation, unless `CARGO_INCREMENTAL` says otherwise: a
/// clean clone builds everything once, and incremental state only costs
/// time and disk there (several GB).
fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    if in_ci() && std::env::var_os("CARGO_INCREMENTAL").is_none() {
        cmd.env("CARGO_INCREMENTAL", "0");
    }
    cmd
}

/// Whether this runs in CI: `CI` set to anything but `false` or `0`.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let started = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    record_time(label(cmd), started.elapsed());
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// The wall time of each step of this task (every command [`run`]
/// started, and what [`timed`] wraps), in order, for [`print_times`].
static TIMES: Mutex<Vec<(String, Duration)>> = Mutex::new(Vec::new());

fn record_time(label: String, took: Duration) {
    TIMES
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((label, took));
}

/// Runs `f`, a step that is not one command, and records its time.
fn timed<T>(label: &str, f: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let started = Instant::now();
    let out = f();
    record_time(label.to_owned(), started.elapsed());
    out
}

/// A command as the time summary names it: the program's file name, its
/// first arguments, and the directory it ran in when not the root.
fn label(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program())
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let args: Vec<String> = cmd
        .get_args()
        .take(5)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let dir = cmd
        .get_current_dir()
        .and_then(|d| d.strip_prefix(root()).ok())
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| format!(" (in {})", d.display()))
        .unwrap_or_default();
    format!("{program} {}{dir}", args.join(" "))
}

/// Prints where this task's time went so far: every step in order, and the
/// total since `started`. On a clean clone (CI) this is the cold breakdown.
fn print_times(started: Instant) {
    let times = TIMES.lock().unwrap_or_else(PoisonError::into_inner);
    eprintln!(
        "xtask: where the time went ({:.0} s in all so far):",
        started.elapsed().as_secs_f64()
    );
    for (label, took) in times.iter() {
        eprintln!("xtask: {:>7.1} s  {label}", took.as_secs_f64());
    }
}

fn ensure_wasm_target() -> anyhow::Result<()> {
    let out = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    match out {
        Ok(out)
            if String::from_utf8_lossy(&out.stdout)
                .lines()
                .any(|l| l.trim() == WASM_TARGET) =>
        {
            Ok(())
        }
        Ok(_) => run(Command::new("rustup").args(["target", "add", WASM_TARGET])),
        Err(e) => {
            eprintln!(
                "xtask: rustup not found ({e}); assuming the {WASM_TARGET} target is installed"
            );
            Ok(())
        }
    }
}

#[derive(Deserialize)]
struct PluginManifest {
    name: String,
}

/// `(crate dir, plugin name)` of every plugin crate under `dir` (one level).
fn plugin_crates(dir: &Path) -> anyhow::Result<Vec<(PathBuf, String)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let manifest = path.join("plugin.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&manifest)?;
        let m: PluginManifest =
            toml::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
        found.push((path, m.name));
    }
    found.sort();
    Ok(found)
}

fn plugins(root: &Path) -> anyhow::Result<()> {
    ensure_wasm_target()?;
    let target_dir = root.join("target");
    run(cargo()
        .current_dir(root.join("plugins"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["build", "--release", "--target", WASM_TARGET, "--workspace"]))?;
    let built = target_dir.join(WASM_TARGET).join("release");
    for (src, dest) in [
        (root.join("plugins"), target_dir.join("plugins")),
        (
            root.join("plugins").join("fixtures"),
            target_dir.join("fixtures"),
        ),
        // The program runner of code mode, apart from the examples (tests
        // that list the examples' tools do not see it).
        (root.join("plugins").join("code"), target_dir.join("code")),
    ] {
        std::fs::create_dir_all(&dest)?;
        for (dir, name) in plugin_crates(&src)? {
            let artifact = built.join(format!("{}.wasm", name.replace('-', "_")));
            let wasm = dest.join(format!("{name}.wasm"));
            copy_if_changed(&artifact, &wasm)?;
            copy_if_changed(&dir.join("plugin.toml"), &dest.join(format!("{name}.toml")))?;
            // A plain component's own WIT, for its docs.
            let wit = dir.join(format!("{name}.wit"));
            if wit.is_file() {
                copy_if_changed(&wit, &dest.join(format!("{name}.wit")))?;
            }
            // Its skills (SEP-2640), beside its component as `NAME.skills/`.
            let skills = dir.join("skills");
            if skills.is_dir() {
                mirror_if_changed(&skills, &dest.join(format!("{name}.skills")))?;
            }
        }
        eprintln!("xtask: plugins in {}", dest.display());
    }
    Ok(())
}

/// Copies only when the content differs, so a running host's watcher sees no needless change.
fn copy_if_changed(from: &Path, to: &Path) -> anyhow::Result<()> {
    let new = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    if std::fs::read(to).ok().as_deref() == Some(&new[..]) {
        return Ok(());
    }
    let tmp = to.with_extension("tmp");
    std::fs::write(&tmp, &new)?;
    std::fs::rename(&tmp, to)?;
    Ok(())
}

/// Makes `to` a copy of the folder `from` ([`copy_if_changed`] for each
/// file; what `from` no longer has is removed).
fn mirror_if_changed(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    let mut kept = std::collections::HashSet::new();
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let (path, name) = (entry.path(), entry.file_name());
        if path.is_dir() {
            mirror_if_changed(&path, &to.join(&name))?;
        } else {
            copy_if_changed(&path, &to.join(&name))?;
        }
        kept.insert(name);
    }
    for entry in std::fs::read_dir(to)? {
        let entry = entry?;
        if !kept.contains(&entry.file_name()) {
            let path = entry.path();
            if path.is_dir() {
                std::fs::remove_dir_all(&path)?;
            } else {
                std::fs::remove_file(&path)?;
            }
        }
    }
    Ok(())
}

fn test(root: &Path, extra: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    plugins(root)?;
    let target_dir = root.join("target");
    run(cargo().current_dir(root).args(["fmt", "--all", "--check"]))?;
    run(cargo()
        .current_dir(root.join("plugins"))
        .args(["fmt", "--all", "--check"]))?;
    timed("the layering (layering.rs)", || layering::check(root))?;
    run(cargo().current_dir(root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The plugins and the SDK follow the same lints (their own workspaces).
    run(cargo()
        .current_dir(root.join("plugins"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--target",
            WASM_TARGET,
        ])
        .args(["--", "-D", "warnings"]))?;
    run(cargo()
        .current_dir(root.join("crates").join("toolhost-sdk"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["clippy", "--all-targets", "--", "-D", "warnings"]))?;
    timed("the library crates, packed (package.rs)", || {
        package::check(root)
    })?;
    // Guest-side logic (the SDK and the plugins' pure modules) runs natively.
    // Not the program runner's: a native build of its JavaScript engine
    // (Boa) costs minutes for tests that the runtime's `code_mode` tests
    // make through the wasm built above; its pure part (the declarations,
    // `plugins/code/declarations`) is a crate of its own and runs here.
    run(cargo()
        .current_dir(root.join("plugins"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["test", "--workspace", "--exclude", RUN_CODE_CRATE]))?;
    run(cargo()
        .current_dir(root.join("crates").join("toolhost-sdk"))
        .env("CARGO_TARGET_DIR", &target_dir)
        .args(["test"]))?;
    // The MCP Python SDK and the Inspector, for the MCP server's tests;
    // componentize-py and componentize-js, for the Python and JS plugins.
    let installed = timed("install the outside tools (outside.rs)", || {
        outside::install(root)
    })?;
    timed("lint the release workflow (outside.rs)", || {
        outside::lint_workflows(root)
    })?;
    timed("build the Python plugins", || {
        outside::python_plugins(root, &installed)
    })?;
    timed("build the JavaScript plugins", || {
        outside::js_plugins(root, &installed)
    })?;
    // Go (PyPI) with wit-bindgen and wasm-tools (crates.io), for the Go plugins.
    let go = timed("install Go, wit-bindgen, wasm-tools (golang.rs)", || {
        golang::install(root)
    })?;
    timed("build the Go plugins", || golang::plugins(root, &go))?;
    // The performance gate (it needs the plugins of every language): a
    // regression of a recorded ratio fails. Before the tests, so that the
    // test runner's summary stays the last thing printed.
    timed("the performance gate (gate.rs: build and bench)", || {
        gate::bench_gate(root, &[])
    })?;
    // The wheel, the npm packages and the MCP Bundle, which the CLI's
    // tests install (`tests/all/dist.rs`).
    timed(
        "the packages (dist.rs: release build, wheel, npm, bundle)",
        || dist::dist(root, &[]),
    )?;
    print_times(started);
    let mut cmd = cargo();
    cmd.current_dir(root).args(["test", "--workspace"]);
    installed.export(&mut cmd);
    cmd.env("TOOLHOST_TEST_DIST", root.join("target/dist"));
    cmd.args(extra);
    run(&mut cmd)
}

/// `cargo xtask test-env`: the outside tools installed, their variables
/// printed as `export NAME='value'` lines (the only thing on stdout).
fn test_env(root: &Path) -> anyhow::Result<()> {
    let installed = outside::install(root)?;
    for (name, value) in installed.vars() {
        let value = value.to_string_lossy().replace('\'', "'\\''");
        println!("export {name}='{value}'");
    }
    Ok(())
}

/// `cargo xtask plugins-foreign`: the Python, JavaScript and Go plugins alone.
fn plugins_foreign(root: &Path) -> anyhow::Result<()> {
    let installed = outside::install(root)?;
    outside::python_plugins(root, &installed)?;
    outside::js_plugins(root, &installed)?;
    golang::plugins(root, &golang::install(root)?)
}

fn demo(root: &Path, extra: &[String]) -> anyhow::Result<()> {
    let started = Instant::now();
    plugins(root)?;
    run(cargo()
        .current_dir(root)
        .args(["build", "--release", "-p", "toolhost-cli"]))?;
    print_times(started);
    let host = root.join("target").join("release").join("host");
    let mut cmd = Command::new(host);
    cmd.current_dir(root)
        .args(["--plugins", "target/plugins", "--allow-dir", "fs=."])
        .args(extra);
    run(&mut cmd)
}

fn bench(root: &Path, extra: &[String]) -> anyhow::Result<()> {
    plugins(root)?;
    for (package, bench) in [
        ("toolhost-runtime", "calls"),
        ("toolhost-runtime", "reload"),
        ("toolhost-runtime", "policy"),
        ("toolhost-runtime", "concurrency"),
        ("toolhost-agent", "agent"),
    ] {
        let mut cmd = cargo();
        cmd.current_dir(root)
            .args(["bench", "-p", package, "--bench", bench]);
        if !extra.is_empty() {
            cmd.arg("--").args(extra);
        }
        run(&mut cmd)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_is_named_by_its_program_first_arguments_and_directory() {
        let mut cmd = Command::new("/usr/bin/cargo");
        cmd.current_dir(root().join("plugins")).args([
            "build",
            "--release",
            "--target",
            WASM_TARGET,
            "--workspace",
            "-q",
        ]);
        assert_eq!(
            label(&cmd),
            "cargo build --release --target wasm32-wasip2 --workspace (in plugins)"
        );
        let mut at_root = Command::new("cargo");
        at_root.current_dir(root()).arg("fmt");
        assert_eq!(label(&at_root), "cargo fmt");
    }

    #[test]
    fn the_times_are_kept_in_order_with_what_a_timed_step_returns() {
        let before = TIMES.lock().unwrap().len();
        let value = timed("a step", || Ok(7)).unwrap();
        assert_eq!(value, 7);
        let times = TIMES.lock().unwrap();
        assert_eq!(times.len(), before + 1);
        assert_eq!(times[before].0, "a step");
    }
}
