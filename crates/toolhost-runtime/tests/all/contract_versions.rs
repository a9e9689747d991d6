//! Contract versions through the runtime's public API: plugins built against
//! `toolhost:plugin@0.1.0`, `@0.2.0`, `@0.3.0` and `@0.4.0` in one runtime, 0.2.0's
//! structured output and its checks, 0.3.0's content blocks and their
//! bounds, and a version the host does not support. Uses the plugins built
//! by `cargo xtask plugins`.

use serde_json::{Value, json};
use toolhost_runtime::{
    CallContext, CallError, LoadError, Runtime, ToolResult, contract::supported_versions,
    error::SandboxFault,
};

use crate::support::*;

fn v(s: &str) -> semver::Version {
    semver::Version::parse(s).unwrap()
}

/// A runtime with `calc` (0.4.0, built with the SDK) and the fixtures named.
async fn with_calc_and(fixtures: &[&str]) -> Runtime {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    for name in fixtures {
        copy_plugin(&fixtures_dir(), name, tmp.path());
    }
    // The files are loaded when `build` returns; the directory may go.
    Runtime::builder()
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_dir(tmp.path())
        .build()
        .await
        .expect("runtime builds")
}

/// Calls `tool` with `args`.
async fn call(rt: &Runtime, tool: &str, args: Value) -> Result<ToolResult, CallError> {
    rt.call(tool, args, CallContext::new()).await
}

#[tokio::test]
async fn plugins_built_against_0_1_0_2_0_3_and_0_4_run_side_by_side() {
    let rt = with_calc_and(&["legacy-v0-1", "legacy-v0-2", "legacy-v0-3"]).await;
    assert!(
        rt.load_report().failures.is_empty(),
        "{:?}",
        rt.load_report().failures
    );
    let api = |name: &str| {
        rt.plugins()
            .into_iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{name} not loaded"))
            .api_version
    };
    assert_eq!(api("legacy-v0-1"), v("0.1.0"));
    assert_eq!(api("legacy-v0-2"), v("0.2.0"));
    assert_eq!(api("legacy-v0-3"), v("0.3.0"));
    assert_eq!(api("calc"), v("0.4.0"));

    let legacy = call(&rt, "legacy_echo", json!({"text": "still here"}))
        .await
        .unwrap();
    assert_eq!(legacy.output, "still here");
    assert_eq!(legacy.details, Some(json!({"length": 10})));
    assert_eq!(legacy.structured, None, "0.1.0 has no structured output");
    assert!(legacy.content.is_empty(), "nor content blocks");
    assert_eq!(legacy.plugin, "legacy-v0-1");

    let measured = call(&rt, "legacy_measure", json!({"text": "héllo"}))
        .await
        .unwrap();
    assert_eq!(measured.output, "5 characters");
    assert_eq!(measured.structured, Some(json!({"chars": 5})));
    assert!(measured.content.is_empty(), "0.2.0 has no content blocks");
    let blocks = call(&rt, "legacy3_measure", json!({"text": "héllo"}))
        .await
        .unwrap();
    assert_eq!(blocks.structured, Some(json!({"chars": 5})));
    assert_eq!(
        serde_json::to_value(&blocks.content).unwrap(),
        json!([{"type": "text", "text": "5 characters"}]),
        "0.3.0's content blocks"
    );
    let calc = call(&rt, "calculate", json!({"expression": "6*7"})).await;
    assert_eq!(calc.unwrap().output, "42");

    // The 0.1.0 plugin's arguments are still validated by the host.
    let err = call(&rt, "legacy_echo", json!({"text": 7}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::InvalidArguments { .. }), "{err:?}");
}

#[tokio::test]
async fn structured_output_comes_back_parsed_and_its_schema_is_listed() {
    let rt = with_calc_and(&["legacy-v0-1"]).await;
    let tools = rt.tools();
    let tool = |name: &str| tools.iter().find(|t| t.name == name).unwrap();
    let schema = tool("calculate")
        .output_schema
        .clone()
        .expect("calculate declares an output schema");
    assert_eq!(schema["type"], "object");
    assert_eq!(schema["properties"]["value"]["type"], "number");
    assert_eq!(schema["required"], json!(["value"]));
    assert!(tool("legacy_echo").output_schema.is_none());

    let result = call(&rt, "calculate", json!({"expression": "1/4"}))
        .await
        .unwrap();
    assert_eq!(result.output, "0.25");
    assert_eq!(result.structured, Some(json!({"value": 0.25})));
    assert_eq!(
        result.details,
        Some(json!({"expression": "1/4", "value": 0.25}))
    );
    let serialized = serde_json::to_value(&result).unwrap();
    assert_eq!(serialized["structured"], json!({"value": 0.25}));
}

