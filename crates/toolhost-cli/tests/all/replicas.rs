//! Three `host serve --stateless` replicas behind HAProxy (Debian's), with
//! the approvals in one PostgreSQL (Debian's): calls from several clients
//! while one replica is killed and started again. Every call gets its
//! result or an error the client sees, an approval saved before lives on in
//! the replica started again, and a revocation made with `host approvals`
//! holds on every replica within the bound deployment.md states.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use toolhost_policy::approvals::{Answers, Approvals, NewApproval, Scope};
use toolhost_state::PostgresApprovals;
use toolhost_test_support::postgres::Postgres;

use crate::support::*;

/// How long a call may take before the client counts it lost.
const CALL_WAIT: Duration = Duration::from_secs(20);

/// `calculate` is asked, and asks are refused (`--asks deny`): only a
/// saved approval lets it run.
const POLICY: &str = "default = \"allow\"\n\n[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n";

/// One replica: `host serve` on a port of its own, its log in `dir`.
struct Replica {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl Replica {
    fn start(dir: &Path, plugins: &Path, db: &Postgres, port: u16) -> Replica {
        let mut r = Replica {
            port,
            dir: dir.to_owned(),
            child: None,
        };
        r.restart(plugins, db);
        r
    }

    fn restart(&mut self, plugins: &Path, db: &Postgres) {
        std::fs::write(
            self.dir.join("toolhost.toml"),
            "[state]\npostgres-env = \"TOOLHOST_STATE_URL\"\nstore = \"gate\"\n",
        )
        .unwrap();
        std::fs::write(self.dir.join("policy.toml"), POLICY).unwrap();
        let log = std::fs::File::create(self.dir.join(format!("serve-{}.log", self.port))).unwrap();
        let child = host(&self.dir)
            .env("TOOLHOST_STATE_URL", db.url())
            .arg("--plugins")
            .arg(plugins)
            .arg("--config")
            .arg(self.dir.join("toolhost.toml"))
            .arg("--policy")
            .arg(self.dir.join("policy.toml"))
            .args(["--no-watch", "serve", "--stateless", "--asks", "deny"])
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        while !toolhost_test_support::container::healthy(self.port) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "replica {} did not start: {}",
                self.port,
                std::fs::read_to_string(self.dir.join(format!("serve-{}.log", self.port)))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills it at once (SIGKILL): the calls it holds are cut.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// HAProxy in front of `backends`, checking each one's `/healthz`; stopped
/// when dropped.
struct Balancer {
    port: u16,
    child: Child,
}

impl Balancer {
    fn start(dir: &Path, backends: &[u16]) -> Balancer {
        let haproxy = ["/usr/sbin/haproxy", "/usr/bin/haproxy"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .expect("HAProxy is missing: run the tests with `cargo xtask test`, which installs Debian's haproxy");
        let port = free_port();
        let mut cfg = format!(
            "global\n  maxconn 1024\n\
             defaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n  \
             retries 3\n  option redispatch\n\
             frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
             backend replicas\n  balance roundrobin\n  option httpchk\n  \
             http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1\n"
        );
        for (i, b) in backends.iter().enumerate() {
            cfg.push_str(&format!(
                "  server r{i} 127.0.0.1:{b} check inter 100ms fall 1 rise 2\n"
            ));
        }
        let file = dir.join("haproxy.cfg");
        std::fs::write(&file, cfg).unwrap();
        let child = Command::new(haproxy)
            .arg("-f")
            .arg(&file)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy starts");
        let started = Instant::now();
        while !toolhost_test_support::container::healthy(port) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "HAProxy did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Balancer { port, child }
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one call came to, as its client saw it.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// The right result.
    Result,
    /// A result that says the call was refused (asked, and asks denied).
    Refused,
    /// An HTTP error status (e.g. HAProxy's 502 for a call cut by a kill).
    Status(u16),
    /// The connection failed or was cut before an answer.
    Cut(String),
    /// No answer within [`CALL_WAIT`]: lost.
    Lost,
    /// A result that is not this call's.
    Wrong(String),
}

/// `calculate` of `{n}+0` on `port`, as an MCP client over plain HTTP.
fn call(port: u16, n: u64) -> Outcome {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"calculate","arguments":{{"expression":"{n}+0"}}}}}}"#
    );
    let mut stream = match TcpStream::connect(("127.0.0.1", port)) {
        Ok(s) => s,
        Err(e) => return Outcome::Cut(e.to_string()),
    };
    let _ = stream.set_read_timeout(Some(CALL_WAIT));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if let Err(e) = stream.write_all(request.as_bytes()) {
        return Outcome::Cut(e.to_string());
    }
    let mut answer = Vec::new();
    if let Err(e) = stream.read_to_end(&mut answer) {
        return if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ) {
            Outcome::Lost
        } else {
            Outcome::Cut(e.to_string())
        };
    }
    let answer = String::from_utf8_lossy(&answer);
    if answer.is_empty() {
        return Outcome::Cut("closed with no answer".into());
    }
    let status: u16 = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if status != 200 {
        return Outcome::Status(status);
    }
    let id = format!(r#""id":{n},"#);
    if !answer.contains(&id) {
        return Outcome::Wrong(answer.into_owned());
    }
    if answer.contains(r#""isError":true"#) {
        return if answer.contains("this call needs an approval") {
            Outcome::Refused
        } else {
            Outcome::Wrong(answer.into_owned())
        };
    }
    if answer.contains(&format!(r#""text":"{n}""#)) {
        Outcome::Result
    } else {
        Outcome::Wrong(answer.into_owned())
    }
}

#[test]
fn three_replicas_behind_haproxy_lose_no_call_or_approval_when_one_dies_and_a_revocation_holds_on_all()
 {
    let db = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    copy_plugin(&plugins_dir(), "calc", &plugins);
    // The plugin's identity, as the lock file records it.
    let sum = Command::new("sha256sum")
        .arg(plugins.join("calc.wasm"))
        .output()
        .unwrap();
    let digest = format!(
        "sha256:{}",
        String::from_utf8_lossy(&sum.stdout)
            .split_whitespace()
            .next()
            .unwrap()
    );
    let mut replicas: Vec<Replica> = (0..3)
        .map(|i| {
            let d = dir.path().join(format!("replica-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            Replica::start(&d, &plugins, &db, free_port())
        })
        .collect();
    let balancer = Balancer::start(
        dir.path(),
        &replicas.iter().map(|r| r.port).collect::<Vec<_>>(),
    );

    // Asked, and asks are refused: no replica runs it yet.
    for r in &replicas {
        assert_eq!(call(r.port, 7), Outcome::Refused, "replica {}", r.port);
    }
    // An operator's "allow always" saved through one replica (its store).
    let store = Approvals::with_store(Arc::new(
        PostgresApprovals::connect(&db.url(), "gate").unwrap(),
    ));
    let id = store
        .save(NewApproval {
            tool: "calculate".into(),
            plugin: "calc".into(),
            digest,
            scope: Scope::AnyArguments,
            profile: None,
            answers: Answers::Everyone,
            who: "ana".into(),
            from: "console".into(),
            expires: None,
        })
        .unwrap();
    let started = Instant::now();
    while replicas.iter().any(|r| call(r.port, 8) != Outcome::Result) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the approval never held on every replica: {:?}\n{}",
            replicas.iter().map(|r| call(r.port, 8)).collect::<Vec<_>>(),
            std::fs::read_to_string(
                replicas[0]
                    .dir
                    .join(format!("serve-{}.log", replicas[0].port))
            )
            .unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // Load from four clients through HAProxy; replica 1 killed after a
    // second and started again a second later.
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4u64)
        .map(|c| {
            let stop = Arc::clone(&stop);
            let port = balancer.port;
            std::thread::spawn(move || {
                let mut outcomes = Vec::new();
                let mut n = 1_000_000 * (c + 1);
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    outcomes.push(call(port, n));
                }
                outcomes
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    replicas[1].kill();
    std::thread::sleep(Duration::from_secs(1));
    let replica_dir = replicas[1].dir.clone();
    let port = replicas[1].port;
    replicas[1] = Replica::start(&replica_dir, &plugins, &db, port);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let outcomes: Vec<Outcome> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    let results = outcomes.iter().filter(|o| **o == Outcome::Result).count();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for o in &outcomes {
        let kind = match o {
            Outcome::Result => continue,
            Outcome::Status(s) => format!("HTTP {s}"),
            Outcome::Cut(why) => format!("cut: {why}"),
            other => format!("{other:?}").chars().take(300).collect(),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    let errors: usize = kinds.values().sum();
    eprintln!(
        "{} calls through HAProxy: {results} results, {errors} errors the client saw: {kinds:?}",
        outcomes.len()
    );
    assert!(
        !outcomes
            .iter()
            .any(|o| matches!(o, Outcome::Lost | Outcome::Wrong(_) | Outcome::Refused)),
        "a call was lost, answered wrongly or refused: {kinds:?}"
    );
    assert!(results > 100, "too few calls went through: {kinds:?}");
    assert!(
        errors * 20 < outcomes.len(),
        "more than 5% of the calls failed: {kinds:?}"
    );
    // The replica started again knows the approval (from the database).
    assert_eq!(call(replicas[1].port, 9), Outcome::Result);

    // Revoked with `host approvals` on one machine: every replica asks
    // again (refused here) within two polls.
    let config = replicas[0].dir.join("toolhost.toml");
    let revoked = Instant::now();
    let o = host(dir.path())
        .env("TOOLHOST_STATE_URL", db.url())
        .arg("--config")
        .arg(&config)
        .args(["approvals", "revoke", &id])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut held = Vec::new();
    for r in &replicas {
        while call(r.port, 10) != Outcome::Refused {
            assert!(
                revoked.elapsed() < Duration::from_secs(2),
                "the revocation did not hold on replica {} within 2 s",
                r.port
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        held.push(revoked.elapsed());
    }
    eprintln!(
        "the revocation held on the three replicas after {held:?} (from the start of `host approvals revoke`)"
    );
}
