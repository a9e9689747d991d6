//! What adds toolhost to an MCP client's configuration (`host mcp config
//! CLIENT`): for each client people run (Claude Code, Codex, Gemini CLI,
//! Qwen Code, opencode), the entry in that client's own format that starts
//! `host mcp` over stdio with the flags given now, or connects to a
//! running `host serve` over HTTP with a bearer token the client reads
//! from an environment variable (never the token itself: a config file is
//! copied, synced and shown in screenshots).
//!
//! ```text
//! $ host --plugins ./plugins mcp config codex
//! [mcp_servers.toolhost]
//! command = "/usr/local/bin/host"
//! args = ["--plugins", "/home/me/plugins", "mcp"]
//! ```

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::shared_flags::Global;

/// A client `host mcp config` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Code: `.mcp.json` in the project (or `claude mcp add-json`).
    Claude,
    /// Codex: `~/.codex/config.toml`.
    Codex,
    /// Gemini CLI: `~/.gemini/settings.json` (or the project's `.gemini/`).
    Gemini,
    /// Qwen Code: `~/.qwen/settings.json` (or the project's `.qwen/`).
    Qwen,
    /// opencode: `opencode.json` in the project (or `~/.config/opencode/`).
    Opencode,
}

/// How the client reaches toolhost.
#[derive(Debug, Clone)]
pub enum Transport {
    /// The client starts `command args…` (`host … mcp`) and speaks over
    /// its stdin and stdout.
    Stdio {
        /// The `host` binary.
        command: PathBuf,
        /// Its arguments, `mcp` last.
        args: Vec<String>,
    },
    /// The client connects to `url` (a `host serve`), sending
    /// `Authorization: Bearer $token_env` when a variable is named.
    Http {
        /// The server's `/mcp` URL.
        url: url::Url,
        /// The environment variable holding the bearer token.
        token_env: Option<String>,
    },
}

/// Why no snippet is printed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The server's name would not be a key every client accepts.
    #[error(
        "`{0}` cannot be a server's name: use letters, digits, `-` and `_` (at most 64), as every client accepts"
    )]
    Name(String),
    /// The token's variable is not a variable name.
    #[error(
        "`{0}` is not an environment variable's name (letters, digits and `_`, not first a digit)"
    )]
    TokenEnv(String),
    /// The URL is not one a client connects to.
    #[error("`{0}` is not an http:// or https:// URL")]
    Url(String),
}

/// Checks a server name: `[A-Za-z0-9_-]{1,64}` (a TOML bare key, and the
/// `mcp__NAME__tool` prefix Claude Code makes).
pub fn check_name(name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::Name(name.to_owned()))
    }
}

/// Checks an environment variable's name.
pub fn check_env_name(name: &str) -> Result<(), ConfigError> {
    let mut bytes = name.bytes();
    let ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::TokenEnv(name.to_owned()))
    }
}

/// Parses the `--url` of `host mcp config`.
pub fn parse_url(text: &str) -> Result<url::Url, ConfigError> {
    url::Url::parse(text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| ConfigError::Url(text.to_owned()))
}

/// The arguments of `host … mcp` that serve what this command line
/// loads: the plugins, config, policy, grants, limits and modes given now,
/// with every path made absolute (a client starts `host` in a directory of
/// its own choosing).
pub fn serving_args(global: &Global) -> Vec<String> {
    let mut args = Vec::new();
    let mut flag = |name: &str, value: String| {
        args.push(format!("--{name}"));
        args.push(value);
    };
    for dir in &global.plugins {
        flag("plugins", absolute(dir));
    }
    let files = [
        ("config", &global.config),
        ("policy", &global.policy),
        ("lock", &global.lock),
        ("approvals-file", &global.approvals_file),
        ("cache-dir", &global.cache_dir),
        ("oauth-dir", &global.oauth_dir),
    ];
    for (name, file) in files {
        if let Some(file) = file {
            flag(name, absolute(file));
        }
    }
    if let Some(agent) = &global.agent {
        flag("agent", agent.clone());
    }
    for grant in &global.allow_dir {
        flag("allow-dir", absolute_grant(grant));
    }
    let repeated = [
        ("allow-host", &global.allow_host),
        ("allow-env", &global.allow_env),
        ("mcp", &global.mcp),
        ("set", &global.set),
    ];
    for (name, values) in repeated {
        for value in values {
            flag(name, value.clone());
        }
    }
    if let Some(ms) = global.timeout_ms {
        flag("timeout-ms", ms.to_string());
    }
    if let Some(mb) = global.memory_mb {
        flag("memory-mb", mb.to_string());
    }
    if let Some(last) = global.approvals_last {
        flag(
            "approvals-last",
            humantime::format_duration(last).to_string(),
        );
    }
    if let Some(mode) = global.tool_search {
        flag("tool-search", mode.to_string());
    }
    if let Some(mode) = global.code_mode {
        use clap::ValueEnum;
        if let Some(value) = mode.to_possible_value() {
            flag("code-mode", value.get_name().to_owned());
        }
    }
    let switches = [
        ("no-cache", global.no_cache),
        ("no-result-cache", global.no_result_cache),
        ("no-watch", global.no_watch),
        ("dev", global.dev),
        ("locked", global.locked),
    ];
    for (name, on) in switches {
        if on {
            args.push(format!("--{name}"));
        }
    }
    args.push("mcp".to_owned());
    args
}

