//! toolhost plugin `run-code`: runs a JavaScript program whose only way
//! out of its sandbox is calling tools through the host.
//!
//! The program is the body of an `async` function. Inside it, `tools.NAME(args)`
//! calls the tool `NAME` (a `Promise` of its structured result, or of its
//! text when it has none), `tools.search(query)` finds tools, and
//! `console.log` prints. What it returns, and what it printed, is the
//! result. The engine is Boa (pure Rust, built for `wasm32-wasip2` from
//! crates.io); the plugin has no files, network or environment, and the
//! host's limits (time, memory, output) hold as for any plugin.
//!
//! Each `tools.NAME` call goes through the host's whole gate as a call of
//! whoever called `run_code` (contract 0.4.0's `tools` import; the operator
//! grants it with `call-tools = [...]`).

mod engine;

use toolhost_sdk::prelude::*;

/// Runs a JavaScript program that calls tools, and returns what it returns
/// and prints. Write the body of an async function: `await
/// tools.NAME({...})` calls a tool (call `code_api` first for their
/// declarations; `await tools.search("what you need")` finds more), `return`
/// the answer, `console.log` what you want to see. Intermediate results
/// stay in the program: return only what is needed. No files, network or
/// imports: only the tools.
#[derive(Deserialize, JsonSchema)]
struct RunCode {
    /// The program: the body of an async function, e.g.
    /// `const t = await tools.some_tool({ a: 1 }); return t;`.
    code: String,
}

/// The TypeScript declarations of the functions a `run_code` program may
/// call (`tools.NAME(args)`), generated from the tools' schemas. Call it
/// before writing a program.
#[derive(Deserialize, JsonSchema)]
struct CodeApi {
    /// Only the tools that match these words (all when absent).
    #[serde(default)]
    query: Option<String>,
}

fn run_code(_cx: &Context, args: RunCode) -> Result<Output, ToolError> {
    let run = engine::run(&args.code);
    match run.outcome {
        Ok(value) => {
            let text = engine::answer_text(&run.printed, value.as_ref());
            let mut out = Output::new(text);
            if let Some(value) = value {
                out = out.with_details(
                    json!({ "returned": value, "calls": run.calls, "called": run.called }),
                );
            }
            Ok(out)
        }
        Err(message) => {
            let printed = if run.printed.is_empty() {
                String::new()
            } else {
                format!("\nprinted before the error:\n{}", run.printed)
            };
            Err(ToolError::failed(format!("{message}{printed}")))
        }
    }
}

fn code_api(_cx: &Context, args: CodeApi) -> Result<Output, ToolError> {
    let tools = match args.query.as_deref().map(str::trim) {
        Some(q) if !q.is_empty() => toolhost_sdk::tools::search(q, 20),
        _ => toolhost_sdk::tools::list(),
    };
    Ok(Output::new(code_declarations::declarations(&tools)))
}

toolhost_sdk::plugin! {
    tools: [
        run_code(RunCode),
        code_api(CodeApi) read_only,
    ]
}

// Run by hand (`cargo test -p toolhost-plugin-run-code` in `plugins/`), not
// by `cargo xtask test`: a native build of Boa costs minutes there, and the
// runtime's `code_mode` tests prove the same through the built wasm.
#[cfg(test)]
mod tests {
    use super::*;

    fn run(code: &str) -> Result<Output, ToolError> {
        plugin().call(
            &Context::default(),
            "run_code",
            &json!({ "code": code }).to_string(),
        )
    }

    #[test]
    fn plugin_is_valid() {
        plugin().validate().unwrap();
    }

    #[test]
    fn a_program_returns_values_with_modern_syntax() {
        let out = run("const { a, b: [x, ...rest] } = { a: 1, b: [2, 3, 4] };\n\
             const f = async (n) => n * 2;\n\
             const doubled = await Promise.all(rest.map(f));\n\
             return { a, x, doubled, text: JSON.stringify({ ok: true }) };")
        .unwrap();
        assert_eq!(
            out.output(),
            r#"{"a":1,"x":2,"doubled":[6,8],"text":"{\"ok\":true}"}"#
        );
    }

    #[test]
    fn printed_lines_come_before_the_returned_value() {
        let out = run("console.log('one', 2, {three: 3}); return 'done';").unwrap();
        assert_eq!(out.output(), "one 2 {\"three\":3}\ndone");
    }

    #[test]
    fn an_error_names_its_line() {
        let err = run("const a = 1;\nnull.x;\nreturn a;").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = run("const = ;").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }

    #[test]
    fn a_call_outside_the_host_is_refused_as_the_program_sees_it() {
        let err = run("return await tools.read_file({ path: 'a' });").unwrap_err();
        assert!(err.to_string().contains("tools.read_file"), "{err}");
        assert!(err.to_string().contains("not-granted"), "{err}");
        let out = run("try { await tools.read_file({}); } catch (e) { return e.kind; }").unwrap();
        assert_eq!(out.output(), "not-granted");
    }
}
