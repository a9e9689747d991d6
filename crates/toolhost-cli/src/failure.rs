//! An error as the person at the terminal reads it: what failed, then
//! why, each said once. A library error that carries its cause as its
//! `source` and also prints it (`cannot read X: No such file or directory
//! (os error 2)`, then that cause again) is said once; an I/O error as the
//! words for its kind, without its `(os error N)`.

/// The text of `error` after `error: `: each link of its chain, joined
/// with `: `, leaving out a link whose text the line already holds; the
/// innermost I/O error in words ([`toolhost_text::cause`]).
pub fn said_once(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for link in error.chain() {
        let text = match link.downcast_ref::<std::io::Error>() {
            Some(io) => toolhost_text::cause(io),
            None => link.to_string(),
        };
        let text = text.trim();
        if text.is_empty() || contains(&line, text) {
            continue;
        }
        // A link that repeats an I/O error's own text (`…: No such file or
        // directory (os error 2)`) keeps only what it adds.
        let text = match link
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>())
        {
            Some(io) => {
                let raw = io.to_string();
                text.strip_suffix(raw.as_str())
                    .map_or(text, |t| t.trim_end().trim_end_matches(':'))
                    .to_owned()
            }
            None => text.to_owned(),
        };
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn contains(line: &str, text: &str) -> bool {
    !line.is_empty() && line.contains(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read plugin directory nofile.wasm: {source}")]
    struct Doubled {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_the_message_already_holds_is_said_once_and_in_words() {
        let e = anyhow::Error::new(Doubled {
            source: std::io::Error::from_raw_os_error(2),
        });
        assert_eq!(
            said_once(&e),
            "cannot read plugin directory nofile.wasm: no such file or directory"
        );
        let e = anyhow::Error::new(std::io::Error::from_raw_os_error(13)).context("cannot write x");
        assert_eq!(said_once(&e), "cannot write x: permission denied");
    }
}
