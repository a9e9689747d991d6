//! A user-mediated agent loop with the step API: the run pauses when the
//! model proposes tool calls, its state is saved to a file and the process
//! exits; a later process (tomorrow, on another machine) loads the state,
//! applies the user's decision and goes on.
//!
//! ```sh
//! export TOOLHOST_BASE_URL=http://127.0.0.1:8080/v1 TOOLHOST_MODEL=qwen2.5
//! cargo run -p toolhost-agent --example step_resume -- start run.json "What is 17 + 25?"
//! cargo run -p toolhost-agent --example step_resume -- resume run.json approve
//! # or: resume run.json skip "not now"   /   resume run.json edit '{"a": 1, "b": 2}'
//! ```
//!
//! Each command prints the proposed calls (`proposed ID TOOL ARGS`) or the
//! answer (`answer: …`). The tools are native ones (an `add` tool), through
//! the same [`ToolExecutor`] trait the WebAssembly runtime implements.

use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use toolhost_agent::provider::openai::OpenAiCompatible;
use toolhost_agent::{
    Agent, AgentOptions, AgentState, BoxFuture, Decision, Message, StepOutcome, ToolCallInfo,
    ToolExecutor, ToolOutcome, ToolSpec,
};

/// One native tool: `add {a, b}`.
struct Adder;

impl ToolExecutor for Adder {
    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "add".into(),
            description: "Adds two numbers.".into(),
            input_schema: Arc::new(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            })),
            read_only: true,
        }]
    }

    fn call<'a>(
        &'a self,
        _name: &'a str,
        args: Value,
        _info: ToolCallInfo,
    ) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            let (a, b) = (args["a"].as_f64(), args["b"].as_f64());
            match (a, b) {
                (Some(a), Some(b)) => ToolOutcome {
                    output: format!("{}", a + b),
                    details: None,
                    is_error: false,
                    error_kind: None,
                    steps: Vec::new(),
                    cached: false,
                    content: Vec::new(),
                },
                _ => ToolOutcome {
                    output: "a and b must be numbers".into(),
                    details: None,
                    is_error: true,
                    error_kind: Some(toolhost_agent::ErrorKind::ToolInvalidArguments),
                    steps: Vec::new(),
                    cached: false,
                    content: Vec::new(),
                },
            }
        })
    }
}

fn agent() -> anyhow::Result<Agent> {
    let url = std::env::var("TOOLHOST_BASE_URL").context("set TOOLHOST_BASE_URL")?;
    let model = std::env::var("TOOLHOST_MODEL").unwrap_or_else(|_| "local".into());
    let provider = Arc::new(OpenAiCompatible::new(url, model.clone()));
    Ok(Agent::new(provider, Arc::new(Adder)).with_options(AgentOptions::new(model)))
}

/// Steps until the run needs a decision (the state is saved) or ends.
async fn drive(agent: &Agent, mut state: AgentState, file: &str) -> anyhow::Result<()> {
    loop {
        match agent.step(&mut state).await {
            StepOutcome::ToolCalls(calls) => {
                for c in &calls {
                    println!("proposed {} {} {}", c.call_id, c.tool, c.args);
                }
                std::fs::write(file, serde_json::to_vec(&state)?)?;
                println!("saved {file}");
                return Ok(());
            }
            // Results are kept as they are.
            StepOutcome::Results(results) => {
                for r in &results {
                    println!("result {} {}", r.call_id, r.output);
                }
            }
            StepOutcome::Finished(result) => {
                println!("status: {}", result.status);
                println!("answer: {}", result.final_text());
                let _ = std::fs::remove_file(file);
                return Ok(());
            }
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let agent = agent()?;
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["start", file, prompt] => {
            let state = agent.start(vec![Message::user(*prompt)]);
            drive(&agent, state, file).await
        }
        ["resume", file, decision @ ..] => {
            let mut state: AgentState = serde_json::from_slice(
                &std::fs::read(file).with_context(|| format!("reading {file}"))?,
            )?;
            let decision = match decision {
                ["approve"] => Decision::Execute,
                ["skip", reason] => Decision::Skip((*reason).to_owned()),
                ["edit", json] => Decision::EditArguments(serde_json::from_str(json)?),
                _ => bail!("decision: approve | skip REASON | edit JSON"),
            };
            for call in state.proposed() {
                state.decide(&call.call_id, decision.clone())?;
            }
            drive(&agent, state, file).await
        }
        _ => bail!("usage: step_resume start FILE PROMPT | resume FILE DECISION"),
    }
}
