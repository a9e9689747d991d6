//! # toolhost-console
//!
//! The operator's web console, a page of the MCP server's HTTP endpoint
//! (`host serve --console`, at `/console`): plugins and MCP servers with
//! their state, versions, digests, requested and granted capabilities and
//! the lock file's verdict; the policy in force and the tools each profile
//! sees; calls as they happen (server-sent events) with each step, its
//! decision and its duration; recent failures; the approvals queue, where
//! the operator answers the `ask`s sent to them; the calls running as
//! tasks, which the operator may stop; and the saved approvals,
//! revocable.
//!
//! The modules, in the order a request meets them:
//!
//! - `auth.rs`: who may see it (operator tokens, one made at start when
//!   none is configured, a session cookie), and the CSRF and `Origin`
//!   checks on every change, as extractors the handlers ask for;
//! - `routes` (here): the pages, the parts the page refreshes, the event
//!   stream, and the answers;
//! - `page.rs`: the HTML, rendered on the server;
//! - `feed.rs`: the calls of late, kept from the runtime's call feed.
//!
//! The approvals queue it shows and answers is the runtime's
//! ([`toolhost_runtime::operator`]): what sends an `ask` there (the MCP
//! server) needs the queue, not this page.
//! When replicas share the queue (a
//! [`QueueStore`](toolhost_runtime::operator::QueueStore) such as
//! `toolhost_state::PostgresQueue`), the page lists the asks of every
//! replica, marks those held elsewhere or gone, and says so when the
//! shared queue cannot be reached.
//!
//! Server-rendered HTML with a little plain JavaScript (`assets/`), served
//! from the binary: no build step, nothing fetched from elsewhere, and a
//! Content-Security-Policy that allows only this server's own script.
//!
//! ```no_run
//! # async fn run(runtime: toolhost_runtime::Runtime) {
//! use toolhost_console::{Console, ConsoleOptions};
//!
//! let console = Console::new(runtime, ConsoleOptions::default());
//! // No operator token given: the console made one; only its holder signs in.
//! let token = console.sign_in_token().expect("made at start");
//! eprintln!("sign in at http://127.0.0.1:8080/console?token={token}");
//! let app: axum::Router = console.router();
//! # }
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum_extra::extract::cookie::CookieJar;
use futures::Stream;
use tokio::sync::broadcast;
use toolhost_runtime::Runtime;
use toolhost_runtime::operator::{Answer, OperatorQueue, QueueError};
use toolhost_runtime::tasks::TaskBoard;

mod auth;
mod feed;
mod page;

use auth::{Access, Change, Refusal, SameOrigin, Session};
use feed::Recent;

/// What the console lets in and where its approvals come from.
#[derive(Debug, Clone, Default)]
pub struct ConsoleOptions {
    /// The operator tokens (the token file's lines with `role=operator`).
    /// Empty: the console makes a one-time token when it starts
    /// ([`Console::sign_in_token`]); there is no console without one.
    pub operator_tokens: Vec<String>,
    /// Browser origins accepted besides the server's own.
    pub allowed_origins: Vec<String>,
    /// The queue the `ask`s sent to the operator wait in (`None`: no ask
    /// goes to the operator; the page says so).
    pub queue: Option<OperatorQueue>,
    /// Where replicas share their recent failures (`None`: this replica's
    /// only).
    pub failures: Option<Arc<dyn toolhost_runtime::failures::FailureLog>>,
    /// The server's tasks (`None`: no call runs as a task; the page says
    /// so).
    pub tasks: Option<Arc<dyn TaskBoard>>,
}

/// The console (see the crate docs). Cheap to clone.
#[derive(Clone)]
pub struct Console {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    access: Access,
    queue: Option<OperatorQueue>,
    tasks: Option<Arc<dyn TaskBoard>>,
    recent: Arc<Recent>,
}

impl Console {
    /// A console for `runtime`. Starts following its calls (inside a tokio
    /// runtime), so the page shows the calls made since.
    pub fn new(runtime: Runtime, options: ConsoleOptions) -> Console {
        let recent = Arc::new(Recent::new(options.failures));
        feed::follow(&runtime, &recent);
        Console {
            inner: Arc::new(Inner {
                access: Access::new(options.operator_tokens, options.allowed_origins),
                queue: options.queue,
                tasks: options.tasks,
                runtime,
                recent,
            }),
        }
    }

    /// The one-time operator token this console made because none was
    /// configured (`None` when one was): show it only to whoever started
    /// the server (its terminal), as a sign-in link `/console?token=…`.
    /// It lasts until the console is dropped.
    pub fn sign_in_token(&self) -> Option<&str> {
        self.inner.access.made_token()
    }

