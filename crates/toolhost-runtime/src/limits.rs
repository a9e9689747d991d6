//! Resource limits of one call: defaults, per-plugin overrides.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The limits a call runs under. Every field has a default; a plugin's manifest
/// and the host's configuration may override them (see [`LimitOverrides`]).
///
/// ```
/// use std::time::Duration;
/// use toolhost_runtime::Limits;
///
/// let limits = Limits { timeout: Duration::from_secs(2), ..Limits::default() };
/// assert_eq!(limits.memory_bytes, 128 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct Limits {
    /// Wall-clock time a call may take, guest and host work together.
    #[serde(rename = "timeout-ms", serialize_with = "millis")]
    pub timeout: Duration,
    /// Linear memory a plugin may grow to, in bytes.
    pub memory_bytes: u64,
    /// Table elements a plugin may grow to.
    pub table_elements: usize,
    /// Largest `output` (and, separately, `details`) a call may return, in bytes.
    pub max_output_bytes: usize,
    /// Largest arguments object accepted, in bytes of JSON.
    pub max_args_bytes: usize,
    /// Log lines (host `log` calls plus stdout/stderr lines) kept per call; the rest are counted and dropped.
    pub max_log_lines: usize,
    /// Sandboxes of one plugin alive at once. Further calls to that plugin
    /// wait in the queue, so one busy plugin cannot take every slot of the
    /// instance pool from the others.
    pub max_instances: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            memory_bytes: 128 * 1024 * 1024,
            table_elements: 100_000,
            max_output_bytes: 4 * 1024 * 1024,
            max_args_bytes: 1024 * 1024,
            max_log_lines: 1000,
            max_instances: 32,
        }
    }
}

/// Optional overrides of [`Limits`], as written in a manifest's `[limits]` table
/// or the host configuration (kebab-case keys, e.g. `timeout-ms = 5000`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LimitOverrides {
    /// Wall-clock time per call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Linear memory, in MiB.
    pub memory_mb: Option<u64>,
    /// Table elements.
    pub table_elements: Option<usize>,
    /// Largest output or details, in bytes.
    pub max_output_bytes: Option<usize>,
    /// Largest arguments, in bytes.
    pub max_args_bytes: Option<usize>,
    /// Log lines kept per call.
    pub max_log_lines: Option<usize>,
    /// Sandboxes of this plugin alive at once.
    pub max_instances: Option<usize>,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u128(d.as_millis())
}

impl std::fmt::Display for Limits {
    /// One line with every limit by its configuration key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timeout-ms={} memory-mb={} table-elements={} max-output-bytes={} \
             max-args-bytes={} max-log-lines={} max-instances={}",
            self.timeout.as_millis(),
            self.memory_bytes / (1024 * 1024),
            self.table_elements,
            self.max_output_bytes,
            self.max_args_bytes,
            self.max_log_lines,
            self.max_instances
        )
    }
}

impl Limits {
    /// These limits with every override that is set and *lower* applied:
    /// what a plugin's manifest may do. A manifest is the plugin speaking
    /// for itself; it may ask for less than the host gives, never for more
    /// (only the user's per-plugin settings, [`Limits::with`], go above).
    ///
    /// ```
    /// use std::time::Duration;
    /// use toolhost_runtime::{grants::LimitOverrides, Limits};
    ///
    /// let host = Limits { timeout: Duration::from_secs(2), ..Limits::default() };
    /// let asks = LimitOverrides { timeout_ms: Some(3_600_000), memory_mb: Some(16), ..Default::default() };
    /// let got = host.lowered_by(&asks);
    /// assert_eq!(got.timeout, Duration::from_secs(2));
    /// assert_eq!(got.memory_bytes, 16 * 1024 * 1024);
    /// ```
    pub fn lowered_by(&self, o: &LimitOverrides) -> Limits {
        let asked = self.with(o);
        Limits {
            timeout: asked.timeout.min(self.timeout),
            memory_bytes: asked.memory_bytes.min(self.memory_bytes),
            table_elements: asked.table_elements.min(self.table_elements),
            max_output_bytes: asked.max_output_bytes.min(self.max_output_bytes),
            max_args_bytes: asked.max_args_bytes.min(self.max_args_bytes),
            max_log_lines: asked.max_log_lines.min(self.max_log_lines),
            max_instances: asked.max_instances.min(self.max_instances),
        }
    }

    /// These limits with every override that is set applied on top.
    pub fn with(&self, o: &LimitOverrides) -> Limits {
        Limits {
            timeout: o.timeout_ms.map_or(self.timeout, Duration::from_millis),
            memory_bytes: o
                .memory_mb
                .map_or(self.memory_bytes, |mb| mb.saturating_mul(1024 * 1024)),
            table_elements: o.table_elements.unwrap_or(self.table_elements),
            max_output_bytes: o.max_output_bytes.unwrap_or(self.max_output_bytes),
            max_args_bytes: o.max_args_bytes.unwrap_or(self.max_args_bytes),
            max_log_lines: o.max_log_lines.unwrap_or(self.max_log_lines),
            max_instances: o.max_instances.unwrap_or(self.max_instances),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_only_the_fields_they_set() {
        let base = Limits::default();
        let o = LimitOverrides {
            timeout_ms: Some(250),
            memory_mb: Some(16),
            ..Default::default()
        };
        let l = base.with(&o);
        assert_eq!(l.timeout, Duration::from_millis(250));
        assert_eq!(l.memory_bytes, 16 * 1024 * 1024);
        assert_eq!(l.max_output_bytes, base.max_output_bytes);
    }

    #[test]
    fn unknown_limit_keys_are_rejected() {
        let err = toml::from_str::<LimitOverrides>("timeout = 5").unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}
