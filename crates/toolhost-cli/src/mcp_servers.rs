//! External MCP servers as tool sources: the config file's
//! `[[mcp-servers]]` and `--mcp`, turned into `toolhost_mcp::McpSource`s
//! on the runtime builder, with their limits as the source's plugin settings.
//!
//! ```toml
//! [[mcp-servers]]
//! name = "git"
//! command = ["mcp-server-git", "--repository", "."]
//! timeout-ms = 10000
//!
//! [[mcp-servers]]
//! name = "docs"
//! url = "https://mcp.example.com/mcp"
//! bearer-token-env = "DOCS_TOKEN"
//! start = "lazy"
//!
//! [[mcp-servers]]
//! name = "files"
//! command = ["npx", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//! sandbox = { write = ["/srv/data"], network = false }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use toolhost_mcp::{
    HttpEndpoint, McpServerConfig, McpSource, McpTransport, ProcessSandbox, Start, StdioServer,
};
use toolhost_runtime::{LimitOverrides, PluginSettings, RuntimeBuilder};

/// One `[[mcp-servers]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServerEntry {
    /// Its name: the plugin name of its tools, what `server = "…"` rules match.
    name: String,
    /// A stdio server: the program and its arguments.
    #[serde(default)]
    command: Vec<String>,
    /// Variables set for a stdio server.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Host variables passed through to a stdio server, by name.
    #[serde(default)]
    pass_env: Vec<String>,
    /// A stdio server's working directory.
    cwd: Option<PathBuf>,
    /// A stdio server's process sandbox (bubblewrap).
    sandbox: Option<SandboxEntry>,
    /// A Streamable HTTP server's URL.
    url: Option<String>,
    /// Headers for an HTTP server.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// A file holding an HTTP server's bearer token.
    bearer_token_file: Option<PathBuf>,
    /// A variable holding an HTTP server's bearer token.
    bearer_token_env: Option<String>,
    /// What its tool names start with (default `NAME__`).
    prefix: Option<String>,
    /// `eager` (default: start-up waits for it) or `lazy` (in the background).
    #[serde(default)]
    start: StartEntry,
    /// How long connecting may take.
    connect_timeout_ms: Option<u64>,
    /// The largest message accepted from it.
    max_message_bytes: Option<usize>,
    /// How long one call may take.
    timeout_ms: Option<u64>,
    /// Calls to it at once.
    max_concurrent: Option<usize>,
    /// The largest result accepted, in bytes.
    max_result_bytes: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum StartEntry {
    #[default]
    Eager,
    Lazy,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct SandboxEntry {
    #[serde(default)]
    write: Vec<PathBuf>,
    #[serde(default)]
    hide: Vec<PathBuf>,
    #[serde(default)]
    network: bool,
    #[serde(default)]
    unix_sockets: bool,
    #[serde(default)]
    git_writable: bool,
}

impl ServerEntry {
    /// `--mcp NAME=URL` (http:// or https://) or `--mcp NAME=COMMAND ARG…`
    /// (split at spaces; use the config file for arguments with spaces).
    pub fn from_flag(value: &str) -> anyhow::Result<ServerEntry> {
        let Some((name, target)) = value
            .split_once('=')
            .filter(|(n, t)| !n.is_empty() && !t.trim().is_empty())
        else {
            bail!("--mcp expects NAME=COMMAND [ARGS…] or NAME=URL, got `{value}`");
        };
        let mut entry = ServerEntry {
            name: name.to_owned(),
            command: Vec::new(),
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            cwd: None,
            sandbox: None,
            url: None,
            headers: BTreeMap::new(),
            bearer_token_file: None,
            bearer_token_env: None,
            prefix: None,
            start: StartEntry::Eager,
            connect_timeout_ms: None,
            max_message_bytes: None,
            timeout_ms: None,
            max_concurrent: None,
            max_result_bytes: None,
        };
        if target.starts_with("http://") || target.starts_with("https://") {
            entry.url = Some(target.to_owned());
        } else {
            entry.command = target.split_whitespace().map(str::to_owned).collect();
        }
        Ok(entry)
    }

    /// The client's configuration, and the limits as plugin settings.
    fn resolve(self) -> anyhow::Result<(McpServerConfig, LimitOverrides)> {
        let name = self.name.clone();
        let transport = match (self.command.split_first(), &self.url) {
            (Some((program, args)), None) => McpTransport::Stdio(StdioServer {
                command: program.clone(),
                args: args.to_vec(),
                env: self.env.into_iter().collect(),
                pass_env: self.pass_env,
                cwd: self.cwd.map(home),
                sandbox: self.sandbox.map(|s| ProcessSandbox {
                    write: s.write.into_iter().map(home).collect(),
                    hide: s.hide.into_iter().map(home).collect(),
                    network: s.network,
                    unix_sockets: s.unix_sockets,
                    git_writable: s.git_writable,
                }),
            }),
            (None, Some(url)) => {
                let bearer = match (&self.bearer_token_file, &self.bearer_token_env) {
                    (Some(file), None) => Some(
                        std::fs::read_to_string(file)
                            .with_context(|| {
                                format!("MCP server `{name}`: bearer token file {}", file.display())
                            })?
                            .trim()
                            .to_owned(),
                    ),
                    (None, Some(var)) => Some(std::env::var(var).with_context(|| {
                        format!("MCP server `{name}`: bearer token variable {var} is not set")
                    })?),
                    (None, None) => None,
                    (Some(_), Some(_)) => bail!(
                        "MCP server `{name}`: give bearer-token-file or bearer-token-env, not both"
                    ),
                };
                McpTransport::Http(HttpEndpoint {
                    url: url.clone(),
                    headers: self.headers.into_iter().collect(),
                    bearer,
                })
            }
            (Some(_), Some(_)) => {
                bail!("MCP server `{name}`: give `command` or `url`, not both")
            }
            (None, None) => bail!("MCP server `{name}`: give `command` (stdio) or `url` (HTTP)"),
        };
        let mut config = McpServerConfig {
            transport,
            prefix: self.prefix,
            start: match self.start {
                StartEntry::Eager => Start::Eager,
                StartEntry::Lazy => Start::Lazy,
            },
            ..McpServerConfig::stdio(name, "", &[])
        };
        if let Some(ms) = self.connect_timeout_ms {
            config.connect_timeout = Duration::from_millis(ms);
        }
        if let Some(bytes) = self.max_message_bytes {
            config.max_message_bytes = bytes;
        }
        let limits = LimitOverrides {
            timeout_ms: self.timeout_ms,
            max_output_bytes: self.max_result_bytes,
            max_instances: self.max_concurrent,
            ..LimitOverrides::default()
        };
        Ok((config, limits))
    }
}

/// `path` with a leading `~/` made the user's home directory.
fn home(path: PathBuf) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path,
    }
}

