//! Approval prompts: the policy (or a hook) asks about a call, or a result
//! waits for approval. The question goes to stderr; the answer is one line
//! of stdin. No answer (stdin closed or not readable) is a deny, and so is
//! a stdin that is not a terminal (`yes | host run` approves nothing)
//! unless `--answers-from-stdin` says answers may come from a pipe.
//!
//! Everything in a question that a plugin, a hook or the model wrote (the
//! arguments, the reasons, the result) is shown with control characters
//! escaped ([`printable`](crate::shown::printable)), so it cannot move the cursor, rewrite the
//! question or hide text from the user.
//!
//! A call's arguments are listed one per line, each cut on its own
//! ([`ShownArguments`]), so a long `content` never pushes `path` out of
//! view; when one was cut, `[a]lways with these arguments` is not offered,
//! and `a` is a deny: nobody saw the bytes it would approve.

use std::io::{IsTerminal, Write};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;

use crate::shown::{self, printable};

use toolhost_runtime::policy::approvals::Scope;
use toolhost_runtime::{
    Approver, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::FormAnswer, permission::FormRequest,
    permission::ResultApproval, permission::ResultApprovalRequest, shown::ShownArguments,
};

/// Asks on the terminal (stderr + stdin), one question at a time.
#[derive(Default)]
pub struct PromptApprover {
    one_at_a_time: tokio::sync::Mutex<()>,
    /// Answers may come from a stdin that is not a terminal.
    from_pipe: bool,
}

impl PromptApprover {
    /// An approver that takes answers only from a terminal, or also from a
    /// pipe when `from_pipe` (scripted sessions that mean it).
    pub fn new(from_pipe: bool) -> Self {
        PromptApprover {
            one_at_a_time: tokio::sync::Mutex::new(()),
            from_pipe,
        }
    }

    /// The next answer, or `None` when there is nobody to ask.
    async fn answer(&self) -> Option<String> {
        if !self.from_pipe && !std::io::stdin().is_terminal() {
            let _ = writeln!(
                std::io::stderr(),
                "\n  (stdin is not a terminal: no answer taken from it; use --yes, a policy rule, or --answers-from-stdin)"
            );
            return None;
        }
        read_answer().await
    }
}

/// The user's answer when the same call repeats (a doom loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatAnswer {
    /// Let this call run.
    Once,
    /// Let repeated calls run for the rest of the session.
    Always,
    /// Refuse it: the model is asked for its answer.
    Stop,
}

/// Parses an answer to the doom-loop question: `o`/`y` once, `a` always,
/// anything else (or no answer) stop.
pub fn parse_repeat_answer(line: Option<&str>) -> RepeatAnswer {
    match line.map(|l| l.trim().to_ascii_lowercase()).as_deref() {
        Some("o" | "once" | "y" | "yes") => RepeatAnswer::Once,
        Some("a" | "always") => RepeatAnswer::Always,
        _ => RepeatAnswer::Stop,
    }
}

impl PromptApprover {
    /// Asks whether a call the model repeated (or a cycle of calls it
    /// went round) may run again.
    pub async fn ask_repeat(&self, doom: &toolhost_agent::DoomLoop) -> RepeatAnswer {
        let _turn = self.one_at_a_time.lock().await;
        let repeats = doom.repeats;
        let question = if doom.cycle.len() > 1 {
            let names: Vec<String> = doom.cycle.iter().map(|t| printable(t)).collect();
            format!(
                "\n? the model called {} in turn, {repeats} times over, with the same arguments\n  let it run again? [o]nce / [a]lways this session / [s]top and answer: ",
                names.join(", then ")
            )
        } else {
            format!(
                "\n? the model called {} {repeats} times in a row with {}\n  let it run again? [o]nce / [a]lways this session / [s]top and answer: ",
                printable(&doom.tool),
                printable(&doom.arguments)
            )
        };
        ask(&question);
        parse_repeat_answer(self.answer().await.as_deref())
    }
}

/// What a call question offers besides once, the tool, no and stop.
#[derive(Debug, Clone, Copy)]
pub struct Offered<'a> {
    /// `a`/`always`: saved for these arguments (only when every argument
    /// was shown whole).
    pub always: bool,
    /// The directory and host the answer may be saved for.
    pub scopes: &'a [Scope],
}

