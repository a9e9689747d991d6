//! Signing in to the HTTP MCP servers that ask for OAuth: where the tokens
//! are kept (`--oauth-dir`, else `oauth/` in the user's data directory),
//! whether a command may ask a person (a terminal, or a `BROWSER` to open),
//! how the sign-in page is shown (the URL on stderr, and a browser opened
//! when there is one; `host mcp login NAME` shows it so).

use std::path::PathBuf;
use std::sync::Arc;

use toolhost_mcp::client::SignInPrompt;

use crate::mcp_servers::SignIn;
use crate::shared_flags::Global;

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
/// someone can see it (stderr is a terminal, or `BROWSER` names a browser);
/// `serves`: it serves MCP clients ([`SignIn::older_callers`]).
pub fn context(global: &Global, interactive: bool, serves: bool) -> SignIn {
    let someone = std::io::IsTerminal::is_terminal(&std::io::stderr())
        || std::env::var_os("BROWSER").is_some_and(|b| !b.is_empty());
    SignIn {
        token_dir: token_dir(global),
        prompt: (interactive && someone).then(browser_prompt),
        older_callers: serves,
    }
}

/// Prints the sign-in URL on stderr and opens it in a browser when one is
/// there.
pub fn browser_prompt() -> SignInPrompt {
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
