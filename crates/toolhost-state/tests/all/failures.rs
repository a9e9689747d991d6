//! The console's recent failures shared by replicas: `PostgresFailures`
//! with a real PostgreSQL.

use std::time::{Duration, Instant};

use toolhost_runtime::failures::{Failure, FailureLog};
use toolhost_state::PostgresFailures;
use toolhost_test_support::postgres::Postgres;

fn failure(tool: &str, at_ms: u64) -> Failure {
    Failure {
        at_ms,
        tool: tool.to_owned(),
        outcome: "invalid-arguments".to_owned(),
        rule: None,
        replica: None,
    }
}

/// Waits (at most 10 s) until `f` holds; how long it took.
fn until(f: impl Fn() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if f() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

#[test]
fn a_failure_on_one_replica_is_listed_on_the_others_with_its_replica_and_never_twice() {
    let db = Postgres::start();
    let a = PostgresFailures::connect(&db.url(), "main").unwrap();
    let b = PostgresFailures::connect(&db.url(), "main").unwrap();
    let staging = PostgresFailures::connect(&db.url(), "staging").unwrap();
    assert!(until(|| a.trouble().is_none() && b.trouble().is_none()).is_some());
    a.record(failure("calculate", 1));
    a.record(failure("read_file", 2));
    let seen = until(|| b.elsewhere().len() == 2).expect("never listed on B");
    let listed = b.elsewhere();
    assert_eq!(listed[0].tool, "calculate", "oldest first: {listed:?}");
    assert_eq!(listed[1].tool, "read_file");
    assert_eq!(listed[0].replica.as_deref(), Some(a.replica()));
    // A lists its own only from its own console, never from the table.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(a.elsewhere().is_empty(), "{:?}", a.elsewhere());
    // Another store shares the table, not the failures.
    assert!(staging.elsewhere().is_empty());
    eprintln!("listed on B {seen:?} after A noted it");
}

#[test]
fn what_is_read_back_is_bounded_and_a_lost_database_is_said() {
    let mut db = Postgres::start();
    let a = PostgresFailures::connect(&db.url(), "main").unwrap();
    let b = PostgresFailures::connect(&db.url(), "main").unwrap();
    assert!(until(|| b.trouble().is_none()).is_some());
    a.record(failure(&"x".repeat(10_000), 1));
    assert!(until(|| b.elsewhere().len() == 1).is_some());
    assert_eq!(
        b.elsewhere()[0].tool.chars().count(),
        toolhost_runtime::failures::MAX_FAILURE_TEXT
    );
    db.stop();
    let said = until(|| b.trouble().is_some()).expect("the loss is never said");
    assert!(
        b.elsewhere().is_empty(),
        "nothing listed from a lost database"
    );
    eprintln!("the loss said after {said:?}: {:?}", b.trouble());
}
