//! Why something failed, in words a person reads: the cause at the bottom
//! of an error's chain, said once.
//!
//! An error from an HTTP client or a transport is a chain: "error sending
//! request for url (…)", then "client error (Connect)", then "tcp connect
//! error", then the operating system's "Connection refused (os error
//! 111)". Printing every link repeats the URL and the words; printing the
//! `Debug` form (`Os { code: 111, kind: ConnectionRefused, … }`) shows a
//! person the program's insides. [`cause`] gives the last link, and for an
//! I/O error the words for its kind (`connection refused`), so a message
//! can say what failed (the caller knows: "cannot reach the registry at
//! …"), then why, once.
//!
//! ```
//! use toolhost_text::cause;
//!
//! let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
//! assert_eq!(cause(&refused), "connection refused");
//! let missing = std::io::Error::from_raw_os_error(2);
//! assert_eq!(cause(&missing), "no such file or directory");
//! ```

use std::error::Error;
use std::io::ErrorKind;

/// The cause of `error` in words: the innermost error of its chain
/// ([`Error::source`]), an I/O error as the words for its kind, anything
/// else as its own text without an `(os error N)` tail. At most 300
/// characters, on one line, safe to show ([`crate::line`]).
#[must_use]
pub fn cause(error: &(dyn Error + 'static)) -> String {
    let mut innermost = error;
    // Bounded: a chain that loops (a buggy `source`) ends after 64 links.
    for _ in 0..64 {
        match innermost.source() {
            Some(next) => innermost = next,
            None => break,
        }
    }
    let text = match innermost.downcast_ref::<std::io::Error>() {
        Some(io) => io_words(io),
        None => without_os_code(&innermost.to_string()),
    };
    crate::line(&text, 300)
}

/// What an I/O error means, in lower-case words.
fn io_words(e: &std::io::Error) -> String {
    let words = match e.kind() {
        ErrorKind::NotFound => "no such file or directory",
        ErrorKind::PermissionDenied => "permission denied",
        ErrorKind::ConnectionRefused => "connection refused",
        ErrorKind::ConnectionReset => "the connection was reset",
        ErrorKind::ConnectionAborted => "the connection was aborted",
        ErrorKind::NotConnected => "not connected",
        ErrorKind::AddrInUse => "the address is already in use",
        ErrorKind::AddrNotAvailable => "the address is not available on this machine",
        ErrorKind::HostUnreachable => "the host is unreachable",
        ErrorKind::NetworkUnreachable => "the network is unreachable",
        ErrorKind::NetworkDown => "the network is down",
        ErrorKind::BrokenPipe => "the other end closed the connection",
        ErrorKind::AlreadyExists => "it already exists",
        ErrorKind::TimedOut => "timed out",
        ErrorKind::UnexpectedEof => "it ended early",
        ErrorKind::NotADirectory => "not a directory",
        ErrorKind::IsADirectory => "it is a directory",
        ErrorKind::ReadOnlyFilesystem => "the file system is read-only",
        ErrorKind::StorageFull => "no space left on the device",
        _ => return lower_first(&without_os_code(&e.to_string())),
    };
    words.to_owned()
}

/// `text` without the `(os error N)` an I/O error's text ends with.
fn without_os_code(text: &str) -> String {
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_owned(),
        _ => text.to_owned(),
    }
}

/// `text` with its first letter in lower case (`Name or service not
/// known` reads as the end of a sentence after a colon), unless the first
/// word is an acronym (`TLS …`).
fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && !second.is_uppercase() => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error sending request for url (http://127.0.0.1:9/)")
        }
    }
    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_innermost_io_error_is_said_in_words_without_its_code() {
        let e = Outer(std::io::Error::from_raw_os_error(111));
        assert_eq!(cause(&e), "connection refused");
        let e = std::io::Error::other("Name or service not known (os error -2)");
        assert_eq!(cause(&e), "name or service not known");
    }

    #[test]
    fn an_error_without_a_source_is_its_own_text() {
        let e = std::fmt::Error;
        assert_eq!(cause(&e), "an error occurred when formatting an argument");
        assert_eq!(lower_first("TLS handshake failed"), "TLS handshake failed");
    }
}
