//! Tool search: a large catalog reaches the model as `search_tools` and the
//! tools it found; a small one exactly as before; the search sees only what
//! the executor and the filter let through.

use std::sync::Arc;

use serde_json::{Value, json};
use toolhost_agent::tool_search::{SEARCH_TOOLS, ToolSearch, ToolSearchMode};
use toolhost_agent::{Agent, AgentOptions, CompletionRequest, Message, Status, ToolSpec};
use toolhost_test_support::catalog::look_alike_tools;

use crate::agent_support::*;

fn catalog(n: usize) -> Vec<ToolSpec> {
    look_alike_tools(n)
        .into_iter()
        .map(|t| ToolSpec {
            name: t["name"].as_str().unwrap().to_owned(),
            description: t["description"].as_str().unwrap().to_owned(),
            input_schema: Arc::new(t["inputSchema"].clone()),
            read_only: false,
        })
        .collect()
}

fn names(request: &CompletionRequest) -> Vec<&str> {
    request.tools.iter().map(|t| t.name.as_str()).collect()
}

/// Bytes of the tool definitions a request carries.
fn definition_bytes(request: &CompletionRequest) -> usize {
    serde_json::to_vec(&request.tools).unwrap().len()
}

fn run_with(
    provider: &Arc<ScriptedProvider>,
    tools: &Arc<FakeTools>,
    options: AgentOptions,
) -> Agent {
    Agent::new(provider.clone(), tools.clone()).with_options(options.clock(clock()))
}

#[tokio::test]
async fn a_large_catalog_is_searched_and_what_was_found_is_offered_next() {
    let provider = ScriptedProvider::new(vec![
        call(
            "c1",
            SEARCH_TOOLS,
            r#"{"query": "convert money to another currency"}"#,
        ),
        call(
            "c2",
            "convert_currency",
            r#"{"amount": "250", "from": "USD", "to": "EUR"}"#,
        ),
        text("250 USD is about 230 EUR."),
    ]);
    let tools = FakeTools::echo(catalog(300));
    let result = run_with(&provider, &tools, AgentOptions::new("m"))
        .run(vec![Message::user("How much is 250 US dollars in euros?")])
        .await;
    assert_eq!(result.status, Status::Completed, "{:?}", result.error);

    let requests = provider.requests();
    assert_eq!(names(&requests[0]), [SEARCH_TOOLS]);
    let all = {
        let provider = ScriptedProvider::new(vec![text("x")]);
        let off = ToolSearch {
            mode: ToolSearchMode::Off,
            ..ToolSearch::default()
        };
        run_with(&provider, &tools, AgentOptions::new("m").tool_search(off))
            .run(vec![Message::user("x")])
            .await;
        definition_bytes(&provider.requests()[0])
    };
    let first = definition_bytes(&requests[0]);
    assert!(
        first * 10 <= all,
        "the first request carries {first} bytes of definitions, the whole catalog {all}"
    );

    // The search answered with the tool and its parameters, without running
    // anything; the tool was offered in the next request and ran.
    let search = &result.history[0];
    assert_eq!(search.tool, SEARCH_TOOLS);
    assert!(!search.is_error);
    assert!(
        search.output.contains("\"convert_currency\""),
        "{}",
        search.output
    );
    assert!(search.output.contains("\"amount\""), "{}", search.output);
    // Not kept as a variable: a model would only read it again.
    assert!(search.var.is_none(), "{:?}", search.var);
    assert!(names(&requests[1]).contains(&"convert_currency"));
    assert!(names(&requests[1]).contains(&SEARCH_TOOLS));
    assert!(requests[1].tools.len() <= 6, "{:?}", names(&requests[1]));
    let ran: Vec<String> = tools.recorded().into_iter().map(|(n, _)| n).collect();
    assert_eq!(ran, ["convert_currency"]);
}

#[tokio::test]
async fn a_small_catalog_is_offered_whole_as_without_search() {
    let provider = ScriptedProvider::new(vec![text("hi")]);
    let tools = FakeTools::echo(catalog(12));
    run_with(&provider, &tools, AgentOptions::new("m"))
        .run(vec![Message::user("hi")])
        .await;
    let requests = provider.requests();
    assert_eq!(requests[0].tools.len(), 12);
    assert!(!names(&requests[0]).contains(&SEARCH_TOOLS));
}

