//! Command-line arguments, and the `clap` command made from them: the
//! flags every command shares, grouped under headings, and for each
//! command's `--help` (and its completions) only the flags it uses
//! ([`command`]).

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

/// The heading of the flags that say which plugins load and how.
const PLUGINS: &str = "Plugins";
/// The heading of the grants given on the command line.
const GRANTS: &str = "Grants";
/// The heading of the policy's and approvals' flags.
const POLICY: &str = "Policy and approvals";
/// The heading of the model's flags.
const MODEL: &str = "Model";

/// Run sandboxed WebAssembly tool plugins: list them, call them, chat with them.
#[derive(Debug, Parser)]
#[command(
    name = "host",
    version,
    about,
    long_about = None,
    after_help = "`host COMMAND --help` shows the flags that command uses. \
                  The book: docs/guide/cli.md; a man page: `host man`."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The `clap` command of `host`: [`Cli`], with each subcommand showing (in
/// its `--help`, its usage and the shell completions) only the shared
/// flags it uses ([`uses`]). The others are still accepted, and change
/// nothing for that command: each subcommand gets a hidden copy of them
/// before clap propagates the shared flags (it skips what a subcommand
/// has already).
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    let shared: Vec<clap::Arg> = cmd
        .get_arguments()
        .filter(|a| a.is_global_set())
        .cloned()
        .collect();
    for sub in cmd.get_subcommands_mut() {
        let name = sub.get_name().to_owned();
        let mut taken = std::mem::take(sub);
        for arg in shared.iter().filter(|a| !uses(&name, a)) {
            taken = taken.arg(arg.clone().hide(true));
        }
        *sub = taken;
    }
    cmd
}

