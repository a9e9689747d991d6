//! One run of a program: a fresh Boa context, the `tools` object and
//! `console` bound to the host, the program as the body of an async
//! function, and its jobs run until it settles.
//!
//! What the program prints is kept up to [`MAX_PRINTED`] bytes (the rest is
//! counted); what it returns becomes JSON. A failure names the program's
//! line where the engine knows it, and the tool call that failed.

use std::cell::RefCell;
use std::path::Path;

use boa_engine::{
    Context as JsContext, JsResult, JsString, JsValue, NativeFunction, Source, js_string,
};
use serde_json::{Value, json};

/// The name the program goes by in the engine's stack traces.
const PROGRAM: &str = "program.js";

/// Bytes of printed text kept per run.
pub const MAX_PRINTED: usize = 64 * 1024;

/// The tools, `console` and the wrapper around the program. The program
/// starts on the wrapper's first line, so the engine's line numbers are
/// the program's.
const PRELUDE: &str = r#"
"use strict";
globalThis.console = (() => {
  const show = (v) => typeof v === "string" ? v : (v === undefined ? "undefined" : JSON.stringify(v) ?? String(v));
  const print = (...a) => __toolhost_print(a.map(show).join(" "));
  return { log: print, info: print, warn: print, error: print, debug: print };
})();
globalThis.tools = (() => {
  const call = (name, args) => {
    const r = JSON.parse(__toolhost_call(String(name), JSON.stringify(args ?? {})));
    if (r.error) {
      const e = new Error(`tools.${name}: ${r.error.kind}: ${r.error.message}`);
      e.kind = r.error.kind;
      e.tool = name;
      throw e;
    }
    return r.value;
  };
  const own = {
    call: async (name, args) => call(name, args),
    search: async (query, limit) => JSON.parse(__toolhost_search(String(query), limit ?? 5)),
    list: async () => JSON.parse(__toolhost_list()),
  };
  return new Proxy(own, {
    get(target, name) {
      if (typeof name !== "string" || name === "then") return undefined;
      if (Object.hasOwn(target, name)) return target[name];
      return async (args) => call(name, args);
    },
  });
})();
"#;

thread_local! {
    static RUN: RefCell<State> = RefCell::new(State::default());
}

#[derive(Default)]
struct State {
    printed: String,
    dropped: usize,
    calls: usize,
    called: Vec<Called>,
    settled: Option<Result<Option<Value>, String>>,
}

/// The most calls a run lists in [`Run::called`] (the host's
/// `call-bounds.max-calls` is 64 by default; later calls are counted only).
const MAX_LISTED: usize = 256;

/// The longest tool name a run lists (a name is the program's to write;
/// the host's own names are far shorter).
const MAX_LISTED_NAME: usize = 128;

/// One call a program made, for the result's details.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Called {
    /// The tool's name as the program wrote it (its first
    /// [`MAX_LISTED_NAME`] bytes).
    pub tool: String,
    /// Whether the call gave a result (not an error).
    pub ok: bool,
}

/// What a run gave.
pub struct Run {
    /// What it printed (bounded).
    pub printed: String,
    /// How many tools it called.
    pub calls: usize,
    /// Which, in order (the first [`MAX_LISTED`]).
    pub called: Vec<Called>,
    /// What it returned (`None`: `undefined`), or why it failed.
    pub outcome: Result<Option<Value>, String>,
}

/// Runs `code` as the body of an async function.
pub fn run(code: &str) -> Run {
    RUN.with_borrow_mut(|s| *s = State::default());
    let outcome = run_in_fresh_context(code);
    let state = RUN.with_borrow_mut(std::mem::take);
    let mut printed = state.printed;
    if state.dropped > 0 {
        printed.push_str(&format!(
            "\n… {} more bytes printed (over {MAX_PRINTED})",
            state.dropped
        ));
    }
    Run {
        printed,
        calls: state.calls,
        called: state.called,
        outcome,
    }
}

