//! The step API: pauses, decisions, saving and resuming (in this process and
//! in another one, through the `step_resume` example).

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use toolhost_agent::{
    Agent, AgentOptions, AgentState, Decision, ErrorKind, Message, Status, StepError, StepOutcome,
    VarStore,
};
use toolhost_test_support::fake_model::{Answer, context_limited};

use crate::agent_support::*;

fn agent(provider: &Arc<ScriptedProvider>, tools: &Arc<FakeTools>, vars: Arc<VarStore>) -> Agent {
    Agent::new(provider.clone(), tools.clone())
        .with_options(AgentOptions::new("test-model").clock(clock()).vars(vars))
}

fn expect_calls(outcome: StepOutcome) -> Vec<toolhost_agent::ProposedCall> {
    match outcome {
        StepOutcome::ToolCalls(calls) => calls,
        other => panic!("expected proposed calls, got {other:?}"),
    }
}

#[tokio::test]
async fn a_run_pauses_on_proposed_calls_and_results_and_takes_the_decisions() {
    let provider = ScriptedProvider::new(vec![
        calls(&[
            ("c1", "echo", r#"{"x": 1}"#),
            ("c2", "echo", r#"{"x": 2}"#),
            ("c3", "echo", r#"{"x": 3}"#),
            ("c4", "nope", "{}"),
        ]),
        text("done"),
    ]);
    let tools = FakeTools::echo(vec![spec("echo", false)]);
    let vars = Arc::new(VarStore::new());
    let agent = agent(&provider, &tools, vars.clone());
    let mut state = agent.start(vec![Message::user("go")]);

    let proposed = expect_calls(agent.step(&mut state).await);
    assert_eq!(proposed.len(), 4);
    assert_eq!(proposed[0].args, json!({"x": 1}));
    assert!(proposed[0].will_run);
    assert!(!proposed[3].will_run);
    assert!(
        proposed[3]
            .note
            .as_deref()
            .unwrap()
            .contains("unknown tool")
    );
    assert!(tools.recorded().is_empty(), "nothing ran yet");

    state
        .decide("c1", Decision::EditArguments(json!({"x": 10})))
        .unwrap();
    state
        .decide("c2", Decision::Skip("the user said no".into()))
        .unwrap();
    state
        .decide(
            "c3",
            Decision::Supply {
                output: "typed by hand".into(),
                is_error: false,
            },
        )
        .unwrap();
    assert_eq!(
        state.decide("c4", Decision::Execute),
        Err(StepError::CannotRun(
            "c4".into(),
            proposed[3].note.clone().unwrap()
        ))
    );
    assert_eq!(
        state.decide("c9", Decision::Execute),
        Err(StepError::UnknownCall("c9".into()))
    );
    assert!(matches!(
        state.set_result("c1", "x", false),
        Err(StepError::NotWaiting(_))
    ));

    let StepOutcome::Results(results) = agent.step(&mut state).await else {
        panic!("expected results");
    };
    assert_eq!(tools.recorded(), [("echo".to_owned(), json!({"x": 10}))]);
    assert_eq!(results[0].output, r#"echo: {"x":10}"#);
    assert!(results[1].is_error && results[1].output.contains("the user said no"));
    assert_eq!(results[2].output, "typed by hand");
    state.set_result("c1", "redacted", false).unwrap();

    let StepOutcome::Finished(result) = agent.step(&mut state).await else {
        panic!("expected the end");
    };
    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.final_text(), "done");
    let outputs: Vec<&str> = result.history.iter().map(|h| h.output.as_str()).collect();
    assert_eq!(outputs[0], "redacted");
    assert_eq!(result.history[1].error_kind, Some(ErrorKind::NotRun));
    // The model read the decisions, and the replaced result is all its
    // variable holds.
    let sent = &provider.requests()[1].messages;
    assert!(sent.iter().any(|m| m.content == "redacted"));
    let var = result.history[0].var.clone().unwrap();
    assert_eq!(vars.get(&var).unwrap(), "redacted");
    // Stepping a finished run gives its result again.
    assert!(matches!(
        agent.step(&mut state).await,
        StepOutcome::Finished(_)
    ));
    assert!(state.is_finished());
}

#[tokio::test]
async fn a_saved_state_resumes_with_another_agent_and_finishes() {
    let provider = ScriptedProvider::new(vec![call("c1", "echo", r#"{"x": 1}"#), text("the end")]);
    let tools = FakeTools::echo(vec![spec("echo", true)]);
    let first = agent(&provider, &tools, Arc::new(VarStore::new()));
    let mut state = first.start(vec![Message::user("go")]);
    expect_calls(first.step(&mut state).await);
    let saved = serde_json::to_string(&state).unwrap();
    drop((first, state));

    let mut state: AgentState = serde_json::from_str(&saved).unwrap();
    assert_eq!(state.proposed().len(), 1);
    let second = agent(&provider, &tools, Arc::new(VarStore::new()));
    let mut last = None;
    for _ in 0..5 {
        match second.step(&mut state).await {
            StepOutcome::Finished(r) => {
                last = Some(r);
                break;
            }
            StepOutcome::Results(r) => assert_eq!(r[0].output, r#"echo: {"x":1}"#),
            StepOutcome::ToolCalls(c) => panic!("unexpected calls {c:?}"),
        }
    }
    let result = last.expect("finished");
    assert_eq!(result.status, Status::Completed);
    assert_eq!(result.final_text(), "the end");
    assert_eq!(result.history.len(), 1);
    assert_eq!(
        result.stats.rounds, 2,
        "rounds counted across both processes"
    );
}

/// The `step_resume` example, built by `cargo test` next to this binary.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(format!("step_resume{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: `cargo test -p toolhost-agent` builds it",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_step_example_pauses_saves_and_resumes_in_a_new_process() {
    // A model that adds with the tool, then answers with the tool's result.
    let server = context_limited(100_000, |body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        match messages.iter().rev().find(|m| m["role"] == "tool") {
            None => Answer::Call(
                "call_1".into(),
                "add".into(),
                r#"{"a": 17, "b": 25}"#.into(),
            ),
            Some(m) => Answer::Text(format!(
                "The sum is {}.",
                m["content"].as_str().unwrap_or("?")
            )),
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    let run = |args: &[&str]| {
        let out = Command::new(example())
            .args(args)
            .env("TOOLHOST_BASE_URL", server.url("/v1"))
            .env("TOOLHOST_MODEL", "local")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{args:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let file_arg = file.to_str().unwrap();

    let first = tokio::task::block_in_place(|| run(&["start", file_arg, "What is 17 + 25?"]));
    assert!(
        first.contains(r#"proposed call_1 add {"a":17,"b":25}"#),
        "{first}"
    );
    assert!(file.exists(), "the state was saved");
    assert_eq!(server.requests(), 1);

    // A new process edits the arguments and finishes the run.
    let second =
        tokio::task::block_in_place(|| run(&["resume", file_arg, "edit", r#"{"a": 20, "b": 22}"#]));
    assert!(second.contains("result call_1 42"), "{second}");
    assert!(second.contains("answer: The sum is 42."), "{second}");
    assert!(second.contains("status: completed"), "{second}");
    assert!(!file.exists(), "a finished run removes its state");
    assert_eq!(server.requests(), 2);
}
