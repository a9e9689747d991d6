//! A real OCI registry on loopback: Debian's `docker-registry` (the CNCF
//! distribution registry, 2.8), which `cargo xtask test` installs and names
//! with `TOOLHOST_TEST_REGISTRY`. A missing binary fails the test.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The registry binary: `TOOLHOST_TEST_REGISTRY`, else `docker-registry`
/// on the PATH. Missing, it fails the test, saying how to install it.
pub fn registry_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TOOLHOST_TEST_REGISTRY") {
        return PathBuf::from(path);
    }
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("docker-registry"))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "docker-registry is missing: run the tests with `cargo xtask test` (it installs \
             Debian's docker-registry package), or `apt-get install docker-registry`"
        )
    })
}

/// A registry serving plain HTTP on `127.0.0.1:PORT`, its storage in a
/// temporary directory. Stopped when dropped.
pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub address: String,
    /// The filesystem storage's root.
    pub storage: PathBuf,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port and waits until `/v2/` answers.
    pub fn start() -> Registry {
        let binary = registry_binary();
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        let port = crate::free_port();
        let address = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
                 http:\n  addr: {address}\n",
                storage.display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(&binary)
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let mut registry = Registry {
            address,
            storage,
            child,
            _dir: dir,
        };
        registry.wait_ready();
        registry
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "docker-registry exited ({status}) before answering:\n{}",
                    self.log()
                );
            }
            if self
                .get("/v2/")
                .is_some_and(|r| r.starts_with("HTTP/1.1 200"))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not answer /v2/ within 20 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the registry logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("registry.log")).unwrap_or_default()
    }

    /// A plain `GET path` on the registry (accepting OCI manifests): the
    /// whole response, or `None` when it does not answer.
    pub fn get(&self, path: &str) -> Option<String> {
        let mut s = TcpStream::connect(&self.address).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: application/vnd.oci.image.manifest.v1+json\r\n\
             Connection: close\r\n\r\n",
            self.address
        )
        .ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    }

    /// Where the registry stores the blob `sha256:HEX` (to tamper with it).
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        blob_path(&self.storage, hex)
    }
}

fn blob_path(storage: &Path, hex: &str) -> PathBuf {
    storage
        .join("docker/registry/v2/blobs/sha256")
        .join(&hex[..2])
        .join(hex)
        .join("data")
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