#[tokio::test]
async fn structured_output_that_breaks_its_schema_or_is_not_json_is_refused() {
    let rt = with_calc_and(&["hostile"]).await;
    let fault = |err: CallError| match err {
        CallError::Sandbox { fault, .. } => fault,
        other => panic!("expected a sandbox fault, got {other:?}"),
    };

    let err = call(&rt, "off_schema", json!({})).await.unwrap_err();
    let message = err.to_string();
    match fault(err) {
        SandboxFault::StructuredMismatch { path, message } => {
            assert_eq!(path, "/count");
            assert!(message.contains("integer"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(message.contains("output schema at /count"), "{message}");

    let err = call(&rt, "bad_structured", json!({})).await.unwrap_err();
    match fault(err) {
        SandboxFault::InvalidStructured { message } => assert!(!message.is_empty()),
        other => panic!("{other:?}"),
    }

    // The plugin and the host keep serving.
    let echo = call(&rt, "echo", json!({"text": "ok"})).await.unwrap();
    assert_eq!(echo.output, "ok");
}

#[tokio::test]
async fn an_unsupported_version_is_refused_naming_it_and_every_supported_one() {
    assert_eq!(
        supported_versions(),
        vec![v("0.4.0"), v("0.3.0"), v("0.2.0"), v("0.1.0")]
    );
    let rt = with_calc_and(&["future-abi", "legacy-v0-1"]).await;
    let report = rt.load_report();
    assert_eq!(report.failures.len(), 1, "{:?}", report.failures);
    let failure = &report.failures[0];
    assert_eq!(failure.path.file_name().unwrap(), "future-abi.wasm");
    let message = failure.error.to_string();
    match &failure.error {
        LoadError::UnsupportedVersion { found, supported } => {
            assert_eq!(found, "9.0.0");
            assert!(supported.contains("toolhost:plugin@0.1.0"), "{supported}");
            assert!(supported.contains("toolhost:plugin@0.2.0"), "{supported}");
            assert!(supported.contains("toolhost:plugin@0.3.0"), "{supported}");
            assert!(supported.contains("toolhost:plugin@0.4.0"), "{supported}");
        }
        other => panic!("{other:?}"),
    }
    assert!(message.contains("toolhost:plugin@9.0.0"), "{message}");
    // The others load regardless.
    assert_eq!(rt.plugins().len(), 2);
}

/// A runtime with the `chart` example plugin, under `limits`.
async fn chart(limits: toolhost_runtime::Limits) -> Runtime {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "chart", tmp.path());
    Runtime::builder()
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_dir(tmp.path())
        .limits(limits)
        .build()
        .await
        .expect("runtime builds")
}

#[tokio::test]
async fn a_0_3_plugins_image_comes_back_as_an_image_block_after_its_text() {
    let rt = chart(Default::default()).await;
    let result = call(
        &rt,
        "bar_chart",
        json!({"values": [3, 1, 4], "width": 64, "height": 48}),
    )
    .await
    .unwrap();
    assert_eq!(
        result.output,
        "A bar chart of 3 values, from 1 to 4: a 64×48 PNG image."
    );
    assert_eq!(result.content.len(), 2);
    assert_eq!(result.content[0].as_text(), Some(result.output.as_str()));
    let toolhost_content::Content::Image(image) = &result.content[1] else {
        panic!("{:?}", result.content[1])
    };
    assert_eq!(image.mime_type, "image/png");
    let png = toolhost_content::media::decode(&image.data, 1 << 20).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "the bytes, base64-encoded by the host"
    );
    assert!(toolhost_content::media::for_model(image, 1 << 20).is_ok());
    assert_eq!(result.details.unwrap()["bytes"], png.len());
}

#[tokio::test]
async fn content_over_the_output_limit_is_refused_as_a_sandbox_fault() {
    let limits = toolhost_runtime::Limits {
        max_output_bytes: 300,
        ..Default::default()
    };
    let rt = chart(limits).await;
    let err = call(
        &rt,
        "bar_chart",
        json!({"values": [1, 2, 3, 4, 5, 6, 7, 8]}),
    )
    .await
    .unwrap_err();
    match &err {
        CallError::Sandbox {
            fault:
                SandboxFault::Content(toolhost_content::ContentError::BlockTooLarge {
                    index,
                    kind,
                    limit,
                    ..
                }),
            ..
        } => {
            assert_eq!((*index, *kind, *limit), (1, "image", 300));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("max-output-bytes"), "{err}");
}
