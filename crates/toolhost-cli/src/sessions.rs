//! The session store: saved conversations, one JSON file per session.
//!
//! A session is a chat's conversation (the history the chat sends with each
//! prompt), the record of every turn (the run's messages, tool calls, usage,
//! status), and a snapshot of the variable store, so `read_var` names the
//! conversation mentions stay readable after a restart. It lives in
//! `DIR/NAME.json`, where `DIR` is `--sessions-dir`, `TOOLHOST_SESSIONS_DIR`,
//! or the user's data directory + `sessions`.
//!
//! One file per session (not SQLite): a write replaces one file atomically
//! (see [`Store::save`]), so a crash mid-write leaves the old version, and a
//! file that is damaged anyway (a disk fault, a hand edit) costs that session
//! only: [`Store::list`] reports it and lists the others. The files are plain
//! JSON a user can read, copy or delete.
//!
//! In use (the module is the CLI's own, so this is shown, not compiled;
//! the unit tests below run the same calls):
//!
//! ```text
//! let store = Store::new("/tmp/sessions".into());
//! let mut session = store.load_or_new("notes", Some("gpt-4o"))?;
//! session.conversation.push(toolhost_agent::Message::user("hi"));
//! store.save(&mut session)?;
//! ```

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use toolhost_agent::{
    Message, Role, Status, ToolCallRecord, ToolChainResult, Usage, VarSnapshot, next_turn_history,
};

/// The version of the file format this host writes and reads.
pub const FORMAT_VERSION: u64 = 1;
/// The largest session file the store reads or writes, in bytes.
pub const MAX_SESSION_BYTES: u64 = 64 * 1024 * 1024;
/// The most bytes of variables a session keeps (the newest first); older
/// ones are left out of the file and read as "no longer stored".
pub const MAX_SAVED_VAR_BYTES: usize = 16 * 1024 * 1024;
/// The longest session name.
pub const MAX_NAME_CHARS: usize = 64;
/// The environment variable naming the sessions directory.
pub const SESSIONS_DIR_ENV: &str = "TOOLHOST_SESSIONS_DIR";

/// What went wrong with a session or the store.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The name could escape the directory or is otherwise unusable.
    #[error(
        "invalid session name {name:?}: use 1 to {MAX_NAME_CHARS} of the characters A-Z a-z 0-9 . _ -, not starting with '.'"
    )]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// No session has this name.
    #[error("no session named {name:?} in {}", dir.display())]
    NotFound {
        /// The name asked for.
        name: String,
        /// The sessions directory.
        dir: PathBuf,
    },
    /// The file is larger than the store reads (or the session larger than
    /// it writes).
    #[error("{}: the session is over the limit of {max} bytes", path.display())]
    TooLarge {
        /// The session file.
        path: PathBuf,
        /// The limit.
        max: u64,
    },
    /// The file is not a session file: not JSON, or not the expected shape.
    #[error("{} is corrupt: {source}", path.display())]
    Corrupt {
        /// The session file.
        path: PathBuf,
        /// What the parser found.
        source: serde_json::Error,
    },
    /// The file was written in a format this host does not read.
    #[error("{}: session format version {found}; this host reads version {FORMAT_VERSION}", path.display())]
    UnsupportedVersion {
        /// The session file.
        path: PathBuf,
        /// The version the file says.
        found: u64,
    },
    /// Reading or writing failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// There is no directory to keep sessions in.
    #[error(
        "no data directory for sessions: set --sessions-dir or {SESSIONS_DIR_ENV} (no home directory was found)"
    )]
    NoDirectory,
}

impl SessionError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        SessionError::Io {
            path: path.to_owned(),
            source,
        }
    }
}

/// Checks a session name: 1 to 64 of `[A-Za-z0-9._-]`, not starting with
/// '.', so it names a file inside the sessions directory and nothing else
/// (no separators, no `..`, no hidden or temporary files).
pub fn validate_name(name: &str) -> Result<(), SessionError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(SessionError::InvalidName {
            name: name.to_owned(),
        })
    }
}

