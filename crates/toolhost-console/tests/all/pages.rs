//! What the page shows of what callers send, and who may see and change
//! it: a megabyte of tool name or a bidirectional override never reaches
//! the page as it was sent, a question whose arguments were cut cannot be
//! allowed always, and the console opens to its operator only.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode, header};
use serde_json::json;
use toolhost_console::{Console, ConsoleOptions};
use toolhost_runtime::operator::{
    Answer, Inbox, OperatorQueue, Pending, Place, Question, QueueError, QueueSettings, QueueStore,
    StoreError, StoreFuture,
};
use toolhost_runtime::policy::{Policy, Rule};
use toolhost_runtime::{CallContext, Runtime};
use tower::ServiceExt;

use crate::support::{plugins_dir, root};

/// A runtime whose `calculate` asks, the operator's queue answering, and
/// its console (with the one-time token it made).
async fn console() -> (Runtime, Console, OperatorQueue) {
    let queue = OperatorQueue::new(QueueSettings::default());
    let policy = Policy::builder()
        .rule(Rule::ask("calculate").reason("arithmetic needs a person"))
        .build()
        .unwrap();
    let runtime = Runtime::builder()
        .plugin_dir(plugins_dir())
        .cache_dir(Some(root().join("target/test-cache")))
        .policy(policy)
        .approver(Arc::new(queue.approver()))
        .build()
        .await
        .unwrap();
    let console = Console::new(
        runtime.clone(),
        ConsoleOptions {
            queue: Some(queue.clone()),
            ..ConsoleOptions::default()
        },
    );
    (runtime, console, queue)
}

/// A request to `app`: the status, the `Set-Cookie` header (if any) and the body.
async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Option<String>, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let cookie = response
        .headers()
        .get(header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, cookie, String::from_utf8_lossy(&body).into_owned())
}

fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut request = Request::get(path).header(header::HOST, "127.0.0.1:8080");
    if let Some(cookie) = cookie {
        request = request.header(header::COOKIE, cookie);
    }
    request.body(Body::empty()).unwrap()
}

fn post(path: &str, cookie: &str, csrf: &str, body: &str) -> Request<Body> {
    Request::post(path)
        .header(header::HOST, "127.0.0.1:8080")
        .header(header::ORIGIN, "http://127.0.0.1:8080")
        .header(header::COOKIE, cookie)
        .header("x-csrf-token", csrf)
        .body(Body::from(body.to_owned()))
        .unwrap()
}

