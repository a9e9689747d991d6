//! The final answer (state `FinalAnswer`): one request in which tools cannot
//! be called, after the round limit, a refused doom loop, an empty reply
//! after tool results, or a history too long for the model; asked again with
//! the history as text when the reply holds no answer in words, and answered
//! from the run's results when it still has none (`answer.rs`).

use tracing::{info, warn};

use super::answer::{from_results, not_words};
use super::ctx::Ctx;
use super::result::AnswerSource;
use super::state::{RoundInfo, RunState, State};
use crate::provider::{Completion, FinishReason, ToolChoice};
use crate::status::Status;
use crate::{Message, Role, Usage};

/// Sent (in the request only, not kept in the history) with the forced final
/// request after the round limit.
pub const FINAL_ANSWER_NOTE: &str = "[The tool-call limit for this request has been reached. \
Do not call any more tools: answer now with the information gathered so far, and say what \
is still missing.]";

/// `answer` without [`FINAL_ANSWER_NOTE`] (with or without its brackets),
/// which small models sometimes repeat.
fn without_note(answer: &str) -> String {
    let bare = FINAL_ANSWER_NOTE
        .trim_start_matches('[')
        .trim_end_matches(']');
    if !answer.contains(bare) {
        return answer.to_owned();
    }
    answer
        .replace(FINAL_ANSWER_NOTE, "")
        .replace(bare, "")
        .trim()
        .to_owned()
}

/// Longest tool result kept when a history is rendered as text.
const TEXT_HISTORY_RESULT_CHARS: usize = 4000;

/// How [`history_as_text`] starts: a log the host wrote, so that the model
/// neither takes it for the user's words nor imitates its lines.
const TEXT_HISTORY_HEAD: &str = "[System-generated log of the conversation so far, written by \
the host for reference. It is not a message from the user; do not continue or imitate it.]\n";

/// How the log of [`history_as_text`] ends.
const TEXT_HISTORY_TAIL: &str = "\n[End of the log]\n\n";

/// `messages` as plain text in one user message, for a final answer asked
/// without tools: some models and servers cannot answer a history of tool
/// calls once tools are off. Results are cut at
/// [`TEXT_HISTORY_RESULT_CHARS`].
fn history_as_text(messages: &[Message]) -> Vec<Message> {
    let mut text = String::from(TEXT_HISTORY_HEAD);
    for m in messages {
        match m.role {
            Role::System => {}
            Role::User => text.push_str(&format!("\nUser: {}\n", m.content)),
            Role::Assistant => {
                if !m.content.trim().is_empty() {
                    text.push_str(&format!("\nAssistant: {}\n", m.content));
                }
                for c in &m.tool_calls {
                    text.push_str(&format!(
                        "\nAssistant called the tool `{}` with {}\n",
                        c.name, c.arguments
                    ));
                }
            }
            Role::Tool => {
                let cut: String = m.content.chars().take(TEXT_HISTORY_RESULT_CHARS).collect();
                let more = if cut.len() < m.content.len() {
                    " …"
                } else {
                    ""
                };
                text.push_str(&format!(
                    "\n{}{}{}{cut}{more}\n",
                    super::answer::LOG_RESULT_START,
                    m.tool_name.as_deref().unwrap_or("?"),
                    if m.is_error {
                        super::answer::LOG_ERROR
                    } else {
                        super::answer::LOG_RESULT
                    }
                ));
            }
        }
    }
    text.push_str(TEXT_HISTORY_TAIL);
    text.push_str(FINAL_ANSWER_NOTE);
    vec![Message::user(text)]
}

impl Ctx<'_> {
    /// State `FinalAnswer`: one request in which tools cannot be called.
    /// The definitions are still sent, with `tool_choice: none`: Anthropic
    /// rejects a request whose history holds tool calls but defines no tools.
    /// When the reply has no text (empty, or only tool calls), the same
    /// request goes again without tools, the tool history rendered as text;
    /// when that is empty too, the run's error says so. The run ends with
    /// `status` and `error`, which say why a final answer was asked for.
    pub(super) async fn final_answer(
        &self,
        run: &mut RunState,
        round: u32,
        status: Status,
        mut error: Option<String>,
    ) -> State {
        info!(round, %status, "asking for a final answer");
        let note = Message::user(FINAL_ANSWER_NOTE);
        let tools = self.current_tools(run).offered;
        let nothing = || Completion {
            message: Message::assistant(""),
            finish_reason: FinishReason::Stop,
            usage: Usage::default(),
        };
        // After a round the server could not parse, the same request with
        // tools would fail alike (retries and the prompt protocol included):
        // straight to the history as text below.
        let asked = if run.unparsable {
            Ok(nothing())
        } else {
            self.complete(run, round, &tools, ToolChoice::None, Some(note))
                .await
        };
        let completion = match asked {
            Ok(c) => c,
            // Too long, or a call the server could not parse although none
            // may be made (llama.cpp's HTTP 500): straight to the history as
            // text below, which holds no calls.
            Err(stop) if run.overflowed || (run.unparsable && stop.status == Status::Error) => {
                nothing()
            }
            Err(stop) => return stop.into_state(),
        };
        if !completion.message.tool_calls.is_empty() {
            warn!(
                round,
                "the model asked for tools in the final answer; ignoring the calls"
            );
        }
        let mut completion = completion;
        // A small model may copy the note into its answer (or answer only that).
        completion.message.content = without_note(&completion.message.content);
        let question = super::answer::question(&run.messages).to_owned();
        if let Some(why) = not_words(&completion.message.content, &self.system, &question) {
            info!(
                round,
                reply = why.describe(),
                "the final answer is not an answer in words; asking again with the history as text"
            );
            self.set_aside(round, why);
            let as_text = history_as_text(&run.messages);
            let original = std::mem::replace(&mut run.messages, as_text);
            let plain = self.complete(run, round, &[], ToolChoice::None, None).await;
            run.messages = original;
            let plain = plain.map(|mut c| {
                c.message.content = without_note(&c.message.content);
                let why = not_words(&c.message.content, &self.system, &question);
                (c, why)
            });
            if let Ok((_, Some(why))) = &plain {
                self.set_aside(round, *why);
            }
            match plain {
                Ok((c, None)) => {
                    completion = c;
                }
                Ok(_) | Err(_) => match from_results(&run.history) {
                    // Words from the run's own results, marked as such.
                    Some(text) => {
                        info!(
                            round,
                            "no answer in words from the model; answering from the results"
                        );
                        completion.message.content =
                            super::named_tool::and_withheld(text, &run.withheld);
                        run.answer_source = AnswerSource::Results;
                    }
                    None => {
                        let note = format!(
                            "the model gave {}, with or without tools, and no tool ran",
                            why.describe()
                        );
                        completion.message.content = String::new();
                        error = Some(match error {
                            Some(e) => format!("{e}; {note}"),
                            None => note,
                        });
                    }
                },
            }
        }
        run.text.clone_from(&completion.message.content);
        run.messages
            .push(Message::assistant(completion.message.content));
        self.end_round(
            round,
            RoundInfo {
                usage: completion.usage,
                finish_reason: completion.finish_reason,
            },
            0,
        );
        State::done(status, error)
    }
}
