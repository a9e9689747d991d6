//! Code mode through the public API: the program runner (`run-code`, from
//! `target/code/`) calling the example plugins through contract 0.4.0's
//! `tools` import, each call a call of the program's caller through the
//! whole gate (`call/nested.rs`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use toolhost_runtime::policy::{Policy, Profile, Rule};
use toolhost_runtime::{
    CallContext, CallError, DirGrant, PluginSettings, Runtime, RuntimeBuilder, grants::CallBounds,
    permission::CallApproval,
};

use crate::permissions::Scripted;
use crate::support::{FsScene, fs_scene, plugins_dir, root};

fn builder() -> RuntimeBuilder {
    Runtime::builder()
        .plugin_dir(plugins_dir())
        .plugin_dir(root().join("target/code"))
        .cache_dir(Some(root().join("target/test-cache")))
}

/// `fs` granted the scene's directory, `run-code` granted `call_tools`.
fn granted(builder: RuntimeBuilder, scene: &FsScene, call_tools: &[&str]) -> RuntimeBuilder {
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    let code = PluginSettings {
        call_tools: call_tools.iter().map(|g| (*g).to_owned()).collect(),
        ..PluginSettings::default()
    };
    builder
        .plugin_settings("fs", fs)
        .plugin_settings("run-code", code)
}

async fn run(rt: &Runtime, code: &str, cx: CallContext) -> Result<String, CallError> {
    rt.call("run_code", json!({ "code": code }), cx)
        .await
        .map(|r| r.output)
}

#[tokio::test]
async fn a_program_reads_files_through_the_fs_tool_and_returns_their_word_counts() {
    let scene = fs_scene();
    let notes = scene.granted.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.txt"), "one two three\nfour\n").unwrap();
    std::fs::write(notes.join("b.txt"), "five six\n").unwrap();
    std::fs::write(notes.join("c.txt"), "seven eight nine ten eleven\n").unwrap();
    let rt = granted(builder(), &scene, &["*"]).build().await.unwrap();
    let code = format!(
        "const counts = {{}};\n\
         for (const name of ['a.txt', 'b.txt', 'c.txt']) {{\n\
           const text = await tools.read_file({{ path: `{}/${{name}}` }});\n\
           counts[name] = text.split(/\\s+/).filter(Boolean).length;\n\
         }}\n\
         const [most] = Object.entries(counts).sort(([, a], [, b]) => b - a);\n\
         return {{ counts, most: most[0] }};",
        notes.display()
    );
    let out = run(&rt, &code, CallContext::new()).await.unwrap();
    let value: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        value,
        json!({"counts": {"a.txt": 4, "b.txt": 2, "c.txt": 5}, "most": "c.txt"})
    );
}

