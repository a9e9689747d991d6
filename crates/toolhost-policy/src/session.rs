//! Tools the user switched off (and back on) for one session.

use std::sync::Arc;

use crate::error::PolicyError;
use crate::pattern::{NameGlob, name_glob};

/// The tools a user switched off for one session, by glob on the tool name.
///
/// Switches apply in order and the last one matching a tool wins, so
/// `disable("http_*")` then `enable("http_get")` leaves only `http_get` on. A switched
/// off tool is denied for the session, whatever the policy file says, and hidden from the
/// model. Cloning is cheap (the list is shared); changing a clone does not change the
/// original. Session toggles come from the user, never from the model.
///
/// ```
/// use toolhost_policy::SessionToggles;
///
/// let mut session = SessionToggles::new();
/// session.disable("http_*").unwrap();
/// session.enable("http_get").unwrap();
/// assert!(session.is_disabled("http_post"));
/// assert!(!session.is_disabled("http_get"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SessionToggles {
    switches: Arc<[Switch]>,
}

#[derive(Debug, Clone)]
struct Switch {
    glob: NameGlob,
    off: bool,
}

impl SessionToggles {
    /// No tool switched off.
    pub fn new() -> Self {
        Self::default()
    }

    /// Switches off the tools matching `glob` for this session.
    pub fn disable(&mut self, glob: &str) -> Result<(), PolicyError> {
        self.switch(glob, true)
    }

    /// Switches back on the tools matching `glob` (undoing an earlier `disable` of the same
    /// glob, or overriding a broader one).
    pub fn enable(&mut self, glob: &str) -> Result<(), PolicyError> {
        self.switch(glob, false)
    }

    fn switch(&mut self, glob: &str, off: bool) -> Result<(), PolicyError> {
        let compiled = name_glob(glob).map_err(|message| PolicyError::Invalid {
            message: format!("session toggle: {message}"),
        })?;
        let mut switches: Vec<Switch> = self
            .switches
            .iter()
            .filter(|s| s.glob.as_str() != glob)
            .cloned()
            .collect();
        switches.push(Switch {
            glob: compiled,
            off,
        });
        // Switches on before any switch off change nothing.
        let first_off = switches
            .iter()
            .position(|s| s.off)
            .unwrap_or(switches.len());
        switches.drain(..first_off);
        tracing::debug!(glob, off, "session toggle");
        self.switches = switches.into();
        Ok(())
    }

    /// Whether `tool` is switched off.
    #[inline]
    pub fn is_disabled(&self, tool: &str) -> bool {
        self.disabled_by(tool).is_some()
    }

    /// The glob that switched `tool` off, if it is off.
    pub fn disabled_by(&self, tool: &str) -> Option<&str> {
        self.switches
            .iter()
            .rev()
            .find(|s| s.glob.is_match(tool))
            .filter(|s| s.off)
            .map(|s| s.glob.as_str())
    }

    /// The switches in the order they apply: each glob and whether it switches off
    /// (`true`) or back on (`false`).
    pub fn entries(&self) -> impl Iterator<Item = (&str, bool)> + '_ {
        self.switches.iter().map(|s| (s.glob.as_str(), s.off))
    }

    /// Whether nothing is switched off.
    pub fn is_empty(&self) -> bool {
        self.switches.is_empty()
    }

    /// Switches everything back on.
    pub fn clear(&mut self) {
        self.switches = Arc::new([]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disabled_tool_is_off_until_enabled_again() {
        let mut s = SessionToggles::new();
        assert!(!s.is_disabled("http_get"));
        s.disable("http_get").unwrap();
        assert!(s.is_disabled("http_get"));
        assert_eq!(s.disabled_by("http_get"), Some("http_get"));
        s.enable("http_get").unwrap();
        assert!(!s.is_disabled("http_get"));
        assert!(
            s.is_empty(),
            "enabling what was disabled leaves no switch behind"
        );
    }

    #[test]
    fn last_matching_switch_wins() {
        let mut s = SessionToggles::new();
        s.disable("http_*").unwrap();
        s.enable("http_get").unwrap();
        assert!(s.is_disabled("http_post"));
        assert!(!s.is_disabled("http_get"));
        s.disable("*").unwrap();
        assert!(s.is_disabled("http_get"));
        assert!(s.is_disabled("read_file"));
        assert_eq!(
            s.entries().collect::<Vec<_>>(),
            [("http_*", true), ("http_get", false), ("*", true)]
        );
    }

    #[test]
    fn repeating_a_glob_moves_it_to_the_end_instead_of_duplicating() {
        let mut s = SessionToggles::new();
        s.disable("a*").unwrap();
        s.enable("ab").unwrap();
        s.disable("a*").unwrap();
        assert_eq!(s.entries().collect::<Vec<_>>(), [("a*", true)]);
        assert!(s.is_disabled("ab"));
    }

    #[test]
    fn clones_are_independent() {
        let mut a = SessionToggles::new();
        a.disable("x").unwrap();
        let mut b = a.clone();
        b.enable("x").unwrap();
        assert!(a.is_disabled("x"));
        assert!(!b.is_disabled("x"));
        a.clear();
        assert!(!a.is_disabled("x"));
    }

    #[test]
    fn bad_toggle_glob_is_an_error() {
        let mut s = SessionToggles::new();
        let e = s.disable("[x").unwrap_err();
        assert!(
            e.to_string().starts_with("session toggle: invalid glob"),
            "{e}"
        );
        assert!(s.is_empty());
    }
}