/// One turn of a session: the prompt and what the run did with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// The user's prompt.
    pub prompt: String,
    /// The messages the run appended: the prompt, then the whole tool chain
    /// (assistant messages with their calls, tool results, final answer).
    pub messages: Vec<Message>,
    /// Every tool call, with its arguments, output, details and timings.
    pub history: Vec<ToolCallRecord>,
    /// Tokens used.
    pub usage: Usage,
    /// How the run ended.
    pub status: Status,
    /// Why, when it did not complete.
    pub error: Option<String>,
    /// The final answer.
    pub text: String,
}

impl Turn {
    /// The turn of `result`, a run on `context` + the user's `prompt`.
    pub fn from_result(context: &[Message], prompt: &str, result: &ToolChainResult) -> Turn {
        Turn {
            prompt: prompt.to_owned(),
            messages: appended(context, prompt, &result.messages).to_vec(),
            history: result.history.clone(),
            usage: result.usage,
            status: result.status,
            error: result.error.clone(),
            text: result.text.clone(),
        }
    }
}

/// The messages a run appended to `context`: after the context when the run
/// kept it as it was, otherwise (a hook rewrote it) from the last user
/// message that is the prompt, otherwise all of them.
fn appended<'a>(context: &[Message], prompt: &str, messages: &'a [Message]) -> &'a [Message] {
    if messages.starts_with(context) {
        return &messages[context.len()..];
    }
    match messages
        .iter()
        .rposition(|m| m.role == Role::User && m.content == prompt)
    {
        Some(i) => &messages[i..],
        None => messages,
    }
}

/// A saved conversation, as its file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The file format's version ([`FORMAT_VERSION`]).
    pub version: u64,
    /// The session's name (its file is `NAME.json`).
    pub name: String,
    /// When it was created.
    pub created: DateTime<Utc>,
    /// When it was last saved.
    pub updated: DateTime<Utc>,
    /// The model of the last turn, as the chat labels it.
    pub model: Option<String>,
    /// What the chat sends as history: per turn the user's message and one
    /// compacted assistant message.
    pub conversation: Vec<Message>,
    /// Every turn in full.
    pub turns: Vec<Turn>,
    /// The variables (`result_N`) the conversation may refer to.
    #[serde(default)]
    pub vars: VarSnapshot,
    /// The policy profile (`--agent`) the variables were made under; they
    /// are restored only under the same one ([`Session::vars_for`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vars_agent: Option<String>,
}

impl Session {
    /// An empty session (the name is not checked here; the store checks it).
    pub fn new(name: &str, model: Option<&str>) -> Session {
        let now = Utc::now();
        Session {
            version: FORMAT_VERSION,
            name: name.to_owned(),
            created: now,
            updated: now,
            model: model.map(str::to_owned),
            conversation: Vec::new(),
            turns: Vec::new(),
            vars: VarSnapshot::default(),
            vars_agent: None,
        }
    }

    /// Records a finished run on the current conversation + `prompt`: the
    /// turn in full, and the prompt and the compacted answer in the
    /// conversation.
    pub fn push_turn(&mut self, prompt: &str, result: &ToolChainResult) {
        self.turns
            .push(Turn::from_result(&self.conversation, prompt, result));
        // The run's view of the conversation: a compaction of earlier turns
        // (to fit the model's context) is kept, not redone every turn.
        self.conversation = next_turn_history(result);
    }

    /// Takes the last turn off, with its two messages in the conversation,
    /// so it can be run again from the same context. `None` (and nothing
    /// changed) when the conversation does not end with the last turn (no
    /// turn yet, or the conversation was cleared since).
    pub fn pop_turn(&mut self) -> Option<Turn> {
        let last = self.turns.last()?;
        let at = self.conversation.len().checked_sub(2)?;
        let asked = &self.conversation[at];
        if asked.role != Role::User || asked.content != last.prompt {
            return None;
        }
        self.conversation.truncate(at);
        self.turns.pop()
    }

