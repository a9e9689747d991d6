//! A real PostgreSQL server for the tests of what replicas share: Debian's
//! `postgresql` package (its binaries under `/usr/lib/postgresql/N/bin`,
//! or `TOOLHOST_TEST_PG_BIN`), a fresh cluster in a temporary directory on
//! a free loopback port, trust authentication, stopped and removed when
//! dropped. PostgreSQL refuses to run as root: as root, the cluster is
//! made and run as the `postgres` user the package made.
//!
//! ```no_run
//! use toolhost_test_support::postgres::Postgres;
//!
//! let mut db = Postgres::start();
//! let url = db.url(); // postgresql://postgres@127.0.0.1:PORT/postgres
//! db.stop(); // the database is lost …
//! db.restart(); // … and back, with its data, on the same port
//! # let _ = url;
//! ```

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// A PostgreSQL server of the tests'.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    child: Option<Child>,
    /// The `postgres` user's uid and gid, when we are root.
    as_postgres: Option<(u32, u32)>,
}

/// The server binaries: `TOOLHOST_TEST_PG_BIN`, else the newest of
/// Debian's `/usr/lib/postgresql/N/bin`. A missing server is a clear
/// failure, never a skip.
fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("TOOLHOST_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("postgres").is_file())
        .max_by_key(|(v, _)| *v);
    match newest {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL's server is not installed: the tests of shared state need Debian's \
             `postgresql` package (`apt-get install postgresql`; `cargo xtask test` installs it), \
             or TOOLHOST_TEST_PG_BIN naming a directory with `initdb` and `postgres`"
        ),
    }
}

/// The uid and gid of the `postgres` user Debian's package made.
fn postgres_user() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&"postgres") && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .expect(
            "PostgreSQL refuses to run as root, and there is no `postgres` user to run it as \
             (Debian's `postgresql` package makes one)",
        )
}

impl Postgres {
    /// Makes a cluster and starts its server.
    pub fn start() -> Postgres {
        let bin = binaries();
        let dir = tempfile::Builder::new()
            .prefix("toolhost-pg-")
            .tempdir()
            .expect("a temporary directory");
        // Whether we are root: the owner of a directory we just made.
        let root = std::fs::metadata(dir.path())
            .is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
        let as_postgres = root.then(postgres_user);
        if as_postgres.is_some() {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status()
                .expect("chown runs");
            assert!(status.success(), "chown of the cluster's directory");
        }
        let mut db = Postgres {
            dir,
            bin,
            port: free_port(),
            child: None,
            as_postgres,
        };
        let out = db
            .command("initdb")
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(db.data())
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        db.restart();
        db
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A command of the server's, run as `postgres` when we are root
    /// (set directly, not through `runuser`, whose job control would stop
    /// with a stopped server).
    fn command(&self, program: &str) -> Command {
        let mut c = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.as_postgres {
            std::os::unix::process::CommandExt::uid(&mut c, uid);
            std::os::unix::process::CommandExt::gid(&mut c, gid);
            c.current_dir(self.dir.path());
        }
        c
    }

    /// Its connection URL.
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts the server again (after [`Postgres::stop`]) on the same port
    /// with the same data, and waits until it takes connections.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running already");
        let socket_dir = self.dir.path();
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("a log file");
        let child = self
            .command("postgres")
            .arg("-D")
            .arg(self.data())
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
            ])
            .args(["-c", "fsync=off", "-c", "max_connections=50", "-k"])
            .arg(socket_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        self.child = Some(child);
        let started = Instant::now();
        loop {
            let ready = self
                .command("pg_isready")
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "PostgreSQL did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (fast shutdown: connections are cut), keeping its
    /// data.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // `pg_ctl` signals the server itself (`runuser`, its parent as
            // root, ignores SIGINT).
            let stopped = self
                .command("pg_ctl")
                .args(["stop", "-m", "fast", "-w", "-t", "30", "-D"])
                .arg(self.data())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !stopped {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }

    /// Stops every process of the server (`SIGSTOP`) without closing a
    /// connection: a database that no longer answers, as behind a network
    /// partition. [`Postgres::thaw`] lets it go on.
    pub fn freeze(&self) {
        self.signal("-STOP");
    }

    /// Lets a [`frozen`](Postgres::freeze) server go on.
    pub fn thaw(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = std::fs::read_to_string(self.data().join("postmaster.pid"))
            .ok()
            .and_then(|t| t.lines().next().map(str::to_owned))
            .expect("the server's pid");
        let _ = Command::new("pkill").args([signal, "-P", &pid]).status();
        let _ = Command::new("kill").args([signal, &pid]).status();
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
