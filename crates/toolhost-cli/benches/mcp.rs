//! MCP server benchmarks, each with its baseline in the same run:
//!
//! - **stdio round trip**: one `tools/call` of `calculate` at a time through
//!   `host mcp`, against the floor: a bare JSON-RPC echo process in the same
//!   language as the client (this program, re-run with `--echo`), which
//!   parses each line and answers it.
//! - **start to first answer**: spawning `host mcp` (warm compile cache) until
//!   its `tools/list` answer, against spawning the echo until its first answer.
//! - **MCP gateway**: one `tools/call` at a time to an MCP server directly
//!   and through `host mcp --mcp NAME=…` (the client gateway), for the echo
//!   floor and for `server-everything`'s `echo`; the proxy floor is a relay
//!   in this program (`--relay COMMAND…`) that copies lines both ways.
//! - **HTTP calls/s**: `host serve --stateless` with 1, 8 and 64 keep-alive
//!   connections, each sending one JSON-RPC `tools/call` after another, with
//!   p50/p99 latency; the baseline is the same client against a bare HTTP
//!   echo server in this program (`--http-echo`).
//!
//! ```sh
//! cargo bench -p toolhost-cli --bench mcp -- [--calls N] [--runs N] [--seconds S]
//! cargo bench -p toolhost-cli --bench mcp -- --load HOST:PORT [--seconds S]   # an endpoint of yours
//! ```
//! Figures and the method are in `docs/benchmarks.md` (history: `docs/log.md`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--echo") {
        return echo();
    }
    if args.first().map(String::as_str) == Some("--http-echo") {
        return http_echo();
    }
    if args.first().map(String::as_str) == Some("--image") {
        return image_figures();
    }
    if args.first().map(String::as_str) == Some("--relay") {
        return relay(&args[1..]);
    }
    let flag = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    if let Some(i) = args.iter().position(|a| a == "--load") {
        // Load an endpoint started elsewhere (benches/scale-out.sh).
        let authority = args.get(i + 1).expect("--load HOST:PORT");
        let seconds = u64::try_from(flag("--seconds", 3)).unwrap_or(3);
        for connections in [1, 8, 64] {
            let (rate, lat) = http_load(authority, connections, seconds, None);
            println!(
                "{connections:>3} conn {rate:>9.0} calls/s  p50 {:>6.0} µs  p99 {:>6.0} µs",
                lat.p50(),
                lat.p99()
            );
        }
        return;
    }
    if args.iter().any(|a| a == "--gate") {
        let slower: Vec<String> = args
            .iter()
            .position(|a| a == "--slower")
            .and_then(|i| args.get(i + 1))
            .map(|v| v.split(',').map(str::to_owned).collect())
            .unwrap_or_default();
        return gate(flag("--rounds", 7), &slower);
    }
    let calls = flag("--calls", 2000);
    let runs = flag("--runs", 3);
    let seconds = u64::try_from(flag("--seconds", 3)).unwrap_or(3);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let me = std::env::current_exe().expect("this benchmark's path");

    println!("MCP over stdio: one call at a time ({calls} calls per run, {runs} runs)");
    println!("{:<28} {:>9} {:>9} {:>9}", "", "min µs", "p50 µs", "p99 µs");
    for run in 0..runs {
        let floor = round_trips(Command::new(&me).arg("--echo"), calls);
        let served = round_trips(&mut host(&["mcp"]), calls);
        print_row(&format!("echo floor (run {})", run + 1), &floor);
        print_row(&format!("host mcp, calculate (run {})", run + 1), &served);
        println!(
            "{:<28} {:>29}",
            "  host - floor, p50",
            format!("{:.1} µs", served.p50() - floor.p50())
        );
    }

    // The MCP client gateway: the same server called directly and through
    // `host mcp --mcp NAME=…` (lookup, validation, policy, hooks, limits, a
    // second stdio hop).
    let everything = root.join("target/tools/node/node_modules/.bin/mcp-server-everything");
    assert!(
        everything.is_file(),
        "{} is missing: cargo xtask test installs it",
        everything.display()
    );
    println!(
        "\nMCP gateway: a server called directly and through host mcp ({calls} calls per run)"
    );
    println!("{:<28} {:>9} {:>9} {:>9}", "", "min µs", "p50 µs", "p99 µs");
    let floor_flag = format!("floor={} --echo", me.display());
    let every_flag = format!("every={}", everything.display());
    let floor_call = json!({"name": "echo", "arguments": {}});
    let every_call = json!({"name": "echo", "arguments": {"message": "hi"}});
    for run in 0..runs {
        for (label, flag, call, prefixed) in [
            ("echo floor", &floor_flag, &floor_call, "floor__echo"),
            ("server-everything", &every_flag, &every_call, "every__echo"),
        ] {
            let mut direct = if prefixed == "floor__echo" {
                let mut echo = Command::new(&me);
                echo.arg("--echo");
                echo
            } else {
                Command::new(&everything)
            };
            let plain = round_trips_of(&mut direct, calls, call);
            // The least any stdio proxy adds: a relay that copies lines
            // both ways, in this language.
            let mut relayed = Command::new(&me);
            relayed
                .arg("--relay")
                .arg(direct.get_program())
                .args(direct.get_args());
            let relay = round_trips_of(&mut relayed, calls, call);
            let mut through = call.clone();
            through["name"] = json!(prefixed);
            let gateway = round_trips_of(&mut host(&["--mcp", flag, "mcp"]), calls, &through);
            print_row(&format!("{label} (run {})", run + 1), &plain);
            print_row("  through a line relay", &relay);
            print_row("  through host mcp", &gateway);
            println!(
                "{:<28} {:>29}",
                "  gateway - direct, p50",
                format!("{:.1} µs", gateway.p50() - plain.p50())
            );
            println!(
                "{:<28} {:>29}",
                "  gateway - relay, p50",
                format!("{:.1} µs", gateway.p50() - relay.p50())
            );
        }
    }

    println!("\nStart to first answer (warm compile cache), median of 10");
    for _ in 0..runs {
        let floor = median((0..10).map(|_| first_answer(Command::new(&me).arg("--echo"))));
        let served = median((0..10).map(|_| first_answer(&mut host(&["mcp"]))));
        println!(
            "  echo {:>7.2} ms   host mcp {:>7.2} ms",
            floor * 1e3,
            served * 1e3
        );
    }

    println!("\nMCP over HTTP (stateless, JSON responses), {seconds} s per row");
    println!(
        "{:<34} {:>11} {:>9} {:>9}",
        "", "calls/s", "p50 µs", "p99 µs"
    );
    for _ in 0..runs {
        let (echo, served) = http_servers(&me);
        for connections in [1, 8, 64] {
            let (rate, lat) = http_load(&echo.authority, connections, seconds, None);
            println!(
                "{:<34} {:>11.0} {:>9.0} {:>9.0}",
                format!("echo floor, {connections} conn"),
                rate,
                lat.p50(),
                lat.p99()
            );
            let (rate, lat) = http_load(&served.authority, connections, seconds, None);
            println!(
                "{:<34} {:>11.0} {:>9.0} {:>9.0}",
                format!("host serve, {connections} conn"),
                rate,
                lat.p50(),
                lat.p99()
            );
        }
    }
}