/// Whether [`serving_args`] writes values given on the command line
/// (`--allow-env PLUGIN=NAME=VALUE`, `--set`) into the entry.
pub fn carries_values(global: &Global) -> bool {
    !global.set.is_empty() || global.allow_env.iter().any(|g| g.matches('=').count() > 1)
}

/// `path` made absolute from the working directory, as text.
fn absolute(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// `PLUGIN=PATH[:ro|:rw]` with its path made absolute.
fn absolute_grant(grant: &str) -> String {
    let Some((plugin, rest)) = grant.split_once('=') else {
        return grant.to_owned();
    };
    let (path, mode) = match rest.rsplit_once(':') {
        Some((path, mode @ ("ro" | "rw"))) => (path, format!(":{mode}")),
        _ => (rest, String::new()),
    };
    format!("{plugin}={}{mode}", absolute(Path::new(path)))
}

/// One server's entry, in the order a person reads it (serde keeps a
/// struct's field order; a JSON map would sort the keys).
#[derive(Serialize)]
struct Entry<'a> {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    /// A command and its arguments (opencode: one list, `command` first).
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    args: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<&'a str>,
    /// Gemini CLI's and Qwen Code's name for a Streamable HTTP URL.
    #[serde(rename = "httpUrl", skip_serializing_if = "Option::is_none")]
    http_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bearer_token_env_var: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    headers: Option<Headers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
}

#[derive(Serialize)]
struct Headers {
    #[serde(rename = "Authorization")]
    authorization: String,
}

/// A file of one server: `{ KEY: { NAME: ENTRY } }`, with opencode's
/// `$schema` first.
#[derive(Serialize)]
struct File<'a> {
    #[serde(rename = "$schema", skip_serializing_if = "Option::is_none")]
    schema: Option<&'static str>,
    #[serde(flatten)]
    servers:
        std::collections::BTreeMap<&'static str, std::collections::BTreeMap<&'a str, Entry<'a>>>,
}

