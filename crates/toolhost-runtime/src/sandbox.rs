//! The sandbox of one call: a fresh [`Store`] with its WASI context, limits,
//! deadline and host state, and the classification of what went wrong.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime::{Engine, ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::api::types::Level;
use crate::error::SandboxFault;
use crate::grants::{DirAccess, HostPattern};
use crate::http::HttpAllowlist;
use crate::limits::Limits;

/// Bytes of a plugin's stdout and of its stderr kept per call (for the log);
/// the rest is counted and dropped, never an error for the plugin.
const STDIO_CAPACITY: usize = 64 * 1024;

/// A plugin's stdout or stderr: kept in memory (bounded) and written to the
/// host's log after the call, never to the host's own stdout.
#[derive(Clone, Default)]
struct CapturedOutput(Arc<Mutex<Captured>>);

#[derive(Default)]
struct Captured {
    buf: Vec<u8>,
    dropped: usize,
}

impl CapturedOutput {
    fn take(&self) -> (Vec<u8>, usize) {
        match self.0.lock() {
            Ok(mut c) => (std::mem::take(&mut c.buf), std::mem::take(&mut c.dropped)),
            Err(_) => (Vec::new(), 0),
        }
    }

    fn text(&self) -> String {
        match self.0.lock() {
            Ok(c) => String::from_utf8_lossy(&c.buf).into_owned(),
            Err(_) => String::new(),
        }
    }
}

impl IsTerminal for CapturedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturedOutput {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for CapturedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Ok(mut c) = self.0.lock() {
            let room = STDIO_CAPACITY.saturating_sub(c.buf.len()).min(data.len());
            c.buf.extend_from_slice(&data[..room]);
            c.dropped += data.len() - room;
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The longest log line a plugin may write through the host's `log`, in
/// characters; a longer line is cut and ends with `…`. Controls,
/// bidirectional and invisible characters in it are escaped
/// ([`toolhost_text::line`]), so a plugin cannot forge log lines or drive
/// the terminal that shows them.
const MAX_LOG_LINE_CHARS: usize = 8 * 1024;

/// The longest progress message a plugin may report, in characters, made
/// safe the same way: it reaches terminals and MCP clients.
const MAX_PROGRESS_CHARS: usize = 512;

/// Receives progress reports of long calls: `(tool, message, fraction)`.
pub type ProgressSink = Arc<dyn Fn(&str, &str, Option<f32>) + Send + Sync>;

/// What a plugin is given, resolved once at load time and shared by all its calls.
#[derive(Debug, Default, Clone)]
pub(crate) struct SandboxSpec {
    pub plugin: String,
    pub limits: Limits,
    /// The directories the guest sees; a plugin's grants are at their
    /// canonical host paths.
    pub dirs: Vec<Preopen>,
    pub hosts: Arc<[HostPattern]>,
    /// One call's host, when its tool names its URL argument
    /// (`call/narrow.rs`): a request must be to it as well as granted.
    pub only_host: Option<HostPattern>,
    pub env: Vec<(String, String)>,
    pub config: BTreeMap<String, String>,
    /// The tools it may call and the bounds of those calls, when the
    /// operator lets it call any (`call/nested.rs`).
    pub call_tools: Option<Arc<crate::plugin_calls::CallGrant>>,
}

/// A directory the guest sees: what it is on the host, where the guest
/// finds it, and whether it may write there.
#[derive(Debug, Clone)]
pub(crate) struct Preopen {
    pub host: HostDir,
    /// Its path in the guest.
    pub guest: String,
    pub access: DirAccess,
}

/// A preopened directory on the host.
#[derive(Debug, Clone)]
pub(crate) enum HostDir {
    /// Opened by its path when the sandbox is made (a plugin's grant).
    Path(PathBuf),
    /// The very directory a per-call grant opened when it decided
    /// (`call/opened.rs`), reopened through its descriptor, never through
    /// a name that could lead elsewhere by then.
    Opened(Arc<std::os::fd::OwnedFd>),
}

impl HostDir {
    /// The path the sandbox opens: the directory's own, or the descriptor's
    /// (`/proc/self/fd/N`, which reaches the object, not a name).
    pub(crate) fn open_path(&self) -> PathBuf {
        match self {
            HostDir::Path(path) => path.clone(),
            HostDir::Opened(fd) => {
                use std::os::fd::AsRawFd;
                PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            }
        }
    }
}

impl std::fmt::Display for HostDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostDir::Path(path) => write!(f, "{}", path.display()),
            HostDir::Opened(_) => write!(f, "{}", self.open_path().display()),
        }
    }
}

