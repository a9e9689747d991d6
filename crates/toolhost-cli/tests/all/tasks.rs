//! Calls as MCP tasks (the `io.modelcontextprotocol/tasks` extension)
//! through `host serve`: the `tasks` fixture plugin, `[tasks]` in the
//! config file, 2026-07-28 callers over raw HTTP and the MCP Inspector's
//! CLI (which drives tasks with the official `@modelcontextprotocol/ext-tasks`
//! client). The conformance suite's `tasks-*` scenarios run in
//! `conformance.rs`.

use std::process::Command;

use serde_json::{Value, json};

use crate::mcp::{mcp_headers, post, serve_configured};
use crate::support::*;

/// `host serve` of the `tasks` fixture with `tasks` as its `[tasks]`
/// table, the policy asking about `confirm_delete`, and two callers'
/// tokens (`alice-token`, `bob-token`).
fn served(dir: &std::path::Path, tasks: &str) -> crate::mcp::Served {
    served_with(dir, &format!("[tasks]\n{tasks}\n"))
}

/// [`served`] with `config` as the whole config file.
fn served_with(dir: &std::path::Path, config: &str) -> crate::mcp::Served {
    served_by(
        dir,
        "alice-token\nbob-token\n",
        config,
        "default = \"allow\"\n[[rules]]\ntool = \"confirm_delete\"\ndecision = \"ask\"\n",
        &[],
    )
}

/// `host serve` of the `tasks` fixture behind the token file `tokens`,
/// with `config`, `policy` and more `flags` of `serve`.
fn served_by(
    dir: &std::path::Path,
    tokens: &str,
    config: &str,
    policy: &str,
    flags: &[&str],
) -> crate::mcp::Served {
    copy_plugin(&fixtures_dir(), "tasks", &dir.join("plugins"));
    let file = dir.join("tokens");
    std::fs::write(&file, tokens).unwrap();
    let file = file.display().to_string();
    let mut all = vec!["--token-file", file.as_str()];
    all.extend_from_slice(flags);
    serve_configured(dir, config, policy, &all)
}

/// A 2026-07-28 request of `token`'s caller, which declared the tasks
/// extension; the JSON-RPC response.
pub(crate) fn modern(base: &str, token: &str, method: &str, params: Value) -> Value {
    modern_declaring(base, token, method, params, true)
}

/// [`modern`] from a caller that declared the tasks extension or not.
fn modern_declaring(base: &str, token: &str, method: &str, params: Value, tasks: bool) -> Value {
    try_modern(base, token, method, params, tasks).unwrap_or_else(|why| panic!("{method}: {why}"))
}

/// A 2026-07-28 request of `token`'s caller, which declared the tasks
/// extension or not: the JSON-RPC response, or why there is none (an HTTP
/// status other than 200, as a balancer's while a replica dies, or no
/// message with the request's id).
pub(crate) fn try_modern(
    base: &str,
    token: &str,
    method: &str,
    mut params: Value,
    tasks: bool,
) -> Result<Value, String> {
    let extensions = if tasks {
        json!({"io.modelcontextprotocol/tasks": {}})
    } else {
        json!({})
    };
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": extensions,
        },
    });
    let mut headers = mcp_headers(Some(token));
    headers.push(("MCP-Protocol-Version", "2026-07-28".to_owned()));
    headers.push(("Mcp-Method", method.to_owned()));
    if let Some(name) = params["name"]
        .as_str()
        .or(params["taskId"].as_str())
        .or(params["uri"].as_str())
    {
        headers.push(("Mcp-Name", name.to_owned()));
    }
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let (status, text) = post(base, &headers, &body.to_string());
    if status != 200 {
        return Err(format!("HTTP {status}: {text}"));
    }
    // JSON, or server-sent events: the message with the id.
    text.match_indices('{')
        .filter_map(|(at, _)| {
            serde_json::Deserializer::from_str(&text[at..])
                .into_iter::<Value>()
                .next()
                .and_then(Result::ok)
        })
        .find(|v| v["id"] == 7)
        .ok_or_else(|| format!("no answer in:\n{text}"))
}

/// Starts `tool` as a task of `token`'s; the task's id.
pub(crate) fn start(base: &str, token: &str, tool: &str, args: Value) -> String {
    let created = modern(
        base,
        token,
        "tools/call",
        json!({"name": tool, "arguments": args}),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}"))
        .to_owned()
}

