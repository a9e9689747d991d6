//! Talking to a model: provider selection, one agent turn, and how its
//! events are shown (streamed text on stdout, one line per tool call on stderr).

use std::sync::Arc;

use toolhost_agent::provider::select::{MODEL_SETUP_HELP, NO_PROVIDER_HELP, select_from_env};
use toolhost_agent::{
    Agent, AgentEvent, AgentOptions, AnswerSource, CancellationToken, Message, Provider, Status,
    ToolChainResult, VarStore,
};
use toolhost_runtime::Runtime;

use crate::code_mode::{self, CodeMode};
use crate::settings::{self, ConfigFile};
use crate::shared_flags::Global;

/// This process's session id: the tools a user switches off (`/disable`)
/// stay off for the whole session, for the model and for `/call`.
pub static SESSION: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| format!("cli-{}", std::process::id()));

/// An agent bound to the selected model, and a label for it.
pub struct Model {
    pub agent: Agent,
    pub label: String,
}

/// Selects the provider (flags, then config file, then the environment) and
/// builds the agent over `runtime`, with code mode `code` (as
/// `code_mode::check_loaded` left it). `None`: no model is configured.
pub async fn connect(
    global: &Global,
    file: &ConfigFile,
    runtime: &Runtime,
    code: CodeMode,
    interactive: bool,
) -> anyhow::Result<Option<Model>> {
    let config = settings::provider_config(global, file)?;
    let window = global
        .context_window
        .or(config.as_ref().and_then(|c| c.context_window));
    if window.is_some_and(|w| w < 1024) {
        anyhow::bail!("the context window must be at least 1024 tokens");
    }
    let Some(selected) = select_from_env(config.as_ref()).await? else {
        return Ok(None);
    };
    let label = selected.to_string();
    let provider: Arc<dyn Provider> = Arc::from(selected.provider);
    let mut options = AgentOptions::new(selected.model)
        .max_rounds(global.max_rounds.or(file.max_rounds).unwrap_or(10))
        .vars(Arc::new(VarStore::default()))
        .session_id(SESSION.as_str());
    if let Some(agent) = &global.agent {
        options = options.agent(agent.clone());
    }
    // In the chat, a repeated call is the user's to allow (once, or for the
    // session) or stop; non-interactively the loop refuses it and asks the
    // model for its answer.
    if interactive && !global.yes {
        let prompt = Arc::new(crate::approve::PromptApprover::new(
            global.answers_from_stdin,
        ));
        let always = Arc::new(std::sync::atomic::AtomicBool::new(false));
        options = options.doom_loop_approval(move |doom| {
            let (prompt, always) = (prompt.clone(), always.clone());
            Box::pin(async move {
                use crate::approve::RepeatAnswer;
                use std::sync::atomic::Ordering;
                if always.load(Ordering::Relaxed) {
                    return true;
                }
                match prompt.ask_repeat(&doom).await {
                    RepeatAnswer::Once => true,
                    RepeatAnswer::Always => {
                        always.store(true, Ordering::Relaxed);
                        true
                    }
                    RepeatAnswer::Stop => false,
                }
            })
        });
    }
    if global.run_timeout > 0 {
        options = options.timeout(std::time::Duration::from_secs(global.run_timeout));
    }
    if let Some(tokens) = window {
        options = options.context_window(tokens);
    }
    options = options.tool_search(settings::tool_search(global, file));
    // Model options in layers, the system prompt, request hooks.
    let options = crate::model_options::apply(global, file, options)?;
    // Code mode's program tools: pinned, and with `auto` offered only past
    // the tool search budget (once the model and its window are known).
    let options = code_mode::agent_options(code, options);
    // Plugins' usage rules come from the runtime at each run
    // (`ToolExecutor::usage_rules`), so hot-loaded plugins bring theirs.
    Ok(Some(Model {
        agent: Agent::new(
            provider,
            Arc::new(toolhost_agent_runtime::RuntimeTools::new(runtime.clone())),
        )
        .with_options(options),
        label,
    }))
}

