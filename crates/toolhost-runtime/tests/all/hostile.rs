//! The hostile-plugin suite: one fixture per misbehaviour
//! (`plugins/fixtures/hostile-*`, built by `cargo xtask plugins`), each run
//! beside the well-behaved `calc` plugin. For each, the test proves that the
//! call ends with the right typed error within its limit, and that 8 calls to
//! `calculate` made while the hostile call runs all succeed.
//!
//! That the error reaches the model as a readable tool result is proved in
//! `cli_hostile.rs` (the agent loop lives in another crate).

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolhost_runtime::{
    CallContext, CallError, DirGrant, LoadError, PluginSettings, Runtime, ToolResult,
    error::SandboxFault, error::ToolErrorKind,
};

use crate::support::*;

/// Every test takes this lock shared; the memory test takes it exclusively,
/// so that no other test's runtime is alive while it measures the process's
/// resident memory.
static EXCLUSIVE: LazyLock<tokio::sync::RwLock<()>> =
    LazyLock::new(|| tokio::sync::RwLock::new(()));

/// How much later than its configured limit a time-limited call may end.
const SLACK: Duration = Duration::from_millis(50);

/// A runtime with the fixture `hostile-NAME` (its limits from its own
/// `plugin.toml`) and the `calc` example plugin.
async fn runtime(name: &str, settings: Option<PluginSettings>) -> Runtime {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), name, tmp.path());
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    let mut b = Runtime::builder()
        .plugin_dir(tmp.path())
        .cache_dir(Some(root().join("target/test-cache")));
    if let Some(s) = settings {
        b = b.plugin_settings(name, s);
    }
    let rt = b.build().await.expect("runtime builds");
    // The files are loaded; the directory may go.
    drop(tmp);
    rt
}

