//! A fake model server for the providers' and the agent loop's tests: real
//! HTTP on loopback (axum), answering each request with a scripted
//! [`Reply`] — a whole response in either provider's wire format, a stream
//! of server-sent events that ends, breaks or hangs, an endless stream, or
//! silence — and recording what it received.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Response, Uri};
use futures::StreamExt;
use serde_json::Value;

/// What the server does with one request.
pub enum Reply {
    /// A whole response.
    Full {
        /// The HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(&'static str, String)>,
        /// The body.
        body: String,
    },
    /// `text/event-stream` frames, `gap` apart, then `end`.
    Stream {
        /// The frames, each sent as one chunk.
        frames: Vec<String>,
        /// The pause before each frame.
        gap: Duration,
        /// How the body ends.
        end: End,
    },
    /// `first`, then `frame` again and again, `gap` apart, for as long as
    /// the client reads.
    Endless {
        /// Sent at once.
        first: Vec<String>,
        /// Sent forever after.
        frame: String,
        /// The pause before each repetition.
        gap: Duration,
    },
    /// The request is read and never answered (no status line, no headers).
    Silent,
}

/// How a streamed body ends.
#[derive(Debug, Clone, Copy)]
pub enum End {
    /// The body ends normally.
    Close,
    /// The connection is cut mid-body (the chunked encoding never terminates).
    Cut,
    /// Nothing more is sent, and the connection stays open.
    Hang,
}

impl Reply {
    /// A stream of `frames` sent at once, ending normally.
    pub fn sse(frames: Vec<String>) -> Reply {
        Reply::Stream {
            frames,
            gap: Duration::ZERO,
            end: End::Close,
        }
    }

