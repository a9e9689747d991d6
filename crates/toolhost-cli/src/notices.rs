//! What the host says on stderr while it works: plugin events (loaded,
//! reloaded, unloaded, failed) and load warnings, each once; and a line
//! when loading the plugins takes long (compiling a plugin that is not in
//! the compile cache yet: about 20 s for a Python or JavaScript one).

use std::collections::HashSet;
use std::sync::mpsc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use rustyline::ExternalPrinter;
use toolhost_runtime::{Runtime, load::PluginEvent};

/// How long loading runs before the host says it is still at it.
const SLOW_LOAD: Duration = Duration::from_secs(2);

/// The load warnings already printed ([`report_load_problems`],
/// or an earlier reload): a reload reports every current warning again,
/// and the user reads each once.
static SHOWN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// Records `warnings` as printed.
pub fn shown(warnings: &[String]) {
    let mut shown = SHOWN.lock();
    shown
        .get_or_insert_with(HashSet::new)
        .extend(warnings.iter().cloned());
}

/// Of `warnings`, those not printed yet (now recorded as printed).
fn new_warnings(warnings: Vec<String>) -> Vec<String> {
    let mut shown = SHOWN.lock();
    let shown = shown.get_or_insert_with(HashSet::new);
    warnings
        .into_iter()
        .filter(|w| shown.insert(w.clone()))
        .collect()
}

/// One event as the user sees it.
pub fn format_event(event: &PluginEvent) -> String {
    format!("[plugins] {event}")
}

/// Prints every plugin event from now on, and every load warning a
/// reload brings that was not printed yet, on stderr, or through `printer`
/// (which prints above the line being edited in the interactive session).
pub fn print_plugin_events(
    rt: &tokio::runtime::Runtime,
    runtime: &Runtime,
    mut printer: Option<Box<dyn ExternalPrinter + Send>>,
) {
    let mut events = runtime.subscribe();
    let runtime = runtime.clone();
    rt.spawn(async move {
        loop {
            let mut lines = match events.recv().await {
                Ok(event) => vec![format_event(&event)],
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    vec![format!("[plugins] {n} events skipped")]
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
            };
            lines.extend(
                new_warnings(runtime.load_report().warnings)
                    .into_iter()
                    .map(|w| format!("[plugins] warning: {}", crate::shown::printable(&w))),
            );
            for line in lines {
                let printed = match printer.as_mut() {
                    Some(p) => p.print(format!("{line}\n")).is_ok(),
                    None => false,
                };
                if !printed {
                    eprintln!("{line}");
                }
            }
        }
    });
}

/// Says, on stderr, when loading the plugins takes longer than
/// [`SLOW_LOAD`], what the host is doing, and then how long it took.
pub struct Loading {
    done: mpsc::Sender<()>,
    said: std::sync::Arc<std::sync::atomic::AtomicBool>,
    started: Instant,
}

impl Loading {
    /// Starts watching the clock (a thread that waits on a channel).
    pub fn start() -> Loading {
        let (done, wait) = mpsc::channel::<()>();
        let said = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = said.clone();
        std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(SLOW_LOAD) {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
                eprintln!(
                    "loading plugins: compiling those not in the compile cache yet (the first \
                     load of a Python or JavaScript plugin takes about 20 s; later starts read \
                     it from the cache)…"
                );
            }
        });
        Loading {
            done,
            said,
            started: Instant::now(),
        }
    }

    /// Loading is over: when the host said it was loading, it says how
    /// long it took and what it compiled.
    pub fn done(self, runtime: &Runtime) {
        let _ = self.done.send(());
        if self.said.load(std::sync::atomic::Ordering::SeqCst) {
            let report = runtime.load_report();
            eprintln!(
                "loading plugins: done in {:.1} s ({} compiled, {} from the cache)",
                self.started.elapsed().as_secs_f64(),
                report.compiled,
                report.cache_hits
            );
        }
    }
}

/// Prints every plugin file that failed to load (and every clash) to
/// stderr, once: the runtime's own log of them is off (`logging.rs`), and
/// what is printed here is not printed again on a reload (`notices.rs`).
pub fn report_load_problems(runtime: &Runtime) {
    let report = runtime.load_report();
    for f in &report.failures {
        eprintln!(
            "warning: {} not loaded: {}",
            f.path.display(),
            crate::shown::printable(&f.error.to_string())
        );
    }
    for w in &report.warnings {
        eprintln!("warning: {}", crate::shown::printable(w));
    }
    shown(&report.warnings);
}
