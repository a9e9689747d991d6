//! The variable store: full tool results kept outside the model's context, and
//! the built-in `read_var` tool that pages through them (its spec, as the
//! model is offered it, is in [`read_var`](crate::read_var)).
//!
//! Every successful tool result is stored under a short name (`result_1`,
//! `result_2`, ...). A result longer than the size limit reaches the model
//! truncated, with a note naming its variable; the model then reads the rest
//! with `read_var {"name": "result_1", "offset": 16384}`. A store can be shared
//! by the runs of one chat (see [`AgentOptions::vars`](crate::AgentOptions)),
//! so the names that [`compact_history`](crate::compact_history) leaves in the
//! history stay readable in later turns.
//!
//! ```
//! use toolhost_agent::VarStore;
//!
//! let vars = VarStore::new();
//! let name = vars.insert("hello world".to_owned());
//! assert_eq!(name, "result_1");
//! let page = vars.read(&name, 6, Some(5), 1024).unwrap();
//! assert!(page.starts_with("world"));
//! ```

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A [`VarStore`]'s contents, for saving: see [`VarStore::snapshot`] and
/// [`VarStore::restore`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VarSnapshot {
    /// How many names the store had given out (`result_1` ..
    /// `result_{issued}`); new names count on from here.
    pub issued: u64,
    /// The stored results, oldest first.
    pub vars: Vec<SavedVar>,
}

/// One stored result in a [`VarSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedVar {
    /// Its name, `result_N`.
    pub name: String,
    /// The full text.
    pub text: String,
}

/// The name of the built-in tool.
pub const READ_VAR: &str = "read_var";

/// The highest variable number a store gives out or restores: far beyond
/// any run, and far from `u64::MAX`, so counting on never overflows.
const MAX_ISSUED: u64 = 1 << 53;

/// Why `read_var` could not answer; its text goes to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarError {
    /// No variable has this name.
    #[error("no variable named `{name}`. Stored variables: {available}.")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that exist.
        available: String,
    },
    /// The variable existed but was dropped: the store keeps the newest
    /// results within its bounds (or was cleared).
    #[error(
        "`{name}` is no longer stored: the store keeps the newest {max_vars} results and at most {max_bytes} bytes, dropping the oldest first. Run the tool again if you need it. Stored variables: {available}."
    )]
    Gone {
        /// The name asked for.
        name: String,
        /// The store's bound on results.
        max_vars: usize,
        /// The store's bound on bytes.
        max_bytes: usize,
        /// The names that exist.
        available: String,
    },
    /// The offset is past the end.
    #[error("offset {offset} is past the end of `{name}` ({len} bytes).")]
    OffsetPastEnd {
        /// The variable.
        name: String,
        /// The offset asked for.
        offset: usize,
        /// Its length in bytes.
        len: usize,
    },
    /// The arguments are not `{name, offset?, length?}`.
    #[error(
        "invalid arguments for read_var: {0}. Expected {{\"name\": string, \"offset\"?: integer, \"length\"?: integer}}."
    )]
    Arguments(String),
}

/// How many results a store keeps by default (the newest; older ones are
/// dropped first).
pub const DEFAULT_MAX_VARS: usize = 256;
/// How many bytes of results a store keeps by default (the newest result is
/// always kept, whatever its size).
pub const DEFAULT_MAX_VAR_BYTES: usize = 64 * 1024 * 1024;

/// Full texts of tool results, by name. Thread-safe; share it with an `Arc`.
///
/// Bounded: it keeps the newest [`DEFAULT_MAX_VARS`] results and at most
/// [`DEFAULT_MAX_VAR_BYTES`] (or what [`VarStore::with_bounds`] says),
/// dropping the oldest first, so a long chat does not grow it without end.
/// Reading a dropped variable says so ([`VarError::Gone`]).
#[derive(Debug)]
pub struct VarStore {
    inner: Mutex<Inner>,
    max_vars: usize,
    max_bytes: usize,
}

impl Default for VarStore {
    fn default() -> Self {
        VarStore::with_bounds(DEFAULT_MAX_VARS, DEFAULT_MAX_VAR_BYTES)
    }
}

#[derive(Debug, Default)]
struct Inner {
    next: u64,
    /// By number: `result_7` is 7, so the first entry is the oldest.
    vars: BTreeMap<u64, String>,
    bytes: usize,
}

