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
//!
//! [`Postgres::start_tls`] starts one that takes TLS connections only,
//! its certificate signed by a [`TestCa`] the test made:
//!
//! ```no_run
//! use toolhost_test_support::postgres::{Postgres, TestCa};
//!
//! let ca = TestCa::new("the tests' CA");
//! let db = Postgres::start_tls(&ca, &["127.0.0.1", "localhost"]);
//! let dir = tempfile::tempdir().unwrap();
//! let roots = ca.write(&dir.path().join("ca.pem"));
//! let url = format!("{}?sslmode=verify-full&sslrootcert={}", db.url(), roots.display());
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
    /// TLS only (see [`Postgres::start_tls`]).
    tls: bool,
}

/// A certificate authority made fresh by a test (rcgen, ECDSA P-256).
pub struct TestCa {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let key = rcgen::KeyPair::generate().expect("a CA key");
        TestCa {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).expect("a CA certificate"),
        }
    }

    /// Its certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Writes its certificate to `path`; returns `path`.
    pub fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.pem()).expect("the CA's file");
        path.to_owned()
    }

    /// A server certificate for `names` (host names or IP addresses) and
    /// its key, PEM.
    pub fn server(&self, names: &[&str]) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names).expect("server params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "toolhost test server");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(&params)
    }

    /// A client certificate for the database user `user` (its common
    /// name, as PostgreSQL's `cert` authentication reads it) and its key.
    pub fn client(&self, user: &str) -> (String, String) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, user);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&params)
    }

    fn sign(&self, params: &rcgen::CertificateParams) -> (String, String) {
        let key = rcgen::KeyPair::generate().expect("a key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
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
        let mut db = Postgres::made();
        db.restart();
        db
    }

    /// Makes a cluster that takes TLS connections only (a plain one is
    /// rejected), its certificate for `names` signed by `ca`, and starts
    /// its server. Any user connects to any database with TLS alone,
    /// except to `template1`, where `ca`'s client certificate for the user
    /// is needed too (PostgreSQL's `cert` authentication).
    pub fn start_tls(ca: &TestCa, names: &[&str]) -> Postgres {
        let mut db = Postgres::made();
        let (cert, key) = ca.server(names);
        let data = db.data();
        db.own_file(&data.join("server.crt"), &cert);
        db.own_file(&data.join("server.key"), &key);
        db.own_file(&data.join("root.crt"), &ca.pem());
        db.own_file(
            &data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl template1 all 127.0.0.1/32 cert\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostnossl all all 0.0.0.0/0 reject\n",
        );
        db.tls = true;
        db.restart();
        db
    }

    /// Writes `text` to `path`, readable by the server only (as
    /// PostgreSQL wants its key).
    fn own_file(&self, path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).expect("a file of the cluster's");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("its mode");
        if let Some((uid, gid)) = self.as_postgres {
            std::os::unix::fs::chown(path, Some(uid), Some(gid)).expect("its owner");
        }
    }

    /// A new cluster, not started.
    fn made() -> Postgres {
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
        let db = Postgres {
            dir,
            bin,
            port: free_port(),
            child: None,
            as_postgres,
            tls: false,
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
            .args(["-c", "fsync=off", "-c", "max_connections=50"])
            .args(if self.tls {
                &[
                    "-c",
                    "ssl=on",
                    "-c",
                    "ssl_cert_file=server.crt",
                    "-c",
                    "ssl_key_file=server.key",
                    "-c",
                    "ssl_ca_file=root.crt",
                ][..]
            } else {
                &[]
            })
            .arg("-k")
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