#[tokio::test]
async fn a_tool_called_by_name_runs_and_pinned_tools_are_always_offered() {
    let provider = ScriptedProvider::new(vec![
        call(
            "c1",
            "send_sms",
            r#"{"phone_number": "1", "message": "hi"}"#,
        ),
        text("sent"),
    ]);
    let tools = FakeTools::echo(catalog(12));
    let on = ToolSearch {
        mode: ToolSearchMode::On,
        pinned: vec!["lookup_*".into()],
        ..ToolSearch::default()
    };
    let result = run_with(&provider, &tools, AgentOptions::new("m").tool_search(on))
        .run(vec![Message::user("text 1 hi")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert!(!result.history[0].is_error, "{}", result.history[0].output);
    let requests = provider.requests();
    assert_eq!(names(&requests[0]), ["lookup_timezone", SEARCH_TOOLS]);
    let mut second = names(&requests[1]);
    second.sort_unstable();
    // read_var too, now that the store holds a result.
    assert_eq!(
        second,
        ["lookup_timezone", "read_var", SEARCH_TOOLS, "send_sms"]
    );
}

#[tokio::test]
async fn the_search_never_shows_or_runs_what_the_filter_hides() {
    let provider = ScriptedProvider::new(vec![
        call(
            "c1",
            SEARCH_TOOLS,
            r#"{"query": "currency exchange rate dollars euros"}"#,
        ),
        call("c2", "convert_currency", r#"{"amount": "1"}"#),
        text("cannot"),
    ]);
    let tools = FakeTools::echo(catalog(300));
    let options = AgentOptions::new("m").tool_filter(|all: &[ToolSpec]| {
        all.iter()
            .filter(|t| t.name != "convert_currency")
            .cloned()
            .collect()
    });
    let result = run_with(&provider, &tools, options)
        .run(vec![Message::user("dollars to euros")])
        .await;
    let search = &result.history[0];
    assert!(
        !search.output.contains("convert_currency"),
        "{}",
        search.output
    );
    assert!(
        !search.output.contains("Converts an amount"),
        "{}",
        search.output
    );
    let refused = &result.history[1];
    assert!(refused.is_error, "{}", refused.output);
    assert!(tools.recorded().is_empty(), "nothing hidden ran");
}

#[tokio::test]
async fn a_malformed_search_is_an_error_the_model_can_fix() {
    let provider = ScriptedProvider::new(vec![
        call("c1", SEARCH_TOOLS, r#"{"limit": 3}"#),
        call(
            "c2",
            SEARCH_TOOLS,
            r#"{"query": "weather forecast", "limit": 1000}"#,
        ),
        text("done"),
    ]);
    let tools = FakeTools::echo(catalog(300));
    let result = run_with(&provider, &tools, AgentOptions::new("m"))
        .run(vec![Message::user("weather?")])
        .await;
    assert!(result.history[0].is_error);
    assert!(result.history[0].output.contains("needs a `query`"));
    let found: Value = {
        let out = &result.history[1].output;
        serde_json::from_str(&out[out.find('[').unwrap()..]).unwrap()
    };
    let found = found.as_array().unwrap();
    assert!(found.len() <= 20, "the limit is bounded: {}", found.len());
    assert_eq!(found[0]["name"], json!("get_weather_forecast"));
}

#[tokio::test]
async fn a_tool_the_policy_takes_away_is_not_found_by_the_next_search() {
    let full = catalog(300);
    let tools = FakeTools::dynamic(
        move |n| {
            full.iter()
                .filter(|t| n == 0 || t.name != "convert_currency")
                .cloned()
                .collect()
        },
        |name, args| Box::pin(async move { ok(format!("{name}: {args}")) }),
    );
    let query = r#"{"query": "convert currency"}"#;
    let provider = ScriptedProvider::new(vec![
        call("c1", SEARCH_TOOLS, query),
        call("c2", SEARCH_TOOLS, query),
        text("done"),
    ]);
    let result = run_with(&provider, &tools, AgentOptions::new("m"))
        .run(vec![Message::user("dollars to euros")])
        .await;
    assert!(result.history[0].output.contains("\"convert_currency\""));
    assert!(
        !result.history[1].output.contains("\"convert_currency\""),
        "{}",
        result.history[1].output
    );
}

#[tokio::test]
async fn a_call_past_the_rounds_bound_neither_searches_nor_offers_its_tool() {
    let provider = ScriptedProvider::new(vec![
        calls(&[
            ("c1", "lookup_timezone", r#"{"city": "Oslo"}"#),
            (
                "c2",
                "send_sms",
                r#"{"phone_number": "1", "message": "hi"}"#,
            ),
            ("c3", SEARCH_TOOLS, r#"{"query": "weather"}"#),
        ]),
        text("done"),
    ]);
    let tools = FakeTools::echo(catalog(12));
    let on = ToolSearch {
        mode: ToolSearchMode::On,
        pinned: vec!["lookup_*".into()],
        ..ToolSearch::default()
    };
    let options = AgentOptions::new("m")
        .tool_search(on)
        .max_calls_per_round(1);
    let result = run_with(&provider, &tools, options)
        .run(vec![Message::user("go")])
        .await;
    assert_eq!(result.status, Status::Completed);
    assert_eq!(tools.recorded().len(), 1, "only the first call ran");
    for skipped in &result.history[1..] {
        assert!(
            skipped.output.contains("a round runs at most 1 calls"),
            "{}",
            skipped.output
        );
    }
    let requests = provider.requests();
    let mut second = names(&requests[1]);
    second.sort_unstable();
    // Neither `send_sms` (named past the bound) nor what the search past the
    // bound would have found is offered.
    assert_eq!(second, ["lookup_timezone", "read_var", SEARCH_TOOLS]);
}