/// Polls the task `id` until its status is `status` (or it ends); the
/// last `tasks/get` result.
pub(crate) fn until(base: &str, token: &str, id: &str, status: &str) -> Value {
    let mut last = Value::Null;
    for _ in 0..300 {
        last = modern(base, token, "tasks/get", json!({"taskId": id}))["result"].clone();
        let now = last["status"].as_str().unwrap_or_default();
        if now == status || ["completed", "failed", "cancelled"].contains(&now) {
            return last;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("task {id} never reached {status}: {last}")
}

#[test]
fn a_task_stops_at_the_policys_ask_and_only_its_callers_answer_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let served = served(dir.path(), "tools = [\"confirm_delete\"]");
    let base = &served.base;

    let id = start(
        base,
        "alice-token",
        "confirm_delete",
        json!({"filename": "a.txt"}),
    );
    let waiting = until(base, "alice-token", &id, "input_required");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let requests = waiting["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("confirm_delete") && message.contains("a.txt"),
        "{message}"
    );

    // Another caller neither sees the task nor answers it.
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        (
            "tasks/update",
            json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approve": true}}}}),
        ),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        let other = modern(base, "bob-token", method, params);
        assert_eq!(other["error"]["code"], -32602, "{method}: {other}");
    }
    let still = modern(base, "alice-token", "tasks/get", json!({"taskId": id}));
    assert_eq!(still["result"]["status"], "input_required", "{still}");

    let ack = modern(
        base,
        "alice-token",
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"approve": true}}}}),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = until(base, "alice-token", &id, "completed");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "deleted a.txt",
        "{done}"
    );

    // A no (here: an answer that is not the form's yes) leaves the call unrun.
    let id = start(
        base,
        "alice-token",
        "confirm_delete",
        json!({"filename": "b.txt"}),
    );
    let waiting = until(base, "alice-token", &id, "input_required");
    let key = waiting["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    modern(
        base,
        "alice-token",
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
    );
    let done = until(base, "alice-token", &id, "completed");
    assert_eq!(done["result"]["isError"], true, "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("permission denied"), "{text}");
}

#[test]
fn a_cancelled_task_ends_cancelled_and_a_caller_past_its_bound_is_refused_alone() {
    let dir = tempfile::tempdir().unwrap();
    let served = served(
        dir.path(),
        "tools = [\"slow_compute\"]\nmax-open-per-caller = 2",
    );
    let base = &served.base;
    let long = json!({"seconds": 600});
    let first = start(base, "alice-token", "slow_compute", long.clone());
    start(base, "alice-token", "slow_compute", long.clone());
    let refused = modern(
        base,
        "alice-token",
        "tools/call",
        json!({"name": "slow_compute", "arguments": long}),
    );
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("too many unfinished tasks"), "{refused}");
    // Another caller's bound is its own.
    start(base, "bob-token", "slow_compute", long.clone());

    let ack = modern(
        base,
        "alice-token",
        "tasks/cancel",
        json!({"taskId": first}),
    );
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let over = until(base, "alice-token", &first, "cancelled");
    assert_eq!(over["status"], "cancelled", "{over}");
    assert!(over.get("result").is_none(), "{over}");
    // Its place is free again.
    start(base, "alice-token", "slow_compute", long);
}

/// The MCP Inspector's CLI (`@modelcontextprotocol/inspector`, which runs
/// tasks with the official `@modelcontextprotocol/ext-tasks` client)
/// calls tools that run only as tasks: on 2026-07-28 it gets each result
/// once the task is over; on 2025-11-25 (where the extension is not
/// negotiated) it is told the tool needs it.
#[test]
fn the_mcp_inspector_runs_a_tool_as_a_task_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let served = served(dir.path(), "required = [\"slow_compute\", \"failing_job\"]");
    let url = format!("{}/mcp", served.base);
    let inspector = outside_tool("node/node_modules/.bin/mcp-inspector");
    let inspect = |era: &str, tool: &str, args: &[&str]| {
        let out = Command::new(&inspector)
            .args(["--cli", "--server-url", &url, "--transport", "http"])
            .args(["--header", "Authorization: Bearer alice-token"])
            .args(["--protocol-era", era, "--method", "tools/call"])
            .args(["--tool-name", tool])
            .args(args)
            .output()
            .expect("the Inspector runs");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let out = inspect("modern", "slow_compute", &["--tool-arg", "seconds=1"]);
    assert!(out.contains("computed after 1 s"), "{out}");
    let out = inspect("modern", "failing_job", &[]);
    assert!(out.contains("the job failed, as it always does"), "{out}");
    assert!(out.contains("\"isError\": true"), "{out}");
    let out = inspect("legacy", "failing_job", &[]);
    assert!(out.contains("Missing required client capability"), "{out}");
}

