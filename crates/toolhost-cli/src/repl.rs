//! The interactive session: line editing, history, slash commands.

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use toolhost_agent::{Message, Role, compact_history};
use toolhost_runtime::{CallContext, Runtime};

use crate::chat::{self, Model};

use crate::commands;

const HELP: &str = "\
Type a message to chat with the model (Ctrl-C stops a turn), or:
  /tools                 list the tools
  /call TOOL [JSON]      call a tool with JSON arguments (default {})
  /details               toggle printing a result's details
  /disable GLOB          switch tools off for this session (the model no longer sees them)
  /enable GLOB           switch them back on
  /reset                 forget the conversation
  /history               show the conversation so far
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
        "help" | "?" => Input::Help,
        "quit" | "exit" | "q" => Input::Quit,
        other => Input::Unknown(other),
    }
}

/// Runs the session until `/quit` or end of input.
pub fn run(
    rt: &tokio::runtime::Runtime,
    runtime: &Runtime,
    mut model: Option<Model>,
) -> anyhow::Result<u8> {
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
        None => println!("{}\nTools-only mode: use /call.", chat::no_model_help()),
    }
    let mut show_details = false;
    let mut history: Vec<Message> = Vec::new();
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
                for t in runtime.offered_tools(None, Some(&chat::SESSION)) {
                    print!("{}", commands::format_tool(&t));
                }
            }
            Input::Disable("") | Input::Enable("") => {
                println!("usage: /disable GLOB, /enable GLOB");
            }
            Input::Disable(glob) => match runtime.disable_tools(&chat::SESSION, glob) {
                Ok(()) => println!("switched off for this session: {glob}"),
                Err(e) => println!("error: {e}"),
            },
            Input::Enable(glob) => match runtime.enable_tools(&chat::SESSION, glob) {
                Ok(()) => println!("switched on again: {glob}"),
                Err(e) => println!("error: {e}"),
            },
            Input::Call { tool: "", .. } => println!("usage: /call TOOL [JSON]"),
            Input::Call { tool, args } => {
                let cx = CallContext::new().session_id(chat::SESSION.as_str());
                match rt.block_on(runtime.call_json(tool, args, cx)) {
                    Ok(r) => {
                        commands::print_result(&r, show_details, false)?;
                        println!(
                            "({}@{}, {:.2} ms)",
                            r.plugin,
                            r.plugin_version,
                            r.duration.as_secs_f64() * 1000.0
                        );
                    }
                    Err(e) => println!("error: {e}"),
                }
            }
            Input::Unknown(cmd) => println!("unknown command /{cmd}; type /help"),
            Input::Reset => {
                history.clear();
                println!("conversation cleared");
            }
            Input::History => {
                for m in &history {
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
                    let result = rt.block_on(chat::turn(&mut m.agent, &history, text, true));
                    println!();
                    if result.status != toolhost_agent::Status::Completed {
                        println!(
                            "[{}{}]",
                            result.status,
                            result
                                .error
                                .as_deref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default()
                        );
                    }
                    history.push(Message::user(text));
                    history.push(compact_history(&result));
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
        assert_eq!(parse("hello"), Input::Chat("hello"));
    }
}
