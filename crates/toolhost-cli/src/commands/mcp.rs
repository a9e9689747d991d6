//! `host mcp`: serves every tool over MCP on stdin and stdout, for an MCP
//! client that starts `host`; `host mcp login|logout NAME` signs in to (and
//! out of) an external MCP server, loading nothing else; `host mcp config
//! CLIENT` prints what adds toolhost to that client (`client_config.rs`).

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use super::HostCommand;
use crate::client_config::{self, Client, Transport};
use crate::mcp_servers::{ServerEntry, SignIn};
use crate::notices::{self, report_load_problems};
use crate::setup::{self, Setup};
use crate::shared_flags::{GRANTS, Global, PLUGINS, POLICY, Shows};
use crate::{exit, serving, settings, sign_in};

/// Serve every tool over MCP on stdin and stdout, for an MCP client that
/// starts `host` (Claude Code, Codex, Cursor, goose …); `login` and
/// `logout` sign in to (and out of) an external MCP server.
#[derive(Debug, Parser)]
#[command(name = "mcp")]
pub struct Mcp {
    #[command(subcommand)]
    action: Option<McpAction>,
}

/// `host mcp login|logout NAME`.
#[derive(Debug, Subcommand)]
enum McpAction {
    /// Sign in to the HTTP MCP server NAME (`--mcp NAME=URL` or the config
    /// file's `[[mcp-servers]]`) with OAuth: its sign-in page opens in your
    /// browser (the URL is printed too), and the tokens are kept for every
    /// later command, refreshed when they expire.
    Login {
        /// The server's name.
        name: String,
    },
    /// Forget the OAuth tokens kept for the MCP server NAME.
    Logout {
        /// The server's name.
        name: String,
    },
    /// Print the configuration that adds toolhost to an MCP client, in the
    /// client's own format: over stdio it starts `host … mcp` with the
    /// plugins, config, policy, grants and limits given to this command
    /// (paths made absolute); with `--url`, it connects to a running
    /// `host serve`, the bearer token read from the variable
    /// `--token-env` names (never written into the file). Where it goes
    /// is printed on stderr.
    Config {
        /// The client: claude (Claude Code), codex, gemini (Gemini CLI),
        /// qwen (Qwen Code), opencode.
        #[arg(value_enum)]
        client: Client,
        /// Connect over HTTP to this `host serve` URL
        /// (`http://127.0.0.1:8080/mcp`) instead of starting `host mcp`.
        #[arg(long, value_name = "URL", value_parser = client_config::parse_url)]
        url: Option<url::Url>,
        /// With `--url`: the environment variable the client reads the
        /// bearer token from, as `Authorization: Bearer …` (a server with
        /// OAuth needs none).
        #[arg(long, value_name = "VAR", requires = "url")]
        token_env: Option<String>,
        /// The server's name in the client's configuration (the prefix
        /// of its tools' names there).
        #[arg(long, value_name = "NAME", default_value = "toolhost")]
        name: String,
    },
}

/// Serving: one client over stdio, whose caller is elsewhere (no person to
/// sign in here); plugins that change are reloaded.
const SERVING: Setup = Setup {
    one_worker: true,
    watches: true,
    read_var: false,
    person: false,
    serves_mcp: true,
};

impl HostCommand for Mcp {
    const SHOWS: Shows = Shows::Only {
        headings: &[PLUGINS, GRANTS, POLICY],
        flags: &["tool_search", "sessions_dir"],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        match self.action {
            Some(McpAction::Config {
                client,
                url,
                token_env,
                name,
            }) => return print_config(global, client, url, token_env, &name),
            Some(McpAction::Login { name }) => return sign(global, Sign::In(name)),
            Some(McpAction::Logout { name }) => return sign(global, Sign::Out(name)),
            None => {}
        }
        let loaded = SERVING.load(global)?;
        report_load_problems(&loaded.runtime);
        notices::print_plugin_events(&loaded.rt, &loaded.runtime, None);
        loaded
            .rt
            .block_on(serving::stdio(global, &loaded.file, loaded.runtime))
    }
}