    /// The approvals queue, when asks go to the operator.
    pub fn queue(&self) -> Option<&OperatorQueue> {
        self.inner.queue.as_ref()
    }

    /// The routes under `/console`. The server in front checks `Host`
    /// (DNS rebinding); the console checks everything else.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/console", get(index))
            .route("/console/", get(|| async { Redirect::to("/console") }))
            .route("/console/console.js", get(script))
            .route("/console/console.css", get(style))
            .route("/console/login", post(login))
            .route("/console/logout", post(logout))
            .route("/console/part/{name}", get(part))
            .route("/console/events", get(events))
            .route("/console/queue/{id}", post(answer))
            .route("/console/saved/{id}/revoke", post(revoke))
            .route("/console/tasks/{id}/cancel", post(cancel_task))
            .layer(axum::middleware::map_response(protect))
            .with_state(self.clone())
    }
}

/// Headers on every console response: no framing, no caching, no
/// script or style from anywhere but this server, no referrer to others.
async fn protect(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
             img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        // (`no-referrer` would make a browser send `Origin: null` with the
        // sign-in form, which the origin check then refuses.)
        (header::REFERRER_POLICY, "same-origin"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn html(status: StatusCode, markup: maud::Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// `/console?token=…`: the sign-in link a server prints (a token in the
/// link signs in and is dropped from the address at once).
#[derive(serde::Deserialize)]
struct Link {
    token: Option<String>,
}

async fn index(
    State(console): State<Console>,
    Query(link): Query<Link>,
    jar: CookieJar,
    session: Result<Session, Refusal>,
) -> Response {
    if let Some(token) = link.token {
        return signed_in(&console, jar, &token);
    }
    let Ok(session) = session else {
        return html(StatusCode::UNAUTHORIZED, page::sign_in(false));
    };
    let inner = &console.inner;
    let pending = inner
        .queue
        .as_ref()
        .map(OperatorQueue::pending)
        .unwrap_or_default();
    let trouble = inner.queue.as_ref().and_then(OperatorQueue::trouble);
    let calls = inner.recent.calls();
    let tasks = listed_tasks(inner).await;
    let (failures, failures_trouble) = inner.recent.failures();
    html(
        StatusCode::OK,
        page::console(&page::View {
            runtime: &inner.runtime,
            csrf: &session.csrf,
            queue: &pending,
            queue_on: inner.queue.is_some(),
            queue_trouble: trouble.as_deref(),
            calls: &calls,
            tasks: tasks.as_ref(),
            failures: &failures,
            failures_trouble: failures_trouble.as_deref(),
        }),
    )
}

/// Signs in with `token` and goes to the console, or shows the sign-in
/// page again, saying the token is not an operator's.
fn signed_in(console: &Console, jar: CookieJar, token: &str) -> Response {
    match console.inner.access.sign_in(jar, token) {
        Ok(jar) => {
            tracing::info!(target: "toolhost::console", "an operator signed in");
            (jar, Redirect::to("/console")).into_response()
        }
        Err(_) => {
            tracing::info!(target: "toolhost::console", "a sign-in with a token that is not an operator's was refused");
            html(StatusCode::UNAUTHORIZED, page::sign_in(true))
        }
    }
}

async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../assets/console.js"),
    )
        .into_response()
}

async fn style() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../assets/console.css"),
    )
        .into_response()
}

/// The sign-in form's body.
#[derive(serde::Deserialize)]
struct SignIn {
    token: String,
}

async fn login(
    State(console): State<Console>,
    _: SameOrigin,
    jar: CookieJar,
    Form(form): Form<SignIn>,
) -> Response {
    signed_in(&console, jar, &form.token)
}

async fn logout(State(console): State<Console>, _: Change, jar: CookieJar) -> Response {
    (console.inner.access.sign_out(jar), StatusCode::NO_CONTENT).into_response()
}

/// A part of the page, rendered alone for the page to swap in.
async fn part(State(console): State<Console>, _: Session, Path(name): Path<String>) -> Response {
    let inner = &console.inner;
    let markup = match name.as_str() {
        "queue" => page::queue(
            &inner
                .queue
                .as_ref()
                .map(OperatorQueue::pending)
                .unwrap_or_default(),
            inner.queue.is_some(),
            inner
                .queue
                .as_ref()
                .and_then(OperatorQueue::trouble)
                .as_deref(),
        ),
        "saved" => page::saved(&inner.runtime),
        "calls" => page::calls(&inner.recent.calls()),
        "tasks" => page::tasks(listed_tasks(inner).await.as_ref()),
        "failures" => {
            let (failures, trouble) = inner.recent.failures();
            page::failures(&failures, trouble.as_deref())
        }
        _ => return (StatusCode::NOT_FOUND, "no such part\n").into_response(),
    };
    html(StatusCode::OK, markup)
}

