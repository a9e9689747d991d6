//! Saved sessions: `host chat --session`, `host run --session`, `/save`,
//! `/load`, `/sessions` and `/rerun`, against a fake OpenAI-compatible model.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

/// The `host` binary with the example plugins, its sessions in `sessions`,
/// and, with `port`, the fake model on that port.
fn host_with(sessions: &Path, port: Option<u16>) -> std::process::Command {
    let mut cmd = host(&root().join("target/test-cache"));
    cmd.env("TEST_MODEL_KEY", "test-key")
        .env("TOOLHOST_SESSIONS_DIR", sessions)
        .arg("--plugins")
        .arg(plugins_dir());
    if let Some(port) = port {
        let base = format!("http://127.0.0.1:{port}/v1");
        cmd.args(["--provider", "openai", "--base-url", &base, "--model", "m"])
            .args(["--api-key-env", "TEST_MODEL_KEY"]);
    }
    cmd
}

fn text(answer: &str) -> String {
    openai_sse(&[
        json!({"choices": [{"index": 0, "delta": {"content": answer}, "finish_reason": "stop"}]}),
    ])
}

/// Waits (at most 30 s) until the session file exists with `turns` turns.
fn wait_for_turns(file: &Path, turns: usize) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(bytes) = std::fs::read(file)
            && let Ok(json) = serde_json::from_slice::<Value>(&bytes)
            && json["turns"].as_array().map(Vec::len) == Some(turns)
        {
            return json;
        }
        assert!(
            Instant::now() < deadline,
            "{} never had {turns} turns",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The (role, content) pairs of a request's messages.
fn messages(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_chat_killed_after_a_saved_turn_is_continued_by_run_with_its_conversation() {
    let server = ModelServer::start(|_, body| {
        if body.contains("And of Germany?") {
            text("Berlin.")
        } else {
            text("The capital is Paris.")
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut chat = host_with(dir.path(), Some(server.port));
    chat.args(["chat", "--session", "s"]);
    let mut session = Session::start(chat);
    session.expect("tools loaded");
    session.send("What is the capital of France?");
    session.expect("The capital is Paris.");
    let saved = wait_for_turns(&dir.path().join("s.json"), 1);
    assert_eq!(saved["version"], 1);
    assert_eq!(saved["turns"][0]["status"], "completed");
    // Dropping the session kills the process with SIGKILL: no clean exit.
    drop(session);

    let o = host_with(dir.path(), Some(server.port))
        .args(["run", "--session", "s", "And of Germany?"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "Berlin.");

    let bodies = server.bodies();
    let sent = messages(bodies.last().unwrap());
    let pairs: Vec<(&str, &str)> = sent
        .iter()
        .filter(|(role, _)| role != "system")
        .map(|(r, c)| (r.as_str(), c.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("user", "What is the capital of France?"),
            ("assistant", "The capital is Paris."),
            ("user", "And of Germany?"),
        ]
    );
    let saved = wait_for_turns(&dir.path().join("s.json"), 2);
    assert_eq!(saved["turns"][1]["text"], "Berlin.");
    assert_eq!(saved["conversation"].as_array().unwrap().len(), 4);
}

#[test]
fn a_corrupt_session_file_is_flagged_by_the_listing_and_another_session_still_loads() {
    let server = ModelServer::start(|_, _| text("Hello there."));
    let dir = tempfile::tempdir().unwrap();
    let o = host_with(dir.path(), Some(server.port))
        .args(["run", "--session", "good", "Hi!"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(
        dir.path().join("bad.json"),
        b"{\"version\": 1, \"name\": \"ba",
    )
    .unwrap();

    // No model: the store works in tools-only mode too.
    let mut session = Session::start(host_with(dir.path(), None));
    session.expect("tools loaded");
    session.send("/sessions");
    let bad = session.expect("bad");
    assert!(bad.contains("corrupt") && bad.contains("bad.json"), "{bad}");
    let good = session.expect("good");
    assert!(good.contains("1 turns"), "{good}");
    session.send("/load bad");
    let refused = session.expect("error:");
    assert!(refused.contains("corrupt"), "{refused}");
    session.send("/load good");
    session.expect("loaded session good (1 turns)");
    session.send("/history");
    session.expect("[you] Hi!");
    session.expect("[model] Hello there.");
    // The corrupt file is left as it was, for the user to look at.
    assert_eq!(
        std::fs::read(dir.path().join("bad.json")).unwrap(),
        b"{\"version\": 1, \"name\": \"ba"
    );
}

#[test]
fn a_session_name_that_could_leave_the_directory_is_refused() {
    let server = ModelServer::start(|_, _| text("never asked"));
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("sessions");
    let o = host_with(&dir, Some(server.port))
        .args(["run", "--session", "../x", "Hi!"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("invalid session name"), "{stderr}");
    assert!(server.bodies().is_empty(), "the model is not asked");

    let mut session = Session::start(host_with(&dir, Some(server.port)));
    session.expect("tools loaded");
    session.send("/save ../x");
    let refused = session.expect("error:");
    assert!(refused.contains("invalid session name"), "{refused}");
    session.send("/load ../x");
    let refused = session.expect("error:");
    assert!(refused.contains("invalid session name"), "{refused}");
    drop(session);
    let o = host_with(&dir, Some(server.port))
        .args(["chat", "--session", "a/b"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(!parent.path().join("x.json").exists());
    assert!(!dir.exists(), "nothing was written");
}

#[test]
fn rerun_sends_the_same_context_again_and_replaces_the_last_answer() {
    let server = ModelServer::start(|n, _| match n {
        0 => text("Answer one."),
        1 => text("Answer two."),
        _ => text("Answer two, again."),
    });
    let dir = tempfile::tempdir().unwrap();
    let mut session = Session::start(host_with(dir.path(), Some(server.port)));
    session.expect("tools loaded");
    session.send("/rerun");
    session.expect("nothing to run again");
    session.send("first");
    session.expect("Answer one.");
    session.send("/save r");
    session.expect("saved session r (1 turns)");
    session.send("second");
    session.expect("Answer two.");
    wait_for_turns(&dir.path().join("r.json"), 2);
    session.send("/rerun");
    session.expect("Answer two, again.");

    let bodies = server.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(
        bodies[2]["messages"], bodies[1]["messages"],
        "the same context, the same prompt"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let saved = loop {
        let saved = wait_for_turns(&dir.path().join("r.json"), 2);
        if saved["turns"][1]["text"] == "Answer two, again." || Instant::now() > deadline {
            break saved;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(saved["turns"][1]["text"], "Answer two, again.");
    assert_eq!(saved["turns"][1]["prompt"], "second");
    let conversation: Vec<&str> = saved["conversation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        conversation,
        ["first", "Answer one.", "second", "Answer two, again."]
    );
}

#[test]
fn a_long_chat_is_compacted_to_its_context_window_and_the_session_keeps_the_summary() {
    // Long answers; a summary when asked for one.
    let server = ModelServer::start(|_, body| {
        if body.contains("You summarise conversations") {
            text("Summary: the user asked for facts 0 to 40, one a turn.")
        } else {
            text(&format!(
                "Here is the fact you asked for. {}",
                "Lorem ipsum. ".repeat(40)
            ))
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let mut chat = host_with(dir.path(), Some(server.port));
    chat.args(["--context-window", "2048", "chat", "--session", "long"]);
    let mut session = Session::start(chat);
    session.expect("tools loaded");
    for i in 0..40 {
        session.send(&format!("Tell me fact number {i}."));
        wait_for_turns(&dir.path().join("long.json"), i + 1);
    }
    session.expect("context compacted");
    let saved = wait_for_turns(&dir.path().join("long.json"), 40);
    let first = saved["conversation"][0]["content"].as_str().unwrap();
    assert!(
        first.starts_with("[System-generated summary of the earlier conversation"),
        "{first}"
    );
    assert!(first.contains("facts 0 to 40"), "{first}");
    // Every request stayed inside the window (four characters a token, roughly).
    for body in server.bodies() {
        let chars: usize = messages(&body).iter().map(|(_, c)| c.len()).sum();
        assert!(chars < 2048 * 4, "{chars} characters sent");
    }
}
