//! Code mode from the command line (`--code-mode on`, `[code]` in the
//! config file): the program runner (`target/code/`, built by `cargo xtask
//! plugins`) loaded beside the example plugins and granted the tools. The
//! agent loop (`host run` against the fake model server), `host call run_code`
//! and MCP clients (the MCP Python SDK) of `host mcp` and `host serve` run a
//! program whose calls pass the gate.

use std::process::Output;

use serde_json::{Value, json};

use crate::support::*;

fn runner_dir() -> std::path::PathBuf {
    root().join("target/code")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A program that calls two plugins (`calc` and `text`).
const PROGRAM: &str = "const { value } = await tools.calculate({ expression: '6*7' });\n\
     const words = await tools.word_count({ text: 'one two three' });\n\
     return `${value} and ${words}`;";

/// What [`PROGRAM`] returns.
const ANSWER: &str = "42 and 3 words, 1 line, 13 characters";

#[test]
fn host_call_runs_a_program_only_with_code_mode_on_and_under_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let args = json!({ "code": PROGRAM }).to_string();
    let call = |extra: &[&str]| {
        host(&root().join("target/test-cache"))
            .arg("--plugins")
            .arg(plugins_dir())
            .arg("--plugins")
            .arg(runner_dir())
            .args(extra)
            .args(["call", "run_code", &args])
            .output()
            .expect("host runs")
    };
    let on = call(&["--code-mode", "on"]);
    assert!(on.status.success(), "{}", stderr(&on));
    assert_eq!(stdout(&on), format!("{ANSWER}\n"));

    // Off (the default): the runner is a plugin like any other, granted nothing.
    let off = call(&[]);
    assert!(!off.status.success(), "{}", stdout(&off));
    assert!(
        stderr(&off).contains("tools.calculate: not-granted"),
        "{}",
        stderr(&off)
    );

    // On, the program's calls are the caller's: the policy's deny holds.
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rules]]\ntool = \"word_count\"\ndecision = \"deny\"\nreason = \"no counting here\"\n",
    )
    .unwrap();
    let denied = call(&["--code-mode", "on", "--policy", policy.to_str().unwrap()]);
    assert!(!denied.status.success(), "{}", stdout(&denied));
    let err = stderr(&denied);
    assert!(err.contains("tools.word_count: denied"), "{err}");
    assert!(err.contains("no counting here"), "{err}");
    assert!(err.contains("line 2"), "the program's line: {err}");
}

/// The details of a program's result (for UIs, logs and `host run
/// --json`, which the eval reads) list the calls it made, in order, and
/// whether each gave a result.
#[test]
fn a_programs_details_list_the_calls_it_made() {
    let code = "const { value } = await tools.calculate({ expression: '6*7' });\n\
                try { await tools.no_such_tool({}); } catch (e) {}\n\
                try { await tools['é'.repeat(5000)]({}); } catch (e) {}\n\
                return value;";
    let o = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(plugins_dir())
        .arg("--plugins")
        .arg(runner_dir())
        .args(["--code-mode", "on", "call", "--details", "run_code"])
        .arg(json!({ "code": code }).to_string())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let (answer, details) = out.split_once('\n').unwrap();
    assert_eq!(answer, "42");
    let details: Value = serde_json::from_str(details).unwrap();
    assert_eq!(
        details,
        json!({
            "returned": 42,
            "calls": 3,
            "called": [
                {"tool": "calculate", "ok": true},
                {"tool": "no_such_tool", "ok": false},
                // A name is the program's to write: listed cut to 128
                // bytes, on a character's boundary.
                {"tool": "é".repeat(64), "ok": false},
            ]
        })
    );
}

