//! The `[tasks]` table: which tools `host serve` and `host mcp` run as
//! tasks (the MCP Tasks extension) for callers that can take one, and the
//! bounds (docs/guide/long-running.md).

use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use toolhost_mcp::server::tasks::{
    DEFAULT_MAX_OPEN_PER_CALLER, DEFAULT_MAX_RESULT_BYTES_PER_CALLER, DEFAULT_POLL_INTERVAL,
    DEFAULT_TASK_TTL, TaskSettings,
};
use toolhost_patterns::NameGlob;

/// The longest a task and its result may be kept: a week.
const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The shortest poll interval a caller may be asked for.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The most unfinished tasks one caller may be let have.
const MAX_OPEN_PER_CALLER: usize = 1000;
/// The fewest and most bytes of results one caller may be let keep.
const RESULT_BYTES: std::ops::RangeInclusive<usize> = 1024..=1024 * 1024 * 1024;

/// The `[tasks]` table.
///
/// ```toml
/// [tasks]
/// tools = ["build_*", "crawl"]   # run as a task for a caller that can take one
/// required = ["release"]         # only as a task: other callers get -32021
/// ttl-ms = 3600000               # how long a task and its result are kept
/// poll-interval-ms = 500         # how often callers are asked to poll
/// max-open-per-caller = 16       # unfinished tasks one caller may have
/// max-result-bytes-per-caller = 67108864   # finished tasks' results kept for one caller
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct TasksConfig {
    /// Tool names (globs, as callers see them) that run as a task.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tool names that run only as a task.
    #[serde(default)]
    pub required: Vec<String>,
    /// How long a task and its result are kept, in milliseconds.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// How often a caller is asked to poll, in milliseconds.
    #[serde(default)]
    pub poll_interval_ms: Option<u64>,
    /// The most unfinished tasks one caller may have.
    #[serde(default)]
    pub max_open_per_caller: Option<usize>,
    /// The most bytes of finished tasks' results kept for one caller.
    #[serde(default)]
    pub max_result_bytes_per_caller: Option<usize>,
}

impl TasksConfig {
    /// The server's settings; an error names the key that is out of bounds.
    pub fn settings(&self) -> anyhow::Result<TaskSettings> {
        let globs = |key: &str, names: &[String]| -> anyhow::Result<Vec<NameGlob>> {
            names
                .iter()
                .map(|n| NameGlob::new(n).with_context(|| format!("[tasks] {key}: `{n}`")))
                .collect()
        };
        let ttl = self.ttl_ms.map_or(DEFAULT_TASK_TTL, Duration::from_millis);
        if ttl.is_zero() || ttl > MAX_TTL {
            bail!(
                "[tasks] ttl-ms must be within 1 and {}",
                MAX_TTL.as_millis()
            );
        }
        let poll_interval = self
            .poll_interval_ms
            .map_or(DEFAULT_POLL_INTERVAL, Duration::from_millis);
        if poll_interval < MIN_POLL_INTERVAL || poll_interval > ttl {
            bail!(
                "[tasks] poll-interval-ms must be within {} and ttl-ms",
                MIN_POLL_INTERVAL.as_millis()
            );
        }
        let max_open_per_caller = self
            .max_open_per_caller
            .unwrap_or(DEFAULT_MAX_OPEN_PER_CALLER);
        if max_open_per_caller == 0 || max_open_per_caller > MAX_OPEN_PER_CALLER {
            bail!("[tasks] max-open-per-caller must be within 1 and {MAX_OPEN_PER_CALLER}");
        }
        let max_result_bytes_per_caller = self
            .max_result_bytes_per_caller
            .unwrap_or(DEFAULT_MAX_RESULT_BYTES_PER_CALLER);
        if !RESULT_BYTES.contains(&max_result_bytes_per_caller) {
            bail!(
                "[tasks] max-result-bytes-per-caller must be within {} and {}",
                RESULT_BYTES.start(),
                RESULT_BYTES.end()
            );
        }
        Ok(TaskSettings {
            tools: globs("tools", &self.tools)?,
            required: globs("required", &self.required)?,
            ttl,
            poll_interval,
            max_open_per_caller,
            max_result_bytes_per_caller,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_mcp::server::tasks::TaskSupport;

    fn parse(text: &str) -> TasksConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn the_table_names_tools_by_glob_and_keeps_the_defaults_it_does_not_set() {
        let s = parse("tools = [\"build_*\"]\nrequired = [\"release\"]")
            .settings()
            .unwrap();
        assert_eq!(s.support("build_docs"), TaskSupport::Optional);
        assert_eq!(s.support("release"), TaskSupport::Required);
        assert_eq!(s.support("greet"), TaskSupport::Never);
        assert_eq!(s.ttl, DEFAULT_TASK_TTL);
        assert_eq!(s.max_open_per_caller, DEFAULT_MAX_OPEN_PER_CALLER);
    }

    #[test]
    fn the_books_tasks_table_is_one_the_host_takes() {
        let page = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../docs/guide/long-running.md"),
        )
        .unwrap();
        let block = page
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("the page's config block");
        #[derive(serde::Deserialize)]
        struct Page {
            tasks: TasksConfig,
        }
        let config: Page = toml::from_str(block).unwrap();
        let settings = config.tasks.settings().unwrap();
        assert_eq!(settings.support("build_docs"), TaskSupport::Optional);
        assert_eq!(settings.support("release"), TaskSupport::Required);
    }

    #[test]
    fn absurd_bounds_are_refused_by_name() {
        for (text, key) in [
            ("ttl-ms = 0", "ttl-ms"),
            ("ttl-ms = 18446744073709551615", "ttl-ms"),
            ("poll-interval-ms = 1", "poll-interval-ms"),
            ("ttl-ms = 1000\npoll-interval-ms = 2000", "poll-interval-ms"),
            ("max-open-per-caller = 0", "max-open-per-caller"),
            ("max-open-per-caller = 1000000", "max-open-per-caller"),
            (
                "max-result-bytes-per-caller = 10",
                "max-result-bytes-per-caller",
            ),
        ] {
            let err = parse(text).settings().unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        assert!(
            toml::from_str::<TasksConfig>("ttl = 5").is_err(),
            "unknown keys refused"
        );
    }
}
