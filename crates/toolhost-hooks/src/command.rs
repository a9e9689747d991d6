//! Command hooks: a program that reads the call as JSON on stdin and answers
//! on stdout and with its exit code, as Claude Code and Codex hooks do.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::hook::{
    AfterDecision, BeforeDecision, Hook, HookCall, HookError, HookFuture, HookOutcome,
    PermissionDecision,
};
use crate::stage::Stages;

/// How much of a command's stdout, and of its stderr, is read: 1 MiB each.
/// More stdout is an invalid reply; more stderr is cut.
pub const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;

/// The exit code with which a command blocks a call (before) or fails it
/// (after), with its stderr as the reason.
pub const BLOCK_EXIT_CODE: i32 = 2;

/// The program a [`CommandHook`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A program and its arguments, run directly (no shell).
    Argv(Vec<String>),
    /// A shell script, run with `sh -c SCRIPT`.
    Shell(String),
}

/// A hook that runs a program for each call it matches.
///
/// # Protocol
///
/// The program gets one JSON object on stdin, followed by a newline:
///
/// ```json
/// {"event": "before_execute", "tool": "read_file", "plugin": "fs", "plugin_version": "0.1.0",
///  "args": {"path": "README.md"}, "call_id": "call_1", "session_id": null, "agent": null}
/// ```
///
/// `event` is `before_execute`, `after_execute` or `permission_request`
/// (for a hook configured for the `permission` stage: the call needs
/// approval, and the object also has `"reasons": [...]`, why); after the call the object
/// also has `"outcome": {"ok": true, "output": "...", "details": {...} | null, "structured": {...} | null}`
/// or `"outcome": {"ok": false, "kind": "timeout", "message": "..."}`. A
/// call from an MCP client also has `"client"`: who called (`token:…` for
/// a static bearer token, `oauth:SUBJECT` for an OAuth caller). The keys
/// come in this order and the JSON is compact (serde_json's canonical form),
/// so simple scripts can match on it with `grep` or `sed`. The same facts are
/// in the environment: `TOOLHOST_HOOK_EVENT`, `TOOLHOST_HOOK_NAME`,
/// `TOOLHOST_TOOL`, `TOOLHOST_PLUGIN`, plus the host's own environment and the
/// hook's extra variables.
///
/// The program answers with its exit code and stdout:
///
/// | exit | stdout | before the tool | after it |
/// |---|---|---|---|
/// | 0 | empty | continue | keep |
/// | 0 | JSON object | `{"decision": "continue" \| "rewrite" \| "block" \| "ask", "args": {...}, "reason": "..."}` | `{"decision": "keep" \| "replace" \| "fail", "output": "...", "details": {...}, "structured": {...}, "message": "..."}` |
/// | 2 | ignored | block, with stderr as the reason | fail, with stderr as the message |
/// | other | ignored | hook failure | hook failure |
///
/// At a permission request: exit 0 with empty stdout passes, with
/// `{"decision": "allow" | "deny" | "pass", "reason": "..."}` decides; exit 2
/// denies with stderr as the reason.
///
/// `rewrite` needs `args`; `replace` changes `output`, `details` and/or
/// `structured` (each only when present; `null` removes the details or the
/// structured result). Unknown keys,
/// invalid JSON, a stdout larger than the limit, a program that cannot start,
/// a signal, or the entry's timeout are hook failures, which the chain's
/// [`FailurePolicy`](crate::FailurePolicy) turns into a block / fail (closed)
/// or a continue / keep (open). On a timeout the program and every process
/// of its process group are killed. A program that does not read its stdin
/// is fine.
///
/// ```no_run
/// use std::sync::Arc;
/// use toolhost_hooks::{CommandHook, HookChain, HookEntry, Matcher};
///
/// let audit = CommandHook::argv("audit", ["./examples/hooks/audit.sh"])
///     .env("TOOLHOST_AUDIT_LOG", "/tmp/audit.log");
/// let guard = CommandHook::shell("no-secrets", "./examples/hooks/block-secrets.sh");
/// let chain = HookChain::new(vec![
///     HookEntry::new(Arc::new(audit)),
///     HookEntry::new(Arc::new(guard)).matcher(Matcher::tools(["read_file"])?),
/// ]);
/// # Ok::<(), toolhost_hooks::MatcherError>(())
/// ```
#[derive(Debug, Clone)]
pub struct CommandHook {
    name: String,
    program: Program,
    current_dir: Option<PathBuf>,
    env: Vec<(String, String)>,
    max_output: usize,
}

