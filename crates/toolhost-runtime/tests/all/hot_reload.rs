//! Hot reload, plugin versions and the compile cache, through the public API
//! with real files, real file watching and the real plugins.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::{copy_plugin, fixtures_dir, plugins_dir, root};
use serde_json::json;
use tokio::sync::broadcast::Receiver;
use toolhost_runtime::{CallContext, CallError, Runtime, load::PluginEvent};

const DEBOUNCE: Duration = Duration::from_millis(50);

fn watched(dir: &Path) -> toolhost_runtime::RuntimeBuilder {
    Runtime::builder()
        .plugin_dir(dir)
        .cache_dir(Some(root().join("target/test-cache")))
        .watch(true)
        .watch_debounce(DEBOUNCE)
}

/// Writes a manifest for plugin `name` at `version` as `dir/file.toml`.
fn manifest(dir: &Path, file: &str, name: &str, version: &str) {
    std::fs::write(
        dir.join(format!("{file}.toml")),
        format!("name = \"{name}\"\nversion = \"{version}\"\n"),
    )
    .unwrap();
}

/// Waits (at most 20 s) for an event that `want` accepts, skipping others.
async fn next_event(
    events: &mut Receiver<PluginEvent>,
    want: impl Fn(&PluginEvent) -> bool,
) -> PluginEvent {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let event = events.recv().await.expect("the runtime is alive");
            if want(&event) {
                return event;
            }
        }
    })
    .await
    .expect("the expected plugin event did not arrive within 20 s")
}

/// Replaces `dir/name.wasm` (and its manifest) the way a build does: write
/// elsewhere, then rename into place.
fn replace(dir: &Path, name: &str, wasm_from: &Path, manifest_text: Option<&str>) {
    let staged = dir.join(format!("{name}.wasm.part"));
    std::fs::copy(wasm_from, &staged).unwrap();
    if let Some(text) = manifest_text {
        let staged_manifest = dir.join(format!("{name}.toml.part"));
        std::fs::write(&staged_manifest, text).unwrap();
        std::fs::rename(&staged_manifest, dir.join(format!("{name}.toml"))).unwrap();
    }
    std::fs::rename(&staged, dir.join(format!("{name}.wasm"))).unwrap();
}