#[test]
fn the_config_file_turns_code_mode_on_and_names_the_runner() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(
        &config,
        format!(
            "[code]\nmode = \"on\"\nrunner = {}\n",
            toml_string(&runner_dir())
        ),
    )
    .unwrap();
    let o = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(plugins_dir())
        .arg("--config")
        .arg(&config)
        .args([
            "call",
            "run_code",
            &json!({ "code": "return (await tools.calculate({ expression: '1+1' })).value;" })
                .to_string(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "2\n");
}

#[test]
fn code_mode_on_without_the_runner_says_where_to_get_it() {
    let o = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["--code-mode", "on", "tools"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("code mode is on"), "{err}");
    assert!(err.contains("[code] runner"), "{err}");
}

#[test]
fn an_mcp_client_runs_a_program_that_calls_two_plugins_through_host_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_dir().display().to_string();
    let runner = runner_dir().display().to_string();
    let host = crate::mcp::host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--plugins",
            &runner,
            "--code-mode",
            "on",
            "mcp",
        ],
    );
    let report = crate::mcp::client(
        "gateway",
        &[
            "--call",
            "code_api",
            "{}",
            "--call",
            "run_code",
            &json!({ "code": PROGRAM }).to_string(),
        ],
        &host,
    );
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"run_code") && tools.contains(&"code_api"),
        "{tools:?}"
    );
    let api = &report["calls"]["code_api"];
    assert_eq!(api["is_error"], false, "{api}");
    let declarations = api["text"].as_str().unwrap();
    assert!(
        declarations.contains("function calculate(args: {"),
        "{declarations}"
    );
    assert!(
        !declarations.contains("function run_code"),
        "{declarations}"
    );
    let ran = &report["calls"]["run_code"];
    assert_eq!(ran["is_error"], false, "{ran}");
    assert_eq!(ran["text"], ANSWER, "{ran}");
}

/// Issue #59: the official MCP Python SDK, in both revisions, runs a
/// program whose two calls the policy asks about, through `host mcp` with
/// code mode on (the runner granted every tool). Each call is a question of
/// its own: on 2026-07-28 the SDK answers one `input_required` per round
/// and retries, and one yes never lets the second call run; a no to the
/// second leaves it unrun.
#[test]
fn an_mcp_client_is_asked_about_each_call_of_a_program_and_one_yes_runs_one_call() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n\
         [[rules]]\ntool = \"word_count\"\ndecision = \"ask\"\n",
    )
    .unwrap();
    let (plugins, runner) = (
        plugins_dir().display().to_string(),
        runner_dir().display().to_string(),
    );
    let host = crate::mcp::host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--plugins",
            &runner,
            "--code-mode",
            "on",
            "--policy",
            policy.to_str().unwrap(),
            "mcp",
        ],
    );
    let program = json!({ "code": PROGRAM }).to_string();
    for mode in crate::mcp::MODES {
        let ask = |answers: &str| {
            crate::mcp::client(
                "ask",
                &[
                    "--mode", mode, "--answer", answers, "--call", "run_code", &program,
                ],
                &host,
            )
        };
        let yes = ask("accept");
        let asked: Vec<&str> = yes["asked"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(asked.len(), 2, "{mode}: one question per call: {yes}");
        assert!(asked[0].contains("`calculate`"), "{mode}: {asked:?}");
        assert!(asked[1].contains("`word_count`"), "{mode}: {asked:?}");
        assert_eq!(yes["result"]["text"], ANSWER, "{mode}: {yes}");

        let no = ask("accept,decline");
        assert_eq!(no["asked"].as_array().unwrap().len(), 2, "{mode}: {no}");
        assert_eq!(no["result"]["is_error"], true, "{mode}: {no}");
        let text = no["result"]["text"].as_str().unwrap();
        assert!(
            text.contains("word_count") && text.contains("declined"),
            "{mode}: {text}"
        );
    }
}

fn toml_string(path: &std::path::Path) -> String {
    toml::Value::String(path.display().to_string()).to_string()
}

#[test]
fn the_agent_loop_offers_the_program_tools_and_the_model_runs_one_program() {
    let program = json!({ "code": PROGRAM }).to_string();
    let server = ModelServer::start(move |n, _| match n {
        0 => openai_tool_call("c1", "run_code", &program),
        _ => openai_text("42, and three words."),
    });
    let runner = runner_dir().display().to_string();
    let (offered, _) = run_against(
        &server,
        &["--plugins", runner.as_str(), "--code-mode", "on"],
        "What is 6*7, and how many words are in 'one two three'?",
    );
    let bodies = server.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:#?}");
    assert!(
        offered.iter().any(|t| t == "run_code") && offered.iter().any(|t| t == "code_api"),
        "{offered:?}"
    );
    let result = crate::tool_search::last_tool_result(&bodies[1]);
    assert!(result.contains(ANSWER), "{result}");
}

#[test]
fn an_mcp_client_of_host_serve_runs_a_program() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugins_dir().display().to_string();
    let runner = runner_dir().display().to_string();
    let served = crate::mcp::serve(&crate::mcp::host_args(
        dir.path(),
        &[
            "--plugins",
            &plugins,
            "--plugins",
            &runner,
            "--code-mode",
            "on",
            "serve",
            "--listen",
            "127.0.0.1:0",
        ],
    ));
    let url = format!("{}/mcp", served.base);
    let report = crate::mcp::client(
        "gateway",
        &[
            "--url",
            &url,
            "--call",
            "run_code",
            &json!({ "code": PROGRAM }).to_string(),
        ],
        &[],
    );
    let ran = &report["calls"]["run_code"];
    assert_eq!(ran["is_error"], false, "{ran}");
    assert_eq!(ran["text"], ANSWER, "{ran}");
}

