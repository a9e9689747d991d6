//! The log on stderr and the OpenTelemetry traces of one command.

use tracing_subscriber::EnvFilter;

use crate::shared_flags::Global;

/// Log lines to stderr (`-v`, `RUST_LOG`), and OpenTelemetry traces when
/// the `OTEL_*` variables or the config file's `[telemetry]` name a
/// collector (each layer with its own filter: `-v` does not change what is
/// exported).
pub fn init(global: &Global) -> Option<toolhost_telemetry::Telemetry> {
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
    let settings = crate::settings::config_file(global)
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
                crate::failure::said_once(&e)
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
