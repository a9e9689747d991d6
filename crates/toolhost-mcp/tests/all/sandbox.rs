//! MCP stdio servers in the process sandbox: kept to their directories (even
//! when their own files are under /tmp) and off the network unless granted,
//! refused Unix sockets wherever they are, and `.git` kept read-only.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolhost_mcp::{McpServerConfig, McpTransport, ProcessSandbox};
use toolhost_test_support::{hostile_mcp_server, outside_tool};

use crate::client::{call, eventually, hostile, runtime};

/// `config` (a stdio server) in a process sandbox.
fn sandboxed(mut config: McpServerConfig, name: &str, sandbox: ProcessSandbox) -> McpServerConfig {
    if let McpTransport::Stdio(s) = &mut config.transport {
        s.sandbox = Some(sandbox);
    }
    config.name = name.into();
    config
}

/// A directory outside /tmp, which the sandbox replaces with its own:
/// `target/`, or `/var/tmp` when the checkout is under /tmp.
fn outside_tmp() -> std::path::PathBuf {
    let target = toolhost_test_support::root().join("target");
    match target.canonicalize() {
        Ok(real) if !real.starts_with("/tmp") => target,
        _ => "/var/tmp".into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_process_sandbox_keeps_a_server_to_its_directories_and_off_the_network() {
    let dir = tempfile::tempdir_in(outside_tmp()).unwrap();
    let (granted, other) = (dir.path().join("granted"), dir.path().join("other"));
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::create_dir_all(&other).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let writes_one = ProcessSandbox {
        write: vec![granted.clone()],
        ..ProcessSandbox::default()
    };
    let networked = ProcessSandbox {
        network: true,
        ..ProcessSandbox::default()
    };
    // The reference filesystem server runs under bubblewrap too.
    let program = outside_tool("node/node_modules/.bin/mcp-server-filesystem");
    let fs = McpServerConfig::stdio(
        "fs",
        program.display().to_string(),
        &[&granted.display().to_string()],
    );
    let rt = runtime(
        vec![
            sandboxed(hostile(&[]), "boxed", writes_one.clone()),
            sandboxed(hostile(&[]), "net", networked),
            sandboxed(fs, "fs", writes_one),
        ],
        30_000,
    )
    .await;
    let write = |path: &Path| json!({"path": path.display().to_string()});
    assert_eq!(
        call(&rt, "boxed__write", write(&granted.join("a")))
            .await
            .unwrap(),
        "written"
    );
    let denied = call(&rt, "boxed__write", write(&other.join("b")))
        .await
        .unwrap();
    assert!(denied.contains("Read-only file system"), "{denied}");
    assert!(!other.join("b").exists());
    let tmp = call(
        &rt,
        "boxed__write",
        write(Path::new("/tmp/toolhost-sandbox-probe")),
    )
    .await
    .unwrap();
    assert_eq!(tmp, "written", "its /tmp is its own");
    assert!(!Path::new("/tmp/toolhost-sandbox-probe").exists());

    let offline = call(&rt, "boxed__connect", json!({"port": port}))
        .await
        .unwrap();
    assert!(offline.starts_with("error:"), "no network: {offline}");
    let online = call(&rt, "net__connect", json!({"port": port}))
        .await
        .unwrap();
    assert_eq!(online, "connected", "network granted");

    let content = json!({"path": granted.join("c.txt").display().to_string(), "content": "hello"});
    call(&rt, "fs__write_file", content).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(granted.join("c.txt")).unwrap(),
        "hello"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_server_whose_files_are_under_tmp_still_sees_them_and_nothing_else_of_tmp() {
    // The server's venv, script and working directory under /tmp, which
    // the sandbox replaces with its own (as in a checkout under /tmp).
    let dir = tempfile::tempdir_in("/tmp").unwrap();
    let (venv, scripts) = (dir.path().join("venv"), dir.path().join("server"));
    let (granted, other) = (dir.path().join("granted"), dir.path().join("other"));
    for d in [&scripts, &granted, &other] {
        std::fs::create_dir_all(d).unwrap();
    }
    let made = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success(), "python3 -m venv: {made}");
    std::fs::copy(hostile_mcp_server(), scripts.join("server.py")).unwrap();
    let python = venv.join("bin/python").display().to_string();
    // A sibling elsewhere in /tmp, which the server must not see.
    let sibling = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::write(sibling.path().join("secret"), "s").unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();

    // An absolute script; HOME hidden too, where the venv's base
    // interpreter may be (pyenv), reached through the venv's symlink.
    let script = scripts.join("server.py").display().to_string();
    let by_path = McpServerConfig::stdio("abs", python.clone(), &[&script]);
    let home: Vec<_> = std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .filter(|h| h.is_dir() && h.parent().is_some())
        .into_iter()
        .collect();
    let hides_home = ProcessSandbox {
        hide: home,
        ..ProcessSandbox::default()
    };
    // A relative script in its working directory (the tempdir, read-only),
    // with a writable directory inside it.
    let mut in_cwd = McpServerConfig::stdio("cwd", python, &["server/server.py"]);
    if let McpTransport::Stdio(s) = &mut in_cwd.transport {
        s.cwd = Some(dir.path().to_path_buf());
    }
    let writes_granted = ProcessSandbox {
        write: vec![granted.clone()],
        ..ProcessSandbox::default()
    };
    let rt = runtime(
        vec![
            sandboxed(by_path, "abs", hides_home),
            sandboxed(in_cwd, "cwd", writes_granted),
        ],
        30_000,
    )
    .await;
    let write = |server: &str, path: &Path| {
        let (tool, args) = (
            format!("{server}__write"),
            json!({"path": path.display().to_string()}),
        );
        let rt = &rt;
        async move { call(rt, &tool, args).await.unwrap() }
    };
    for server in ["abs", "cwd"] {
        let echo = call(&rt, &format!("{server}__echo"), json!({"text": "hi"})).await;
        assert!(echo.is_ok(), "{server} runs in the sandbox: {echo:?}");
        let gone = write(server, &sibling.path().join("b")).await;
        assert!(
            gone.contains("No such file or directory"),
            "the rest of /tmp is not there: {gone}"
        );
        let offline = call(&rt, &format!("{server}__connect"), json!({"port": port}))
            .await
            .unwrap();
        assert!(offline.starts_with("error:"), "no network: {offline}");
    }
    assert!(!sibling.path().join("b").exists());
    // Only the server's own trees came back, not the tempdir around them.
    let unseen = write("abs", &other.join("b")).await;
    assert!(unseen.contains("No such file or directory"), "{unseen}");
    // Its own files are there read-only; a granted directory stays writable.
    let own = write("abs", &scripts.join("b")).await;
    assert!(own.contains("Read-only file system"), "{own}");
    let cwd = write("cwd", &other.join("b")).await;
    assert!(cwd.contains("Read-only file system"), "{cwd}");
    assert_eq!(write("cwd", &granted.join("a")).await, "written");
    assert!(granted.join("a").is_file());
    assert!(!other.join("b").exists() && !scripts.join("b").exists());
}

/// A Unix-domain socket listening at `path`; the flag turns true when a
/// client connects and writes.
fn unix_listener(path: &Path) -> Arc<std::sync::atomic::AtomicBool> {
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    let reached = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = reached.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut got = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stream, &mut got);
            if !got.is_empty() {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    reached
}

#[tokio::test(flavor = "multi_thread")]
async fn the_process_sandbox_refuses_unix_sockets_wherever_they_are_and_keeps_git_read_only() {
    // Sockets where the session bus, a container engine or an ssh agent
    // listen: under /run, under a home-like directory (outside /tmp) and
    // under /tmp. The tests run as root in CI; elsewhere /run may not be
    // writable, and then XDG_RUNTIME_DIR (also under /run) stands in.
    let dir = tempfile::tempdir_in(outside_tmp()).unwrap();
    let run_dir = if std::fs::metadata("/run").is_ok_and(|m| !m.permissions().readonly())
        && tempfile::tempdir_in("/run").is_ok()
    {
        std::path::PathBuf::from("/run")
    } else {
        std::env::var_os("XDG_RUNTIME_DIR")
            .map(std::path::PathBuf::from)
            .expect("/run or XDG_RUNTIME_DIR is writable, for a socket under /run")
    };
    let run_socket = tempfile::tempdir_in(&run_dir).unwrap();
    let tmp_socket = tempfile::tempdir_in("/tmp").unwrap();
    let sockets = [
        run_socket.path().join("bus.sock"),
        dir.path().join("agent.sock"),
        tmp_socket.path().join("engine.sock"),
    ];
    let reached: Vec<_> = sockets.iter().map(|p| unix_listener(p)).collect();
    let granted = dir.path().join("repo");
    std::fs::create_dir_all(granted.join(".git/hooks")).unwrap();
    let defaults = ProcessSandbox {
        write: vec![granted.clone()],
        ..ProcessSandbox::default()
    };
    let configured = ProcessSandbox {
        write: vec![granted.clone()],
        unix_sockets: true,
        git_writable: true,
        ..ProcessSandbox::default()
    };
    let rt = runtime(
        vec![
            sandboxed(hostile(&[]), "boxed", defaults),
            sandboxed(hostile(&[]), "open", configured),
        ],
        30_000,
    )
    .await;
    for (socket, reached) in sockets.iter().zip(&reached) {
        let path = json!({"path": socket.display().to_string()});
        let refused = call(&rt, "boxed__connect_unix", path).await.unwrap();
        assert!(
            refused.contains("Permission denied"),
            "{}: {refused}",
            socket.display()
        );
        assert!(!reached.load(std::sync::atomic::Ordering::SeqCst));
    }
    // Configured to allow them, the one outside /tmp is reached (the
    // sandbox's /tmp is its own either way).
    let path = json!({"path": sockets[1].display().to_string()});
    assert_eq!(
        call(&rt, "open__connect_unix", path).await.unwrap(),
        "connected"
    );
    eventually("the socket to be written", async || {
        reached[1].load(std::sync::atomic::Ordering::SeqCst)
    })
    .await;

    // `.git` stays read-only inside a writable directory, unless configured.
    let write = |server: &str, path: std::path::PathBuf| {
        let (tool, args) = (
            format!("{server}__write"),
            json!({"path": path.display().to_string()}),
        );
        let rt = &rt;
        async move { call(rt, &tool, args).await.unwrap() }
    };
    assert_eq!(write("boxed", granted.join("src.txt")).await, "written");
    for inside in [".git/config", ".git/hooks/pre-commit"] {
        let denied = write("boxed", granted.join(inside)).await;
        assert!(
            denied.contains("Read-only file system"),
            "{inside}: {denied}"
        );
    }
    assert!(!granted.join(".git/hooks/pre-commit").exists());
    assert_eq!(write("open", granted.join(".git/config")).await, "written");
}