/// A program that calls an upstream MCP server's tool (`mcp-server-time`
/// behind the gateway) first, then two plugins, then an upstream tool the
/// policy denies, catching the denial.
const GATEWAY_PROGRAM: &str = "const now = await tools.time__get_current_time({ timezone: 'UTC' });\n\
     const { value } = await tools.calculate({ expression: '6*7' });\n\
     const words = await tools.word_count({ text: 'one two three' });\n\
     let denied = 'not denied';\n\
     try {\n\
       await tools.time__convert_time({ source_timezone: 'UTC', time: '12:00', target_timezone: 'UTC' });\n\
     } catch (e) {\n\
       denied = `${e.kind}: ${e.message}`;\n\
     }\n\
     return { timezone: now.timezone, value, words, denied };";

/// The end-to-end case of issue #48: an MCP client (the Python SDK) runs a
/// program through `host serve` (code mode on, `mcp-server-time` behind
/// it as `time`); the program's calls of the upstream tool and of two
/// plugins pass the gate (the policy's deny of an upstream tool holds
/// inside the program, with its reason), and the trace exported to a real
/// backend (Arize Phoenix) shows the MCP request, `execute_tool run_code`
/// under it, and each call of the program under that, with the call ids
/// `ID.1`, `ID.2`, ...
#[test]
fn an_mcp_clients_program_calls_an_upstream_server_under_the_policy_and_the_trace_shows_it() {
    let phoenix = Phoenix::start();
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[[rules]]\ntool = \"time__convert_time\"\ndecision = \"deny\"\n\
         reason = \"no time conversions for programs\"\n",
    )
    .unwrap();
    let plugins = plugins_dir().display().to_string();
    let runner = runner_dir().display().to_string();
    let upstream = format!("time={}", outside_tool("py/bin/mcp-server-time").display());
    let served = crate::mcp::serve_with_env(
        &crate::mcp::host_args(
            dir.path(),
            &[
                "--plugins",
                &plugins,
                "--plugins",
                &runner,
                "--code-mode",
                "on",
                "--mcp",
                &upstream,
                "--policy",
                &policy.display().to_string(),
                "serve",
                "--listen",
                "127.0.0.1:0",
            ],
        ),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.endpoint()),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "openinference.project.name=program".to_owned(),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ],
    );
    let url = format!("{}/mcp", served.base);
    let report = crate::mcp::client(
        "gateway",
        &[
            "--url",
            &url,
            "--call",
            "run_code",
            &json!({ "code": GATEWAY_PROGRAM }).to_string(),
        ],
        &[],
    );
    let tools = report["tools"].as_array().unwrap();
    assert!(
        tools.contains(&json!("time__get_current_time")) && tools.contains(&json!("run_code")),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&json!("time__convert_time")),
        "denied, so not listed: {tools:?}"
    );
    let ran = &report["calls"]["run_code"];
    assert_eq!(ran["is_error"], false, "{ran}");
    let result: Value = serde_json::from_str(ran["text"].as_str().unwrap()).unwrap();
    assert_eq!(result["timezone"], "UTC", "{result}");
    assert_eq!(result["value"], 42, "{result}");
    assert_eq!(
        result["words"], "3 words, 1 line, 13 characters",
        "{result}"
    );
    let denied = result["denied"].as_str().unwrap();
    assert!(denied.starts_with("denied: "), "{denied}");
    assert!(
        denied.contains("no time conversions for programs"),
        "the policy's reason: {denied}"
    );

    // The request's span, the program's call under it, and each of the
    // program's calls under that; the upstream call's own `tools/call`
    // (the gateway's client) under the upstream tool's call. By default a
    // call is one span: no step of the program's call (its `queue` for the
    // caller permit was exported until this test) shows.
    let all = phoenix.spans("program", 8);
    drop(served);
    let trace = all
        .iter()
        .find(|s| s.name == "tools/call run_code")
        .map(|s| s.trace_id.clone())
        .unwrap_or_default();
    let spans: Vec<_> = all.into_iter().filter(|s| s.trace_id == trace).collect();
    let shape = toolhost_test_support::phoenix::tree(&spans);
    assert_eq!(
        shape,
        "\
tools/call run_code
  execute_tool run_code
    execute_tool time__get_current_time
      tools/call get_current_time
    execute_tool calculate
    execute_tool word_count
    execute_tool time__convert_time
"
    );
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span `{name}` in\n{shape}"))
    };
    let request = named("tools/call run_code");
    let program = named("execute_tool run_code");
    assert_eq!(
        program.parent_id.as_deref(),
        Some(request.span_id.as_str()),
        "{shape}"
    );
    let id = program.attr("gen_ai.tool.call.id");
    assert!(!id.is_empty(), "{:?}", program.attributes);
    for (n, tool, outcome) in [
        (1, "time__get_current_time", "ok"),
        (2, "calculate", "ok"),
        (3, "word_count", "ok"),
        (4, "time__convert_time", "permission-denied"),
    ] {
        let call = named(&format!("execute_tool {tool}"));
        assert_eq!(
            call.parent_id.as_deref(),
            Some(program.span_id.as_str()),
            "{tool} under the program:\n{shape}"
        );
        assert_eq!(
            call.attr("gen_ai.tool.call.id"),
            format!("{id}.{n}"),
            "{tool}"
        );
        assert_eq!(
            call.attr("toolhost.outcome"),
            outcome,
            "{tool}: {:?}",
            call.attributes
        );
    }
}