/// An upstream server's question (the conformance suite's 2026-07-28
/// reference server, whose tool answers `input_required` asking a name)
/// during a call that toolhost runs as a task is the task's
/// `input_required` state, in the server's own form; the caller's answer
/// goes to that server, whose greeting is the task's result.
#[test]
fn an_upstream_servers_question_during_a_task_is_the_tasks_input() {
    let dir = tempfile::tempdir().unwrap();
    let reference = conformance::everything_next();
    let served = served_with(
        dir.path(),
        &format!(
            "[[mcp-servers]]\nname = \"everything\"\nurl = \"{}\"\nprefix = \"\"\n\
             [tasks]\ntools = [\"test_input_required_result_elicitation\"]\n",
            reference.url
        ),
    );
    let base = &served.base;
    let id = start(
        base,
        "alice-token",
        "test_input_required_result_elicitation",
        json!({}),
    );
    let waiting = until(base, "alice-token", &id, "input_required");
    assert_eq!(waiting["status"], "input_required", "{waiting}");
    let requests = waiting["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{waiting}");
    let (key, request) = requests.iter().next().unwrap();
    assert_eq!(
        request["params"]["message"], "What is your name?",
        "{request}"
    );
    assert!(
        request["params"]["requestedSchema"]["properties"]["name"].is_object(),
        "{request}"
    );
    modern(
        base,
        "alice-token",
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}}}),
    );
    let done = until(base, "alice-token", &id, "completed");
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ada!",
        "{done}"
    );
}

