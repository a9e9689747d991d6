//! The MCP client as a tool source, through the runtime's one call
//! pipeline: against `mcp-server-time` and `mcp-server-git` (PyPI),
//! `server-everything` (npm), installed by `cargo xtask test`, and against
//! `hostile_server.py`, which stalls, crashes, floods and lies. The helpers
//! here are shared with `sandbox`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toolhost_mcp::client::{McpTransport, Start};
use toolhost_mcp::{McpServerConfig, McpSource};
use toolhost_runtime::{
    CallContext, CallError, PluginSettings, Runtime, ToolSource, error::SandboxFault,
    grants::LimitOverrides, source::SourceError, source::SourceState,
};
use toolhost_test_support::{hostile_mcp_server, outside_tool};

fn time_server() -> McpServerConfig {
    let program = outside_tool("py/bin/mcp-server-time");
    McpServerConfig::stdio("time", program.display().to_string(), &[])
}

fn everything() -> McpServerConfig {
    let program = outside_tool("node/node_modules/.bin/mcp-server-everything");
    McpServerConfig::stdio("every", program.display().to_string(), &[])
}

/// The hostile server as source `h`, with `args`.
pub(crate) fn hostile(args: &[&str]) -> McpServerConfig {
    let script = hostile_mcp_server().display().to_string();
    let mut all = vec![script.as_str()];
    all.extend_from_slice(args);
    McpServerConfig::stdio("h", "python3", &all)
}

/// A runtime with these servers and a per-call timeout of `timeout_ms`.
pub(crate) async fn runtime(servers: Vec<McpServerConfig>, timeout_ms: u64) -> Runtime {
    let mut builder = Runtime::builder().cache_dir(None);
    for config in servers {
        let settings = PluginSettings {
            limits: LimitOverrides {
                timeout_ms: Some(timeout_ms),
                ..LimitOverrides::default()
            },
            ..PluginSettings::default()
        };
        builder = builder
            .plugin_settings(config.name.clone(), settings)
            .source(Arc::new(McpSource::start(config).unwrap()));
    }
    builder.build().await.unwrap()
}

pub(crate) async fn call(
    rt: &Runtime,
    tool: &str,
    args: serde_json::Value,
) -> Result<String, CallError> {
    rt.call(tool, args, CallContext::new())
        .await
        .map(|r| r.output)
}

fn assert_timed_out(err: &CallError) {
    assert!(
        matches!(
            err,
            CallError::Sandbox {
                fault: SandboxFault::Timeout { .. },
                ..
            }
        ),
        "{err}"
    );
}