/// `host run` of `prompt` against the fake model `server` with the example
/// plugins and `extra` flags: the names of the tools offered in the first
/// request, and the output (the run succeeded).
fn run_against(server: &ModelServer, extra: &[&str], prompt: &str) -> (Vec<String>, Output) {
    let base = format!("http://127.0.0.1:{}/v1", server.port);
    let o = host(&root().join("target/test-cache"))
        .env("TEST_MODEL_KEY", "test-key")
        .arg("--plugins")
        .arg(plugins_dir())
        .args(extra)
        .args([
            "--provider",
            "openai",
            "--base-url",
            &base,
            "--api-key-env",
            "TEST_MODEL_KEY",
            "--model",
            "test-model",
            "run",
            prompt,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let offered = crate::tool_search::tool_names(&server.bodies()[0]);
    (offered, o)
}

/// `host run` against a fake model that answers at once, with `extra`
/// flags: the names of the tools offered in the first request.
fn offered_in_a_run(extra: &[&str]) -> (Vec<String>, Output) {
    let server = ModelServer::start(|_, _| openai_text("Nothing to do."));
    run_against(&server, extra, "Hello.")
}

#[test]
fn code_mode_auto_is_on_with_the_runner_and_starts_without_it() {
    let runner = runner_dir().display().to_string();
    let with_runner = ["--plugins", runner.as_str(), "--code-mode", "auto"];

    // With the runner: its programs may call the tools (as with `on`)...
    let o = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(plugins_dir())
        .args(with_runner)
        .args(["call", "run_code", &json!({ "code": PROGRAM }).to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{ANSWER}\n"));

    // ...and the agent loop offers the program tools when the catalog is
    // past the tool search budget (here `max-tools = 3`), pinned so that
    // tool search does not hide them; within it, as without code mode.
    let (small, _) = offered_in_a_run(&with_runner);
    assert!(small.iter().any(|n| n == "calculate"), "{small:?}");
    assert!(
        !small.iter().any(|n| n == "run_code" || n == "code_api"),
        "a small catalog: {small:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("host.toml");
    std::fs::write(&config, "[tool-search]\nmax-tools = 3\n").unwrap();
    let config = config.display().to_string();
    let mut large_args = with_runner.to_vec();
    large_args.extend(["--config", config.as_str()]);
    let (large, _) = offered_in_a_run(&large_args);
    assert!(
        large.iter().any(|n| n == "run_code") && large.iter().any(|n| n == "code_api"),
        "{large:?}"
    );
    assert!(
        large.iter().any(|n| n == "search_tools") && !large.iter().any(|n| n == "calculate"),
        "tool search hides the rest: {large:?}"
    );

    // Without the runner: it starts, offers no program tools, and says why
    // once at info level (`-v`).
    let o = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(plugins_dir())
        .args(["--code-mode", "auto", "tools"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("run_code"), "{}", stdout(&o));
    assert!(stderr(&o).is_empty(), "silent without -v: {}", stderr(&o));
    let (none, o) = offered_in_a_run(&["--code-mode", "auto", "--config", &config, "-v"]);
    assert!(
        !none.iter().any(|n| n == "run_code" || n == "code_api"),
        "{none:?}"
    );
    let said = stderr(&o);
    assert_eq!(
        said.matches("code mode (auto) is off").count(),
        1,
        "said once: {said}"
    );
}