async fn calculate(rt: &Runtime) -> Result<(String, String), CallError> {
    let r = rt
        .call(
            "calculate",
            json!({"expression": "1+2"}),
            CallContext::new(),
        )
        .await?;
    Ok((r.output, r.plugin_version.to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replacing_a_plugin_under_load_loses_no_call_and_never_mixes_versions() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    manifest(dir.path(), "calc", "calc", "1.0.0");
    let rt = watched(dir.path()).build().await.unwrap();
    let mut events = rt.subscribe();
    assert_eq!(calculate(&rt).await.unwrap(), ("3".into(), "1.0.0".into()));

    let stop = Arc::new(AtomicBool::new(false));
    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (rt, stop) = (rt.clone(), stop.clone());
        callers.spawn(async move {
            let (mut old, mut new) = (0u32, 0u32);
            while !stop.load(Ordering::Relaxed) {
                match calculate(&rt).await {
                    // The old code (calc 1.0.0) or the new one (dup-calc's code, as calc 2.0.0).
                    Ok((out, v)) if out == "3" && v == "1.0.0" => old += 1,
                    Ok((out, v)) if out == "dup" && v == "2.0.0" => new += 1,
                    other => panic!("a call failed or mixed versions: {other:?}"),
                }
            }
            (old, new)
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    replace(
        dir.path(),
        "calc",
        &fixtures_dir().join("dup-calc.wasm"),
        Some("name = \"calc\"\nversion = \"2.0.0\"\n"),
    );
    let event = next_event(&mut events, |e| matches!(e, PluginEvent::Reloaded { .. })).await;
    let PluginEvent::Reloaded {
        plugin, from, to, ..
    } = &event
    else {
        unreachable!()
    };
    assert_eq!(
        (plugin.as_str(), from.to_string(), to.to_string()),
        ("calc", "1.0.0".into(), "2.0.0".into())
    );
    // The next call after the swap runs the new code.
    assert_eq!(
        calculate(&rt).await.unwrap(),
        ("dup".into(), "2.0.0".into())
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut old, mut new) = (0, 0);
    while let Some(counts) = callers.join_next().await {
        let (o, n) = counts.unwrap();
        old += o;
        new += n;
    }
    assert!(old > 0 && new > 0, "old {old}, new {new}");
    let tool = rt
        .tools()
        .into_iter()
        .find(|t| t.name == "calculate")
        .unwrap();
    assert_eq!(tool.plugin_version.to_string(), "2.0.0");
}

#[tokio::test]
async fn a_broken_write_keeps_the_old_version_serving_until_a_good_write_recovers() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let rt = watched(dir.path()).build().await.unwrap();
    let mut events = rt.subscribe();
    let wasm = dir.path().join("calc.wasm");

    // Half-written: the first bytes of a real component.
    let good = std::fs::read(&wasm).unwrap();
    std::fs::write(&wasm, &good[..good.len() / 3]).unwrap();
    let failed = next_event(&mut events, |_| true).await;
    match &failed {
        PluginEvent::Failed { path, kept, .. } => {
            assert_eq!(path.file_name().unwrap(), "calc.wasm");
            assert_eq!(kept.as_deref(), Some("calc@0.1.0"));
        }
        other => panic!("expected a failure, got {other}"),
    }
    assert!(failed.to_string().contains("keeps serving"), "{failed}");
    assert_eq!(
        calculate(&rt).await.unwrap().0,
        "3",
        "the old version serves"
    );
    assert_eq!(rt.load_report().failures.len(), 1);

    // The same broken content again is not reported twice.
    std::fs::write(&wasm, &good[..good.len() / 3]).unwrap();
    // Not a component at all, then a good write.
    tokio::time::sleep(Duration::from_millis(300)).await;
    std::fs::write(&wasm, b"not wasm").unwrap();
    let second = next_event(&mut events, |_| true).await;
    assert!(
        second.to_string().contains("magic number"),
        "the first event after the repeat is the new failure: {second}"
    );
    replace(
        dir.path(),
        "calc",
        &fixtures_dir().join("dup-calc.wasm"),
        None,
    );
    let recovered = next_event(&mut events, |_| true).await;
    assert!(
        matches!(recovered, PluginEvent::Reloaded { .. }),
        "{recovered}"
    );
    assert_eq!(calculate(&rt).await.unwrap().0, "dup");
    assert!(rt.load_report().failures.is_empty());
}

#[tokio::test]
async fn a_describe_trap_or_bad_schema_in_a_new_version_keeps_the_old_one() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let rt = watched(dir.path()).build().await.unwrap();
    let mut events = rt.subscribe();
    for fixture in ["describe-trap", "bad-schema"] {
        replace(
            dir.path(),
            "calc",
            &fixtures_dir().join(format!("{fixture}.wasm")),
            None,
        );
        let event = next_event(&mut events, |_| true).await;
        assert!(
            matches!(&event, PluginEvent::Failed { kept: Some(_), .. }),
            "{fixture}: {event}"
        );
        assert_eq!(calculate(&rt).await.unwrap().0, "3", "{fixture}");
    }
}

#[tokio::test]
async fn removing_adding_and_renaming_files_unloads_and_loads_their_tools() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let rt = watched(dir.path()).build().await.unwrap();
    let mut events = rt.subscribe();

    copy_plugin(&plugins_dir(), "text", dir.path());
    let added = next_event(&mut events, |_| true).await;
    assert!(
        matches!(&added, PluginEvent::Loaded { plugin, .. } if plugin == "text"),
        "{added}"
    );
    assert!(rt.tools().iter().any(|t| t.name == "word_count"));

    std::fs::remove_file(dir.path().join("calc.wasm")).unwrap();
    let removed = next_event(&mut events, |_| true).await;
    assert!(
        matches!(&removed, PluginEvent::Unloaded { plugin, .. } if plugin == "calc"),
        "{removed}"
    );
    assert!(matches!(
        calculate(&rt).await,
        Err(CallError::NotFound { .. })
    ));

    // A rename is a remove plus an add (without its manifest, the name comes from the file).
    std::fs::rename(dir.path().join("text.wasm"), dir.path().join("words.wasm")).unwrap();
    let mut seen = vec![
        next_event(&mut events, |_| true).await,
        next_event(&mut events, |_| true).await,
    ];
    seen.sort_by_key(std::string::ToString::to_string);
    assert!(
        matches!(&seen[0], PluginEvent::Loaded { plugin, .. } if plugin == "words"),
        "{seen:?}"
    );
    assert!(
        matches!(&seen[1], PluginEvent::Unloaded { plugin, .. } if plugin == "text"),
        "{seen:?}"
    );
    let words = rt
        .call(
            "word_count",
            json!({"text": "one two three"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(words.plugin, "words");
}

#[tokio::test]
async fn the_watcher_follows_a_symlinked_plugin_directory() {
    let real = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("plugins");
    std::os::unix::fs::symlink(real.path(), &link).unwrap();
    copy_plugin(&plugins_dir(), "calc", real.path());
    let rt = watched(&link).build().await.unwrap();
    let mut events = rt.subscribe();
    replace(
        real.path(),
        "calc",
        &fixtures_dir().join("dup-calc.wasm"),
        None,
    );
    let event = next_event(&mut events, |_| true).await;
    assert!(matches!(event, PluginEvent::Reloaded { .. }), "{event}");
    assert_eq!(calculate(&rt).await.unwrap().0, "dup");
}

#[tokio::test]
async fn without_watching_changes_wait_for_an_explicit_rescan() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let rt = Runtime::builder()
        .plugin_dir(dir.path())
        .cache_dir(Some(root().join("target/test-cache")))
        .build()
        .await
        .unwrap();
    assert!(!rt.is_watching());
    replace(
        dir.path(),
        "calc",
        &fixtures_dir().join("dup-calc.wasm"),
        None,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(calculate(&rt).await.unwrap().0, "3");
    let events = rt.rescan().await;
    assert!(
        matches!(events.as_slice(), [PluginEvent::Reloaded { .. }]),
        "{events:?}"
    );
    assert_eq!(calculate(&rt).await.unwrap().0, "dup");
    // Nothing changed since: a rescan reports nothing.
    assert!(rt.rescan().await.is_empty());
}

#[tokio::test]
async fn the_highest_version_wins_unless_a_requirement_pins_another() {
    let dir = tempfile::tempdir().unwrap();
    for (file, version) in [
        ("calc-a", "1.0.0"),
        ("calc-b", "1.3.0"),
        ("calc-c", "2.0.0"),
    ] {
        std::fs::copy(
            plugins_dir().join("calc.wasm"),
            dir.path().join(format!("{file}.wasm")),
        )
        .unwrap();
        manifest(dir.path(), file, "calc", version);
    }
    let build = |req: Option<&str>| {
        let mut b = Runtime::builder()
            .plugin_dir(dir.path())
            .cache_dir(Some(root().join("target/test-cache")));
        if let Some(req) = req {
            b = b.require_version("calc", req.parse().unwrap());
        }
        b.build()
    };

    let rt = build(None).await.unwrap();
    let calc = rt.plugins().into_iter().find(|p| p.name == "calc").unwrap();
    assert_eq!(calc.version.to_string(), "2.0.0");
    let why = calc.selection.unwrap();
    assert!(why.contains("highest") && why.contains("1.0.0"), "{why}");
    assert_eq!(rt.plugins().len(), 1, "one version per plugin");
    assert_eq!(
        rt.load_report().warnings.len(),
        2,
        "the two unused versions"
    );

    let rt = build(Some("^1.2")).await.unwrap();
    let calc = rt.plugins().into_iter().find(|p| p.name == "calc").unwrap();
    assert_eq!(calc.version.to_string(), "1.3.0");
    assert!(calc.selection.unwrap().contains("pinned to ^1.2"));
    assert_eq!(calculate(&rt).await.unwrap().1, "1.3.0");

    let rt = build(Some("^3")).await.unwrap();
    assert!(rt.plugins().is_empty());
    let warnings = rt.load_report().warnings.join("\n");
    assert!(
        warnings.contains("no version meets the requirement ^3"),
        "{warnings}"
    );
}

#[tokio::test]
async fn a_new_higher_version_dropped_in_takes_over_and_its_removal_falls_back() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let rt = watched(dir.path()).build().await.unwrap();
    let mut events = rt.subscribe();
    // Named for the plugin (`NAME@VERSION.wasm`): a file named otherwise
    // never displaces `calc.wasm`, whatever its version (trust.rs).
    manifest(dir.path(), "calc@0.2.0", "calc", "0.2.0");
    std::fs::copy(
        fixtures_dir().join("dup-calc.wasm"),
        dir.path().join("calc@0.2.0.wasm"),
    )
    .unwrap();
    next_event(&mut events, |e| matches!(e, PluginEvent::Loaded { .. })).await;
    assert_eq!(
        calculate(&rt).await.unwrap(),
        ("dup".into(), "0.2.0".into())
    );
    std::fs::remove_file(dir.path().join("calc@0.2.0.wasm")).unwrap();
    next_event(&mut events, |e| matches!(e, PluginEvent::Loaded { .. })).await;
    assert_eq!(calculate(&rt).await.unwrap(), ("3".into(), "0.1.0".into()));
}

#[tokio::test]
async fn cache_entries_of_replaced_or_deleted_files_are_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    copy_plugin(&plugins_dir(), "text", dir.path());
    let rt = Runtime::builder()
        .plugin_dir(dir.path())
        .cache_dir(Some(cache.path().to_owned()))
        .cache_grace(Duration::ZERO)
        .build()
        .await
        .unwrap();
    let entries = || {
        let mut names: Vec<String> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".cwasm"))
            .collect();
        names.sort();
        names
    };
    let eventually = |want: usize| async move {
        for _ in 0..100 {
            if entries().len() == want {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("expected {want} cache entries, found {:?}", entries());
    };
    assert_eq!(entries().len(), 2);

    // calc's file now holds other code: the old entry goes, the new one stays.
    replace(
        dir.path(),
        "calc",
        &fixtures_dir().join("dup-calc.wasm"),
        None,
    );
    let before = entries();
    rt.rescan().await;
    eventually(2).await;
    assert_ne!(entries(), before);

    // text's file is deleted: its entry goes.
    std::fs::remove_file(dir.path().join("text.wasm")).unwrap();
    rt.rescan().await;
    eventually(1).await;
}

#[tokio::test]
async fn a_cache_written_by_another_runtime_is_reused_and_a_foreign_entry_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", dir.path());
    let build = || {
        Runtime::builder()
            .plugin_dir(dir.path())
            .cache_dir(Some(cache.path().to_owned()))
            .build()
    };
    // Two runtimes starting at once on an empty cache both load and both write.
    let (a, b) = tokio::join!(build(), build());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.load_report().failures.is_empty() && b.load_report().failures.is_empty());
    assert_eq!(calculate(&a).await.unwrap().0, "3");
    assert_eq!(calculate(&b).await.unwrap().0, "3");
    let third = build().await.unwrap().load_report();
    assert_eq!((third.compiled, third.cache_hits), (0, 1));

    // An entry that another engine wrote under a name this one would never
    // compute is simply never read; garbage left by an interrupted write is ignored.
    std::fs::write(cache.path().join(".tmp-99999-0"), b"half").unwrap();
    let fourth = build().await.unwrap().load_report();
    assert_eq!((fourth.compiled, fourth.cache_hits), (0, 1));
}