/// `result_7` → 7.
fn number_of(name: &str) -> Option<u64> {
    name.strip_prefix("result_")?.parse().ok()
}

fn name_of(number: u64) -> String {
    format!("result_{number}")
}

impl Inner {
    /// The stored names, oldest first; at most the newest `most` of them.
    fn listing(&self, most: usize) -> String {
        if self.vars.is_empty() {
            return "(none)".to_owned();
        }
        let skip = self.vars.len().saturating_sub(most);
        let names: Vec<String> = self.vars.keys().skip(skip).map(|n| name_of(*n)).collect();
        if skip > 0 {
            format!("{} older, then {}", skip, names.join(", "))
        } else {
            names.join(", ")
        }
    }
}

impl VarStore {
    /// An empty store with the default bounds.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store that keeps at most `max_vars` results and `max_bytes`
    /// bytes of them (the newest result is always kept).
    ///
    /// ```
    /// use toolhost_agent::{VarError, VarStore};
    ///
    /// let vars = VarStore::with_bounds(2, 1024);
    /// let first = vars.insert("a".to_owned());
    /// vars.insert("b".to_owned());
    /// vars.insert("c".to_owned());
    /// assert!(matches!(vars.read(&first, 0, None, 10), Err(VarError::Gone { .. })));
    /// ```
    pub fn with_bounds(max_vars: usize, max_bytes: usize) -> Self {
        VarStore {
            inner: Mutex::new(Inner::default()),
            max_vars: max_vars.max(1),
            max_bytes,
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Stores `text` under a fresh name and returns the name, dropping the
    /// oldest results while the store is over its bounds.
    pub fn insert(&self, text: String) -> String {
        let mut inner = self.lock();
        inner.next = inner.next.saturating_add(1);
        let number = inner.next;
        inner.bytes = inner.bytes.saturating_add(text.len());
        inner.vars.insert(number, text);
        while inner.vars.len() > 1
            && (inner.vars.len() > self.max_vars || inner.bytes > self.max_bytes)
        {
            if let Some((_, dropped)) = inner.vars.pop_first() {
                inner.bytes = inner.bytes.saturating_sub(dropped.len());
            }
        }
        name_of(number)
    }

    /// Replaces the text of `name` when it is still stored (a result
    /// replaced before the model read it, see
    /// [`AgentState::set_result`](crate::AgentState::set_result)); `false`
    /// when it is not. The store's byte bound may then drop older results.
    pub fn replace(&self, name: &str, text: String) -> bool {
        let Some(number) = number_of(name) else {
            return false;
        };
        let mut inner = self.lock();
        let Some(old) = inner.vars.get_mut(&number) else {
            return false;
        };
        let was = std::mem::replace(old, text);
        let now = inner.vars.get(&number).map_or(0, String::len);
        inner.bytes = inner.bytes.saturating_sub(was.len()).saturating_add(now);
        while inner.vars.len() > 1 && inner.bytes > self.max_bytes {
            if let Some((_, dropped)) = inner.vars.pop_first() {
                inner.bytes = inner.bytes.saturating_sub(dropped.len());
            }
        }
        true
    }

    /// The full text of `name`.
    pub fn get(&self, name: &str) -> Option<String> {
        let number = number_of(name)?;
        self.lock().vars.get(&number).cloned()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.lock().vars.is_empty()
    }

    /// How many variables are stored.
    pub fn len(&self) -> usize {
        self.lock().vars.len()
    }

    /// Bytes stored.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// The stored names, oldest first.
    pub fn names(&self) -> Vec<String> {
        self.lock().vars.keys().map(|n| name_of(*n)).collect()
    }

    /// Removes everything (names keep counting up, so old references never
    /// point at new results).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.vars.clear();
        inner.bytes = 0;
    }

    /// Builds a snapshot of the store: every stored result and how many names
    /// were given out. Serializable, so a saved chat can bring its variables
    /// back with [`VarStore::restore`].
    ///
    /// ```
    /// use toolhost_agent::VarStore;
    ///
    /// let vars = VarStore::new();
    /// vars.insert("42".to_owned());
    /// let json = serde_json::to_string(&vars.snapshot()).unwrap();
    ///
    /// let later = VarStore::new();
    /// later.restore(serde_json::from_str(&json).unwrap());
    /// assert_eq!(later.get("result_1").as_deref(), Some("42"));
    /// assert_eq!(later.insert("43".to_owned()), "result_2");
    /// ```
    pub fn snapshot(&self) -> VarSnapshot {
        let inner = self.lock();
        VarSnapshot {
            issued: inner.next,
            vars: inner
                .vars
                .iter()
                .map(|(n, text)| SavedVar {
                    name: name_of(*n),
                    text: text.clone(),
                })
                .collect(),
        }
    }

    /// Replaces the stored results with a snapshot's, within this store's
    /// bounds (the newest kept, as [`insert`](Self::insert) would). Names
    /// keep counting up from the highest of this store's count, the
    /// snapshot's and its highest name, so a later result never takes a name
    /// already handed out. Entries whose name is not `result_N` (a snapshot is
    /// outside input) are skipped.
    pub fn restore(&self, snapshot: VarSnapshot) {
        let mut vars = BTreeMap::new();
        for SavedVar { name, text } in snapshot.vars {
            match number_of(&name) {
                Some(n) if (1..=MAX_ISSUED).contains(&n) => {
                    vars.insert(n, text);
                }
                _ => tracing::warn!(name, "skipped a saved variable whose name is not result_N"),
            }
        }
        let highest = vars.last_key_value().map_or(0, |(n, _)| *n);
        let mut inner = self.lock();
        // A snapshot is outside input: a count past the bound (`u64::MAX`
        // in a session file) is held to it, so counting on never overflows.
        inner.next = inner.next.max(snapshot.issued.min(MAX_ISSUED)).max(highest);
        inner.bytes = vars
            .values()
            .fold(0usize, |sum, t| sum.saturating_add(t.len()));
        inner.vars = vars;
        while inner.vars.len() > 1
            && (inner.vars.len() > self.max_vars || inner.bytes > self.max_bytes)
        {
            if let Some((_, dropped)) = inner.vars.pop_first() {
                inner.bytes = inner.bytes.saturating_sub(dropped.len());
            }
        }
    }

    /// A page of `name`: `length` bytes (at most `max_page`, default
    /// `max_page`) from byte `offset`, both moved back to character
    /// boundaries, followed by a line saying where it ends and how to go on.
    pub fn read(
        &self,
        name: &str,
        offset: usize,
        length: Option<usize>,
        max_page: usize,
    ) -> Result<String, VarError> {
        let inner = self.lock();
        let number = number_of(name);
        let Some(text) = number.and_then(|n| inner.vars.get(&n)) else {
            let available = inner.listing(20);
            return Err(match number {
                Some(n) if n >= 1 && n <= inner.next => VarError::Gone {
                    name: name.to_owned(),
                    max_vars: self.max_vars,
                    max_bytes: self.max_bytes,
                    available,
                },
                _ => VarError::Unknown {
                    name: name.to_owned(),
                    available,
                },
            });
        };
        let len = text.len();
        if offset > len || (offset == len && len > 0) {
            return Err(VarError::OffsetPastEnd {
                name: name.to_owned(),
                offset,
                len,
            });
        }
        let start = text.floor_char_boundary(offset);
        let want = length.unwrap_or(max_page).clamp(1, max_page.max(1));
        let end = text.floor_char_boundary(start.saturating_add(want).min(len));
        // A page must advance even when one character is wider than `want`.
        let end = if end == start && start < len {
            text.ceil_char_boundary(start + 1)
        } else {
            end
        };
        let mut page = text[start..end].to_owned();
        if end < len {
            page.push_str(&format!(
                "\n[{name}: bytes {start}..{end} of {len}; read on with offset={end}]"
            ));
        } else {
            page.push_str(&format!("\n[{name}: bytes {start}..{end} of {len}; end]"));
        }
        Ok(page)
    }

    /// Runs the built-in tool on its JSON arguments.
    pub fn call_read_var(&self, args: &Value, max_page: usize) -> Result<String, VarError> {
        let obj = args
            .as_object()
            .ok_or_else(|| VarError::Arguments("the arguments must be an object".to_owned()))?;
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| VarError::Arguments("`name` (a string) is required".to_owned()))?;
        let number = |key: &str| -> Result<Option<usize>, VarError> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .map(Some)
                    .ok_or_else(|| {
                        VarError::Arguments(format!("`{key}` must be a non-negative integer"))
                    }),
            }
        };
        let offset = number("offset")?.unwrap_or(0);
        let length = number("length")?;
        self.read(name, offset, length, max_page)
    }
}