/// Polls `check` every 50 ms for up to 20 s.
pub(crate) async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status(rt: &Runtime, name: &str) -> toolhost_runtime::source::SourceStatus {
    rt.plugins()
        .into_iter()
        .find(|p| p.name == name)
        .and_then(|p| p.source)
        .unwrap_or_else(|| panic!("no source {name}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_servers_tools_are_listed_with_their_schemas_and_answer() {
    let rt = runtime(vec![time_server(), everything()], 30_000).await;
    let tools = rt.tools();
    let tool = |name: &str| {
        tools.iter().find(|t| t.name == name).unwrap_or_else(|| {
            panic!(
                "{name} in {:?}",
                tools.iter().map(|t| &t.name).collect::<Vec<_>>()
            )
        })
    };
    let now = tool("time__get_current_time");
    assert_eq!(now.plugin, "time");
    assert_eq!(now.declared_name, "time__get_current_time");
    assert!(
        now.input_schema["properties"]["timezone"].is_object(),
        "{}",
        now.input_schema
    );
    assert!(now.annotations.read_only);
    let structured = tool("every__get-structured-content");
    assert!(
        structured.output_schema.is_some(),
        "the output schema is kept"
    );

    let out = call(&rt, "time__get_current_time", json!({"timezone": "UTC"}))
        .await
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(parsed["timezone"], "UTC", "{out}");
    let r = rt
        .call(
            "every__get-structured-content",
            json!({"location": "New York"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(
        r.structured
            .as_ref()
            .is_some_and(|s| s["temperature"].is_number()),
        "{r:?}"
    );
    assert_eq!(r.plugin, "every");

    // The schema is checked before the server sees the call.
    let err = call(&rt, "every__echo", json!({"message": 3}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::InvalidArguments { .. }), "{err}");
    let out = call(&rt, "every__echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert!(out.contains("hi"), "{out}");
    // An image is kept as the block it was sent as; the model's text is
    // the text blocks around it.
    let r = rt
        .call("every__get-tiny-image", json!({}), CallContext::new())
        .await
        .unwrap();
    assert!(!r.output.contains("base64"), "{}", r.output);
    assert_eq!(r.content[1].kind(), "image", "{:?}", r.content);
    assert_eq!(r.details, None, "the blocks are the content, not details");

    let time = status(&rt, "time");
    assert_eq!(time.state, SourceState::Ready);
    assert_eq!(time.kind, "mcp-stdio");
    assert!(time.server.unwrap().starts_with("mcp-time "));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_progress_reaches_the_caller() {
    let rt = runtime(vec![everything()], 30_000).await;
    let reports = Arc::new(AtomicUsize::new(0));
    let seen = reports.clone();
    let cx = CallContext::new().on_progress(move |tool, _message, fraction| {
        assert_eq!(tool, "every__trigger-long-running-operation");
        assert!(fraction.is_some_and(|f| (0.0..=1.0).contains(&f)));
        seen.fetch_add(1, Ordering::Relaxed);
    });
    let r = rt
        .call(
            "every__trigger-long-running-operation",
            json!({"duration": 1, "steps": 4}),
            cx,
        )
        .await
        .unwrap();
    assert!(r.output.contains("completed"), "{}", r.output);
    assert!(reports.load(Ordering::Relaxed) >= 3, "{reports:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_list_change_reaches_the_registry() {
    let rt = runtime(vec![hostile(&[])], 10_000).await;
    let mut events = rt.subscribe();
    assert!(!rt.tools().iter().any(|t| t.name == "h__added"));
    assert_eq!(call(&rt, "h__grow", json!({})).await.unwrap(), "grown");
    let event = tokio::time::timeout(Duration::from_secs(20), events.recv()).await;
    assert!(event.is_ok(), "a plugin event follows the list change");
    assert_eq!(
        call(&rt, "h__added", json!({}))
            .await
            .unwrap_err()
            .kind()
            .as_str(),
        "tool-invalid-arguments",
        "the new tool is called by the server's name for it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_never_answers_times_out_and_keeps_serving() {
    let rt = runtime(vec![hostile(&[])], 500).await;
    let started = Instant::now();
    let err = call(&rt, "h__stall", json!({})).await.unwrap_err();
    assert_timed_out(&err);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        call(&rt, "h__echo", json!({"text": "still"}))
            .await
            .unwrap(),
        "echo: still"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_mid_call_is_a_tool_error_and_is_reconnected() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let pid_arg = pid_file.display().to_string();
    let rt = runtime(vec![hostile(&["--pid-file", &pid_arg])], 20_000).await;
    // The server exits during the call.
    let err = call(&rt, "h__crash", json!({})).await.unwrap_err();
    assert!(
        matches!(
            &err,
            CallError::Sandbox {
                fault: SandboxFault::Source(SourceError::Unavailable(_)),
                ..
            }
        ),
        "{err}"
    );
    eventually("a reconnect after the crash", async || {
        call(&rt, "h__echo", json!({"text": "back"}))
            .await
            .is_ok_and(|o| o == "echo: back")
    })
    .await;
    // Killed from outside while a call waits on it.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let waiting = {
        let rt = rt.clone();
        tokio::spawn(async move { call(&rt, "h__stall", json!({})).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());
    let err = waiting.await.unwrap().unwrap_err();
    assert!(
        err.to_string().contains("went away during the call"),
        "{err}"
    );
    eventually("a reconnect after the kill", async || {
        call(&rt, "h__echo", json!({"text": "again"})).await.is_ok()
    })
    .await;
    assert_ne!(
        std::fs::read_to_string(&pid_file).unwrap(),
        pid,
        "a new process"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn garbage_floods_and_oversized_messages_are_contained() {
    let mut config = hostile(&[]);
    config.max_message_bytes = 1024 * 1024;
    let rt = runtime(vec![config], 3_000).await;
    assert_eq!(
        call(&rt, "h__garbage", json!({})).await.unwrap(),
        "after garbage"
    );

    let reports = Arc::new(AtomicUsize::new(0));
    let seen = reports.clone();
    let cx = CallContext::new().on_progress(move |_, _, _| {
        seen.fetch_add(1, Ordering::Relaxed);
    });
    let r = rt.call("h__flood", json!({}), cx).await.unwrap();
    assert_eq!(r.output, "flooded");
    let n = reports.load(Ordering::Relaxed);
    assert!(
        n > 0 && n <= 64,
        "progress reports are bounded per call: {n}"
    );

    // A 20 MB line is dropped unread past 1 MiB: the call times out.
    let err = call(&rt, "h__huge", json!({})).await.unwrap_err();
    assert_timed_out(&err);
    assert_eq!(
        call(&rt, "h__echo", json!({"text": "ok"})).await.unwrap(),
        "echo: ok"
    );
    // A name providers refuse is made valid, and the server gets its own.
    let err = call(&rt, "h__bad_name_with_dots", json!({}))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("unknown tool bad name/with.dots"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_cannot_start_is_down_with_its_reason_and_calls_fail_at_once() {
    let mut hang = hostile(&["--hang-init"]);
    hang.name = "hang".into();
    hang.connect_timeout = Duration::from_millis(500);
    let exits = hostile(&["--exit-at-start"]);
    let rt = runtime(vec![hang, exits], 30_000).await;
    match status(&rt, "h").state {
        SourceState::Down { reason, retry_in } => {
            assert!(reason.contains("refusing to start"), "its stderr: {reason}");
            assert!(retry_in.is_some());
        }
        other => panic!("{other:?}"),
    }
    match status(&rt, "hang").state {
        SourceState::Down { reason, .. } => {
            assert!(reason.contains("did not connect within 500 ms"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(rt.tools().is_empty(), "no tools were ever listed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lazy_server_does_not_hold_up_start_up_and_joins_later() {
    // A lazy server that never finishes starting: start-up does not wait
    // for it (its connection is still being made when the runtime is built).
    let mut never = hostile(&["--hang-init"]);
    never.name = "never".into();
    never.start = Start::Lazy;
    let rt = runtime(vec![never], 10_000).await;
    assert_eq!(status(&rt, "never").state, SourceState::Starting);
    drop(rt);

    let mut config = hostile(&[]);
    config.start = Start::Lazy;
    let rt = runtime(vec![config], 10_000).await;
    let mut events = rt.subscribe();
    if rt.tools().is_empty() {
        let event = tokio::time::timeout(Duration::from_secs(20), events.recv()).await;
        assert!(event.is_ok(), "its tools join when it answers");
    }
    assert_eq!(
        call(&rt, "h__echo", json!({"text": "late"})).await.unwrap(),
        "echo: late"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_gets_only_the_environment_it_is_granted() {
    let mut config = everything();
    if let McpTransport::Stdio(s) = &mut config.transport {
        s.env.push(("GRANTED_VALUE".into(), "yes".into()));
    }
    let rt = runtime(vec![config], 30_000).await;
    let out = call(&rt, "every__get-env", json!({})).await.unwrap();
    assert!(out.contains("GRANTED_VALUE"), "{out}");
    assert!(out.contains("PATH"), "the default variables: {out}");
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    assert!(
        !out.contains("CARGO_MANIFEST_DIR"),
        "the host's other variables stay: {out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stdio_server_stops_with_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let pid_arg = pid_file.display().to_string();
    let rt = runtime(vec![hostile(&["--pid-file", &pid_arg])], 10_000).await;
    call(&rt, "h__echo", json!({})).await.unwrap();
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let proc_dir = Path::new("/proc").join(pid.trim());
    assert!(proc_dir.exists());
    drop(rt);
    eventually("the server's process to end", async || {
        std::fs::read_to_string(proc_dir.join("stat")).map_or(true, |stat| stat.contains(") Z "))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_file_never_takes_a_configured_servers_name() {
    // A component that calls itself `time` beside the server `time`.
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        toolhost_test_support::plugins_dir().join("calc.wasm"),
        dir.path().join("time.wasm"),
    )
    .unwrap();
    let rt = Runtime::builder()
        .cache_dir(Some(
            toolhost_test_support::root().join("target/test-cache"),
        ))
        .plugin_dir(dir.path())
        .source(Arc::new(McpSource::start(time_server()).unwrap()))
        .build()
        .await
        .unwrap();
    let time = rt.plugins().into_iter().find(|p| p.name == "time").unwrap();
    assert_eq!(time.kind, toolhost_runtime::load::PluginKind::Source);
    assert!(
        !rt.tools().iter().any(|t| t.name == "calculate"),
        "the file's tools are not served"
    );
    let warnings = rt.load_report().warnings.join("\n");
    assert!(
        warnings.contains("is not used") && warnings.contains("configured tool source"),
        "{warnings}"
    );
    let source = McpSource::start(time_server()).unwrap();
    assert_eq!(source.prefix(), "time__");
}

/// Kills the child when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamable_http_server_is_a_source_too() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child =
        std::process::Command::new(outside_tool("node/node_modules/.bin/mcp-server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Killed(child);
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stderr));
    assert!(
        lines.any(|l| l.is_ok_and(|l| l.contains("listening on port"))),
        "server-everything listens over HTTP"
    );
    std::thread::spawn(move || lines.for_each(drop));
    let mut config = McpServerConfig::http("web", format!("http://127.0.0.1:{port}/mcp"));
    if let McpTransport::Http(h) = &mut config.transport {
        h.headers.push(("X-Toolhost-Test".into(), "1".into()));
        h.bearer = Some("not-checked-by-this-server".into());
    }
    let rt = runtime(vec![config], 30_000).await;
    let web = status(&rt, "web");
    assert_eq!(
        (web.kind.as_str(), &web.state),
        ("mcp-http", &SourceState::Ready)
    );
    let out = call(&rt, "web__echo", json!({"message": "over http"}))
        .await
        .unwrap();
    assert!(out.contains("over http"), "{out}");
}

#[test]
fn a_configuration_that_cannot_work_is_refused_before_starting() {
    let bad_url = McpServerConfig::http("web", "ftp://example.com/mcp");
    let err = McpSource::start(bad_url).err().unwrap().to_string();
    assert!(err.contains("must be http:// or https://"), "{err}");
    let mut bad_header = McpServerConfig::http("web", "http://127.0.0.1:9/mcp");
    if let McpTransport::Http(h) = &mut bad_header.transport {
        h.headers.push(("bad header".into(), "x".into()));
    }
    assert!(
        McpSource::start(bad_header)
            .err()
            .unwrap()
            .to_string()
            .contains("invalid header name")
    );
    let bad_name = McpServerConfig::stdio("has space", "true", &[]);
    assert!(McpSource::start(bad_name).is_err());
    let empty = McpServerConfig::stdio("e", " ", &[]);
    assert!(
        McpSource::start(empty)
            .err()
            .unwrap()
            .to_string()
            .contains("command is empty")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_server_git_answers_about_a_repository() {
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(repo.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    std::fs::write(repo.path().join("notes.txt"), "one\n").unwrap();
    git(&["add", "notes.txt"]);
    git(&["commit", "-q", "-m", "first notes"]);
    std::fs::write(repo.path().join("notes.txt"), "two\n").unwrap();
    let program = outside_tool("py/bin/mcp-server-git").display().to_string();
    let path = repo.path().display().to_string();
    let rt = runtime(
        vec![McpServerConfig::stdio(
            "git",
            program,
            &["--repository", &path],
        )],
        30_000,
    )
    .await;
    assert!(rt.tools().iter().any(|t| t.name == "git__git_status"));
    let status = call(&rt, "git__git_status", json!({"repo_path": path}))
        .await
        .unwrap();
    assert!(status.contains("notes.txt"), "{status}");
    let log = call(&rt, "git__git_log", json!({"repo_path": path}))
        .await
        .unwrap();
    assert!(log.contains("first notes"), "{log}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_churning_its_tool_list_rebuilds_the_catalog_a_few_times_a_second_at_most() {
    let dir = tempfile::tempdir().unwrap();
    let lists = dir.path().join("lists");
    let lists_arg = lists.display().to_string();
    let rt = runtime(vec![hostile(&["--list-count", &lists_arg])], 20_000).await;
    let read_lists =
        || -> u64 { std::fs::read_to_string(&lists).map_or(0, |t| t.trim().parse().unwrap_or(0)) };
    let before = read_lists();
    let mut events = rt.subscribe();
    // A new list every 5 ms for a second: 200 announcements.
    let churned = call(&rt, "h__churn", json!({"ms": 1000})).await.unwrap();
    let announced: usize = churned.trim_start_matches("churned ").parse().unwrap();
    assert!(announced > 50, "{churned}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut rebuilds: u64 = 0;
    loop {
        match events.try_recv() {
            Ok(_) => rebuilds += 1,
            // Events the channel dropped count too.
            Err(tokio::sync::broadcast::error::TryRecvError::Lagged(n)) => rebuilds += n,
            Err(_) => break,
        }
    }
    assert!(rebuilds >= 1, "the changes are seen");
    // The list is read again a few times a second at most, not once per
    // announcement.
    let relisted = read_lists() - before;
    assert!(
        relisted <= 12,
        "{relisted} tools/list for {announced} announcements"
    );
    // 1.6 s at one read per 250 ms of quiet at most, with room for a slow
    // machine; without the debounce, a rebuild per announcement.
    assert!(
        rebuilds <= 12,
        "{rebuilds} rebuilds for {announced} announcements"
    );
    // The last list is the one served.
    eventually("the last churned tool to be listed", async || {
        rt.tools()
            .iter()
            .any(|t| t.name == format!("h__churn_{announced}"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn endless_pages_of_large_tools_are_read_only_up_to_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("pages");
    let counter_arg = counter.display().to_string();
    let rt = runtime(vec![hostile(&["--endless-pages", &counter_arg])], 10_000).await;
    let served: usize = std::fs::read_to_string(&counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // 1 MB a page against the 4 MiB budget: five pages, not the hundred
    // the page bound alone would allow (100 MB held).
    assert!(served <= 6, "{served} pages read");
    // What fits the budget is kept, the rest left out with a warning.
    let kept = rt
        .tools()
        .iter()
        .filter(|t| t.name.starts_with("h__big"))
        .count();
    assert!((1..=4).contains(&kept), "{kept} tools kept");
    let warnings = rt.load_report().warnings.join("\n");
    assert!(warnings.contains("bytes of tools"), "{warnings}");
}

/// A runtime with `server`, a policy that asks about `h__echo`, its saved
/// approvals in `saved`, and nobody to ask (an ask no approval answers is
/// denied).
async fn asking(server: McpServerConfig, saved: &Path) -> Runtime {
    use toolhost_runtime::policy::{Policy, Rule};
    Runtime::builder()
        .cache_dir(None)
        .policy(
            Policy::builder()
                .rule(Rule::ask("h__echo"))
                .build()
                .unwrap(),
        )
        .approvals_file(Some(saved.to_owned()))
        .source(Arc::new(McpSource::start(server).unwrap()))
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_saved_approval_of_a_servers_tool_is_asked_again_when_the_server_changes() {
    use toolhost_runtime::policy::approvals::{Answers, NewApproval, Scope};
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let version = dir.path().join("version");
    std::fs::write(&version, "1.0").unwrap();
    let server = hostile(&["--version-file", &version.display().to_string()]);
    let echo = async |rt: &Runtime| call(rt, "h__echo", json!({"text": "hi"})).await;
    let asked = |result: Result<String, CallError>, why: &str| {
        let err = result.expect_err(why);
        assert_eq!(err.kind().as_str(), "permission-denied", "{why}: {err}");
    };

    // "This tool always", saved for the server as it is now.
    let rt = asking(server.clone(), &saved).await;
    let digest = rt
        .plugins()
        .into_iter()
        .find(|p| p.name == "h")
        .unwrap()
        .digest;
    rt.approvals()
        .save(NewApproval {
            tool: "h__echo".into(),
            plugin: "h".into(),
            digest,
            scope: Scope::AnyArguments,
            profile: None,
            answers: Answers::User,
            who: "test".into(),
            from: "test".into(),
            expires: None,
        })
        .unwrap();
    assert_eq!(echo(&rt).await.unwrap(), "echo: hi");
    drop(rt);
    // The same server started again: still approved.
    let rt = asking(server.clone(), &saved).await;
    assert_eq!(echo(&rt).await.unwrap(), "echo: hi", "a restart keeps it");
    drop(rt);

    // It reports another version (an `npx …@latest` upgrade): asked again.
    std::fs::write(&version, "2.0").unwrap();
    asked(
        echo(&asking(server.clone(), &saved).await).await,
        "upgraded",
    );
    std::fs::write(&version, "1.0").unwrap();

    // Its settings changed (here its environment; a removed sandbox alike).
    let mut other = server.clone();
    if let McpTransport::Stdio(s) = &mut other.transport {
        s.env.push(("HOSTILE_MODE".into(), "other".into()));
    }
    asked(echo(&asking(other, &saved).await).await, "another setting");

    // Its tools changed while it runs: asked again.
    let rt = asking(server, &saved).await;
    assert_eq!(echo(&rt).await.unwrap(), "echo: hi");
    assert_eq!(call(&rt, "h__grow", json!({})).await.unwrap(), "grown");
    eventually("the new tool is listed", async || {
        rt.tools().iter().any(|t| t.name == "h__added")
    })
    .await;
    asked(echo(&rt).await, "the tools changed");
}
