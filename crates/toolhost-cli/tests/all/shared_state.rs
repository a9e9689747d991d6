//! `[state]`: saved approvals and the operator's queue in a PostgreSQL
//! database that replicas share (a real server, Debian's, through
//! `toolhost_test_support::postgres`).

use std::sync::Arc;

use toolhost_policy::approvals::{Answers, Approvals, NewApproval, Scope};
use toolhost_state::PostgresApprovals;
use toolhost_test_support::postgres::Postgres;

use crate::console::{request, sign_in};
use crate::mcp::{host_args, serve};
use crate::support::{host, plugins_dir};

#[test]
fn host_approvals_lists_and_revokes_the_approvals_in_the_shared_database() {
    let db = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(
        &config,
        "[state]\npostgres-env = \"TOOLHOST_STATE_URL\"\nstore = \"gate\"\n",
    )
    .unwrap();
    // Another replica saved an approval.
    let replica = Approvals::with_store(Arc::new(
        PostgresApprovals::connect(&db.url(), "gate").unwrap(),
    ));
    let id = replica
        .save(NewApproval {
            tool: "read_file".into(),
            plugin: "fs".into(),
            digest: "sha256:ab".into(),
            scope: Scope::AnyArguments,
            profile: None,
            answers: Answers::User,
            who: "ana".into(),
            from: "console".into(),
            expires: None,
        })
        .unwrap();
    let run = |args: &[&str]| {
        host(dir.path())
            .env("TOOLHOST_STATE_URL", db.url())
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["approvals", "list", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed[0]["tool"], "read_file");
    let o = run(&["approvals", "revoke", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The replica learns of the revocation when the database tells it
    // (`NOTIFY`, milliseconds; at the latest `POLL` after): it is not
    // there the instant the other process exits.
    let started = std::time::Instant::now();
    while !replica.list().unwrap().is_empty() {
        assert!(
            started.elapsed() < 10 * toolhost_state::POLL,
            "revoked in the database, yet the replica still lists it"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = run(&["approvals", "list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("no saved approvals (store `gate` of postgresql://127.0.0.1:"),
        "{out}"
    );
}

#[test]
fn a_state_table_whose_variable_is_unset_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, "[state]\npostgres-env = \"NO_SUCH_VAR_HERE\"\n").unwrap();
    let o = host(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["approvals", "list"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NO_SUCH_VAR_HERE is not set"), "{err}");
}

/// The part of B's console that lists the queue, until `find` finds what
/// it waits for in it (at most 30 s).
pub(crate) fn console_queue_until(
    base: &str,
    session: &str,
    find: impl Fn(&str) -> Option<String>,
) -> (String, std::time::Duration) {
    let started = std::time::Instant::now();
    loop {
        let (status, _, queue) = request(
            base,
            "GET",
            "/console/part/queue",
            &[("Cookie", session)],
            "",
        );
        assert_eq!(status, 200, "{queue}");
        if let Some(found) = find(&queue) {
            return (found, started.elapsed());
        }
        assert!(
            started.elapsed().as_secs() < 30,
            "not on the console: {queue}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The id of the first ask the queue's part lists at `place`.
pub(crate) fn listed_at(queue: &str, place: &str) -> Option<String> {
    listed_at_except(queue, place, "")
}

/// The id of the first ask listed at `place` that is not `except`.
fn listed_at_except(queue: &str, place: &str, except: &str) -> Option<String> {
    queue
        .split("<article class=\"pending\" ")
        .skip(1)
        .find_map(|a| {
            let id = a.split("data-id=\"").nth(1)?.split('"').next()?;
            (id != except && a.contains(&format!("data-place=\"{place}\""))).then(|| id.to_owned())
        })
}

#[test]
fn two_replicas_share_the_operators_queue_an_ask_on_one_is_answered_on_the_others_console() {
    let db = Postgres::start();
    let shared = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = shared.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let policy = write(
        "policy.toml",
        "default = \"allow\"\n[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n",
    );
    let tokens = write(
        "tokens",
        "caller-secret ask=operator\nop-secret role=operator\n",
    );
    let config = write(
        "toolhost.toml",
        &format!("[state]\npostgres = \"{}\"\nstore = \"gate\"\n", db.url()),
    );
    let plugins = plugins_dir().display().to_string();
    let replica = |lock_dir: &std::path::Path| {
        serve(&host_args(
            lock_dir,
            &[
                "--config",
                &config,
                "--plugins",
                &plugins,
                "--policy",
                &policy,
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &tokens,
                "--console",
                "--stateless",
            ],
        ))
    };
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = replica(dir_a.path());
    let b = replica(dir_b.path());
    let (session, csrf) = sign_in(&b.base);
    // A caller's call through A waits for the operator.
    let call = |base: String| {
        std::thread::spawn(move || {
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"2*(3+4)"}}}"#;
            request(
                &base,
                "POST",
                "/mcp",
                &[
                    ("Content-Type", "application/json"),
                    ("Accept", "application/json, text/event-stream"),
                    ("Authorization", "Bearer caller-secret"),
                ],
                body,
            )
        })
    };
    let waiting = call(a.base.clone());
    // B's console lists it, held elsewhere; B's operator allows it.
    let (id, listed) = console_queue_until(&b.base, &session, |q| listed_at(q, "elsewhere"));
    let answered = std::time::Instant::now();
    let (status, _, body) = request(
        &b.base,
        "POST",
        &format!("/console/queue/{id}"),
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "allow",
    );
    assert_eq!(status, 204, "{body}");
    // Answered on B: B's console no longer lists it, at once (not only
    // after the database's notification makes B read its list again).
    let (status, _, queue) = request(
        &b.base,
        "GET",
        "/console/part/queue",
        &[("Cookie", &session)],
        "",
    );
    assert_eq!(status, 200, "{queue}");
    assert!(
        !queue.contains(&format!("data-id=\"{id}\"")),
        "the answered ask is still listed on B: {queue}"
    );
    let (status, _, result) = waiting.join().unwrap();
    let released = answered.elapsed();
    assert_eq!(status, 200, "{result}");
    assert!(
        result.contains(r#""text":"14""#) && !result.contains(r#""isError":true"#),
        "{result}"
    );
    eprintln!(
        "listed on B's console after {listed:?}; B's answer released A's call after {released:?}"
    );

    // A dies with a call waiting: B shows it gone, and refuses to answer it.
    let answered_id = id;
    let _orphan = call(a.base.clone());
    let (id, _) = console_queue_until(&b.base, &session, |q| {
        listed_at_except(q, "elsewhere", &answered_id)
    });
    drop(a);
    let (gone, after) = console_queue_until(&b.base, &session, |q| listed_at(q, "gone"));
    assert_eq!(gone, id);
    eprintln!("shown gone on B's console {after:?} after A was killed");
    let (status, _, body) = request(
        &b.base,
        "POST",
        &format!("/console/queue/{id}"),
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "allow",
    );
    assert_eq!(status, 410, "{body}");
    assert!(body.contains("gone"), "{body}");
}

/// A replica whose database stops answering (`SIGSTOP`: the connection
/// stays open and nothing replies, as behind a network partition) goes on
/// answering plain calls and `/healthz` as fast as before while calls
/// that policy asks about are waiting: looking up a saved approval never
/// waits for the database (it finds none, and the call is asked), and
/// nothing holds a worker meanwhile. Two workers and four asks at once,
/// enough to hold them all if a lookup waited.
#[test]
fn a_silent_database_holds_up_neither_plain_calls_nor_the_liveness_probe() {
    let db = Postgres::start();
    let shared = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = shared.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let policy = write(
        "policy.toml",
        "default = \"allow\"\n[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n",
    );
    let tokens = write(
        "tokens",
        "caller-secret ask=operator\nop-secret role=operator\n",
    );
    let config = write(
        "toolhost.toml",
        &format!("[state]\npostgres = \"{}\"\nstore = \"gate\"\n", db.url()),
    );
    let plugins = plugins_dir().display().to_string();
    let lock_dir = tempfile::tempdir().unwrap();
    let served = crate::mcp::serve_with_env(
        &host_args(
            lock_dir.path(),
            &[
                "--config",
                &config,
                "--plugins",
                &plugins,
                "--policy",
                &policy,
                "--no-watch",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                &tokens,
                "--console",
                "--stateless",
            ],
        ),
        &[("TOKIO_WORKER_THREADS", "2".to_owned())],
    );
    let base = served.base.clone();
    let call = |base: &str, body: &str| {
        request(
            base,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Authorization", "Bearer caller-secret"),
            ],
            body,
        )
    };
    const PLAIN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"word_count","arguments":{"text":"one two three"}}}"#;
    const ASKED: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"2*(3+4)"}}}"#;
    // A plain call and the probe, 10 times each: how long they took.
    let plain_and_probe = || {
        let started = std::time::Instant::now();
        for _ in 0..10 {
            let (status, _, body) = call(&base, PLAIN);
            assert_eq!(status, 200, "{body}");
            assert!(
                body.contains(r#""result""#) && !body.contains(r#""isError":true"#),
                "{body}"
            );
            let (status, _, body) = request(&base, "GET", "/healthz", &[], "");
            assert_eq!(status, 200, "{body}");
        }
        started.elapsed()
    };
    plain_and_probe();
    // The database stops answering; after two polls the replica no
    // longer trusts what it last read (before, each lookup then waited
    // for the database).
    db.freeze();
    std::thread::sleep(2 * toolhost_state::POLL + toolhost_state::POLL / 2);
    let alone = plain_and_probe();
    let asks: Vec<_> = (0..4)
        .map(|_| {
            let base = base.clone();
            std::thread::spawn(move || call(&base, ASKED))
        })
        .collect();
    let beside_asks = plain_and_probe();
    let still_waiting = asks.iter().filter(|a| !a.is_finished()).count();
    db.thaw();
    drop(served);
    for ask in asks {
        let _ = ask.join();
    }
    eprintln!("10 plain calls and probes: {alone:?} alone, {beside_asks:?} beside 4 asks");
    assert_eq!(still_waiting, 4, "the asks were not waiting all along");
    assert!(
        beside_asks < 10 * alone,
        "asks waiting on a silent database held up plain calls and the probe: \
         {beside_asks:?} against {alone:?}"
    );
}
