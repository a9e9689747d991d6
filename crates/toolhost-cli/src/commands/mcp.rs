//! `host mcp`: serves every tool over MCP on stdin and stdout, for an MCP
//! client that starts `host`; `host mcp login|logout NAME` signs in to (and
//! out of) an external MCP server, loading nothing else.

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use super::HostCommand;
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
}

/// Serving: one client over stdio, whose caller is elsewhere (no person to
/// sign in here); plugins that change are reloaded.
const SERVING: Setup = Setup {
    one_worker: true,
    watches: true,
    read_var: false,
    person: false,
};

impl HostCommand for Mcp {
    const SHOWS: Shows = Shows::Only {
        headings: &[PLUGINS, GRANTS, POLICY],
        flags: &["tool_search", "sessions_dir"],
    };

    fn exec(self, global: &Global) -> anyhow::Result<u8> {
        if let Some(action) = &self.action {
            // Signing in loads no plugins.
            let rt = setup::tokio()?;
            let servers = settings::mcp_servers(global)?;
            return rt.block_on(login_or_logout(global, servers, action));
        }
        let loaded = SERVING.load(global)?;
        report_load_problems(&loaded.runtime);
        notices::print_plugin_events(&loaded.rt, &loaded.runtime, None);
        loaded
            .rt
            .block_on(serving::stdio(global, &loaded.file, loaded.runtime))
    }
}

/// `host mcp login NAME` and `host mcp logout NAME`.
async fn login_or_logout(
    global: &Global,
    entries: Vec<ServerEntry>,
    action: &McpAction,
) -> anyhow::Result<u8> {
    match action {
        McpAction::Login { name } => {
            let Some(entry) = entries.into_iter().find(|e| e.name() == name) else {
                bail!(
                    "no MCP server is called `{name}` (give it with --mcp {name}=URL or in the config file's [[mcp-servers]])"
                );
            };
            let sign_in = SignIn {
                token_dir: sign_in::token_dir(global),
                prompt: Some(sign_in::browser_prompt()),
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
        McpAction::Logout { name } => {
            let dir = sign_in::token_dir(global);
            let file = toolhost_mcp::client::token_file(name, &dir);
            if toolhost_mcp::client::sign_out(name, &dir)
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