/// The result's text: what was printed, then what was returned (a string
/// as it is, anything else as JSON).
pub fn answer_text(printed: &str, value: Option<&Value>) -> String {
    let returned = match value {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => Some(v.to_string()),
    };
    match (printed.is_empty(), returned) {
        (true, None) => "(the program returned nothing and printed nothing)".into(),
        (true, Some(r)) => r,
        (false, None) => printed.to_owned(),
        (false, Some(r)) => format!("{printed}\n{r}"),
    }
}

fn run_in_fresh_context(code: &str) -> Result<Option<Value>, String> {
    let mut context = JsContext::default();
    register(&mut context).map_err(|e| format!("the engine did not start: {e}"))?;
    context
        .eval(Source::from_bytes(PRELUDE).with_path(Path::new("prelude.js")))
        .map_err(|e| format!("the engine did not start: {e}"))?;
    let program = format!(
        "(async () => {{{code}\n}})().then((v) => __toolhost_done(v === undefined ? undefined : JSON.stringify(v)), (e) => __toolhost_fail(e instanceof Error ? `${{e.name}}: ${{e.message}}${{e.stack ? \"\\n\" + e.stack : \"\"}}` : `uncaught: ${{JSON.stringify(e) ?? String(e)}}`));"
    );
    if let Err(e) = context.eval(Source::from_bytes(&program).with_path(Path::new(PROGRAM))) {
        return Err(describe_error(&e.to_string()));
    }
    if let Err(e) = context.run_jobs() {
        return Err(describe_error(&e.to_string()));
    }
    RUN.with_borrow_mut(|s| s.settled.take())
        .unwrap_or_else(|| {
            Err("the program did not finish: it waits for a promise that never settles".into())
        })
}

/// An engine error as the model reads it: the message, and the line of the
/// program it happened on when the engine says.
fn describe_error(text: &str) -> String {
    let line = program_line(text);
    let first = text.lines().next().unwrap_or(text).trim();
    match line {
        Some(line) => format!("line {line}: {first}"),
        None => first.to_owned(),
    }
}