/// Latencies in µs, sorted.
struct Latencies(Vec<f64>);

impl Latencies {
    fn new(mut v: Vec<f64>) -> Latencies {
        v.sort_by(f64::total_cmp);
        Latencies(v)
    }
    fn at(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        // The nearest rank: q in [0, 1] picks an index within the list.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let i = ((self.0.len() - 1) as f64 * q).round() as usize;
        self.0[i.min(self.0.len() - 1)]
    }
    fn p50(&self) -> f64 {
        self.at(0.5)
    }
    fn p99(&self) -> f64 {
        self.at(0.99)
    }
}

fn print_row(label: &str, l: &Latencies) {
    println!(
        "{label:<28} {:>9.1} {:>9.1} {:>9.1}",
        l.at(0.0),
        l.p50(),
        l.p99()
    );
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Stdio2 {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Stdio2 {
    fn spawn(cmd: &mut Command) -> Stdio2 {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Stdio2 {
            child,
            stdin,
            stdout,
            line: String::new(),
        }
    }

    /// Sends `request` and reads lines until the answer with its id.
    fn ask(&mut self, id: u64, method: &str, params: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            self.line.clear();
            assert!(
                self.stdout.read_line(&mut self.line).unwrap() > 0,
                "the server closed its stdout"
            );
            let v: Value = serde_json::from_str(&self.line).unwrap();
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    fn initialize(&mut self) {
        let r = self.ask(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
        );
        assert!(r.get("result").is_some(), "{r}");
        writeln!(
            self.stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .unwrap();
    }
}

impl Drop for Stdio2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn round_trips(cmd: &mut Command, calls: usize) -> Latencies {
    let params = json!({"name": "calculate", "arguments": {"expression": "2*(3+4)"}});
    round_trips_of(cmd, calls, &params)
}

/// `calls` sequential `tools/call`s with `params` (after 200 to warm up).
fn round_trips_of(cmd: &mut Command, calls: usize, params: &Value) -> Latencies {
    let mut s = Stdio2::spawn(cmd);
    s.initialize();
    for i in 0..200 {
        let r = s.ask(1 + i, "tools/call", params.clone());
        assert!(r.get("result").is_some(), "{r}");
    }
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls as u64 {
        let params = distinct(params, i);
        let started = Instant::now();
        let r = s.ask(1000 + i, "tools/call", params);
        times.push(started.elapsed().as_secs_f64() * 1e6);
        assert!(r.get("result").is_some(), "{r}");
    }
    Latencies::new(times)
}

/// `host --plugins target/plugins … EXTRA`, with the defaults a user gets
/// (the result cache on: the benchmarks make every call's arguments differ,
/// `distinct`, so each runs the tool).
fn host(extra: &[&str]) -> Command {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let plugins = root.join("target/plugins");
    assert!(
        plugins.join("calc.wasm").is_file(),
        "build the plugins first: cargo xtask plugins"
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_host"));
    cmd.arg("--plugins")
        .arg(&plugins)
        .arg("--cache-dir")
        .arg(root.join("target/bench-cache"))
        .arg("--no-watch")
        .args(extra)
        .env_remove("RUST_LOG");
    cmd
}

/// The HTTP floor (this program, `--http-echo`) and `host serve --stateless`.
fn http_servers(me: &std::path::Path) -> (Served, Served) {
    let echo = Served::start(Command::new(me).arg("--http-echo"));
    let served = Served::start(&mut host(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--stateless",
    ]));
    (echo, served)
}

/// `params` of a `calculate` call made distinct by `i` (`i*0+…`, the same
/// result), so the result cache, on by default, never answers it; other
/// calls as they are.
fn distinct(params: &Value, i: u64) -> Value {
    let mut params = params.clone();
    if let Some(e) = params["arguments"]["expression"].as_str() {
        params["arguments"]["expression"] = json!(format!("{i}*0+{e}"));
    }
    params
}

/// `--gate`: the MCP ratios of the performance gate (`cargo xtask
/// bench-gate`), quick and interleaved: each round runs a batch of calls
/// on every stdio session (kept open) and a second of HTTP load on each
/// server; each ratio is the median over rounds of the ratio within a
/// round. Prints `FIGURE` and `RATIO` lines (`RATIO name value numerator
/// denominator`).
///
/// `slower` names figures to make 1.5× slower on purpose (a busy wait of
/// half of each call's time, or of the load's second), to check that the
/// gate fails their ratios.
fn gate(rounds: usize, slower: &[String]) {
    // A name of the runtime's gate benchmark is slowed there.
    let slowed = |name: &str| slower.iter().any(|s| s == name);
    // Half as long again as `took`, spent busy.
    let spend_half = |took: std::time::Duration| {
        let until = Instant::now() + took / 2;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    };
    let me = std::env::current_exe().expect("this benchmark's path");
    let floor_flag = format!("floor={} --echo", me.display());
    let calc = json!({"name": "calculate", "arguments": {"expression": "2*(3+4)"}});
    let echo_call = json!({"name": "echo", "arguments": {}});
    let gateway_call = json!({"name": "floor__echo", "arguments": {}});
    let mut sessions = [
        (
            "mcp_echo_floor",
            Stdio2::spawn(Command::new(&me).arg("--echo")),
            &echo_call,
        ),
        ("mcp_stdio_host", Stdio2::spawn(&mut host(&["mcp"])), &calc),
        (
            "mcp_gateway",
            Stdio2::spawn(&mut host(&["--mcp", &floor_flag, "mcp"])),
            &gateway_call,
        ),
        // The gateway's own floor: the same echo behind a process that
        // copies lines both ways, so both sides of `gateway_over_relay`
        // have three processes in a row and share the machine's load alike.
        (
            "mcp_relay_floor",
            Stdio2::spawn(Command::new(&me).arg("--relay").arg(&me).arg("--echo")),
            &echo_call,
        ),
    ];
    let mut id = 10u64;
    for (_, s, params) in &mut sessions {
        s.initialize();
        for _ in 0..200 {
            id += 1;
            let r = s.ask(id, "tools/call", distinct(params, id));
            assert!(r.get("result").is_some(), "{r}");
        }
    }
    let (echo, served) = http_servers(&me);
    let gateway = Served::start(&mut host(&[
        "--mcp",
        &floor_flag,
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--stateless",
    ]));
    let mut figures: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    let mut ratios: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for round in 0..rounds {
        let mut p50 = std::collections::BTreeMap::new();
        for k in 0..sessions.len() {
            let (name, s, params) = &mut sessions[(k + round) % sessions.len()];
            let mut times = Vec::with_capacity(300);
            for _ in 0..300 {
                id += 1;
                let params = distinct(params, id);
                let started = Instant::now();
                let r = s.ask(id, "tools/call", params);
                if slowed(name) {
                    spend_half(started.elapsed());
                }
                times.push(started.elapsed().as_secs_f64() * 1e6);
                assert!(r.get("result").is_some(), "{r}");
            }
            let v = Latencies::new(times).p50();
            p50.insert(*name, v);
            figures.entry(*name).or_default().push(v);
        }
        let (mut echo_rate, _) = http_load(&echo.authority, 8, 1, None);
        let (mut host_rate, _) = http_load(&served.authority, 8, 1, None);
        let (mut gateway_rate, _) = http_load(&gateway.authority, 8, 1, Some("floor__echo"));
        // Slower on purpose: the same calls in half as long again.
        for (name, rate) in [
            ("http_echo_8_connections", &mut echo_rate),
            ("http_host_8_connections", &mut host_rate),
            ("http_gateway_8_connections", &mut gateway_rate),
        ] {
            if slowed(name) {
                spend_half(Duration::from_secs(1));
                *rate /= 1.5;
            }
        }
        figures
            .entry("http_echo_8_connections")
            .or_default()
            .push(1e6 / echo_rate);
        figures
            .entry("http_host_8_connections")
            .or_default()
            .push(1e6 / host_rate);
        figures
            .entry("http_gateway_8_connections")
            .or_default()
            .push(1e6 / gateway_rate);
        ratios
            .entry("mcp_stdio_over_echo")
            .or_default()
            .push(p50["mcp_stdio_host"] / p50["mcp_echo_floor"]);
        ratios
            .entry("gateway_over_direct")
            .or_default()
            .push(p50["mcp_gateway"] / p50["mcp_echo_floor"]);
        ratios
            .entry("gateway_over_relay")
            .or_default()
            .push(p50["mcp_gateway"] / p50["mcp_relay_floor"]);
        ratios
            .entry("http_echo_over_host_8_connections")
            .or_default()
            .push(echo_rate / host_rate);
        // The gateway under load: an external server's call through
        // `host serve --mcp` (one stdio upstream shared by 8 connections)
        // against the host's own plugin call at the same load.
        ratios
            .entry("gateway_over_host_8_connections")
            .or_default()
            .push(host_rate / gateway_rate);
    }
    for (name, v) in figures {
        println!("FIGURE {name} {:.3}", median(v.into_iter()));
    }
    let sides = |name: &str| match name {
        "mcp_stdio_over_echo" => "mcp_stdio_host mcp_echo_floor",
        "gateway_over_direct" => "mcp_gateway mcp_echo_floor",
        "gateway_over_relay" => "mcp_gateway mcp_relay_floor",
        "gateway_over_host_8_connections" => "http_gateway_8_connections http_host_8_connections",
        _ => "http_host_8_connections http_echo_8_connections",
    };
    for (name, v) in ratios {
        println!("RATIO {name} {:.4} {}", median(v.into_iter()), sides(name));
    }
    image_figures();
}

/// The container image (`Dockerfile`, target `prebuilt`, this build's
/// `host` and the calc plugin on the Debian base image xtask makes): its
/// size, and how long a container takes from `podman run` to the first
/// `/healthz` that answers, against the same `host serve` started as a
/// process; warm compile caches both, three starts each after one to warm
/// them. FIGUREs `image_size_mb`, `container_ready`, `process_ready` (µs),
/// RATIO `container_over_process_ready`.
fn image_figures() {
    use toolhost_test_support::container::{Image, healthy, podman};
    if let Err(why) = toolhost_test_support::container::runs_containers() {
        println!("# image figures skipped: this machine cannot run containers ({why})");
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let plugins = tempfile::tempdir().expect("a plugins directory");
    for file in ["calc.wasm", "calc.toml"] {
        std::fs::copy(
            root.join("target/plugins").join(file),
            plugins.path().join(file),
        )
        .expect("the calc plugin");
    }
    let files: Vec<std::path::PathBuf> = ["calc.wasm", "calc.toml"]
        .iter()
        .map(|f| plugins.path().join(f))
        .collect();
    let image = Image::build(std::path::Path::new(env!("CARGO_BIN_EXE_host")), &files);
    let volume = format!("toolhost-bench-{}", std::process::id());
    let _ = podman().args(["volume", "create", &volume]).output();
    let cache = format!("{volume}:/cache");
    let container = || {
        let running = image.run(&["--read-only", "-e", "TOOLHOST_TOKEN=bench", "-v", &cache]);
        running.ready_after.as_secs_f64() * 1e6
    };
    let process = || {
        let port = toolhost_test_support::free_port();
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
            .arg("--plugins")
            .arg(plugins.path())
            .arg("--cache-dir")
            .arg(root.join("target/bench-cache"))
            .args(["--no-watch", "serve", "--stateless", "--listen"])
            .arg(format!("127.0.0.1:{port}"))
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("host serve starts");
        while !healthy(port) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "host serve did not answer"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let took = started.elapsed().as_secs_f64() * 1e6;
        let _ = child.kill();
        let _ = child.wait();
        took
    };
    let (_, _) = (container(), process());
    let mut ready: std::collections::BTreeMap<&str, Vec<f64>> = Default::default();
    for _ in 0..3 {
        ready
            .entry("container_ready")
            .or_default()
            .push(container());
        ready.entry("process_ready").or_default().push(process());
    }
    let _ = podman().args(["volume", "rm", "-f", &volume]).output();
    #[allow(clippy::cast_precision_loss)] // an image's size in MB
    let mb = image.size() as f64 / 1e6;
    println!("FIGURE image_size_mb {mb:.3}");
    let c = median(
        ready
            .remove("container_ready")
            .unwrap_or_default()
            .into_iter(),
    );
    let p = median(
        ready
            .remove("process_ready")
            .unwrap_or_default()
            .into_iter(),
    );
    println!("FIGURE container_ready {c:.3}");
    println!("FIGURE process_ready {p:.3}");
    println!(
        "RATIO container_over_process_ready {:.4} container_ready process_ready",
        c / p
    );
}

fn first_answer(cmd: &mut Command) -> f64 {
    let started = Instant::now();
    let mut s = Stdio2::spawn(cmd);
    s.initialize();
    let r = s.ask(1, "tools/list", json!({}));
    let took = started.elapsed().as_secs_f64();
    assert!(r.get("result").is_some(), "{r}");
    took
}

/// The floor: answers every JSON-RPC request line with an empty result.
fn echo() {
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if let Some(id) = v.get("id") {
            // Enough of a server for an MCP client to connect: it answers
            // `initialize` and lists one tool, `echo`; any other request
            // gets a tool result.
            let result = match v["method"].as_str() {
                Some("initialize") => json!({
                    "protocolVersion": v["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "echo-floor", "version": "0"}
                }),
                Some("tools/list") => json!({"tools": [
                    {"name": "echo", "description": "The floor.", "inputSchema": {"type": "object"}}
                ]}),
                _ => json!({"content": [{"type": "text", "text": "14"}], "isError": false}),
            };
            let answer = json!({"jsonrpc": "2.0", "id": id, "result": result});
            if writeln!(out, "{answer}")
                .and_then(|()| out.flush())
                .is_err()
            {
                return;
            }
        }
    }
}

/// The proxy floor: starts `command` and copies lines from stdin to its
/// stdin and from its stdout to stdout, one thread each way.
fn relay(command: &[String]) {
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the relayed server starts");
    let mut to_child = child.stdin.take().unwrap();
    let from_child = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        for line in from_child.lines() {
            let Ok(line) = line else { return };
            if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                return;
            }
        }
    });
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if writeln!(to_child, "{line}")
            .and_then(|()| to_child.flush())
            .is_err()
        {
            break;
        }
    }
    drop(to_child);
    let _ = child.wait();
}

/// A server process that prints where it listens on stderr.
struct Served {
    child: Child,
    authority: String,
}

impl Served {
    fn start(cmd: &mut Command) -> Served {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let authority = loop {
            let line = lines.next().expect("it says where it listens").unwrap();
            if let Some(rest) = line.strip_prefix("toolhost MCP server on http://") {
                break rest.trim_end_matches("/mcp").to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Served { child, authority }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"calculate","arguments":{"expression":"2*(3+4)"}}}"#;

/// `connections` keep-alive connections, each posting one call after
/// another for `seconds`: calls/s and latencies. The calls are
/// `calculate`'s, or with `tool` (the echo floor's tool through a
/// gateway) that tool's with an argument that differs on every call.
fn http_load(
    authority: &str,
    connections: usize,
    seconds: u64,
    tool: Option<&'static str>,
) -> (f64, Latencies) {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let (authority, stop) = (authority.to_owned(), stop.clone());
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(&authority).unwrap();
                stream.set_nodelay(true).unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut times = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Other arguments on every call (the result cache is on).
                    n += 1;
                    let call = match tool {
                        None => CALL.replace("2*(3+4)", &format!("{n}*0+2*(3+4)")),
                        Some(tool) => json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                            "params": {"name": tool, "arguments": {"n": n}}})
                        .to_string(),
                    };
                    let request = format!(
                        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
                         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
                         Content-Length: {}\r\n\r\n{call}",
                        call.len()
                    );
                    let t = Instant::now();
                    stream.write_all(request.as_bytes()).unwrap();
                    let body = read_response(&mut reader);
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                    assert!(body.contains("14"), "{body}");
                }
                times
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for w in workers {
        all.extend(w.join().unwrap());
    }
    let rate = all.len() as f64 / started.elapsed().as_secs_f64();
    (rate, Latencies::new(all))
}

/// Reads one HTTP/1.1 response with a Content-Length or chunked body.
fn read_response(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    let mut length = None;
    let mut chunked = false;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            length = v.trim().parse::<usize>().ok();
        }
        if l.starts_with("transfer-encoding:") && l.contains("chunked") {
            chunked = true;
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        let mut b = vec![0; length.unwrap_or(0)];
        reader.read_exact(&mut b).unwrap();
        body = b;
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The HTTP floor: answers every request with a fixed JSON-RPC result.
fn http_echo() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    eprintln!(
        "toolhost MCP server on http://{}/mcp",
        listener.local_addr().unwrap()
    );
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        std::thread::spawn(move || {
            let _ = stream.set_nodelay(true);
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            let body = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"14"}],"isError":false}}"#;
            let mut line = String::new();
            loop {
                let mut length = 0;
                loop {
                    line.clear();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let l = line.trim_end().to_ascii_lowercase();
                    if l.is_empty() {
                        break;
                    }
                    if let Some(v) = l.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut request = vec![0; length];
                if reader.read_exact(&mut request).is_err() {
                    return;
                }
                let _: Value = serde_json::from_slice(&request).unwrap_or(Value::Null);
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if writer.write_all(response.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
}
