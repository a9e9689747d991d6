//! The `host` command (also installed as `toolhost`, since `host` is also
//! bind9's DNS tool on many machines): list, call and chat with sandboxed
//! WebAssembly tool plugins, serve them over MCP, install them from
//! registries. Both binaries (`src/main.rs`, `src/bin/toolhost.rs`) call
//! [`main`]; this library is the command, not an API.

mod approve;
mod args;
mod chat;
mod code_mode;
mod commands;
mod exit;
mod explain;
mod failure;
mod form;
mod generated;
mod install;
mod mcp;
mod mcp_servers;
mod model_options;
mod new;
mod notices;
mod repl;
mod sessions;
mod settings;
mod shown;
mod sign_in;
mod stdout;

use std::process::ExitCode;

use tracing_subscriber::EnvFilter;

use args::{Cli, Command};
use stdout::outln;

/// Log lines to stderr (`-v`, `RUST_LOG`), and OpenTelemetry traces when
/// the `OTEL_*` variables or the config file's `[telemetry]` name a
/// collector (each layer with its own filter: `-v` does not change what is
/// exported).
fn init_logging(global: &args::Global) -> Option<toolhost_telemetry::Telemetry> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // Below -vv, the log leaves out what the command says itself (load
    // problems: `report_load_problems`, `notices.rs`) and other crates'
    // internals, which print `Debug` dumps (rmcp's worker, wasmtime-wasi-http's
    // connect errors): each failure reaches the user once, in words.
    let quiet = "toolhost_runtime::load_problems=off,rmcp=off,wasmtime_wasi_http=off";
    let default = match global.verbose {
        0 => format!("warn,{quiet}"),
        1 => format!("info,{quiet}"),
        2 => "debug".to_owned(),
        _ => "trace".to_owned(),
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    // Timestamps only for whoever asked for the log (`-v`).
    let logs = if global.verbose == 0 {
        logs.without_time().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    // A config file that does not parse is reported by the command itself.
    let settings = settings::config_file(global)
        .ok()
        .map(|f| f.telemetry.settings())
        .transpose();
    let telemetry = match settings.and_then(|s| {
        Ok(toolhost_telemetry::Telemetry::start(
            &s.unwrap_or_default(),
        )?)
    }) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "warning: traces are not exported: {}",
                failure::said_once(&e)
            );
            None
        }
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(telemetry.as_ref().map(toolhost_telemetry::Telemetry::layer))
        .init();
    telemetry
}

/// Runs the command line of the process and returns its exit code.
pub fn main() -> ExitCode {
    let cli = args::parse();
    let telemetry = init_logging(&cli.global);
    let code = match run(cli) {
        Ok(code) => ExitCode::from(code),
        // The reader of stdout went away (`host tools | head -1`).
        Err(e) if stdout::closed(&e) => ExitCode::from(exit::STDOUT_CLOSED),
        Err(e) => {
            eprintln!("error: {}", failure::said_once(&e));
            ExitCode::from(exit::FAILURE)
        }
    };
    // The last spans leave before the process does.
    if let Some(t) = telemetry {
        t.shutdown();
    }
    code
}

