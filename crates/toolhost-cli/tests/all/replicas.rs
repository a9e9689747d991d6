//! Three `host serve --stateless --console` replicas behind HAProxy
//! (Debian's), with the approvals and the operator's queue in one
//! PostgreSQL (Debian's): calls from several clients while one replica is
//! killed and started again. Every call gets its result or an error the
//! client sees, an approval saved before lives on in the replica started
//! again, a revocation made with `host approvals` holds on every replica
//! within the bound deployment.md states, and an ask held by one replica
//! is answered on another's console. Then calls as MCP tasks (`[state]`
//! shares them): the replica running some is killed under load, the
//! tasks of idempotent tools finish on another, the others end failed
//! with the reason, none runs twice and none is lost; a task waiting on
//! the operator is answered on another replica's console, and every
//! console lists every replica's tasks and stops one another holds; a
//! task run again asks whom its caller's request named, and no one else.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_policy::approvals::{Answers, Approvals, NewApproval, Scope};
use toolhost_state::PostgresApprovals;
use toolhost_test_support::postgres::Postgres;

use crate::console::{request, sign_in};
use crate::shared_state::{console_queue_until, listed_at};
use crate::support::*;
use crate::tasks::{modern, start as start_task, try_modern, until};

/// How long a call may take before the client counts it lost.
const CALL_WAIT: Duration = Duration::from_secs(20);

/// `calculate` is asked, and asks are refused (`--asks deny`): only a
/// saved approval lets it run, but for the caller whose asks go to the
/// operator.
const POLICY: &str = "default = \"allow\"\n\n[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n";

/// The load's clients, a caller whose asks go to the operator, and the
/// operator.
const TOKENS: &str = "load-secret\ncaller-secret ask=operator\nop-secret role=operator\n";

/// [`TOKENS`] and two callers under the profile `careful` of
/// [`TASKS_POLICY`] (whose asks go to the caller, and to the operator).
const TASK_TOKENS: &str = "load-secret\ncaller-secret ask=operator\nasked-secret careful\n\
                           watched-secret careful ask=operator\nop-secret role=operator\n";

/// One replica: `host serve` on a port of its own, its log in `dir`.
struct Replica {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    /// What its config file has besides `[state]`.
    config: &'static str,
    policy: &'static str,
    tokens: &'static str,
}

impl Replica {
    fn start(dir: &Path, plugins: &Path, db: &Postgres, port: u16) -> Replica {
        Replica {
            port,
            dir: dir.to_owned(),
            child: None,
            config: "",
            policy: POLICY,
            tokens: TOKENS,
        }
        .started(plugins, db)
    }

    /// A replica of the task tests: [`TASKS`] in its config file besides
    /// `[state]`, [`TASKS_POLICY`], [`TASK_TOKENS`].
    fn of_tasks(dir: &Path, plugins: &Path, db: &Postgres, port: u16) -> Replica {
        Replica {
            port,
            dir: dir.to_owned(),
            child: None,
            config: TASKS,
            policy: TASKS_POLICY,
            tokens: TASK_TOKENS,
        }
        .started(plugins, db)
    }

    fn started(mut self, plugins: &Path, db: &Postgres) -> Replica {
        self.restart(plugins, db);
        self
    }

    /// Its log (the audit's lines included).
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join(format!("serve-{}.log", self.port)))
            .unwrap_or_default()
    }

    fn restart(&mut self, plugins: &Path, db: &Postgres) {
        std::fs::write(
            self.dir.join("toolhost.toml"),
            format!(
                "[state]\npostgres-env = \"TOOLHOST_STATE_URL\"\nstore = \"gate\"\n{}",
                self.config
            ),
        )
        .unwrap();
        std::fs::write(self.dir.join("policy.toml"), self.policy).unwrap();
        std::fs::write(self.dir.join("tokens"), self.tokens).unwrap();
        let log = std::fs::File::create(self.dir.join(format!("serve-{}.log", self.port))).unwrap();
        let child = host(&self.dir)
            .env("TOOLHOST_STATE_URL", db.url())
            .env("RUST_LOG", "warn,toolhost::audit=info")
            .arg("--plugins")
            .arg(plugins)
            .arg("--config")
            .arg(self.dir.join("toolhost.toml"))
            .arg("--policy")
            .arg(self.dir.join("policy.toml"))
            .args([
                "--no-watch",
                "serve",
                "--stateless",
                "--asks",
                "deny",
                "--console",
            ])
            .arg("--token-file")
            .arg(self.dir.join("tokens"))
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
                self.log()
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
    call_as(port, n, "load-secret")
}

