//! The call context and the host functions (log, config, progress).

use std::collections::BTreeMap;
use std::fmt;

/// Severity of a log message sent to the host with [`log`] or
/// [`Context::log`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// Very detailed tracing.
    Trace,
    /// Debugging information.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected that the tool could work around.
    Warn,
    /// Something failed.
    Error,
}

impl fmt::Display for LogLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        })
    }
}

/// Who is calling, plus access to the host's log, configuration and
/// progress reporting.
///
/// Every tool function receives one. In native tests, build one with
/// [`Context::default`] or [`Context::new`] and, if the tool reads
/// configuration, [`Context::with_config`].
///
/// ```
/// use toolhost_sdk::{Context, LogLevel};
///
/// let cx = Context::new("call-1").with_config("greeting", "Hi");
/// assert_eq!(cx.call_id(), "call-1");
/// assert_eq!(cx.config("greeting").as_deref(), Some("Hi"));
/// cx.log(LogLevel::Info, "hello"); // stderr off the wasm target
/// cx.progress("halfway", 0.5);
/// ```
#[derive(Debug, Clone)]
pub struct Context {
    call_id: String,
    session_id: Option<String>,
    agent: Option<String>,
    /// Configuration values that replace the host's (for tests).
    config_override: Option<BTreeMap<String, String>>,
}

impl Default for Context {
    /// A context for tests: call id `"test"`, no session, no agent.
    fn default() -> Self {
        Context::new("test")
    }
}

impl Context {
    /// A context with this call id and no session or agent.
    pub fn new(call_id: impl Into<String>) -> Self {
        Context::from_parts(call_id.into(), None, None)
    }

    pub(crate) fn from_parts(
        call_id: String,
        session_id: Option<String>,
        agent: Option<String>,
    ) -> Self {
        Context {
            call_id,
            session_id,
            agent,
            config_override: None,
        }
    }

    /// Sets the session id (for tests).
    pub fn with_session(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(session_id.into());
        self
    }

    /// Sets the agent profile (for tests).
    pub fn with_agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// Gives this context its own configuration value (for tests). Once a
    /// context has any such value, [`Context::config`] and
    /// [`Context::config_keys`] read only these and never ask the host.
    pub fn with_config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.config_override
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }

    /// Unique id of this call (the model's tool-call id when there is one).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The session or conversation the call belongs to, if any.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The agent profile making the call, if any.
    pub fn agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }

    /// Writes a message to the host's log (see [`log`]).
    pub fn log(&self, level: LogLevel, message: impl AsRef<str>) {
        log(level, message);
    }

    /// Reads a configuration value (see [`config`]).
    pub fn config(&self, key: &str) -> Option<String> {
        match &self.config_override {
            Some(map) => map.get(key).cloned(),
            None => config(key),
        }
    }

    /// Lists the configuration keys that have a value (see [`config_keys`]).
    pub fn config_keys(&self) -> Vec<String> {
        match &self.config_override {
            Some(map) => map.keys().cloned().collect(),
            None => config_keys(),
        }
    }

    /// Reports progress to the user interface (see [`progress`]).
    pub fn progress(&self, message: impl AsRef<str>, fraction: impl Into<Option<f32>>) {
        progress(message, fraction);
    }
}

/// Writes a message to the host's log, tagged with the plugin's name.
///
/// The host may drop messages past a per-call limit. Off the wasm target the
/// message goes to stderr.
pub fn log(level: LogLevel, message: impl AsRef<str>) {
    imp::log(level, message.as_ref());
}

/// Reads one of the plugin's configuration values: the default from the
/// `[config]` table of the plugin's manifest, overridden by the host's
/// configuration. `None` for an unknown key (and always off the wasm target).
pub fn config(key: &str) -> Option<String> {
    imp::config(key)
}

/// Lists every configuration key the plugin has a value for (empty off the
/// wasm target).
pub fn config_keys() -> Vec<String> {
    imp::config_keys()
}

/// Reports the progress of a long call to the user interface (never to the
/// model). `fraction`, when known, is between 0.0 and 1.0 (values outside are
/// clamped, NaN counts as unknown). Pass a plain `f32` or `None`.
///
/// Does nothing off the wasm target.
pub fn progress(message: impl AsRef<str>, fraction: impl Into<Option<f32>>) {
    let fraction = fraction
        .into()
        .filter(|f| !f.is_nan())
        .map(|f| f.clamp(0.0, 1.0));
    imp::progress(message.as_ref(), fraction);
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::LogLevel;
    use crate::bindings::toolhost::plugin::host;
    use crate::bindings::toolhost::plugin::types::LogLevel as WitLevel;

    pub(super) fn log(level: LogLevel, message: &str) {
        let level = match level {
            LogLevel::Trace => WitLevel::Trace,
            LogLevel::Debug => WitLevel::Debug,
            LogLevel::Info => WitLevel::Info,
            LogLevel::Warn => WitLevel::Warn,
            LogLevel::Error => WitLevel::Error,
        };
        host::log(level, message);
    }

    pub(super) fn config(key: &str) -> Option<String> {
        host::get_config(key)
    }

    pub(super) fn config_keys() -> Vec<String> {
        host::config_keys()
    }

    pub(super) fn progress(message: &str, fraction: Option<f32>) {
        host::progress(message, fraction);
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    use super::LogLevel;

    pub(super) fn log(level: LogLevel, message: &str) {
        eprintln!("[{level}] {message}");
    }

    pub(super) fn config(_key: &str) -> Option<String> {
        None
    }

    pub(super) fn config_keys() -> Vec<String> {
        Vec::new()
    }

    pub(super) fn progress(_message: &str, _fraction: Option<f32>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_context() {
        let cx = Context::default();
        assert_eq!(cx.call_id(), "test");
        assert_eq!(cx.session_id(), None);
        assert_eq!(cx.agent(), None);
        assert_eq!(cx.config("anything"), None);
        assert!(cx.config_keys().is_empty());
    }

    #[test]
    fn builder_and_config_override() {
        let cx = Context::new("c1")
            .with_session("s1")
            .with_agent("coder")
            .with_config("b", "2")
            .with_config("a", "1");
        assert_eq!(cx.call_id(), "c1");
        assert_eq!(cx.session_id(), Some("s1"));
        assert_eq!(cx.agent(), Some("coder"));
        assert_eq!(cx.config("a").as_deref(), Some("1"));
        assert_eq!(cx.config("missing"), None);
        assert_eq!(cx.config_keys(), vec!["a".to_string(), "b".to_string()]);
        // Native stand-ins do not panic.
        cx.log(LogLevel::Warn, "test message");
        cx.progress("p", 2.0);
        cx.progress("p", None);
        cx.progress("p", f32::NAN);
    }

    #[test]
    fn level_display() {
        assert_eq!(LogLevel::Warn.to_string(), "warn");
        assert!(LogLevel::Trace < LogLevel::Error);
    }
}