/// Parses an answer to a call question: `y`/`yes` once, `a`/`always`
/// (saved for these arguments, when offered), `d`/`directory` and
/// `h`/`host` (saved for the directory or host among the offered scopes),
/// `t`/`tool` (saved for any arguments), `n`/`no` with an optional message
/// after it (`n use the cache`), or `s`/`stop` (deny, and end the turn).
/// Anything else, something not offered, or nothing, is a deny.
pub fn parse_call_answer(line: Option<&str>, offered: Offered<'_>) -> CallApproval {
    let scopes = offered.scopes;
    let Some(line) = line else {
        return CallApproval::Deny {
            message: Some("no answer: nobody is at the terminal".into()),
        };
    };
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => CallApproval::AllowOnce,
        "a" | "always" if offered.always => CallApproval::AllowAlways,
        "a" | "always" => CallApproval::Deny {
            message: Some(
                "not run: these arguments could not be allowed always (some were too long to \
                 show whole); ask again to allow it once"
                    .to_owned(),
            ),
        },
        "t" | "tool" => CallApproval::AllowTool,
        w @ ("d" | "directory" | "h" | "host") => {
            let offered = scopes.iter().find(|s| {
                matches!(
                    (w.starts_with('d'), s),
                    (true, Scope::Directory { .. }) | (false, Scope::Host { .. })
                )
            });
            match offered {
                Some(scope) => CallApproval::AllowWithin(scope.clone()),
                // Not offered for this call: a deny, as any other word.
                None => CallApproval::Deny {
                    message: message(word, rest),
                },
            }
        }
        "s" | "stop" => CallApproval::DenyAndStop {
            message: message(word, rest),
        },
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
        "n" | "no" | "s" | "stop" | "" => rest.trim().to_owned(),
        _ => format!("{word} {rest}").trim().to_owned(),
    };
    (!text.is_empty()).then_some(text)
}

/// Reads one line of stdin off the async workers; `None` at end of input,
/// or once the prompt is given up (its call cancelled or timed out): the
/// read stops then, so the user's next line goes to whoever asks next, not
/// to a question nobody waits for any more.
async fn read_answer() -> Option<String> {
    struct GiveUp(Arc<AtomicBool>);
    impl Drop for GiveUp {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let gone = Arc::new(AtomicBool::new(false));
    let _give_up = GiveUp(gone.clone());
    tokio::task::spawn_blocking(move || read_line(&std::io::stdin(), &gone))
        .await
        .ok()
        .flatten()
}

/// The longest answer kept, in bytes; the rest of the line is dropped.
const MAX_ANSWER: usize = 64 * 1024;

/// Reads one line from `input` without buffering past it (the rest stays
/// for the next reader: the next prompt, or the interactive session's line
/// editor), looking every 100 ms whether `gone` says to stop waiting.
fn read_line(input: &impl AsFd, gone: &AtomicBool) -> Option<String> {
    let tick = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 100_000_000,
    };
    let mut line = Vec::new();
    loop {
        loop {
            if gone.load(Ordering::Relaxed) {
                return None;
            }
            let mut fds = [PollFd::new(input, PollFlags::IN)];
            match poll(&mut fds, Some(&tick)) {
                Ok(0) | Err(Errno::INTR) => {}
                // Readable, at its end, or not pollable: read.
                _ => break,
            }
        }
        let mut byte = [0u8; 1];
        match rustix::io::read(input, &mut byte) {
            Ok(0) if line.is_empty() => return None,
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                if line.len() < MAX_ANSWER {
                    line.push(byte[0]);
                }
            }
            Err(Errno::INTR | Errno::AGAIN) => {}
            Err(_) => return None,
        }
    }
    Some(String::from_utf8_lossy(&line).into_owned())
}

fn ask(question: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{question}");
    let _ = err.flush();
}

