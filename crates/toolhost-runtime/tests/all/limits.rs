//! The runtime under load and at its limits: many concurrent calls, the
//! queue limit, a plugin's instance limit, a reused instance that recovers
//! from a fault, and table, argument-size and extreme manifest limits.

use std::time::Duration;

use serde_json::json;
use toolhost_runtime::{CallContext, CallError, PluginSettings, Runtime, error::SandboxFault};

use crate::runtime::{assert_calc_still_works, examples, runtime_with};
use crate::support::*;

/// Only the `hostile` fixture, with a short timeout and a small memory limit.
async fn hostile() -> Runtime {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "hostile", tmp.path());
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    let mut s = PluginSettings::default();
    s.limits.timeout_ms = Some(300);
    s.limits.memory_mb = Some(32);
    s.limits.max_output_bytes = Some(1024 * 1024);
    let rt = runtime_with(&[tmp.path()], vec![("hostile", s)]).await;
    // The files are loaded; the directory may go.
    drop(tmp);
    rt
}

fn sandbox_fault(e: CallError) -> SandboxFault {
    match e {
        CallError::Sandbox { fault, .. } => fault,
        other => panic!("expected a sandbox fault, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_calls_from_many_tasks_are_all_correct() {
    let rt = examples().await;
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..32u32 {
        let rt = rt.clone();
        tasks.spawn(async move {
            for i in 0..25u32 {
                let r = rt
                    .call(
                        "calculate",
                        json!({"expression": format!("{t} * 1000 + {i}")}),
                        CallContext::new(),
                    )
                    .await
                    .unwrap();
                assert_eq!(r.output, (t * 1000 + i).to_string());
                let words = "w ".repeat((i + 1) as usize);
                let r = rt
                    .call("word_count", json!({"text": words}), CallContext::new())
                    .await
                    .unwrap();
                assert_eq!(r.details.unwrap()["words"], i + 1);
            }
        });
    }
    let mut done = 0;
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
        done += 1;
    }
    assert_eq!(done, 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_queue_limit_are_refused_as_busy() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "hostile", tmp.path());
    let rt = Runtime::builder()
        .plugin_dir(tmp.path())
        .cache_dir(Some(root().join("target/test-cache")))
        .engine_settings(toolhost_runtime::engine::EngineSettings {
            pool_size: 1,
            ..Default::default()
        })
        .max_queued_calls(0)
        .build()
        .await
        .unwrap();
    let slow = {
        let rt = rt.clone();
        tokio::spawn(async move {
            rt.call("sleep", json!({"ms": 2000}), CallContext::new())
                .await
        })
    };
    // Give the slow call time to take the only sandbox slot (nothing else competes).
    tokio::time::sleep(Duration::from_millis(150)).await;
    let refused = rt
        .call("echo", json!({"text": "hi"}), CallContext::new())
        .await
        .unwrap_err();
    assert!(matches!(refused, CallError::Busy { .. }), "{refused:?}");
    assert!(refused.to_string().contains("busy"), "{refused}");
    assert!(
        slow.await.unwrap().is_ok(),
        "the call holding the slot finishes"
    );
    let r = rt
        .call("echo", json!({"text": "hi"}), CallContext::new())
        .await
        .unwrap();
    assert_eq!(r.output, "hi", "the slot is free again");
}

#[tokio::test]
async fn a_reused_instance_serves_many_calls_and_recovers_after_a_fault() {
    let rt = hostile().await;
    let mut instance = rt.reused_instance("hostile").await.unwrap();
    for i in 0..20 {
        let r = instance
            .call("echo", json!({"text": format!("n{i}")}), CallContext::new())
            .await
            .unwrap();
        assert_eq!(r.output, format!("n{i}"));
    }
    let fault = sandbox_fault(
        instance
            .call("panic", json!({"message": "reused"}), CallContext::new())
            .await
            .unwrap_err(),
    );
    assert!(matches!(fault, SandboxFault::Panic { .. }), "{fault:?}");
    let r = instance
        .call("echo", json!({"text": "after"}), CallContext::new())
        .await
        .unwrap();
    assert_eq!(r.output, "after", "a new instance replaced the faulted one");
    // Only this plugin's tools are served by its instance.
    assert!(matches!(
        instance
            .call("calculate", json!({"expression": "1"}), CallContext::new())
            .await,
        Err(CallError::NotFound { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_at_its_instance_limit_is_busy_while_others_run() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "hostile", tmp.path());
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    // The override comes from the plugin's own manifest.
    let manifest = tmp.path().join("hostile.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("\n[limits]\nmax-instances = 1\n");
    std::fs::write(&manifest, text).unwrap();
    let rt = Runtime::builder()
        .plugin_dir(tmp.path())
        .cache_dir(Some(root().join("target/test-cache")))
        .max_queued_calls(0)
        // The probe (`echo`, read-only and idempotent) must reach the
        // instance, not the result cache.
        .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
        .build()
        .await
        .unwrap();
    // Once a slow call holds hostile's only instance, the next call is
    // refused. A probe that runs first takes the instance and the slow call
    // is refused instead: then start again, giving the slow call a longer
    // head start each time (on a loaded 2-core CI runner the spawned task
    // may not have run at all before the first probe).
    let mut attempts = 0u64;
    let (refused, slow) = 'attempt: loop {
        attempts += 1;
        assert!(attempts <= 20, "the slow call never held the instance");
        let slow = {
            let rt = rt.clone();
            tokio::spawn(async move {
                rt.call("sleep", json!({"ms": 3000}), CallContext::new())
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(25 * attempts)).await;
        loop {
            match rt
                .call("echo", json!({"text": "probe"}), CallContext::new())
                .await
            {
                Err(e) => break 'attempt (e, slow),
                Ok(_) if slow.is_finished() => {
                    // The probe won: the slow call must have been refused
                    // as busy, nothing else.
                    let lost = slow.await.unwrap();
                    assert!(matches!(lost, Err(CallError::Busy { .. })), "{lost:?}");
                    break;
                }
                Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    };
    match &refused {
        CallError::Busy {
            instance_limit: Some((plugin, 1)),
            ..
        } => assert_eq!(plugin, "hostile@0.1.0"),
        other => panic!("{other:?}"),
    }
    assert!(
        refused.to_string().contains("`max-instances` = 1"),
        "{refused}"
    );
    // The pool is far from full: another plugin is not held up.
    assert_calc_still_works(&rt).await;
    assert!(!slow.is_finished());

    assert!(slow.await.unwrap().is_ok());
    let r = rt
        .call("echo", json!({"text": "free"}), CallContext::new())
        .await
        .unwrap();
    assert_eq!(r.output, "free", "the instance is free again");
}

#[tokio::test]
async fn a_table_past_its_limit_is_refused_with_the_limit_named() {
    let mut s = PluginSettings::default();
    s.limits.table_elements = Some(1);
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    copy_plugin(&plugins_dir(), "text", tmp.path());
    let rt = runtime_with(&[tmp.path()], vec![("calc", s)]).await;
    // calc's function table is larger than one element: it cannot even start.
    let failure = &rt.load_report().failures;
    assert_eq!(failure.len(), 1, "{failure:?}");
    let message = failure[0].error.to_string();
    assert!(
        message.contains("table limit exceeded") && message.contains("`table-elements` = 1"),
        "{message}"
    );
    // The other plugin, under the default limit, loads and runs.
    let r = rt
        .call("word_count", json!({"text": "a b"}), CallContext::new())
        .await
        .unwrap();
    assert!(r.output.contains('2'), "{}", r.output);
}

#[tokio::test]
async fn arguments_over_their_size_limit_are_refused_with_the_limit_named() {
    let mut s = PluginSettings::default();
    s.limits.max_args_bytes = Some(64);
    let rt = runtime_with(&[&plugins_dir()], vec![("calc", s)]).await;
    let long = format!("1{}", "+1".repeat(40));
    let err = rt
        .call(
            "calculate",
            json!({ "expression": long }),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::InvalidArguments { .. }), "{err:?}");
    assert!(err.to_string().contains("`max-args-bytes`"), "{err}");
    // Under the limit, the same tool runs; other plugins keep the default.
    assert_calc_still_works(&rt).await;
    let text = "word ".repeat(100);
    let r = rt
        .call("word_count", json!({ "text": text }), CallContext::new())
        .await
        .unwrap();
    assert!(r.output.contains("100"), "{}", r.output);
}

#[tokio::test]
async fn extreme_limits_in_a_manifest_do_not_break_the_host() {
    for value in [
        "max-instances = 0",
        "max-instances = 18446744073709551615",
        "timeout-ms = 18446744073709551615",
        "memory-mb = 18446744073709551615",
        "max-log-lines = 0",
    ] {
        let tmp = tempfile::tempdir().unwrap();
        copy_plugin(&plugins_dir(), "calc", tmp.path());
        let manifest = tmp.path().join("calc.toml");
        let text = format!("name = \"calc\"\nversion = \"0.1.0\"\n[limits]\n{value}\n");
        std::fs::write(&manifest, text).unwrap();
        let rt = runtime_with(&[tmp.path()], vec![]).await;
        let failures = &rt.load_report().failures;
        assert!(failures.is_empty(), "{value}: {failures:?}");
        assert_calc_still_works(&rt).await;
    }
}