impl CommandHook {
    /// A hook named `name` running `program`.
    pub fn new(name: impl Into<String>, program: Program) -> Self {
        Self {
            name: name.into(),
            program,
            current_dir: None,
            env: Vec::new(),
            max_output: DEFAULT_MAX_OUTPUT,
        }
    }

    /// A hook named `name` running `argv[0]` with the other arguments. An
    /// empty `argv` fails every call.
    pub fn argv<I, S>(name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::new(
            name,
            Program::Argv(argv.into_iter().map(Into::into).collect()),
        )
    }

    /// A hook named `name` running `sh -c script`.
    pub fn shell(name: impl Into<String>, script: impl Into<String>) -> Self {
        Self::new(name, Program::Shell(script.into()))
    }

    /// Runs the program in `dir` (by default, the host's working directory).
    /// A relative program path is resolved against it.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Sets an extra environment variable for the program.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Reads at most `bytes` of stdout and of stderr (default
    /// [`DEFAULT_MAX_OUTPUT`]).
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// The program it runs.
    pub fn program(&self) -> &Program {
        &self.program
    }

    async fn run(
        &self,
        call: &HookCall<'_>,
        event: &'static str,
        outcome: Option<&HookOutcome>,
        reasons: Option<&[String]>,
    ) -> Result<Finished, HookError> {
        let mut data = Payload::new(event, call, outcome);
        data.reasons = reasons;
        let mut payload = serde_json::to_vec(&data)
            .map_err(|e| HookError::msg(format!("cannot encode the call: {e}")))?;
        payload.push(b'\n');
        let mut env: Vec<(&str, &str)> = vec![
            ("TOOLHOST_HOOK_EVENT", event),
            ("TOOLHOST_HOOK_NAME", &self.name),
            ("TOOLHOST_TOOL", call.tool),
            ("TOOLHOST_PLUGIN", call.plugin),
        ];
        env.extend(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        run_program(
            &self.program,
            self.current_dir.as_deref(),
            &env,
            &payload,
            self.max_output,
        )
        .await
    }

    /// The JSON object on stdout, or `None` for an empty stdout.
    fn reply<'de, T: Deserialize<'de>>(&self, stdout: &'de [u8]) -> Result<Option<T>, HookError> {
        let text = std::str::from_utf8(stdout)
            .map_err(|_| HookError::InvalidReply("stdout is not UTF-8".to_owned()))?
            .trim();
        if text.is_empty() {
            return Ok(None);
        }
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| HookError::InvalidReply(format!("{e} in {}", excerpt(text))))
    }

    /// What the exit code says: 0 goes on to the reply (`None`), 2 refuses
    /// with stderr (or "`verb` by hook NAME") as the reason, anything else
    /// is a hook failure.
    fn refusal(&self, finished: &mut Finished, verb: &str) -> Result<Option<String>, HookError> {
        match finished.code {
            Some(0) => Ok(None),
            Some(BLOCK_EXIT_CODE) if finished.stderr.is_empty() => {
                Ok(Some(format!("{verb} by hook \"{}\"", self.name)))
            }
            Some(BLOCK_EXIT_CODE) => Ok(Some(std::mem::take(&mut finished.stderr))),
            code => Err(HookError::Exit {
                code,
                stderr: std::mem::take(&mut finished.stderr),
            }),
        }
    }

    fn log_stderr(&self, finished: &Finished) {
        if !finished.stderr.is_empty() {
            tracing::debug!(hook = %self.name, stderr = %finished.stderr, "command hook stderr");
        }
    }
}

impl Hook for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn stages(&self) -> Stages {
        Stages::ALL
    }

    fn permission<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        reasons: &'a [String],
    ) -> HookFuture<'a, PermissionDecision> {
        Box::pin(async move {
            let mut finished = self
                .run(call, "permission_request", None, Some(reasons))
                .await?;
            self.log_stderr(&finished);
            if let Some(reason) = self.refusal(&mut finished, "denied")? {
                return Ok(PermissionDecision::Deny { reason });
            }
            let Some(reply) = self.reply::<PermissionReply>(&finished.stdout)? else {
                return Ok(PermissionDecision::Pass);
            };
            Ok(reply.into_decision(&self.name))
        })
    }

    fn before<'a>(&'a self, call: &'a HookCall<'a>) -> HookFuture<'a, BeforeDecision> {
        Box::pin(async move {
            let mut finished = self.run(call, "before_execute", None, None).await?;
            self.log_stderr(&finished);
            if let Some(reason) = self.refusal(&mut finished, "blocked")? {
                return Ok(BeforeDecision::Block { reason });
            }
            let Some(reply) = self.reply::<BeforeReply>(&finished.stdout)? else {
                return Ok(BeforeDecision::Continue);
            };
            reply.into_decision(&self.name)
        })
    }

    fn after<'a>(
        &'a self,
        call: &'a HookCall<'a>,
        outcome: &'a HookOutcome,
    ) -> HookFuture<'a, AfterDecision> {
        Box::pin(async move {
            let mut finished = self.run(call, "after_execute", Some(outcome), None).await?;
            self.log_stderr(&finished);
            if let Some(message) = self.refusal(&mut finished, "failed")? {
                return Ok(AfterDecision::Fail { message });
            }
            let Some(reply) = self.reply::<AfterReply>(&finished.stdout)? else {
                return Ok(AfterDecision::Keep);
            };
            reply.into_decision(&self.name)
        })
    }
}