/// [`call`] with the bearer token `token`.
fn call_as(port: u16, n: u64, token: &str) -> Outcome {
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
         MCP-Protocol-Version: 2025-06-18\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: {}\r\n\r\n{body}",
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

/// The address of `r`'s console and `/mcp`.
fn base(r: &Replica) -> String {
    format!("http://127.0.0.1:{}", r.port)
}

/// Where an ask of the operator's was held and answered.
struct AnsweredElsewhere {
    /// The index of the replica that held it.
    holder: usize,
    /// The index of the replica whose console answered it.
    other: usize,
    /// How long the other took to list it.
    listed_after: Duration,
}

/// The one ask waiting in the operator's queue: found on the console of
/// the replica that holds it (`sessions`: each replica's console session
/// and CSRF token, in order), listed as held elsewhere on the next
/// replica's, and allowed there.
fn allow_on_another_console(
    replicas: &[&Replica],
    sessions: &[(String, String)],
) -> AnsweredElsewhere {
    let asked = Instant::now();
    let (holder, id) = loop {
        let held = replicas.iter().enumerate().find_map(|(i, r)| {
            let (_, _, queue) = request(
                &base(r),
                "GET",
                "/console/part/queue",
                &[("Cookie", &sessions[i].0)],
                "",
            );
            listed_at(&queue, "here").map(|id| (i, id))
        });
        if let Some(found) = held {
            break found;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(30),
            "the ask is held nowhere"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let other = (holder + 1) % replicas.len();
    let (listed, listed_after) =
        console_queue_until(&base(replicas[other]), &sessions[other].0, |q| {
            listed_at(q, "elsewhere")
        });
    assert_eq!(listed, id, "the same ask on the other console");
    let (status, _, body) = request(
        &base(replicas[other]),
        "POST",
        &format!("/console/queue/{id}"),
        &[
            ("Cookie", &sessions[other].0),
            ("X-CSRF-Token", &sessions[other].1),
        ],
        "allow",
    );
    assert_eq!(status, 204, "{body}");
    AnsweredElsewhere {
        holder,
        other,
        listed_after,
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

    // A call whose asks go to the operator, through HAProxy: it waits on
    // the replica that took it, shows on every console, and is answered on
    // another replica's.
    let waiting = {
        let port = balancer.port;
        std::thread::spawn(move || call_as(port, 11, "caller-secret"))
    };
    let sessions: Vec<(String, String)> = replicas.iter().map(|r| sign_in(&base(r))).collect();
    let AnsweredElsewhere {
        holder,
        other,
        listed_after: after,
    } = allow_on_another_console(&replicas.iter().collect::<Vec<_>>(), &sessions);
    assert_eq!(waiting.join().unwrap(), Outcome::Result);
    eprintln!(
        "an ask held by replica {holder} was listed on replica {other}'s console after {after:?} \
         and answered there"
    );

    // A call that fails on one replica is listed on another's console,
    // with the replica it failed on.
    let body = r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"calculate","arguments":{"expr":"1"}}}"#;
    request(
        &base(&replicas[0]),
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("Authorization", "Bearer load-secret"),
        ],
        body,
    );
    let failed = Instant::now();
    loop {
        let (_, _, part) = request(
            &base(&replicas[1]),
            "GET",
            "/console/part/failures",
            &[("Cookie", &sessions[1].0)],
            "",
        );
        let elsewhere = part
            .split("<li data-replica=\"")
            .skip(1)
            .any(|li| !li.starts_with("here\"") && li.contains("invalid-arguments"));
        if elsewhere {
            break;
        }
        assert!(
            failed.elapsed() < Duration::from_secs(10),
            "replica 0's failure never listed on replica 1: {part}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "a failure on replica 0 was listed on replica 1's console after {:?}",
        failed.elapsed()
    );
}

/// The tools run as tasks, besides `[state]`.
const TASKS: &str = "[tasks]\ntools = [\"slow_compute\", \"slow_job\", \"confirm_delete\"]\n";

/// `confirm_delete` is asked (refused for the load's callers, the
/// operator's to answer for `caller-secret`'s); under `careful`,
/// `slow_compute` is asked too, of the caller unless its token says
/// otherwise.
const TASKS_POLICY: &str = "default = \"allow\"\n\n[[rules]]\ntool = \"confirm_delete\"\n\
     decision = \"ask\"\n\n[profiles.careful]\nask = \"client\"\n\
     [[profiles.careful.rules]]\ntool = \"slow_compute\"\ndecision = \"ask\"\n";

/// How long each task of the load works.
const TASK_SECONDS: u64 = 4;

/// The ids of the tasks whose audit line in `log` has `outcome`
/// (`task-created`, `task-resumed`, `task-failed-replica-lost`).
fn tasks_logged(log: &str, outcome: &str) -> Vec<String> {
    log.lines()
        .filter(|line| line.contains(outcome))
        .filter_map(|line| {
            let id = line.split(" task=").nth(1)?.split_whitespace().next()?;
            Some(id.trim_matches('"').to_owned())
        })
        .collect()
}

/// Polls the task `id` of `token`'s caller through `port` until it ends,
/// riding out what the balancer answers while a replica dies (an HTTP
/// error); its last `tasks/get` result. A JSON-RPC error (an unknown
/// task: a lost one) fails the test.
fn ended(port: u16, token: &str, id: &str) -> Value {
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    loop {
        let last = match try_modern(&base, token, "tasks/get", json!({"taskId": id}), true) {
            Ok(answer) => {
                assert!(answer.get("error").is_none(), "task {id} is lost: {answer}");
                let status = answer["result"]["status"].as_str().unwrap_or_default();
                if ["completed", "failed", "cancelled"].contains(&status) {
                    return answer["result"].clone();
                }
                answer.to_string()
            }
            Err(why) => why,
        };
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "task {id} never ended: {last}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn tasks_of_a_killed_replica_run_again_elsewhere_only_when_idempotent_and_none_is_lost_or_run_twice()
 {
    let db = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    copy_plugin(&fixtures_dir(), "tasks", &plugins);
    let replicas: Vec<Replica> = (0..3)
        .map(|i| {
            let d = dir.path().join(format!("replica-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            Replica::of_tasks(&d, &plugins, &db, free_port())
        })
        .collect();
    let balancer = Balancer::start(
        dir.path(),
        &replicas.iter().map(|r| r.port).collect::<Vec<_>>(),
    );
    let through = format!("http://127.0.0.1:{}", balancer.port);

    // Twelve tasks through HAProxy, an idempotent tool's and the other's
    // in turn, so that each replica holds some of each.
    let tasks: Vec<(String, &str)> = (0..12)
        .map(|i| {
            let tool = if i % 2 == 0 {
                "slow_compute"
            } else {
                "slow_job"
            };
            let id = start_task(
                &through,
                "load-secret",
                tool,
                json!({ "seconds": TASK_SECONDS }),
            );
            (id, tool)
        })
        .collect();
    let created: Vec<Vec<String>> = replicas
        .iter()
        .map(|r| tasks_logged(&r.log(), "task-created"))
        .collect();
    let holder = |id: &str| created.iter().position(|ids| ids.iter().any(|i| i == id));
    for (id, tool) in &tasks {
        assert!(holder(id).is_some(), "no replica made the {tool} task {id}");
    }
    let victim = (0..replicas.len())
        .find(|&r| {
            ["slow_compute", "slow_job"].iter().all(|tool| {
                tasks
                    .iter()
                    .any(|(id, t)| t == tool && holder(id) == Some(r))
            })
        })
        .unwrap_or_else(|| panic!("no replica holds tasks of both tools: {created:?}"));

    // Every task polled through HAProxy, and calls of a tool that is not a
    // task beside them, while the replica holding some is killed.
    let pollers: Vec<_> = tasks
        .iter()
        .map(|(id, _)| {
            let (port, id) = (balancer.port, id.clone());
            std::thread::spawn(move || ended(port, "load-secret", &id))
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, base) = (Arc::clone(&stop), through.clone());
        std::thread::spawn(move || {
            let (mut answered, mut refused) = (0usize, Vec::new());
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let args = json!({"name": "greet", "arguments": {"name": format!("n{n}")}});
                match try_modern(&base, "load-secret", "tools/call", args, true) {
                    Ok(answer) => {
                        assert_eq!(
                            answer["result"]["content"][0]["text"],
                            format!("Hello, n{n}!"),
                            "{answer}"
                        );
                        answered += 1;
                    }
                    Err(why) => refused.push(why.chars().take(120).collect::<String>()),
                }
            }
            (answered, refused)
        })
    };
    let mut replicas = replicas;
    std::thread::sleep(Duration::from_millis(300));
    let killed = Instant::now();
    replicas[victim].kill();
    let outcomes: Vec<Value> = pollers.into_iter().map(|p| p.join().unwrap()).collect();
    let over = killed.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (answered, refused) = load.join().unwrap();

    let mut resumed: Vec<String> = Vec::new();
    let mut not_run_again: Vec<String> = Vec::new();
    for r in &replicas {
        let log = r.log();
        resumed.extend(tasks_logged(&log, "task-resumed"));
        not_run_again.extend(tasks_logged(&log, "task-failed-replica-lost"));
    }
    for ((id, tool), outcome) in tasks.iter().zip(&outcomes) {
        let lost_with_victim = holder(id) == Some(victim);
        let text = outcome["result"]["content"][0]["text"].as_str();
        let runs_again = resumed.iter().filter(|r| *r == id).count();
        match (*tool, lost_with_victim) {
            ("slow_compute", true) => {
                assert_eq!(outcome["status"], "completed", "{id}: {outcome}");
                assert_eq!(text, Some("computed after 4 s"), "{id}: {outcome}");
                assert_eq!(runs_again, 1, "{id} ran again {runs_again} times");
            }
            (_, true) => {
                assert_eq!(outcome["status"], "failed", "{id}: {outcome}");
                let why = outcome["statusMessage"].as_str().unwrap_or_default();
                assert!(why.contains("was not run again"), "{id}: {outcome}");
                assert_eq!(runs_again, 0, "{id}, not idempotent, ran again");
                assert!(not_run_again.contains(id), "{id}: no audit of its end");
            }
            (tool, false) => {
                assert_eq!(outcome["status"], "completed", "{id}: {outcome}");
                let expected = if tool == "slow_compute" {
                    "computed after 4 s"
                } else {
                    "the job ran for 4 s"
                };
                assert_eq!(text, Some(expected), "{id}: {outcome}");
                assert_eq!(runs_again, 0, "{id}, whose replica lives, ran again");
            }
        }
    }
    assert!(answered > 10, "too few calls beside the tasks: {refused:?}");
    assert!(
        refused.len() * 20 < answered + refused.len(),
        "more than 5% of the calls beside the tasks failed: {refused:?}"
    );
    eprintln!(
        "replica {victim} killed holding {} of 12 tasks: all ended {over:?} after the kill \
         ({} run again, {} failed as not idempotent); {answered} calls beside them, {} refused \
         by the balancer",
        tasks
            .iter()
            .filter(|(id, _)| holder(id) == Some(victim))
            .count(),
        resumed.len(),
        not_run_again.len(),
        refused.len()
    );

    // Every live replica's console lists the twelve tasks, whichever
    // replica made them or took them over, each with its holder.
    let alive: Vec<&Replica> = replicas.iter().filter(|r| r.child.is_some()).collect();
    let sessions: Vec<(String, String)> = alive.iter().map(|r| sign_in(&base(r))).collect();
    let tasks_on = |i: usize| {
        let cookie = [("Cookie", sessions[i].0.as_str())];
        let (status, _, part) = request(&base(alive[i]), "GET", "/console/part/tasks", &cookie, "");
        assert_eq!(status, 200, "{part}");
        part
    };
    for i in 0..alive.len() {
        let part = tasks_on(i);
        for (id, _) in &tasks {
            assert!(
                part.contains(&format!("data-id=\"{id}\"")),
                "replica {i}'s console does not list {id}: {part}"
            );
        }
        assert!(part.contains("data-replica=\"here\""), "{part}");
        assert!(!part.contains("cannot be read"), "{part}");
    }

    // A task held by one replica is stopped from another's console: it
    // ends cancelled, as its caller's own `tasks/cancel` would end it.
    let long = start_task(
        &through,
        "load-secret",
        "slow_job",
        json!({ "seconds": 30 }),
    );
    let stopper = (0..alive.len())
        .find(|&i| {
            let part = tasks_on(i);
            part.split("<tr").any(|row| {
                row.contains(&format!("data-id=\"{long}\""))
                    && !row.contains("data-replica=\"here\"")
            })
        })
        .expect("a console that lists the task as another replica's");
    let (status, _, body) = request(
        &base(alive[stopper]),
        "POST",
        &format!("/console/tasks/{long}/cancel"),
        &[
            ("Cookie", &sessions[stopper].0),
            ("X-CSRF-Token", &sessions[stopper].1),
        ],
        "",
    );
    assert_eq!(status, 204, "{body}");
    let stopped = ended(balancer.port, "load-secret", &long);
    assert_eq!(stopped["status"], "cancelled", "{stopped}");

    // A task of a caller whose asks go to the operator waits in the queue
    // of the replica that holds it, shows on the others' consoles, and is
    // answered on one of those.
    let id = start_task(
        &through,
        "caller-secret",
        "confirm_delete",
        json!({"filename": "c.txt"}),
    );
    allow_on_another_console(&alive, &sessions);
    let done = ended(balancer.port, "caller-secret", &id);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "deleted c.txt",
        "{done}"
    );
}

/// The answer of `token`'s caller to the one question of its task `id`
/// (an approval), once the task asks it through `base`; the question.
fn approve_task(base: &str, token: &str, id: &str) -> Value {
    let waiting = until(base, token, id, "input_required");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let requests = waiting["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, question) = requests.iter().next().unwrap();
    let ack = modern(
        base,
        token,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approve": true}}}}),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    question.clone()
}

#[test]
fn a_task_run_again_on_another_replica_asks_whom_its_callers_request_named_and_no_one_else() {
    let db = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    copy_plugin(&fixtures_dir(), "tasks", &plugins);
    let mut replicas: Vec<Replica> = (0..2)
        .map(|i| {
            let d = dir.path().join(format!("replica-{i}"));
            std::fs::create_dir_all(&d).unwrap();
            Replica::of_tasks(&d, &plugins, &db, free_port())
        })
        .collect();
    let (a, b) = (base(&replicas[0]), base(&replicas[1]));
    let sessions: Vec<(String, String)> = replicas.iter().map(|r| sign_in(&base(r))).collect();
    let work = json!({"seconds": 6});

    // Both tasks on A, each approved as its request says: the caller's
    // through the task's input, the operator's on a console.
    let mine = start_task(&a, "asked-secret", "slow_compute", work.clone());
    approve_task(&a, "asked-secret", &mine);
    let theirs = start_task(&a, "watched-secret", "slow_compute", work);
    let answered = allow_on_another_console(&[&replicas[0], &replicas[1]], &sessions);
    assert_eq!(answered.holder, 0, "the operator's question is held by A");
    // Both run on A now (the operator's answer reaches A within a
    // notification); A dies.
    std::thread::sleep(Duration::from_millis(1000));
    replicas[0].kill();

    // On B, once A's lease ran out: the answers given on A approved the
    // runs that stopped, so each question is asked again, of whom it was
    // asked before. The caller's, as the task's input, answered by it
    // alone.
    let question = approve_task_refusing_others(&b, &mine);
    let text = question["params"]["message"].as_str().unwrap_or_default();
    assert!(text.contains("slow_compute"), "{question}");
    // The operator's, in the queue (B holds it now): never its caller's
    // to answer, so its task shows it no question.
    let (id, _) = console_queue_until(&b, &sessions[1].0, |q| listed_at(q, "here"));
    let shown = modern(&b, "watched-secret", "tasks/get", json!({"taskId": theirs}));
    assert_eq!(shown["result"]["status"], "working", "{shown}");
    assert!(shown["result"].get("inputRequests").is_none(), "{shown}");
    let (status, _, body) = request(
        &b,
        "POST",
        &format!("/console/queue/{id}"),
        &[("Cookie", &sessions[1].0), ("X-CSRF-Token", &sessions[1].1)],
        "allow",
    );
    assert_eq!(status, 204, "{body}");

    for (id, token) in [(&mine, "asked-secret"), (&theirs, "watched-secret")] {
        let done = ended(replicas[1].port, token, id);
        assert_eq!(done["status"], "completed", "{id}: {done}");
        assert_eq!(
            done["result"]["content"][0]["text"], "computed after 6 s",
            "{id}: {done}"
        );
    }
    let resumed = tasks_logged(&replicas[1].log(), "task-resumed");
    for id in [&mine, &theirs] {
        assert_eq!(
            resumed.iter().filter(|r| *r == id).count(),
            1,
            "{resumed:?}"
        );
    }
}

/// [`approve_task`] on the task `id` of `asked-secret`'s, after checking
/// that another caller can neither see nor answer its question.
fn approve_task_refusing_others(base: &str, id: &str) -> Value {
    let waiting = until(base, "asked-secret", id, "input_required");
    assert_eq!(
        waiting["status"], "input_required",
        "asked again: {waiting}"
    );
    let key = waiting["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .unwrap_or_default();
    let other = modern(
        base,
        "watched-secret",
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approve": true}}}}),
    );
    assert_eq!(other["error"]["code"], -32602, "{other}");
    approve_task(base, "asked-secret", id)
}
