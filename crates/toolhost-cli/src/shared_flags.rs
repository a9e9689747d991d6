//! The flags every command shares, grouped under headings: given before
//! the command's name (`host --plugins DIR mcp`) or after it (`global =
//! true`), and accepted by every command. Which of them a command's
//! `--help` (its usage and completions) shows, it says itself in its own
//! file ([`Shows`], `commands/`); the others change nothing for it.

use std::path::PathBuf;

use clap::{Args, Parser};

/// The heading of the flags that say which plugins load and how.
pub const PLUGINS: &str = "Plugins";
/// The heading of the grants given on the command line.
pub const GRANTS: &str = "Grants";
/// The heading of the policy's and approvals' flags.
pub const POLICY: &str = "Policy and approvals";
/// The heading of the model's flags.
pub const MODEL: &str = "Model";

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
pub struct Host {
    #[command(flatten)]
    pub global: Global,
}

/// Which of the shared flags a command's `--help`, usage and completions
/// show (`-v` always): each command declares its own (`HostCommand::SHOWS`).
#[derive(Debug, Clone, Copy)]
pub enum Shows {
    /// Every shared flag.
    All,
    /// The flags under these headings, and these flags by id (the field's
    /// name).
    Only {
        headings: &'static [&'static str],
        flags: &'static [&'static str],
    },
}

impl Shows {
    /// None but `-v`.
    pub const NONE: Shows = Shows::Only {
        headings: &[],
        flags: &[],
    };
    /// The flags of the commands that load plugins and call them: which
    /// plugins, their grants, the policy.
    pub const LOADING: Shows = Shows::Only {
        headings: &[PLUGINS, GRANTS, POLICY],
        flags: &[],
    };

    /// Whether the shared flag `arg` is shown.
    pub fn shows(&self, arg: &clap::Arg) -> bool {
        let id = arg.get_id().as_str();
        match self {
            Shows::All => true,
            Shows::Only { .. } if id == "verbose" => true,
            Shows::Only { headings, flags } => {
                flags.contains(&id)
                    || arg
                        .get_help_heading()
                        .is_some_and(|h| headings.contains(&h))
            }
        }
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
