//! Long-running tasks shared by replicas through a real PostgreSQL
//! server: each "replica" is a [`PostgresTasks`] of its own, with its own
//! connection, as two `host serve` processes would have.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use toolhost_runtime::policy::AskRoute;
use toolhost_runtime::tasks::{
    MAX_TASK_BYTES, TaskBounds, TaskEvent, TaskRecord, TaskState, TaskStore, TaskStoreError,
};
use toolhost_state::POLL;
use toolhost_state::PostgresTasks;
use toolhost_state::tasks::LEASE;
use toolhost_test_support::postgres::Postgres;

/// A replica of the store `store`, connected.
fn connected(db: &Postgres, store: &str) -> Arc<PostgresTasks> {
    let tasks = PostgresTasks::connect(&db.url(), store).unwrap();
    let started = Instant::now();
    while !tasks.connected() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no connection: {}",
            db.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    Arc::new(tasks)
}

/// A replica of `main` that receives its events.
fn attached(db: &Postgres) -> (Arc<PostgresTasks>, UnboundedReceiver<TaskEvent>) {
    let tasks = connected(db, "main");
    let (events, received) = unbounded_channel();
    tasks.attach(events);
    (tasks, received)
}

fn record(id: &str, owner: &str) -> TaskRecord {
    let mut record = TaskRecord::new(id, owner, "build", json!({"target": "all", "jobs": 4}));
    record.agent = Some("ci".into());
    record.idempotent = true;
    record.asks = AskRoute::Operator;
    record.ttl = Duration::from_secs(600);
    record.detail = json!({"status": "working", "pollInterval": 500});
    record
}

/// The next event, waiting at most `wait`.
async fn next(events: &mut UnboundedReceiver<TaskEvent>, wait: Duration) -> Option<TaskEvent> {
    tokio::time::timeout(wait, events.recv())
        .await
        .ok()
        .flatten()
}