/// The message shown when no model is configured.
pub fn no_model_help() -> &'static str {
    NO_PROVIDER_HELP
}

/// The message `host run` ends with when no model is configured (it has
/// no tools-only mode to fall back on).
pub fn no_model_for_run() -> String {
    format!(
        "`host run` needs a language model, and none is configured. {MODEL_SETUP_HELP} \
         Without a model, `host call TOOL ARGS` runs one tool."
    )
}

use toolhost_text::line as one_line;

/// Shows one event: text streams to stdout, tool calls get one line each on stderr.
pub fn show_event(event: &AgentEvent, stream_text: bool) {
    match event {
        AgentEvent::TextDelta { text, .. } if stream_text => print_now(text),
        AgentEvent::ToolCallRunning { tool, .. } => {
            eprintln!("\n  ⋯ {tool}");
        }
        AgentEvent::ToolCallCompleted {
            tool,
            args,
            output,
            duration_ms,
            cached,
            ..
        } => eprintln!(
            "  ✓ {tool} {} → {} ({duration_ms} ms{})",
            one_line(&args.to_string(), 60),
            one_line(output, 80),
            if *cached { ", cached" } else { "" }
        ),
        AgentEvent::ToolCallError {
            tool,
            output,
            duration_ms,
            ..
        } => eprintln!("  ✗ {tool}: {} ({duration_ms} ms)", one_line(output, 120)),
        AgentEvent::DoomLoopDetected {
            tool,
            repeats,
            cycle,
            ..
        } => {
            if cycle.len() > 1 {
                eprintln!(
                    "  ! {} were called in turn {repeats} times with the same arguments",
                    cycle.join(", then ")
                );
            } else {
                eprintln!("  ! {tool} was called {repeats} times in a row with the same arguments");
            }
        }
        AgentEvent::ToolCallProgress {
            tool,
            message,
            fraction,
            ..
        } => {
            let pct = fraction
                .map(|f| format!(" ({:.0}%)", f * 100.0))
                .unwrap_or_default();
            eprintln!("  … {tool}: {}{pct}", one_line(message, 100));
        }
        AgentEvent::ContextCompacted { compaction: c, .. } => {
            let summary = match (c.summarized_messages, c.summarized_by_model) {
                (0, _) => String::new(),
                (n, true) => format!(", {n} messages summarised"),
                (n, false) => format!(", {n} messages removed"),
            };
            eprintln!(
                "  ~ context compacted: {} tool outputs pruned{summary} ({} → {} of {} tokens)",
                c.pruned_outputs, c.tokens_before, c.tokens_after, c.window
            );
        }
        _ => {}
    }
}

