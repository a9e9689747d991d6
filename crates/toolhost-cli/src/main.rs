//! `host`: list, call and (soon) chat with sandboxed WebAssembly tool plugins.

mod approve;
mod args;
mod chat;
mod commands;
mod exit;
mod mcp;
mod mcp_servers;
mod notices;
mod repl;
mod settings;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use args::{Cli, Command};

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.global.verbose);
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(exit::FAILURE)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let only = match &cli.command {
        Some(Command::Check { file, .. }) => Some(vec![file.clone()]),
        _ => None,
    };
    // MCP servers' clients start (as tasks of `rt`) while the builder is made.
    let mut builder = {
        let _tokio = rt.enter();
        settings::builder(&cli.global, only.as_deref())?
    };
    // Long-running commands pick up plugins that change while they run.
    if matches!(
        cli.command,
        None | Some(Command::Run { .. } | Command::Mcp | Command::Serve { .. })
    ) && !cli.global.no_watch
    {
        builder = builder.watch(true);
    }
    let file = settings::config_file(&cli.global)?;
    let runtime = rt.block_on(builder.build())?;
    match cli.command {
        Some(Command::Check { file, json }) => commands::check(&runtime, &file, json),
        Some(Command::Tools { json }) => {
            commands::report_load_problems(&runtime);
            commands::tools(&runtime, json)
        }
        Some(Command::Plugins { json }) => {
            commands::report_load_problems(&runtime);
            commands::plugins(&runtime, json)
        }
        Some(Command::Trust { name }) => commands::trust(&runtime, &name),
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
        Some(Command::Mcp) => {
            commands::report_load_problems(&runtime);
            rt.block_on(mcp::stdio(&cli.global, runtime))
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
        }) => {
            commands::report_load_problems(&runtime);
            let options = toolhost_mcp::HttpOptions {
                listen,
                tokens: mcp::tokens(token_file.as_deref(), token_env.as_deref())?,
                allowed_hosts: accept_host,
                allowed_origins: accept_origin,
                max_request_bytes,
                max_concurrent_requests: max_concurrent,
                stateless,
            };
            rt.block_on(mcp::http(&cli.global, runtime, options))
        }
        Some(Command::Run { prompt, json }) => {
            commands::report_load_problems(&runtime);
            notices::print_plugin_events(&rt, &runtime, None);
            let Some(mut model) =
                rt.block_on(chat::connect(&cli.global, &file, &runtime, false))?
            else {
                eprintln!("error: {}", chat::no_model_help());
                return Ok(exit::FAILURE);
            };
            let result = rt.block_on(chat::turn(&mut model.agent, &[], &prompt, false));
            if json {
                println!("{}", serde_json::to_string_pretty(&result)?);
            } else {
                println!("{}", result.final_text());
            }
            if result.status != toolhost_agent::Status::Completed {
                eprintln!(
                    "status: {}{}",
                    result.status,
                    result
                        .error
                        .as_deref()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default()
                );
            }
            Ok(chat::exit_code(result.status))
        }
        None => {
            commands::report_load_problems(&runtime);
            let model = rt.block_on(chat::connect(&cli.global, &file, &runtime, true))?;
            repl::run(&rt, &runtime, model)
        }
    }
}