impl SandboxSpec {
    /// What the plugin resolves a relative path against: its first granted
    /// directory (which the guest sees at the same absolute path).
    pub(crate) fn path_base(&self) -> Option<&std::path::Path> {
        match &self.dirs.first()?.host {
            HostDir::Path(path) => Some(path),
            HostDir::Opened(_) => None,
        }
    }
}

/// The `T` of every plugin `Store`.
pub(crate) struct SandboxState {
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    http_hooks: HttpAllowlist,
    limiter: Limiter,
    spec: Arc<SandboxSpec>,
    tool: String,
    log_lines: usize,
    dropped_log_lines: usize,
    progress: Option<ProgressSink>,
    deadline: Instant,
    stdout: CapturedOutput,
    stderr: CapturedOutput,
    /// The calls this call of the plugin may make to other tools, when it
    /// may make any (`call/nested.rs`); set by `call/execute.rs` for the
    /// call only.
    pub(crate) caller: Option<Box<dyn crate::plugin_calls::PluginCalls>>,
}

impl WasiView for SandboxState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for SandboxState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.http_hooks,
        }
    }
}

/// `now + timeout`, or a year from now for a timeout too large to add (a
/// manifest may say anything).
fn deadline_after(now: Instant, timeout: Duration) -> Instant {
    now.checked_add(timeout)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(now)
}

/// Memory and table limits of one store; remembers a refused growth so a
/// resulting trap can be reported as what it is.
struct Limiter {
    memory_bytes: u64,
    table_elements: usize,
    refused_memory: Option<u64>,
    refused_table: Option<usize>,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.memory_bytes {
            self.refused_memory = Some(desired as u64);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            self.refused_table = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }
}