/// The program's line in an engine message: from the first stack entry in
/// the program (innermost first: `at name (program.js:LINE:COL)`; the
/// others are the prelude's and the engine's own), else from a syntax
/// error's `line N`.
fn program_line(text: &str) -> Option<usize> {
    for entry in text.lines().skip(1).filter(|l| l.contains(PROGRAM)) {
        let entry = entry.trim().trim_end_matches(')');
        let mut parts = entry.rsplitn(3, ':');
        let (_col, line) = (parts.next(), parts.next());
        if let Some(n) = line.and_then(|l| l.parse().ok()) {
            return Some(n);
        }
    }
    let first = text.lines().next().unwrap_or(text);
    let at = first.find("line ")?;
    let digits: String = first[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn register(context: &mut JsContext) -> JsResult<()> {
    context.register_global_builtin_callable(
        js_string!("__toolhost_print"),
        1,
        NativeFunction::from_fn_ptr(print),
    )?;
    context.register_global_builtin_callable(
        js_string!("__toolhost_call"),
        2,
        NativeFunction::from_fn_ptr(call),
    )?;
    context.register_global_builtin_callable(
        js_string!("__toolhost_search"),
        2,
        NativeFunction::from_fn_ptr(search),
    )?;
    context.register_global_builtin_callable(
        js_string!("__toolhost_list"),
        0,
        NativeFunction::from_fn_ptr(list),
    )?;
    context.register_global_builtin_callable(
        js_string!("__toolhost_done"),
        1,
        NativeFunction::from_fn_ptr(done),
    )?;
    context.register_global_builtin_callable(
        js_string!("__toolhost_fail"),
        1,
        NativeFunction::from_fn_ptr(fail),
    )?;
    Ok(())
}

fn arg_string(args: &[JsValue], i: usize, context: &mut JsContext) -> JsResult<String> {
    match args.get(i) {
        Some(v) => Ok(v.to_string(context)?.to_std_string_escaped()),
        None => Ok(String::new()),
    }
}

fn text(s: &str) -> JsValue {
    JsValue::from(JsString::from(s))
}

fn print(_: &JsValue, args: &[JsValue], context: &mut JsContext) -> JsResult<JsValue> {
    let line = arg_string(args, 0, context)?;
    RUN.with_borrow_mut(|s| {
        let room = MAX_PRINTED.saturating_sub(s.printed.len());
        if line.len() < room {
            if !s.printed.is_empty() {
                s.printed.push('\n');
            }
            s.printed.push_str(&line);
        } else {
            s.dropped = s.dropped.saturating_add(line.len() + 1);
        }
    });
    Ok(JsValue::undefined())
}

fn call(_: &JsValue, args: &[JsValue], context: &mut JsContext) -> JsResult<JsValue> {
    let name = arg_string(args, 0, context)?;
    let json_args = arg_string(args, 1, context)?;
    RUN.with_borrow_mut(|s| s.calls += 1);
    let args: Value = serde_json::from_str(&json_args).unwrap_or(Value::Null);
    let result = toolhost_sdk::tools::call(&name, &args);
    let ok = result.is_ok();
    RUN.with_borrow_mut(|s| {
        if s.called.len() < MAX_LISTED {
            let mut end = name.len().min(MAX_LISTED_NAME);
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            s.called.push(Called {
                tool: name[..end].to_owned(),
                ok,
            });
        }
    });
    let answer = match result {
        Ok(out) => json!({ "value": out.structured.unwrap_or(Value::String(out.output)) }),
        Err(e) => json!({ "error": { "kind": e.kind(), "message": e.message() } }),
    };
    Ok(text(&answer.to_string()))
}

fn tool_json(tool: &toolhost_sdk::tools::ToolInfo) -> Value {
    json!({
        "name": tool.name,
        "description": tool.description,
        "declaration": code_declarations::function(tool).trim(),
    })
}

fn search(_: &JsValue, args: &[JsValue], context: &mut JsContext) -> JsResult<JsValue> {
    let query = arg_string(args, 0, context)?;
    let limit = args
        .get(1)
        .map(|v| v.to_u32(context))
        .transpose()?
        .unwrap_or(5);
    let found: Vec<Value> = toolhost_sdk::tools::search(&query, limit)
        .iter()
        .map(tool_json)
        .collect();
    Ok(text(&Value::Array(found).to_string()))
}

fn list(_: &JsValue, _: &[JsValue], _: &mut JsContext) -> JsResult<JsValue> {
    let all: Vec<Value> = toolhost_sdk::tools::list().iter().map(tool_json).collect();
    Ok(text(&Value::Array(all).to_string()))
}

fn done(_: &JsValue, args: &[JsValue], context: &mut JsContext) -> JsResult<JsValue> {
    let value = match args.first() {
        Some(v) if !v.is_undefined() => {
            let json = v.to_string(context)?.to_std_string_escaped();
            Some(serde_json::from_str(&json).unwrap_or(Value::String(json)))
        }
        _ => None,
    };
    RUN.with_borrow_mut(|s| s.settled = Some(Ok(value)));
    Ok(JsValue::undefined())
}

fn fail(_: &JsValue, args: &[JsValue], context: &mut JsContext) -> JsResult<JsValue> {
    let message = arg_string(args, 0, context)?;
    RUN.with_borrow_mut(|s| s.settled = Some(Err(describe_error(&message))));
    Ok(JsValue::undefined())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_in_a_message_or_a_stack_is_the_line() {
        assert_eq!(program_line("SyntaxError: x at line 3, col 4"), Some(3));
        assert_eq!(
            program_line(
                "Error: x\n    at call (prelude.js:12:5)\n    at <anonymous> (program.js:7:12)"
            ),
            Some(7)
        );
        assert_eq!(program_line("TypeError: x"), None);
    }
}