/// The snippet for `client` (printed on stdout), and where it goes (for
/// stderr).
pub fn snippet(client: Client, name: &str, transport: &Transport) -> (String, String) {
    let mut entry = Entry {
        kind: None,
        command: None,
        args: None,
        url: None,
        http_url: None,
        bearer_token_env_var: None,
        headers: None,
        enabled: None,
    };
    // How each client writes a variable in a header.
    let bearer = |var: &str| {
        let reference = match client {
            Client::Claude => format!("${{{var}}}"),
            Client::Gemini | Client::Qwen => format!("${var}"),
            Client::Opencode => format!("{{env:{var}}}"),
            Client::Codex => var.to_owned(),
        };
        Headers {
            authorization: format!("Bearer {reference}"),
        }
    };
    match transport {
        Transport::Stdio { command, args } => {
            let command = command.display().to_string();
            if client == Client::Opencode {
                let mut line = vec![Value::from(command)];
                line.extend(args.iter().map(|a| Value::from(a.as_str())));
                entry.command = Some(Value::Array(line));
            } else {
                entry.command = Some(Value::from(command));
                entry.args = Some(args);
            }
        }
        Transport::Http { url, .. } => match client {
            Client::Gemini | Client::Qwen => entry.http_url = Some(url.as_str()),
            _ => entry.url = Some(url.as_str()),
        },
    }
    if let Transport::Http {
        token_env: Some(var),
        ..
    } = transport
    {
        if client == Client::Codex {
            entry.bearer_token_env_var = Some(var);
        } else {
            entry.headers = Some(bearer(var));
        }
    }
    let stdio = matches!(transport, Transport::Stdio { .. });
    match client {
        Client::Claude => entry.kind = Some(if stdio { "stdio" } else { "http" }),
        Client::Opencode => {
            entry.kind = Some(if stdio { "local" } else { "remote" });
            entry.enabled = Some(true);
        }
        _ => {}
    }
    let (key, schema) = match client {
        Client::Codex => ("mcp_servers", None),
        Client::Opencode => ("mcp", Some("https://opencode.ai/config.json")),
        _ => ("mcpServers", None),
    };
    let hint = match client {
        Client::Claude => format!(
            "Claude Code: save this as .mcp.json in your project (claude asks once to approve it), \
             or add it for yourself alone with: claude mcp add-json {name} '{}'",
            serde_json::to_string(&entry)
                .unwrap_or_default()
                .replace('\'', r"'\''")
        ),
        Client::Codex => "Codex: add this to ~/.codex/config.toml".to_owned(),
        Client::Gemini => "Gemini CLI: merge this into ~/.gemini/settings.json (or .gemini/settings.json in a project); \
             the folder must be trusted, or it starts no MCP server"
            .to_owned(),
        Client::Qwen => {
            "Qwen Code: merge this into ~/.qwen/settings.json (a project's .qwen/settings.json waits for approval)"
                .to_owned()
        }
        Client::Opencode => {
            "opencode: merge this into opencode.json in your project (or ~/.config/opencode/opencode.json)"
                .to_owned()
        }
    };
    let file = File {
        schema,
        servers: [(key, [(name, entry)].into_iter().collect())]
            .into_iter()
            .collect(),
    };
    let text = if client == Client::Codex {
        toml::to_string(&file).unwrap_or_default()
    } else {
        let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
        text.push('\n');
        text
    };
    (text, hint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn http(token_env: Option<&str>) -> Transport {
        Transport::Http {
            url: parse_url("http://127.0.0.1:8080/mcp").unwrap(),
            token_env: token_env.map(str::to_owned),
        }
    }

    #[test]
    fn every_client_names_the_token_by_its_variable_never_by_value() {
        let expected = [
            (Client::Claude, "Bearer ${TOKEN_VAR}"),
            (Client::Codex, "bearer_token_env_var = \"TOKEN_VAR\""),
            (Client::Gemini, "Bearer $TOKEN_VAR"),
            (Client::Qwen, "Bearer $TOKEN_VAR"),
            (Client::Opencode, "Bearer {env:TOKEN_VAR}"),
        ];
        for (client, reference) in expected {
            let (text, _) = snippet(client, "toolhost", &http(Some("TOKEN_VAR")));
            assert!(text.contains(reference), "{client:?}: {text}");
            let (text, _) = snippet(client, "toolhost", &http(None));
            assert!(
                !text.contains("Bearer") && !text.contains("bearer"),
                "{client:?}: {text}"
            );
        }
    }

    #[test]
    fn a_stdio_entry_starts_host_with_the_arguments_given() {
        let stdio = Transport::Stdio {
            command: PathBuf::from("/opt/bin/host"),
            args: vec!["--plugins".into(), "/p lugins".into(), "mcp".into()],
        };
        let (codex, _) = snippet(Client::Codex, "th", &stdio);
        let parsed: toml::Table = toml::from_str(&codex).unwrap();
        assert_eq!(
            parsed["mcp_servers"]["th"]["command"].as_str(),
            Some("/opt/bin/host")
        );
        assert_eq!(
            parsed["mcp_servers"]["th"]["args"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        let (opencode, _) = snippet(Client::Opencode, "th", &stdio);
        let parsed: Value = serde_json::from_str(&opencode).unwrap();
        assert_eq!(
            parsed["mcp"]["th"]["command"],
            json!(["/opt/bin/host", "--plugins", "/p lugins", "mcp"])
        );
    }

    #[test]
    fn names_variables_and_urls_a_client_would_choke_on_are_refused() {
        for bad in ["", "a b", "a.b", "x]", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("tool-host_2").unwrap();
        for bad in ["", "1X", "A-B", "A B", "$X"] {
            assert!(check_env_name(bad).is_err(), "{bad:?}");
        }
        check_env_name("_TOOLHOST_TOKEN2").unwrap();
        for bad in ["ftp://x/mcp", "127.0.0.1:8080", "file:///etc"] {
            assert!(parse_url(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_grants_path_is_made_absolute_and_keeps_its_mode() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(
            absolute_grant("fs=.:ro"),
            format!("fs={}:ro", absolute(Path::new(".")))
        );
        assert!(absolute_grant("fs=data").starts_with(&format!("fs={}", here.display())));
        assert_eq!(absolute_grant("nonsense"), "nonsense");
    }
}
