//! The last steps before each model request: the model options, the
//! system-prompt transform, request hooks (programs, or async Rust), and the
//! parameters transform — opencode's `chat.system.transform` and
//! `chat.params`.
//!
//! Before each request the loop's model exchange (`agent/exchange.rs`)
//! applies, in order:
//!
//! 1. [`AgentOptions::model_options`](crate::AgentOptions::model_options)
//!    (the merged layers: temperature, top-p, max tokens, stop, reasoning
//!    effort, `extra`);
//! 2. [`AgentOptions::system_transform`](crate::AgentOptions::system_transform)
//!    on the final system prompt;
//! 3. each [`RequestHook`] in order (e.g. a [`CommandRequestHook`] from the
//!    config file's `[[request-hooks]]`), which sees the system prompt and the
//!    parameters and may change both. A hook that fails, times out or
//!    answers something invalid is logged and skipped: the request goes out
//!    as it was before that hook;
//! 4. [`AgentOptions::params_transform`](crate::AgentOptions::params_transform),
//!    last, on the whole [`CompletionRequest`].
//!
//! ```
//! use toolhost_agent::AgentOptions;
//! use toolhost_agent::provider::options::ModelOptions;
//!
//! let options = AgentOptions::new("m")
//!     .model_options(ModelOptions { temperature: Some(0.2), ..Default::default() })
//!     .system_transform(|system| system.push_str("\n\nAnswer in French."))
//!     .params_transform(|request| {
//!         request.extra.insert("seed".into(), 42.into());
//!     });
//! # let _ = options;
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolhost_hooks::{Program, run_program};

use crate::provider::options::{ModelOptions, OptionsError};
use crate::provider::{BoxFuture, CompletionRequest, options::ReasoningEffort};

/// Rewrites the system prompt before each request.
pub type SystemTransform = Arc<dyn Fn(&mut String) + Send + Sync>;

/// Rewrites the request (parameters, or anything else) last before it is sent.
pub type ParamsTransform = Arc<dyn Fn(&mut CompletionRequest) + Send + Sync>;

/// Default time a command request hook may take: 5 s.
pub const DEFAULT_REQUEST_HOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// Default limit on a command request hook's stdout (and stderr): 64 KiB
/// beyond the system prompt it was given.
pub const DEFAULT_REQUEST_HOOK_MAX_OUTPUT: usize = 64 * 1024;

/// The parameters a request hook sees and may change (snake_case, as the
/// providers' APIs name them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RequestParams {
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    pub top_p: Option<f32>,
    /// Upper bound on output tokens.
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    pub stop: Option<Vec<String>>,
    /// Reasoning effort.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Extra request-body fields.
    pub extra: Map<String, Value>,
}

impl From<ModelOptions> for RequestParams {
    fn from(o: ModelOptions) -> Self {
        RequestParams {
            temperature: o.temperature,
            top_p: o.top_p,
            max_tokens: o.max_tokens,
            stop: o.stop,
            reasoning_effort: o.reasoning_effort,
            extra: o.extra,
        }
    }
}

impl From<RequestParams> for ModelOptions {
    fn from(p: RequestParams) -> Self {
        ModelOptions {
            temperature: p.temperature,
            top_p: p.top_p,
            max_tokens: p.max_tokens,
            stop: p.stop,
            reasoning_effort: p.reasoning_effort,
            extra: p.extra,
        }
    }
}

/// What a request hook gets and returns: `{"system": …, "params": {…}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestEdit {
    /// The system prompt.
    pub system: String,
    /// The parameters.
    pub params: RequestParams,
}

/// A command hook's answer: either key may be left out (kept as it was).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    params: Option<RequestParams>,
}

