//! Results kept as variables: a large result truncated for the model and
//! paged with `read_var`, a `$var` reference that hands a whole result to
//! the next tool, and a var store that outlives the run.

use std::sync::Arc;

use crate::agent_loop::{agent, options};
use crate::agent_support::*;
use toolhost_agent::{ErrorKind, Message, Status, VarStore};

#[tokio::test]
async fn a_large_result_is_truncated_and_paged_with_read_var() {
    let big: String = (0..3000).map(|i| format!("line {i:04}\n")).collect(); // 30 000 bytes
    let big_for_tool = big.clone();
    let provider = ScriptedProvider::new(vec![
        call("c1", "dump", "{}"),
        call(
            "c2",
            "read_var",
            r#"{"name": "result_1", "offset": 10000, "length": 20}"#,
        ),
        text("read it"),
    ]);
    let tools = FakeTools::new(vec![spec("dump", true)], move |_, _| {
        let out = big_for_tool.clone();
        Box::pin(async move { ok(out) })
    });
    let vars = Arc::new(VarStore::new());
    let opts = options().max_output_bytes(10_000).vars(vars.clone());
    let result = agent(&provider, &tools, opts)
        .run(vec![Message::user("dump")])
        .await;
    assert_eq!(result.status, Status::Completed);

    let requests = provider.requests();
    // read_var is offered only once something is stored.
    let names =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(names(0), ["dump"]);
    assert_eq!(names(1), ["dump", "read_var"]);

    let first = &result.history[0];
    assert_eq!(first.var.as_deref(), Some("result_1"));
    assert!(first.output.len() < 10_400, "{}", first.output.len());
    assert!(first.output.starts_with(&big[..10_000]));
    assert!(
        first.output.contains("result_1"),
        "the note names the variable"
    );
    assert_eq!(vars.get("result_1").as_deref(), Some(big.as_str()));

    let page = &result.history[1];
    assert_eq!(page.tool, "read_var");
    assert!(!page.is_error, "{}", page.output);
    assert!(
        page.output.starts_with(&big[10_000..10_020]),
        "{}",
        page.output
    );
    assert!(page.output.contains("offset=10020"), "{}", page.output);
    assert_eq!(page.var, None, "pages are not stored again");
    assert_eq!(tools.recorded().len(), 1, "read_var is built in");
}

#[tokio::test]
async fn a_shared_var_store_outlives_the_run() {
    let vars = Arc::new(VarStore::new());
    vars.insert("from an earlier turn".to_owned());
    let provider = ScriptedProvider::new(vec![
        call("c1", "read_var", r#"{"name":"result_1"}"#),
        text("ok"),
    ]);
    let tools = FakeTools::echo(vec![]);
    let result = agent(&provider, &tools, options().vars(vars))
        .run(vec![Message::user("what did you find before?")])
        .await;
    let requests = provider.requests();
    assert_eq!(
        requests[0].tools.len(),
        1,
        "read_var offered from the start"
    );
    assert!(
        result.history[0].output.starts_with("from an earlier turn"),
        "{}",
        result.history[0].output
    );
}

#[tokio::test]
async fn a_variable_reference_passes_a_stored_result_to_the_next_tool_without_the_model() {
    let long = "line\n".repeat(10_000);
    let from_fetch = long.clone();
    let tools = FakeTools::new(
        vec![spec("fetch", true), spec("count_lines", true)],
        move |name, args| {
            let long = from_fetch.clone();
            Box::pin(async move {
                match name.as_str() {
                    "fetch" => ok(long),
                    _ => ok(format!(
                        "{} lines",
                        args["text"].as_str().unwrap_or("").lines().count()
                    )),
                }
            })
        },
    );
    let provider = ScriptedProvider::new(vec![
        call("c1", "fetch", "{}"),
        call("c2", "count_lines", r#"{"text": {"$var": "result_1"}}"#),
        call("c3", "count_lines", r#"{"text": {"$var": "result_7"}}"#),
        text("10000 lines."),
    ]);
    let result = agent(&provider, &tools, options().max_output_bytes(1024))
        .run(vec![Message::user("count the lines")])
        .await;
    assert_eq!(result.status, Status::Completed);
    // The second tool got the whole result, which the model only saw cut short.
    let recorded = tools.recorded();
    assert_eq!(recorded[1].1["text"].as_str().unwrap(), long);
    assert!(result.history[0].output.len() < 2048);
    assert_eq!(result.history[1].output, "10000 lines");
    assert_eq!(
        result.history[1].arguments, r#"{"text": {"$var": "result_1"}}"#,
        "the record keeps what the model wrote"
    );
    // An unknown variable is an error the model reads, naming what exists.
    let bad = &result.history[2];
    assert!(bad.is_error);
    assert_eq!(bad.error_kind, Some(ErrorKind::InvalidArguments));
    assert!(
        bad.output.contains("result_7") && bad.output.contains("result_1"),
        "{}",
        bad.output
    );
    assert_eq!(recorded.len(), 2, "the bad call did not run");
    // The system prompt explains references once variables exist.
    let requests = provider.requests();
    assert!(
        requests[2]
            .tools
            .iter()
            .any(|t| t.name == "read_var" && t.description.contains("$var"))
    );
}