/// Signs in with the console's link (`/console?token=…`): the session
/// cookie (`name=value`) and the page's CSRF token.
async fn sign_in(app: &Router, console: &Console) -> (String, String) {
    let token = console
        .sign_in_token()
        .expect("no token configured: one made");
    let (status, cookie, _) = send(app, get(&format!("/console?token={token}"), None)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = cookie.expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_owned();
    let (status, _, page) = send(app, get("/console", Some(&session))).await;
    assert_eq!(status, StatusCode::OK);
    let csrf = page
        .split("name=\"csrf\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the page carries its CSRF token")
        .to_owned();
    (session, csrf)
}

#[tokio::test]
async fn without_an_operator_token_the_console_makes_one_and_opens_to_nobody_else() {
    let (_runtime, console, _queue) = console().await;
    let app = console.router();
    // What any local process sees: the sign-in page, no CSRF token, and
    // nothing it could change.
    let (status, _, body) = send(&app, get("/console", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("Operator token") && !body.contains("name=\"csrf\""));
    for path in ["/console/part/queue", "/console/events"] {
        assert_eq!(
            send(&app, get(path, None)).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    let (status, _, _) = send(&app, get("/console?token=guess", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&app, post("/console/queue/1", "", "", "allow-always")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The operator, with the token the console made.
    let (session, csrf) = sign_in(&app, &console).await;
    // A change needs the session's CSRF token and this server's origin.
    let (status, _, _) = send(&app, post("/console/queue/1", &session, "0000", "allow")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let mut elsewhere = post("/console/queue/1", &session, &csrf, "allow");
    elsewhere.headers_mut().insert(
        header::ORIGIN,
        http::HeaderValue::from_static("http://evil.example"),
    );
    assert_eq!(send(&app, elsewhere).await.0, StatusCode::FORBIDDEN);
    let (status, _, body) = send(&app, post("/console/queue/1", &session, &csrf, "allow")).await;
    assert_eq!(status, StatusCode::CONFLICT, "no question 1 waits: {body}");
    // Signing out ends the session.
    let (status, cleared, _) = send(&app, post("/console/logout", &session, &csrf, "")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(cleared.is_some_and(|c| c.contains("Max-Age=0")));
    assert_eq!(
        send(&app, get("/console", Some(&session))).await.0,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn a_page_rendered_right_after_a_call_failed_lists_it_without_waiting_for_a_tick() {
    let (runtime, console, _queue) = console().await;
    let app = console.router();
    let (session, _) = sign_in(&app, &console).await;
    let err = runtime
        .call("no_such_tool_here", json!({}), CallContext::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), toolhost_runtime::error::ErrorKind::NotFound);
    // At once: the page reads the feed up before it is made.
    let (_, _, part) = send(&app, get("/console/part/failures", Some(&session))).await;
    assert!(part.contains("no_such_tool_here"), "{part}");
    let (_, _, page) = send(&app, get("/console", Some(&session))).await;
    assert!(page.contains("no_such_tool_here"), "{page}");
}

#[tokio::test]
async fn many_calls_of_huge_unknown_names_keep_the_page_small_and_no_bidi_override_reaches_it() {
    let (runtime, console, _queue) = console().await;
    let app = console.router();
    let (session, _) = sign_in(&app, &console).await;
    let (_, _, before) = send(&app, get("/console", Some(&session))).await;

    for i in 0..20 {
        let name = format!("evil\u{202e}{i}{}", "x".repeat(1_000_000));
        let id = format!("mcp-{}", "9".repeat(100_000));
        let err = runtime
            .call(&name, json!({}), CallContext::new().call_id(id))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), toolhost_runtime::error::ErrorKind::NotFound);
    }
    // The console reads the feed every 0.1 s.
    let mut page = String::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        page = send(&app, get("/console", Some(&session))).await.2;
        if page.matches("<li>").count() >= 20 {
            break;
        }
    }
    assert!(
        page.contains("evil\\u{202e}"),
        "the calls are listed, escaped"
    );
    assert!(!page.contains('\u{202e}'), "no raw bidirectional override");
    let grown = page.len() - before.len();
    assert!(
        grown < 40 * 1024,
        "20 calls grew the page by {grown} bytes (from {})",
        before.len()
    );
    for part in ["calls", "failures"] {
        let (_, _, body) = send(&app, get(&format!("/console/part/{part}"), Some(&session))).await;
        assert!(body.len() < 40 * 1024, "{part}: {} bytes", body.len());
        assert!(!body.contains('\u{202e}'), "{part}");
    }
}

#[tokio::test]
async fn a_question_shows_every_argument_and_cut_arguments_cannot_be_allowed_always() {
    let (runtime, console, queue) = console().await;
    let app = console.router();
    let (session, csrf) = sign_in(&app, &console).await;
    // A long expression: the queue shows it cut, with its length.
    let expression = format!("1+{}", "0+".repeat(5_000)) + "1";
    let waiting = tokio::spawn({
        let runtime = runtime.clone();
        let expression = expression.clone();
        async move {
            runtime
                .call(
                    "calculate",
                    json!({ "expression": expression }),
                    CallContext::new(),
                )
                .await
        }
    });
    while queue.pending().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let id = queue.pending()[0].id;
    let (_, _, part) = send(&app, get("/console/part/queue", Some(&session))).await;
    assert!(part.contains("<code>expression</code>"), "{part}");
    assert!(part.contains("cut: 10005 characters in all"), "{part}");
    assert!(!part.contains("allow-always"), "not offered: {part}");
    assert!(part.contains("cannot be allowed always"), "{part}");
    // Posted anyway, it is refused, and the question still waits.
    let path = format!("/console/queue/{id}");
    let (status, _, body) = send(&app, post(&path, &session, &csrf, "allow-always")).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(body.contains("too long to show whole"), "{body}");
    assert_eq!(queue.pending().len(), 1);
    let (status, _, _) = send(&app, post(&path, &session, &csrf, "allow")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(waiting.await.unwrap().unwrap().output, "2");
    assert!(
        runtime.approvals().list().unwrap().is_empty(),
        "nothing saved"
    );

    // Short arguments are shown whole, and may be allowed always.
    let waiting = tokio::spawn({
        let runtime = runtime.clone();
        async move {
            runtime
                .call(
                    "calculate",
                    json!({ "expression": "6*7" }),
                    CallContext::new(),
                )
                .await
        }
    });
    while queue.pending().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, _, part) = send(&app, get("/console/part/queue", Some(&session))).await;
    assert!(
        part.contains("&quot;6*7&quot;") && part.contains("allow-always"),
        "{part}"
    );
    let path = format!("/console/queue/{}", queue.pending()[0].id);
    let (status, _, _) = send(&app, post(&path, &session, &csrf, "allow-always")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(waiting.await.unwrap().unwrap().output, "42");
}

/// A shared queue seen from one replica: one ask held by another replica,
/// one whose replica is gone, and the database out of reach or not.
#[derive(Debug, Default)]
struct Replicas {
    lost: std::sync::atomic::AtomicBool,
}

impl QueueStore for Replicas {
    fn describe(&self) -> String {
        "two replicas".into()
    }
    fn attach(&self, _: Inbox) {}
    fn hold<'a>(&'a self, _: &'a Pending) -> StoreFuture<'a, Result<(), StoreError>> {
        Box::pin(async { Ok(()) })
    }
    fn release(&self, _: u64) {}
    fn elsewhere(&self) -> Vec<Pending> {
        [
            (1 << 32, Place::Elsewhere, "far"),
            (2 << 32, Place::Gone, "dead"),
        ]
        .into_iter()
        .map(|(id, place, tool)| Pending {
            id,
            place,
            question: Question::call(tool, "p", &json!({"path": "a.txt"})),
            asked_at_ms: 0,
            deadline_ms: 0,
        })
        .collect()
    }
    fn answer<'a>(&'a self, id: u64, _: &'a Answer) -> StoreFuture<'a, Result<(), QueueError>> {
        Box::pin(async move {
            Err(if id == 2 << 32 {
                QueueError::Gone(id)
            } else {
                QueueError::Unreachable(id, "the database is not reachable: down".into())
            })
        })
    }
    fn trouble(&self) -> Option<String> {
        self.lost
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| "the database is not reachable: connection refused".into())
    }
}

#[tokio::test]
async fn a_shared_queue_lists_the_asks_held_elsewhere_shows_gone_ones_unanswerable_and_says_when_it_is_lost()
 {
    let store = Arc::new(Replicas::default());
    let queue = OperatorQueue::with_store(QueueSettings::default(), store.clone());
    let runtime = Runtime::builder()
        .plugin_dir(plugins_dir())
        .cache_dir(Some(root().join("target/test-cache")))
        .build()
        .await
        .unwrap();
    let console = Console::new(
        runtime,
        ConsoleOptions {
            queue: Some(queue),
            ..ConsoleOptions::default()
        },
    );
    let app = console.router();
    let (session, csrf) = sign_in(&app, &console).await;
    let (_, _, part) = send(&app, get("/console/part/queue", Some(&session))).await;
    let articles: Vec<&str> = part.split("<article").skip(1).collect();
    assert_eq!(articles.len(), 2, "{part}");
    assert!(
        articles[0].contains("data-place=\"elsewhere\"")
            && articles[0].contains("by another replica")
            && articles[0].contains("data-body=\"allow\""),
        "{}",
        articles[0]
    );
    assert!(
        articles[1].contains("data-place=\"gone\"")
            && articles[1].contains("cannot be answered")
            && !articles[1].contains("data-post"),
        "no buttons: {}",
        articles[1]
    );
    assert!(!part.contains("cannot be reached"), "{part}");
    // Posted anyway: gone (410); out of reach (503), each saying why.
    let (status, _, body) = send(
        &app,
        post(
            &format!("/console/queue/{}", 2u64 << 32),
            &session,
            &csrf,
            "allow",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::GONE, "{body}");
    assert!(body.contains("is gone"), "{body}");
    let (status, _, body) = send(
        &app,
        post(
            &format!("/console/queue/{}", 1u64 << 32),
            &session,
            &csrf,
            "allow",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("not reachable"), "{body}");
    // The database lost: the page says so.
    store.lost.store(true, std::sync::atomic::Ordering::Relaxed);
    let (_, _, part) = send(&app, get("/console/part/queue", Some(&session))).await;
    assert!(
        part.contains(
            "The shared queue cannot be reached (the database is not reachable: connection refused)"
        ) && part.contains("answered here only"),
        "{part}"
    );
}

/// A board of two tasks, one of them ended, whose tool names are markup;
/// it remembers what the operator stopped.
#[derive(Debug, Default)]
struct Board {
    stopped: parking_lot::Mutex<Vec<String>>,
}

impl Board {
    fn listed(&self, limit: usize) -> Vec<toolhost_runtime::tasks::TaskSummary> {
        use toolhost_runtime::tasks::{TaskState, TaskSummary};
        let task = |id: &str, state, replica: Option<&str>| TaskSummary {
            id: id.into(),
            owner: "ana".into(),
            tool: "<script>alert(1)</script>".into(),
            state,
            message: Some("compiling <b>".into()),
            age: Duration::from_secs(7),
            taken_over: false,
            replica: replica.map(str::to_owned),
        };
        let stopped = self.stopped.lock();
        let running = if stopped.iter().any(|s| s == "t-1") {
            TaskState::Cancelled
        } else {
            TaskState::Working
        };
        vec![
            task("t-1", running, None),
            task("t-0", TaskState::Completed, None),
            task("t-9", TaskState::Completed, Some("5eed<i>")),
        ]
        .into_iter()
        .take(limit)
        .collect()
    }
}

impl toolhost_runtime::tasks::TaskBoard for Board {
    fn tasks(
        &self,
        limit: usize,
    ) -> toolhost_runtime::tasks::StoreFuture<'_, toolhost_runtime::tasks::TaskListing> {
        Box::pin(async move {
            toolhost_runtime::tasks::TaskListing {
                tasks: self.listed(limit),
                trouble: Some("the database is <down>".into()),
            }
        })
    }

    fn cancel<'a>(&'a self, id: &'a str) -> toolhost_runtime::tasks::StoreFuture<'a, bool> {
        Box::pin(async move {
            let mut stopped = self.stopped.lock();
            if id != "t-1" || stopped.iter().any(|s| s == id) {
                return false;
            }
            stopped.push(id.to_owned());
            true
        })
    }
}

#[tokio::test]
async fn the_tasks_are_listed_as_text_and_only_an_unfinished_one_is_stopped_by_the_operator() {
    let (runtime, _, queue) = console().await;
    let board = Arc::new(Board::default());
    let console = Console::new(
        runtime,
        ConsoleOptions {
            queue: Some(queue),
            tasks: Some(board.clone()),
            ..ConsoleOptions::default()
        },
    );
    let app = console.router();
    assert_eq!(
        send(&app, post("/console/tasks/t-1/cancel", "", "", ""))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    let (session, csrf) = sign_in(&app, &console).await;
    let (status, _, part) = send(&app, get("/console/part/tasks", Some(&session))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        !part.contains("<script>") && !part.contains("<b>"),
        "{part}"
    );
    assert!(part.contains("&lt;script&gt;"), "{part}");
    // Another replica's task says whose; why the others' may be missing.
    assert!(part.contains("data-replica=\"5eed&lt;i&gt;\""), "{part}");
    assert!(part.contains("data-replica=\"here\""), "{part}");
    assert!(part.contains("the database is &lt;down&gt;"), "{part}");
    let stop = |id: &str| format!("data-post=\"/console/tasks/{id}/cancel\"");
    assert!(part.contains(&stop("t-1")), "{part}");
    assert!(
        !part.contains(&stop("t-0")),
        "an ended task has no stop: {part}"
    );

    // A change needs the session's CSRF token.
    let (status, _, _) = send(
        &app,
        post("/console/tasks/t-1/cancel", &session, "0000", ""),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(board.stopped.lock().is_empty());
    let (status, _, body) =
        send(&app, post("/console/tasks/t-1/cancel", &session, &csrf, "")).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(*board.stopped.lock(), ["t-1"]);
    for id in ["t-1", "t-0", "nope"] {
        let (status, _, _) = send(
            &app,
            post(&format!("/console/tasks/{id}/cancel"), &session, &csrf, ""),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}");
    }
    let (_, _, part) = send(&app, get("/console/part/tasks", Some(&session))).await;
    assert!(part.contains("data-state=\"cancelled\""), "{part}");
}

#[tokio::test]
async fn a_console_where_no_call_runs_as_a_task_says_so() {
    let (_runtime, console, _queue) = console().await;
    let app = console.router();
    let (session, csrf) = sign_in(&app, &console).await;
    let (_, _, part) = send(&app, get("/console/part/tasks", Some(&session))).await;
    assert!(part.contains("No call runs as a task here"), "{part}");
    let (status, _, _) = send(&app, post("/console/tasks/t-1/cancel", &session, &csrf, "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