/// How long a turn may go without an event before the host says it is
/// still waiting (for the model, or for a tool).
const QUIET_SPELL: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs one turn on `history` + `prompt`, showing events as they come.
/// Ctrl-C cancels the turn (not the program).
pub async fn turn(
    agent: &mut Agent,
    history: &[Message],
    prompt: &str,
    stream_text: bool,
) -> ToolChainResult {
    let abort = CancellationToken::new();
    let (sink, mut rx) = toolhost_agent::event_channel();
    {
        let o = agent.options_mut();
        o.abort = abort.clone();
        o.events = Some(sink);
    }
    let printer = tokio::spawn(async move {
        let mut held = HeldText::default();
        let started = std::time::Instant::now();
        // The tool running now, if one is: a quiet spell is it, not the model.
        let mut running: Option<String> = None;
        loop {
            let event = match tokio::time::timeout(QUIET_SPELL, rx.recv()).await {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(_) => {
                    let secs = started.elapsed().as_secs();
                    match &running {
                        Some(tool) => eprintln!("  … {tool} is still running ({secs} s)"),
                        None => eprintln!("  … waiting for the model ({secs} s)"),
                    }
                    continue;
                }
            };
            match &event {
                AgentEvent::ToolCallRunning { tool, .. } => running = Some(tool.clone()),
                AgentEvent::ToolCallCompleted { .. } | AgentEvent::ToolCallError { .. } => {
                    running = None;
                }
                _ => {}
            }
            match &event {
                AgentEvent::TextDelta { text, .. } if stream_text => held.push(text),
                AgentEvent::ReplySetAside { reason, .. } if stream_text => held.set_aside(*reason),
                AgentEvent::RoundEnd { .. } => {
                    held.end_round();
                    show_event(&event, stream_text);
                }
                _ => show_event(&event, stream_text),
            }
        }
        held.end_round();
        held.hid_last
    });
    let ctrl_c = {
        let abort = abort.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                abort.cancel();
            }
        })
    };
    let mut messages = history.to_vec();
    messages.push(Message::user(prompt));
    let result = agent.run(messages).await;
    ctrl_c.abort();
    // Dropping the sink ends the printer once it has shown every event.
    agent.options_mut().events = None;
    let hid_last = printer.await.unwrap_or(false);
    // The answer the stream did not show: words held back because they
    // began like protocol text, or the host's answer from the results.
    if stream_text && !result.text.is_empty() {
        let _ = match result.answer_source {
            AnswerSource::Results => crate::stdout::outln!(
                "\n[the model gave no answer in words; from the tool results:]\n{}",
                crate::shown::on_stdout(&result.text)
            ),
            AnswerSource::Host => {
                crate::stdout::outln!("\n[{}]", crate::shown::on_stdout(&result.text))
            }
            AnswerSource::Model if hid_last => {
                crate::stdout::out!("{}", crate::shown::on_stdout(&result.text))
            }
            AnswerSource::Model => Ok(()),
        };
    }
    result
}

/// The streamed text of a round, held back while it begins like protocol
/// text (a call as JSON or tags, which a small model writes instead of an
/// answer) so that the chat never shows it; [`turn`] shows the run's answer
/// in words afterwards.
#[derive(Default)]
struct HeldText {
    /// This round's text so far, until it is known whether to show it.
    pending: String,
    /// `Some(true)`: shown as it comes; `Some(false)`: held back.
    show: Option<bool>,
    /// Whether the last round with text was held back.
    hid_last: bool,
}

impl HeldText {
    fn push(&mut self, text: &str) {
        match self.show {
            Some(true) => print_now(text),
            Some(false) => {}
            None => {
                self.pending.push_str(text);
                let start = self.pending.trim_start();
                if !start.is_empty() {
                    let protocol = start.starts_with(['{', '[', '<']) || start.starts_with("```");
                    self.show = Some(!protocol);
                    if !protocol {
                        print_now(&std::mem::take(&mut self.pending));
                    }
                }
            }
        }
    }

    /// The loop set this round's reply aside: text already shown is marked
    /// as not the answer (a terminal cannot take it back).
    fn set_aside(&mut self, reason: toolhost_agent::SetAside) {
        if self.show == Some(true) {
            let _ = crate::stdout::outln!();
            eprintln!("  ↺ not the answer: {}", reason.describe());
        }
        self.show = None;
        self.pending.clear();
    }

    fn end_round(&mut self) {
        if let Some(show) = self.show.take() {
            self.hid_last = !show;
        }
        self.pending.clear();
    }
}

/// Streamed text, on stdout at once. A closed stdout drops it (the run
/// goes on; its end says how it went).
fn print_now(text: &str) {
    let _ = crate::stdout::out!("{}", crate::shown::on_stdout(text));
}

/// The exit code of a `run`: 0 when the model answered, 1 otherwise.
pub fn exit_code(status: Status) -> u8 {
    match status {
        Status::Completed | Status::MaxRounds => crate::exit::OK,
        Status::Aborted => 130,
        _ => crate::exit::FAILURE,
    }
}