/// Waits until `f` gives something, at most 15 s.
async fn eventually<T, F: Future<Output = Option<T>>>(f: impl Fn() -> F) -> Option<T> {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(15) {
        if let Some(found) = f().await {
            return Some(found);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// A client of the test's own, to look at the table.
async fn sql(db: &Postgres) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&db.url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// The replica, generation and state of task `id` of `main`.
async fn row(client: &tokio_postgres::Client, id: &str) -> (String, i64, String) {
    let row = client
        .query_one(
            "SELECT replica, generation, state FROM toolhost_tasks WHERE store = 'main' AND id = $1",
            &[&id],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn responses(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_made_on_one_replica_is_loaded_on_another_with_what_its_holder_saves() {
    let db = Postgres::start();
    let (a, b) = (connected(&db, "main"), connected(&db, "main"));
    a.create(&record("t-1", "ana"), TaskBounds::open(8))
        .await
        .unwrap();
    // Readable through the other replica once made.
    let loaded = b.load("t-1").await.unwrap().expect("the task, on B");
    assert_eq!(loaded.id, "t-1");
    assert_eq!(loaded.owner, "ana");
    assert_eq!(loaded.tool, "build");
    assert_eq!(loaded.agent.as_deref(), Some("ci"));
    assert_eq!(loaded.args, json!({"target": "all", "jobs": 4}));
    assert!(loaded.idempotent);
    assert_eq!(loaded.asks, AskRoute::Operator);
    assert_eq!(loaded.ttl, Duration::from_secs(600));
    assert_eq!(loaded.state, TaskState::Working);
    assert_eq!(loaded.detail["pollInterval"], 500);

    let saved = Instant::now();
    a.save(
        "t-1",
        TaskState::InputRequired,
        json!({"status": "input_required"}),
    );
    let seen = eventually(|| async {
        let task = b.load("t-1").await.unwrap()?;
        (task.state == TaskState::InputRequired).then_some(task)
    })
    .await
    .expect("B never saw the status A saved");
    assert_eq!(seen.detail, json!({"status": "input_required"}));
    eprintln!("a save on A shown on B after {:?}", saved.elapsed());
    a.save(
        "t-1",
        TaskState::Completed,
        json!({"status": "completed", "result": {"ok": true}}),
    );
    let done = eventually(|| async {
        let task = b.load("t-1").await.unwrap()?;
        (task.state == TaskState::Completed).then_some(task)
    })
    .await
    .expect("B never saw the task end");
    assert_eq!(done.detail["result"], json!({"ok": true}));

    // No such task; and another store name shares the table, not the tasks.
    assert!(b.load("t-2").await.unwrap().is_none());
    let other = connected(&db, "staging");
    assert!(other.load("t-1").await.unwrap().is_none());
    assert_eq!(
        other.describe(),
        format!(
            "tasks `staging` of postgresql://127.0.0.1:{}/postgres",
            db.port()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_and_a_cancel_given_through_another_replica_reach_the_holder_as_events() {
    let db = Postgres::start();
    let (a, mut events) = attached(&db);
    let b = connected(&db, "main");
    a.create(&record("t-1", "ana"), TaskBounds::open(8))
        .await
        .unwrap();

    let answered = Instant::now();
    b.answer("t-1", responses(json!({"confirm": {"action": "accept"}})))
        .await
        .unwrap();
    match next(&mut events, Duration::from_secs(10)).await {
        Some(TaskEvent::Answered { id, responses }) => {
            assert_eq!(id, "t-1");
            assert_eq!(
                Value::Object(responses),
                json!({"confirm": {"action": "accept"}})
            );
        }
        other => panic!("expected the answers, got {other:?}"),
    }
    eprintln!("an answer on B reached A after {:?}", answered.elapsed());
    // Taken once: delivered once.
    assert!(next(&mut events, 2 * POLL + POLL / 2).await.is_none());

    b.cancel("t-1").await.unwrap();
    match next(&mut events, Duration::from_secs(10)).await {
        Some(TaskEvent::CancelAsked { id }) => assert_eq!(id, "t-1"),
        other => panic!("expected the cancel, got {other:?}"),
    }

    // Once ended, nothing asked of it reaches its holder.
    a.save("t-1", TaskState::Cancelled, json!({"status": "cancelled"}));
    eventually(|| async {
        let task = b.load("t-1").await.unwrap()?;
        (task.state == TaskState::Cancelled).then_some(())
    })
    .await
    .expect("B never saw the task cancelled");
    b.answer("t-1", responses(json!({"late": true})))
        .await
        .unwrap();
    b.cancel("t-1").await.unwrap();
    assert!(next(&mut events, 2 * POLL + POLL / 2).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_replica_stopped_is_taken_over_by_exactly_one_other_after_the_lease() {
    let db = Postgres::start();
    let (a, _a_events) = attached(&db);
    let (b, mut b_events) = attached(&db);
    let (c, mut c_events) = attached(&db);
    let client = sql(&db).await;
    a.create(&record("t-1", "ana"), TaskBounds::open(8))
        .await
        .unwrap();
    // Held by A, renewed by A: nobody takes it over meanwhile.
    tokio::time::sleep(LEASE + POLL).await;
    assert_eq!(
        row(&client, "t-1").await,
        (a.replica().to_owned(), 1, "working".to_owned())
    );
    assert!(b_events.try_recv().is_err() && c_events.try_recv().is_err());

    a.halt();
    let halted = Instant::now();
    let (record, b_won) = tokio::select! {
        event = next(&mut b_events, Duration::from_secs(20)) => (event, true),
        event = next(&mut c_events, Duration::from_secs(20)) => (event, false),
    };
    let took = halted.elapsed();
    let Some(TaskEvent::TakenOver(record)) = record else {
        panic!("expected the task taken over, got {record:?}");
    };
    eprintln!("taken over {took:?} after its replica stopped");
    // Not before the lease ran out (A renewed at most one poll before it
    // stopped).
    assert!(took >= LEASE - POLL, "{took:?}");
    assert_eq!(record.id, "t-1");
    assert_eq!(record.owner, "ana");
    assert_eq!(record.tool, "build");
    assert_eq!(record.agent.as_deref(), Some("ci"));
    assert_eq!(record.args, json!({"target": "all", "jobs": 4}));
    assert!(record.idempotent);
    assert_eq!(
        record.asks,
        AskRoute::Operator,
        "whom a task run again asks"
    );
    assert_eq!(record.state, TaskState::Working);
    assert_eq!(record.detail["status"], "working");
    let (winner, asker) = if b_won { (&b, &c) } else { (&c, &b) };
    let (winners_events, losers_events) = if b_won {
        (&mut b_events, &mut c_events)
    } else {
        (&mut c_events, &mut b_events)
    };
    assert_eq!(
        row(&client, "t-1").await,
        (winner.replica().to_owned(), 2, "working".to_owned())
    );

    // Exactly one: the other replica is never told, and the winner once.
    tokio::time::sleep(LEASE + 2 * POLL).await;
    assert!(losers_events.try_recv().is_err(), "taken over twice");
    assert!(winners_events.try_recv().is_err(), "taken over twice");
    assert_eq!(row(&client, "t-1").await.0, winner.replica());

    // The stopped replica's later save changes nothing; the new holder's
    // does, and it now receives what is asked of the task.
    a.save("t-1", TaskState::Completed, json!({"status": "completed"}));
    tokio::time::sleep(2 * POLL).await;
    assert_eq!(row(&client, "t-1").await.2, "working");
    asker.cancel("t-1").await.unwrap();
    match next(winners_events, Duration::from_secs(10)).await {
        Some(TaskEvent::CancelAsked { id }) => assert_eq!(id, "t-1"),
        other => panic!("expected the cancel at the new holder, got {other:?}"),
    }
    winner.save("t-1", TaskState::Failed, json!({"status": "failed"}));
    eventually(|| async {
        let task = asker.load("t-1").await.unwrap()?;
        (task.state == TaskState::Failed).then_some(())
    })
    .await
    .expect("the new holder's save never showed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_task_another_replica_took_over_cannot_change_it() {
    let db = Postgres::start();
    // A receives no events, so takes nothing over (B alone does).
    let a = connected(&db, "main");
    let (b, mut b_events) = attached(&db);
    let client = sql(&db).await;
    a.create(&record("t-1", "ana"), TaskBounds::open(8))
        .await
        .unwrap();
    // Another replica took it over and stopped in turn, while A went on.
    client
        .execute(
            "UPDATE toolhost_tasks SET replica = 'gone', generation = 2,
                    heartbeat = now() - interval '1 minute'
              WHERE store = 'main' AND id = 't-1'",
            &[],
        )
        .await
        .unwrap();
    // Saved at once (before A's next poll finds the task gone): the row
    // is no longer A's, so the statement leaves it alone.
    a.save("t-1", TaskState::Failed, json!({"status": "failed"}));
    match next(&mut b_events, Duration::from_secs(10)).await {
        Some(TaskEvent::TakenOver(record)) => {
            assert_eq!(record.id, "t-1");
            assert_eq!(record.state, TaskState::Working);
            assert_eq!(record.detail["status"], "working");
        }
        other => panic!("expected the task taken over, got {other:?}"),
    }
    assert_eq!(
        row(&client, "t-1").await,
        (b.replica().to_owned(), 3, "working".to_owned())
    );
    // A still runs its copy: what it saves is not saved, and it renews
    // nothing of the row.
    a.save("t-1", TaskState::Completed, json!({"status": "completed"}));
    let before: std::time::SystemTime = client
        .query_one("SELECT heartbeat FROM toolhost_tasks WHERE id = 't-1'", &[])
        .await
        .unwrap()
        .get(0);
    tokio::time::sleep(2 * POLL + POLL / 2).await;
    let loaded = b.load("t-1").await.unwrap().unwrap();
    assert_eq!(loaded.state, TaskState::Working);
    assert_eq!(loaded.detail["status"], "working");
    assert_eq!(
        row(&client, "t-1").await,
        (b.replica().to_owned(), 3, "working".to_owned())
    );
    let after: std::time::SystemTime = client
        .query_one("SELECT heartbeat FROM toolhost_tasks WHERE id = 't-1'", &[])
        .await
        .unwrap()
        .get(0);
    assert!(after > before, "B, its holder, renews it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_past_max_open_across_replicas_is_refused_and_another_owner_is_not() {
    let db = Postgres::start();
    let (a, b) = (connected(&db, "main"), connected(&db, "main"));
    a.create(&record("t-1", "ana"), TaskBounds::open(2))
        .await
        .unwrap();
    b.create(&record("t-2", "ana"), TaskBounds::open(2))
        .await
        .unwrap();
    assert_eq!(
        a.create(&record("t-3", "ana"), TaskBounds::open(2)).await,
        Err(TaskStoreError::TooMany(2))
    );
    assert_eq!(
        b.create(&record("t-3", "ana"), TaskBounds::open(2)).await,
        Err(TaskStoreError::TooMany(2))
    );
    assert!(
        b.load("t-3").await.unwrap().is_none(),
        "a refused task is not kept"
    );
    b.create(&record("t-4", "bob"), TaskBounds::open(2))
        .await
        .unwrap();
    // Another store counts its own.
    connected(&db, "staging")
        .create(&record("t-5", "ana"), TaskBounds::open(2))
        .await
        .unwrap();
    // An ended task no longer counts.
    a.save("t-1", TaskState::Completed, json!({"status": "completed"}));
    eventually(|| async {
        let task = b.load("t-1").await.unwrap()?;
        (task.state == TaskState::Completed).then_some(())
    })
    .await
    .expect("the end of t-1 never showed");
    b.create(&record("t-3", "ana"), TaskBounds::open(2))
        .await
        .unwrap();
    // Replicas making tasks at once for one owner never pass its bound.
    let made = futures::future::join_all((0..6).map(|i| {
        let replica = if i % 2 == 0 { a.clone() } else { b.clone() };
        async move {
            replica
                .create(&record(&format!("c-{i}"), "cy"), TaskBounds::open(3))
                .await
        }
    }))
    .await;
    assert_eq!(made.iter().filter(|r| r.is_ok()).count(), 3, "{made:?}");
    assert!(
        made.iter()
            .all(|r| r.is_ok() || *r == Err(TaskStoreError::TooMany(3)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_over_max_task_bytes_is_refused_and_one_in_the_table_is_not_read() {
    let db = Postgres::start();
    let a = connected(&db, "main");
    let mut large = record("t-1", "ana");
    large.args = json!({"content": "x".repeat(MAX_TASK_BYTES)});
    match a.create(&large, TaskBounds::open(8)).await {
        Err(TaskStoreError::TooLarge(bytes)) => assert!(bytes > MAX_TASK_BYTES, "{bytes}"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(a.load("t-1").await.unwrap().is_none());
    // Too large an answer is refused too.
    a.create(&record("t-2", "ana"), TaskBounds::open(8))
        .await
        .unwrap();
    assert!(matches!(
        a.answer(
            "t-2",
            responses(json!({"content": "x".repeat(MAX_TASK_BYTES)}))
        )
        .await,
        Err(TaskStoreError::TooLarge(_))
    ));
    // A row written by someone else, over the bound: an error, not a
    // record.
    let client = sql(&db).await;
    client
        .execute(
            "INSERT INTO toolhost_tasks (store, id, owner, tool, args, idempotent, ttl_ms,
                                         state, detail, replica, generation, heartbeat, created)
             VALUES ('main', 't-3', 'ana', 'build', '\"' || repeat('x', $1) || '\"', false,
                     60000, 'completed', 'null', 'elsewhere', 1, now(), now())",
            &[&i32::try_from(MAX_TASK_BYTES).unwrap()],
        )
        .await
        .unwrap();
    match a.load("t-3").await {
        Err(TaskStoreError::TooLarge(bytes)) => assert!(bytes > MAX_TASK_BYTES, "{bytes}"),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // And the store still answers.
    assert!(a.load("t-2").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_that_loses_the_database_says_why_and_saves_its_tasks_status_when_back() {
    let mut db = Postgres::start();
    let a = connected(&db, "main");
    a.create(&record("t-1", "ana"), TaskBounds::open(8))
        .await
        .unwrap();
    db.stop();
    let refused = eventually(|| async {
        match a.load("t-1").await {
            Err(e @ TaskStoreError::Unreachable { .. }) => Some(e),
            _ => None,
        }
    })
    .await
    .expect("the lost database went unnoticed");
    let TaskStoreError::Unreachable { store, message } = &refused else {
        unreachable!()
    };
    assert!(
        store.starts_with("tasks `main` of postgresql://127.0.0.1:"),
        "{store}"
    );
    assert!(!message.is_empty());
    eprintln!("refused: {refused}");
    // Refused at once, not after a wait.
    let asked = Instant::now();
    assert!(matches!(
        a.create(&record("t-2", "ana"), TaskBounds::open(8)).await,
        Err(TaskStoreError::Unreachable { .. })
    ));
    assert!(matches!(
        a.answer("t-1", Map::new()).await,
        Err(TaskStoreError::Unreachable { .. })
    ));
    assert!(matches!(
        a.cancel("t-1").await,
        Err(TaskStoreError::Unreachable { .. })
    ));
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    // The task goes on here, and ends while the database is gone.
    a.save("t-1", TaskState::Completed, json!({"status": "completed"}));
    db.restart();
    let b = connected(&db, "main");
    eventually(|| async {
        let task = b.load("t-1").await.ok()??;
        (task.state == TaskState::Completed).then_some(())
    })
    .await
    .unwrap_or_else(|| panic!("the status saved during the outage was lost: {}", db.log()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_made_before_ask_routes_gains_the_column_and_its_tasks_and_unknown_words_ask_no_one()
 {
    let db = Postgres::start();
    let client = sql(&db).await;
    // The table as the first version of the store made it.
    client
        .batch_execute(
            "CREATE TABLE toolhost_tasks (
                 store text NOT NULL, id text NOT NULL, owner text NOT NULL,
                 tool text NOT NULL, agent text, args text NOT NULL,
                 idempotent bool NOT NULL, ttl_ms bigint NOT NULL, state text NOT NULL,
                 detail text NOT NULL, replica text NOT NULL, generation bigint NOT NULL,
                 heartbeat timestamptz NOT NULL, created timestamptz NOT NULL,
                 responses jsonb NOT NULL DEFAULT '{}', cancel bool NOT NULL DEFAULT false,
                 PRIMARY KEY (store, id));
             INSERT INTO toolhost_tasks (store, id, owner, tool, args, idempotent, ttl_ms,
                                         state, detail, replica, generation, heartbeat, created)
             VALUES ('main', 'old', 'ana', 'build', '{}', true, 60000, 'working', 'null',
                     'elsewhere', 1, now(), now());",
        )
        .await
        .unwrap();
    let a = connected(&db, "main");
    let old = a.load("old").await.unwrap().expect("the old task");
    assert_eq!(old.asks, AskRoute::Deny);
    // A route this version does not know (written by another, or by
    // hand) is read as no one, the safe reading.
    client
        .execute(
            "UPDATE toolhost_tasks SET asks = 'the-boss' WHERE id = 'old'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(a.load("old").await.unwrap().unwrap().asks, AskRoute::Deny);
    // New tasks keep theirs.
    let mut new = record("new", "ana");
    new.asks = AskRoute::Client;
    a.create(&new, TaskBounds::open(8)).await.unwrap();
    assert_eq!(a.load("new").await.unwrap().unwrap().asks, AskRoute::Client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_lists_the_stores_tasks_newest_first_naming_the_holder_of_anothers() {
    let db = Postgres::start();
    let (a, b) = (connected(&db, "main"), connected(&db, "main"));
    a.create(&record("t-a", "ana"), TaskBounds::open(8))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    b.create(&record("t-b", "bob"), TaskBounds::open(8))
        .await
        .unwrap();
    // Its status message is read in the database, not its result, and cut
    // there; a status of megabytes is not parsed for a listing at all.
    let mut long = record("t-long", "ana");
    long.detail = json!({"status": "working", "statusMessage": "x".repeat(1000),
                         "result": "y".repeat(1000)});
    tokio::time::sleep(Duration::from_millis(20)).await;
    b.create(&long, TaskBounds::open(8)).await.unwrap();
    let mut huge = record("t-huge", "ana");
    huge.detail = json!({"status": "working", "statusMessage": "big",
                         "result": "y".repeat(MAX_TASK_BYTES / 2)});
    tokio::time::sleep(Duration::from_millis(20)).await;
    b.create(&huge, TaskBounds::open(8)).await.unwrap();
    a.save(
        "t-a",
        TaskState::Completed,
        json!({"status": "completed", "statusMessage": "built"}),
    );
    let listed = eventually(|| async {
        let listed = a.list(10).await.unwrap();
        (listed.iter().any(|t| t.state == TaskState::Completed)).then_some(listed)
    })
    .await
    .expect("A never listed its task's end");
    let ids: Vec<&str> = listed.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["t-huge", "t-long", "t-b", "t-a"], "newest first");
    let (here, there) = (&listed[3], &listed[2]);
    assert_eq!((here.owner.as_str(), here.tool.as_str()), ("ana", "build"));
    assert_eq!(here.message.as_deref(), Some("built"));
    assert_eq!(here.replica, None, "A's own");
    assert_eq!(there.replica.as_deref(), Some(b.replica()));
    assert_eq!(there.state, TaskState::Working);
    assert!(!there.taken_over);
    assert_eq!(listed[1].message.as_deref().map(str::len), Some(300));
    assert_eq!(listed[0].message, None, "a status of megabytes is not read");
    assert_eq!(listed[0].state, TaskState::Working);
    assert_eq!(a.list(1).await.unwrap().len(), 1);
    // Another store's tasks are not listed.
    assert!(connected(&db, "staging").list(10).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_whose_ended_tasks_keep_too_many_bytes_across_replicas_is_refused_and_another_is_not()
 {
    let db = Postgres::start();
    let (a, b) = (connected(&db, "main"), connected(&db, "main"));
    let bounds = TaskBounds::open(8).kept_bytes(10_000);
    a.create(&record("t-1", "ana"), bounds).await.unwrap();
    b.create(&record("t-2", "ana"), bounds).await.unwrap();
    // Two results of 6 kB, one on each replica: 12 kB kept for ana.
    let ended = json!({"status": "completed", "result": {"text": "r".repeat(6_000)}});
    a.save("t-1", TaskState::Completed, ended.clone());
    b.save("t-2", TaskState::Completed, ended);
    for (replica, id) in [(&a, "t-1"), (&b, "t-2")] {
        eventually(|| async {
            let task = replica.load(id).await.unwrap()?;
            (task.state == TaskState::Completed).then_some(())
        })
        .await
        .expect("an end never showed");
    }
    for replica in [&a, &b] {
        match replica.create(&record("t-3", "ana"), bounds).await {
            Err(TaskStoreError::TooMuchKept { bytes, limit }) => {
                assert!(bytes > 12_000, "{bytes}");
                assert_eq!(limit, 10_000);
            }
            other => panic!("a third task was not refused: {other:?}"),
        }
    }
    assert!(
        a.load("t-3").await.unwrap().is_none(),
        "a refused task is not kept"
    );
    // Another owner, and ana with a higher bound, are not refused.
    b.create(&record("t-4", "bob"), bounds).await.unwrap();
    a.create(
        &record("t-5", "ana"),
        TaskBounds::open(8).kept_bytes(100_000),
    )
    .await
    .unwrap();
    // Unfinished tasks' status does not count as kept.
    a.create(
        &record("t-6", "ana"),
        TaskBounds::open(8).kept_bytes(100_000),
    )
    .await
    .unwrap();
}