/// What a program run by [`run_program`] left behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Its exit code, or `None` when a signal ended it.
    pub code: Option<i32>,
    /// Its stdout (at most the limit given).
    pub stdout: Vec<u8>,
    /// Its stderr, lossily decoded, trimmed, cut at the limit given.
    pub stderr: String,
}

/// Runs `program` the way command hooks run: in its own process group
/// (killed whole, with SIGKILL, if the returned future is dropped, e.g. by a
/// timeout around it), in `current_dir` (default: the host's), with the
/// host's environment plus `env`, `input` written on its stdin (a program
/// that does not read it is fine), and at most `max_output` bytes read of
/// stdout (more is [`HookError::InvalidReply`]) and of stderr (more is cut).
/// Used by the tool-call hooks and the agent's request hooks.
///
/// ```no_run
/// use std::time::Duration;
/// use toolhost_hooks::{Program, run_program};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let program = Program::Argv(vec!["tr".into(), "a-z".into(), "A-Z".into()]);
/// let run = run_program(&program, None, &[("MY_VAR", "1")], b"hello", 64 * 1024);
/// let finished = tokio::time::timeout(Duration::from_secs(5), run).await??;
/// assert_eq!(finished.stdout, b"HELLO");
/// # Ok(()) }
/// ```
pub async fn run_program(
    program: &Program,
    current_dir: Option<&Path>,
    env: &[(&str, &str)],
    input: &[u8],
    max_output: usize,
) -> Result<Finished, HookError> {
    let mut command = match program {
        Program::Argv(argv) => {
            let Some((program, args)) = argv.split_first() else {
                return Err(HookError::msg("empty command"));
            };
            let mut command = Command::new(program);
            command.args(args);
            command
        }
        Program::Shell(script) => {
            let mut command = Command::new("sh");
            command.arg("-c").arg(script);
            command
        }
    };
    if let Some(dir) = current_dir {
        command.current_dir(dir);
    }
    command
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);

    let mut child = command.spawn().map_err(|source| HookError::Spawn {
        program: program_name(program).to_owned(),
        source,
    })?;
    // Declared after `child`, so dropped before it: if this future is
    // dropped (timeout) or fails, the whole process group goes.
    let mut group = GroupKiller::new(child.id());

    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let max = max_output;
    let write = async move {
        if let Some(mut stdin) = stdin {
            match stdin.write_all(input).await {
                // The program does not read its input (or not all of it).
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other?,
            }
        }
        Ok::<(), HookError>(())
    };
    let read_out = async move {
        let (bytes, complete) = read_bounded(stdout, max).await?;
        if !complete {
            return Err(HookError::InvalidReply(format!(
                "stdout is larger than {max} bytes"
            )));
        }
        Ok(bytes)
    };
    let read_err = async move { Ok::<_, HookError>(read_bounded(stderr, max).await?.0) };
    let ((), stdout, stderr) = tokio::try_join!(write, read_out, read_err)?;
    let status = child.wait().await?;
    group.disarm();

    let stderr = String::from_utf8_lossy(&stderr).trim().to_owned();
    Ok(Finished {
        code: status.code(),
        stdout,
        stderr,
    })
}

fn program_name(program: &Program) -> &str {
    match program {
        Program::Argv(argv) => argv.first().map_or("", String::as_str),
        Program::Shell(_) => "sh",
    }
}