/// Adds every server of `entries` to `builder` (starting their clients;
/// within a Tokio runtime), with their limits in `settings`.
pub fn add(
    mut builder: RuntimeBuilder,
    entries: Vec<ServerEntry>,
    settings: &mut BTreeMap<String, PluginSettings>,
) -> anyhow::Result<RuntimeBuilder> {
    let mut names = std::collections::BTreeSet::new();
    for entry in entries {
        if !names.insert(entry.name.clone()) {
            bail!("two MCP servers are called `{}`", entry.name);
        }
        let (config, limits) = entry.resolve()?;
        let name = config.name.clone();
        let source = McpSource::start(config)?;
        // The server's own keys win over a `[plugins.NAME]` table.
        let given = &mut settings.entry(name).or_default().limits;
        given.timeout_ms = limits.timeout_ms.or(given.timeout_ms);
        given.max_output_bytes = limits.max_output_bytes.or(given.max_output_bytes);
        given.max_instances = limits.max_instances.or(given.max_instances);
        builder = builder.source(Arc::new(source));
    }
    Ok(builder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_names_a_command_or_a_url() {
        let e = ServerEntry::from_flag("git=mcp-server-git --repository .").unwrap();
        assert_eq!(e.command, ["mcp-server-git", "--repository", "."]);
        let e = ServerEntry::from_flag("docs=https://example.com/mcp").unwrap();
        assert_eq!(e.url.as_deref(), Some("https://example.com/mcp"));
        assert!(ServerEntry::from_flag("nothing").is_err());
        assert!(ServerEntry::from_flag("=cmd").is_err());
        assert!(ServerEntry::from_flag("x= ").is_err());
    }

    #[test]
    fn an_entry_needs_exactly_one_of_command_and_url() {
        let both: ServerEntry =
            toml::from_str("name = \"x\"\ncommand = [\"a\"]\nurl = \"http://h/\"").unwrap();
        assert!(both.resolve().is_err());
        let none: ServerEntry = toml::from_str("name = \"x\"").unwrap();
        assert!(none.resolve().is_err());
        let limits: ServerEntry =
            toml::from_str("name = \"x\"\ncommand = [\"a\"]\ntimeout-ms = 5\nmax-concurrent = 2")
                .unwrap();
        let (config, limits) = limits.resolve().unwrap();
        assert_eq!(config.name, "x");
        assert_eq!(
            (limits.timeout_ms, limits.max_instances),
            (Some(5), Some(2))
        );
    }
}