/// The most tasks the page lists.
const MAX_TASKS_LISTED: usize = 100;

/// The server's tasks (every replica's, shared), newest first (`None`:
/// no call runs as a task).
async fn listed_tasks(inner: &Inner) -> Option<toolhost_runtime::tasks::TaskListing> {
    match &inner.tasks {
        Some(board) => Some(board.tasks(MAX_TASKS_LISTED).await),
        None => None,
    }
}

/// Stops the unfinished task `id` running on this server.
async fn cancel_task(
    State(console): State<Console>,
    _: Change,
    Path(id): Path<String>,
) -> Response {
    match &console.inner.tasks {
        Some(board) if board.cancel(&id).await => StatusCode::NO_CONTENT.into_response(),
        Some(_) => (
            StatusCode::NOT_FOUND,
            "no unfinished task of that id runs on this server or a replica sharing its tasks\n",
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no call runs as a task here\n").into_response(),
    }
}

/// The operator's answer to a waiting call: `allow`, `allow-always`,
/// `allow-within N` (the question's scope at place N) or `deny` as the
/// body.
async fn answer(
    State(console): State<Console>,
    _: Change,
    Path(id): Path<u64>,
    body: String,
) -> Response {
    let Some(queue) = &console.inner.queue else {
        return (StatusCode::NOT_FOUND, "no ask goes to the operator here\n").into_response();
    };
    let Some(answer) = Answer::parse(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            "answer allow, allow-always, allow-within N or deny\n",
        )
            .into_response();
    };
    match queue.answer(id, answer).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ QueueError::Gone(_)) => (StatusCode::GONE, format!("{e}\n")).into_response(),
        Err(e @ QueueError::Unreachable(..)) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response()
        }
        Err(e) => (StatusCode::CONFLICT, format!("{e}\n")).into_response(),
    }
}

async fn revoke(State(console): State<Console>, _: Change, Path(id): Path<String>) -> Response {
    // The store is written on a blocking thread: a database slow to
    // answer holds up this request, never the server's workers.
    let runtime = console.inner.runtime.clone();
    let revoking = {
        let id = id.clone();
        tokio::task::spawn_blocking(move || runtime.approvals().revoke(&id))
    };
    let Ok(revoked) = revoking.await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the revocation failed\n").into_response();
    };
    match revoked {
        Ok(true) => {
            tracing::info!(target: "toolhost::console", id = %toolhost_text::line(&id, 64), "a saved approval was revoked");
            StatusCode::NO_CONTENT.into_response()
        }
        Ok(false) => (StatusCode::NOT_FOUND, "no such saved approval\n").into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")).into_response(),
    }
}

/// Server-sent events, every [`feed::TICK`] when something happened:
/// `calls` (the calls that started or finished, a JSON array), `queue`
/// (the approvals queue changed), `lagged` (this page fell behind and
/// missed some calls).
async fn events(State(console): State<Console>, _: Session) -> Response {
    let calls = console.inner.runtime.watch_calls();
    let changes = console.inner.queue.as_ref().map(OperatorQueue::changes);
    Sse::new(stream(calls, changes))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn stream(
    calls: broadcast::Receiver<Arc<toolhost_runtime::feed::CallEvent>>,
    changes: Option<broadcast::Receiver<()>>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    use futures::StreamExt;
    let state = (calls, changes, feed::ticker());
    futures::stream::unfold(state, |(mut calls, mut changes, mut tick)| async move {
        loop {
            tick.tick().await;
            let batch = feed::drain(&mut calls);
            if batch.closed {
                return None;
            }
            let mut out = Vec::new();
            if !batch.events.is_empty() {
                match Event::default().event("calls").json_data(&batch.events) {
                    Ok(event) => out.push(event),
                    Err(e) => tracing::debug!("a batch of calls could not be sent: {e}"),
                }
            }
            if batch.missed > 0 {
                out.push(
                    Event::default()
                        .event("lagged")
                        .data(batch.missed.to_string()),
                );
            }
            // (An event with empty data is never dispatched by a browser.)
            if changes.as_mut().is_some_and(queue_changed) {
                out.push(Event::default().event("queue").data("changed"));
            }
            if !out.is_empty() {
                return Some((out, (calls, changes, tick)));
            }
        }
    })
    .flat_map(|events| futures::stream::iter(events.into_iter().map(Ok)))
}

/// Whether the queue changed since the last look (the page refreshes the
/// whole queue, so how often does not matter).
fn queue_changed(changes: &mut broadcast::Receiver<()>) -> bool {
    let mut changed = false;
    loop {
        match changes.try_recv() {
            Ok(()) | Err(broadcast::error::TryRecvError::Lagged(_)) => changed = true,
            Err(_) => return changed,
        }
    }
}
