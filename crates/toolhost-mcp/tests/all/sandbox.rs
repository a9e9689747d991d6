//! MCP stdio servers in the process sandbox: kept to their directories (even
//! when their own files are under /tmp) and off the network unless granted,
//! refused Unix sockets wherever they are, and `.git` kept read-only.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolhost_mcp::McpServerConfig;
use toolhost_mcp::client::{McpTransport, ProcessSandbox};
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

/// What a Unix-domain socket listening outside the sandbox received: one
/// entry per datagram, or per read on a stream.
#[derive(Clone, Default)]
struct Received(Arc<std::sync::Mutex<Vec<String>>>);

impl Received {
    fn push(&self, bytes: &[u8]) {
        self.0
            .lock()
            .unwrap()
            .push(String::from_utf8_lossy(bytes).into_owned());
    }

    fn got(&self, message: &str) -> bool {
        self.0.lock().unwrap().iter().any(|m| m.contains(message))
    }

    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A stream socket listening at `path`: what every connection writes.
fn stream_listener(path: &Path) -> Received {
    let _ = std::fs::remove_file(path);
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    let received = Received::default();
    let record = received.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let record = record.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 512];
                while let Ok(n @ 1..) = std::io::Read::read(&mut stream, &mut buf) {
                    record.push(&buf[..n]);
                }
            });
        }
    });
    received
}

/// A datagram socket bound at `path` (as journald's or `/dev/log`): every
/// datagram it receives.
fn datagram_listener(path: &Path) -> Received {
    let _ = std::fs::remove_file(path);
    let socket = std::os::unix::net::UnixDatagram::bind(path).unwrap();
    let received = Received::default();
    let record = received.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok(n) = socket.recv(&mut buf) {
            record.push(&buf[..n]);
        }
    });
    received
}

/// A directory under `/run` for sockets, as the session bus's: `/run`
/// itself when writable (root, as in CI), else `XDG_RUNTIME_DIR`.
fn under_run() -> tempfile::TempDir {
    tempfile::tempdir_in("/run")
        .or_else(|_| {
            let runtime = std::env::var_os("XDG_RUNTIME_DIR")
                .expect("/run or XDG_RUNTIME_DIR is writable, for a socket under /run");
            tempfile::tempdir_in(runtime)
        })
        .unwrap()
}

/// A directory under HOME (where ssh and gpg agents listen) when HOME is
/// writable and outside /tmp, else one outside /tmp standing for it.
fn under_home() -> tempfile::TempDir {
    std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .filter(|home| !home.starts_with("/tmp"))
        .and_then(|home| tempfile::tempdir_in(home).ok())
        .unwrap_or_else(|| tempfile::tempdir_in(outside_tmp()).unwrap())
}

/// A Unix stream connected to `path` that every child process inherits
/// (no close-on-exec), as a host embedded in a careless program, or
/// started by one, would hold.
fn inheritable_unix_stream(path: &Path) -> std::os::unix::net::UnixStream {
    use std::os::fd::AsRawFd;
    let stream = std::os::unix::net::UnixStream::connect(path).unwrap();
    // SAFETY: `fcntl` on a descriptor this function owns; no memory is
    // passed.
    #[allow(unsafe_code)]
    let cleared = unsafe { libc::fcntl(stream.as_raw_fd(), libc::F_SETFD, 0) };
    assert_eq!(cleared, 0, "clearing FD_CLOEXEC");
    stream
}

/// The ways the escape probe (`unix_socket_probe.c`) tries: the kind of
/// listener each aims at and what the sandbox answers, the filter's
/// `EACCES` at the first step, or `None` for the connected socket pairs
/// it allows, which the kernel does not let point elsewhere.
fn ways() -> Vec<(&'static str, Kind, Option<&'static str>)> {
    let x32 = if cfg!(target_arch = "x86_64") {
        "refused at socket (x32): Permission denied"
    } else {
        "refused at x32 (not x86_64)"
    };
    vec![
        (
            "socket-stream",
            Kind::Stream,
            Some("refused at socket: Permission denied"),
        ),
        (
            "socket-dgram",
            Kind::Datagram,
            Some("refused at socket: Permission denied"),
        ),
        (
            "socketpair-dgram-connect",
            Kind::Datagram,
            Some("refused at socketpair: Permission denied"),
        ),
        (
            "socketpair-dgram-sendto",
            Kind::Datagram,
            Some("refused at socketpair: Permission denied"),
        ),
        ("socketpair-stream-connect", Kind::Stream, None),
        ("socketpair-stream-sendto", Kind::Datagram, None),
        ("socketpair-seqpacket-sendto", Kind::Datagram, None),
        (
            "io-uring-stream",
            Kind::Stream,
            Some("refused at io_uring_setup: Permission denied"),
        ),
        (
            "io-uring-dgram",
            Kind::Datagram,
            Some("refused at io_uring_setup: Permission denied"),
        ),
        ("x32-stream", Kind::Stream, Some(x32)),
        ("x32-dgram", Kind::Datagram, Some(x32)),
    ]
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Stream,
    Datagram,
}

