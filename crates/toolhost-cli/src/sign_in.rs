//! Signing in to the HTTP MCP servers that ask for OAuth: where the tokens
//! are kept (`--oauth-dir`, else `oauth/` in the user's data directory),
//! whether a command may ask a person (a terminal, or a `BROWSER` to open),
//! how the sign-in page is shown (the URL on stderr, and a browser opened
//! when there is one), and `host mcp login NAME` / `host mcp logout NAME`.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use toolhost_mcp::client::SignInPrompt;

use crate::args::{Global, McpAction};
use crate::exit;
use crate::mcp_servers::{ServerEntry, SignIn};

/// The token directory: `--oauth-dir` (or `TOOLHOST_OAUTH_DIR`), else
/// `oauth` in the user's data directory (outside every plugins directory).
pub fn token_dir(global: &Global) -> PathBuf {
    global.oauth_dir.clone().unwrap_or_else(|| {
        directories::ProjectDirs::from("", "", "toolhost").map_or_else(
            || PathBuf::from(".toolhost-oauth"),
            |d| d.data_dir().join("oauth"),
        )
    })
}

/// How a command signs in: a person may be asked when `interactive` and
/// someone can see it (stderr is a terminal, or `BROWSER` names a browser).
pub fn context(global: &Global, interactive: bool) -> SignIn {
    let someone = std::io::IsTerminal::is_terminal(&std::io::stderr())
        || std::env::var_os("BROWSER").is_some_and(|b| !b.is_empty());
    SignIn {
        token_dir: token_dir(global),
        prompt: (interactive && someone).then(browser_prompt),
    }
}

/// Prints the sign-in URL on stderr and opens it in a browser when one is
/// there.
fn browser_prompt() -> SignInPrompt {
    SignInPrompt(Arc::new(|server, url| {
        eprintln!("Sign in to the MCP server `{server}` in your browser:\n  {url}");
        match open_browser(url) {
            Ok(true) => eprintln!("(opened in your browser; waiting for the sign-in to finish)"),
            Ok(false) => {
                eprintln!("(open that URL on this machine; waiting for the sign-in to finish)");
            }
            Err(e) => eprintln!("(the browser did not start: {e}; open that URL on this machine)"),
        }
    }))
}

/// Opens `url` with `BROWSER` (the first of its `:`-separated commands,
/// `%s` standing for the URL, else the URL appended), else the desktop's
/// opener where there is a desktop; `false` when there is none.
fn open_browser(url: &str) -> std::io::Result<bool> {
    let mut command = match std::env::var("BROWSER") {
        Ok(list) if !list.trim().is_empty() => {
            let first = list.split(':').next().unwrap_or_default();
            let mut words = first.split_whitespace();
            let Some(program) = words.next() else {
                return Ok(false);
            };
            let mut command = std::process::Command::new(program);
            let mut placed = false;
            for word in words {
                if word.contains("%s") {
                    placed = true;
                    command.arg(word.replace("%s", url));
                } else {
                    command.arg(word);
                }
            }
            if !placed {
                command.arg(url);
            }
            command
        }
        _ if cfg!(target_os = "macos") => {
            let mut command = std::process::Command::new("open");
            command.arg(url);
            command
        }
        _ if std::env::var_os("DISPLAY").is_some()
            || std::env::var_os("WAYLAND_DISPLAY").is_some() =>
        {
            let mut command = std::process::Command::new("xdg-open");
            command.arg(url);
            command
        }
        _ => return Ok(false),
    };
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // Reaped when it exits; nobody waits for it.
    std::thread::spawn(move || child.wait());
    Ok(true)
}

/// `host mcp login NAME` and `host mcp logout NAME`.
pub async fn run(
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
                token_dir: token_dir(global),
                prompt: Some(browser_prompt()),
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
            let dir = token_dir(global);
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