/// Reads up to `max` bytes, then drains (and drops) the rest so that the
/// program never blocks on a full pipe. Returns whether it read everything.
async fn read_bounded<R: AsyncRead + Unpin>(
    reader: Option<R>,
    max: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let Some(reader) = reader else {
        return Ok((Vec::new(), true));
    };
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut limited = reader.take(limit);
    limited.read_to_end(&mut buf).await?;
    if buf.len() <= max {
        return Ok((buf, true));
    }
    buf.truncate(max);
    let mut rest = limited.into_inner();
    tokio::io::copy(&mut rest, &mut tokio::io::sink()).await?;
    Ok((buf, false))
}

/// A hook's reply, made safe to show ([`toolhost_text::line`]) and cut.
fn excerpt(text: &str) -> String {
    format!("`{}`", toolhost_text::line(text, 200))
}

/// Kills a child's process group (SIGKILL) when dropped, unless disarmed:
/// for a child started with `process_group(0)`, so everything it spawned
/// goes with it. Also used for MCP servers run over stdio.
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let mut command = tokio::process::Command::new("sleep");
/// command.arg("60").process_group(0).kill_on_drop(true);
/// let child = command.spawn()?;
/// let _group = toolhost_hooks::GroupKiller::new(child.id());
/// # Ok(()) }
/// ```
pub struct GroupKiller {
    #[cfg_attr(not(unix), allow(dead_code))]
    pid: Option<u32>,
}

impl GroupKiller {
    /// Guards the group of the child with process id `pid`.
    pub fn new(pid: Option<u32>) -> Self {
        Self { pid }
    }

    /// Leaves the group alone from now on (its leader was reaped).
    pub fn disarm(&mut self) {
        self.pid = None;
    }
}

impl Drop for GroupKiller {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.pid.and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            // SAFETY: kill(2) has no memory-safety preconditions. The child
            // was started in its own process group (`process_group(0)`), whose
            // id is its pid; it has not been reaped yet (we were not
            // disarmed), so the id still names that group.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }
}

/// The object written on the program's stdin.
#[derive(Serialize)]
struct Payload<'a> {
    event: &'static str,
    tool: &'a str,
    plugin: &'a str,
    plugin_version: &'a str,
    args: &'a Value,
    call_id: &'a str,
    session_id: Option<&'a str>,
    agent: Option<&'a str>,
    /// Who is calling (an MCP caller's identity), when a client is.
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<OutcomePayload<'a>>,
    /// At a permission request: why the call is asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasons: Option<&'a [String]>,
}