#[tokio::test(flavor = "multi_thread")]
async fn no_way_in_reaches_a_unix_socket_outside_the_process_sandbox() {
    let work = tempfile::tempdir_in(outside_tmp()).unwrap();
    let probe = toolhost_test_support::unix_socket_probe(work.path());
    // A stream and a datagram socket under /run, HOME and /tmp.
    let places = [
        under_run(),
        under_home(),
        tempfile::tempdir_in("/tmp").unwrap(),
    ];
    let listeners: Vec<(std::path::PathBuf, Kind, Received)> = places
        .iter()
        .flat_map(|dir| {
            let (stream, datagram) = (dir.path().join("s.sock"), dir.path().join("d.sock"));
            [
                (stream.clone(), Kind::Stream, stream_listener(&stream)),
                (
                    datagram.clone(),
                    Kind::Datagram,
                    datagram_listener(&datagram),
                ),
            ]
        })
        .collect();
    // A socket the host holds without close-on-exec, connected outside.
    let held_at = places[0].path().join("held.sock");
    let held = stream_listener(&held_at);
    let _inheritable = inheritable_unix_stream(&held_at);
    let run = |argv: &[&str]| {
        std::process::Command::new(argv[0])
            .args(&argv[1..])
            .output()
    };

    // Without the sandbox, each way reaches its listener (x32 only where
    // the kernel has it; io_uring where the kernel allows it), so the
    // checks below can fail.
    let kernel_refuses = |out: &str| {
        out.contains("Function not implemented") || out.contains("Operation not permitted")
    };
    let mut control = Vec::new();
    for (way, kind, refusal) in ways() {
        for (path, _, received) in listeners.iter().filter(|(_, k, _)| *k == kind) {
            let message = format!("outside {way} {}", path.display());
            let out = run(&[
                &probe.display().to_string(),
                way,
                &path.display().to_string(),
                &message,
            ])
            .unwrap();
            let out = String::from_utf8_lossy(&out.stdout).into_owned();
            if refusal.is_some() && !kernel_refuses(&out) {
                control.push((message, received.clone(), out));
            }
        }
    }
    let out = run(&[
        &probe.display().to_string(),
        "inherited",
        &held_at.display().to_string(),
        "outside inherited",
    ])
    .unwrap();
    control.push(("outside inherited".into(), held.clone(), format!("{out:?}")));
    for (message, received, out) in &control {
        eventually(
            &format!("`{message}` outside the sandbox ({out})"),
            async || received.got(message),
        )
        .await;
    }
    assert!(control.len() >= 10, "the control reached too little");

    // Inside, the same server the probe runs in: refused every way, with
    // the descriptor the host leaked not passed on.
    let rt = runtime(
        vec![
            sandboxed(hostile(&[]), "boxed", ProcessSandbox::default()),
            sandboxed(
                hostile(&[]),
                "open",
                ProcessSandbox {
                    unix_sockets: true,
                    ..ProcessSandbox::default()
                },
            ),
        ],
        30_000,
    )
    .await;
    let inside = |server: &'static str, way: &str, path: &Path, message: &str| {
        let argv = json!([
            probe.display().to_string(),
            way,
            path.display().to_string(),
            message
        ]);
        let rt = &rt;
        async move {
            call(rt, &format!("{server}__run"), json!({ "argv": argv }))
                .await
                .unwrap()
        }
    };
    // Every answer that is not the expected refusal, and every message
    // that arrived: all of them in the failure, not the first.
    let mut escaped = Vec::new();
    for (way, kind, refusal) in ways() {
        for (path, _, _) in listeners.iter().filter(|(_, k, _)| *k == kind) {
            let message = format!("inside {way} {}", path.display());
            let out = inside("boxed", way, path, &message).await;
            let expected = match refusal {
                Some(refusal) => out.starts_with(refusal),
                None => out.starts_with("refused") || out.starts_with("sent\n"),
            };
            if !expected {
                escaped.push(format!("{way} to {}: {}", path.display(), out.trim()));
            }
        }
    }
    let out = inside("boxed", "inherited", &held_at, "inside inherited").await;
    if !out.starts_with("refused at inherited (none)") {
        escaped.push(format!("inherited: {}", out.trim()));
    }
    // A way that reaches, to show the checks below would see it: the
    // server configured with Unix sockets, to the one outside /tmp.
    let (home_stream, _, home_received) = &listeners[2];
    let out = inside("open", "socket-stream", home_stream, "granted").await;
    assert!(out.starts_with("sent"), "{out}");
    eventually("the granted way to arrive", async || {
        home_received.got("granted")
    })
    .await;
    // The filter still refuses io_uring with Unix sockets allowed.
    let out = inside("open", "io-uring-stream", home_stream, "granted io_uring").await;
    if !out.starts_with("refused at io_uring_setup: Permission denied") {
        escaped.push(format!(
            "io-uring-stream with Unix sockets allowed: {}",
            out.trim()
        ));
    }
    // Streams are read on their own threads: a moment for the last writes.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for (path, _, received) in listeners
        .iter()
        .chain([&(held_at.clone(), Kind::Stream, held)])
    {
        for message in received.all().into_iter().filter(|m| m.contains("inside")) {
            escaped.push(format!("{} received `{message}`", path.display()));
        }
    }
    assert!(
        escaped.is_empty(),
        "ways out of the sandbox:\n{}",
        escaped.join("\n")
    );

    // What runtimes need still works: asyncio's socketpair, name lookup
    // (netlink, for AI_ADDRCONFIG), loopback TCP.
    let script = "import asyncio, socket\n\
        asyncio.run(asyncio.sleep(0))\n\
        socket.getaddrinfo('localhost', 80, flags=socket.AI_ADDRCONFIG)\n\
        socket.create_server(('127.0.0.1', 0)).close()\n\
        print('runtimes work')";
    let argv = json!(["python3", "-c", script]);
    let out = call(&rt, "boxed__run", json!({ "argv": argv }))
        .await
        .unwrap();
    assert_eq!(out.trim(), "runtimes work");
}