/// Parses the process's arguments (exits with clap's message and code on
/// an error, `--help` or `--version`).
pub fn parse() -> Cli {
    let matches = command().get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Whether the command `name` uses the shared flag `arg`.
fn uses(name: &str, arg: &clap::Arg) -> bool {
    let id = arg.get_id().as_str();
    if id == "verbose" {
        return true;
    }
    let heading = arg.get_help_heading();
    let loads = [Some(PLUGINS), Some(GRANTS), Some(POLICY)].contains(&heading);
    match name {
        "run" | "chat" => true,
        "tools" | "plugins" | "call" | "explain" => loads,
        "mcp" | "serve" => loads || ["tool_search", "sessions_dir"].contains(&id),
        "trust" => heading == Some(PLUGINS),
        "check" => ["config", "cache_dir", "no_cache", "timeout_ms", "memory_mb"].contains(&id),
        "approvals" => ["plugins", "config", "lock", "approvals_file"].contains(&id),
        "install" => ["plugins", "config", "lock"].contains(&id),
        "publish" => id == "config",
        _ => false,
    }
}

/// Options every command shares.
#[derive(Debug, Args)]
pub struct Global {
    /// A directory of plugins (`NAME.wasm` + optional `NAME.toml`), or one `.wasm` file. Repeatable.
    #[arg(long = "plugins", value_name = "DIR", global = true, help_heading = PLUGINS)]
    pub plugins: Vec<PathBuf>,

    /// Configuration file (TOML): default limits and per-plugin grants, limits and config.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_CONFIG", global = true, help_heading = PLUGINS)]
    pub config: Option<PathBuf>,

    /// Grant a plugin a directory: `PLUGIN=PATH`, `PLUGIN=PATH:ro` or `PLUGIN=PATH:rw`. Repeatable.
    #[arg(long = "allow-dir", value_name = "PLUGIN=PATH[:ro|:rw]", global = true, help_heading = GRANTS)]
    pub allow_dir: Vec<String>,

    /// Grant a plugin a network host: `PLUGIN=HOST[:PORT]`, `PLUGIN=https://HOST`, `PLUGIN=*.DOMAIN`. Repeatable.
    #[arg(long = "allow-host", value_name = "PLUGIN=HOST", global = true, help_heading = GRANTS)]
    pub allow_host: Vec<String>,

    /// Grant a plugin an environment variable: `PLUGIN=NAME` (the host's value) or `PLUGIN=NAME=VALUE`. Repeatable.
    #[arg(long = "allow-env", value_name = "PLUGIN=NAME[=VALUE]", global = true, help_heading = GRANTS)]
    pub allow_env: Vec<String>,

    /// An external MCP server whose tools join the plugins', behind the same
    /// policy, hooks and limits: `NAME=COMMAND [ARGS…]` (stdio) or `NAME=URL`
    /// (Streamable HTTP). Its tools are called `NAME__TOOL`. Repeatable; the
    /// config file's `[[mcp-servers]]` says more (env, sandbox, limits).
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL", global = true, help_heading = GRANTS)]
    pub mcp: Vec<String>,

    /// Where the OAuth tokens of MCP servers are kept (`host mcp login`):
    /// one file per server, readable by you only. Default: `oauth` in the
    /// user's data directory (~/.local/share/toolhost/oauth/).
    #[arg(long, value_name = "DIR", env = "TOOLHOST_OAUTH_DIR", global = true)]
    pub oauth_dir: Option<PathBuf>,

    /// Set a plugin config value: `PLUGIN.KEY=VALUE`. Repeatable.
    #[arg(long = "set", value_name = "PLUGIN.KEY=VALUE", global = true, help_heading = GRANTS)]
    pub set: Vec<String>,

    /// Default wall-clock limit of a call, in milliseconds.
    #[arg(long, value_name = "MS", global = true, help_heading = PLUGINS)]
    pub timeout_ms: Option<u64>,

    /// Default memory limit of a call, in MiB.
    #[arg(long, value_name = "MIB", global = true, help_heading = PLUGINS)]
    pub memory_mb: Option<u64>,

    /// Directory of the compile cache (default: the user's cache directory).
    #[arg(long, value_name = "DIR", env = "TOOLHOST_CACHE_DIR", global = true, help_heading = PLUGINS)]
    pub cache_dir: Option<PathBuf>,

    /// Compile every plugin, without reading or writing the cache.
    #[arg(long, global = true, help_heading = PLUGINS)]
    pub no_cache: bool,

    /// Run every call, never answering one from the result cache of
    /// read-only, idempotent tools.
    #[arg(long, global = true, help_heading = POLICY)]
    pub no_result_cache: bool,

    /// Permission policy file (TOML): allow / ask / deny rules, result approval,
    /// per-agent profiles, plugin grants. Errors stop the host before it starts.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_POLICY", global = true, help_heading = POLICY)]
    pub policy: Option<PathBuf>,

    /// Approve every call and result the policy or a hook asks about, without
    /// asking (by default the host asks on the terminal; with no answer, it denies).
    #[arg(long, global = true, help_heading = POLICY)]
    pub yes: bool,

    /// Take answers to approval prompts from stdin even when it is not a
    /// terminal (a script that means its answers). Without it, a piped stdin
    /// answers nothing, so `yes | host run` approves nothing.
    #[arg(long, global = true, help_heading = POLICY)]
    pub answers_from_stdin: bool,

    /// The agent profile: the policy's `[profiles.NAME]`, and the config
    /// file's `[agents.NAME.options]` model options.
    #[arg(long, value_name = "NAME", global = true, help_heading = POLICY)]
    pub agent: Option<String>,

    /// Do not watch the plugin directories (by default the interactive session
    /// and `run` reload plugins whose files change).
    #[arg(long, global = true, help_heading = PLUGINS)]
    pub no_watch: bool,

    /// The lock file binding each plugin's grants to its code (content
    /// digest), recorded at the first grant; a plugin whose code differs runs
    /// without its grants until `host trust NAME`. Default: one per plugins
    /// directory (the first given), in the user's state directory
    /// (~/.local/state/toolhost/locks/), whatever directory host starts in.
    #[arg(long, value_name = "FILE", env = "TOOLHOST_LOCK", global = true, help_heading = PLUGINS)]
    pub lock: Option<PathBuf>,

    /// Development mode: a plugin whose code changed (a rebuild) keeps its
    /// grants, and the lock file records its new digest.
    #[arg(long, global = true, help_heading = PLUGINS)]
    pub dev: bool,

    /// Production mode: the lock file must exist, grants go only to the code
    /// it names, and it is never written (no trust on first use). For
    /// replicas that ship a lock prepared ahead, read-only.
    #[arg(long, env = "TOOLHOST_LOCKED", global = true, help_heading = PLUGINS)]
    pub locked: bool,

    /// Where "allow always" answers are kept on one machine (default: beside
    /// the lock file, `NAME.approvals.json`). With a read-only lock (the
    /// image's), a file in a writable volume.
    #[arg(long = "approvals-file", value_name = "FILE", env = "TOOLHOST_APPROVALS", global = true, help_heading = POLICY)]
    pub approvals_file: Option<PathBuf>,

    /// How long an "allow always" answer lasts: `30d`, `12h`, `90m` (default:
    /// until revoked). Every approval saved from then on expires after it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, global = true, help_heading = POLICY)]
    pub approvals_last: Option<std::time::Duration>,

    /// Model provider: openai (or any compatible server, with --base-url), anthropic or ollama.
    /// Default: OPENAI_API_KEY, then ANTHROPIC_API_KEY, then a local Ollama server.
    #[arg(long, value_name = "KIND", global = true, help_heading = MODEL)]
    pub provider: Option<String>,

    /// Model name, as the provider knows it.
    #[arg(long, value_name = "NAME", global = true, help_heading = MODEL)]
    pub model: Option<String>,

    /// Base URL of the provider's API (e.g. http://localhost:8000/v1 for vLLM).
    #[arg(long, value_name = "URL", global = true, help_heading = MODEL)]
    pub base_url: Option<String>,

    /// Environment variable that holds the API key.
    #[arg(long, value_name = "VAR", global = true, help_heading = MODEL)]
    pub api_key_env: Option<String>,

    /// How tools reach the model: native tool calling, or a prompt-based protocol (json, xml).
    #[arg(long, value_name = "native|json|xml", global = true, help_heading = MODEL)]
    pub protocol: Option<String>,

    /// When the model searches the tools (`search_tools`) instead of reading
    /// every definition: auto (past 32 tools, 24 KiB of definitions or a
    /// quarter of the context window), on, off. MCP clients of `host mcp` and
    /// `host serve` get `search_tools` only with `on`. Wins over the config
    /// file's `[tool-search] mode`.
    #[arg(long, value_name = "auto|on|off", global = true, help_heading = MODEL)]
    pub tool_search: Option<toolhost_search::ToolSearchMode>,

    /// Code mode: `on` loads the program runner (`run-code`, from the config
    /// file's `[code] runner` or a plugins directory) and lets it call every
    /// tool, so a model can write one program that calls the tools; each
    /// call from the program passes the whole gate as the caller's own.
    /// `auto`: on when the runner is there (never an error when it is not);
    /// the agent loop offers the program tools past the tool search budget.
    /// Wins over the config file's `[code] mode` (default off).
    #[arg(long, value_name = "auto|on|off", global = true, help_heading = GRANTS)]
    pub code_mode: Option<crate::code_mode::CodeMode>,

    /// Most tool rounds per turn; then the model is asked for a final answer.
    #[arg(long, value_name = "N", global = true, help_heading = MODEL)]
    pub max_rounds: Option<u32>,

    /// The model's context window in tokens: past 80% of it, old tool
    /// outputs are pruned and old turns summarised (default: known for
    /// common models, else learned when the server refuses a request).
    #[arg(long, value_name = "TOKENS", global = true, help_heading = MODEL)]
    pub context_window: Option<u32>,

    /// Longest a turn (`run`, or one chat message) may take, model and tools
    /// included, before it ends with status `timeout` (0: no limit).
    /// Also spelt `--timeout`.
    #[arg(
        long,
        alias = "timeout",
        value_name = "SECS",
        global = true,
        help_heading = MODEL,
        default_value_t = 1800
    )]
    pub run_timeout: u64,

    /// A named set of model options from the config file (`[variants.NAME]`),
    /// laid over `[model.options]` and the agent profile's options.
    #[arg(long, value_name = "NAME", global = true, help_heading = MODEL)]
    pub variant: Option<String>,

    /// Sampling temperature (0 to 2); wins over every config layer.
    #[arg(long, value_name = "T", global = true, help_heading = MODEL)]
    pub temperature: Option<f32>,

    /// Nucleus sampling (0 to 1); wins over every config layer.
    #[arg(long, value_name = "P", global = true, help_heading = MODEL)]
    pub top_p: Option<f32>,

    /// Upper bound on output tokens per request; wins over every config layer.
    #[arg(long, value_name = "N", global = true, help_heading = MODEL)]
    pub max_tokens: Option<u32>,

    /// Replace the base system prompt with the text of FILE (the date and
    /// the plugins' usage rules are still appended); wins over the config
    /// file's `system-prompt` / `system-prompt-file`.
    #[arg(long, value_name = "FILE", global = true, help_heading = MODEL)]
    pub system_prompt: Option<PathBuf>,

    /// Directory of saved sessions (`--session NAME`, `/save`, `/load`);
    /// default: `sessions` in the user's data directory.
    #[arg(long, value_name = "DIR", env = "TOOLHOST_SESSIONS_DIR", global = true, help_heading = MODEL)]
    pub sessions_dir: Option<PathBuf>,

    /// More log output on stderr (-v info, -vv debug, -vvv trace). `RUST_LOG` wins when set.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every tool with its plugin@version, description and argument schema.
    Tools {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List every plugin with what it requests and what it was granted.
    Plugins {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Accept the plugin now loaded under NAME as the code its grants are
    /// given to (records its digest in the lock file).
    Trust {
        /// The plugin's name.
        name: String,
    },
    /// The saved approvals ("allow always" answers): list, revoke, clear.
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Call one tool and print its output.
    Call {
        /// The tool's name.
        tool: String,
        /// Arguments as a JSON object (default `{}`).
        args: Option<String>,
        /// Also print the details (JSON for UIs) after the output.
        #[arg(long)]
        details: bool,
        /// Print the whole result (or the error) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the model once, let it call tools, print the final answer.
    Run {
        /// The prompt.
        prompt: String,
        /// Print the whole tool chain (messages, calls, usage, status) as JSON.
        #[arg(long)]
        json: bool,
        /// Continue the saved session NAME (created when absent): its
        /// conversation and variables go into the run, and the new turn is saved.
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
    },
    /// Chat with the model (what `host` with no command does).
    Chat {
        /// Load the saved session NAME (created when absent) and save it
        /// after every turn.
        #[arg(long, value_name = "NAME")]
        session: Option<String>,
    },
    /// Serve every tool over MCP on stdin and stdout, for an MCP client that
    /// starts `host` (Claude Code, Codex, Cursor, goose …); `login` and
    /// `logout` sign in to (and out of) an external MCP server.
    Mcp {
        #[command(subcommand)]
        action: Option<McpAction>,
    },
    /// Serve every tool over MCP's Streamable HTTP transport at `/mcp`, with
    /// `/healthz` and `/readyz` beside it.
    Serve {
        /// Address to listen on (a non-loopback address needs a token).
        #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// File of bearer tokens: one per line, each optionally followed by
        /// the policy profile its client's calls run under (`TOKEN
        /// reviewer`), then `ask=client|operator|deny` (who answers its
        /// calls' asks); `TOKEN role=operator` is an operator's token, which
        /// signs in to the console and calls nothing.
        #[arg(long, value_name = "FILE", conflicts_with = "token_env")]
        token_file: Option<PathBuf>,
        /// Environment variable holding the bearer token clients must send.
        #[arg(long, value_name = "VAR")]
        token_env: Option<String>,
        /// A `Host` header value to accept besides loopback names, i.e. a
        /// name clients reach this server by (repeatable).
        #[arg(long, value_name = "HOST")]
        accept_host: Vec<String>,
        /// A browser origin to accept, e.g. `https://app.example.com:443`
        /// (repeatable); any other `Origin` is refused.
        #[arg(long, value_name = "ORIGIN")]
        accept_origin: Vec<String>,
        /// No sessions for any protocol revision, so any replica can answer
        /// any request.
        #[arg(long)]
        stateless: bool,
        /// Most requests served at once (HTTP 503 beyond).
        #[arg(long, value_name = "N", default_value_t = toolhost_mcp::server::DEFAULT_MAX_CONCURRENT_REQUESTS)]
        max_concurrent: usize,
        /// Largest request body in bytes (HTTP 413 beyond).
        #[arg(long, value_name = "BYTES", default_value_t = toolhost_mcp::server::DEFAULT_MAX_REQUEST_BYTES)]
        max_request_bytes: usize,
        /// Serve /metrics without a bearer token even when tokens are set
        /// (the figures tell who calls which tool how often).
        #[arg(long)]
        metrics_public: bool,
        /// Who answers a policy's or hook's `ask`: `client` (the caller,
        /// through MCP elicitation), `operator` (the call waits in the
        /// console's approvals queue; needs --console) or `deny` (the call
        /// is refused, saying why). Default: `client` on a loopback address,
        /// `deny` on any other, so a remote caller never approves its own
        /// calls. A token's `ask=` wins for its calls.
        #[arg(long, value_name = "client|operator|deny")]
        asks: Option<String>,
        /// Serve the operator's console at /console: plugins, policy, live
        /// calls, the approvals queue and saved approvals. With tokens set,
        /// only an operator's token (`role=operator`) signs in.
        #[arg(long)]
        console: bool,
    },
    /// Validate a plugin file and print what it exports and requests.
    Check {
        /// The component file.
        file: PathBuf,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// `publish`, `install` and `keygen`: plugins through OCI registries.
    #[command(flatten)]
    Registry(RegistryCommand),
    /// Create a plugin project in NAME/: a manifest, one tool, a test and
    /// its build command (Rust, Python, JavaScript or Go).
    New(crate::new::NewArgs),
    /// Say what would happen to a call, and why, without running it: the
    /// plugin that answers, the arguments' check, the policy's rule (file
    /// and line), the hooks, a saved approval, the grants and limits.
    Explain {
        /// The tool's name.
        tool: String,
        /// Arguments as a JSON object (default `{}`).
        args: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// powershell (e.g. `host completions bash > ~/.local/share/bash-completion/completions/host`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page of `host` (or of one command) in roff, or write
    /// every page into a directory (e.g. `host man --dir ~/.local/share/man/man1`).
    Man {
        /// The command whose page to print (`host man call`); default: `host`'s.
        command: Option<String>,
        /// Write host.1 and a page per command (host-call.1 …) into DIR.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
}

/// `host mcp login|logout NAME`.
#[derive(Debug, Subcommand)]
pub enum McpAction {
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

/// `host approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Every saved approval: id, tool, plugin and digest, scope, who, when,
    /// from which prompt.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Remove one saved approval: the next such call is asked again.
    Revoke {
        /// Its id (from `host approvals list`).
        id: String,
    },
    /// Remove every saved approval.
    Clear,
}

/// The registry commands (flattened into `host`'s commands).
#[derive(Debug, Subcommand)]
pub enum RegistryCommand {
    /// Push a plugin (FILE.wasm and the NAME.toml beside it) to an OCI
    /// registry as a Wasm OCI artifact; with --key, sign it (cosign format).
    Publish {
        /// The component file.
        file: PathBuf,
        /// Where to push: `oci://REGISTRY/REPO:TAG` or `REGISTRY/REPO:TAG`.
        reference: String,
        /// Sign the pushed manifest with this private key (P-256, PEM; see `host keygen`).
        #[arg(long, value_name = "PRIVATE.pem")]
        key: Option<PathBuf>,
        /// Plain HTTP to a registry that is not on loopback.
        #[arg(long)]
        insecure: bool,
    },
    /// Install a plugin from an OCI registry (`oci://REGISTRY/REPO:TAG`,
    /// `REGISTRY/REPO@sha256:…`) or a file into the first plugins directory,
    /// verified, and record it in the lock file.
    Install {
        /// `oci://REGISTRY/REPO:TAG`, `REGISTRY/REPO@sha256:…`, a path or `file://PATH`.
        reference: String,
        /// A trusted public key (PEM); adds to the config file's `trusted-keys`. Repeatable.
        #[arg(long = "key", value_name = "PUBLIC.pem")]
        keys: Vec<PathBuf>,
        /// Refuse the plugin unless a trusted key signed it (config: `require-signed = true`).
        #[arg(long)]
        require_signature: bool,
        /// The name to install it under; the artifact's own name must be
        /// this. Default: the reference's (the file's stem, the
        /// repository's last part).
        #[arg(long, value_name = "NAME")]
        name: Option<String>,
        /// Replace a plugin of that name installed or trusted as other code
        /// (another digest, source or signer); its grants then apply to the
        /// new code. Without it, such an install is refused.
        #[arg(long)]
        replace: bool,
        /// Plain HTTP to a registry that is not on loopback.
        #[arg(long)]
        insecure: bool,
    },
    /// Create a key pair that signs plugins: PREFIX.key (private, PKCS#8
    /// PEM, readable by you only) and PREFIX.pub (public, PEM).
    Keygen {
        /// Path prefix of the two files.
        #[arg(default_value = "toolhost")]
        prefix: PathBuf,
    },
}