impl Approver for PromptApprover {
    fn prompt_name(&self) -> &'static str {
        "terminal"
    }

    fn approve_call<'a>(
        &'a self,
        req: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            let (question, offered) = call_question(req);
            ask(&question);
            parse_call_answer(self.answer().await.as_deref(), offered)
        })
    }

    fn approve_result<'a>(
        &'a self,
        req: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async move {
            let _turn = self.one_at_a_time.lock().await;
            let shown: String = req.output.chars().take(shown::SHOWN).collect();
            let more = if shown.len() < req.output.len() {
                "\n  […]"
            } else {
                ""
            };
            ask(&format!(
                "\n? the result of {} ({}):\n{}{more}\n  send it to the model? [y]es / [n]o, optionally followed by a message: ",
                printable(req.tool),
                printable(req.plugin),
                printable(&shown)
            ));
            parse_result_answer(self.answer().await.as_deref())
        })
    }

    /// The form an MCP server asks during a call (`form.rs`): yes, no or
    /// cancel, then each field, an empty answer taking its default. No
    /// answer (stdin closed, or not a terminal) declines.
    fn answer_form<'a>(&'a self, req: &'a FormRequest<'a>) -> ApprovalFuture<'a, FormAnswer> {
        Box::pin(async move {
            use crate::form;
            let _turn = self.one_at_a_time.lock().await;
            let Some(fields) = form::fields(req.schema) else {
                ask(&format!(
                    "\n? the MCP server `{}` asked a question that is not a form of plain fields: declined\n",
                    printable(req.plugin)
                ));
                return FormAnswer::Decline;
            };
            ask(&format!(
                "\n? the MCP server `{}` (during `{}`) asks: {}\n  fill it in? [y]es / [n]o (decline) / [c]ancel: ",
                printable(req.plugin),
                printable(req.tool),
                printable(req.message)
            ));
            match self
                .answer()
                .await
                .map(|a| a.trim().to_ascii_lowercase())
                .as_deref()
            {
                Some("y" | "yes") => {}
                Some("c" | "cancel") => return FormAnswer::Cancel,
                _ => return FormAnswer::Decline,
            }
            let mut values = Vec::new();
            for field in &fields {
                let mut tries = 0;
                loop {
                    ask(&form::question(field));
                    let Some(line) = self.answer().await else {
                        return FormAnswer::Cancel;
                    };
                    match form::value(field, &line) {
                        Ok(value) => {
                            values.push((field.name.clone(), value));
                            break;
                        }
                        Err(why) => {
                            tries += 1;
                            if tries >= form::MAX_TRIES {
                                ask("  (no answer that fits: cancelled)\n");
                                return FormAnswer::Cancel;
                            }
                            ask(&format!("  ({why})\n"));
                        }
                    }
                }
            }
            FormAnswer::Accept(form::content(values))
        })
    }
}

