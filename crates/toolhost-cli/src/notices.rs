//! Plugin events (loaded, reloaded, unloaded, failed) printed while the host runs.

use rustyline::ExternalPrinter;
use toolhost_runtime::{PluginEvent, Runtime};

/// One event as the user sees it.
pub fn format_event(event: &PluginEvent) -> String {
    format!("[plugins] {event}")
}

/// Prints every plugin event from now on, on stderr, or through `printer`
/// (which prints above the line being edited in the interactive session).
pub fn print_plugin_events(
    rt: &tokio::runtime::Runtime,
    runtime: &Runtime,
    mut printer: Option<Box<dyn ExternalPrinter + Send>>,
) {
    let mut events = runtime.subscribe();
    rt.spawn(async move {
        loop {
            let line = match events.recv().await {
                Ok(event) => format_event(&event),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    format!("[plugins] {n} events skipped")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            let printed = match printer.as_mut() {
                Some(p) => p.print(format!("{line}\n")).is_ok(),
                None => false,
            };
            if !printed {
                eprintln!("{line}");
            }
        }
    });
}
