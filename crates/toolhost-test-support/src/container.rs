//! The container image (`Dockerfile`, target `prebuilt`) built and run with
//! Debian's podman, rootful, as this sandbox allows it: the `runc` runtime,
//! the `cgroupfs` manager and explicit `nofile`/`nproc` limits. The base
//! image is Debian bookworm made with debootstrap from Debian's packages
//! and imported (`TOOLHOST_TEST_BASE_IMAGE`), which `cargo xtask test`
//! prepares, so no image registry is needed. A missing podman or base
//! image fails the test, saying how to get them: never a skip.
//!
//! ```no_run
//! use toolhost_test_support::container::Image;
//! let image = Image::build(std::path::Path::new("target/debug/host"), &[]);
//! let running = image.run(&["-e", "TOOLHOST_TOKEN=secret"]);
//! println!("{}", running.url);
//! ```

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The base image `cargo xtask test` imports when the variable is unset.
const BASE_IMAGE: &str = "localhost/toolhost-base:bookworm";

/// `podman` with the global flags this sandbox needs.
pub fn podman() -> Command {
    let mut cmd = Command::new("podman");
    cmd.args(["--cgroup-manager", "cgroupfs"]);
    cmd
}

/// The flags `podman build` and `podman run` need here: the `runc`
/// runtime and limits no higher than this process's own hard limits (the
/// defaults are refused).
pub fn sandbox_flags() -> Vec<String> {
    let hard = |flag: &str| {
        Command::new("sh")
            .args(["-c", &format!("ulimit -H{flag}")])
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let nofile = hard("n").unwrap_or(1024).min(65_536);
    // nproc above a few thousand is refused even under the hard limit.
    let nproc = hard("u").unwrap_or(4096).min(4096);
    vec![
        "--runtime".into(),
        "runc".into(),
        "--ulimit".into(),
        format!("nofile={nofile}:{nofile}"),
        "--ulimit".into(),
        format!("nproc={nproc}:{nproc}"),
    ]
}

fn checked(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: podman does not run ({e}); `cargo xtask test` installs Debian's podman")
    });
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The base image: `TOOLHOST_TEST_BASE_IMAGE`, else the one xtask imports.
pub fn base_image() -> String {
    let base = std::env::var("TOOLHOST_TEST_BASE_IMAGE").unwrap_or_else(|_| BASE_IMAGE.into());
    let exists = podman()
        .args(["image", "exists", &base])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        exists,
        "the base image {base} is missing: run the tests with `cargo xtask test`, which installs \
         podman and makes it with debootstrap from Debian's packages"
    );
    base
}

/// Whether this machine runs containers at all, as `cargo xtask test`
/// found when it ran a container of the base image with limits any machine
/// allows (`TOOLHOST_TEST_CONTAINERS`: `yes`, or `no: ` and podman's
/// reason). `Err` is that reason, for a test to print and stop at. Unset
/// (a test run by hand) counts as `yes`: a test that then fails says why.
/// A missing podman or base image is not such a machine, and fails the
/// test; so does a failure of the tests' own flags on a machine that runs
/// containers.
pub fn runs_containers() -> Result<(), String> {
    match std::env::var("TOOLHOST_TEST_CONTAINERS") {
        Ok(said) => match said.strip_prefix("no:") {
            Some(why) => Err(why.trim().to_owned()),
            None => Ok(()),
        },
        Err(_) => Ok(()),
    }
}

/// An image built from the repository's `Dockerfile` (target `prebuilt`);
/// removed when dropped.
pub struct Image {
    /// Its tag.
    pub tag: String,
}

impl Image {
    /// Builds the image with `host` and `plugins` (files copied into
    /// `/plugins`) on [`base_image`], from a build context of its own.
    pub fn build(host: &Path, plugins: &[PathBuf]) -> Image {
        let base = base_image();
        let context = tempfile::tempdir().expect("a build context");
        let image = context.path().join("target/image");
        std::fs::create_dir_all(image.join("plugins")).expect("the context's directories");
        let place = |from: &Path, to: &Path| {
            if std::fs::hard_link(from, to).is_err() {
                std::fs::copy(from, to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
            }
        };
        place(host, &image.join("host"));
        for plugin in plugins {
            let name = plugin.file_name().expect("a plugin's file name");
            place(plugin, &image.join("plugins").join(name));
        }
        let tag = format!(
            "localhost/toolhost-test:{}-{}",
            std::process::id(),
            context
                .path()
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("x")
                .to_lowercase()
                .replace(|c: char| !c.is_ascii_alphanumeric(), "")
        );
        checked(
            podman()
                .arg("build")
                .args(sandbox_flags())
                .args(["--network", "none", "--target", "prebuilt"])
                .args(["--build-arg", &format!("BASE={base}")])
                .args([
                    "-f",
                    &crate::root().join("Dockerfile").display().to_string(),
                ])
                .args(["-t", &tag])
                .arg(context.path()),
            "podman build",
        );
        Image { tag }
    }

    /// Its size in bytes, as podman reports it.
    pub fn size(&self) -> u64 {
        let out = checked(
            podman().args(["image", "inspect", "--format", "{{.Size}}", &self.tag]),
            "podman image inspect",
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a size")
    }

    /// Runs the image detached with `args` (before the image name), its
    /// port 8080 published on a free loopback port, and waits until
    /// `/healthz` answers.
    pub fn run(&self, args: &[&str]) -> Running {
        let port = crate::free_port();
        let started = Instant::now();
        let out = checked(
            podman()
                .args(["run", "-d"])
                .args(sandbox_flags())
                .args(["-p", &format!("127.0.0.1:{port}:8080")])
                .args(args)
                .arg(&self.tag),
            "podman run",
        );
        let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let mut running = Running {
            id,
            url: format!("http://127.0.0.1:{port}/mcp"),
            port,
            ready_after: Duration::ZERO,
        };
        let deadline = started + Duration::from_secs(60);
        loop {
            if healthy(port) {
                running.ready_after = started.elapsed();
                return running;
            }
            assert!(
                Instant::now() < deadline,
                "the container did not answer /healthz within 60 s: {}",
                running.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = podman()
            .args(["rmi", "-f", &self.tag])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Whether `GET /healthz` on `port` answers 200.
pub fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    if stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.starts_with("HTTP/1.1 200")
}

/// A container running; removed when dropped.
pub struct Running {
    /// Its id.
    pub id: String,
    /// Its MCP endpoint on the host.
    pub url: String,
    /// Its published port on the host's loopback.
    pub port: u16,
    /// From `podman run` to the first `/healthz` that answered.
    pub ready_after: Duration,
}

impl Running {
    /// `podman exec` of `command` in it: its output.
    pub fn exec(&self, command: &[&str]) -> Output {
        podman()
            .arg("exec")
            .arg(&self.id)
            .args(command)
            .output()
            .expect("podman exec runs")
    }

    /// A `podman inspect --format` field of it.
    pub fn inspect(&self, format: &str) -> String {
        let out = checked(
            podman().args(["inspect", "--format", format, &self.id]),
            "podman inspect",
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Its log so far.
    pub fn logs(&self) -> String {
        podman()
            .args(["logs", &self.id])
            .output()
            .map(|o| {
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr)
                )
            })
            .unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = podman()
            .args(["rm", "-f", "-v", "-t", "1", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
