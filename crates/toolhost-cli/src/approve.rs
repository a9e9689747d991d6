//! Approval prompts: the policy (or a hook) asks about a call, or a result
//! waits for approval. The question goes to stderr; the answer is one line
//! of stdin. No answer (stdin closed or not readable) is a deny.

use std::io::{BufRead, Write};

use toolhost_runtime::{
    ApprovalFuture, Approver, CallApproval, CallApprovalRequest, ResultApproval,
    ResultApprovalRequest,
};

/// Asks on the terminal (stderr + stdin), one question at a time.
#[derive(Default)]
pub struct PromptApprover {
    one_at_a_time: tokio::sync::Mutex<()>,
}

/// How much of a result the prompt shows.
const SHOWN: usize = 2000;

/// Parses an answer to a call question: `y`/`yes` once, `a`/`always`, or
/// `n`/`no` with an optional message after it (`n use the cache`). Anything
/// else, or nothing, is a deny.
pub fn parse_call_answer(line: Option<&str>) -> CallApproval {
    let Some(line) = line else {
        return CallApproval::Deny {
            message: Some("no answer: nobody is at the terminal".into()),
        };
    };
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => CallApproval::AllowOnce,
        "a" | "always" => CallApproval::AllowAlways,
        _ => CallApproval::Deny {
            message: message(word, rest),
        },
    }
}

/// Parses an answer to a result question: `y`/`yes` accepts; `n` with an
/// optional message (or anything else) rejects.
pub fn parse_result_answer(line: Option<&str>) -> ResultApproval {
    let line = line.unwrap_or_default().trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => ResultApproval::Accept,
        _ => ResultApproval::Reject {
            message: message(word, rest),
        },
    }
}

/// The message that follows `n`/`no` (or the whole answer when it is not a keyword).
fn message(word: &str, rest: &str) -> Option<String> {
    let text = match word.to_ascii_lowercase().as_str() {
        "n" | "no" | "" => rest.trim().to_owned(),
        _ => format!("{word} {rest}").trim().to_owned(),
    };
    (!text.is_empty()).then_some(text)
}

/// Reads one line of stdin off the async workers; `None` at end of input.
async fn read_answer() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    })
    .await
    .ok()
    .flatten()
}

fn ask(question: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{question}");
    let _ = err.flush();
}

impl Approver for PromptApprover {
    fn approve_call<'a>(
        &'a self,
        req: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            ask(&format!(
                "\n? {} ({}) wants to run with {}\n  because: {}\n  allow? [y]es once / [a]lways / [n]o, optionally followed by a message for the model: ",
                req.tool,
                req.plugin,
                req.args,
                req.reasons.join("; ")
            ));
            parse_call_answer(read_answer().await.as_deref())
        })
    }

    fn approve_result<'a>(
        &'a self,
        req: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            let shown: String = req.output.chars().take(SHOWN).collect();
            let more = if shown.len() < req.output.len() {
                "\n  […]"
            } else {
                ""
            };
            ask(&format!(
                "\n? the result of {} ({}):\n{shown}{more}\n  send it to the model? [y]es / [n]o, optionally followed by a message: ",
                req.tool, req.plugin
            ));
            parse_result_answer(read_answer().await.as_deref())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_answers_parse_with_an_optional_message() {
        assert_eq!(parse_call_answer(Some("y\n")), CallApproval::AllowOnce);
        assert_eq!(parse_call_answer(Some("Always")), CallApproval::AllowAlways);
        assert_eq!(
            parse_call_answer(Some("n read the README instead\n")),
            CallApproval::Deny {
                message: Some("read the README instead".into())
            }
        );
        assert_eq!(
            parse_call_answer(Some("")),
            CallApproval::Deny { message: None }
        );
        assert!(matches!(
            parse_call_answer(None),
            CallApproval::Deny { message: Some(m) } if m.contains("no answer")
        ));
    }

    #[test]
    fn result_answers_parse() {
        assert_eq!(parse_result_answer(Some("yes")), ResultApproval::Accept);
        assert_eq!(
            parse_result_answer(Some("no too long")),
            ResultApproval::Reject {
                message: Some("too long".into())
            }
        );
        assert_eq!(
            parse_result_answer(None),
            ResultApproval::Reject { message: None }
        );
    }
}
