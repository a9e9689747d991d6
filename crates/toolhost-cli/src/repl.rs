//! The interactive session: line editing, history, slash commands.

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use toolhost_agent::Role;
use toolhost_runtime::{CallContext, Runtime};

use crate::agent::{self, Model};
use crate::sessions::{self, Session, SessionError, Store};
use crate::shown::printable;

use crate::{call_output, tool_listing};

const HELP: &str = "\
Type a message to chat with the model (Ctrl-C stops a turn), or:
  /tools                 list the tools
  /call TOOL [JSON]      call a tool with JSON arguments (default {})
  /details               toggle printing a result's details
  /disable GLOB          switch tools off for this session (the model no longer sees them)
  /enable GLOB           switch them back on
  /reset                 forget the conversation
  /history               show the conversation so far
  /save [NAME]           save the conversation as session NAME (later turns are saved there too)
  /load NAME             continue the saved session NAME
  /sessions              list the saved sessions (name, turns, last update)
  /rerun                 run the last prompt again from the same context, replacing its answer
  /help                  this help
  /quit                  leave (or Ctrl-D)";

/// One parsed line of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Input<'a> {
    Empty,
    Tools,
    Call { tool: &'a str, args: &'a str },
    Details,
    Disable(&'a str),
    Enable(&'a str),
    Reset,
    History,
    Save(&'a str),
    Load(&'a str),
    Sessions,
    Rerun,
    Help,
    Quit,
    Unknown(&'a str),
    Chat(&'a str),
}

/// Parses one line.
pub fn parse(line: &str) -> Input<'_> {
    let line = line.trim();
    if line.is_empty() {
        return Input::Empty;
    }
    let Some(cmd) = line.strip_prefix('/') else {
        return Input::Chat(line);
    };
    let (name, rest) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
    match name {
        "tools" => Input::Tools,
        "call" => {
            let rest = rest.trim();
            let (tool, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            let args = args.trim();
            Input::Call {
                tool,
                args: if args.is_empty() { "{}" } else { args },
            }
        }
        "details" => Input::Details,
        "disable" => Input::Disable(rest.trim()),
        "enable" => Input::Enable(rest.trim()),
        "reset" => Input::Reset,
        "history" => Input::History,
        "save" => Input::Save(rest.trim()),
        "load" => Input::Load(rest.trim()),
        "sessions" => Input::Sessions,
        "rerun" => Input::Rerun,
        "help" | "?" => Input::Help,
        "quit" | "exit" | "q" => Input::Quit,
        other => Input::Unknown(other),
    }
}

/// Where the chat's conversation is saved: the store, and the session's
/// name once it has one (`--session`, `/save NAME`, `/load NAME`).
struct Saving {
    store: Result<Store, SessionError>,
    name: Option<String>,
}

impl Saving {
    fn store(&self) -> Option<&Store> {
        match &self.store {
            Ok(store) => Some(store),
            Err(e) => {
                println!("error: {e}");
                None
            }
        }
    }

    /// Saves `session` under `name` (when given; it becomes the session's
    /// name for later turns) or its current name, with the model's label and
    /// variables. Prints what went wrong; never fails the chat. Whether it
    /// was saved.
    fn save(&mut self, session: &mut Session, model: Option<&Model>, name: Option<&str>) -> bool {
        let Some(name) = name.map(str::to_owned).or_else(|| self.name.clone()) else {
            return false;
        };
        let Some(store) = self.store() else {
            return false;
        };
        if let Err(e) = sessions::validate_name(&name) {
            println!("error: {e}");
            return false;
        }
        session.name.clone_from(&name);
        if let Some(m) = model {
            session.model = Some(m.label.clone());
            let options = m.agent.options();
            session.set_vars(options.vars.snapshot(), options.agent.as_deref());
        }
        match store.save(session) {
            Ok(_) => {
                self.name = Some(name);
                true
            }
            Err(e) => {
                println!("error: the session was not saved: {e}");
                false
            }
        }
    }
}

/// Prints the sessions of `store`: name, turns, last update; a file that
/// cannot be read is flagged with why.
fn print_sessions(store: &Store) {
    match store.list() {
        Ok(list) if list.is_empty() => {
            println!("no saved sessions in {}", store.dir().display());
        }
        Ok(list) => {
            for l in list {
                match l.summary {
                    Ok(s) => println!(
                        "  {:<24} {:>4} turns  updated {}{}",
                        l.name,
                        s.turns,
                        s.updated.format("%Y-%m-%d %H:%M:%S UTC"),
                        s.model
                            .map(|m| format!("  ({})", printable(&m)))
                            .unwrap_or_default()
                    ),
                    Err(e) => {
                        println!("  {:<24} unreadable: {}", l.name, printable(&e.to_string()));
                    }
                }
            }
        }
        Err(e) => println!("error: {e}"),
    }
}

/// Runs one chat turn on the session's conversation + `prompt`, shows its
/// status when it did not complete, and records it in `session`.
fn chat_turn(rt: &tokio::runtime::Runtime, m: &mut Model, session: &mut Session, prompt: &str) {
    let result = rt.block_on(agent::turn(
        &mut m.agent,
        &session.conversation,
        prompt,
        true,
    ));
    println!();
    if let Some(ended) = crate::shown::unfinished(&result) {
        println!("[{ended}]");
    }
    session.push_turn(prompt, &result);
}

/// Runs the session until `/quit` or end of input. With `session`, the
/// saved session of that name is loaded (created when absent; a bad name or
/// an unreadable file stops here, so it is never overwritten) and saved
/// after every turn.
pub fn run(
    rt: &tokio::runtime::Runtime,
    runtime: &Runtime,
    mut model: Option<Model>,
    store: Result<Store, SessionError>,
    session_name: Option<&str>,
) -> anyhow::Result<u8> {
    let mut saving = Saving { store, name: None };
    let mut session = Session::new("", model.as_ref().map(|m| m.label.as_str()));
    if let Some(name) = session_name {
        let store = saving.store.as_ref().map_err(|e| anyhow::anyhow!("{e}"))?;
        session = store.load_or_new(name, model.as_ref().map(|m| m.label.as_str()))?;
        if let Some(m) = &model {
            let options = m.agent.options();
            options
                .vars
                .restore(session.vars_for(options.agent.as_deref()));
        }
        saving.name = Some(name.to_owned());
    }
    let mut editor = DefaultEditor::new()?;
    let history_file = directories::ProjectDirs::from("", "", "toolhost")
        .map(|d| d.data_dir().join("history.txt"));
    if let Some(h) = &history_file {
        let _ = editor.load_history(h);
    }
    let printer = editor
        .create_external_printer()
        .ok()
        .map(|p| Box::new(p) as Box<dyn rustyline::ExternalPrinter + Send>);
    crate::notices::print_plugin_events(rt, runtime, printer);
    let tools = runtime.tools();
    println!(
        "toolhost {} — {} tools loaded. Type /help for commands.",
        env!("CARGO_PKG_VERSION"),
        tools.len()
    );
    match &model {
        Some(m) => println!("Model: {}", m.label),
        None => println!("{}\nTools-only mode: use /call.", agent::no_model_help()),
    }
    if let Some(name) = &saving.name {
        println!("Session {name}: {} turns", session.turns.len());
    }
    let mut show_details = false;
    loop {
        let line = match editor.readline("> ") {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        if !line.trim().is_empty() {
            let _ = editor.add_history_entry(line.as_str());
        }
        match parse(&line) {
            Input::Empty => {}
            Input::Quit => break,
            Input::Help => println!("{HELP}"),
            Input::Details => {
                show_details = !show_details;
                println!("details {}", if show_details { "on" } else { "off" });
            }
            Input::Tools => {
                for t in runtime.offered_tools(None, Some(&agent::SESSION)) {
                    print!("{}", tool_listing::format_tool(&t));
                }
            }
            Input::Disable("") | Input::Enable("") => {
                println!("usage: /disable GLOB, /enable GLOB");
            }
            Input::Disable(glob) => match runtime.disable_tools(&agent::SESSION, glob) {
                Ok(()) => println!("switched off for this session: {glob}"),
                Err(e) => println!("error: {e}"),
            },
            Input::Enable(glob) => match runtime.enable_tools(&agent::SESSION, glob) {
                Ok(()) => println!("switched on again: {glob}"),
                Err(e) => println!("error: {e}"),
            },
            Input::Call { tool: "", .. } => println!("usage: /call TOOL [JSON]"),
            Input::Call { tool, args } => {
                let cx = CallContext::new().session_id(agent::SESSION.as_str());
                match rt.block_on(runtime.call_json(tool, args, cx)) {
                    Ok(r) => {
                        call_output::print_result(&r, show_details, false)?;
                        println!(
                            "({}@{}, {:.2} ms{})",
                            r.plugin,
                            r.plugin_version,
                            r.duration.as_secs_f64() * 1000.0,
                            if r.cached { ", cached" } else { "" }
                        );
                    }
                    Err(e) => println!("error: {e}"),
                }
            }
            Input::Unknown(cmd) => println!("unknown command /{cmd}; type /help"),
            Input::Reset => {
                session.conversation.clear();
                println!("conversation cleared");
            }
            Input::Save(name) => {
                let name = (!name.is_empty()).then_some(name);
                if name.is_none() && saving.name.is_none() {
                    println!("usage: /save NAME");
                } else if saving.save(&mut session, model.as_ref(), name) {
                    println!(
                        "saved session {} ({} turns)",
                        session.name,
                        session.turns.len()
                    );
                }
            }
            Input::Load("") => println!("usage: /load NAME"),
            Input::Load(name) => {
                if let Some(store) = saving.store() {
                    match store.load(name) {
                        Ok(loaded) => {
                            if let Some(m) = &model {
                                let options = m.agent.options();
                                options
                                    .vars
                                    .restore(loaded.vars_for(options.agent.as_deref()));
                            }
                            println!("loaded session {name} ({} turns)", loaded.turns.len());
                            session = loaded;
                            saving.name = Some(name.to_owned());
                        }
                        Err(e) => println!("error: {e}"),
                    }
                }
            }
            Input::Sessions => {
                if let Some(store) = saving.store() {
                    print_sessions(store);
                }
            }
            Input::Rerun => match model.as_mut() {
                None => println!("No model is configured: there is nothing to run again."),
                Some(m) => match session.pop_turn() {
                    None => println!("nothing to run again: no turn since the conversation began"),
                    Some(turn) => {
                        chat_turn(rt, m, &mut session, &turn.prompt);
                        saving.save(&mut session, Some(m), None);
                    }
                },
            },
            Input::History => {
                for m in &session.conversation {
                    let who = match m.role {
                        Role::User => "you",
                        Role::Assistant => "model",
                        Role::System => "system",
                        Role::Tool => "tool",
                    };
                    println!("[{who}] {}", m.content);
                }
            }
            Input::Chat(text) => match model.as_mut() {
                None => {
                    println!("No model is configured (see above). Use /call TOOL JSON, or /help.");
                }
                Some(m) => {
                    chat_turn(rt, m, &mut session, text);
                    saving.save(&mut session, Some(m), None);
                }
            },
        }
    }
    if let Some(h) = &history_file {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = editor.save_history(h);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_parse() {
        assert_eq!(parse("  "), Input::Empty);
        assert_eq!(parse("/tools"), Input::Tools);
        assert_eq!(
            parse("/call calculate {\"expression\": \"1 + 2\"}"),
            Input::Call {
                tool: "calculate",
                args: "{\"expression\": \"1 + 2\"}"
            }
        );
        assert_eq!(
            parse("/call word_count"),
            Input::Call {
                tool: "word_count",
                args: "{}"
            }
        );
        assert_eq!(parse("/quit"), Input::Quit);
        assert_eq!(parse("/disable http_*"), Input::Disable("http_*"));
        assert_eq!(parse("/nope"), Input::Unknown("nope"));
        assert_eq!(parse("/save"), Input::Save(""));
        assert_eq!(parse("/save  notes "), Input::Save("notes"));
        assert_eq!(parse("/load notes"), Input::Load("notes"));
        assert_eq!(parse("/sessions"), Input::Sessions);
        assert_eq!(parse("/rerun"), Input::Rerun);
        assert_eq!(parse("hello"), Input::Chat("hello"));
    }
}