/// A store as a bare wasmtime host makes one (the benchmarks' floor,
/// `floor.rs`): a WASI context that grants nothing and no captured output,
/// but the plugin's memory and table limits and its time limit, both as
/// wasmtime enforces them (a limiter; an epoch deadline that traps), so a
/// guest that loops or grows without end is stopped here too.
pub(crate) fn bare_store(engine: &Engine, spec: Arc<SandboxSpec>) -> Store<SandboxState> {
    let limits = &spec.limits;
    let limiter = Limiter {
        memory_bytes: limits.memory_bytes,
        table_elements: limits.table_elements,
        refused_memory: None,
        refused_table: None,
    };
    // One epoch tick is `EPOCH_TICK` (1 ms): the timeout in ticks, at least one.
    let ticks = u64::try_from(limits.timeout.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let state = SandboxState {
        wasi: WasiCtxBuilder::new().build(),
        table: ResourceTable::new(),
        http: WasiHttpCtx::new(),
        http_hooks: HttpAllowlist::new(spec.plugin.clone(), spec.hosts.clone())
            .only(spec.only_host.clone()),
        limiter,
        tool: String::new(),
        log_lines: 0,
        dropped_log_lines: 0,
        progress: None,
        deadline: Instant::now(),
        stdout: CapturedOutput::default(),
        stderr: CapturedOutput::default(),
        caller: None,
        spec,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(ticks);
    store
}

impl SandboxState {
    pub(crate) fn plugin_log(&mut self, level: Level, message: &str) {
        if self.log_lines >= self.spec.limits.max_log_lines {
            self.dropped_log_lines += 1;
            return;
        }
        self.log_lines += 1;
        let message = &toolhost_text::line(message, MAX_LOG_LINE_CHARS);
        let plugin = self.spec.plugin.as_str();
        let tool = self.tool.as_str();
        match level {
            Level::Trace => tracing::trace!(target: "toolhost::plugin", plugin, tool, "{message}"),
            Level::Debug => tracing::debug!(target: "toolhost::plugin", plugin, tool, "{message}"),
            Level::Info => tracing::info!(target: "toolhost::plugin", plugin, tool, "{message}"),
            Level::Warn => tracing::warn!(target: "toolhost::plugin", plugin, tool, "{message}"),
            Level::Error => tracing::error!(target: "toolhost::plugin", plugin, tool, "{message}"),
        }
    }

    pub(crate) fn plugin_config(&self, key: &str) -> Option<String> {
        self.spec.config.get(key).cloned()
    }

    pub(crate) fn plugin_config_keys(&self) -> Vec<String> {
        self.spec.config.keys().cloned().collect()
    }

    pub(crate) fn report_progress(&mut self, message: &str, fraction: Option<f32>) {
        let fraction = fraction
            .filter(|f| f.is_finite())
            .map(|f| f.clamp(0.0, 1.0));
        if let Some(sink) = &self.progress {
            sink(
                &self.tool,
                &toolhost_text::line(message, MAX_PROGRESS_CHARS),
                fraction,
            );
        }
    }
}

/// A store for one plugin instance: fresh per call by default, or kept for
/// several calls (see [`crate::reuse::ReusedInstance`]).
pub(crate) struct Sandbox {
    pub store: Store<SandboxState>,
    /// The engine's wasm stack limit, named when a guest overflows it.
    max_wasm_stack: usize,
}

impl Sandbox {
    pub(crate) fn new(
        engine: &Engine,
        spec: &Arc<SandboxSpec>,
        max_wasm_stack: usize,
    ) -> Result<Sandbox, String> {
        let stdout = CapturedOutput::default();
        let stderr = CapturedOutput::default();
        let mut wasi = WasiCtxBuilder::new();
        // No sockets at all (wasi:http requests go through the host's allowlist
        // instead), no name lookups, stdio captured for the log.
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        for (k, v) in &spec.env {
            wasi.env(k, v);
        }
        for dir in &spec.dirs {
            let perms = match dir.access {
                DirAccess::ReadOnly => FsPerms::ReadOnly,
                DirAccess::ReadWrite => FsPerms::ReadWrite,
            };
            wasi.preopened_dir(dir.host.open_path(), &dir.guest, perms)
                .map_err(|e| format!("cannot open granted directory {}: {e}", dir.host))?;
        }
        // A relative path is relative to the first granted directory, as
        // the policy reads it (`path_base`): the guest starts there
        // (`initial-cwd`), and `PWD` names it for a runtime snapshotted at
        // build time with `/` as its working directory (componentize-py's
        // Python, whose helper changes to `PWD` before each call). A
        // granted `PWD` wins. Nothing new is reachable: it is the path the
        // guest already sees the directory at.
        if let Some(first) = spec.dirs.first() {
            wasi.initial_cwd(&first.guest);
            if !spec.env.iter().any(|(k, _)| k == "PWD") {
                wasi.env("PWD", &first.guest);
            }
        }
        let state = SandboxState {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            http_hooks: HttpAllowlist::new(spec.plugin.clone(), spec.hosts.clone())
                .only(spec.only_host.clone()),
            limiter: Limiter {
                memory_bytes: spec.limits.memory_bytes,
                table_elements: spec.limits.table_elements,
                refused_memory: None,
                refused_table: None,
            },
            spec: spec.clone(),
            tool: String::new(),
            log_lines: 0,
            dropped_log_lines: 0,
            progress: None,
            deadline: deadline_after(Instant::now(), spec.limits.timeout),
            stdout,
            stderr,
            caller: None,
        };
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        // Every epoch tick: yield to the executor (a guest never holds a worker
        // thread for long), and interrupt once the call's deadline has passed.
        store.epoch_deadline_callback(|cx| {
            if Instant::now() >= cx.data().deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.set_epoch_deadline(1);
        Ok(Sandbox {
            store,
            max_wasm_stack,
        })
    }

    /// Prepares the store for a call of `tool`: arms the deadline, resets the
    /// per-call counters. Returns when the call started.
    pub(crate) fn begin(
        &mut self,
        tool: &str,
        progress: Option<ProgressSink>,
        hop_check: Option<crate::http::HopCheck>,
    ) -> Instant {
        let now = Instant::now();
        let state = self.store.data_mut();
        state.http_hooks.hop_check = hop_check;
        state.deadline = deadline_after(now, state.spec.limits.timeout);
        state.tool.clear();
        state.tool.push_str(tool);
        state.progress = progress;
        state.log_lines = 0;
        state.dropped_log_lines = 0;
        state.limiter.refused_memory = None;
        state.limiter.refused_table = None;
        self.store.set_epoch_deadline(1);
        now
    }

    /// Runs guest code in this sandbox: `guest` gets the store and drives it
    /// (instantiate, call an export). Returns what the guest returned, or the
    /// [`SandboxFault`] that stopped it: the wall-clock limit, a trap, a
    /// limit the guest hit. The plugin's output goes to the log either way.
    ///
    /// Every path that runs guest code goes through here: tool calls (fresh
    /// or reused instances), `describe()` at load time, hook plugins.
    pub(crate) async fn call<T>(
        &mut self,
        guest: impl AsyncFnOnce(&mut Store<SandboxState>) -> wasmtime::Result<T>,
    ) -> Result<T, SandboxFault> {
        let limit = self.store.data().spec.limits.timeout;
        // Boxed: wasmtime's call futures are large, and an unboxed future is
        // copied each time a caller moves it (measurable at a few µs per call).
        let guest = Box::pin(guest(&mut self.store));
        // A little grace so that a computing guest is stopped by its epoch
        // deadline (a clean trap) rather than by dropping the future. The
        // epoch deadline stops a guest that computes; this stops one that
        // waits inside a host call (a sleep, a slow socket).
        let grace = limit.saturating_add(Duration::from_millis(5));
        let result = match until(deadline_after(Instant::now(), grace), guest).await {
            Some(Ok(value)) => Ok(value),
            Some(Err(e)) => Err(self.classify(&e)),
            None => Err(SandboxFault::Timeout { limit }),
        };
        self.flush_logs();
        result
    }

    /// Writes what the plugin printed to the host's log, and reports dropped lines.
    fn flush_logs(&mut self) {
        let state = self.store.data_mut();
        let taken = [
            ("stdout", state.stdout.take()),
            ("stderr", state.stderr.take()),
        ];
        for (stream, (bytes, dropped_bytes)) in taken {
            for line in String::from_utf8_lossy(&bytes).lines() {
                if line.trim().is_empty() {
                    continue;
                }
                if state.log_lines >= state.spec.limits.max_log_lines {
                    state.dropped_log_lines += 1;
                    continue;
                }
                state.log_lines += 1;
                tracing::info!(target: "toolhost::plugin", plugin = %state.spec.plugin, tool = %state.tool, stream, "{line}");
            }
            if dropped_bytes > 0 {
                tracing::warn!(target: "toolhost::plugin", plugin = %state.spec.plugin, tool = %state.tool, stream, "dropped {dropped_bytes} bytes of output over the limit of {STDIO_CAPACITY} per call");
            }
        }
        if state.dropped_log_lines > 0 {
            tracing::warn!(
                target: "toolhost::plugin",
                plugin = %state.spec.plugin,
                tool = %state.tool,
                "dropped {} log lines over the limit of {} per call",
                state.dropped_log_lines,
                state.spec.limits.max_log_lines
            );
        }
    }

    /// Turns an error from inside the sandbox into a [`SandboxFault`].
    fn classify(&self, err: &wasmtime::Error) -> SandboxFault {
        let state = self.store.data();
        let limits = &state.spec.limits;
        if let Some(requested) = state.limiter.refused_memory {
            return SandboxFault::MemoryLimit {
                limit: limits.memory_bytes,
                requested,
            };
        }
        if let Some(requested) = state.limiter.refused_table {
            return SandboxFault::TableLimit {
                limit: limits.table_elements,
                requested,
            };
        }
        match err.downcast_ref::<Trap>() {
            Some(Trap::Interrupt) => {
                return SandboxFault::Timeout {
                    limit: limits.timeout,
                };
            }
            Some(Trap::StackOverflow) => {
                return SandboxFault::StackOverflow {
                    limit: self.max_wasm_stack,
                };
            }
            _ => {}
        }
        if let Some(message) = panic_message(&state.stderr.text()) {
            return SandboxFault::Panic { message };
        }
        SandboxFault::Trap {
            message: format!("{err:#}"),
        }
    }
}

/// Runs `guest` until it finishes (`Some`) or `deadline` passes (`None`).
///
/// The timer is armed only when the guest first waits: a guest that computes
/// and returns within one poll (most tool calls) never touches the timer
/// wheel, which a `tokio::time::timeout` per call did (about 5% of a
/// reused-instance call). A computing guest is stopped by the epoch deadline
/// instead; this bounds one that waits inside a host call.
async fn until<F: Future>(deadline: Instant, guest: F) -> Option<F::Output> {
    let mut guest = std::pin::pin!(guest);
    let mut timer: Option<Pin<Box<tokio::time::Sleep>>> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = guest.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let timer = timer.get_or_insert_with(|| {
            Box::pin(tokio::time::sleep_until(tokio::time::Instant::from_std(
                deadline,
            )))
        });
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// Extracts a Rust panic message (`panicked at src/lib.rs:3:5:\nmessage`) from stderr.
fn panic_message(stderr: &str) -> Option<String> {
    let at = stderr.find("panicked at ")?;
    let rest = &stderr[at + "panicked at ".len()..];
    let mut lines = rest.lines();
    let location = lines.next().unwrap_or("").trim_end_matches(':');
    let message: Vec<&str> = lines.take_while(|l| !l.starts_with("note:")).collect();
    let message = message.join("\n");
    let message = message.trim();
    Some(if message.is_empty() {
        format!("at {location}")
    } else {
        format!("{message} (at {location})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn until_answers_what_finishes_in_time_and_stops_what_waits_past_the_deadline() {
        let soon = || Instant::now() + Duration::from_millis(50);
        assert_eq!(until(soon(), async { 7 }).await, Some(7));
        assert_eq!(until(soon(), std::future::pending::<()>()).await, None);
        let waits_a_little = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            3
        };
        assert_eq!(
            until(Instant::now() + Duration::from_secs(5), waits_a_little).await,
            Some(3)
        );
    }

    #[test]
    fn a_call_logs_at_most_max_log_lines_and_counts_the_rest() {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        let spec = Arc::new(SandboxSpec {
            plugin: "flood".into(),
            limits: Limits {
                max_log_lines: 100,
                ..Limits::default()
            },
            ..SandboxSpec::default()
        });
        let mut sandbox = Sandbox::new(&engine, &spec, 512 * 1024).unwrap();
        sandbox.begin("log_flood", None, None);
        for i in 0..1000 {
            sandbox
                .store
                .data_mut()
                .plugin_log(Level::Info, &format!("line {i}"));
        }
        let state = sandbox.store.data();
        assert_eq!(state.log_lines, 100, "the limit is kept");
        assert_eq!(
            state.dropped_log_lines, 900,
            "the rest is counted, not logged"
        );
        // The next call starts with a fresh count.
        sandbox.begin("log_flood", None, None);
        assert_eq!(sandbox.store.data().log_lines, 0);
    }

    #[test]
    fn a_log_line_is_bounded() {
        let long = "é".repeat(10_000);
        let cut = toolhost_text::line(&long, MAX_LOG_LINE_CHARS);
        assert_eq!(cut.chars().count(), MAX_LOG_LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn panic_message_is_extracted_from_rust_stderr() {
        let stderr = "\nthread '<unnamed>' panicked at src/lib.rs:10:5:\nboom: 42\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            panic_message(stderr).as_deref(),
            Some("boom: 42 (at src/lib.rs:10:5)")
        );
        assert_eq!(panic_message("just a log line\n"), None);
    }
}
