//! How a call's path arguments resolve on the host, for path patterns
//! (`args.path = { path = "secret/**" }`) and "this directory" approvals:
//! the base a relative path joins (the tool's first granted directory),
//! and, for the argument a per-call grant opened, where the object it
//! opened really is. A rule or an approval then decides on that object,
//! the one the tool will be handed, not on a second look at the path
//! (which a link swapped in meanwhile could send elsewhere).

use std::path::Path;

/// How a call's path arguments resolve (see the module's text).
///
/// ```
/// use std::path::Path;
/// use toolhost_policy::PathContext;
///
/// let paths = PathContext::default()
///     .base(Path::new("/srv/notes"))
///     .opened("/path", Some(Path::new("/srv/notes/todo.txt")));
/// assert_eq!(paths.opened_at(&["path"]), Some(Some(Path::new("/srv/notes/todo.txt"))));
/// assert_eq!(paths.opened_at(&["other"]), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct PathContext<'a> {
    /// What a relative path joins: the tool's first granted directory.
    pub base: Option<&'a Path>,
    /// The argument a per-call grant opened before the decision.
    pub opened: Option<OpenedArg<'a>>,
}

/// The argument whose path was opened once, before any decision, and
/// what the opening found.
#[derive(Debug, Clone, Copy)]
pub struct OpenedArg<'a> {
    /// The argument's JSON pointer (`/path`).
    pub pointer: &'a str,
    /// Where the opened file or directory really is (links followed, at
    /// the moment it was opened); `None` when nothing was there.
    pub real: Option<&'a Path>,
}

impl<'a> PathContext<'a> {
    /// Sets the base relative paths join.
    pub fn base(mut self, base: &'a Path) -> Self {
        self.base = Some(base);
        self
    }

    /// Records that the argument at `pointer` was opened, and where what
    /// was opened is (`None`: nothing there).
    pub fn opened(mut self, pointer: &'a str, real: Option<&'a Path>) -> Self {
        self.opened = Some(OpenedArg { pointer, real });
        self
    }

    /// For the argument at the object keys `key` (`["path"]` for `/path`):
    /// `Some(real)` when it is the opened one, `None` when it is not (its
    /// path is then looked at on the file system as usual).
    pub fn opened_at(&self, key: &[impl AsRef<str>]) -> Option<Option<&'a Path>> {
        let opened = self.opened?;
        let mut rest = opened.pointer.strip_prefix('/')?;
        for (i, seg) in key.iter().enumerate() {
            let (head, tail) = match rest.split_once('/') {
                Some((head, tail)) => (head, Some(tail)),
                None => (rest, None),
            };
            if unescape(head) != seg.as_ref() {
                return None;
            }
            match tail {
                Some(tail) if i + 1 < key.len() => rest = tail,
                None if i + 1 == key.len() => return Some(opened.real),
                _ => return None,
            }
        }
        None
    }
}

/// A JSON pointer's reference token as the key it names (`~1` is `/`,
/// `~0` is `~`).
fn unescape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains('~') {
        token.replace("~1", "/").replace("~0", "~").into()
    } else {
        token.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_opened_argument_is_found_by_its_keys_and_no_other() {
        let real = Path::new("/srv/a");
        let p = PathContext::default().opened("/in/path", Some(real));
        assert_eq!(p.opened_at(&["in", "path"]), Some(Some(real)));
        assert_eq!(p.opened_at(&["in"]), None);
        assert_eq!(p.opened_at(&["in", "path", "x"]), None);
        assert_eq!(p.opened_at(&["path"]), None);
        let escaped = PathContext::default().opened("/a~1b~0c", None);
        assert_eq!(escaped.opened_at(&["a/b~c"]), Some(None));
        assert_eq!(PathContext::default().opened_at(&["path"]), None);
    }
}
