//! What an `[[mcp-servers]]` entry says: the transport (a command run over
//! stdio, in its process sandbox, or a Streamable HTTP endpoint), when to
//! connect, and the bounds on what the server may send.

use std::path::PathBuf;

use std::time::Duration;
pub use toolhost_process_sandbox::ProcessSandbox;

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A program that speaks MCP on its stdin and stdout.
    Stdio(StdioServer),
    /// A Streamable HTTP endpoint.
    Http(HttpEndpoint),
}

/// A server run as a child process, in its own process group (stopped,
/// with everything it started, when the source is dropped or the host
/// exits and closes its stdin).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StdioServer {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it (`KEY`, `value`).
    pub env: Vec<(String, String)>,
    /// Variables passed through from the host's environment, by name. It
    /// gets these, those in `env` and [`DEFAULT_ENV`], and no others.
    pub pass_env: Vec<String>,
    /// Its working directory (the host's, if `None`).
    pub cwd: Option<PathBuf>,
    /// Runs it in a process sandbox (`connect.rs`, bubblewrap).
    pub sandbox: Option<ProcessSandbox>,
}

/// The host variables every stdio server gets, as the MCP SDKs pass them.
pub const DEFAULT_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG"];

/// A Streamable HTTP endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HttpEndpoint {
    /// Its URL (`http://127.0.0.1:3000/mcp`).
    pub url: String,
    /// Headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// A bearer token (`Authorization: Bearer …`).
    pub bearer: Option<String>,
    /// How to sign in when the server answers 401 (OAuth 2.1); `None`:
    /// never (a 401 is reported as such).
    pub oauth: Option<super::oauth::UpstreamOAuth>,
}

/// When a server is connected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Start {
    /// At start-up: building the runtime waits for it (within
    /// `connect_timeout`), so its tools are there from the first request.
    #[default]
    Eager,
    /// In the background: the host serves at once, and its tools join when
    /// it answers (MCP clients hear `tools/list_changed`).
    Lazy,
}

/// One `[[mcp-servers]]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// Its name: the plugin name its tools are listed under, what
    /// `server = "…"` policy rules match. `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// What its tool names start with (`NAME__` if `None`).
    pub prefix: Option<String>,
    /// When it is connected.
    pub start: Start,
    /// How long connecting (start, initialise, list tools) may take.
    pub connect_timeout: Duration,
    /// The largest message accepted from it, in bytes.
    pub max_message_bytes: usize,
    /// What it may ask of the client side during a call (sampling,
    /// elicitation), and the bounds on it.
    pub requests: super::requests::ServerRequests,
    /// Whether callers of revisions before 2026-07-28 reach it through
    /// this client (a gateway, the default): an HTTP server that answers
    /// `server/discover` then also gets a session in the older revision
    /// it still speaks, for them. Without them (`false`: the host's own
    /// agent and commands) such a server is spoken to in 2026-07-28 alone,
    /// and never sent an `initialize`.
    pub older_callers: bool,
}

/// The default [`McpServerConfig::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The default [`McpServerConfig::max_message_bytes`].
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
impl McpServerConfig {
    /// A stdio server started as `command args…`, connected at start-up.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: &[&str]) -> Self {
        Self::new(
            name,
            McpTransport::Stdio(StdioServer {
                command: command.into(),
                args: args.iter().map(|a| (*a).to_owned()).collect(),
                ..StdioServer::default()
            }),
        )
    }

    /// A Streamable HTTP server at `url`, connected at start-up.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self::new(
            name,
            McpTransport::Http(HttpEndpoint {
                url: url.into(),
                ..HttpEndpoint::default()
            }),
        )
    }

    fn new(name: impl Into<String>, transport: McpTransport) -> Self {
        McpServerConfig {
            name: name.into(),
            transport,
            prefix: None,
            start: Start::Eager,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            requests: super::requests::ServerRequests::default(),
            older_callers: true,
        }
    }

    /// A digest of what, besides its command line or URL, changes what
    /// answers its calls: a stdio server's environment (`env`, and the
    /// names in `pass-env`, not their values), working directory and
    /// process sandbox (every setting); an HTTP server's headers and bearer
    /// token. Saved
    /// approvals of its tools are bound to it (with its reported name and
    /// version and its tools' definitions): changing any of these asks
    /// again. Hashed (SHA-256), so the secrets among them never show.
    ///
    /// ```
    /// use toolhost_mcp::McpServerConfig;
    /// use toolhost_mcp::client::{McpTransport, ProcessSandbox};
    ///
    /// let plain = McpServerConfig::stdio("fs", "npx", &["-y", "server-filesystem"]);
    /// let mut boxed = plain.clone();
    /// if let McpTransport::Stdio(s) = &mut boxed.transport {
    ///     s.sandbox = Some(ProcessSandbox::default());
    /// }
    /// assert_ne!(plain.settings_digest(), boxed.settings_digest());
    /// ```
    pub fn settings_digest(&self) -> String {
        use sha2::Digest;
        // Every field of the transport, through its `Debug` form: a setting
        // added later counts without being listed here.
        let settings = format!("{:?}", self.transport);
        format!(
            "sha256:{}",
            hex::encode(sha2::Sha256::digest(settings.as_bytes()))
        )
    }

    /// Where it is, for `host plugins`: the command line or the URL.
    pub fn location(&self) -> String {
        match &self.transport {
            McpTransport::Stdio(s) => std::iter::once(s.command.as_str())
                .chain(s.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            McpTransport::Http(h) => h.url.clone(),
        }
    }
}
