//! The operator's queue shared by replicas through a real PostgreSQL
//! server: each "replica" is an [`OperatorQueue`] over a
//! [`PostgresQueue`] of its own, with its own connection, as two
//! `host serve` processes would have.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_runtime::operator::{
    Answer, OperatorQueue, Place, Question, QueueError, QueueSettings,
};
use toolhost_state::PostgresQueue;
use toolhost_test_support::postgres::Postgres;

fn connected(db: &Postgres, store: PostgresQueue) -> OperatorQueue {
    connected_arc(db, Arc::new(store))
}

fn connected_arc(db: &Postgres, store: Arc<PostgresQueue>) -> OperatorQueue {
    let started = Instant::now();
    while !store.connected() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no connection: {}",
            db.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    OperatorQueue::with_store(QueueSettings::default(), store)
}

fn replica(db: &Postgres) -> OperatorQueue {
    connected(db, PostgresQueue::connect(&db.url(), "main").unwrap())
}

/// Waits until `f` holds, at most 15 s; how long it took.
async fn within(f: impl Fn() -> bool) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        if f() {
            return Some(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

fn ask(queue: &OperatorQueue, tool: &str) -> tokio::task::JoinHandle<Answer> {
    let queue = queue.clone();
    let question = Question::call(tool, "fs", &json!({"path": "notes.txt"}));
    tokio::spawn(async move { queue.ask(question).await })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_made_on_one_replica_is_listed_answered_and_released_from_another() {
    let db = Postgres::start();
    let (a, b) = (replica(&db), replica(&db));
    let waiting = ask(&a, "write_file");
    let listed = within(|| b.pending().iter().any(|p| p.place == Place::Elsewhere)).await;
    assert!(
        listed.is_some(),
        "B never listed A's ask: {:?}",
        b.pending()
    );
    let on_b = b.pending()[0].clone();
    assert_eq!(on_b.question.tool, "write_file");
    assert_eq!(on_b.question.arguments.items[0].value, "\"notes.txt\"");
    assert_eq!(a.pending()[0].id, on_b.id, "one id on every replica");
    assert_eq!(a.pending()[0].place, Place::Here);

    let answered = Instant::now();
    b.answer(on_b.id, Answer::AllowAlways).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("the answer given on B released the call on A")
        .unwrap();
    let released = answered.elapsed();
    assert_eq!(answer, Answer::AllowAlways);
    assert!(
        within(|| a.pending().is_empty() && b.pending().is_empty())
            .await
            .is_some(),
        "the answered ask left both consoles"
    );
    eprintln!("listed on B after {listed:?}; an answer on B released A's call after {released:?}");
    // Answered once: a second answer finds nothing waiting.
    assert_eq!(
        b.answer(on_b.id, Answer::Allow).await,
        Err(QueueError::NotWaiting(on_b.id))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_is_refused_on_another_replica_when_the_arguments_were_cut() {
    let db = Postgres::start();
    let (a, b) = (replica(&db), replica(&db));
    let waiting = {
        let a = a.clone();
        let args = json!({"content": "x".repeat(10_000), "path": "a.txt"});
        tokio::spawn(async move { a.ask(Question::call("write_file", "fs", &args)).await })
    };
    assert!(within(|| !b.pending().is_empty()).await.is_some());
    let id = b.pending()[0].id;
    assert_eq!(
        b.answer(id, Answer::AllowAlways).await,
        Err(QueueError::AlwaysNotOffered(id))
    );
    b.answer(id, Answer::Deny("not today".into()))
        .await
        .unwrap();
    assert_eq!(waiting.await.unwrap(), Answer::Deny("not today".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ask_whose_replica_died_is_shown_gone_and_cannot_be_answered() {
    let db = Postgres::start();
    let b = replica(&db);
    {
        // Replica A asks, then dies with its ask waiting (its connection
        // and the task that renewed its lease end with it).
        let store = Arc::new(PostgresQueue::connect(&db.url(), "main").unwrap());
        let a = connected_arc(&db, store.clone());
        let waiting = ask(&a, "write_file");
        assert!(within(|| !b.pending().is_empty()).await.is_some());
        store.halt();
        waiting.abort();
    }
    let gone = within(|| b.pending().first().is_some_and(|p| p.place == Place::Gone)).await;
    assert!(gone.is_some(), "still answerable: {:?}", b.pending());
    eprintln!("shown gone after {gone:?}");
    let id = b.pending()[0].id;
    assert_eq!(b.answer(id, Answer::Allow).await, Err(QueueError::Gone(id)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_loses_the_database_answers_its_own_asks_and_says_so() {
    let mut db = Postgres::start();
    let a = replica(&db);
    db.stop();
    assert!(
        within(|| a.trouble().is_some()).await.is_some(),
        "the lost database went unnoticed"
    );
    let trouble = a.trouble().unwrap();
    assert!(trouble.contains("not reachable"), "{trouble}");
    // Asked while the database is gone: it waits here, and the operator
    // here answers it.
    let waiting = ask(&a, "write_file");
    assert!(within(|| !a.pending().is_empty()).await.is_some());
    let here = a.pending()[0].clone();
    assert_eq!(here.place, Place::Here);
    a.answer(here.id, Answer::Allow).await.unwrap();
    assert_eq!(waiting.await.unwrap(), Answer::Allow);
    // An id held by no one here cannot be answered elsewhere: it says why.
    match a.answer(here.id + 1, Answer::Allow).await {
        Err(QueueError::Unreachable(_, why)) => assert!(why.contains("not reachable"), "{why}"),
        other => panic!("expected Unreachable, got {other:?}"),
    }
    // Back: an ask waiting on A through the outage shows on B.
    let waiting = ask(&a, "read_file");
    db.restart();
    let b = replica(&db);
    assert!(
        within(|| b.pending().iter().any(|p| p.question.tool == "read_file"))
            .await
            .is_some(),
        "the ask made during the outage never reached the database: {}",
        db.log()
    );
    assert!(
        within(|| a.trouble().is_none()).await.is_some(),
        "A still says the database is lost: {:?}",
        a.trouble()
    );
    let id = b.pending()[0].id;
    b.answer(id, Answer::Allow).await.unwrap();
    assert_eq!(waiting.await.unwrap(), Answer::Allow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_queue_holds_at_most_its_capacity_across_replicas() {
    let db = Postgres::start();
    let a = connected(
        &db,
        PostgresQueue::connect(&db.url(), "main")
            .unwrap()
            .capacity(2),
    );
    let b = connected(
        &db,
        PostgresQueue::connect(&db.url(), "main")
            .unwrap()
            .capacity(2),
    );
    let first = ask(&a, "one");
    let second = ask(&b, "two");
    assert!(within(|| a.pending().len() == 2).await.is_some());
    let third = ask(&a, "three").await.unwrap();
    assert!(
        matches!(&third, Answer::Deny(why) if why.contains("full")),
        "{third:?}"
    );
    // Another store name shares the table, not the asks.
    let other = connected(&db, PostgresQueue::connect(&db.url(), "staging").unwrap());
    let fourth = ask(&other, "four");
    assert!(within(|| other.pending().len() == 1).await.is_some());
    for (queue, task) in [(&a, first), (&b, second), (&other, fourth)] {
        let id = queue
            .pending()
            .iter()
            .find(|p| p.place == Place::Here)
            .unwrap()
            .id;
        queue.answer(id, Answer::Allow).await.unwrap();
        assert_eq!(task.await.unwrap(), Answer::Allow);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_whose_notification_is_lost_releases_the_call_at_the_next_poll() {
    let db = Postgres::start();
    let a = replica(&db);
    let waiting = ask(&a, "write_file");
    let (client, connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let id = loop {
        let row = client
            .query_opt("SELECT id FROM toolhost_asks WHERE store = 'main'", &[])
            .await
            .unwrap();
        if let Some(row) = row {
            break row.get::<_, i64>(0);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    // Another replica's answer, committed without its NOTIFY.
    let answered = Instant::now();
    client
        .execute(
            "UPDATE toolhost_asks SET answer = '\"allow\"'::jsonb WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the poll took the answer")
        .unwrap();
    assert_eq!(answer, Answer::Allow);
    let took = answered.elapsed();
    // One poll (1 s), with room for a loaded machine.
    assert!(took < 3 * toolhost_state::POLL, "{took:?}");
    eprintln!("an answer without its notification released the call after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_database_does_not_hold_up_an_answer_given_on_the_holding_replica() {
    let db = Postgres::start();
    let a = replica(&db);
    // The connection stays open, nothing answers (a network partition).
    db.freeze();
    let waiting = ask(&a, "write_file");
    assert!(within(|| !a.pending().is_empty()).await.is_some());
    let answered = Instant::now();
    a.answer(a.pending()[0].id, Answer::Allow).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(2), waiting).await;
    let took = answered.elapsed();
    let noticed = within(|| a.trouble().is_some()).await;
    db.thaw();
    assert_eq!(
        answer.expect("answered here at once").unwrap(),
        Answer::Allow
    );
    assert!(noticed.is_some(), "a silent database went unnoticed");
    eprintln!("answered here after {took:?} with the database silent");
    assert!(
        within(|| a.trouble().is_none()).await.is_some(),
        "never came back: {}",
        db.log()
    );
}
