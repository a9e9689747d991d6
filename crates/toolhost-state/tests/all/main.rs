//! Saved approvals shared by replicas through a real PostgreSQL server
//! (Debian's, started by `toolhost_test_support::postgres`): each
//! "replica" is a store of its own with its own connection, as two
//! `host serve` processes would have.

use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_policy::approvals::{
    Answers, Approvals, ApprovalsError, Lookup, NewApproval, Scope, Store,
};
use toolhost_state::PostgresApprovals;
use toolhost_test_support::postgres::Postgres;

fn replica(db: &Postgres, name: &str) -> Approvals {
    let store = PostgresApprovals::connect(&db.url(), name).expect("a connection string");
    let started = Instant::now();
    while !store.connected() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no connection: {}",
            db.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Approvals::with_store(std::sync::Arc::new(store))
}

fn approval(tool: &str, args: serde_json::Value) -> NewApproval {
    NewApproval {
        tool: tool.into(),
        plugin: "fs".into(),
        digest: "sha256:ab".into(),
        scope: Scope::Arguments(args),
        profile: None,
        answers: Answers::User,
        who: "ana".into(),
        from: "operator".into(),
        expires: None,
    }
}

/// Waits until `f` holds, at most 10 s; how long it took.
fn within(f: impl Fn() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if f() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    None
}

#[test]
fn an_approval_saved_through_one_replica_answers_on_another_and_its_revocation_holds_on_both() {
    let db = Postgres::start();
    let (a, b) = (replica(&db, "main"), replica(&db, "main"));
    let args = json!({"path": "notes.txt"});
    let call = Lookup::new("read_file", "sha256:ab", &args);
    assert!(b.find(&call).is_none());
    let id = a.save(approval("read_file", args.clone())).unwrap();
    let seen = within(|| b.find(&call).as_deref() == Some(id.as_str()));
    assert!(seen.is_some(), "the other replica never saw the approval");
    assert!(a.revoke(&id).unwrap());
    let gone = within(|| b.find(&call).is_none());
    assert!(
        gone.is_some(),
        "the revocation never held on the other replica"
    );
    eprintln!("saved seen after {seen:?}, revocation held after {gone:?}");
    // A store of another name shares the table, not the approvals.
    let other = replica(&db, "staging");
    a.save(approval("read_file", args)).unwrap();
    assert!(other.list().unwrap().is_empty());
}

#[test]
fn replicas_saving_at_once_lose_no_approval_and_give_no_id_twice() {
    let db = Postgres::start();
    let replicas: Vec<Approvals> = (0..3).map(|_| replica(&db, "main")).collect();
    std::thread::scope(|s| {
        for (r, store) in replicas.iter().enumerate() {
            s.spawn(move || {
                for i in 0..15 {
                    store
                        .save(approval("read_file", json!({"replica": r, "i": i})))
                        .unwrap();
                }
            });
        }
    });
    // What the database holds, read by a replica that connects now.
    let all = replica(&db, "main").list().unwrap();
    assert_eq!(all.len(), 45, "{all:#?}");
    // Each replica's copy catches up when the database tells it (its own
    // last save may have come before the others' last ones).
    for r in &replicas {
        assert!(
            within(|| r.list().is_ok_and(|l| l == all)).is_some(),
            "a replica never saw every save"
        );
    }
    let mut ids: Vec<&str> = all.iter().map(|a| a.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 45, "ids given twice");
}

#[test]
fn a_replica_that_loses_the_database_asks_instead_of_allowing_and_says_why_then_recovers() {
    let mut db = Postgres::start();
    let a = replica(&db, "main");
    let args = json!({"path": "notes.txt"});
    let call = Lookup::new("read_file", "sha256:ab", &args);
    let id = a.save(approval("read_file", args.clone())).unwrap();
    assert!(a.find(&call).is_some());
    db.stop();
    // Once the connection is seen lost, an approval it cannot check is
    // not used: the call is asked.
    assert!(
        within(|| a.find(&call).is_none()).is_some(),
        "an approval was used while the database was gone"
    );
    match a.save(approval("write_file", json!({}))) {
        Err(ApprovalsError::Unavailable { store, message }) => {
            assert!(
                store.contains("store `main` of postgresql://127.0.0.1:"),
                "{store}"
            );
            assert!(message.contains("not reachable"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(matches!(
        a.revoke(&id),
        Err(ApprovalsError::Unavailable { .. })
    ));
    db.restart();
    assert!(
        within(|| a.find(&call).as_deref() == Some(id.as_str())).is_some(),
        "the replica did not reconnect: {}",
        db.log()
    );
    assert!(a.revoke(&id).unwrap());
}

#[test]
fn the_description_names_the_database_and_never_the_password() {
    let store = PostgresApprovals::connect("postgresql://toolhost:s3cret@127.0.0.1:9/gate", "main")
        .unwrap();
    let described = store.describe();
    assert_eq!(described, "store `main` of postgresql://127.0.0.1:9/gate");
    // Nothing listens on port 9: the reason says so, without the password.
    let approvals = Approvals::with_store(std::sync::Arc::new(store));
    let err = approvals.list().unwrap_err().to_string();
    assert!(!err.contains("s3cret"), "{err}");
    assert!(
        PostgresApprovals::connect("postgresql://[::1", "main").is_err(),
        "a malformed URL is refused at once"
    );
}

#[test]
fn a_database_that_stops_answering_is_not_trusted_after_two_polls() {
    let db = Postgres::start();
    let a = replica(&db, "main");
    let args = json!({"path": "notes.txt"});
    let call = Lookup::new("read_file", "sha256:ab", &args);
    a.save(approval("read_file", args.clone())).unwrap();
    assert!(a.find(&call).is_some());
    // The connection stays open, nothing answers: after two polls the
    // approval is no longer used (the lookup finds none, at once).
    db.freeze();
    let asked = within(|| a.find(&call).is_none());
    db.thaw();
    assert!(asked.is_some(), "a silent database was trusted for 10 s");
    eprintln!("not trusted after {asked:?}");
    assert!(
        within(|| a.find(&call).is_some()).is_some(),
        "the replica did not come back: {}",
        db.log()
    );
}

mod failures;
mod queue;
mod tasks;
mod tls;
