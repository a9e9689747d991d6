//! `cargo xtask install-bench [--runs N]`: how long a new user waits, from
//! installing the packages `cargo xtask dist` made (`target/dist/`) to the
//! first answer of a tool through an MCP client (the MCP Python SDK:
//! initialize, list the tools, call `calculate`), each way in a fresh
//! environment with a cold compile cache. The baseline, in the same run,
//! is the same first answer from the binary already in place, so what a
//! way adds is its install. Writes the table into `docs/benchmarks.md`
//! (between the `install-bench` markers); the figures are never typed by
//! hand.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// What the MCP client does: the first answer.
const FIRST_ANSWER: &str = r#"
import asyncio, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.argv[1], args=sys.argv[2:])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            result = await session.call_tool("calculate", {"expression": "6*7"})
            text = result.content[0].text
            assert text.strip() == "42", text

asyncio.run(main())
"#;

/// One way to install, and the command it leaves that starts toolhost.
struct Way {
    name: &'static str,
    /// Installs into `dir`; returns the command (and its leading
    /// arguments) that runs `toolhost`.
    install: fn(&Path, &Path) -> anyhow::Result<Vec<String>>,
}

fn ways() -> [Way; 4] {
    [
        Way {
            name: "the binary already in place (baseline)",
            install: |dist, _| Ok(vec![text(&dist.join("stage/toolhost"))]),
        },
        Way {
            name: "`pip install` of the wheel into a new venv",
            install: |dist, dir| {
                let venv = dir.join("venv");
                quiet(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
                quiet(
                    Command::new(venv.join("bin/pip"))
                        .args([
                            "install",
                            "--no-index",
                            "--quiet",
                            "--disable-pip-version-check",
                        ])
                        .arg(only(dist, |n| n.ends_with(".whl"))?),
                )?;
                Ok(vec![text(&venv.join("bin/toolhost"))])
            },
        },
        Way {
            name: "`uvx --from` the wheel (an empty uv cache)",
            install: |dist, dir| {
                // uvx installs when the client starts it: the install is
                // inside the first answer.
                let wheel = only(dist, |n| n.ends_with(".whl"))?;
                let uvx = dist.join("../tools/uv/bin/uvx");
                anyhow::ensure!(
                    uvx.is_file(),
                    "{} is missing: run `cargo xtask test-env`",
                    uvx.display()
                );
                let script = dir.join("uvx-toolhost");
                std::fs::write(
                    &script,
                    format!(
                        "#!/bin/sh\nexport UV_CACHE_DIR='{}' UV_PYTHON_DOWNLOADS=never\nexec '{}' --offline --no-index --from '{}' toolhost \"$@\"\n",
                        dir.join("uv-cache").display(),
                        uvx.display(),
                        wheel.display()
                    ),
                )?;
                quiet(Command::new("chmod").arg("755").arg(&script))?;
                Ok(vec![text(&script)])
            },
        },
        Way {
            name: "`npm install` of the two packages into a new prefix",
            install: |dist, dir| {
                let prefix = dir.join("prefix");
                std::fs::create_dir_all(&prefix)?;
                quiet(
                    Command::new("npm")
                        .args([
                            "install",
                            "--no-audit",
                            "--no-fund",
                            "--loglevel=error",
                            "--prefix",
                        ])
                        .arg(&prefix)
                        .arg(only(dist, |n| {
                            n.strip_prefix("toolhost-")
                                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
                                && n.ends_with(".tgz")
                        })?)
                        .arg(only(dist, |n| {
                            (n.starts_with("toolhost-linux-") || n.starts_with("toolhost-darwin-"))
                                && n.ends_with(".tgz")
                        })?)
                        .env("npm_config_cache", dir.join("npm-cache")),
                )?;
                Ok(vec![text(&prefix.join("node_modules/.bin/toolhost"))])
            },
        },
    ]
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// The one file of `dist` whose name `matches`.
fn only(dist: &Path, matches: impl Fn(&str) -> bool) -> anyhow::Result<PathBuf> {
    let found: Vec<PathBuf> = std::fs::read_dir(dist)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| matches(&n.to_string_lossy())))
        .collect();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        _ => bail!(
            "expected one matching file in {}, found {found:?}",
            dist.display()
        ),
    }
}