    /// Keeps a snapshot of the variables, leaving out the oldest while they
    /// take more than [`MAX_SAVED_VAR_BYTES`] (the newest is kept whatever
    /// its size), so the file stays far below [`MAX_SESSION_BYTES`].
    /// `agent` is the profile they were made under.
    pub fn set_vars(&mut self, mut vars: VarSnapshot, agent: Option<&str>) {
        self.vars_agent = agent.map(str::to_owned);
        let mut total: usize = 0;
        let mut keep_from = vars.vars.len();
        for (i, v) in vars.vars.iter().enumerate().rev() {
            total = total.saturating_add(v.text.len());
            if total > MAX_SAVED_VAR_BYTES && i + 1 < vars.vars.len() {
                break;
            }
            keep_from = i;
        }
        vars.vars.drain(..keep_from);
        self.vars = vars;
    }

    /// The variables to restore for a run under profile `agent`: the saved
    /// ones when they were made under the same profile, else none (with a
    /// warning), so that a `{"$var": …}` reference never carries a value a
    /// tool produced under one profile into a call under another. The
    /// names keep counting on either way.
    pub fn vars_for(&self, agent: Option<&str>) -> VarSnapshot {
        if self.vars_agent.as_deref() == agent || self.vars.vars.is_empty() {
            return self.vars.clone();
        }
        tracing::warn!(
            session = %self.name,
            saved = self.vars_agent.as_deref().unwrap_or("(none)"),
            now = agent.unwrap_or("(none)"),
            "the session's stored results were made under another profile: not restored"
        );
        VarSnapshot {
            issued: self.vars.issued,
            vars: Vec::new(),
        }
    }
}

/// What [`Store::list`] found for one file.
#[derive(Debug)]
pub struct Listing {
    /// The session's name (the file name without `.json`).
    pub name: String,
    /// Its summary, or why it could not be read.
    pub summary: Result<Summary, SessionError>,
}

/// A session's size and age.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// How many turns it has.
    pub turns: usize,
    /// When it was last saved.
    pub updated: DateTime<Utc>,
    /// Its model.
    pub model: Option<String>,
}

/// The sessions directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
    max_bytes: u64,
}

/// Just the version, read before the rest so a file of another version is
/// reported as such rather than as corrupt.
#[derive(Deserialize)]
struct Header {
    version: u64,
}

impl Store {
    /// The store in `dir` (created at the first save).
    pub fn new(dir: PathBuf) -> Store {
        Store {
            dir,
            max_bytes: MAX_SESSION_BYTES,
        }
    }

    /// The store in `dir` when given (`--sessions-dir`, or
    /// `TOOLHOST_SESSIONS_DIR`), else in the user's data directory.
    pub fn from_flag(dir: Option<&Path>) -> Result<Store, SessionError> {
        match dir {
            Some(dir) => Ok(Store::new(dir.to_owned())),
            None => directories::ProjectDirs::from("", "", "toolhost")
                .map(|d| Store::new(d.data_dir().join("sessions")))
                .ok_or(SessionError::NoDirectory),
        }
    }