#[tokio::test]
async fn a_program_that_calls_a_denied_tool_gets_the_policys_reason() {
    let scene = fs_scene();
    let policy = Policy::builder()
        .rule(Rule::deny("read_file").reason("no reading in this test"))
        .build()
        .unwrap();
    let rt = granted(builder().policy(policy), &scene, &["*"])
        .build()
        .await
        .unwrap();
    let path = scene.granted.join("hello.txt");
    let caught = run(
        &rt,
        &format!(
            "try {{ await tools.read_file({{ path: {path:?} }}); }} catch (e) {{ return `${{e.kind}}|${{e.message}}`; }}",
            path = path.display().to_string()
        ),
        CallContext::new(),
    )
    .await
    .unwrap();
    assert!(caught.starts_with("denied|"), "{caught}");
    assert!(caught.contains("no reading in this test"), "{caught}");
    // Uncaught, the program fails with the call named.
    let err = run(
        &rt,
        &format!(
            "const x = 1;\nreturn await tools.read_file({{ path: {:?} }});",
            path.display().to_string()
        ),
        CallContext::new(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("tools.read_file: denied"), "{text}");
    assert!(text.contains("no reading in this test"), "{text}");
    // A tool the program may see is listed to it; the denied one is not.
    let api = rt
        .call("code_api", json!({}), CallContext::new())
        .await
        .unwrap()
        .output;
    assert!(api.contains("function calculate(args: {"), "{api}");
    assert!(!api.contains("function read_file"), "{api}");
    assert!(!api.contains("function run_code"), "{api}");
}

#[tokio::test]
async fn a_programs_calls_are_made_under_its_callers_profile() {
    let scene = fs_scene();
    let policy = Policy::builder()
        .profile(
            "reader",
            Profile::new().rule(Rule::deny("calculate").reason("readers do not calculate")),
        )
        .build()
        .unwrap();
    let rt = granted(builder().policy(policy), &scene, &["*"])
        .build()
        .await
        .unwrap();
    let code = "return await tools.calculate({ expression: '6*7' });";
    let out = run(&rt, code, CallContext::new()).await.unwrap();
    assert_eq!(out, r#"{"value":42}"#);
    let err = run(&rt, code, CallContext::new().agent("reader"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("readers do not calculate"), "{err}");
}

#[tokio::test]
async fn a_program_cannot_call_the_program_tool_nor_what_its_grant_leaves_out() {
    let scene = fs_scene();
    let rt = granted(builder(), &scene, &["calculate", "run_code"])
        .build()
        .await
        .unwrap();
    let out = run(
        &rt,
        "const kinds = [];\n\
         for (const call of [() => tools.run_code({ code: 'return 1' }), () => tools.word_count({ text: 'a b' })]) {\n\
           try { await call(); kinds.push('ran'); } catch (e) { kinds.push(`${e.kind}: ${e.message}`); }\n\
         }\n\
         return kinds;",
        CallContext::new(),
    )
    .await
    .unwrap();
    let kinds: Vec<String> = serde_json::from_str(&out).unwrap();
    assert!(kinds[0].starts_with("not-granted: "), "{kinds:?}");
    assert!(kinds[0].contains("calls tools itself"), "{kinds:?}");
    assert!(kinds[1].starts_with("not-granted: "), "{kinds:?}");
    assert!(kinds[1].contains("calculate, run_code"), "{kinds:?}");
    let runner = rt
        .plugins()
        .into_iter()
        .find(|p| p.name == "run-code")
        .unwrap();
    assert_eq!(runner.granted.call_tools, ["calculate", "run_code"]);

    // Without a grant, no call at all.
    let rt = builder().build().await.unwrap();
    let err = run(
        &rt,
        "return await tools.calculate({ expression: '1' });",
        CallContext::new(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("not-granted"), "{err}");
    assert!(err.contains("call-tools"), "{err}");
}

#[tokio::test]
async fn the_calls_of_a_program_stop_at_their_bounds() {
    let scene = fs_scene();
    let code = PluginSettings {
        call_tools: vec!["*".into()],
        call_bounds: CallBounds {
            max_calls: 2,
            ..CallBounds::default()
        },
        ..PluginSettings::default()
    };
    let rt = granted(builder(), &scene, &["*"])
        .plugin_settings("run-code", code)
        .build()
        .await
        .unwrap();
    let out = run(
        &rt,
        "const got = [];\n\
         for (let i = 0; i < 3; i++) {\n\
           try { got.push((await tools.calculate({ expression: `${i}+1` })).value); }\n\
           catch (e) { got.push(`${e.kind}: ${e.message}`); }\n\
         }\n\
         return got;",
        CallContext::new(),
    )
    .await
    .unwrap();
    let got: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(got[..2], [json!(1), json!(2)], "{got:?}");
    let third = got[2].as_str().unwrap();
    assert!(third.starts_with("limit: "), "{third}");
    assert!(third.contains("max-calls"), "{third}");

    // The total size of results.
    let code = PluginSettings {
        call_tools: vec!["*".into()],
        call_bounds: CallBounds {
            max_result_bytes: 10,
            ..CallBounds::default()
        },
        ..PluginSettings::default()
    };
    let rt = granted(builder(), &scene, &["*"])
        .plugin_settings("run-code", code)
        .build()
        .await
        .unwrap();
    let path = scene.granted.join("hello.txt").display().to_string();
    let err = run(
        &rt,
        &format!("return await tools.read_file({{ path: {path:?} }});"),
        CallContext::new(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("max-result-bytes"), "{err}");
}

#[tokio::test]
async fn an_ask_from_a_call_inside_a_program_goes_to_the_approver() {
    let scene = fs_scene();
    let policy = Policy::builder()
        .rule(Rule::ask("calculate").reason("check each calculation"))
        .build()
        .unwrap();
    let approver = Scripted::calls(vec![CallApproval::AllowOnce]);
    let rt = granted(
        builder().policy(policy).approver(approver.clone()),
        &scene,
        &["*"],
    )
    .build()
    .await
    .unwrap();
    let out = run(
        &rt,
        "return (await tools.calculate({ expression: '2+3' })).value;",
        CallContext::new(),
    )
    .await
    .unwrap();
    assert_eq!(out, "5");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    assert!(
        approver
            .reasons
            .lock()
            .unwrap()
            .iter()
            .any(|r| r.contains("check each calculation"))
    );
}

#[tokio::test]
async fn a_program_that_loops_forever_is_stopped_and_the_host_keeps_serving() {
    let scene = fs_scene();
    let mut code = PluginSettings::default();
    code.limits.timeout_ms = Some(300);
    let rt = granted(builder(), &scene, &["*"])
        .plugin_settings("run-code", code)
        .build()
        .await
        .unwrap();
    let err = run(&rt, "while (true) {}", CallContext::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("time"), "{err}");
    let out = run(
        &rt,
        "return [1, 2, 3].map((n) => n * 2);",
        CallContext::new(),
    )
    .await
    .unwrap();
    assert_eq!(out, "[2,4,6]");
}

#[tokio::test]
async fn many_programs_at_once_do_not_deadlock_a_small_pool() {
    let scene = fs_scene();
    let rt = granted(
        builder().engine_settings(toolhost_runtime::engine::EngineSettings {
            pool_size: 2,
            ..Default::default()
        }),
        &scene,
        &["*"],
    )
    .build()
    .await
    .unwrap();
    let rt = Arc::new(rt);
    let runs = (0..6).map(|i| {
        let rt = rt.clone();
        async move {
            run(
                &rt,
                &format!("let s = 0; for (let k = 0; k < 3; k++) s += (await tools.calculate({{ expression: '{i}+1' }})).value; return s;"),
                CallContext::new(),
            )
            .await
        }
    });
    let results = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        futures::future::join_all(runs),
    )
    .await
    .expect("the programs finish");
    for (i, r) in results.into_iter().enumerate() {
        assert_eq!(r.unwrap(), ((i + 1) * 3).to_string());
    }
}

/// What the runner's own unit tests prove natively (they are left out of
/// `cargo xtask test`, whose native build of the engine costs minutes),
/// proved here through the wasm the host runs.
#[tokio::test]
async fn a_program_in_modern_javascript_prints_then_returns() {
    let scene = fs_scene();
    let rt = granted(builder(), &scene, &["*"]).build().await.unwrap();
    let out = run(
        &rt,
        "const { a, b: [x, ...rest] } = { a: 1, b: [2, 3, 4] };\n\
         const f = async (n) => n * 2;\n\
         const doubled = await Promise.all(rest.map(f));\n\
         class P { #n = 5; get n() { return this.#n; } }\n\
         const m = new Map([[`k${a}`, new P().n]]);\n\
         console.log('one', 2, { three: 3 });\n\
         return { a, x, doubled, m: m.get('k1'), text: JSON.stringify({ ok: true }) };",
        CallContext::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        "one 2 {\"three\":3}\n{\"a\":1,\"x\":2,\"doubled\":[6,8],\"m\":5,\"text\":\"{\\\"ok\\\":true}\"}"
    );
    let out = run(&rt, "console.log('only printed');", CallContext::new())
        .await
        .unwrap();
    assert_eq!(out, "only printed");
}

#[tokio::test]
async fn an_error_names_the_programs_line_and_the_call_that_failed() {
    let scene = fs_scene();
    let rt = granted(builder(), &scene, &["*"]).build().await.unwrap();
    let err = run(
        &rt,
        "const a = 1;\nconst b = null;\nreturn b.x + a;",
        CallContext::new(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("line 3"), "{err}");
    let err = run(&rt, "const a = 1;\nconst = ;", CallContext::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 2"), "{err}");
    let err = run(
        &rt,
        "const x = 1;\nconst y = await tools.calculate({ expression: '1/' });\nreturn y;",
        CallContext::new(),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("tools.calculate: invalid-arguments"), "{err}");
    assert!(err.contains("line 2"), "{err}");
}

/// Every `execute_tool` span made, in order.
#[derive(Clone, Default)]
struct ToolSpans(Arc<std::sync::Mutex<Vec<ToolSpan>>>);

/// An `execute_tool` span: its tool, and the tools of the `execute_tool`
/// spans above it, innermost first.
#[derive(Debug, PartialEq)]
struct ToolSpan {
    tool: String,
    above: Vec<String>,
}

struct ToolName(String);

impl<S> tracing_subscriber::Layer<S> for ToolSpans
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        cx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct Tool(Option<String>);
        impl tracing::field::Visit for Tool {
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
            fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
                if field.name() == "gen_ai.tool.name" {
                    self.0 = Some(value.to_owned());
                }
            }
        }
        if attrs.metadata().name() != "execute_tool" {
            return;
        }
        let mut tool = Tool(None);
        attrs.record(&mut tool);
        let (Some(tool), Some(span)) = (tool.0, cx.span(id)) else {
            return;
        };
        let above = span
            .scope()
            .skip(1)
            .filter_map(|s| s.extensions().get::<ToolName>().map(|t| t.0.clone()))
            .collect();
        span.extensions_mut().insert(ToolName(tool.clone()));
        self.0.lock().unwrap().push(ToolSpan { tool, above });
    }
}

#[tokio::test]
async fn a_programs_calls_are_traced_as_children_of_its_call() {
    use tracing_subscriber::layer::SubscriberExt;
    // As in `watch.rs`: with a second dispatcher, tracing asks every one.
    let _second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let spans = ToolSpans::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(spans.clone()));
    let scene = fs_scene();
    let rt = granted(builder(), &scene, &["*"]).build().await.unwrap();
    let out = run(
        &rt,
        "const a = await tools.calculate({ expression: '1+1' });\n\
         const b = await tools.calculate({ expression: '2+2' });\n\
         return a.value + b.value;",
        CallContext::new(),
    )
    .await
    .unwrap();
    assert_eq!(out, "6");
    let spans = spans.0.lock().unwrap();
    let span = |tool: &str, above: &[&str]| ToolSpan {
        tool: tool.to_owned(),
        above: above.iter().map(|t| (*t).to_owned()).collect(),
    };
    assert_eq!(
        *spans,
        vec![
            span("run_code", &[]),
            span("calculate", &["run_code"]),
            span("calculate", &["run_code"]),
        ]
    );
}