/// With asks going to the operator, a task's question waits in the
/// console's approvals queue (the task stays `working`, no input for the
/// caller to give), and the operator's answer there resumes it. The
/// console lists the tasks, and the operator stops one there.
#[test]
fn a_tasks_question_for_the_operator_waits_in_the_console_and_its_answer_resumes_the_task() {
    use crate::console::{request, sign_in};
    let dir = tempfile::tempdir().unwrap();
    let served = served_by(
        dir.path(),
        "alice-token ask=operator\nop-secret role=operator\n",
        "[tasks]\ntools = [\"confirm_delete\", \"slow_compute\"]\n",
        "default = \"allow\"\n[[rules]]\ntool = \"confirm_delete\"\ndecision = \"ask\"\n",
        &["--console"],
    );
    let base = &served.base;
    let id = start(
        base,
        "alice-token",
        "confirm_delete",
        json!({"filename": "c.txt"}),
    );
    let (session, csrf) = sign_in(base);
    // The question reaches the queue; the task meanwhile works on.
    let mut queue = String::new();
    let mut waiting = None;
    for _ in 0..300 {
        queue = request(
            base,
            "GET",
            "/console/part/queue",
            &[("Cookie", &session)],
            "",
        )
        .2;
        waiting = queue
            .split("data-id=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(str::to_owned);
        if waiting.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let waiting = waiting.unwrap_or_else(|| panic!("no call waits: {queue}"));
    assert!(
        queue.contains("confirm_delete") && queue.contains("c.txt"),
        "{queue}"
    );
    let now = modern(base, "alice-token", "tasks/get", json!({"taskId": id}));
    assert_eq!(now["result"]["status"], "working", "{now}");
    assert!(now["result"].get("inputRequests").is_none(), "{now}");
    let (_, _, listed) = request(
        base,
        "GET",
        "/console/part/tasks",
        &[("Cookie", &session)],
        "",
    );
    assert!(
        listed.contains(&format!("data-id=\"{id}\" data-state=\"working\"")),
        "{listed}"
    );
    let (status, _, body) = request(
        base,
        "POST",
        &format!("/console/queue/{waiting}"),
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "allow",
    );
    assert_eq!(status, 204, "{body}");
    let done = until(base, "alice-token", &id, "completed");
    assert_eq!(
        done["result"]["content"][0]["text"], "deleted c.txt",
        "{done}"
    );

    // A long task stopped from the console ends cancelled.
    let long = start(base, "alice-token", "slow_compute", json!({"seconds": 600}));
    let stop = format!("/console/tasks/{long}/cancel");
    let (status, _, body) = request(base, "POST", &stop, &[("Cookie", &session)], "");
    assert_eq!(status, 403, "a change needs the CSRF token: {body}");
    let (status, _, body) = request(
        base,
        "POST",
        &stop,
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "",
    );
    assert_eq!(status, 204, "{body}");
    let over = until(base, "alice-token", &long, "cancelled");
    assert_eq!(over["status"], "cancelled", "{over}");
    let (status, _, _) = request(
        base,
        "POST",
        &stop,
        &[("Cookie", &session), ("X-CSRF-Token", &csrf)],
        "",
    );
    assert_eq!(status, 404, "an ended task is not stopped again");
}

/// A tool the policy denies is not there for the caller, whatever
/// `[tasks]` says of it: no task is made of a call of it, and a caller
/// that cannot take tasks is not told that it needs them.
#[test]
fn a_tool_the_policy_denies_is_not_found_whatever_its_task_settings_say() {
    let dir = tempfile::tempdir().unwrap();
    let served = served_by(
        dir.path(),
        "alice-token\n",
        "[tasks]\ntools = [\"slow_compute\"]\nrequired = [\"failing_job\"]\n",
        "default = \"allow\"\n[[rules]]\ntool = \"slow_compute\"\ndecision = \"deny\"\n\
         [[rules]]\ntool = \"failing_job\"\ndecision = \"deny\"\n",
        &[],
    );
    let call = |tool: &str, tasks: bool| {
        modern_declaring(
            &served.base,
            "alice-token",
            "tools/call",
            json!({"name": tool, "arguments": {"seconds": 0}}),
            tasks,
        )
    };
    for (tool, tasks) in [
        ("slow_compute", true),
        ("failing_job", false),
        ("failing_job", true),
    ] {
        let answer = call(tool, tasks);
        assert_ne!(answer["result"]["resultType"], "task", "{tool}: {answer}");
        assert_ne!(answer["error"]["code"], -32021, "{tool}: {answer}");
        assert!(
            answer["error"]["code"] == -32602 || answer["result"]["isError"] == true,
            "{tool}: {answer}"
        );
    }
    // The same caller still gets a task of a tool it may call.
    let allowed = modern(
        &served.base,
        "alice-token",
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
    );
    assert_eq!(
        allowed["result"]["content"][0]["text"], "Hello, x!",
        "{allowed}"
    );
}

/// A gateway in front of a server that runs a tool as a task (here
/// toolhost itself, with `failing_job` a task only and `slow_compute` a
/// task for whoever can take one) follows that task to its end: its
/// caller, which takes no tasks itself, gets the tool's result, and the
/// gateway's policy and audit saw one call.
#[test]
fn a_gateway_follows_an_upstream_servers_task_to_its_result() {
    let upstream_dir = tempfile::tempdir().unwrap();
    copy_plugin(
        &fixtures_dir(),
        "tasks",
        &upstream_dir.path().join("plugins"),
    );
    let upstream = serve_configured(
        upstream_dir.path(),
        "[tasks]\ntools = [\"slow_compute\"]\nrequired = [\"failing_job\"]\n",
        "default = \"allow\"\n",
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "alice-token\n").unwrap();
    let gateway = serve_configured(
        dir.path(),
        &format!(
            "[[mcp-servers]]\nname = \"up\"\nurl = \"{}/mcp\"\nprefix = \"\"\n",
            upstream.base
        ),
        "default = \"allow\"\n",
        &["--token-file", &tokens.display().to_string()],
    );
    let call = |tool: &str, args: Value| {
        modern_declaring(
            &gateway.base,
            "alice-token",
            "tools/call",
            json!({"name": tool, "arguments": args}),
            false,
        )
    };
    let done = call("slow_compute", json!({"seconds": 1}));
    assert_eq!(
        done["result"]["content"][0]["text"], "computed after 1 s",
        "{done}"
    );
    let failed = call("failing_job", json!({}));
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    let text = failed["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("the job failed, as it always does"),
        "{failed}"
    );
}