/// `host mcp config CLIENT`: the snippet on stdout, where it goes on
/// stderr; nothing is loaded or started.
fn print_config(
    global: &Global,
    client: Client,
    url: Option<url::Url>,
    token_env: Option<String>,
    name: &str,
) -> anyhow::Result<u8> {
    client_config::check_name(name)?;
    if let Some(var) = &token_env {
        client_config::check_env_name(var)?;
    }
    let transport = match url {
        Some(url) => Transport::Http { url, token_env },
        None => Transport::Stdio {
            command: std::env::current_exe()
                .and_then(std::fs::canonicalize)
                .context("finding the `host` binary to start")?,
            args: client_config::serving_args(global),
        },
    };
    let (text, hint) = client_config::snippet(client, name, &transport);
    crate::stdout::out!("{text}")?;
    eprintln!("{hint}");
    if matches!(transport, Transport::Stdio { .. }) && client_config::carries_values(global) {
        eprintln!(
            "Note: the entry carries the values given with --allow-env PLUGIN=NAME=VALUE or --set; \
             whoever reads the client's configuration reads them (--allow-env PLUGIN=NAME passes \
             the client's own variable instead)."
        );
    }
    Ok(exit::OK)
}

/// `host mcp login NAME` or `host mcp logout NAME`.
enum Sign {
    In(String),
    Out(String),
}

/// Signs in or out; loads no plugins.
fn sign(global: &Global, sign: Sign) -> anyhow::Result<u8> {
    let rt = setup::tokio()?;
    let servers = settings::mcp_servers(global)?;
    rt.block_on(login_or_logout(global, servers, sign))
}

/// `host mcp login NAME` and `host mcp logout NAME`.
async fn login_or_logout(
    global: &Global,
    entries: Vec<ServerEntry>,
    sign: Sign,
) -> anyhow::Result<u8> {
    match sign {
        Sign::In(name) => {
            let Some(entry) = entries.into_iter().find(|e| e.name() == name) else {
                bail!(
                    "no MCP server is called `{name}` (give it with --mcp {name}=URL or in the config file's [[mcp-servers]])"
                );
            };
            let sign_in = SignIn {
                token_dir: sign_in::token_dir(global),
                prompt: Some(sign_in::browser_prompt()),
                older_callers: false,
            };
            let (config, _) = entry.resolve(&sign_in)?;
            let signed = toolhost_mcp::client::sign_in(&config)
                .await
                .with_context(|| format!("signing in to `{name}`"))?;
            let scopes = if signed.scopes.is_empty() {
                "no particular scope".to_owned()
            } else {
                format!("scopes {}", signed.scopes.join(" "))
            };
            let lasts = match signed.expires_in {
                Some(d) => format!(", the access token lasts {} s", d.as_secs()),
                None => String::new(),
            };
            let refresh = if signed.refreshable {
                " and is refreshed when it expires"
            } else {
                ""
            };
            eprintln!("Signed in to `{name}` ({scopes}){lasts}{refresh}.");
            if let Some(file) = &signed.token_file {
                eprintln!(
                    "The tokens are kept in {} (readable by you only).",
                    file.display()
                );
            }
            Ok(exit::OK)
        }
        Sign::Out(name) => {
            let dir = sign_in::token_dir(global);
            let file = toolhost_mcp::client::token_file(&name, &dir);
            if toolhost_mcp::client::sign_out(&name, &dir)
                .with_context(|| format!("removing {}", file.display()))?
            {
                eprintln!("Signed out of `{name}`: removed {}.", file.display());
            } else {
                eprintln!(
                    "No tokens are kept for `{name}` ({} does not exist).",
                    file.display()
                );
            }
            Ok(exit::OK)
        }
    }
}
