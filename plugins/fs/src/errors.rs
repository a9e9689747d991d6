//! Readable messages for I/O errors.

use std::io;
use std::path::Path;

use toolhost_sdk::ToolError;

/// Turns an I/O error on `path` into a `failed` tool error that says what
/// went wrong in words a model can act on. `action` is e.g. "read".
pub fn io_error(error: &io::Error, path: &Path, action: &str) -> ToolError {
    let p = path.display();
    ToolError::failed(match error.kind() {
        io::ErrorKind::NotFound => format!("'{p}' does not exist"),
        io::ErrorKind::PermissionDenied => format!(
            "cannot {action} '{p}': permission denied (it may be outside the directories \
             granted to this plugin, for example through a symbolic link)"
        ),
        io::ErrorKind::IsADirectory => {
            format!("'{p}' is a directory, not a file (use list_dir to see what it contains)")
        }
        io::ErrorKind::NotADirectory => format!("'{p}' is not a directory"),
        io::ErrorKind::InvalidData => format!("'{p}' is not a UTF-8 text file"),
        _ => format!("cannot {action} '{p}': {error}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        let p = Path::new("/g/x");
        let e = |k| {
            io_error(&io::Error::from(k), p, "read")
                .message()
                .to_string()
        };
        assert_eq!(e(io::ErrorKind::NotFound), "'/g/x' does not exist");
        assert!(
            e(io::ErrorKind::PermissionDenied).starts_with("cannot read '/g/x': permission denied")
        );
        assert!(e(io::ErrorKind::IsADirectory).contains("is a directory"));
        assert_eq!(e(io::ErrorKind::NotADirectory), "'/g/x' is not a directory");
        assert!(e(io::ErrorKind::TimedOut).starts_with("cannot read '/g/x': "));
    }
}
