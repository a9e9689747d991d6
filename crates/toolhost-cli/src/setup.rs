//! The shared setup of the commands that load plugins: the Tokio runtime
//! they run on, the tool runtime built from the settings and the shared
//! flags, and the checks made once it is loaded. Each such command says
//! what it needs in its own file, as a [`Setup`].

use std::path::PathBuf;

use toolhost_runtime::Runtime;

use crate::code_mode::{self, CodeMode};
use crate::settings::{self, ConfigFile};
use crate::shared_flags::Global;
use crate::{notices, sign_in};

/// What a command needs from the shared setup.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// It serves one client over stdio, mostly one call at a time: one
    /// worker, so reading a request, running its call and writing the
    /// answer never hop between threads (a call that overlaps another gets
    /// a thread of its own: `toolhost-mcp`'s `server/parallel.rs`),
    /// polling for I/O every few tasks so a long call on that worker does
    /// not hold up the next request. Otherwise a worker per core.
    pub one_worker: bool,
    /// It runs long, and picks up plugins that change while it runs
    /// (unless `--no-watch`).
    pub watches: bool,
    /// It runs the agent loop, whose `read_var` the runtime serves
    /// (through its policy and hooks).
    pub read_var: bool,
    /// A person at this terminal may be asked to sign in to an MCP server
    /// (not so for the servers, whose callers are elsewhere).
    pub person: bool,
    /// It serves MCP clients, of any revision: the MCP servers it talks to
    /// keep a session in an older revision for them
    /// ([`McpServerConfig::older_callers`](toolhost_mcp::McpServerConfig::older_callers)).
    pub serves_mcp: bool,
}

/// What the setup made: the runtimes and the config file.
pub struct Loaded {
    /// The Tokio runtime the command runs on.
    pub rt: tokio::runtime::Runtime,
    /// The tool runtime, plugins loaded.
    pub runtime: Runtime,
    /// The config file (`--config`).
    pub file: ConfigFile,
    /// What code mode came to: `auto` is off without the runner.
    pub code: CodeMode,
}

/// A Tokio runtime with a worker per core, for a command that loads no
/// plugins but talks to a server (`publish`, `install`, `mcp login`).
pub fn tokio() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}

impl Setup {
    /// The Tokio runtime the command runs on.
    pub fn tokio(&self) -> std::io::Result<tokio::runtime::Runtime> {
        if !self.one_worker {
            return tokio();
        }
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .event_interval(4)
            .enable_all()
            .build()
    }

    /// Loads the configured plugins and MCP servers.
    pub fn load(&self, global: &Global) -> anyhow::Result<Loaded> {
        self.load_from(global, None)
    }

    /// Loads these plugin files only, with no MCP servers and no code mode
    /// (`host check`).
    pub fn load_files(&self, global: &Global, files: &[PathBuf]) -> anyhow::Result<Loaded> {
        self.load_from(global, Some(files))
    }

    fn load_from(&self, global: &Global, only: Option<&[PathBuf]>) -> anyhow::Result<Loaded> {
        let rt = self.tokio()?;
        let sign_in = sign_in::context(global, self.person, self.serves_mcp);
        // MCP servers' clients start (as tasks of `rt`) while the builder is made.
        let mut builder = {
            let _tokio = rt.enter();
            settings::builder(global, only, &sign_in)?
        };
        if self.watches && !global.no_watch {
            builder = builder.watch(true);
        }
        if self.read_var {
            builder = builder.source(toolhost_agent_runtime::read_var_source());
        }
        let file = settings::config_file(global)?;
        let runtime = {
            let loading = notices::Loading::start();
            let runtime = rt.block_on(builder.build())?;
            loading.done(&runtime);
            runtime
        };
        if let Some(agent) = &global.agent {
            settings::check_profile(agent, "--agent", &runtime.policy(), &file)?;
        }
        let code = if only.is_none() {
            settings::warn_unknown_grants(global, &file, &runtime);
            code_mode::check_loaded(&runtime, file.code.mode(global.code_mode))?
        } else {
            CodeMode::Off
        };
        Ok(Loaded {
            rt,
            runtime,
            file,
            code,
        })
    }
}