impl<'a> Payload<'a> {
    fn new(event: &'static str, call: &HookCall<'a>, outcome: Option<&'a HookOutcome>) -> Self {
        Self {
            event,
            tool: call.tool,
            plugin: call.plugin,
            plugin_version: call.plugin_version,
            args: call.args,
            call_id: call.call_id,
            session_id: call.session_id,
            agent: call.agent,
            client: call.client,
            reasons: None,
            outcome: outcome.map(|outcome| match outcome {
                HookOutcome::Ok {
                    output,
                    details,
                    structured,
                } => OutcomePayload::Ok {
                    ok: true,
                    output,
                    details: details.as_ref(),
                    structured: structured.as_ref(),
                },
                HookOutcome::Err { kind, message } => OutcomePayload::Err {
                    ok: false,
                    kind: kind.as_str(),
                    message,
                },
            }),
        }
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum OutcomePayload<'a> {
    Ok {
        ok: bool,
        output: &'a str,
        details: Option<&'a Value>,
        structured: Option<&'a Value>,
    },
    Err {
        ok: bool,
        kind: &'a str,
        message: &'a str,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum PermissionWord {
    Allow,
    Deny,
    Pass,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionReply {
    decision: PermissionWord,
    #[serde(default)]
    reason: Option<String>,
}

impl PermissionReply {
    fn into_decision(self, hook: &str) -> PermissionDecision {
        match self.decision {
            PermissionWord::Allow => PermissionDecision::Allow {
                reason: self.reason,
            },
            PermissionWord::Deny => PermissionDecision::Deny {
                reason: self
                    .reason
                    .unwrap_or_else(|| format!("denied by hook \"{hook}\"")),
            },
            PermissionWord::Pass => PermissionDecision::Pass,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum BeforeWord {
    Continue,
    Rewrite,
    Block,
    Ask,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BeforeReply {
    decision: BeforeWord,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    reason: Option<String>,
}

impl BeforeReply {
    fn into_decision(self, hook: &str) -> Result<BeforeDecision, HookError> {
        Ok(match self.decision {
            BeforeWord::Continue => BeforeDecision::Continue,
            BeforeWord::Rewrite => match self.args {
                Some(args) => BeforeDecision::Rewrite(args),
                None => {
                    return Err(HookError::InvalidReply(
                        "decision \"rewrite\" needs \"args\"".to_owned(),
                    ));
                }
            },
            BeforeWord::Block => BeforeDecision::Block {
                reason: self
                    .reason
                    .unwrap_or_else(|| format!("blocked by hook \"{hook}\"")),
            },
            BeforeWord::Ask => BeforeDecision::Ask {
                reason: self
                    .reason
                    .unwrap_or_else(|| format!("hook \"{hook}\" asks for approval")),
            },
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum AfterWord {
    Keep,
    Replace,
    Fail,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AfterReply {
    decision: AfterWord,
    #[serde(default)]
    output: Option<String>,
    /// `None`: absent; `Some(Value::Null)`: remove the details.
    #[serde(default, deserialize_with = "present")]
    details: Option<Value>,
    /// `None`: absent; `Some(Value::Null)`: remove the structured result.
    #[serde(default, deserialize_with = "present")]
    structured: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl AfterReply {
    fn into_decision(self, hook: &str) -> Result<AfterDecision, HookError> {
        Ok(match self.decision {
            AfterWord::Keep => AfterDecision::Keep,
            AfterWord::Replace => {
                if self.output.is_none() && self.details.is_none() && self.structured.is_none() {
                    return Err(HookError::InvalidReply(
                        "decision \"replace\" needs \"output\", \"details\" or \"structured\""
                            .to_owned(),
                    ));
                }
                let non_null = |v: Value| if v.is_null() { None } else { Some(v) };
                AfterDecision::Replace {
                    output: self.output,
                    details: self.details.map(non_null),
                    structured: self.structured.map(non_null),
                }
            }
            AfterWord::Fail => AfterDecision::Fail {
                message: self
                    .message
                    .unwrap_or_else(|| format!("failed by hook \"{hook}\"")),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_payload_has_the_documented_keys_in_order() {
        let args = json!({"path": "a.txt"});
        let call = HookCall::new("read_file", &args)
            .plugin("fs", "0.1.0")
            .call_id("c1")
            .agent(Some("coder"));
        let before = serde_json::to_string(&Payload::new("before_execute", &call, None)).unwrap();
        assert_eq!(
            before,
            r#"{"event":"before_execute","tool":"read_file","plugin":"fs","plugin_version":"0.1.0","args":{"path":"a.txt"},"call_id":"c1","session_id":null,"agent":"coder"}"#
        );
        let ok = HookOutcome::Ok {
            output: "hi".into(),
            details: Some(json!({"n": 1})),
            structured: None,
        };
        let after = serde_json::to_value(Payload::new("after_execute", &call, Some(&ok))).unwrap();
        assert_eq!(
            after["outcome"],
            json!({"ok": true, "output": "hi", "details": {"n": 1}, "structured": null})
        );
        let err = HookOutcome::err("timeout", "too slow");
        let after = serde_json::to_value(Payload::new("after_execute", &call, Some(&err))).unwrap();
        assert_eq!(
            after["outcome"],
            json!({"ok": false, "kind": "timeout", "message": "too slow"})
        );
    }

    #[test]
    fn replace_distinguishes_absent_and_null_details() {
        let absent: AfterReply =
            serde_json::from_str(r#"{"decision":"replace","output":"x"}"#).unwrap();
        assert_eq!(
            absent.into_decision("h").unwrap(),
            AfterDecision::Replace {
                output: Some("x".into()),
                details: None,
                structured: None,
            }
        );
        let null: AfterReply =
            serde_json::from_str(r#"{"decision":"replace","details":null}"#).unwrap();
        assert_eq!(
            null.into_decision("h").unwrap(),
            AfterDecision::Replace {
                output: None,
                details: Some(None),
                structured: None,
            }
        );
    }

    #[test]
    fn unknown_reply_keys_and_decisions_are_rejected() {
        assert!(
            serde_json::from_str::<BeforeReply>(r#"{"decision":"block","reson":"x"}"#).is_err()
        );
        assert!(serde_json::from_str::<BeforeReply>(r#"{"decision":"allow"}"#).is_err());
        assert!(serde_json::from_str::<AfterReply>(r#"{"decision":"continue"}"#).is_err());
    }

    #[test]
    fn excerpts_cut_on_a_char_boundary() {
        let long = "é".repeat(300);
        let e = excerpt(&long);
        assert!(e.ends_with("…`"));
        assert_eq!(e.chars().count(), 203);
        assert_eq!(excerpt("a\u{1b}[2J"), "`a\\u{1b}[2J`");
    }
}
