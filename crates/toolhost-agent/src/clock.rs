//! Where the loop gets "now" from: the date in the system prompt and the
//! timestamps of tool calls. Inject a [`FixedClock`] for deterministic tests.
//!
//! ```
//! use std::time::{Duration, UNIX_EPOCH};
//! use toolhost_agent::{Clock, FixedClock};
//!
//! let clock = FixedClock(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
//! assert_eq!(clock.today(), "2023-11-14");
//! ```

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> SystemTime;

    /// Today's date as `YYYY-MM-DD`, for the system prompt. UTC by default;
    /// override it to use the user's local date.
    fn today(&self) -> String {
        utc_date(self.now())
    }
}

/// The system clock: today's date in the user's local time zone, labelled
/// with its offset (`2026-11-23 (local time, UTC+01:00)`), so the model
/// knows which day it is where the user is. The time of day is never given,
/// so the system prompt stays cacheable all day.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn today(&self) -> String {
        local_date(self.now())
    }
}

/// The local calendar date of `t` (the `TZ` variable, else the system's
/// zone), labelled with its UTC offset.
///
/// The text is kept for the minute `t` falls in: the system prompt asks
/// for it before every run, and reading the zone (`TZ`, `/etc/localtime`)
/// costs more than the rest of a run's set-up. A zone changed while the
/// process runs shows within a minute.
pub fn local_date(t: SystemTime) -> String {
    static LAST: std::sync::Mutex<Option<(i64, String)>> = std::sync::Mutex::new(None);
    let minute = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs() / 60).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs() / 60).unwrap_or(i64::MAX) - 1,
    };
    if let Ok(last) = LAST.lock()
        && let Some((at, text)) = last.as_ref()
        && *at == minute
    {
        return text.clone();
    }
    let local: chrono::DateTime<chrono::Local> = t.into();
    let text = format!(
        "{} (local time, UTC{})",
        local.format("%Y-%m-%d"),
        local.format("%:z")
    );
    if let Ok(mut last) = LAST.lock() {
        *last = Some((minute, text.clone()));
    }
    text
}

/// A clock stopped at one instant.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The UTC calendar date of `t` as `YYYY-MM-DD`.
pub fn utc_date(t: SystemTime) -> String {
    let secs: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
    };
    // Howard Hinnant's civil_from_days.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_local_date_is_labelled_with_its_offset() {
        let d = local_date(UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert_eq!(d.len(), "2023-11-14 (local time, UTC+00:00)".len(), "{d}");
        assert!(d.contains(" (local time, UTC") && d.ends_with(')'), "{d}");
        assert!(d.starts_with("2023-11-1"), "{d}");
    }

    #[test]
    fn the_local_date_kept_for_a_minute_is_never_another_minutes() {
        let at = |s: u64| local_date(UNIX_EPOCH + Duration::from_secs(s));
        let (a, b) = (1_700_000_000, 1_700_000_000 + 10 * 86_400);
        let first = at(a);
        assert_eq!(at(a + 1), first, "the same minute");
        assert_ne!(at(b), first, "ten days on, from the kept text");
        assert_eq!(at(a), first, "and back");
        assert!(at(b).starts_with("2023-11-2"), "{}", at(b));
    }

    #[test]
    fn dates() {
        let at = |s: u64| utc_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_709_251_199), "2024-02-29");
        assert_eq!(at(1_709_251_200), "2024-03-01");
        assert_eq!(at(4_102_444_800), "2100-01-01");
        assert_eq!(utc_date(UNIX_EPOCH - Duration::from_secs(1)), "1969-12-31");
    }
}