    /// The same store with another size limit (for tests).
    #[cfg(test)]
    fn with_max_bytes(mut self, max: u64) -> Store {
        self.max_bytes = max;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `name`, once the name is checked.
    pub fn path(&self, name: &str) -> Result<PathBuf, SessionError> {
        validate_name(name)?;
        Ok(self.dir.join(format!("{name}.json")))
    }

    /// Reads session `name`. Refuses a file over the size limit, and reports
    /// a file that is not a session (or of another version) naming it.
    pub fn load(&self, name: &str) -> Result<Session, SessionError> {
        let path = self.path(name)?;
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(SessionError::NotFound {
                    name: name.to_owned(),
                    dir: self.dir.clone(),
                });
            }
            Err(e) => return Err(SessionError::io(&path, e)),
        };
        let too_large = || SessionError::TooLarge {
            path: path.clone(),
            max: self.max_bytes,
        };
        let len = file
            .metadata()
            .map_err(|e| SessionError::io(&path, e))?
            .len();
        if len > self.max_bytes {
            return Err(too_large());
        }
        // The file may grow after the check: read one byte more than allowed
        // at most, whatever its length said.
        let mut bytes = Vec::new();
        file.take(self.max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| SessionError::io(&path, e))?;
        if u64::try_from(bytes.len()).map_or(true, |n| n > self.max_bytes) {
            return Err(too_large());
        }
        let corrupt = |source| SessionError::Corrupt {
            path: path.clone(),
            source,
        };
        let header: Header = serde_json::from_slice(&bytes).map_err(corrupt)?;
        if header.version != FORMAT_VERSION {
            return Err(SessionError::UnsupportedVersion {
                path: path.clone(),
                found: header.version,
            });
        }
        let mut session: Session = serde_json::from_slice(&bytes).map_err(corrupt)?;
        // The file's name is the session's name, whatever the file says.
        name.clone_into(&mut session.name);
        Ok(session)
    }

    /// Reads session `name`, or starts a new one when there is none.
    pub fn load_or_new(&self, name: &str, model: Option<&str>) -> Result<Session, SessionError> {
        match self.load(name) {
            Err(SessionError::NotFound { .. }) => Ok(Session::new(name, model)),
            other => other,
        }
    }

    /// Writes `session` to its file, setting its `updated` time.
    ///
    /// Atomic: the JSON goes to a temporary file in the same directory,
    /// which is flushed to disk (`fsync`) and then renamed over the session
    /// file. A rename within one file system replaces the name in one step,
    /// so a crash (or a full disk, or a session over the size limit) at any
    /// point leaves either the old file whole or the new file whole, never a
    /// mix; the fsync before the rename makes sure the new name never points
    /// at data still in the page cache, and the directory is synced after it
    /// so the rename itself is durable. A failed write removes its temporary
    /// file. Two processes saving the same session at once: the last rename
    /// wins, whole.
    pub fn save(&self, session: &mut Session) -> Result<PathBuf, SessionError> {
        let path = self.path(&session.name)?;
        session.version = FORMAT_VERSION;
        session.updated = Utc::now();
        std::fs::create_dir_all(&self.dir).map_err(|e| SessionError::io(&self.dir, e))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".")
            .suffix(".json.tmp")
            .tempfile_in(&self.dir)
            .map_err(|e| SessionError::io(&self.dir, e))?;
        let tmp_path = tmp.path().to_owned();
        {
            let mut out = Bounded {
                inner: std::io::BufWriter::new(tmp.as_file_mut()),
                left: self.max_bytes,
            };
            if let Err(e) = serde_json::to_writer_pretty(&mut out, &*session) {
                return Err(if out.left == 0 && e.is_io() {
                    SessionError::TooLarge {
                        path,
                        max: self.max_bytes,
                    }
                } else {
                    SessionError::io(&tmp_path, std::io::Error::other(e))
                });
            }
            out.inner
                .flush()
                .map_err(|e| SessionError::io(&tmp_path, e))?;
        }
        tmp.as_file()
            .sync_all()
            .map_err(|e| SessionError::io(tmp.path(), e))?;
        tmp.persist(&path)
            .map_err(|e| SessionError::io(&path, e.error))?;
        sync_dir(&self.dir);
        Ok(path)
    }

    /// Every session in the directory, by name; a file that cannot be read
    /// is listed with its error, and the others are still listed. Files
    /// that are not `NAME.json` with a valid name (temporary files, other
    /// files) are skipped. No directory: no sessions.
    pub fn list(&self) -> Result<Vec<Listing>, SessionError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(SessionError::io(&self.dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| SessionError::io(&self.dir, e))?;
            let file_name = entry.file_name();
            let Some(name) = file_name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .filter(|n| validate_name(n).is_ok())
            else {
                continue;
            };
            let summary = self.load(name).map(|s| Summary {
                turns: s.turns.len(),
                updated: s.updated,
                model: s.model,
            });
            out.push(Listing {
                name: name.to_owned(),
                summary,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// Makes a rename in `dir` durable (best effort: not every platform can
/// open a directory for syncing).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::debug!(dir = %dir.display(), error = %e, "could not sync the sessions directory");
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// A writer that fails once more than `left` bytes were written.
struct Bounded<W> {
    inner: W,
    left: u64,
}

impl<W: Write> Write for Bounded<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        match self.left.checked_sub(n) {
            Some(left) => {
                self.left = left;
                self.inner.write(buf).inspect(|written| {
                    // Give back what the inner writer did not take.
                    let unwritten = buf.len().saturating_sub(*written);
                    self.left = self
                        .left
                        .saturating_add(u64::try_from(unwritten).unwrap_or(u64::MAX));
                })
            }
            None => {
                self.left = 0;
                Err(std::io::Error::other("over the size limit"))
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolhost_agent::{Stats, VarStore};

    fn result(prompt_context: &[Message], prompt: &str, answer: &str) -> ToolChainResult {
        let mut messages = prompt_context.to_vec();
        messages.push(Message::user(prompt));
        messages.push(Message::assistant(answer));
        ToolChainResult {
            status: Status::Completed,
            error: None,
            text: answer.to_owned(),
            messages,
            history: Vec::new(),
            usage: Usage::default(),
            stats: Stats::default(),
            answer_source: Default::default(),
        }
    }

    fn session_with_turn(name: &str) -> Session {
        let mut s = Session::new(name, Some("m"));
        let r = result(&[], "hello", "hi there");
        s.push_turn("hello", &r);
        s
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn names_that_could_leave_the_directory_are_refused() {
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "a b",
            "é",
            "a\0b",
            &"x".repeat(65),
        ] {
            assert!(
                matches!(validate_name(bad), Err(SessionError::InvalidName { .. })),
                "{bad:?}"
            );
        }
        for good in ["s", "my-chat_2.v1", &"x".repeat(64), "a..b"] {
            validate_name(good).unwrap();
        }
    }

    #[test]
    fn a_saved_session_loads_back_equal_with_its_tool_calls_and_variables() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("sessions"));
        let mut s = session_with_turn("s");
        let record: ToolCallRecord = serde_json::from_value(serde_json::json!({
            "call_id": "c1", "tool": "calculate", "requested_name": "Calculate",
            "arguments": "{\"expression\":\"1+1\"}", "args": {"expression": "1+1"},
            "output": "2", "is_error": false, "error_kind": null,
            "details": {"value": 2}, "var": "result_1", "started_at_ms": 1,
            "ended_at_ms": 2, "duration_ms": 1, "round": 1,
            "round_usage": {"input_tokens": 5, "output_tokens": 1,
                            "cache_read_tokens": 0, "cache_write_tokens": 0}
        }))
        .unwrap();
        s.turns[0].history.push(record);
        let vars = VarStore::new();
        vars.insert("2".to_owned());
        s.set_vars(vars.snapshot(), None);
        store.save(&mut s).unwrap();
        let back = store.load("s").unwrap();
        assert_eq!(back, s);
        assert_eq!(
            back.turns[0].history[0].details,
            Some(serde_json::json!({"value": 2}))
        );
        assert_eq!(files(store.dir()), ["s.json"]);
    }

    #[test]
    fn a_failed_write_leaves_the_old_file_whole_and_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_owned()).with_max_bytes(4096);
        let mut s = session_with_turn("s");
        store.save(&mut s).unwrap();
        let before = std::fs::read(dir.path().join("s.json")).unwrap();

        // Over the limit in the middle of the write.
        let mut big = s.clone();
        big.push_turn(
            "again",
            &result(&s.conversation, "again", &"x".repeat(8192)),
        );
        let err = store.save(&mut big).unwrap_err();
        assert!(matches!(err, SessionError::TooLarge { .. }), "{err}");
        assert_eq!(std::fs::read(dir.path().join("s.json")).unwrap(), before);
        assert_eq!(files(dir.path()), ["s.json"], "no temporary file is left");
        assert_eq!(store.load("s").unwrap().turns.len(), 1);
    }

    #[test]
    fn a_file_over_the_size_limit_is_refused_before_parsing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_owned()).with_max_bytes(100);
        std::fs::write(dir.path().join("big.json"), " ".repeat(101)).unwrap();
        let err = store.load("big").unwrap_err();
        assert!(matches!(err, SessionError::TooLarge { .. }), "{err}");
        assert!(err.to_string().contains("big.json"), "{err}");
    }

    #[test]
    fn another_version_and_a_corrupt_file_are_told_apart_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_owned());
        let mut s = session_with_turn("v");
        store.save(&mut s).unwrap();
        let mut json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("v.json")).unwrap()).unwrap();
        json["version"] = 2.into();
        std::fs::write(dir.path().join("v.json"), json.to_string()).unwrap();
        let err = store.load("v").unwrap_err();
        assert!(
            matches!(err, SessionError::UnsupportedVersion { found: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("v.json"), "{err}");

        std::fs::write(dir.path().join("c.json"), b"{\"version\": 1, \"name\": ").unwrap();
        let err = store.load("c").unwrap_err();
        assert!(matches!(err, SessionError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("c.json"), "{err}");

        // The right version with the wrong shape is corrupt too.
        std::fs::write(dir.path().join("w.json"), b"{\"version\": 1, \"turns\": 3}").unwrap();
        assert!(matches!(
            store.load("w").unwrap_err(),
            SessionError::Corrupt { .. }
        ));
    }

    #[test]
    fn the_listing_flags_a_corrupt_file_and_still_lists_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_owned());
        store.save(&mut session_with_turn("good")).unwrap();
        std::fs::write(dir.path().join("bad.json"), b"\x00garbage").unwrap();
        std::fs::write(dir.path().join(".x.json.tmp"), b"partial").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"not a session").unwrap();
        let list = store.list().unwrap();
        let names: Vec<&str> = list.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["bad", "good"]);
        assert!(matches!(list[0].summary, Err(SessionError::Corrupt { .. })));
        assert_eq!(list[1].summary.as_ref().unwrap().turns, 1);
    }

    #[test]
    fn loading_a_missing_session_starts_a_new_one_and_a_bad_name_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().to_owned());
        let s = store.load_or_new("fresh", Some("m")).unwrap();
        assert!(s.turns.is_empty() && s.conversation.is_empty());
        assert!(matches!(
            store.load("fresh"),
            Err(SessionError::NotFound { .. })
        ));
        assert!(matches!(
            store.load_or_new("../x", None),
            Err(SessionError::InvalidName { .. })
        ));
        let mut bad = Session::new("../x", None);
        assert!(matches!(
            store.save(&mut bad),
            Err(SessionError::InvalidName { .. })
        ));
        assert!(files(dir.path()).is_empty());
    }

    #[test]
    fn popping_the_last_turn_restores_the_context_it_ran_on() {
        let mut s = session_with_turn("p");
        let context = s.conversation.clone();
        s.push_turn("second", &result(&context, "second", "two"));
        assert_eq!(s.turns[1].messages.len(), 2, "the prompt and the answer");
        let turn = s.pop_turn().unwrap();
        assert_eq!(turn.prompt, "second");
        assert_eq!(s.conversation, context);
        assert_eq!(s.turns.len(), 1);
        // After the conversation was cleared, there is nothing to run again.
        s.conversation.clear();
        assert!(s.pop_turn().is_none());
        assert_eq!(s.turns.len(), 1);
    }

    #[test]
    fn saved_variables_keep_the_newest_within_their_bound() {
        let mut s = Session::new("v", None);
        let vars = VarStore::new();
        vars.insert("a".repeat(MAX_SAVED_VAR_BYTES));
        vars.insert("b".to_owned());
        vars.insert("c".to_owned());
        s.set_vars(vars.snapshot(), None);
        let names: Vec<&str> = s.vars.vars.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["result_2", "result_3"]);
        assert_eq!(s.vars.issued, 3);
        let huge = VarStore::new();
        huge.insert("z".repeat(MAX_SAVED_VAR_BYTES + 1));
        s.set_vars(huge.snapshot(), None);
        assert_eq!(s.vars.vars.len(), 1, "the newest is kept whatever its size");
    }

    #[test]
    fn stored_results_come_back_only_under_the_profile_they_were_made_under() {
        let mut s = Session::new("v", None);
        let vars = VarStore::new();
        vars.insert("the reviewer's secret".to_owned());
        s.set_vars(vars.snapshot(), Some("reviewer"));
        assert_eq!(s.vars_for(Some("reviewer")).vars.len(), 1);
        for other in [Some("coder"), None] {
            let restored = s.vars_for(other);
            assert!(restored.vars.is_empty(), "{other:?}: {restored:?}");
            assert_eq!(restored.issued, 1, "names keep counting on");
        }
        // Saved and read back, the profile is kept.
        let text = serde_json::to_string(&s).unwrap();
        let back: Session = serde_json::from_str(&text).unwrap();
        assert!(back.vars_for(Some("coder")).vars.is_empty());
    }
}
