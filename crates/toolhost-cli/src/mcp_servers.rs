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
//!
//! # OAuth 2.1: every URL server without a bearer token signs in when it
//! # answers 401 (`host mcp login NAME`); this table is needed only for a
//! # registered client, fixed scopes or the client-credentials grant.
//! [[mcp-servers]]
//! name = "tickets"
//! url = "https://mcp.example.com/mcp"
//! oauth = { grant = "client-credentials", client-id = "gateway", client-secret-env = "TICKETS_SECRET", issuer = "https://login.example.com" }
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use toolhost_mcp::client::{
    EnterpriseIdp, HttpEndpoint, McpTransport, OAuthGrant, ProcessSandbox, SignInPrompt, Start,
    StdioServer, UpstreamOAuth,
};
use toolhost_mcp::{McpServerConfig, McpSource};
use toolhost_runtime::{PluginSettings, RuntimeBuilder, grants::LimitOverrides};

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
    /// How an HTTP server is signed in to with OAuth (defaults apply
    /// without it).
    oauth: Option<OAuthEntry>,
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
    /// Its `sampling/createMessage` requests during a call: `allow`
    /// (forwarded to the calling MCP client), `ask` (its user says yes
    /// first; the default) or `deny`.
    sampling: Option<toolhost_runtime::policy::Decision>,
    /// Its `elicitation/create` requests during a call: `allow` (the
    /// default: to the calling client's user, or the person at the
    /// terminal), `ask` or `deny`.
    elicitation: Option<toolhost_runtime::policy::Decision>,
    /// Its `roots/list` requests (revision 2026-07-28 input requests, and
    /// requests during a call): `allow` (the calling client's roots) or
    /// `deny` (the default: a client's roots name its user's folders).
    roots: Option<toolhost_runtime::policy::Decision>,
    /// A sampling request's `maxTokens` is cut to this (default 4096).
    max_sampling_tokens: Option<u32>,
    /// The most sampling and elicitation requests taken from it in a
    /// minute (default 20).
    requests_per_minute: Option<u32>,
}

/// `oauth = { … }`: a registered client, scopes, the grant.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct OAuthEntry {
    /// A client registered with the authorization server beforehand.
    client_id: Option<String>,
    /// A variable holding its secret.
    client_secret_env: Option<String>,
    /// A file holding its secret.
    client_secret_file: Option<PathBuf>,
    /// The authorization server's issuer identifier: the only one the
    /// secret or key, and the refresh tokens, are sent to (needed with a
    /// secret or key).
    issuer: Option<String>,
    /// The https URL of this client's metadata document (CIMD).
    client_metadata_url: Option<String>,
    /// The scopes to ask for (default: what the server says).
    scopes: Option<Vec<String>>,
    /// `authorization-code` (a person signs in, the default),
    /// `client-credentials` (an unattended gateway), `jwt-bearer` (a
    /// workload's own identity, `assertion-file`) or `enterprise` (the
    /// person's organization signs them in, `idp-*`).
    #[serde(default)]
    grant: GrantEntry,
    /// A PEM private key for the client-credentials grant (`private_key_jwt`).
    private_key_file: Option<PathBuf>,
    /// Its algorithm (`ES256` by default).
    signing_algorithm: Option<String>,
    /// The workload's JWT for the `jwt-bearer` grant: a file, read again
    /// at each grant (its platform rotates it).
    assertion_file: Option<PathBuf>,
    /// Enterprise-managed authorization (`grant = "enterprise"`): the
    /// organization's identity provider (its issuer), its token endpoint
    /// (default: from its OpenID configuration), this client's id and
    /// secret file there, and the file the person's ID token from it is in.
    idp_issuer: Option<String>,
    idp_token_endpoint: Option<String>,
    idp_client_id: Option<String>,
    idp_client_secret_file: Option<PathBuf>,
    id_token_file: Option<PathBuf>,
    /// The loopback port of the sign-in redirect (default: any free port).
    redirect_port: Option<u16>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum GrantEntry {
    #[default]
    AuthorizationCode,
    ClientCredentials,
    JwtBearer,
    Enterprise,
}

/// Where the CLI keeps OAuth tokens, and whether it may ask a person.
#[derive(Clone)]
pub struct SignIn {
    /// The token directory.
    pub token_dir: PathBuf,
    /// Shows the sign-in page (an interactive command), or `None`.
    pub prompt: Option<SignInPrompt>,
    /// Whether callers of older MCP revisions come through the command
    /// (it serves MCP): each server's `older_callers`.
    pub older_callers: bool,
}