/// A run's variables as a call carries them to an executor that serves
/// `read_var` ([`ToolExecutor::serves_read_var`](crate::ToolExecutor::serves_read_var)).
#[derive(Debug, Clone)]
pub struct RunVars {
    /// The run's store (shared: reads see what the run stored so far).
    pub store: Arc<VarStore>,
    /// The largest page one read returns, in bytes (the run's
    /// `max_output_bytes`).
    pub max_page: usize,
}

impl RunVars {
    /// Answers a `read_var` call with these variables.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use toolhost_agent::{RunVars, VarStore};
    ///
    /// let store = Arc::new(VarStore::default());
    /// let name = store.insert("a long result".to_owned());
    /// let vars = RunVars { store, max_page: 6 };
    /// let page = vars.read(&serde_json::json!({"name": name})).unwrap();
    /// assert!(page.starts_with("a long"));
    /// ```
    pub fn read(&self, args: &Value) -> Result<String, VarError> {
        self.store.call_read_var(args, self.max_page)
    }
}

/// Cuts `text` to at most `max` bytes (at a character boundary) and appends a
/// note naming the variable that holds the full text. Returns `text` unchanged
/// when it fits.
pub fn truncate_for_model(text: &str, max: usize, var: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(max);
    format!(
        "{}\n[truncated: showing bytes 0..{end} of {}. The full result is stored in variable \
         `{var}`; read the rest with read_var {{\"name\": \"{var}\", \"offset\": {end}}}]",
        &text[..end],
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_store_keeps_the_newest_within_its_bounds_and_says_what_was_dropped() {
        let vars = VarStore::with_bounds(3, 10);
        let names: Vec<String> = (0..5).map(|i| vars.insert(format!("{i}{i}"))).collect();
        assert_eq!(
            vars.names(),
            ["result_3", "result_4", "result_5"],
            "the 3 newest"
        );
        assert_eq!(vars.bytes(), 6);
        let err = vars.read(&names[0], 0, None, 10).unwrap_err();
        assert!(matches!(err, VarError::Gone { .. }), "{err}");
        assert!(err.to_string().contains("no longer stored"), "{err}");
        // Bytes: a 9-byte result pushes out every 2-byte one (6 + 9 > 10, then
        // 4 + 9, then 2 + 9).
        vars.insert("123456789".to_owned());
        assert_eq!(vars.names(), ["result_6"]);
        // The newest is kept whatever its size.
        vars.insert("x".repeat(100));
        assert_eq!(vars.names(), ["result_7"]);
        assert_eq!(vars.bytes(), 100);
        // A name that never existed is unknown, not gone.
        assert!(matches!(
            vars.read("result_99", 0, None, 10),
            Err(VarError::Unknown { .. })
        ));
        assert!(matches!(
            vars.read("whatever", 0, None, 10),
            Err(VarError::Unknown { .. })
        ));
        vars.clear();
        assert_eq!(vars.bytes(), 0);
        assert!(matches!(
            vars.read("result_7", 0, None, 10),
            Err(VarError::Gone { .. })
        ));
    }

    #[test]
    fn pages_walk_the_text() {
        let vars = VarStore::new();
        let name = vars.insert("abcdefghij".to_owned());
        let p1 = vars.read(&name, 0, None, 4).unwrap();
        assert!(p1.starts_with("abcd\n"), "{p1}");
        assert!(p1.contains("offset=4"), "{p1}");
        let p3 = vars.read(&name, 8, None, 4).unwrap();
        assert!(p3.starts_with("ij\n") && p3.ends_with("end]"), "{p3}");
        assert!(matches!(
            vars.read(&name, 11, None, 4),
            Err(VarError::OffsetPastEnd { .. })
        ));
    }

    #[test]
    fn pages_respect_char_boundaries() {
        let vars = VarStore::new();
        let name = vars.insert("ééé".to_owned()); // 6 bytes
        let p = vars.read(&name, 1, Some(3), 100).unwrap();
        // offset 1 moves back to 0; 3 bytes end at boundary 2.
        assert!(p.starts_with("é\n"), "{p}");
        let p = vars.read(&name, 0, Some(1), 100).unwrap();
        assert!(p.starts_with("é\n"), "a page always advances: {p}");
    }

    #[test]
    fn unknown_variable_lists_names() {
        let vars = VarStore::new();
        vars.insert("x".to_owned());
        let err = vars
            .call_read_var(&json!({"name": "nope"}), 10)
            .unwrap_err();
        assert!(err.to_string().contains("result_1"), "{err}");
        let err = vars.call_read_var(&json!({"offset": 1}), 10).unwrap_err();
        assert!(matches!(err, VarError::Arguments(_)));
    }

    #[test]
    fn a_restored_snapshot_reads_the_same_and_new_names_do_not_collide() {
        let vars = VarStore::new();
        vars.insert("first".to_owned());
        vars.insert("second".to_owned());
        let snapshot = vars.snapshot();
        let text = serde_json::to_string(&snapshot).unwrap();
        let back: VarSnapshot = serde_json::from_str(&text).unwrap();
        assert_eq!(back, snapshot);

        let restored = VarStore::new();
        restored.restore(back);
        assert_eq!(restored.names(), ["result_1", "result_2"]);
        assert_eq!(restored.get("result_2").as_deref(), Some("second"));
        assert_eq!(restored.bytes(), "firstsecond".len());
        assert_eq!(restored.insert("third".to_owned()), "result_3");
        // A dropped name stays `Gone`, not `Unknown`, after a restore.
        vars.clear();
        let empty = VarStore::new();
        empty.restore(vars.snapshot());
        assert!(matches!(
            empty.read("result_1", 0, None, 10),
            Err(VarError::Gone { .. })
        ));
        assert_eq!(empty.insert("x".to_owned()), "result_3");
    }

    #[test]
    fn a_restore_keeps_the_stores_bounds_and_ignores_names_that_are_not_variables() {
        let snapshot = VarSnapshot {
            issued: 2,
            vars: vec![
                SavedVar {
                    name: "result_1".to_owned(),
                    text: "aa".to_owned(),
                },
                SavedVar {
                    name: "result_9".to_owned(),
                    text: "bb".to_owned(),
                },
                SavedVar {
                    name: "../etc".to_owned(),
                    text: "cc".to_owned(),
                },
                SavedVar {
                    name: "result_4".to_owned(),
                    text: "dd".to_owned(),
                },
            ],
        };
        let vars = VarStore::with_bounds(2, 1024);
        vars.insert("older".to_owned());
        vars.restore(snapshot);
        // The two newest valid ones; the count goes on after the highest name.
        assert_eq!(vars.names(), ["result_4", "result_9"]);
        assert_eq!(vars.bytes(), 4);
        assert_eq!(vars.insert("e".to_owned()), "result_10");
        // A store never counts backwards, whatever the snapshot says.
        let ahead = VarStore::new();
        for _ in 0..5 {
            ahead.insert("z".to_owned());
        }
        ahead.restore(VarSnapshot::default());
        assert!(ahead.is_empty());
        assert_eq!(ahead.insert("y".to_owned()), "result_6");
    }

    #[test]
    fn truncation_note_names_the_variable() {
        let t = truncate_for_model("0123456789", 4, "result_7");
        assert!(t.starts_with("0123\n[truncated"), "{t}");
        assert!(t.contains("\"offset\": 4"), "{t}");
        assert_eq!(truncate_for_model("abc", 4, "v"), "abc");
    }

    #[test]
    fn a_snapshot_whose_count_is_at_the_end_of_u64_does_not_overflow() {
        let vars = VarStore::new();
        vars.restore(VarSnapshot {
            issued: u64::MAX,
            vars: vec![SavedVar {
                name: format!("result_{}", u64::MAX),
                text: "x".into(),
            }],
        });
        // The absurd name is skipped, the count held to its bound.
        assert!(vars.get(&format!("result_{}", u64::MAX)).is_none());
        let name = vars.insert("next".to_owned());
        assert_eq!(vars.get(&name).as_deref(), Some("next"));
        assert_eq!(vars.snapshot().issued, MAX_ISSUED + 1);
    }
}