/// The question about a call, and what it offers: every argument on a
/// line of its own, each cut on its own; `[a]lways` only when none was cut.
fn call_question<'a>(req: &'a CallApprovalRequest<'a>) -> (String, Offered<'a>) {
    let shown = ShownArguments::of(req.args);
    let offered = Offered {
        always: shown.complete(),
        scopes: req.scopes,
    };
    let arguments: String = shown
        .lines()
        .iter()
        // Safe already (`toolhost_text`), one line each.
        .map(|l| format!("\n    {l}"))
        .collect();
    let narrower: String = req
        .scopes
        .iter()
        .filter_map(|scope| match scope {
            Scope::Directory { directory, .. } => Some(format!(
                " / [d]irectory {} always",
                printable(&directory.display().to_string())
            )),
            Scope::Host { host, .. } => {
                Some(format!(" / [h]ost {} always", printable(&host.to_string())))
            }
            _ => None,
        })
        .collect();
    let always = if offered.always {
        " / [a]lways with these arguments"
    } else {
        ""
    };
    let cut = if offered.always {
        ""
    } else {
        "\n  (some arguments are too long to show whole: they cannot be allowed always)"
    };
    let question = format!(
        "\n? {} ({}) wants to run with{arguments}{cut}\n  because: {}\n  allow? [y]es once{always}{narrower} / [t]his tool always, any arguments / [n]o, optionally followed by a message for the model / [s]top the run: ",
        printable(req.tool),
        printable(req.plugin),
        printable(&req.reasons.join("; "))
    );
    (question, offered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a question with every argument shown whole offers.
    fn all(scopes: &[Scope]) -> Offered<'_> {
        Offered {
            always: true,
            scopes,
        }
    }

    #[test]
    fn a_long_argument_leaves_the_others_in_view_and_always_is_not_offered() {
        let args = serde_json::json!({"content": "x".repeat(50_000), "path": "secret/key.txt"});
        let req = CallApprovalRequest {
            tool: "write_file",
            plugin: "fs",
            digest: "sha256:test",
            args: &args,
            reasons: &[],
            session_id: None,
            agent: None,
            scopes: &[],
        };
        let (question, offered) = call_question(&req);
        assert!(
            question.contains("\n    path: \"secret/key.txt\""),
            "{question}"
        );
        assert!(question.contains("cut: 50002 characters"), "{question}");
        assert!(!question.contains("[a]lways"), "{question}");
        assert!(!offered.always);
        assert!(matches!(
            parse_call_answer(Some("a"), offered),
            CallApproval::Deny { .. }
        ));
        assert!(question.chars().count() < 3_000, "bounded");

        let short = serde_json::json!({"path": "notes.txt"});
        let req = CallApprovalRequest {
            args: &short,
            ..req
        };
        let (question, offered) = call_question(&req);
        assert!(
            question.contains("[a]lways with these arguments"),
            "{question}"
        );
        assert_eq!(
            parse_call_answer(Some("a"), offered),
            CallApproval::AllowAlways
        );
    }

    #[test]
    fn call_answers_parse_with_an_optional_message() {
        assert_eq!(
            parse_call_answer(Some("y\n"), all(&[])),
            CallApproval::AllowOnce
        );
        assert_eq!(
            parse_call_answer(Some("Always"), all(&[])),
            CallApproval::AllowAlways
        );
        assert_eq!(
            parse_call_answer(Some("t"), all(&[])),
            CallApproval::AllowTool
        );
        let dir = Scope::Directory {
            argument: "/path".into(),
            directory: "/srv/notes".into(),
        };
        let host = Scope::Host {
            argument: "/url".into(),
            host: "example.com".parse().unwrap(),
        };
        let both = [dir.clone(), host.clone()];
        assert_eq!(
            parse_call_answer(Some("d\n"), all(&both)),
            CallApproval::AllowWithin(dir)
        );
        assert_eq!(
            parse_call_answer(Some("Host"), all(&both)),
            CallApproval::AllowWithin(host)
        );
        // Not offered: a deny.
        assert!(matches!(
            parse_call_answer(Some("h"), all(&both[..1])),
            CallApproval::Deny { .. }
        ));
        assert_eq!(
            parse_call_answer(Some("s enough for today\n"), all(&[])),
            CallApproval::DenyAndStop {
                message: Some("enough for today".into())
            }
        );
        assert_eq!(
            parse_call_answer(Some("stop"), all(&[])),
            CallApproval::DenyAndStop { message: None }
        );
        assert_eq!(
            parse_call_answer(Some("n read the README instead\n"), all(&[])),
            CallApproval::Deny {
                message: Some("read the README instead".into())
            }
        );
        assert_eq!(
            parse_call_answer(Some(""), all(&[])),
            CallApproval::Deny { message: None }
        );
        assert!(matches!(
            parse_call_answer(None, all(&[])),
            CallApproval::Deny { message: Some(m) } if m.contains("no answer")
        ));
    }

    #[test]
    fn a_prompt_reads_one_line_and_leaves_the_rest_and_stops_when_given_up() {
        let (mut user, terminal) = std::os::unix::net::UnixStream::pair().unwrap();
        let gone = AtomicBool::new(false);
        user.write_all(b"first\nsecond\n").unwrap();
        assert_eq!(read_line(&terminal, &gone).as_deref(), Some("first"));
        assert_eq!(
            read_line(&terminal, &gone).as_deref(),
            Some("second"),
            "nothing past the first line was taken"
        );
        // A prompt given up while nobody types returns, and takes nothing.
        gone.store(true, Ordering::Relaxed);
        assert_eq!(read_line(&terminal, &gone), None);
        user.write_all(b"third\n").unwrap();
        gone.store(false, Ordering::Relaxed);
        assert_eq!(read_line(&terminal, &gone).as_deref(), Some("third"));
        drop(user);
        assert_eq!(read_line(&terminal, &gone), None, "end of input");
    }

    #[test]
    fn repeat_answers_parse_and_default_to_stop() {
        assert_eq!(parse_repeat_answer(Some("o")), RepeatAnswer::Once);
        assert_eq!(parse_repeat_answer(Some(" A\n")), RepeatAnswer::Always);
        assert_eq!(parse_repeat_answer(Some("s")), RepeatAnswer::Stop);
        assert_eq!(parse_repeat_answer(Some("whatever")), RepeatAnswer::Stop);
        assert_eq!(parse_repeat_answer(None), RepeatAnswer::Stop);
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