    /// A whole response with `status` and no extra headers.
    pub fn status(status: u16, body: &str) -> Reply {
        Reply::Full {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request path.
    pub path: String,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body as JSON (`null` when it is not JSON).
    pub body: Value,
    /// Its body as text.
    pub text: String,
}

type Script = Box<dyn Fn(usize, &Received) -> Reply + Send + Sync>;

struct ServerState {
    script: Script,
    requests: AtomicUsize,
    received: Mutex<Vec<Received>>,
    /// Set when a streamed body is dropped (the client went away).
    stream_dropped: Arc<AtomicBool>,
}

/// The fake model server; it runs on the current tokio runtime.
///
/// ```no_run
/// # async fn demo() {
/// use toolhost_test_support::fake_model::{FakeModel, Reply};
///
/// let server = FakeModel::replies(vec![Reply::status(200, r#"{"ok":true}"#)]).await;
/// let url = server.url("/v1/chat/completions");
/// // ... send a request to `url` ...
/// assert_eq!(server.requests(), 1);
/// # }
/// ```
pub struct FakeModel {
    addr: SocketAddr,
    state: Arc<ServerState>,
}

impl FakeModel {
    /// A server answering request `n` (0 for the first) with `script(n)`.
    pub async fn start(script: impl Fn(usize) -> Reply + Send + Sync + 'static) -> FakeModel {
        FakeModel::start_with(move |n, _| script(n)).await
    }

    /// A server answering request `n` with `script(n, request)`.
    pub async fn start_with(
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> FakeModel {
        let state = Arc::new(ServerState {
            script: Box::new(script),
            requests: AtomicUsize::new(0),
            received: Mutex::new(Vec::new()),
            stream_dropped: Arc::new(AtomicBool::new(false)),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let addr = listener.local_addr().expect("its address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        FakeModel { addr, state }
    }

    /// A server answering with `replies` in order, then with status 599
    /// ("no reply scripted").
    pub async fn replies(replies: Vec<Reply>) -> FakeModel {
        let queue = Mutex::new(VecDeque::from(replies));
        FakeModel::start(move |_| {
            queue
                .lock()
                .expect("the reply queue")
                .pop_front()
                .unwrap_or_else(|| Reply::status(599, "no reply scripted"))
        })
        .await
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().expect("the request log").clone()
    }

    /// The bodies of every request received so far.
    pub fn bodies(&self) -> Vec<Value> {
        self.received().into_iter().map(|r| r.body).collect()
    }

    /// Waits (at most 3 s) until the client has dropped a streamed body.
    pub async fn wait_stream_dropped(&self) {
        let deadline = Instant::now() + Duration::from_secs(3);
        while !self.state.stream_dropped.load(Ordering::SeqCst) {
            assert!(
                Instant::now() < deadline,
                "the server still streams: the connection was not closed"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Whether the client has dropped a streamed body.
    pub fn stream_dropped(&self) -> bool {
        self.state.stream_dropped.load(Ordering::SeqCst)
    }
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn sse(body: Body) -> Response<Body> {
    Response::builder()
        .status(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .body(body)
        .expect("a response")
}

async fn handle(
    State(state): State<Arc<ServerState>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let n = state.requests.fetch_add(1, Ordering::SeqCst);
    let received = Received {
        path: uri.path().to_owned(),
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        text: String::from_utf8_lossy(&body).into_owned(),
    };
    let reply = (state.script)(n, &received);
    state
        .received
        .lock()
        .expect("the request log")
        .push(received);
    match reply {
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut b = Response::builder().status(status);
            for (k, v) in headers {
                b = b.header(k, v);
            }
            b.body(Body::from(body)).expect("a response")
        }
        Reply::Silent => std::future::pending().await,
        Reply::Stream { frames, gap, end } => {
            let flag = DropFlag(state.stream_dropped.clone());
            let frames = futures::stream::iter(frames).then(move |f| async move {
                if !gap.is_zero() {
                    tokio::time::sleep(gap).await;
                }
                Ok::<_, std::io::Error>(Bytes::from(f))
            });
            let tail = futures::stream::once(async move {
                let _flag = flag;
                match end {
                    End::Close => Ok(Bytes::new()),
                    End::Cut => {
                        // Let the headers and frames reach the client first
                        // (an error before them would abort the response itself).
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Err(std::io::Error::other("connection cut"))
                    }
                    End::Hang => std::future::pending().await,
                }
            });
            sse(Body::from_stream(frames.chain(tail)))
        }
        Reply::Endless { first, frame, gap } => {
            let flag = DropFlag(state.stream_dropped.clone());
            let first =
                futures::stream::iter(first).map(|f| Ok::<_, std::io::Error>(Bytes::from(f)));
            let repeated = futures::stream::unfold(flag, move |flag| {
                let frame = frame.clone();
                async move {
                    tokio::time::sleep(gap).await;
                    Some((Ok::<_, std::io::Error>(Bytes::from(frame)), flag))
                }
            });
            sse(Body::from_stream(first.chain(repeated)))
        }
    }
}

/// [`FakeModel`] for tests that are not async (the `host` binary's): it runs
/// on a tokio runtime of its own, which stops when this is dropped.
/// `answer(n, body)` (n = 0 for the first request) returns the response:
/// a stream of server-sent events, or, when it starts with `HTTP/1.1 `, a
/// whole response (its status, `Content-Type` and body are sent).
pub struct ModelServer {
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    server: FakeModel,
    _runtime: tokio::runtime::Runtime,
}

impl ModelServer {
    /// Starts the server on a free port; `answer` makes each response.
    pub fn start(answer: impl Fn(usize, &str) -> String + Send + Sync + 'static) -> ModelServer {
        ModelServer::start_replies(move |n, request| raw_reply(&answer(n, &request.text)))
    }

    /// Starts the server on a free port; `answer` makes each [`Reply`]
    /// (streams that stall, trickle or never end included).
    pub fn start_replies(
        answer: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> ModelServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime for the fake model server");
        let server = runtime.block_on(FakeModel::start_with(answer));
        let port = server.addr.port();
        ModelServer {
            port,
            server,
            _runtime: runtime,
        }
    }

    /// Every request body received so far, parsed as JSON.
    pub fn bodies(&self) -> Vec<Value> {
        self.server.bodies()
    }

    /// Every request received so far (headers included).
    pub fn received(&self) -> Vec<Received> {
        self.server.received()
    }
}

/// `text` as a reply: a whole response when it starts with `HTTP/1.1 `,
/// otherwise a body of server-sent events.
fn raw_reply(text: &str) -> Reply {
    let Some(rest) = text.strip_prefix("HTTP/1.1 ") else {
        return Reply::Full {
            status: 200,
            headers: vec![("content-type", "text/event-stream".to_owned())],
            body: text.to_owned(),
        };
    };
    let (head, body) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').next())
        .and_then(|c| c.parse().ok())
        .unwrap_or(500);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| ("content-type", v.trim().to_owned()))
        .collect();
    Reply::Full {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A model server's own count of a request's tokens (OpenAI wire format):
/// the characters of its system prompt, messages, tool calls and tools,
/// three to a token — not the host's estimate, which must calibrate to it.
pub fn fake_tokens(body: &Value) -> u64 {
    let mut chars = 0usize;
    for m in body["messages"].as_array().into_iter().flatten() {
        chars += m["content"].as_str().map_or(0, str::len);
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            chars += c["function"]["name"].as_str().map_or(0, str::len);
            chars += c["function"]["arguments"].as_str().map_or(0, str::len);
        }
    }
    for t in body["tools"].as_array().into_iter().flatten() {
        chars += t.to_string().len();
    }
    u64::try_from(chars / 3).unwrap_or(u64::MAX)
}

/// llama.cpp's refusal of a request longer than its context (HTTP 400).
pub fn context_exceeded(n_prompt_tokens: u64, n_ctx: u64) -> Reply {
    Reply::status(
        400,
        &serde_json::json!({"error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n_prompt_tokens,
            "n_ctx": n_ctx,
        }})
        .to_string(),
    )
}

/// What a [`context_limited`] model answers to one request.
pub enum Answer {
    /// A text answer.
    Text(String),
    /// One tool call: (id, name, JSON arguments).
    Call(String, String, String),
    /// A whole response with this status and body.
    Status(u16, String),
}

/// An OpenAI-compatible model server with a context of `n_ctx` tokens
/// (counted by [`fake_tokens`]): a longer request is refused as llama.cpp
/// refuses it; others get `answer(request body)`, streamed with the usage
/// (prompt tokens) a real server reports.
pub async fn context_limited(
    n_ctx: u64,
    answer: impl Fn(&Value) -> Answer + Send + Sync + 'static,
) -> FakeModel {
    FakeModel::start_with(move |_, request| {
        let tokens = fake_tokens(&request.body);
        if tokens > n_ctx {
            return context_exceeded(tokens, n_ctx);
        }
        let delta = match answer(&request.body) {
            Answer::Text(text) => serde_json::json!({"content": text}),
            Answer::Call(id, name, arguments) => serde_json::json!({"tool_calls": [{
                "index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": arguments}}]}),
            Answer::Status(status, body) => return Reply::status(status, &body),
        };
        let finish = if delta.get("tool_calls").is_some() {
            "tool_calls"
        } else {
            "stop"
        };
        let frames = [
            serde_json::json!({"choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
            serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
            serde_json::json!({"choices": [], "usage": {"prompt_tokens": tokens, "completion_tokens": 5, "total_tokens": tokens + 5}}),
        ];
        let mut body: Vec<String> = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
        body.push("data: [DONE]\n\n".to_owned());
        Reply::sse(body)
    })
    .await
}