/// Why a request hook's change was not applied.
#[derive(Debug, thiserror::Error)]
pub enum RequestHookError {
    /// The program could not run, or failed.
    #[error("{0}")]
    Run(#[from] toolhost_hooks::HookError),
    /// It took longer than its timeout (it was killed, with its process group).
    #[error("timed out after {} ms", .0.as_millis())]
    Timeout(Duration),
    /// It exited with a status other than 0.
    #[error("exited with status {code:?}: {stderr}")]
    Exit {
        /// The exit code (`None`: a signal).
        code: Option<i32>,
        /// Its stderr (bounded).
        stderr: String,
    },
    /// Its answer is not the expected JSON.
    #[error("invalid reply: {0}")]
    InvalidReply(String),
    /// Its parameters are out of range or touch forbidden fields.
    #[error("invalid parameters: {0}")]
    InvalidParams(#[from] OptionsError),
    /// The system prompt it returned is too long.
    #[error("the system prompt grew by more than {max} bytes")]
    SystemTooLong {
        /// How much it may grow.
        max: usize,
    },
}

/// A hook run before each model request that may change the system prompt
/// and the parameters. Implement it for async Rust hooks; the config file's
/// `[[request-hooks]]` become [`CommandRequestHook`]s.
pub trait RequestHook: Send + Sync {
    /// Its name, for logs.
    fn name(&self) -> &str;
    /// Returns the changed request, or an error (logged; the request goes
    /// out unchanged).
    fn edit<'a>(
        &'a self,
        request: &'a RequestEdit,
    ) -> BoxFuture<'a, Result<RequestEdit, RequestHookError>>;
}

/// A program run before each model request.
///
/// # Protocol
///
/// Its stdin gets one compact JSON object and a newline:
///
/// ```json
/// {"system":"You are…","params":{"temperature":0.3,"top_p":null,"max_tokens":null,
///  "stop":null,"reasoning_effort":null,"extra":{}}}
/// ```
///
/// It answers on stdout with the same shape, changed: `params`, when
/// present, replaces every parameter (a key left out or `null` is unset, so
/// print back what you keep); `system`, when present, replaces the system
/// prompt. An empty stdout changes nothing. Exit 0 to apply the answer. Any
/// other exit, a timeout (default 5 s; the program's whole process group is
/// killed), a stdout over the limit (default 64 KiB beyond the size of the
/// system prompt), invalid JSON, unknown keys, out-of-range values or an
/// `extra` key the loop controls is logged as a warning and the request goes
/// out unchanged. The environment has `TOOLHOST_HOOK_EVENT=before_request`
/// and `TOOLHOST_HOOK_NAME`.
#[derive(Debug, Clone)]
pub struct CommandRequestHook {
    name: String,
    program: Program,
    timeout: Duration,
    max_output: usize,
    current_dir: Option<PathBuf>,
    env: Vec<(String, String)>,
}

impl CommandRequestHook {
    /// A hook named `name` running `argv[0]` with the other arguments.
    pub fn argv<I, S>(name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        CommandRequestHook {
            name: name.into(),
            program: Program::Argv(argv.into_iter().map(Into::into).collect()),
            timeout: DEFAULT_REQUEST_HOOK_TIMEOUT,
            max_output: DEFAULT_REQUEST_HOOK_MAX_OUTPUT,
            current_dir: None,
            env: Vec::new(),
        }
    }