/// The Tokio runtime a command runs on. `host mcp` serves one client over
/// stdio, mostly one call at a time: one worker, so reading a request,
/// running its call and writing the answer never hop between threads (a
/// call that overlaps another gets a thread of its own:
/// `toolhost-mcp`'s `server/parallel.rs`), polling for I/O every few tasks
/// so a long call on that worker does not hold up the next request.
/// Everything else gets a worker per core.
fn runtime_for(command: Option<&Command>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if matches!(command, Some(Command::Mcp { action: None })) {
        builder.worker_threads(1).event_interval(4);
    }
    builder.enable_all().build()
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    // `host new`, `completions` and `man` load nothing.
    match &cli.command {
        Some(Command::New(args)) => return new::run(args),
        Some(Command::Completions { shell }) => return generated::completions(*shell),
        Some(Command::Man { command, dir }) => {
            return generated::man(command.as_deref(), dir.as_deref());
        }
        _ => {}
    }
    let rt = runtime_for(cli.command.as_ref())?;
    // Saved approvals are a file beside the lock file: no plugins needed.
    if let Some(Command::Approvals(command)) = &cli.command {
        let file = settings::config_file(&cli.global)?;
        return commands::approvals(&settings::approval_stores(&cli.global, &file)?, command);
    }
    // Registry commands load no plugins.
    if let Some(Command::Registry(command)) = &cli.command {
        return rt.block_on(install::run(&cli.global, command));
    }
    // Signing in to an MCP server loads nothing else either.
    if let Some(Command::Mcp {
        action: Some(action),
    }) = &cli.command
    {
        let servers = settings::mcp_servers(&cli.global)?;
        return rt.block_on(sign_in::run(&cli.global, servers, action));
    }
    // A person may be asked to sign in to an MCP server, except by the
    // servers, whose callers are elsewhere.
    let interactive = !matches!(
        cli.command,
        Some(Command::Mcp { .. } | Command::Serve { .. })
    );
    let sign_in = sign_in::context(&cli.global, interactive);
    let only = match &cli.command {
        Some(Command::Check { file, .. }) => Some(vec![file.clone()]),
        _ => None,
    };
    // MCP servers' clients start (as tasks of `rt`) while the builder is made.
    let mut builder = {
        let _tokio = rt.enter();
        settings::builder(&cli.global, only.as_deref(), &sign_in)?
    };
    // Long-running commands pick up plugins that change while they run.
    if matches!(
        cli.command,
        None | Some(
            Command::Run { .. }
                | Command::Chat { .. }
                | Command::Mcp { .. }
                | Command::Serve { .. }
        )
    ) && !cli.global.no_watch
    {
        builder = builder.watch(true);
    }
    // The agent's `read_var` is served by the runtime, through its policy
    // and hooks, for the commands that run the agent loop.
    if matches!(
        cli.command,
        None | Some(Command::Run { .. } | Command::Chat { .. })
    ) {
        builder = builder.source(toolhost_agent_runtime::read_var_source());
    }
    let file = settings::config_file(&cli.global)?;
    let runtime = {
        let loading = notices::Loading::start();
        let runtime = rt.block_on(builder.build())?;
        loading.done(&runtime);
        runtime
    };
    if let Some(agent) = &cli.global.agent {
        settings::check_profile(agent, "--agent", &runtime.policy(), &file)?;
    }
    // What code mode came to: `auto` is off without the runner.
    let code = if only.is_none() {
        settings::warn_unknown_grants(&cli.global, &file, &runtime);
        code_mode::check_loaded(&runtime, file.code.mode(cli.global.code_mode))?
    } else {
        code_mode::CodeMode::Off
    };
    match cli.command {
        Some(Command::Check { file, json }) => commands::check(&runtime, &file, json),
        Some(Command::Tools { json }) => {
            commands::report_load_problems(&runtime);
            commands::tools(&runtime, cli.global.agent.as_deref(), json)
        }
        Some(Command::Explain { tool, args, json }) => {
            commands::report_load_problems(&runtime);
            explain::run(
                &runtime,
                &tool,
                args.as_deref(),
                cli.global.agent.as_deref(),
                json,
            )
        }
        Some(Command::Completions { .. } | Command::Man { .. }) => Ok(exit::OK),
        Some(Command::Plugins { json }) => {
            commands::report_load_problems(&runtime);
            commands::plugins(&runtime, json)
        }
        Some(Command::Trust { name }) => {
            commands::trust(&runtime, &name, &settings::lock_file(&cli.global, &file))
        }
        Some(Command::Registry(command)) => rt.block_on(install::run(&cli.global, &command)),
        Some(Command::Approvals(command)) => {
            commands::approvals(&settings::approval_stores(&cli.global, &file)?, &command)
        }
        Some(Command::New(args)) => new::run(&args),
        Some(Command::Call {
            tool,
            args,
            details,
            json,
        }) => {
            commands::report_load_problems(&runtime);
            rt.block_on(commands::call(
                &runtime,
                &tool,
                args.as_deref(),
                cli.global.agent.as_deref(),
                details,
                json,
            ))
        }
        Some(Command::Mcp { .. }) => {
            commands::report_load_problems(&runtime);
            notices::print_plugin_events(&rt, &runtime, None);
            rt.block_on(mcp::stdio(&cli.global, &file, runtime))
        }
        Some(Command::Serve {
            listen,
            token_file,
            token_env,
            accept_host,
            accept_origin,
            stateless,
            max_concurrent,
            max_request_bytes,
            metrics_public,
            asks,
            console,
        }) => {
            commands::report_load_problems(&runtime);
            let tokens = mcp::tokens(token_file.as_deref(), token_env.as_deref())?;
            for (line, agent) in tokens
                .iter()
                .enumerate()
                .filter_map(|(i, t)| Some((i, t.agent.as_deref()?)))
            {
                let what = format!("token {} of the token file", line + 1);
                settings::check_profile(agent, &what, &runtime.policy(), &file)?;
            }
            if let Some(oauth) = &file.oauth {
                mcp::check_oauth_profiles(oauth, &runtime.policy(), &file)?;
            }
            let options = toolhost_mcp::HttpOptions {
                listen,
                tokens,
                oauth: file.oauth.clone(),
                allowed_hosts: accept_host,
                allowed_origins: accept_origin,
                max_request_bytes,
                max_concurrent_requests: max_concurrent,
                stateless,
                metrics_public,
                console,
            };
            let asks = mcp::asks(asks.as_deref(), &options.listen)?;
            notices::print_plugin_events(&rt, &runtime, None);

            rt.block_on(mcp::http(&cli.global, &file, runtime, options, asks))
        }
        Some(Command::Run {
            prompt,
            json,
            session,
        }) => {
            commands::report_load_problems(&runtime);
            // A bad name or an unreadable session stops the run before the
            // model is asked (and before the file could be overwritten).
            let mut saved = match &session {
                Some(name) => {
                    let store = sessions::Store::from_flag(cli.global.sessions_dir.as_deref())?;
                    let session = store.load_or_new(name, None)?;
                    Some((store, session))
                }
                None => None,
            };
            notices::print_plugin_events(&rt, &runtime, None);
            let Some(mut model) =
                rt.block_on(chat::connect(&cli.global, &file, &runtime, code, false))?
            else {
                eprintln!("error: {}", chat::no_model_for_run());
                return Ok(exit::FAILURE);
            };
            let history = match &saved {
                Some((_, s)) => {
                    let options = model.agent.options();
                    options.vars.restore(s.vars_for(options.agent.as_deref()));
                    s.conversation.clone()
                }
                None => Vec::new(),
            };
            let result = rt.block_on(chat::turn(&mut model.agent, &history, &prompt, false));
            if let Some((store, s)) = &mut saved {
                s.push_turn(&prompt, &result);
                s.model = Some(model.label.clone());
                let options = model.agent.options();
                s.set_vars(options.vars.snapshot(), options.agent.as_deref());
                if let Err(e) = store.save(s) {
                    eprintln!("error: the session was not saved: {e}");
                    return Ok(exit::FAILURE);
                }
            }
            if json {
                outln!("{}", serde_json::to_string_pretty(&result)?)?;
            } else if !result.final_text().is_empty() {
                outln!("{}", shown::on_stdout(result.final_text()))?;
            }
            if let Some(ended) = shown::unfinished(&result) {
                eprintln!("status: {ended}");
            }
            Ok(chat::exit_code(result.status))
        }
        Some(Command::Chat { session }) => {
            commands::report_load_problems(&runtime);
            let model = rt.block_on(chat::connect(&cli.global, &file, &runtime, code, true))?;
            let store = sessions::Store::from_flag(cli.global.sessions_dir.as_deref());
            repl::run(&rt, &runtime, model, store, session.as_deref())
        }
        None => {
            commands::report_load_problems(&runtime);
            let model = rt.block_on(chat::connect(&cli.global, &file, &runtime, code, true))?;
            let store = sessions::Store::from_flag(cli.global.sessions_dir.as_deref());
            repl::run(&rt, &runtime, model, store, None)
        }
    }
}
