//! Plain components as tools: a component built with wit-bindgen alone
//! against a WIT world that is not toolhost's (`plugins/fixtures/plain-units`,
//! built by `cargo xtask plugins`, its `plain-units.wit` beside it) is
//! loaded as one tool per exported function, with JSON Schemas derived
//! from the WIT types, descriptions from the WIT's doc comments, results
//! mapped back, and the runtime's checks on the way in.

use serde_json::{Value, json};
use toolhost_runtime::{CallContext, CallError, Runtime, ToolResult};

use crate::support::*;

/// A runtime with the plain fixture (and its WIT).
async fn plain() -> Runtime {
    let tmp = tempfile::tempdir().unwrap();
    let wit = fixtures_dir().join("plain-units.wit");
    assert!(
        wit.is_file(),
        "{} is missing: run `cargo xtask plugins`",
        wit.display()
    );
    copy_plugin(&fixtures_dir(), "plain-units", tmp.path());
    let rt = Runtime::builder()
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_dir(tmp.path())
        .build()
        .await
        .expect("runtime builds");
    assert!(
        rt.load_report().failures.is_empty(),
        "{:?}",
        rt.load_report().failures
    );
    rt
}

async fn call(rt: &Runtime, tool: &str, args: Value) -> Result<ToolResult, CallError> {
    rt.call(tool, args, CallContext::new()).await
}

#[tokio::test]
async fn a_plain_components_functions_are_tools_with_schemas_from_their_wit_types() {
    let rt = plain().await;
    let plugin = rt
        .plugins()
        .into_iter()
        .find(|p| p.name == "plain-units")
        .expect("loaded");
    assert_eq!(
        plugin.api_version,
        semver::Version::new(0, 0, 0),
        "no contract"
    );
    let tools = rt.tools();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["add", "decorate", "mean", "units_convert", "units_parse"]
    );
    let tool = |name: &str| tools.iter().find(|t| t.name == name).unwrap();

    // Descriptions: the WIT's doc comments.
    assert_eq!(
        tool("add").description,
        "Adds two whole numbers (wrapping at the 32-bit range)."
    );
    assert_eq!(
        tool("units_parse").description,
        "Reads \"21.5C\", \"70F\" or \"300K\"; anything else is an error."
    );
    // Schemas: from the types.
    let add = &*tool("add").input_schema;
    assert_eq!(add["required"], json!(["a", "b"]));
    assert_eq!(add["properties"]["a"]["type"], "integer");
    assert_eq!(add["properties"]["a"]["maximum"], json!(i32::MAX));
    let decorate = &*tool("decorate").input_schema;
    assert_eq!(
        decorate["required"],
        json!(["word", "style"]),
        "an option is not required"
    );
    assert_eq!(
        decorate["properties"]["style"]["items"]["enum"],
        json!(["bold", "italic"])
    );
    assert_eq!(
        decorate["properties"]["times"]["anyOf"][1],
        json!({"type": "null"})
    );
    let convert = &*tool("units_convert").input_schema;
    assert_eq!(
        convert["properties"]["reading"]["properties"]["scale"]["enum"],
        json!(["celsius", "fahrenheit", "kelvin"])
    );
    assert_eq!(
        convert["properties"]["reading"]["required"],
        json!(["value", "scale"])
    );
    let mean = &*tool("mean").input_schema;
    let cases = mean["properties"]["readings"]["items"]["oneOf"]
        .as_array()
        .unwrap();
    assert_eq!(cases.len(), 3);
    assert!(cases.contains(&json!({"const": "missing"})), "{cases:?}");
}

#[tokio::test]
async fn each_function_is_called_with_json_and_answers_in_json() {
    let rt = plain().await;
    assert_eq!(
        call(&rt, "add", json!({"a": 2, "b": 3}))
            .await
            .unwrap()
            .output,
        "5"
    );
    let mean = call(
        &rt,
        "mean",
        json!({"readings": [{"celsius": 20.0}, "missing", {"note": "cloudy"}, {"celsius": 23.0}]}),
    )
    .await
    .unwrap();
    assert_eq!(mean.output, "21.5");
    let none = call(&rt, "mean", json!({"readings": ["missing"]}))
        .await
        .unwrap();
    assert_eq!(none.output, "", "none: an empty output");
    let decorated = call(
        &rt,
        "decorate",
        json!({"word": "hi", "style": ["bold", "italic"], "times": 2}),
    )
    .await
    .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&decorated.output).unwrap(),
        json!(["<b><i>hi</i></b><b><i>hi</i></b>", 32])
    );
    let once = call(&rt, "decorate", json!({"word": "x", "style": []}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&once.output).unwrap(),
        json!(["x", 1])
    );
    let converted = call(
        &rt,
        "units_convert",
        json!({"reading": {"value": 212.0, "scale": "fahrenheit"}, "to": "celsius"}),
    )
    .await
    .unwrap();
    assert_eq!(
        converted.structured,
        Some(json!({"value": 100.0, "scale": "celsius"}))
    );
    let parsed = call(&rt, "units_parse", json!({"text": "70F"}))
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&parsed.output).unwrap(),
        json!({"value": 70.0, "scale": "fahrenheit"})
    );
    // `result`'s err fails the call with its message.
    match call(&rt, "units_parse", json!({"text": "warm"})).await {
        Err(CallError::Tool { message, .. }) => assert!(message.contains("no scale"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn arguments_outside_the_wit_types_are_refused_before_anything_runs() {
    let rt = plain().await;
    for (tool, args) in [
        ("add", json!({"a": 1_u64 << 40, "b": 1})),
        ("add", json!({"a": 1})),
        ("decorate", json!({"word": "x", "style": ["underline"]})),
        ("decorate", json!({"word": "x", "style": [], "times": 300})),
        (
            "units_convert",
            json!({"reading": {"value": 1.0, "scale": "rankine"}, "to": "kelvin"}),
        ),
        (
            "units_convert",
            json!({"reading": {"value": 1.0, "scale": "kelvin", "extra": 1}, "to": "kelvin"}),
        ),
        ("mean", json!({"readings": [{"fahrenheit": 1.0}]})),
    ] {
        match call(&rt, tool, args.clone()).await {
            Err(CallError::InvalidArguments { .. } | CallError::Tool { .. }) => {}
            other => panic!("{tool} {args}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn editing_the_wit_beside_a_plain_component_reloads_its_descriptions() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "plain-units", tmp.path());
    let rt = Runtime::builder()
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_dir(tmp.path())
        .watch(true)
        .watch_debounce(std::time::Duration::from_millis(50))
        .build()
        .await
        .expect("runtime builds");
    let mut events = rt.subscribe();
    let wit = tmp.path().join("plain-units.wit");
    let text = std::fs::read_to_string(&wit).unwrap();
    let edited = text.replace(
        "/// Adds two whole numbers (wrapping at the 32-bit range).",
        "/// Sums two integers.",
    );
    assert_ne!(text, edited, "the doc comment is in the WIT");
    std::fs::write(tmp.path().join("wit.part"), &edited).unwrap();
    std::fs::rename(tmp.path().join("wit.part"), &wit).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let event = events.recv().await.expect("the runtime is alive");
            if matches!(&event, toolhost_runtime::load::PluginEvent::Reloaded { plugin, .. } if plugin == "plain-units")
            {
                break;
            }
        }
    })
    .await
    .expect("a reload within 20 s");
    let add = rt.tools().into_iter().find(|t| t.name == "add").unwrap();
    assert_eq!(add.description, "Sums two integers.");
}