impl OAuthEntry {
    fn resolve(self, name: &str, sign_in: &SignIn) -> anyhow::Result<UpstreamOAuth> {
        let secret = match (&self.client_secret_env, &self.client_secret_file) {
            (Some(var), None) => Some(std::env::var(var).with_context(|| {
                format!("MCP server `{name}`: client secret variable {var} is not set")
            })?),
            (None, Some(file)) => Some(read_secret(file).with_context(|| {
                format!("MCP server `{name}`: client secret file {}", file.display())
            })?),
            (None, None) => None,
            (Some(_), Some(_)) => {
                bail!("MCP server `{name}`: give client-secret-env or client-secret-file, not both")
            }
        };
        let private_key_pem = match &self.private_key_file {
            Some(file) => Some(read_secret(file).with_context(|| {
                format!("MCP server `{name}`: private key file {}", file.display())
            })?),
            None => None,
        };
        let grant = match self.grant {
            GrantEntry::AuthorizationCode => OAuthGrant::AuthorizationCode,
            GrantEntry::ClientCredentials => {
                if self.client_id.is_none() || (secret.is_none() && private_key_pem.is_none()) {
                    bail!(
                        "MCP server `{name}`: the client-credentials grant needs client-id and a client secret or private-key-file"
                    );
                }
                OAuthGrant::ClientCredentials
            }
            GrantEntry::JwtBearer => {
                if self.assertion_file.is_none() {
                    bail!(
                        "MCP server `{name}`: the jwt-bearer grant needs assertion-file (the workload's JWT)"
                    );
                }
                OAuthGrant::JwtBearer
            }
            GrantEntry::Enterprise => OAuthGrant::Enterprise,
        };
        let enterprise = match (
            grant,
            self.idp_issuer,
            self.idp_client_id,
            self.id_token_file,
        ) {
            (OAuthGrant::Enterprise, Some(issuer), Some(client_id), Some(id_token_file))
                if self.client_id.is_some() =>
            {
                let client_secret = match &self.idp_client_secret_file {
                    Some(file) => Some(read_secret(file).with_context(|| {
                        format!(
                            "MCP server `{name}`: idp client secret file {}",
                            file.display()
                        )
                    })?),
                    None => None,
                };
                Some(Box::new(EnterpriseIdp {
                    issuer,
                    token_endpoint: self.idp_token_endpoint,
                    client_id,
                    client_secret,
                    id_token_file,
                }))
            }
            (OAuthGrant::Enterprise, ..) => bail!(
                "MCP server `{name}`: the enterprise grant needs client-id, idp-issuer, idp-client-id and id-token-file"
            ),
            _ => None,
        };
        Ok(UpstreamOAuth {
            client_id: self.client_id,
            client_secret: secret,
            issuer: self.issuer,
            client_metadata_url: self.client_metadata_url,
            scopes: self.scopes.unwrap_or_default(),
            grant,
            private_key_pem,
            signing_algorithm: self.signing_algorithm,
            assertion_file: self.assertion_file,
            enterprise,
            redirect_port: self.redirect_port,
            token_dir: Some(sign_in.token_dir.clone()),
            prompt: sign_in.prompt.clone(),
            sign_in_command: Some(format!("host mcp login {name}")),
        })
    }
}