    /// How long it may take (default [`DEFAULT_REQUEST_HOOK_TIMEOUT`]).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// Most bytes of stdout beyond the system prompt's size (default
    /// [`DEFAULT_REQUEST_HOOK_MAX_OUTPUT`]).
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// Runs the program in `dir`.
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Sets an extra environment variable for the program.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    async fn run(&self, request: &RequestEdit) -> Result<RequestEdit, RequestHookError> {
        let mut input = serde_json::to_vec(request)
            .map_err(|e| RequestHookError::InvalidReply(format!("cannot encode: {e}")))?;
        input.push(b'\n');
        // The reply carries the system prompt back: allow for it.
        let max = self.max_output.saturating_add(request.system.len());
        let mut env: Vec<(&str, &str)> = vec![
            ("TOOLHOST_HOOK_EVENT", "before_request"),
            ("TOOLHOST_HOOK_NAME", &self.name),
        ];
        env.extend(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let run = run_program(
            &self.program,
            self.current_dir.as_deref(),
            &env,
            &input,
            max,
        );
        let finished = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| RequestHookError::Timeout(self.timeout))??;
        if finished.code != Some(0) {
            return Err(RequestHookError::Exit {
                code: finished.code,
                stderr: finished.stderr,
            });
        }
        let text = std::str::from_utf8(&finished.stdout)
            .map_err(|_| RequestHookError::InvalidReply("stdout is not UTF-8".into()))?
            .trim();
        if text.is_empty() {
            return Ok(request.clone());
        }
        let reply: Reply = serde_json::from_str(text)
            .map_err(|e| RequestHookError::InvalidReply(e.to_string()))?;
        let system = reply.system.unwrap_or_else(|| request.system.clone());
        if system.len() > max {
            return Err(RequestHookError::SystemTooLong {
                max: self.max_output,
            });
        }
        Ok(RequestEdit {
            system,
            params: reply.params.unwrap_or_else(|| request.params.clone()),
        })
    }
}

impl RequestHook for CommandRequestHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn edit<'a>(
        &'a self,
        request: &'a RequestEdit,
    ) -> BoxFuture<'a, Result<RequestEdit, RequestHookError>> {
        Box::pin(self.run(request))
    }
}

/// One `[[request-hooks]]` entry of the host's configuration file.
///
/// ```
/// use toolhost_agent::request::RequestHookConfig;
///
/// let cfg: RequestHookConfig = serde_json::from_str(
///     r#"{"name": "cool-down", "command": ["./hooks/params.sh"], "timeout-ms": 2000}"#,
/// ).unwrap();
/// let hook = cfg.build(1).unwrap();
/// # let _ = hook;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RequestHookConfig {
    /// The name in logs (default: the program).
    #[serde(default)]
    pub name: Option<String>,
    /// A program and its arguments (no shell).
    pub command: Vec<String>,
    /// How long it may take, in milliseconds (default 5000).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Its working directory (default: the host's).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A `[[request-hooks]]` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestHookConfigError {
    /// `command = []`.
    #[error("request hook #{index}: the command is empty")]
    EmptyCommand {
        /// Its position, from 1.
        index: usize,
    },
    /// `timeout-ms = 0`.
    #[error("request hook #{index}: timeout-ms must be at least 1")]
    ZeroTimeout {
        /// Its position, from 1.
        index: usize,
    },
}

impl RequestHookConfig {
    /// The hook; `index` (from 1) names the entry in errors.
    pub fn build(&self, index: usize) -> Result<CommandRequestHook, RequestHookConfigError> {
        let Some(program) = self.command.first().filter(|p| !p.is_empty()) else {
            return Err(RequestHookConfigError::EmptyCommand { index });
        };
        let name = self.name.clone().unwrap_or_else(|| program.clone());
        let mut hook = CommandRequestHook::argv(name, self.command.clone());
        match self.timeout_ms {
            Some(0) => return Err(RequestHookConfigError::ZeroTimeout { index }),
            Some(ms) => hook = hook.timeout(Duration::from_millis(ms)),
            None => {}
        }
        if let Some(dir) = &self.cwd {
            hook = hook.current_dir(dir);
        }
        for (k, v) in &self.env {
            hook = hook.env(k, v);
        }
        Ok(hook)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_entries_are_checked() {
        let empty = RequestHookConfig::default();
        assert_eq!(
            empty.build(2).unwrap_err(),
            RequestHookConfigError::EmptyCommand { index: 2 }
        );
        let zero = RequestHookConfig {
            command: vec!["x".into()],
            timeout_ms: Some(0),
            ..Default::default()
        };
        assert!(zero.build(1).is_err());
        assert!(
            serde_json::from_value::<RequestHookConfig>(json!({"command": ["x"], "tools": []}))
                .is_err()
        );
    }
}