fn quiet(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// One run of one way: (install, first answer).
fn measure(root: &Path, way: &Way, dir: &Path) -> anyhow::Result<(Duration, Duration)> {
    let dist = root.join("target/dist");
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("plugins"))?;
    for ext in ["wasm", "toml"] {
        let from = root.join(format!("target/plugins/calc.{ext}"));
        if from.is_file() {
            std::fs::copy(&from, dir.join(format!("plugins/calc.{ext}")))?;
        }
    }
    let started = Instant::now();
    let mut command = (way.install)(&dist, dir)?;
    let installed = started.elapsed();
    command.extend(
        [
            "--cache-dir",
            &text(&dir.join("compile-cache")),
            "--lock",
            &text(&dir.join("toolhost.lock")),
            "--plugins",
            &text(&dir.join("plugins")),
            "mcp",
        ]
        .map(str::to_owned),
    );
    let python = root.join("target/tools/py/bin/python");
    anyhow::ensure!(
        python.is_file(),
        "{} (with the MCP SDK) is missing: run `cargo xtask test-env`",
        python.display()
    );
    let asked = Instant::now();
    quiet(
        Command::new(&python)
            .arg("-c")
            .arg(FIRST_ANSWER)
            .args(&command),
    )?;
    Ok((installed, asked.elapsed()))
}

pub fn bench(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let runs: usize = match args {
        [] => 3,
        [flag, n] if flag == "--runs" => n.parse().context("--runs N")?,
        _ => bail!("usage: cargo xtask install-bench [--runs N]"),
    };
    anyhow::ensure!(
        root.join("target/dist/stage/toolhost").is_file(),
        "target/dist is missing: run `cargo xtask dist` first"
    );
    let work = root.join("target/install-bench");
    let mut rows = Vec::new();
    for way in ways() {
        let mut totals = Vec::new();
        let mut installs = Vec::new();
        for run in 0..runs {
            let (install, answer) = measure(root, &way, &work.join(format!("run-{run}")))?;
            installs.push(install);
            totals.push(install + answer);
        }
        let _ = std::fs::remove_dir_all(&work);
        rows.push(format!(
            "| {} | {} | {} |",
            way.name,
            range(&mut installs),
            range(&mut totals)
        ));
        eprintln!("xtask: {}", rows.last().map_or("", String::as_str));
    }
    let table = format!(
        "| way | install | install to the first answer (median, min–max of {runs}) |\n|---|---:|---:|\n{}\n",
        rows.join("\n")
    );
    let page = root.join("docs/benchmarks.md");
    let text = std::fs::read_to_string(&page)?;
    let (begin, end) = (
        "<!-- install-bench:begin -->\n",
        "<!-- install-bench:end -->",
    );
    let (Some(b), Some(e)) = (text.find(begin), text.find(end)) else {
        bail!("docs/benchmarks.md has no install-bench markers");
    };
    let written = format!("{}{begin}{table}{}", &text[..b], &text[e..]);
    std::fs::write(&page, written)?;
    eprintln!("xtask: wrote the table into {}", page.display());
    Ok(())
}

/// `median (min–max)` in seconds, or ms under one second.
fn range(values: &mut [Duration]) -> String {
    values.sort();
    let show = |d: Duration| {
        if d < Duration::from_secs(1) {
            format!("{} ms", d.as_millis())
        } else {
            format!("{:.2} s", d.as_secs_f64())
        }
    };
    match values {
        [] => "–".to_owned(),
        [one] => show(*one),
        _ => format!(
            "{} ({}–{})",
            show(values[values.len() / 2]),
            show(values[0]),
            show(values[values.len() - 1])
        ),
    }
}