/// A secret from a file, without its trailing newline.
fn read_secret(file: &std::path::Path) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(file)?.trim_end().to_owned())
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
            oauth: None,
            prefix: None,
            start: StartEntry::Eager,
            connect_timeout_ms: None,
            max_message_bytes: None,
            timeout_ms: None,
            max_concurrent: None,
            max_result_bytes: None,
            sampling: None,
            elicitation: None,
            roots: None,
            max_sampling_tokens: None,
            requests_per_minute: None,
        };
        if target.starts_with("http://") || target.starts_with("https://") {
            entry.url = Some(target.to_owned());
        } else {
            entry.command = target.split_whitespace().map(str::to_owned).collect();
        }
        Ok(entry)
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client's configuration, and the limits as plugin settings.
    pub fn resolve(self, sign_in: &SignIn) -> anyhow::Result<(McpServerConfig, LimitOverrides)> {
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
                // A server with a bearer token does not sign in.
                let oauth = match (&bearer, self.oauth) {
                    (Some(_), Some(_)) => {
                        bail!("MCP server `{name}`: give a bearer token or `oauth`, not both")
                    }
                    (Some(_), None) => None,
                    (None, entry) => Some(entry.unwrap_or_default().resolve(&name, sign_in)?),
                };
                McpTransport::Http(HttpEndpoint {
                    url: url.clone(),
                    headers: self.headers.into_iter().collect(),
                    bearer,
                    oauth,
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
            older_callers: sign_in.older_callers,
            ..McpServerConfig::stdio(name, "", &[])
        };
        if let Some(ms) = self.connect_timeout_ms {
            config.connect_timeout = Duration::from_millis(ms);
        }
        if let Some(bytes) = self.max_message_bytes {
            config.max_message_bytes = bytes;
        }
        let requests = &mut config.requests;
        if let Some(decision) = self.sampling {
            requests.sampling = decision;
        }
        if let Some(decision) = self.elicitation {
            requests.elicitation = decision;
        }
        if let Some(decision) = self.roots {
            requests.roots = decision;
        }
        if let Some(tokens) = self.max_sampling_tokens {
            requests.max_sampling_tokens = tokens;
        }
        if let Some(n) = self.requests_per_minute {
            requests.per_minute = n;
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
    sign_in: &SignIn,
) -> anyhow::Result<RuntimeBuilder> {
    let mut names = std::collections::BTreeSet::new();
    for entry in entries {
        if !names.insert(entry.name.clone()) {
            bail!("two MCP servers are called `{}`", entry.name);
        }
        let (config, limits) = entry.resolve(sign_in)?;
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

    fn quiet() -> SignIn {
        SignIn {
            token_dir: PathBuf::from("/nonexistent/oauth"),
            prompt: None,
            older_callers: true,
        }
    }

    #[test]
    fn a_url_server_signs_in_with_oauth_unless_it_has_a_bearer_token() {
        let plain: ServerEntry = toml::from_str("name = \"d\"\nurl = \"https://h/mcp\"").unwrap();
        let (config, _) = plain.resolve(&quiet()).unwrap();
        let McpTransport::Http(h) = &config.transport else {
            panic!()
        };
        let oauth = h.oauth.as_ref().unwrap();
        assert_eq!(oauth.grant, OAuthGrant::AuthorizationCode);
        assert_eq!(oauth.sign_in_command.as_deref(), Some("host mcp login d"));
        assert_eq!(
            oauth.token_dir.as_deref(),
            Some(std::path::Path::new("/nonexistent/oauth"))
        );
        let dir = tempfile::tempdir().unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "t\n").unwrap();
        let bearer: ServerEntry = toml::from_str(&format!(
            "name = \"d\"\nurl = \"https://h/mcp\"\nbearer-token-file = {:?}",
            token.display().to_string()
        ))
        .unwrap();
        let (config, _) = bearer.resolve(&quiet()).unwrap();
        let McpTransport::Http(h) = &config.transport else {
            panic!()
        };
        assert!(h.oauth.is_none());
        let both: ServerEntry = toml::from_str(&format!(
            "name = \"d\"\nurl = \"https://h/mcp\"\nbearer-token-file = {:?}\noauth = {{ client-id = \"c\" }}",
            token.display().to_string()
        ))
        .unwrap();
        assert!(both.resolve(&quiet()).is_err());
    }

    #[test]
    fn client_credentials_need_a_client_and_its_secret() {
        let bare: ServerEntry = toml::from_str(
            "name = \"d\"\nurl = \"https://h/mcp\"\noauth = { grant = \"client-credentials\" }",
        )
        .unwrap();
        assert!(bare.resolve(&quiet()).is_err());
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let full: ServerEntry = toml::from_str(&format!(
            "name = \"d\"\nurl = \"https://h/mcp\"\n[oauth]\ngrant = \"client-credentials\"\nclient-id = \"gw\"\nclient-secret-file = {:?}\nscopes = [\"a\"]\nissuer = \"https://login.example.com\"",
            secret.display().to_string()
        ))
        .unwrap();
        let (config, _) = full.resolve(&quiet()).unwrap();
        let McpTransport::Http(h) = &config.transport else {
            panic!()
        };
        let oauth = h.oauth.as_ref().unwrap();
        assert_eq!(oauth.grant, OAuthGrant::ClientCredentials);
        assert_eq!(oauth.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(oauth.scopes, ["a"]);
        assert_eq!(oauth.issuer.as_deref(), Some("https://login.example.com"));
    }

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
        assert!(both.resolve(&quiet()).is_err());
        let none: ServerEntry = toml::from_str("name = \"x\"").unwrap();
        assert!(none.resolve(&quiet()).is_err());
        let limits: ServerEntry =
            toml::from_str("name = \"x\"\ncommand = [\"a\"]\ntimeout-ms = 5\nmax-concurrent = 2")
                .unwrap();
        let (config, limits) = limits.resolve(&quiet()).unwrap();
        assert_eq!(config.name, "x");
        assert_eq!(
            (limits.timeout_ms, limits.max_instances),
            (Some(5), Some(2))
        );
    }
}