/// 8 calls to `calculate`, each checked.
async fn calc_calls(rt: &Runtime) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..8u32 {
        let rt = rt.clone();
        tasks.spawn(async move {
            let r = rt
                .call(
                    "calculate",
                    json!({"expression": format!("{i} * 6 + 1")}),
                    CallContext::new(),
                )
                .await
                .expect("a well-behaved call beside a hostile one succeeds");
            assert_eq!(r.output, (i * 6 + 1).to_string());
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
}

/// What one hostile call did, with 8 `calculate` calls run concurrently.
struct Observed {
    result: Result<ToolResult, CallError>,
    /// The hostile call's wall time.
    elapsed: Duration,
    /// When the 8 well-behaved calls had all succeeded, from the start of
    /// the hostile call.
    calc_done: Duration,
}

/// Starts the hostile call `tool(args)`, runs 8 `calculate` calls while it
/// runs, and waits for both.
async fn alongside_calc(rt: &Runtime, tool: &str, args: Value) -> Observed {
    let started = Instant::now();
    let hostile = {
        let (rt, tool) = (rt.clone(), tool.to_owned());
        tokio::spawn(async move {
            let r = rt.call(&tool, args, CallContext::new()).await;
            (r, started.elapsed())
        })
    };
    calc_calls(rt).await;
    let calc_done = started.elapsed();
    let (result, elapsed) = hostile.await.unwrap();
    Observed {
        result,
        elapsed,
        calc_done,
    }
}

/// A call that must end at `limit`: returns its fault and wall time. The
/// wall time must be in `[limit, limit + SLACK)`; that is a property of the
/// epoch deadline, not a benchmark, but a machine loaded by other tests can
/// delay a wake-up, so a call that ends late is run once more and the better
/// of the two is kept.
async fn timed_fault(rt: &Runtime, tool: &str, args: Value, limit: Duration) -> SandboxFault {
    let mut o = alongside_calc(rt, tool, args.clone()).await;
    if o.elapsed >= limit + SLACK {
        eprintln!("{tool}: first call took {:?}; trying once more", o.elapsed);
        let again = alongside_calc(rt, tool, args).await;
        if again.elapsed < o.elapsed {
            o = again;
        }
    }
    eprintln!(
        "{tool}: stopped after {:?} (limit {limit:?}); the 8 calc calls were done after {:?}",
        o.elapsed, o.calc_done
    );
    assert!(
        o.elapsed >= limit && o.elapsed < limit + SLACK,
        "{tool} ended after {:?}, limit {limit:?}",
        o.elapsed
    );
    assert!(
        o.calc_done < o.elapsed,
        "the well-behaved calls finished while {tool} was still running ({:?} vs {:?})",
        o.calc_done,
        o.elapsed
    );
    sandbox_fault(o.result)
}

/// A call that must fail with a sandbox fault before `limit`.
async fn fault_within(rt: &Runtime, tool: &str, args: Value, limit: Duration) -> SandboxFault {
    let o = alongside_calc(rt, tool, args).await;
    eprintln!("{tool}: ended after {:?}", o.elapsed);
    assert!(o.elapsed < limit, "{tool} took {:?}", o.elapsed);
    sandbox_fault(o.result)
}

fn sandbox_fault(r: Result<ToolResult, CallError>) -> SandboxFault {
    match r {
        Err(CallError::Sandbox { fault, .. }) => fault,
        Err(other) => panic!("expected a sandbox fault, got {other:?}"),
        Ok(r) => panic!("expected a sandbox fault, got a result: {}", r.output),
    }
}

/// The message of a `failed` tool error.
fn tool_failure(r: Result<ToolResult, CallError>) -> String {
    match r {
        Err(CallError::Tool {
            kind: ToolErrorKind::Failed,
            message,
            ..
        }) => message,
        Err(other) => panic!("expected a tool failure, got {other:?}"),
        Ok(r) => panic!("expected a tool failure, got a result: {}", r.output),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spin_is_stopped_at_its_time_limit() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-spin", None).await;
    let limit = Duration::from_millis(200);
    let fault = timed_fault(&rt, "spin", json!({}), limit).await;
    assert_eq!(fault, SandboxFault::Timeout { limit });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_benchmarks_bare_wasmtime_floor_still_stops_a_spin_and_an_alloc() {
    // `BareWasmtime` skips the pipeline, not the limits wasmtime enforces.
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-spin", None).await;
    let floor = rt.bare_wasmtime("hostile-spin").unwrap();
    let started = Instant::now();
    let spun = tokio::time::timeout(Duration::from_secs(10), floor.call("spin", "{}"))
        .await
        .expect("the epoch deadline stops it");
    assert!(spun.is_err(), "{spun:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let rt = runtime("hostile-alloc", None).await;
    let floor = rt.bare_wasmtime("hostile-alloc").unwrap();
    let grown = tokio::time::timeout(Duration::from_secs(10), floor.call("alloc", "{}"))
        .await
        .expect("the limiter stops it");
    assert!(grown.is_err(), "{grown:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sleep_past_the_limit_is_stopped_at_the_limit() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-sleep", None).await;
    let limit = Duration::from_millis(200);
    let fault = timed_fault(&rt, "sleep", json!({"ms": 10_000}), limit).await;
    assert_eq!(fault, SandboxFault::Timeout { limit });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn alloc_until_it_cannot_is_a_memory_limit_fault() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-alloc", None).await;
    match fault_within(&rt, "alloc", json!({}), Duration::from_secs(2)).await {
        SandboxFault::MemoryLimit { limit, requested } => {
            assert_eq!(limit, 16 * 1024 * 1024);
            assert!(requested > limit, "{requested}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unbounded_recursion_is_a_stack_overflow() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-recurse", None).await;
    let fault = fault_within(&rt, "recurse", json!({}), Duration::from_secs(2)).await;
    assert!(
        matches!(fault, SandboxFault::StackOverflow { .. }),
        "{fault:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_panic_is_a_panic_fault_with_its_message() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-panic", None).await;
    let args = json!({"message": "hostile kaboom 23"});
    match fault_within(&rt, "panic", args, Duration::from_secs(2)).await {
        SandboxFault::Panic { message } => {
            assert!(message.contains("hostile kaboom 23"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_50_mib_output_is_refused_as_too_large() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-big-output", None).await;
    match fault_within(&rt, "big_output", json!({}), Duration::from_secs(5)).await {
        SandboxFault::OutputTooLarge { what, size, limit } => {
            assert_eq!(what, "output");
            assert_eq!(size, 50 * 1024 * 1024);
            assert_eq!(limit, 4 * 1024 * 1024, "the default `max-output-bytes`");
        }
        other => panic!("{other:?}"),
    }
}

/// Details that are not JSON are refused as such. `details` is a WIT
/// `string`, which the canonical ABI requires to be UTF-8: a plugin that
/// hands over other bytes anyway (the fixture forges them) is stopped when
/// the host lifts the string, as a trap that says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn details_that_are_not_json_or_not_utf8_are_refused() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-bad-details", None).await;
    let fault = fault_within(&rt, "bad_details", json!({}), Duration::from_secs(2)).await;
    assert!(
        matches!(fault, SandboxFault::InvalidDetails { .. }),
        "{fault:?}"
    );
    match fault_within(&rt, "bad_utf8_details", json!({}), Duration::from_secs(2)).await {
        SandboxFault::Trap { message } => {
            assert!(message.contains("invalid utf-8"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn log_flooding_is_bounded_and_the_call_succeeds() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-log-flood", None).await;
    // 10 000 lines to the host log, stdout and stderr each: ten times the
    // per-call line limit. The excess is dropped; the call is not failed.
    let o = alongside_calc(&rt, "log_flood", json!({"lines": 10_000})).await;
    eprintln!("log_flood: ended after {:?}", o.elapsed);
    assert!(o.elapsed < Duration::from_secs(5), "{:?}", o.elapsed);
    let r = o.result.expect("flooding the log is not an error");
    assert_eq!(r.output, "wrote 10000 lines to each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fs_escapes_fail_in_wasi_even_without_a_check_in_the_plugin() {
    let _shared = EXCLUSIVE.read().await;
    let scene = fs_scene();
    let mut s = PluginSettings::default();
    s.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = runtime("hostile-fs-escape", Some(s)).await;

    let inside = scene.granted.join("hello.txt");
    let r = rt
        .call(
            "read_path",
            json!({"path": inside.to_str().unwrap()}),
            CallContext::new(),
        )
        .await
        .expect("a file inside the grant is readable");
    assert!(r.output.contains("line one"), "{}", r.output);

    let granted = scene.granted.display();
    for path in [
        "/etc/passwd".to_owned(),
        "../secret.txt".to_owned(),
        format!("{granted}/../secret.txt"),
        format!("{granted}/sub/../../secret.txt"),
        scene.secret.display().to_string(),
        format!("{granted}/link-out"),
        "/".to_owned(),
    ] {
        let o = alongside_calc(&rt, "read_path", json!({"path": path})).await;
        let message = tool_failure(o.result);
        assert!(message.starts_with("cannot read "), "{path}: {message}");
        assert!(!message.contains("TOP SECRET"), "{path}: {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_granted_one_path_reaches_nothing_beside_it_whatever_path_the_guest_tries() {
    let _shared = EXCLUSIVE.read().await;
    let scene = fs_scene();
    std::fs::write(scene.granted.join("sibling.txt"), "SIBLING\n").unwrap();
    let mut s = PluginSettings::default();
    s.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = runtime("hostile-fs-escape", Some(s)).await;
    let granted = scene.granted.display().to_string();
    let name = scene
        .granted
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();

    // Granted one file (`[tools.read_beside] path-arg = "/path"`): it is
    // readable, and nothing beside it is, however the guest asks.
    let file = format!("{granted}/hello.txt");
    for other in [
        format!("{granted}/sibling.txt"),
        format!("{granted}/sub/../sibling.txt"),
        format!("{granted}/hello.txt/../sibling.txt"),
        format!("{granted}/../{name}/sibling.txt"),
        format!("{granted}/sub/inner.txt"),
        format!("{granted}/link-out"),
        format!("{granted}/../secret.txt"),
        "/etc/passwd".to_owned(),
    ] {
        let r = rt
            .call(
                "read_beside",
                json!({"path": file, "other": other}),
                CallContext::new(),
            )
            .await
            .unwrap_or_else(|e| panic!("{other}: {e}"));
        // The granted file's lines, then one line about the other path.
        let (first, second) = r.output.rsplit_once('\n').unwrap();
        assert!(first.contains(": line one"), "{other}: {}", r.output);
        assert!(second.starts_with("cannot read "), "{other}: {}", r.output);
        for leak in ["SIBLING", ": inner", "TOP SECRET", "root:"] {
            assert!(!second.contains(leak), "{other}: {}", r.output);
        }
    }

    // Granted a directory: what is inside it, and only that.
    let r = rt
        .call(
            "read_beside",
            json!({"path": format!("{granted}/sub"), "other": format!("{granted}/sub/inner.txt")}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(r.output.ends_with(": inner"), "{}", r.output);
    let r = rt
        .call(
            "read_beside",
            json!({"path": format!("{granted}/sub"), "other": format!("{granted}/sub/../sibling.txt")}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(r.output.contains("\ncannot read "), "{}", r.output);
    assert!(!r.output.contains("SIBLING"), "{}", r.output);

    // A path outside the grant, lexically or through a link, is refused
    // before the guest runs.
    for path in [
        format!("{granted}/../secret.txt"),
        format!("{granted}/link-out"),
    ] {
        match rt
            .call(
                "read_beside",
                json!({"path": path, "other": "/"}),
                CallContext::new(),
            )
            .await
        {
            Err(CallError::Denied { reason, .. }) => {
                assert!(
                    reason.contains("outside the directories granted"),
                    "{path}: {reason}"
                );
            }
            other => panic!("{path}: expected a denial, got {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_to_an_ungranted_host_or_a_name_for_loopback_never_leaves_the_host() {
    let _shared = EXCLUSIVE.read().await;
    let granted = TestServer::start("granted body");
    let other = TestServer::start("you should not see this");
    let mut s = PluginSettings::default();
    s.hosts
        .push(format!("127.0.0.1:{}", granted.port).parse().unwrap());
    // Granted by name, but the name resolves to loopback.
    s.hosts
        .push(format!("localhost:{}", other.port).parse().unwrap());
    let rt = runtime("hostile-http", Some(s)).await;

    // The control: the granted address is reachable.
    let r = rt
        .call(
            "fetch",
            json!({"url": granted.url("/ok")}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.output, "200 granted body");

    for url in [
        other.url("/"),
        format!("http://localhost:{}/", other.port),
        format!("http://localhost:{}/", granted.port),
    ] {
        let o = alongside_calc(&rt, "fetch", json!({"url": url})).await;
        let message = tool_failure(o.result);
        assert!(message.contains("HttpRequestDenied"), "{url}: {message}");
    }
    assert_eq!(other.request_count(), 0, "no request reached it");
    assert_eq!(granted.request_count(), 1, "only the control reached it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn environment_variables_it_was_not_given_are_not_there() {
    let _shared = EXCLUSIVE.read().await;
    assert!(std::env::var_os("PATH").is_some());
    let mut s = PluginSettings::default();
    s.env.push("TOOLHOST_HOSTILE_GIVEN=given value".into());
    let rt = runtime("hostile-env", Some(s)).await;
    for name in ["PATH", "HOME", "CARGO_MANIFEST_DIR"] {
        let o = alongside_calc(&rt, "env", json!({"name": name})).await;
        let message = tool_failure(o.result);
        assert!(message.contains("not found"), "{name}: {message}");
    }
    let r = rt
        .call(
            "env",
            json!({"name": "TOOLHOST_HOSTILE_GIVEN"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.output, "given value");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_component_importing_an_unknown_interface_is_refused_at_load() {
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-unknown-import", None).await;
    let report = rt.load_report();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let failure = &report.failures[0];
    assert_eq!(
        failure.path.file_name().unwrap(),
        "hostile-unknown-import.wasm"
    );
    match &failure.error {
        LoadError::Link(message) => assert!(
            message.contains("toolhost:plugin/keychain@0.1.0"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        !rt.tools().iter().any(|t| t.name == "steal_secret"),
        "none of its tools is offered"
    );
    calc_calls(&rt).await;
}

async fn many_calc_calls(rt: &Runtime, n: usize) {
    for _ in 0..n / 8 {
        calc_calls(rt).await;
    }
}

/// 50 calls that each run into the 16 MiB memory limit leave the host's
/// memory where it was.
///
/// The bound: the baseline is taken after a warm-up (well-behaved calls and
/// one alloc call, so code pages, caches and the pool slots the calls use are
/// already resident). A leak of what the 50 calls allocated would be 50 ×
/// 16 MiB = 800 MiB; keeping one sandbox's whole memory resident would be
/// 16 MiB per slot. What does stay is up to 4 MiB per pool slot the calls
/// used (`memory_keep_resident`: those pages are reset in place rather than
/// decommitted); with 5 calls at a time that plateaus at about +25..30 MiB
/// (measured: +24 MiB after 50 calls, +28 MiB after 200). +64 MiB leaves room
/// for that and for allocator fragmentation, while any per-call leak of the
/// guest's memory (16 MiB a call) would exceed it after 4 calls.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_returns_to_its_baseline_after_50_memory_limit_faults() {
    let _exclusive = EXCLUSIVE.write().await;
    let rt = runtime("hostile-alloc", None).await;
    many_calc_calls(&rt, 64).await;
    assert!(
        rt.call("alloc", json!({}), CallContext::new())
            .await
            .is_err()
    );
    many_calc_calls(&rt, 64).await;
    let baseline = rss();

    // 5 at a time, so that several sandboxes hit the limit at once.
    for _ in 0..10 {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..5 {
            let rt = rt.clone();
            tasks.spawn(async move { rt.call("alloc", json!({}), CallContext::new()).await });
        }
        while let Some(r) = tasks.join_next().await {
            let fault = sandbox_fault(r.unwrap());
            assert!(
                matches!(fault, SandboxFault::MemoryLimit { .. }),
                "{fault:?}"
            );
        }
    }
    let after_faults = rss();
    many_calc_calls(&rt, 64).await;
    let after = rss();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "RSS: baseline {:.1} MiB, after 50 alloc faults {:.1} MiB, after more calc calls {:.1} MiB",
        mib(baseline),
        mib(after_faults),
        mib(after)
    );
    let bound = baseline + 64 * 1024 * 1024;
    assert!(
        after < bound,
        "RSS grew from {:.1} MiB to {:.1} MiB",
        mib(baseline),
        mib(after)
    );
}

#[tokio::test]
async fn sockets_are_refused_and_a_read_only_grant_refuses_writes() {
    let _shared = EXCLUSIVE.read().await;
    let scene = fs_scene();
    let mut ro = PluginSettings::default();
    ro.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = runtime("hostile-net", Some(ro)).await;

    // A listener the plugin could reach if it had sockets: nothing arrives.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let o = alongside_calc(&rt, "connect", json!({ "addr": addr })).await;
    let message = tool_failure(o.result);
    assert!(message.starts_with("cannot connect to "), "{message}");
    assert!(
        listener.accept().is_err(),
        "no connection reached the listener"
    );

    let target = scene.granted.join("written.txt");
    let o = alongside_calc(
        &rt,
        "write_path",
        json!({ "path": target.display().to_string(), "text": "x" }),
    )
    .await;
    let message = tool_failure(o.result);
    assert!(message.starts_with("cannot write "), "{message}");
    assert!(
        !target.exists(),
        "nothing was written through a read-only grant"
    );

    // The same write through a read-write grant works: the refusal was the grant's.
    let mut rw = PluginSettings::default();
    rw.dirs.push(DirGrant::read_write(&scene.granted));
    let rt = runtime("hostile-net", Some(rw)).await;
    let r = rt
        .call(
            "write_path",
            json!({ "path": target.display().to_string(), "text": "x" }),
            CallContext::new(),
        )
        .await
        .expect("a read-write grant allows the write");
    assert!(r.output.starts_with("wrote "), "{}", r.output);
    assert!(target.exists());
}

#[tokio::test(flavor = "current_thread")]
async fn plugin_output_never_reaches_the_trace_collector_unless_the_operator_names_it() {
    use tracing_subscriber::layer::SubscriberExt;
    let _shared = EXCLUSIVE.read().await;
    let rt = runtime("hostile-log-flood", None).await;
    for plugin_output in [false, true] {
        let collector = toolhost_test_support::otlp::Collector::keeping();
        let telemetry = toolhost_telemetry::Telemetry::start(&toolhost_telemetry::Settings {
            endpoint: Some(collector.url()),
            plugin_output,
            ..Default::default()
        })
        .unwrap()
        .expect("an exporter");
        let traced = tracing::Dispatch::new(tracing_subscriber::registry().with(telemetry.layer()));
        {
            let _traced = tracing::dispatcher::set_default(&traced);
            tracing::callsite::rebuild_interest_cache();
            let r = rt
                .call("log_flood", json!({"lines": 2}), CallContext::new())
                .await
                .unwrap();
            assert_eq!(r.output, "wrote 2 lines to each");
        }
        telemetry.shutdown();
        let sent = collector.received_text();
        assert!(
            sent.contains("execute_tool log_flood"),
            "the call's spans left: {sent:?}"
        );
        for line in ["log line 0", "stdout line 0", "stderr line 1"] {
            assert_eq!(
                sent.contains(line),
                plugin_output,
                "{line} (plugin-output = {plugin_output})"
            );
        }
    }
}
